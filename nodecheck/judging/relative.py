"""Fleet-relative judging, pure: a value against its peers' median (the same test on the same
hardware in the same run) and against the node's own recent sweeps.

A fixed floor is set low enough to pass every healthy SKU, so a GPU 15 % slower than its 63
identical neighbours passes it; its peers say it is slow. Peers are robust statistics: the median
and the median absolute deviation (MAD), so one or two bad values in a group do not move the bar
for the rest. The check decides what a group is (GPU model, variant and GPU count, HCA and port
rate); this module only compares within one.

The MAD is reported unscaled (the median of |x - median|, in the value's unit); only the noise test
scales it by 1.4826 (the MAD of a normal distribution is 0.6745 sigma), so mad_k reads as "standard
deviations".
"""

from __future__ import annotations

import math
import statistics
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass

from nodecheck.core.model import Status, Verdict
from nodecheck.core.thresholds import Relative, fmt

MAD_SCALE = 1.4826  # MAD -> standard deviation for normally distributed values


@dataclass(frozen=True)
class Sample:
    """One measurement: of `nodes` (one node, or a pair), named `subject` ("GPU3", "mlx5_0"), in
    `group` (what it may be compared with: "NVIDIA H100 80GB HBM3")."""

    nodes: tuple[str, ...]
    subject: str
    group: str
    value: float


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def robust(values: Sequence[float]) -> tuple[float, float]:
    """(median, MAD) of finite values, the MAD unscaled; raises ValueError on no values."""
    if not values:
        raise ValueError("robust() needs at least one value")
    median = statistics.median(values)
    return median, statistics.median(abs(v - median) for v in values)


def _median_without(ordered: Sequence[float], k: int) -> float:
    """The median of sorted `ordered` with the item at index k left out, by index arithmetic."""
    h = len(ordered) - 1

    def at(i: int) -> float:
        return ordered[i] if i < k else ordered[i + 1]

    return at(h // 2) if h % 2 else (at(h // 2 - 1) + at(h // 2)) / 2


class _Group:
    """Leave-one-out (median, MAD) for every member of a group in O(n log n), not O(n^2 log n):
    without one item the median takes at most three values, and for each of them the deviations
    are sorted once; leaving one item out of a sorted list is index arithmetic (any equal item left
    out leaves the same multiset). Equal to robust() of the others (a test holds them equal)."""

    def __init__(self, values: Sequence[float]) -> None:
        self.ordered = sorted(values)
        self._deviations: dict[float, list[float]] = {}

    def without(self, value: float) -> tuple[float, float]:
        k = bisect_left(self.ordered, value)
        median = _median_without(self.ordered, k)
        deviations = self._deviations.get(median)
        if deviations is None:
            deviations = self._deviations[median] = sorted(abs(v - median) for v in self.ordered)
        return median, _median_without(deviations, bisect_left(deviations, abs(value - median)))


def judge_relative(samples: Sequence[Sample], band: Relative, *, what: str, unit: str) -> list[Verdict | None]:
    """One entry per sample, in order: a WARN or FAIL verdict for a value below its peers' median by
    more than the band's percentages (and, with mad_k, by more than the group's noise), else None
    (within the band, too few peers, or no finite value). Peers: the other samples of its group;
    a non-finite value is nobody's peer."""
    members: dict[str, list[float]] = {}
    for s in samples:
        if _finite(s.value):
            members.setdefault(s.group, []).append(float(s.value))
    groups = {g: _Group(vs) for g, vs in members.items()}
    return [_judge_one(s, groups.get(s.group), band, what, unit) for s in samples]


def _judge_one(s: Sample, group: _Group | None, band: Relative, what: str, unit: str) -> Verdict | None:
    if group is None or not _finite(s.value):
        return None
    peers = len(group.ordered) - 1
    if peers < band.min_peers:
        return None
    value = float(s.value)
    median, mad = group.without(value)
    if median <= 0:  # a share of nothing: no percentage to judge by
        return None
    below = (median - value) / median * 100
    if band.mad_k > 0 and median - value <= band.mad_k * MAD_SCALE * mad:
        return None  # the group is too noisy to tell this value apart
    found = [
        (status, pct)
        for status, pct in ((Status.FAIL, band.fail_below_pct), (Status.WARN, band.warn_below_pct))
        if pct is not None and value < median * (1 - pct / 100)
    ]
    if not found:
        return None
    status, pct = found[0]
    u = f" {unit}" if unit else ""
    return Verdict(
        status,
        f"{s.subject}: {what} {_num(value)}{u}, {below:.1f}% below its peers' median {_num(median)}{u} "
        f"(MAD {_num(mad)}{u}, {peers} peers, {s.group})",
        s.subject,
        {
            what: value,
            "peers_median": median,
            "peers_mad": mad,
            "peers": peers,
            "below_median_pct": round(below, 2),
            "group": s.group,
        },
        {"min": median * (1 - pct / 100), "peers_median": median},
    )


def _num(value: float) -> str:
    """3 significant digits at least, no float noise: 598, 705, 1.1, 0.0123."""
    return fmt(float(f"{value:.4g}")) if abs(value) < 1000 else fmt(round(value, 1))


def judge_history(
    value: float, history: Sequence[float], band: Relative, *, what: str, unit: str, subject: str = ""
) -> Verdict | None:
    """WARN when the value is below this node's own median of its recent sweeps (history, the
    non-finite entries left out) by more than history_warn_below_pct; else None."""
    pct = band.history_warn_below_pct
    past = [float(h) for h in history if _finite(h)]
    if pct is None or not past or not _finite(value):
        return None
    median = statistics.median(past)
    if median <= 0 or not value < median * (1 - pct / 100):
        return None
    below = (median - value) / median * 100
    u = f" {unit}" if unit else ""
    head = f"{subject}: " if subject else ""
    return Verdict(
        Status.WARN,
        f"{head}{what} {_num(value)}{u}, {below:.1f}% below this node's median of its last {len(past)} "
        f"sweep{'s' if len(past) != 1 else ''} ({_num(median)}{u})",
        subject,
        {what: value, "history_median": median, "history": len(past), "below_median_pct": round(below, 2)},
        {"min": median * (1 - pct / 100), "history_median": median},
    )


def worse(first: Verdict, second: Verdict | None) -> Verdict:
    """The more severe of two verdicts about the same thing; on a tie, the first."""
    if second is None or second.status.rank <= first.status.rank:
        return first
    return second
