"""The RDMA userspace stack (MLNX/DOCA OFED, else rdma-core), which must match across the job's nodes."""

from __future__ import annotations

from nodecheck.checks.values import value_check
from nodecheck.core.registry import Captures
from nodecheck.judging.drift import Absent, PinOrDrift
from nodecheck.parsers.versions import parse_ofed_info
from nodecheck.probes.versions import VERSIONS, versions_sections


@value_check(
    "ofed.version",
    what="OFED",
    probes=[VERSIONS],
    doc="MLNX/DOCA OFED (ofed_info -s), else the rdma-core package, is pinned and/or the same on every node.",
)
def version(out: Captures, _want: PinOrDrift) -> str:
    sections = versions_sections(out)
    ofed = sections.get("ofed")
    if ofed is not None and ofed.ok:
        value = parse_ofed_info(ofed.text)
        if value:
            return value
    rdma = sections.get("rdma-core")
    if rdma is not None and rdma.ok and rdma.text.strip():
        return f"rdma-core {rdma.text.strip().splitlines()[0]}"
    raise Absent("neither ofed_info nor an rdma-core package found (no RDMA userspace stack)")
