"""How the watcher's messages write numbers, durations and rank lists."""

from __future__ import annotations

from ClusterShell.RangeSet import RangeSet


def fold_ranks(ranks) -> str:
    """Folded rank list: 3,8-15."""
    return str(RangeSet.fromlist([str(r) for r in sorted(set(ranks))]))


def short_num(value: float | None) -> str:
    if value is None:
        return "?"
    return f"{value:.0f}" if value == int(value) or abs(value) >= 100 else f"{value:.3g}"


def duration(seconds: float) -> str:
    """40 s, 2 min 10 s, 12 min, 3.2 h; tenths under 10 s (time-compressed tests sample every
    fraction of a second)."""
    seconds = max(0.0, seconds)
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 600:
        minutes, rest = divmod(round(seconds), 60)
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
