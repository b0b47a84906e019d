"""Read /proc/meminfo: `Key:   VALUE kB` lines (HugePages_* are page counts, without a unit).

Every field is kept (sizes in kB, counts as numbers); the judge reads the few it needs. A kernel
older than 3.14 has no MemAvailable and one without hugetlbfs has no HugePages_* lines: those are
None, never 0. MemTotal is the one field every meminfo has, so text without it is not meminfo.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.core.model import quote
from nodecheck.parsers.counts import TOO_BIG, u64
from nodecheck.parsers.lines import split_lines

TOOL = "/proc/meminfo"
_LINE = re.compile(r"^([A-Za-z0-9_()]+):\s+(\d+)(?: (kB))?\s*$", re.ASCII)
KIB_PER_GIB = 1024 * 1024


@dataclass(frozen=True)
class MemInfo:
    fields: Mapping[str, int]  # "MemTotal" -> 2113413736 (kB); "HugePages_Total" -> 0 (pages)

    def get(self, name: str) -> int | None:
        return self.fields.get(name)

    @property
    def total_kb(self) -> int:
        return self.fields["MemTotal"]

    @property
    def available_kb(self) -> int | None:
        return self.fields.get("MemAvailable")

    @property
    def hugetlb_kb(self) -> int:
        """Memory held by the default-size hugepage pool (kB): not available to ordinary allocations."""
        hugetlb = self.fields.get("Hugetlb")  # every page size, kernels >= 4.16
        if hugetlb is not None:
            return hugetlb
        return (self.fields.get("HugePages_Total") or 0) * (self.fields.get("Hugepagesize") or 0)


def parse_meminfo(text: str) -> MemInfo:
    """{field: value} from /proc/meminfo; a line that is not `Key: N [kB]` raises ParseError."""
    fields: dict[str, int] = {}
    for number, line in enumerate(split_lines(text), 1):
        if not line.strip():
            continue
        match = _LINE.match(line)
        if match is None:
            raise ParseError(TOOL, f"line {number} is not 'Key: value kB'", line)
        value = u64(match.group(2))
        if value is None:  # the kernel prints unsigned longs: more digits is no meminfo value
            raise ParseError(TOOL, f"{match.group(1)}: {quote(match.group(2))} is not a count ({TOO_BIG})", line)
        fields.setdefault(match.group(1), value)
    if "MemTotal" not in fields:
        raise ParseError(TOOL, "no MemTotal line: not /proc/meminfo, or cut off", text)
    if fields["MemTotal"] <= 0:
        raise ParseError(TOOL, f"MemTotal {fields['MemTotal']} kB", text)
    return MemInfo(fields)
