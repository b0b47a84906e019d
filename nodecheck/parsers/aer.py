"""PCIe AER counters from sysfs: /sys/bus/pci/devices/<BDF>/aer_dev_{correctable,nonfatal,fatal}.

Each file is one `NAME COUNT` line per error type and a total (kernel >= 4.17,
Documentation/PCI/pcieaer-howto): `TOTAL_ERR_COR`, `TOTAL_ERR_NONFATAL`, `TOTAL_ERR_FATAL`.
"""

from __future__ import annotations

from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.core.model import quote
from nodecheck.parsers.counts import TOO_BIG, u64
from nodecheck.parsers.lines import split_lines

KINDS = {"correctable": "TOTAL_ERR_COR", "nonfatal": "TOTAL_ERR_NONFATAL", "fatal": "TOTAL_ERR_FATAL"}


@dataclass(frozen=True)
class AerFile:
    total: int
    counts: tuple[tuple[str, int], ...]  # every error type with its count, in the file's order

    def nonzero(self) -> list[str]:
        return [f"{name} {n}" for name, n in self.counts if n]


def parse_aer(text: str, kind: str) -> AerFile:
    """One aer_dev_<kind> file. ParseError when a line is not `NAME COUNT` or the total is missing."""
    counts: list[tuple[str, int]] = []
    total = None
    for number, line in enumerate(split_lines(text), 1):
        if not line.strip():
            continue
        name, _, value = line.strip().rpartition(" ")
        if not name:
            raise ParseError(f"aer_dev_{kind}", f"line {number} is not 'NAME COUNT'", line)
        n = u64(value)  # the kernel prints u64 counters
        if n is None:
            why = f"{quote(value)} is not a count ({TOO_BIG})"
            raise ParseError(f"aer_dev_{kind}", f"line {number} is not 'NAME COUNT': {why}", line)
        if name.startswith("TOTAL_ERR_"):  # prometheus/procfs' fixture has TOTAL_ERR_FATAL in a nonfatal file
            total = n
        else:
            counts.append((name, n))
    if total is None:
        raise ParseError(f"aer_dev_{kind}", f"no {KINDS[kind]} line (kernel older than 4.17?)", text)
    return AerFile(total, tuple(counts))
