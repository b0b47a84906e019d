"""The mem probe: /proc/meminfo, /proc/uptime and the EDAC memory-controller counters, each in its
own section (see parsers/sections.py), in one round trip. No value from the playbook reaches the
script: it is the same fixed text on every node.

Bounds: meminfo and uptime are read with head -c; the EDAC walk reads at most MAX_CONTROLLERS
controllers and MAX_MODULES dimm/rank directories each (a 2-socket server registers 2 to 16
controllers of 2 to 12 modules), one short sysfs file per read
(`read`, a shell builtin: no fork per file), and says so with an `edac-truncated` fact when it
stopped early. After the section, `edac-walked files=N` says how many files the walk listed (one
line each): a listing that arrives with fewer lines was cut, and its ECC errors are not judged.
No EDAC directory prints the fact `edac absent` instead of a section.
"""

from __future__ import annotations

from nodecheck.core.model import Probe
from nodecheck.core.registry import Captures
from nodecheck.parsers.sections import Sections, split_sections
from nodecheck.parsers.sysfs import SHELL_FUNCTION

MAX_CONTROLLERS = 64
MAX_MODULES = 256  # per controller: dimmN and rankN directories
MEMINFO_MAX_BYTES = 65536  # a meminfo is ~1.5 KB; a fake one cannot flood the report

MEMORY_SCRIPT = (
    r"""
export LC_ALL=C
section() { n=$1; shift; echo "@@nodecheck begin $n"; "$@" 2>&1; echo "@@nodecheck end $n rc=$?"; }
"""
    + SHELL_FUNCTION
    + r"""
# counted_dump FILE...: sysfs_dump, counting the files it lists (one line each: sysfs_dump skips
# only files that do not exist), so that the judge can tell a whole listing from a cut one
counted_dump() {
  for f in "$@"; do [ -f "$f" ] && files=$((files + 1)); done
  sysfs_dump "$@"
}
edac_dump() {
  mcs=0 files=0 cut=
  for mc in /sys/devices/system/edac/mc/mc[0-9]*; do
    [ -d "$mc" ] || continue
    mcs=$((mcs + 1))
    if [ "$mcs" -gt MAX_CONTROLLERS ]; then cut="more than MAX_CONTROLLERS controllers"; break; fi
    counted_dump "$mc"/mc_name "$mc"/size_mb "$mc"/ce_count "$mc"/ue_count "$mc"/ce_noinfo_count \
      "$mc"/ue_noinfo_count "$mc"/seconds_since_reset
    mods=0
    for m in "$mc"/dimm[0-9]* "$mc"/rank[0-9]*; do
      [ -d "$m" ] || continue
      mods=$((mods + 1))
      if [ "$mods" -gt MAX_MODULES ]; then cut="more than MAX_MODULES modules on ${mc##*/}"; break; fi
      counted_dump "$m"/dimm_label "$m"/size "$m"/dimm_ce_count "$m"/dimm_ue_count
    done
  done
  return 0
}
section meminfo head -c MEMINFO_MAX_BYTES /proc/meminfo
section uptime head -c 256 /proc/uptime
if [ -d /sys/devices/system/edac/mc ]; then
  section edac edac_dump
  echo "@@nodecheck edac-walked files=$files"
  [ -z "$cut" ] || echo "@@nodecheck edac-truncated $cut"
else
  echo "@@nodecheck edac absent"
fi
exit 0
""".replace("MAX_CONTROLLERS", str(MAX_CONTROLLERS))
    .replace("MAX_MODULES", str(MAX_MODULES))
    .replace("MEMINFO_MAX_BYTES", str(MEMINFO_MAX_BYTES))
)
MEMORY = Probe("memory", ("sh", "-c", MEMORY_SCRIPT, "nodecheck-memory"), timeout_s=15)


def memory_sections(out: Captures) -> Sections:
    """The memory probe's output of one node, split into its sections."""
    return split_sections(out[MEMORY.name].stdout, "memory probe")
