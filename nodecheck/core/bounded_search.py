"""Regular-expression searches a judge makes, bounded by the run's deadline.

A site's own patterns (command.<label> match / no_match / value, NHC's imported /regex/) are searched
in tool output a node sent. Python's re cannot be interrupted, and a pattern that backtracks can run
for hours on a few KiB, past any deadline ("judging inside the run's deadline", issue 32). So these
searches use the `regex` module, whose searches take a timeout: each gets what is left of the
judging deadline the runner sets (judging_until), at most SEARCH_MAX_S, and at least SEARCH_MIN_S
(judging happens after the probes, which may have used the deadline up: a linear search of 64 KiB
takes milliseconds, so this floor costs a real pattern nothing). A search that runs out is
SearchTimeout: the judge says the pattern was not judged, never PASS.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextvars import ContextVar

import regex

SEARCH_MAX_S = 5.0
SEARCH_MIN_S = 0.05
MULTILINE = regex.MULTILINE
_DEADLINE: ContextVar[float | None] = ContextVar("nodecheck_judging_deadline", default=None)


class SearchTimeout(Exception):
    """The pattern did not finish within `seconds` on `size` characters."""

    def __init__(self, seconds: float, size: int) -> None:
        super().__init__(f"did not finish within {seconds:.2g} s on {size:,} characters")
        self.seconds, self.size = seconds, size


@contextlib.contextmanager
def judging_until(deadline: float) -> Iterator[None]:
    """Searches in this context (this thread) end by the monotonic `deadline`, as far as SEARCH_MIN_S allows."""
    token = _DEADLINE.set(deadline)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def budget_s() -> float:
    """The time the next search may take."""
    deadline = _DEADLINE.get()
    left = SEARCH_MAX_S if deadline is None else deadline - time.monotonic()
    return min(SEARCH_MAX_S, max(SEARCH_MIN_S, left))


def compile_pattern(pattern: str, flags: int = 0) -> regex.Pattern:
    """The pattern as the searches read it (regex.error when it is not one)."""
    return regex.compile(pattern, flags)


def search(pattern: str, text: str, flags: int = 0) -> regex.Match | None:
    """regex.search within budget_s(); SearchTimeout when it runs out."""
    seconds = budget_s()
    try:
        return regex.compile(pattern, flags).search(text, timeout=seconds)
    except TimeoutError:
        raise SearchTimeout(seconds, len(text)) from None
