"""The limits probe (`limits`): the resource limits of this node's slurmd, which its job tasks inherit,
else the probe's own (an SSH login through PAM's pam_limits); and Slurm's PropagateResourceLimits.
slurmd is told by systemd, its binary and real uid, or its pid file, never by its name alone (LIMITS_SCRIPT)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.core.model import Probe, quote
from nodecheck.core.registry import Captures
from nodecheck.parsers.proc_limits import Limits, parse_limits
from nodecheck.parsers.sections import split_sections
from nodecheck.probes.services import DAEMON_FUNCTIONS

LIMITS_MAX_BYTES = 8192  # /proc/PID/limits is 17 rows of 80 bytes

# Which process is this node's slurmd (issue 32: a job's user must not choose the limits judged, and
# so drain a node). Never its name alone: a user can run a setuid-root program through a symlink
# called slurmd (comm "slurmd", /proc/PID root's). In this order, the first that applies:
#   1. systemd's MainPID of slurmd.service (where systemd is the init system; `systemctl show`
#      bounded): the process systemd started from root's unit file and still tracks;
#   2. else every process of this mount namespace named slurmd (/proc/PID/comm: no read of a command
#      line, which can hang) whose REAL uid is 0 and whose binary is a root-owned slurmd in a
#      root-owned directory (probes/services.py: DAEMON_FUNCTIONS, which says why), less any whose
#      parent is one of them (slurmd forks before it execs slurmstepd or a Prolog: the same limits).
#      One: that one. Several: the one slurmd's pid file names (SlurmdPidFile of the node's
#      slurm.conf, default /run/slurmd.pid; trusted only when a regular file of root's that no group
#      or other may write), else the probe says "ambiguous" and the check is an ERROR, never a value
#      judged on a process that may not be slurmd. Processes named slurmd that fail the test are
#      listed (not_slurmd) so the message can say they were seen and not taken.
# Same mount namespace: a container's slurmd, or (on the simulated cluster, where nodes share one
# PID namespace) another node's, is not this node's. Slurm starts every job
# step through slurmstepd, a child of slurmd, so tasks start with slurmd's limits (and slurmd's
# systemd unit sets them: LimitMEMLOCK=infinity in slurmd.service). With PropagateResourceLimits
# (default ALL) slurmd then applies the submitting shell's soft limits, up to slurmd's hard limits;
# PropagateResourceLimitsExcept=MEMLOCK keeps slurmd's own. Those two settings are read from the
# node's own slurm.conf (the first of $SLURM_CONF, /etc/slurm, /etc/slurm-llnl, and configless
# slurmd's cache in /run/slurm/conf or /var/spool/slurmd/conf-cache), not from `scontrol show config`:
# that is an RPC to slurmctld, and a Prolog on each of a 1,000-node job's nodes would send 1,000 at
# job start (SchedMD: a Prolog should not call Slurm commands). A slurm.conf without either line
# means Slurm's default, ALL. Without a slurmd in this namespace, the probe's own limits are read
# (its login session's, set by pam_limits from /etc/security/limits.conf); `head` inherits them.
LIMITS_SCRIPT = (
    DAEMON_FUNCTIONS
    + r"""
conf=
for c in "${SLURM_CONF:-}" /etc/slurm/slurm.conf /etc/slurm-llnl/slurm.conf /run/slurm/conf/slurm.conf \
         /var/spool/slurmd/conf-cache/slurm.conf; do
  [ -n "$c" ] && [ -f "$c" ] && [ -r "$c" ] && conf=$c && break
done
# conf_lines PATTERN: the slurm.conf lines of that setting (bounded: a huge or hung file cannot stall
# or flood the probe; the lines that matter are short)
conf_lines() { op_bounded head -c 1048576 -- "$conf" | grep -i "^[[:space:]]*$1" | head -n 8; }

# trusted_pid FILE: the pid in FILE when it is a regular file of root's no group or other may write
trusted_pid() {
  set -- "$1" $(op_bounded stat -c '%u %A' -- "$1" 2>/dev/null)
  [ $# = 3 ] && [ "$2" = 0 ] || return 1
  case $3 in -????[!w]??[!w]*) ;; *) return 1;; esac
  tp=$(op_bounded head -c 32 -- "$1" 2>/dev/null | head -n 1)
  case $tp in ''|*[!0-9]*) return 1;; esac
  echo "$tp"
}

found= via=
main=
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
  # "MainPID=N": no --value, which systemd before 230 (RHEL 7) does not know
  main=$(op_bounded systemctl show -p MainPID slurmd.service 2>/dev/null | head -n 1)
  main=${main#MainPID=}
  case $main in ''|0|*[!0-9]*) main=;; esac
