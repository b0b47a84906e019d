"""Linear time, proved by growth, never by seconds: a busy machine has no fixed speed, but a linear
cost stays linear on it (issue 32, 2.5).

    assert_linear(parse_uptime, lambda n: " " * n + "12.5 1.0\\n", 20_000, ignore=ParseError)

times `work(make(n))` and `work(make(times x n))` and passes when the larger input costs under `ratio`
times the smaller one: linear is about `times` (4), quadratic `times` squared (16), so the default
ratio, 2 x times, leaves a linear cost room for noise and catches a quadratic one by 2x. Each cost is
the best of `repeats` runs in CPU seconds of this process (time.process_time): time spent waiting for
a CPU held by another process is not counted, and the two sizes are measured in turns, so a change of
conditions mid-test touches both. A cost under FLOOR_S counts as FLOOR_S (timer noise, not growth):
pick n so that the cost at n is a few milliseconds or more.

Tests that use it carry @pytest.mark.growth (pyproject's markers): tests/under_load.sh runs them again
beside a CPU hog.
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
Ignored = type[BaseException] | tuple[type[BaseException], ...]

TIMES = 4  # the larger input is this many times the smaller
REPEATS = 5  # best of: one GC pause or cache flush does not decide
FLOOR_S = 0.001  # CPU seconds below which a cost is timer noise
# once this much CPU time is spent, no further repeats: a quadratic regression fails after one pair
# instead of running REPEATS x its (long) cost
BUDGET_S = 3.0


def cpu_seconds(call: Callable[[], object], ignore: Ignored = ()) -> float:
    """CPU seconds of this process spent in `call()` (an exception of `ignore` is part of the work:
    a parser that refuses its input); the garbage collector is held off during it (a full collection
    first would cost more than most calls: the whole suite's objects are alive)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        started = time.process_time()
        try:
            call()
        except ignore:
            pass
        return time.process_time() - started
    finally:
        if was_enabled:
            gc.enable()


def growth(
    work: Callable[[T], object],
    make: Callable[[int], T],
    n: int,
    *,
    times: int = TIMES,
    repeats: int = REPEATS,
    ignore: Ignored = (),
) -> tuple[float, float]:
    """(best CPU seconds of work(make(n)), of work(make(times x n))); the inputs are built untimed.
    Fewer than `repeats` pairs once BUDGET_S is spent."""
    small_input, large_input = make(n), make(times * n)
    small = large = math.inf
    spent = 0.0
    for _ in range(repeats):
        at_n = cpu_seconds(lambda: work(small_input), ignore)
        at_times_n = cpu_seconds(lambda: work(large_input), ignore)
        small, large = min(small, at_n), min(large, at_times_n)
        spent += at_n + at_times_n
        if spent > BUDGET_S:
            break
    return small, large


def assert_linear(
    work: Callable[[T], object],
    make: Callable[[int], T],
    n: int,
    *,
    times: int = TIMES,
    ratio: float | None = None,
    repeats: int = REPEATS,
    ignore: Ignored = (),
) -> tuple[float, float]:
    """Fails unless work(make(times x n)) costs under `ratio` (default 2 x times) times work(make(n));
    returns the two costs."""
    bound = 2.0 * times if ratio is None else ratio
    small, large = growth(work, make, n, times=times, repeats=repeats, ignore=ignore)
    grew = large / max(small, FLOOR_S)
    assert grew < bound, (
        f"not linear: {small:.4f} CPU s at n={n:,}, {large:.4f} CPU s at {times}n: x{grew:.1f} "
        f"(linear is about x{times}, quadratic x{times * times}; the bound is x{bound:g})"
    )
    return small, large
