"""HCA firmware, which must match across the job's nodes per adapter type (read from ibstat)."""

from __future__ import annotations

from nodecheck.checks.ib import IBSTAT
from nodecheck.checks.values import value_check
from nodecheck.core.registry import Captures
from nodecheck.judging.drift import Absent, PinOrDrift
from nodecheck.parsers.ibstat import parse_ibstat


@value_check(
    "hca.firmware",
    what="HCA firmware",
    probes=[IBSTAT],
    doc="HCA firmware per adapter type (from ibstat) is pinned and/or the same on every node.",
)
def firmware(out: Captures, _want: PinOrDrift) -> str:
    facts = parse_ibstat(out[IBSTAT.name].stdout)
    seen = sorted({f"{ca.ca_type or '?'} {ca.firmware}" for ca in facts.cas if ca.firmware})
    if not seen:
        raise Absent("no HCA with a firmware version in ibstat output")
    return ", ".join(seen)
