"""The bandwidth model: each collective's data counts and bus-bandwidth factor, the sizes a sweep
steps through, and the bandwidth curve towards the plateau nccl.json gives."""

from __future__ import annotations

from dataclasses import dataclass

from nccl_tests.options import Options
from nccl_tests.state import PERF_TOOLS

CURVE_BYTES = 16 << 20  # busbw(size) = plateau * size / (size + 16 MiB)


@dataclass(frozen=True)
class Collective:
    name: str  # program name
    reduces: bool  # has a reduction op (all_reduce, reduce_scatter); others print "none"

    def counts(self, size: int, elt: int, nranks: int) -> tuple[int, int]:
        """(bytes printed, count printed) of one step: getCollByteCount + max(send, recv) bytes."""
        count = size // elt
        if self.name == "all_reduce_perf":
            return count * elt, count
        base = (count // nranks) & -(16 // elt)
        return base * nranks * elt, base

    def factor(self, nranks: int, env: dict) -> float:
        """busbw / algbw (all_reduce.cu, all_gather.cu, reduce_scatter.cu, alltoall.cu getBw)."""
        if self.name == "all_reduce_perf":
            if env.get("NCCL_ALGO") in ("NVLS", "NVLSTREE"):
                return (nranks - 1) / (nranks + 1)
            return 2 * (nranks - 1) / nranks
        return (nranks - 1) / nranks


COLLECTIVES = {n: Collective(n, n in ("all_reduce_perf", "reduce_scatter_perf")) for n in PERF_TOOLS}


def step_sizes(o: Options) -> list[int]:
    sizes, size = [], o.min_bytes
    while size <= o.max_bytes and len(sizes) < 4096:
        sizes.append(size)
        nxt = size * o.step_factor if o.step_factor > 1 else size + o.step_bytes
        if nxt <= size:
            break
        size = nxt
    return sizes


def curve(plateau: float, size: int, factor: float) -> tuple[float, float, float]:
    """(time us, algbw, busbw): busbw = plateau*S/(S+16MiB), algbw = busbw/factor, time = S/algbw/1e3."""
    shape = size / (size + CURVE_BYTES)
    if factor <= 0:  # one rank: nothing crosses a bus
        algbw = plateau * shape
        return (size + CURVE_BYTES) / plateau / 1e3, algbw, 0.0
    busbw = plateau * shape
    return factor * (size + CURVE_BYTES) / plateau / 1e3, busbw / factor, busbw
