"""The services probe: the units' state from systemd, or where systemd is not the init system (a
container, the simulated cluster), the processes running in this node's mount namespace; and whether
the node has NVSwitches (nvidia-fabricmanager is needed only then)."""

from __future__ import annotations

import hashlib

from nodecheck.core.model import Probe

SHOW_PROPERTIES = "Id,LoadState,ActiveState,SubState,NRestarts,Result,ActiveEnterTimestamp"

# own_procs NAME...: "PID<TAB>same|other|unknown<TAB>UID<TAB>COMM" for every process whose name
# (/proc/PID/comm, cut to 15 characters by the kernel) is one of NAMEs. "same": in this shell's mount
# namespace, so this node's own: processes of other nodes sharing the PID namespace, or a container's,
# are not its service. `[ A -ef B ]` compares the namespace files' device and inode without a fork per
# process; "unknown": the namespace could not be read (not root: another user's process). UID: the
# owner of /proc/PID (the process's user; "?" when gone): any process may name itself "munged"
# (prctl PR_SET_NAME), so a job's user could otherwise stand in for a stopped daemon. One `stat` per
# process whose name matched, not per process.
PROCS_FUNCTION = r"""
own_procs() {
  for op_d in /proc/[0-9]*; do
    { IFS= read -r op_c < "$op_d/comm"; } 2>/dev/null || continue
    for op_n in "$@"; do
      [ "$op_c" = "$op_n" ] || continue
      if [ "$op_d/ns/mnt" -ef "/proc/$$/ns/mnt" ]; then op_w=same
      elif [ -e "$op_d/ns/mnt" ]; then op_w=other
      else op_w=unknown; fi
      op_u=$(stat -c %u -- "$op_d" 2>/dev/null) || op_u=?
      printf '%s\t%s\t%s\t%s\n' "${op_d#/proc/}" "$op_w" "$op_u" "$op_c"
      break
    done
  done
}
"""

# service_state UNITS NAMES (space-separated words, validated by the caller's params: no blank, comma
# or glob character, so the unquoted expansions split into exactly those words): with systemd as init
# (/run/systemd/system: sd_booted(3)) the units' properties, then the processes of those names (all
# that counts without systemd), then the NVSwitch device nodes (nvidia-modprobe creates
# /dev/nvidia-nvswitchN) and the driver's per-device directories: whether Fabric Manager is needed.
# Shared by the services probe and nvlink.fabric's (probes/nvlink_fabric.py).
SERVICE_STATE_FUNCTION = (
    PROCS_FUNCTION
    + r"""
bounded() { if command -v timeout >/dev/null 2>&1; then timeout 10 "$@"; else "$@"; fi; }
service_state() {
  if [ -d /run/systemd/system ]; then
    echo "@@nodecheck systemd yes"
    if [ -n "$1" ]; then
      if command -v systemctl >/dev/null 2>&1; then
        echo "@@nodecheck begin show"
        bounded systemctl show --no-pager --property=SHOW_PROPERTIES -- $1 2>&1
        echo "@@nodecheck end show rc=$?"
      else
        echo "@@nodecheck no_systemctl systemctl not found, though systemd is the init system"
      fi
    fi
  else
    echo "@@nodecheck systemd no"
  fi
  echo "@@nodecheck begin procs"
  [ -n "$2" ] && own_procs $2
  echo "@@nodecheck end procs rc=0"
  echo "@@nodecheck begin nvswitch"
  for f in /dev/nvidia-nvswitch[0-9]* /proc/driver/nvidia-nvswitch/devices/*; do [ -e "$f" ] && echo "$f"; done
  echo "@@nodecheck end nvswitch rc=0"
}
""".replace("SHOW_PROPERTIES", SHOW_PROPERTIES)
)

# $1: unit names, $2: process names, each comma-separated
SERVICES_SCRIPT = (
    SERVICE_STATE_FUNCTION
    + r"""
service_state "$(echo "$1" | tr , " ")" "$(echo "$2" | tr , " ")"
exit 0
"""
)


def services_probe(units: list[str], process_names: list[str]) -> Probe:
    """The probe for these units and process names; its name differs per argument list (probes are
    shared by name across checks)."""
    args = (",".join(units), ",".join(process_names))
    digest = hashlib.sha256("\0".join(args).encode()).hexdigest()[:10]
    return Probe(f"services:{digest}", ("sh", "-c", SERVICES_SCRIPT, "nodecheck-services", *args), timeout_s=20)
