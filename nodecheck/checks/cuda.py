"""The CUDA version the NVIDIA driver supports, which must match across the job's nodes (read from
the GPU probe)."""

from __future__ import annotations

from nodecheck.checks.gpu import GPU, reported_version
from nodecheck.checks.values import value_check
from nodecheck.core.registry import Captures
from nodecheck.judging.drift import PinOrDrift


@value_check(
    "cuda.version",
    what="CUDA driver API",
    probes=[GPU],
    doc="The CUDA version the driver supports is pinned and/or the same on every node.",
)
def version(out: Captures, _want: PinOrDrift) -> str:
    return reported_version(out, "cuda_driver_version", "CUDA driver version")
