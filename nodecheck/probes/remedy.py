"""What remediation runs on a node: one action (behind the idle guard), and the evidence it
collects before the first action of an incident. The scripts are fixed; the values travel as
arguments (quoted by the transport), and each was checked against a strict pattern before
(nodecheck.remedy.act): a GPU index or PCI bus id, a unit name the ladder file gave.

The action script runs the idle guard first (nodecheck.probes.idle): a Slurm job step, a job
allocated here or a GPU process refuses the action (`@@nodecheck refuse <why>`), which is then not
taken. nvidia-smi -r itself also refuses a GPU in use, and, on an NVSwitch system where the GPU
cannot be reset alone (Ampere without Fabric Manager), names the GPUs that must be reset with it:
the action then fails, and the ladder goes on.
"""

from __future__ import annotations

from nodecheck.core.model import Probe
from nodecheck.probes.idle import IDLE_GUARD

ACTION_TIMEOUT_S = {"reset_gpu": 120.0, "restart_service": 120.0}
GUARD_S = 40.0  # squeue 5 s, nvidia-smi 15 s, pgrep: the guard's own bounds, with room
OUTPUT_CAP = 64 * 1024  # what an action prints: a line or two; the rest is noise

# $1: reset_gpu | restart_service, $2: the GPU or the unit, $3: the action's own timeout (s)
_ACTION_SCRIPT = (
    r"""
what=$1 target=$2 t=$3
"""
    + IDLE_GUARD
    + r"""
case $what in
  reset_gpu) out=$(timeout -k 10 "$t" nvidia-smi -r -i "$target" 2>&1); rc=$? ;;
  restart_service) out=$(timeout -k 10 "$t" systemctl restart -- "$target" 2>&1); rc=$? ;;
  *) out="unknown action $what"; rc=64 ;;
esac
echo "@@nodecheck begin action"
printf '%s\n' "$out" | head -c """
    + str(OUTPUT_CAP)
    + r"""
echo "@@nodecheck end action rc=$rc"
"""
)


def action_probe(action: str, target: str) -> Probe:
    """The node step for reset_gpu / restart_service: the guard, then the tool under its own
    timeout; the tool's exit code is the `action` section's rc."""
    t = ACTION_TIMEOUT_S[action]
    return Probe(
        f"remedy-{action}",
        ("sh", "-c", _ACTION_SCRIPT, "nodecheck-remedy", action, target, f"{t:g}"),
        timeout_s=t + GUARD_S + 20,
    )


# $1: seconds for nvidia-bug-report.sh (0: do not run it), $2: 1 = fabric evidence (ibstat, perfquery)
_EVIDENCE_SCRIPT = r"""
nbr_t=$1 fabric=$2
echo "@@nodecheck begin dmesg"
timeout 30 dmesg 2>&1 | tail -c 4194304
echo "@@nodecheck end dmesg rc=0"
if [ "$fabric" = 1 ]; then
  for tool in ibstat perfquery; do
    echo "@@nodecheck begin $tool"
    if command -v "$tool" >/dev/null 2>&1; then timeout 30 "$tool" 2>&1 | head -c 1048576; fi
    echo "@@nodecheck end $tool rc=0"
  done
fi
if [ "$nbr_t" != 0 ]; then
  if command -v nvidia-bug-report.sh >/dev/null 2>&1; then
    d=$(mktemp -d 2>/dev/null) || { echo "@@nodecheck nvidia_bug_report mktemp failed"; exit 0; }
    trap 'rm -rf "$d"' EXIT
    timeout -k 10 "$nbr_t" nvidia-bug-report.sh --output-file "$d/nvidia-bug-report.log" >"$d/out" 2>&1
    echo "@@nodecheck nvidia_bug_report_rc $?"
    echo "@@nodecheck begin nvidia-bug-report"
    [ -f "$d/nvidia-bug-report.log.gz" ] && base64 "$d/nvidia-bug-report.log.gz" | head -c 10485760
    echo "@@nodecheck end nvidia-bug-report rc=0"
  else
    echo "@@nodecheck nvidia_bug_report missing"
  fi
fi
"""


def evidence_probe(bug_report_s: float, fabric: bool) -> Probe:
    return Probe(
        "remedy-evidence",
        ("sh", "-c", _EVIDENCE_SCRIPT, "nodecheck-evidence", f"{bug_report_s:g}", "1" if fabric else "0"),
        timeout_s=bug_report_s + 120,
    )
