"""The running kernel, which must match across the job's nodes (read from the versions probe)."""

from __future__ import annotations

from nodecheck.checks.values import value_check
from nodecheck.core.registry import Captures
from nodecheck.judging.drift import PinOrDrift
from nodecheck.parsers.versions import parse_uname_r
from nodecheck.probes.versions import VERSIONS, ok_text, versions_sections


@value_check(
    "kernel.version",
    what="kernel",
    probes=[VERSIONS],
    doc="The running kernel (uname -r) is the pinned one and/or the same on every node.",
)
def version(out: Captures, _want: PinOrDrift) -> str:
    return parse_uname_r(ok_text(versions_sections(out), "kernel", "uname -r"))