fi
if [ -n "$main" ] && [ "/proc/$main/ns/mnt" -ef "/proc/$$/ns/mnt" ]; then
  op_ids "$main"
  [ "$op_ru" = 0 ] && found=$main via=systemd
fi
if [ -z "$found" ]; then
  cands= rejected= nrejected=0
  for d in /proc/[0-9]*; do
    { IFS= read -r comm <"$d/comm"; } 2>/dev/null || continue
    [ "$comm" = slurmd ] || continue
    [ "$d/ns/mnt" -ef "/proc/$$/ns/mnt" ] || continue
    pid=${d#/proc/}
    op_ids "$pid"
    if [ "$op_ru" = 0 ] && op_daemon_binary "$pid" slurmd; then
      cands="$cands $pid:$op_pp"
    else
      nrejected=$((nrejected + 1))
      [ "$nrejected" -gt 8 ] || rejected="$rejected${rejected:+,}$pid"
    fi
  done
  roots=
  for c in $cands; do
    case "$cands " in *" ${c#*:}:"*) continue;; esac   # its parent is slurmd: a fork of it
    roots="$roots${roots:+ }${c%:*}"
  done
  [ "$nrejected" = 0 ] || printf '@@nodecheck not_slurmd count=%s pids=%s\n' "$nrejected" "$rejected"
  case $roots in
    *" "*)
      pidfile=
      [ -z "$conf" ] || pidfile=$(conf_lines 'SlurmdPidFile[[:space:]]*=' | tail -n 1 |
                                  sed 's/^[^=]*=[[:space:]]*//; s/[[:space:]#].*//')
      [ -n "$pidfile" ] || pidfile=/run/slurmd.pid   # Slurm's default
      case $pidfile in *%*) pidfile=;; esac   # %n/%h: several slurmd per host; not resolved here
      named=
      [ -z "$pidfile" ] || named=$(trusted_pid "$pidfile") || named=
      for p in $roots; do [ "$p" = "$named" ] && found=$p via=pidfile && break; done
      if [ -z "$found" ]; then
        printf '@@nodecheck source ambiguous pids=%s\n' "$(echo $roots | tr ' ' ,)"
        [ -z "$pidfile" ] || printf '@@nodecheck pid_file %s\n' "$pidfile"
        exit 0
      fi
      printf '@@nodecheck pid_file %s\n' "$pidfile";;
    ?*) found=$roots via=exe;;
  esac
fi
if [ -n "$found" ]; then
  printf '@@nodecheck source slurmd pid=%s via=%s\n' "$found" "$via"
  echo "@@nodecheck begin limits"; head -c LIMITS_MAX_BYTES "/proc/$found/limits" 2>&1; echo "@@nodecheck end limits rc=$?"
else
  echo "@@nodecheck source self"
  echo "@@nodecheck begin limits"; head -c LIMITS_MAX_BYTES /proc/self/limits 2>&1; echo "@@nodecheck end limits rc=$?"
fi
if [ -n "$conf" ]; then
  printf '@@nodecheck slurm-conf %s\n' "$conf"
  echo "@@nodecheck begin slurm-config"
  conf_lines PropagateResourceLimits
  echo "@@nodecheck end slurm-config rc=0"
fi
exit 0
""".replace("LIMITS_MAX_BYTES", str(LIMITS_MAX_BYTES))
)
LIMITS = Probe("limits", ("sh", "-c", LIMITS_SCRIPT, "nodecheck-limits"), timeout_s=25)

# pids of at most 7 digits (the kernel's pid_max is at most 2^22): no int() of thousands of digits
_PID = r"\d{1,7}"
_SOURCE = re.compile(
    rf"slurmd pid=({_PID}) via=(systemd|pidfile|exe)|self|ambiguous pids=({_PID}(?:,{_PID})+)", re.ASCII
)
_NOT_SLURMD = re.compile(rf"count=(\d{{1,9}}) pids=({_PID}(?:,{_PID})*)", re.ASCII)
FOUND_BY = {"systemd": "systemd's MainPID of slurmd.service", "exe": "its binary"}
_CONFIG = re.compile(r"(PropagateResourceLimits(?:Except)?)\s*=\s*(.*)", re.IGNORECASE)
# slurm.conf's names of the limits nodecheck judges
SLURM_NAMES = {"memlock": "MEMLOCK", "nofile": "NOFILE", "nproc": "NPROC", "stack": "STACK"}


@dataclass(frozen=True)
class Propagation:
    """What slurm.conf says about the submitting shell's limits; `names` are those slurmd applies."""

    text: str  # "PropagateResourceLimits=ALL, PropagateResourceLimitsExcept=MEMLOCK"
    names: frozenset[str]  # the SLURM names propagated (ALL expanded; Except removed)

    def propagated(self, limit: str) -> bool:
        return SLURM_NAMES.get(limit, limit.upper()) in self.names


