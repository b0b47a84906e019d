"""The services probe: the units' state from systemd, or where systemd is not the init system (a
container, the simulated cluster), the processes running in this node's mount namespace; and whether
the node has NVSwitches (nvidia-fabricmanager is needed only then)."""

from __future__ import annotations

import hashlib

from nodecheck.core.model import Probe

SHOW_PROPERTIES = "Id,LoadState,ActiveState,SubState,NRestarts,Result,ActiveEnterTimestamp"

# Daemons run as root or as a system account (munge, chrony, nvidia-persistenced); a process of a
# person's account (UID_MIN of /etc/login.defs and up) that carries a daemon's name is not that daemon.
UID_MIN = 1000

# Which process is a daemon (issue 32): never its name alone. Any process may name itself "slurmd"
# (prctl PR_SET_NAME), and a job's user who runs a setuid-root program through a symlink called
# "slurmd" gets both that comm and a root-owned /proc/PID (the owner of /proc/PID is the effective
# uid). What a user cannot forge:
#   * the REAL uid (the first field of `Uid:` in /proc/PID/status): a setuid program keeps its
#     caller's; read with the shell's own `read` (no fork per process: a user may start thousands
#     named slurmd) and stopped at the Uid: line. /proc/PID/status takes no lock on the process's
#     memory, unlike cmdline (never read: it can hang on a process stuck in the kernel).
#   * the binary actually running (readlink /proc/PID/exe: a symlink's target, not its name). It is
#     the daemon's when its file name is the daemon's (/usr/sbin/slurmd, /usr/local/sbin/slurmd,
#     /opt/slurm/sbin/slurmd: installs differ in the directory, not in the name), or the daemon's
#     followed by "-" (Debian and Ubuntu install slurmd as /usr/sbin/slurmd-wlm behind the
#     alternatives link /usr/sbin/slurmd: comm "slurmd", exe "slurmd-wlm"), and both the
#     file (stat -L of /proc/PID/exe: the inode running, even if since replaced) and its directory
#     are root's and writable by no group or other: then only root put that binary there. A binary
#     replaced or removed while it runs reads "PATH (deleted)" (a package upgrade under a running
#     daemon, until it restarts): still the daemon's when the inode that runs and the directory it
#     was in pass the same test, so an upgrade does not turn every node into an error.
# Both tests are made only for processes of this mount namespace (another's paths are not ours to
# stat); readlink and stat are bounded (a binary on a hung NFS /opt would hang stat).
DAEMON_FUNCTIONS = r"""
op_bounded() { if command -v timeout >/dev/null 2>&1; then timeout 5 "$@"; else "$@"; fi; }
# op_ids PID: sets op_pp (the parent's pid) and op_ru (the real uid) from /proc/PID/status; "" when
# gone or not a number (no command substitution: that forks)
op_ids() {
  op_pp= op_ru=
  { while read -r op_k op_v op_rest; do
      case $op_k in PPid:) op_pp=$op_v;; Uid:) op_ru=$op_v; break;; esac
    done < "/proc/$1/status"; } 2>/dev/null
  case $op_pp in *[!0-9]*) op_pp=;; esac
  case $op_ru in *[!0-9]*) op_ru=;; esac
}
# op_daemon_binary PID NAME: whether PID runs a root-owned binary called NAME (cut to 15 characters,
# as comm is) or NAME-SOMETHING from a root-owned directory, neither writable by group or others
op_daemon_binary() {
  op_exe=$(op_bounded readlink "/proc/$1/exe" 2>/dev/null) || return 1
  op_exe=${op_exe% (deleted)}
  case $op_exe in /*) ;; *) return 1;; esac
  case ${op_exe##*/} in
    "$2"-*) ;;   # Debian's alternatives: /usr/sbin/slurmd -> /etc/alternatives/slurmd -> slurmd-wlm
    *) [ "$(printf %.15s "${op_exe##*/}")" = "$2" ] || return 1;;
  esac
  op_dir=${op_exe%/*}
  set -- $(op_bounded stat -L -c '%u %A' -- "/proc/$1/exe" "${op_dir:-/}" 2>/dev/null)
  [ $# = 4 ] && [ "$1" = 0 ] && [ "$3" = 0 ] || return 1
  for op_m in "$2" "$4"; do
    case $op_m in ?????w*|????????w*) return 1;; esac
  done
}
"""

# own_procs NAME...: "PID<TAB>same|other|unknown<TAB>UID<TAB>COMM" for every process whose name
# (/proc/PID/comm, cut to 15 characters by the kernel) is one of NAMEs. "same": in this shell's mount
# namespace, so this node's own: processes of other nodes sharing the PID namespace, or a container's,
# are not its service. `[ A -ef B ]` compares the namespace files' device and inode without a fork per
# process; "unknown": the namespace could not be read (not root: another user's process). UID: the
# process's REAL uid ("?" when gone). A process of this namespace whose real uid is root's or a system
# account's (below UID_MIN) but whose binary is not the daemon's (op_daemon_binary) is printed with a
# leading "!": not that daemon (parse_process_list skips such a line; the services check names it).
# A person's process is printed as it is (the check tells it by its uid): no fork for it.
PROCS_FUNCTION = (
    DAEMON_FUNCTIONS
    + r"""
own_procs() {
  for op_d in /proc/[0-9]*; do
    { IFS= read -r op_c < "$op_d/comm"; } 2>/dev/null || continue
    for op_n in "$@"; do
      [ "$op_c" = "$op_n" ] || continue
      op_p=${op_d#/proc/} op_mark=
      if [ "$op_d/ns/mnt" -ef "/proc/$$/ns/mnt" ]; then op_w=same
      elif [ -e "$op_d/ns/mnt" ]; then op_w=other
      else op_w=unknown; fi
      op_ids "$op_p"; op_u=${op_ru:-?}
      if [ "$op_w" = same ] && [ -n "$op_ru" ] && [ "$op_ru" -lt UID_MIN ]; then
        op_daemon_binary "$op_p" "$op_n" || op_mark=!
      fi
      printf '%s%s\t%s\t%s\t%s\n' "$op_mark" "$op_p" "$op_w" "$op_u" "$op_c"
      break
    done
  done
}
""".replace("UID_MIN", str(UID_MIN))
)

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
