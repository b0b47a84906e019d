"""The shell guard a disruptive step runs first on its node: is anybody using this node?

It refuses (prints `@@nodecheck refuse <reason>` and exits 0) when a Slurm job step runs here
(slurmstepd), when the script itself runs inside a Slurm job ($SLURM_JOB_ID), when slurmd runs and
squeue lists jobs allocated to this node, or when nvidia-smi lists GPU compute processes. Each refusal
fails closed: a tool that is there but cannot answer (squeue timing out, nvidia-smi failing) is no
proof the node is idle. Without pgrep it cannot tell at all: it exits 69 with the reason on stderr.
Jobs run only where slurmd does: without it, an installed squeue that cannot reach a controller says
nothing about this node, so squeue is asked only where slurmd runs.

Inside the allocation nodecheck runs in for the test (`--slurm-job`: the sweep's own job that
`sweep --slurm-submit` holds the nodes with), that job's own steps, its $SLURM_JOB_ID and its
allocation do not count: the runner hands the job id to every active step as NODECHECK_OWN_JOB
(OWN_JOB_VARIABLE; digits only, anything else is ignored). Every other job still refuses.

The text is spliced into a probe script where the guard must run (roce.gid_stability's flap,
gpu.dcgm_diag's levels >= 2); it reads no positional parameter and sets no variable the caller uses
(idle_own, idle_steps, idle_jobs, idle_apps only). A caller reads the refusal with `refusal()`.
"""

from __future__ import annotations

from collections.abc import Mapping

REFUSE = "refuse"  # the fact the guard prints: "@@nodecheck refuse <reason>"
NO_PGREP_EXIT = 69  # EX_UNAVAILABLE: the guard cannot tell (it prints its reason on stderr)
OWN_JOB_VARIABLE = "NODECHECK_OWN_JOB"

IDLE_GUARD = r"""
command -v pgrep >/dev/null 2>&1 || { echo "pgrep not found (procps): cannot tell whether jobs run here, refusing" >&2; exit 69; }
idle_own=${NODECHECK_OWN_JOB:-}
case $idle_own in *[!0-9]*) idle_own= ;; esac
if pgrep -x slurmstepd >/dev/null 2>&1; then
  [ -n "$idle_own" ] || { echo "@@nodecheck refuse a Slurm job step is running on this node (slurmstepd)"; exit 0; }
  idle_steps=$(pgrep -a -x slurmstepd 2>/dev/null) ||
    { echo "@@nodecheck refuse a Slurm job step is running on this node and pgrep cannot say whose"; exit 0; }
  idle_steps=$(printf '%s
' "$idle_steps" | grep -v -F "[$idle_own.")
  [ -n "$idle_steps" ] && { echo "@@nodecheck refuse a step of another Slurm job is running on this node (slurmstepd)"; exit 0; }
fi
if [ -n "${SLURM_JOB_ID:-}" ] && [ "$SLURM_JOB_ID" != "$idle_own" ]; then
  echo "@@nodecheck refuse inside Slurm job $SLURM_JOB_ID"; exit 0
fi
if pgrep -x slurmd >/dev/null 2>&1; then
  idle_jobs=$(timeout 5 squeue -h -w "$(hostname -s 2>/dev/null || hostname)" -o %i 2>/dev/null) ||
    { echo "@@nodecheck refuse slurmd runs here and squeue cannot tell whether jobs are allocated (it failed or timed out)"; exit 0; }
  [ -n "$idle_own" ] && idle_jobs=$(printf '%s
' "$idle_jobs" | grep -v -x -F "$idle_own")
  [ -n "$idle_jobs" ] && { echo "@@nodecheck refuse Slurm jobs are allocated on this node: $(echo $idle_jobs | head -c 80)"; exit 0; }
fi
if command -v nvidia-smi >/dev/null 2>&1; then
  idle_apps=$(timeout 15 nvidia-smi --query-compute-apps=pid,process_name --format=csv,noheader 2>/dev/null) ||
    { echo "@@nodecheck refuse cannot tell whether GPU processes run here (nvidia-smi failed or timed out)"; exit 0; }
  [ -n "$idle_apps" ] && { echo "@@nodecheck refuse GPU processes are running: $(echo $idle_apps | head -c 80)"; exit 0; }
fi
"""


def refusal(facts: Mapping[str, str]) -> str | None:
    """Why the guard refused (the probe's `@@nodecheck` facts), or None when it let the step run."""
    return facts.get(REFUSE)