@dataclass(frozen=True)
class LimitsFacts:
    limits: Limits
    source: str  # "slurmd's limits" or "the probe's own login limits, set by PAM"
    slurmd_pid: int | None
    propagation: Propagation | None  # None: not known (no slurm.conf readable: why_unknown)
    why_unknown: str
    found_by: str = ""  # how slurmd was told ("its binary", "the pid file /run/slurmd.pid", systemd's)
    not_slurmd: tuple[int, ...] = ()  # processes named slurmd that are not (the first 8)
    not_slurmd_count: int = 0  # how many there were


ALL_NAMES = frozenset({"AS", "CORE", "CPU", "DATA", "FSIZE", "MEMLOCK", "NOFILE", "NPROC", "RSS", "STACK"})


def read_limits(out: Captures) -> LimitsFacts:
    return _read(out[LIMITS.name].stdout)


def _read(text: str) -> LimitsFacts:
    sections = split_sections(text, "limits probe")
    if "source" not in sections.facts:
        raise ParseError("limits probe", "no source line: the probe did not run to its end", text)
    source = _SOURCE.fullmatch(sections.facts["source"])
    if source is None:
        raise ParseError("limits probe", f"source line not understood: {quote(sections.facts['source'], 100)}", text)
    if source.group(3):  # several processes pass for slurmd: no value judged on a guess
        pids = ", ".join(source.group(3).split(","))
        pid_file = sections.facts.get("pid_file", "")
        raise ParseError(
            "limits probe",
            f"{len(source.group(3).split(','))} processes could be slurmd: pids {pids} (each root's, "
            "running a root-owned slurmd binary, none a fork of another; neither systemd's MainPID nor a "
            f"root-owned pid file{f' ({pid_file})' if pid_file else ''} names one): stop the stray one, or "
            "set SlurmdPidFile",
            text,
        )
    section = sections.require("limits", "/proc/PID/limits")
    where = f"/proc/{source.group(1)}/limits" if source.group(1) else "/proc/self/limits"
    if section.rc != 0:
        raise ParseError(where, f"could not be read (exit {section.rc}): {section.text.strip()[:200]}", section.text)
    limits = parse_limits(section.text, where)
    pid = int(source.group(1)) if source.group(1) else None
    what = "slurmd's limits" if pid is not None else "the probe's own login limits, set by PAM"
    found_by = ""
    if source.group(2):
        found_by = FOUND_BY.get(source.group(2), f"the pid file {sections.facts.get('pid_file', '')}")
    not_slurmd: tuple[int, ...] = ()
    not_count = 0
    if rejected := _NOT_SLURMD.fullmatch(sections.facts.get("not_slurmd", "")):
        not_slurmd = tuple(int(p) for p in rejected.group(2).split(","))
        not_count = max(int(rejected.group(1)), len(not_slurmd))
    config = sections.get("slurm-config")
    propagation, why_unknown = None, ""
    if config is None:
        why_unknown = "no slurm.conf readable on the node"
    elif config.rc is None:
        why_unknown = "slurm.conf could not be read to its end"
    else:
        propagation = _propagation(config.text)
    return LimitsFacts(limits, what, pid, propagation, why_unknown, found_by, not_slurmd, not_count)


def _propagation(text: str) -> Propagation | None:
    values: dict[str, str] = {}
    for line in text.splitlines():
        if m := _CONFIG.fullmatch(line.strip()):
            values[m.group(1).lower()] = m.group(2).strip()
    plain, except_ = values.get("propagateresourcelimits"), values.get("propagateresourcelimitsexcept")
    # a slurm.conf that sets neither: Slurm's default, ALL ("(null)" is how scontrol prints an unset one)
    names = ALL_NAMES if plain in (None, "", "(null)") else _names(plain)
    names = names - _names(except_ or "")
    shown = f"PropagateResourceLimits={plain or 'ALL'}"
    if except_ and except_ != "(null)":
        shown += f", PropagateResourceLimitsExcept={except_}"
    return Propagation(shown, names)


def _names(value: str) -> frozenset[str]:
    words = {w.strip().upper() for w in value.split(",") if w.strip() and w.strip() != "(null)"}
    if "ALL" in words:
        return ALL_NAMES
    if "NONE" in words:
        return frozenset()
    return frozenset(words)
