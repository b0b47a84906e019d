"""The OS release, which must match across the job's nodes (read from the versions probe).

Named after the check family `os`; absolute imports keep it from standing for the standard library."""

from __future__ import annotations

from nodecheck.checks.values import value_check
from nodecheck.core.registry import Captures
from nodecheck.judging.drift import PinOrDrift
from nodecheck.parsers.versions import parse_os_release
from nodecheck.probes.versions import VERSIONS, ok_text, versions_sections


@value_check(
    "os.release",
    what="OS",
    probes=[VERSIONS],
    doc="The OS release (/etc/os-release) is the pinned one and/or the same on every node.",
)
def release(out: Captures, _want: PinOrDrift) -> str:
    return parse_os_release(ok_text(versions_sections(out), "os-release", "/etc/os-release")).pretty_name
