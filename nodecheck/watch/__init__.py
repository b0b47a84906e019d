"""nodecheck watch: sample a running job's nodes from outside and tell progress from a hang.

config.py (settings, YAML with file:line errors), probe.py (the one-round-trip sample script),
parsers/watch_sample.py (its output → facts), classify.py (facts over time → one verdict per tick)
are pure or build argv only. target.py (the job's nodes and Slurm state now), alerts.py (hook and
HTTP POST), state.py (the state on disk), incident.py (records), onhang.py (--on-hang) and
command.py (the loop) do the rest; transport/kept.py keeps the SSH sessions between ticks.
"""
