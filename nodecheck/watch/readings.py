"""What one tick's readings show on their own, before the Tracker's memory of earlier ticks: the
GPUs against the low-power pattern a checkpoint save and the power deadlock share, the median of
the ranks' step times without one node's, and the process listings that failed."""

from __future__ import annotations

import statistics
from bisect import bisect_right
from dataclasses import dataclass
from typing import Any

from nodecheck.parsers.watch_sample import GpuSample
from nodecheck.watch.config import WatchConfig
from nodecheck.watch.verdicts import Tick
from nodecheck.watch.wording import fold_ranks, short_num


@dataclass(frozen=True)
class RankGpu:
    """One GPU's readings and the rank it serves (node position x gpus_per_node + GPU index)."""

    node: str
    rank: int
    gpu: GpuSample

    @property
    def name(self) -> str:
        return f"{self.node} GPU{self.gpu.index}"


@dataclass(frozen=True)
class LowPowerPattern:
    """The GPUs of one tick against the low-power pattern shared by a checkpoint save and the deadlock:
    every GPU at or below near-idle power, some ranks idle. The deadlock signature is its strict form:
    a few ranks (at most a quarter, at least one) idle and every other rank busy."""

    gpus: tuple[RankGpu, ...]
    idle: tuple[RankGpu, ...]
    busy: tuple[RankGpu, ...]
    all_low: bool
    threshold: str  # how "near idle" was judged, for messages
    cfg_busy: float
    usual_limit: float | None = None  # the median power.limit of the GPUs that print one

    @property
    def checkpoint(self) -> bool:
        return self.all_low and 0 < len(self.idle) < len(self.gpus)

    @property
    def signature(self) -> bool:
        n = len(self.gpus)
        return (
            self.all_low
            and 1 <= len(self.idle) <= max(1, n // 4)
            and len(self.idle) + len(self.busy) == n
            and len(self.busy) >= 1
        )

    def describe(self, *, odd: bool) -> str:
        """The signature (odd=True: the odd ranks against the busy rest) or the checkpoint pattern."""
        top = max(self.gpus, key=lambda g: g.gpu.power_w or 0)
        limit = self.threshold or f"of {short_num(top.gpu.power_limit_w or self.usual_limit)} W"
        power = f"max {short_num(top.gpu.power_w)} W {limit}"
        where = ", ".join(g.name for g in self.idle[:8]) + (", ..." if len(self.idle) > 8 else "")
        who = f"rank {self.idle[0].rank}" if len(self.idle) == 1 else f"ranks {fold_ranks(g.rank for g in self.idle)}"
        others = len(self.gpus) - len(self.idle)
        if odd:
            # idle and busy hold only GPUs whose utilisation was read
            utils = "/".join(
                short_num(u) for u in sorted({g.gpu.util_pct for g in self.idle if g.gpu.util_pct is not None})
            )
            busy = [g.gpu.util_pct for g in self.busy if g.gpu.util_pct is not None]
            lo, hi = min(busy), max(busy)
            reads = f"{short_num(lo)}%" if lo == hi else f"{short_num(lo)}-{short_num(hi)}%"
            return (
                f"every GPU near idle power ({power}), {who} ({where}) at {utils}% while the other "
                f"{others} ranks read {reads}"
            )
        return f"{who} ({where}) idle, the other {others} at low power ({power})"

    def busy_words(self) -> str:
        if not self.gpus:
            return "no GPU readings"
        busy = [g for g in self.gpus if g.gpu.util_pct is not None and g.gpu.util_pct >= self.cfg_busy]
        utils = [g.gpu.util_pct for g in self.gpus if g.gpu.util_pct is not None]
        powers = [g.gpu.power_w for g in self.gpus if g.gpu.power_w is not None]
        power = f", max {short_num(max(powers))} W" if powers else ""
        if busy:
            return f"GPUs read busy ({len(busy)} of {len(self.gpus)} at >= {short_num(self.cfg_busy)}%{power})"
        if not utils:  # MIG, or a driver that prints [N/A]: not "idle"
            return f"GPU utilization unknown ([N/A] on {len(self.gpus)} GPUs{power})"
        return f"GPUs read idle (max {short_num(max(utils))}%{power})"

    def summary(self) -> dict[str, Any]:
        utils = [g.gpu.util_pct for g in self.gpus if g.gpu.util_pct is not None]
        powers = [g.gpu.power_w for g in self.gpus if g.gpu.power_w is not None]
        return {
            "count": len(self.gpus),
            "util_min_pct": min(utils, default=None),
            "util_max_pct": max(utils, default=None),
            "power_max_w": max(powers, default=None),
            "busy": len(self.busy),
            "idle": len(self.idle),
            "all_low_power": self.all_low,
        }


def low_power_pattern(gpus: list[RankGpu], cfg: WatchConfig) -> LowPowerPattern:
    b = cfg.bounds
    idle = tuple(g for g in gpus if g.gpu.util_pct is not None and g.gpu.util_pct <= b.idle_util_pct)
    busy = tuple(g for g in gpus if g.gpu.util_pct is not None and g.gpu.util_pct >= b.busy_util_pct)
    # a GPU whose power.limit reads [N/A] among GPUs that print theirs (one board, a transient read) is
    # judged against theirs: one unknown limit would otherwise hide the pattern of all the others
    limits = [g.gpu.power_limit_w for g in gpus if g.gpu.power_limit_w is not None and g.gpu.power_limit_w > 0]
    usual = statistics.median(limits) if limits else None
    all_low = bool(gpus) and all(_low(g.gpu, cfg, usual) for g in gpus) and len(gpus) >= 2
    threshold = f"<= {short_num(b.low_power_w)} W" if b.low_power_w is not None else ""
    return LowPowerPattern(tuple(gpus), idle, busy, all_low, threshold, b.busy_util_pct, usual)


def _low(gpu: GpuSample, cfg: WatchConfig, usual_limit: float | None) -> bool:
    """Board power near idle; unknown power (or no limit known on any GPU, without low_power_w) is not low."""
    if gpu.power_w is None or gpu.util_pct is None:
        return False
    if cfg.bounds.low_power_w is not None:
        return gpu.power_w <= cfg.bounds.low_power_w
    limit = gpu.power_limit_w if gpu.power_limit_w is not None and gpu.power_limit_w > 0 else usual_limit
    if limit is None:
        return False
    return gpu.power_w <= cfg.bounds.low_power_fraction * limit


def median_without(every: list[float], removed: list[float]) -> float:
    """statistics.median of `every` less `removed` (both sorted; `removed` a part of `every`), in
    O(log^2 n) rather than a copy per node: 1,000 nodes x 8 ranks is 8 million otherwise."""
    left = len(every) - len(removed)

    def kth(k: int) -> float:  # the k-th smallest (0-based) of what is left
        lo, hi = 0, len(every) - 1
        while lo < hi:
            mid = (lo + hi) // 2
            value = every[mid]
            if bisect_right(every, value) - bisect_right(removed, value) >= k + 1:
                hi = mid
            else:
                lo = mid + 1
        return every[lo]

    if left % 2:
        return kth(left // 2)
    return (kth(left // 2 - 1) + kth(left // 2)) / 2


def procs_errors(tick: Tick) -> dict[str, str]:
    return {o.node: o.sample.procs_error for o in tick.nodes if o.sample is not None and o.sample.procs_error}
