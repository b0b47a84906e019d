"""The processes probe (proc.health): the online CPU count, /proc/loadavg, and `ps` under its own
`timeout`, again after a gap of a few seconds when the first listing has a process in D state; then
the cgroups of the processes of users (uid at or above a bound), which say whether a process belongs
to a Slurm job."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.core.model import Probe
from nodecheck.core.registry import Captures
from nodecheck.parsers.lines import split_lines
from nodecheck.parsers.ps import ProcessTable, parse_ps
from nodecheck.parsers.sections import Sections, split_sections

PS_MAX_BYTES = 8 << 20  # a node with 40,000 processes prints ~3 MB in these columns
CGROUP_MAX_BYTES = 1 << 20
CGROUP_MAX_LINES = 64  # a cgroup v1 process has one line per hierarchy (about 13)

# $1: seconds between the two samples (0: one sample); $2: ps's own bound in seconds; $3: the lowest
# uid whose cgroups are read. Nothing from the playbook is interpolated.
# ps prints `comm`, never `args`: for args ps reads /proc/PID/cmdline, which waits on the memory-map
# lock of a process stuck in D state while holding it (a hung NFS or GPU driver), so ps would hang
# with it (mej/nhc#156: "Reading /proc/$PID/cmdline can hang"); comm comes from /proc/PID/stat, which
# does not wait on that lock. `ps` and `timeout` are called through PATH (a site's or a test's own
# ps comes first). getconf _NPROCESSORS_ONLN counts the online CPUs, not the probe's affinity mask
# (`nproc` would say 4 inside a 4-CPU cgroup).
PROCESSES_SCRIPT = (
    r"""
gap=$1 bound=$2 uid_min=$3
printf '@@nodecheck cpus %s\n' "$(getconf _NPROCESSORS_ONLN 2>/dev/null || nproc --all 2>/dev/null)"
echo "@@nodecheck begin loadavg"; head -c 256 /proc/loadavg 2>&1; echo "@@nodecheck end loadavg rc=$?"
# after each sample, `lines:NAME N`: how many lines ps printed, so that a listing that arrives
# shorter (cut on the way) is told from a whole one
sample() {
  out=$(timeout -k 2 "$bound" ps -e -o pid,ppid,uid,user:32,stat,etimes,comm 2>&1); rc=$?
  echo "@@nodecheck begin $1"
  if [ "${#out}" -gt PS_MAX_BYTES ]; then
    printf '%s\n' "$out" | head -c PS_MAX_BYTES; echo; echo "@@nodecheck cut:$1 ${#out}"
  else
    printf '%s\n' "$out"
  fi
  echo "@@nodecheck end $1 rc=$rc"
  printf '@@nodecheck lines:%s %s\n' "$1" $(printf '%s\n' "$out" | wc -l)
}
sample ps1
first=$out rc1=$rc
echo "@@nodecheck begin cgroups"
printf '%s\n' "$first" | while read -r pid ppid uid rest; do
  case $pid:$uid in *[!0-9:]*|:*|*:) continue ;; esac
  [ "$uid" -ge "$uid_min" ] || continue
  { command exec 3<"/proc/$pid/cgroup"; } 2>/dev/null || continue
  n=0
  while [ "$n" -lt CGROUP_MAX_LINES ] && IFS= read -r line <&3; do printf '%s %s\n' "$pid" "$line"; n=$((n + 1)); done
  exec 3<&-
done | head -c CGROUP_MAX_BYTES
echo "@@nodecheck end cgroups rc=0"
# The second sample only confirms what the first saw in D state: with no process in D state there
# it could not change the verdict, and sleeping the gap would hold every job start for nothing. Any
# line whose STAT begins with D (in the whole listing, not only what is printed), or a first sample
# that failed, takes the second as before, after the whole gap.
if [ "$gap" -gt 0 ]; then
  if [ "$rc1" -ne 0 ] || printf '%s\n' "$first" | grep -Eq '^ *[0-9]+ +[0-9]+ +[0-9]+ +[^ ]+ +D'; then
    sleep "$gap"; sample ps2
  else
    echo "@@nodecheck second skipped: no process in D state in the first sample"
  fi
