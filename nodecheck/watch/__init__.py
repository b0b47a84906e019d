"""nodecheck watch: sample a running job's nodes from outside and tell progress from a hang.

config.py (settings, YAML with file:line errors), probe.py (the one-round-trip sample script),
parsers/watch_sample.py (its output → facts), classify.py (facts over time → one verdict per tick)
are pure or build argv only; alerts, state, incident records and the loop live in command.py and
its helpers.
"""
