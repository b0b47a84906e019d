"""The limits probe (`limits`): the resource limits of this node's slurmd, which its job tasks inherit,
else the probe's own (an SSH login through PAM's pam_limits); and Slurm's PropagateResourceLimits."""

from __future__ import annotations

import re
from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.core.model import Probe
from nodecheck.core.registry import Captures
from nodecheck.parsers.proc_limits import Limits, parse_limits
from nodecheck.parsers.sections import split_sections

LIMITS_MAX_BYTES = 8192  # /proc/PID/limits is 17 rows of 80 bytes

# slurmd is found by name (/proc/PID/comm: no read of a command line, which can hang) among root's
# processes (slurmd runs as root; any process may call itself slurmd) of the probe's own mount namespace: a container's slurmd, or (on the simulated cluster,
# where nodes share one PID namespace) another node's, is not this node's. Slurm starts every job
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
LIMITS_SCRIPT = r"""
me=$(readlink /proc/self/ns/mnt 2>/dev/null)
found= count=0
for d in /proc/[0-9]*; do
  IFS= read -r comm 2>/dev/null <"$d/comm" || continue
  [ "$comm" = slurmd ] || continue
  [ "$(readlink "$d/ns/mnt" 2>/dev/null)" = "$me" ] || continue
  [ "$(stat -c %u -- "$d" 2>/dev/null)" = 0 ] || continue   # a job's user can name a process slurmd
  count=$((count + 1))
  [ -n "$found" ] || found=${d#/proc/}
done
if [ -n "$found" ]; then
  printf '@@nodecheck source slurmd pid=%s count=%s\n' "$found" "$count"
  echo "@@nodecheck begin limits"; head -c LIMITS_MAX_BYTES "/proc/$found/limits" 2>&1; echo "@@nodecheck end limits rc=$?"
else
  echo "@@nodecheck source self"
  echo "@@nodecheck begin limits"; head -c LIMITS_MAX_BYTES /proc/self/limits 2>&1; echo "@@nodecheck end limits rc=$?"
fi
for conf in "${SLURM_CONF:-}" /etc/slurm/slurm.conf /etc/slurm-llnl/slurm.conf /run/slurm/conf/slurm.conf \
            /var/spool/slurmd/conf-cache/slurm.conf; do
  [ -n "$conf" ] && [ -f "$conf" ] && [ -r "$conf" ] || continue
  printf '@@nodecheck slurm-conf %s\n' "$conf"
  echo "@@nodecheck begin slurm-config"
  # bounded: the lines that matter are short; a huge or odd file cannot flood the capture
  head -c 1048576 -- "$conf" | grep -i '^[[:space:]]*PropagateResourceLimits' | head -n 8
  echo "@@nodecheck end slurm-config rc=0"
  break
done
exit 0
""".replace("LIMITS_MAX_BYTES", str(LIMITS_MAX_BYTES))
LIMITS = Probe("limits", ("sh", "-c", LIMITS_SCRIPT, "nodecheck-limits"), timeout_s=25)

_SOURCE = re.compile(r"slurmd pid=(\d+) count=(\d+)|self", re.ASCII)
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


ALL_NAMES = frozenset({"AS", "CORE", "CPU", "DATA", "FSIZE", "MEMLOCK", "NOFILE", "NPROC", "RSS", "STACK"})


def read_limits(out: Captures) -> LimitsFacts:
    return _read(out[LIMITS.name].stdout)


def _read(text: str) -> LimitsFacts:
    sections = split_sections(text, "limits probe")
    source = _SOURCE.fullmatch(sections.facts.get("source", ""))
    if source is None:
        raise ParseError("limits probe", "no source line: the probe did not run to its end", text)
    section = sections.require("limits", "/proc/PID/limits")
    where = f"/proc/{source.group(1)}/limits" if source.group(1) else "/proc/self/limits"
    if section.rc != 0:
        raise ParseError(where, f"could not be read (exit {section.rc}): {section.text.strip()[:200]}", section.text)
    limits = parse_limits(section.text, where)
    pid = int(source.group(1)) if source.group(1) else None
    what = "slurmd's limits" if pid is not None else "the probe's own login limits, set by PAM"
    config = sections.get("slurm-config")
    if config is None:
        return LimitsFacts(limits, what, pid, None, "no slurm.conf readable on the node")
    if config.rc is None:
        return LimitsFacts(limits, what, pid, None, "slurm.conf could not be read to its end")
    return LimitsFacts(limits, what, pid, _propagation(config.text), "")


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
