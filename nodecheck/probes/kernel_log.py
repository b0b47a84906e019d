"""The kernel-log probe (the node's clock, then dmesg or the journal's kernel messages) and the
reading of its output: gpu.xid, node.oom, `nodecheck facts` and forensics read the same log."""

from __future__ import annotations

import functools
import re
from datetime import datetime, timezone

from nodecheck.core.errors import ParseError
from nodecheck.core.model import Probe
from nodecheck.core.registry import Captures
from nodecheck.parsers.kernel_log import KernelLog, parse_kernel_log
from nodecheck.parsers.sections import split_sections

# The node's clock first (events are timed against it, not ours), then dmesg with absolute ISO
# times; where dmesg is not allowed (kernel.dmesg_restrict) the journal's kernel messages instead.
KERNEL_LOG_SCRIPT = r"""
printf '@@nodecheck clock now=%s uptime=%s utc_offset=%s\n' "$(date +%s)" "$(cut -d' ' -f1 /proc/uptime)" "$(date +%z)"
section() { n=$1; shift; echo "@@nodecheck begin $n"; "$@" 2>&1; rc=$?; echo "@@nodecheck end $n rc=$rc"; return $rc; }
section dmesg dmesg --time-format iso && exit 0
if command -v journalctl >/dev/null 2>&1; then section journal journalctl -k -b -o short-iso --no-pager -q; fi
exit 0
"""
KERNEL_LOG = Probe("kernel-log", ("sh", "-c", KERNEL_LOG_SCRIPT, "nodecheck-kernel-log"), timeout_s=20)

_CLOCK = re.compile(r"now=(\d+) uptime=([\d.]+) utc_offset=([+-])(\d\d)(\d\d)", re.ASCII)


def read_kernel_log(out: Captures) -> tuple[KernelLog, datetime | None, str, float | None]:
    """(parsed log, the node's clock, which source was read, the node's uptime in seconds)."""
    return _read_text(out[KERNEL_LOG.name].stdout)


def utc_offset_s(out: Captures) -> int:
    """The node's UTC offset in seconds when the probe ran (dmesg -T and syslog dates are local time):
    for a reader of the raw log text (nvlink.sxid); 0 when the clock line is missing."""
    return _clock(split_sections(out[KERNEL_LOG.name].stdout, "kernel log probe").facts.get("clock", ""))[2]


def _clock(line: str) -> tuple[datetime | None, float | None, int]:
    clock = _CLOCK.match(line)
    if not clock:
        return None, None, 0
    offset = (-1 if clock.group(3) == "-" else 1) * (int(clock.group(4)) * 3600 + int(clock.group(5)) * 60)
    return datetime.fromtimestamp(int(clock.group(1)), timezone.utc), float(clock.group(2)), offset


@functools.lru_cache(maxsize=65536)  # gpu.xid and node.oom read the same log: parse it once
def _read_text(text: str) -> tuple[KernelLog, datetime | None, str, float | None]:
    sections = split_sections(text, "kernel log probe")
    now, uptime, offset = _clock(sections.facts.get("clock", ""))
    for name, tool in (("dmesg", "dmesg"), ("journal", "journalctl -k")):
        section = sections.get(name)
        if section is not None and section.ok:
            log = parse_kernel_log(section.text, now=now, uptime_s=uptime, utc_offset_s=offset)
            if log.lines == 0:
                # a running kernel always has messages: an empty log means we read nothing
                raise ParseError(tool, "the kernel log is empty: nothing could be read", section.text)
            return log, now, tool, uptime
    tried = [(s, got) for s in ("dmesg", "journal") if (got := sections.get(s)) is not None]
    said = "; ".join(f"{s} exit {got.rc}: {got.text.strip()[:200]}" for s, got in tried)
    raise ParseError("kernel log", f"could not read the kernel log ({said or 'no output'})", text)


def source_text(out: Captures, source: str) -> str:
    """The raw text of the log `read_kernel_log` read ("dmesg" or "journalctl -k"), for an excerpt."""
    name = "dmesg" if source == "dmesg" else "journal"
    section = split_sections(out[KERNEL_LOG.name].stdout, "kernel log probe").get(name)
    return section.text if section else ""
