"""What an active check (scope "active") is handed: the nodes it may use and a way to run its probe
steps on them. The executor that implements it is nodecheck/run/active.py.

Passive checks hand the runner a fixed probe list. Active checks (pairwise bandwidth, a port flap,
reachability) decide what to run from what came back, so they call back into the executor: every
step is bounded by its own timeout and the run's deadline, steps run in parallel through `each` and
rounds of disjoint pairs through `pair_rounds`, and the executor keeps every capture for the report.
A check never opens a connection or a thread itself, and never imports the transport.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, TypeVar

from nodecheck.core.model import Capture, Node, Probe
from nodecheck.core.progress import Progress
from nodecheck.judging.pair_plan import Blame, Pair, Pairing, PairResult, Round, Steer

T = TypeVar("T")
R = TypeVar("R")

# what an active check leaves of the deadline for the probes that read again after the active checks
# (ib.counters' second read): a step that would eat into it is not started
AFTER_RESERVE_S = 30


class ReportData(Protocol):
    """An active check's data for the JSON report (the pair matrix, the tests it ran), typed; the
    report writes it under the check's name in "extras" (nodecheck.report.json.active_extras)."""

    def as_json(self, incomplete: Sequence[str]) -> dict: ...


class ActiveContext(Protocol):
    """An active check's view of the run."""

    check: str
    nodes: Mapping[str, Node]  # the nodes it may use: their passive probes came back
    captures: Mapping[str, Mapping[str, Capture]]  # node -> this check's passive captures
    allow_disruptive: bool  # --allow-disruptive on the command line
    order: Sequence[str]  # every node of the run, inventory order
    # the check's sub-phases for a person watching ("level 2"); `each` over node names and
    # `pair_rounds` (a phase per round, a pair per item) tell it their items themselves
    progress: Progress

    @property
    def parallel(self) -> int:
        """Steps in flight at once, at most."""
        ...

    @property
    def on_this_host(self) -> bool:
        """The nodes are this machine, reached without a network (the local transport: --local, the
        Prolog, health): nodecheck's own host is then no vantage point apart from the node."""
        ...

    def run(self, node: str, probe: Probe, *, fresh: bool = False, cleanup: bool = False) -> Capture:
        """One step on one node. `fresh`: on a connection of its own (one may have been cut on
        purpose), closed after. `cleanup`: undoes what an earlier step started (kill test servers,
        check a flapped port): it runs within its own timeout even past the deadline or a stop."""
        ...

    def left(self) -> float:
        """Seconds left before the run's deadline; 0 once a stop was asked."""
        ...

    def stopped(self) -> bool:
        """A stop request (SIGTERM, Ctrl-C) came."""
        ...

    def each(self, items: Sequence[T], step: Callable[[T], R], *, workers: int | None = None) -> list[R]:
        """step(item) for every item, in parallel (at most `workers`, default `parallel`), results in
        the items' order."""
        ...

    def pair_rounds(
        self,
        nodes: Sequence[str],
        test: Callable[[int, Pair], T],
        judge: Callable[[Round, Pair, T], bool | None],
        *,
        wave_s: float,
        not_run: Callable[[Round, float, float], None],
        pairing: Pairing,
        groups: Mapping[str, str] | None = None,
        steer: Steer = "any",
        max_rounds: int,
    ) -> tuple[list[PairResult], Blame]:
        """Rounds of disjoint pairs (nodecheck.judging.pair_plan: the plan, then localization).
        test(round number from 1, pair) runs one pair test; judge(round, pair,
        what test returned) says whether the pair passed (None: no evidence either way). A round
        that needs more than the time left (waves of `parallel` pairs, `wave_s` each, plus
        AFTER_RESERVE_S) is not started: not_run(round, seconds left, seconds needed)."""
        ...

    def report(self, data: ReportData) -> None:
        """The check's data for the JSON report (kept as it is when the check ends)."""
        ...

    def incomplete(self, why: str) -> None:
        """Planned work the check left undone (a round, a test): the run is then incomplete."""
        ...