fi
exit 0
""".replace("PS_MAX_BYTES", str(PS_MAX_BYTES))
    .replace("CGROUP_MAX_BYTES", str(CGROUP_MAX_BYTES))
    .replace("CGROUP_MAX_LINES", str(CGROUP_MAX_LINES))
)

# bounded digits: a load of 400 digits, or as many CPUs, made the load's float division overflow;
# a pid has at most 7 digits (pid_max <= 2^22), a CPU count at most 7 (NR_CPUS <= 8192)
_LOADAVG = re.compile(r"(\d{1,9}\.\d{1,9}) (\d{1,9}\.\d{1,9}) (\d{1,9}\.\d{1,9}) \d+/\d+ \d+\s*", re.ASCII)
_CGROUP_LINE = re.compile(r"(\d{1,7}) (.*)", re.ASCII)
_CPUS = re.compile(r"[1-9]\d{0,6}", re.ASCII)


def processes_probe(gap_s: int, ps_timeout_s: int, uid_min: int) -> Probe:
    args = (str(gap_s), str(ps_timeout_s), str(uid_min))
    digest = hashlib.sha256("\0".join(args).encode()).hexdigest()[:8]
    return Probe(
        f"processes:{digest}",
        ("sh", "-c", PROCESSES_SCRIPT, "nodecheck-processes", *args),
        timeout_s=2 * (ps_timeout_s + 2) + gap_s + 10,
    )


@dataclass(frozen=True)
class Sample:
    table: ProcessTable | None  # None: ps did not give a listing (why says why)
    why: str = ""  # "ps exited 127: ...", "ps did not finish within 10 s"
    timed_out: bool = False


@dataclass(frozen=True)
class ProcessFacts:
    cpus: int | None
    load: tuple[float, float, float] | None  # 1, 5, 15 minutes
    first: Sample
    second: Sample | None  # None: one sample was asked for
    cgroups: dict[int, tuple[str, ...]]  # pid -> its /proc/PID/cgroup lines (users' processes only)


def read_processes(out: Captures, probe: Probe) -> ProcessFacts:
    return _read(out[probe.name].stdout, int(probe.argv[5]))  # sh -c SCRIPT $0 gap bound uid_min


def _read(text: str, ps_timeout_s: int) -> ProcessFacts:
    sections = split_sections(text, "processes probe")
    cpus_text = sections.facts.get("cpus", "").strip()
    cpus = int(cpus_text) if _CPUS.fullmatch(cpus_text) else None
    load = None
    loadavg = sections.get("loadavg")
    if loadavg is not None and loadavg.ok and (m := _LOADAVG.fullmatch(loadavg.text)):
        load = (float(m.group(1)), float(m.group(2)), float(m.group(3)))
    cgroups: dict[int, list[str]] = {}
    section = sections.get("cgroups")
    for line in (section.text if section is not None else "").splitlines():
        if m := _CGROUP_LINE.fullmatch(line):
            cgroups.setdefault(int(m.group(1)), []).append(m.group(2))
    second = _sample(sections, "ps2", ps_timeout_s) if "ps2" in sections.sections else None
    return ProcessFacts(
        cpus, load, _sample(sections, "ps1", ps_timeout_s), second, {k: tuple(v) for k, v in cgroups.items()}
    )


def _sample(sections: Sections, name: str, ps_timeout_s: int) -> Sample:
    section = sections.require(name, "ps")
    if section.rc is None:
        raise ParseError("ps", "the probe's output was cut off", section.text)
    if section.rc in (124, 137):  # timeout(1): the bound passed (137: still alive after TERM, then KILL)
        return Sample(
            None,
            f"ps did not finish within {ps_timeout_s} s (reading /proc hangs: a process stuck in the kernel?)",
            timed_out=True,
        )
    if section.rc != 0:
        first = section.text.strip().splitlines()[:1]
        return Sample(None, f"ps exited {section.rc}: {first[0] if first else 'no output'}")
    if f"cut:{name}" in sections.facts:
        return Sample(None, f"ps printed {sections.facts[f'cut:{name}']} bytes, more than the {PS_MAX_BYTES} read")
    if why := _not_whole(section.text, sections.facts.get(f"lines:{name}")):
        return Sample(None, why)
    table = parse_ps(section.text)
    if not table.processes:  # ps -e lists itself: a header alone is no listing of the node
        return Sample(None, "ps listed no process (not even itself)")
    return Sample(table)


def _not_whole(text: str, printed: str | None) -> str:
    """Why the listing is not what ps printed (the probe's line count), or ""."""
    if printed is None or not (printed.isascii() and printed.isdigit()) or len(printed) > 9:
        return "no count of the lines ps printed: the listing is not known to be whole"
    arrived = len(split_lines(text))
    if arrived != int(printed):
        return f"ps printed {printed} lines, {arrived} arrived: the listing is not whole"
    return ""
