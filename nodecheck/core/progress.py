"""How far a long command has got, as data: the phase, items done of the total, and what is still out
and since when. Not a UI: nodecheck/app/progress_view.py draws it on a terminal; everything else
(the Prolog, a pipe, JSON output) gets NULL_PROGRESS and pays nothing.

It lives in core because the layers that report it sit low: transport (the passive fan-out ticks a
node per worker), checks (an active check names its sub-phases: "round 1 of 2"), run (a phase per
check). They call three methods (the `Progress` protocol); the runner also sets how many phases the
run has and hands each active check a view whose phases are sub-phases of the check's own.

Thread-safe: the fan-out's workers and an active check's steps report from their own threads while
the view reads snapshots from another.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol


class Progress(Protocol):
    """What a phase reports: its name and size, then each item as it starts and as it ends."""

    def phase(self, name: str, total: int, unit: str = "node") -> None:
        """A new phase of `total` items (0: not counted); what the previous one left out is dropped."""
        ...

    def started(self, item: str) -> None:
        """`item` (a node, a pair "a+b", a test) is now out; from now its age counts."""
        ...

    def done(self, item: str) -> None:
        """`item` came back (however it ended): counted once per phase, however often it ran."""
        ...


class RunProgress(Progress, Protocol):
    """What the runner holds: the protocol, plus the run's number of phases and a sub-phase view."""

    def steps(self, count: int) -> None:
        """How many phases the run has (the "2/5" of a line); phases are numbered from here on."""
        ...

    def within(self) -> Progress:
        """A Progress whose phases are sub-phases of the current phase (an active check's rounds)."""
        ...


class NullProgress:
    """Progress that goes nowhere: non-TTY, JSON/JUnit output, the Prolog and health gates."""

    def phase(self, name: str, total: int, unit: str = "node") -> None:
        pass

    def started(self, item: str) -> None:
        pass

    def done(self, item: str) -> None:
        pass

    def steps(self, count: int) -> None:
        pass

    def within(self) -> Progress:
        return self


NULL_PROGRESS = NullProgress()


@dataclass(frozen=True)
class Out:
    """An item still out and for how long."""

    item: str
    age_s: float


@dataclass(frozen=True)
class State:
    """A snapshot: what a view draws."""

    step: int  # the phase's number in the run, from 1 (0: no phase yet)
    steps: int  # the run's number of phases (0: not said)
    phase: str  # "probes", "ib.pairs"
    sub: str  # the check's own sub-phase ("round 1 of 2"); "" for none
    done: int
    total: int  # 0: the phase does not count its items
    unit: str
    out: tuple[Out, ...]  # oldest first
    elapsed_s: float  # since the phase (or sub-phase) began


class Tracker:
    """The progress model: one current phase (and sub-phase), its counts and its outstanding items."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._step = self._steps = 0
        self._phase = self._sub = ""
        self._unit = "node"
        self._total = 0
        self._since = clock()
        self._done: set[str] = set()
        self._out: dict[str, tuple[float, int]] = {}  # item -> (out since, how many runs of it are out)

    def steps(self, count: int) -> None:
        with self._lock:
            self._steps, self._step = max(0, count), 0

    def phase(self, name: str, total: int, unit: str = "node") -> None:
        with self._lock:
            self._step += 1
            self._phase = name
            self._begin("", total, unit)

    def subphase(self, name: str, total: int, unit: str = "node") -> None:
        """A new sub-phase of the current phase: its own counts, the phase's name and number kept."""
        with self._lock:
            self._begin(name, total, unit)

    def _begin(self, sub: str, total: int, unit: str) -> None:
        self._sub, self._total, self._unit = sub, max(0, total), unit
        self._since = self._clock()
        self._done = set()
        self._out = {}

    def started(self, item: str) -> None:
        with self._lock:
            since, n = self._out.get(item, (self._clock(), 0))
            self._out[item] = (since, n + 1)

    def done(self, item: str) -> None:
        with self._lock:
            self._done.add(item)
            since, n = self._out.pop(item, (0.0, 0))
            if n > 1:  # another run of the same item is still out
                self._out[item] = (since, n - 1)

    def within(self) -> Progress:
        return _Within(self)

    def snapshot(self) -> State:
        with self._lock:
            now = self._clock()
            out = sorted(self._out.items(), key=lambda kv: (kv[1][0], kv[0]))
            return State(
                step=self._step,
                steps=self._steps,
                phase=self._phase,
                sub=self._sub,
                done=len(self._done),
                total=self._total,
                unit=self._unit,
                out=tuple(Out(item, max(0.0, now - since)) for item, (since, _) in out),
                elapsed_s=max(0.0, now - self._since),
            )


class _Within:
    """A check's view of the tracker: its phases are sub-phases of the check's phase."""

    def __init__(self, tracker: Tracker) -> None:
        self._tracker = tracker

    def phase(self, name: str, total: int, unit: str = "node") -> None:
        self._tracker.subphase(name, total, unit)

    def started(self, item: str) -> None:
        self._tracker.started(item)

    def done(self, item: str) -> None:
        self._tracker.done(item)


@contextmanager
def single(progress: Progress, phase: str, item: str, unit: str = "test") -> Iterator[None]:
    """A phase of one item that is out while the block runs (a multi-node test)."""
    progress.phase(phase, 1, unit)
    progress.started(item)
    try:
        yield
    finally:
        progress.done(item)
