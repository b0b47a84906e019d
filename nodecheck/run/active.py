"""The one executor of active checks (scope "active"): how an active check runs, in one file.

Passive checks hand the runner a fixed probe list. An active check (ib.pairs, nccl.allreduce_multi's
localization, nccl.env's reachability, roce.gid_stability's flap) decides what to run from what came
back, so the runner hands it a CheckContext (the nodecheck.checks.context.ActiveContext protocol) and
the check calls back for each step. The executor owns everything that is not judging:

- the deadline budget: every step is bounded by its own timeout and the run's deadline; a step with
  less than MIN_STEP_S left is SKIPPED (not started), a step the deadline cut is marked Cut.DEADLINE;
  a cleanup step (kill what an earlier step started) runs within its own timeout regardless;
- the threads: `each` runs steps in parallel, `pair_rounds` runs rounds of disjoint pairs (the pair
  planner's plan, then localization), a round the time left cannot hold is not started;
- SSH session reuse and cleanup: one session per node, opened on first use, reused by every step,
  replaced once when it died between steps, closed between pair rounds and at the end;
- the record: every capture is kept for the report (secrets masked) under a name that says which
  step it was ("ib_write_bw.r2.server"), and what the check reports (its typed data, the work it
  left undone) goes to the report's extras and its incomplete reason.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from nodecheck.checks.context import AFTER_RESERVE_S, ActiveContext, ReportData
from nodecheck.core.model import Capture, Cut, Node, Outcome, Probe, Verdict
from nodecheck.core.progress import NULL_PROGRESS, Progress
from nodecheck.core.redact import redact_argv, redact_text
from nodecheck.judging import pair_plan as planner
from nodecheck.probes.idle import OWN_JOB_VARIABLE
from nodecheck.report.json import active_extras
from nodecheck.transport import Session, Transport
from nodecheck.transport.fanout import cut_at_deadline, not_started
from nodecheck.transport.local import LocalTransport

MAX_PARALLEL = 64  # commands in flight at once, as the passive fan-out
MIN_STEP_S = 0.5  # less time than this left: the step is SKIPPED, not tried

T = TypeVar("T")
R = TypeVar("R")
Grouped = tuple[tuple[str, ...], Verdict]


def _close(session: Session) -> None:
    try:
        session.close()
    except Exception:  # closing a dead connection must not fail the run
        pass


class CommandRunner:
    """The steps of every active check of one run: one SSH session per node, opened on first use and
    reused; a dead one is replaced once. Every capture is kept (`captures`) for the report."""

    def __init__(
        self,
        transport: Transport,
        deadline: float,
        stop: threading.Event,
        parallel: int = MAX_PARALLEL,
        own_job: str | None = None,
    ) -> None:
        self.transport, self.deadline, self.stop, self.parallel = transport, deadline, stop, parallel
        # the Slurm job this run tests in: every step is told, so the idle guard exempts that job
        self.own_job = own_job if own_job and own_job.isdigit() else None
        self.captures: list[Capture] = []
        self._names: set[tuple[str, str]] = set()
        self._sessions: dict[str, Session] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    @property
    def on_this_host(self) -> bool:
        """The steps run on this machine itself (the local transport), not on a node across a network."""
        return isinstance(self.transport, LocalTransport)

    def left(self) -> float:
        return 0.0 if self.stop.is_set() else self.deadline - time.monotonic()

    def run(self, node: Node, probe: Probe, *, fresh: bool = False, cleanup: bool = False) -> Capture:
        """Run one probe, bounded by one end time for connecting and running together (see
        ActiveContext.run for `fresh` and `cleanup`)."""
        if self.own_job:
            probe = replace(probe, argv=("env", f"{OWN_JOB_VARIABLE}={self.own_job}", *probe.argv))
        left = probe.timeout_s if cleanup else min(probe.timeout_s, self.left())
        if left < MIN_STEP_S:
            return self._keep(not_started(node, probe, Cut.SIGNAL if self.stop.is_set() else Cut.DEADLINE))
        end = time.monotonic() + left
        if fresh:
            session = self.transport.connect(node, left)
            try:
                capture = session.run(probe, max(end - time.monotonic(), MIN_STEP_S))
            finally:
                _close(session)
        else:
            session = self._session(node, left)
            capture = session.run(probe, max(end - time.monotonic(), MIN_STEP_S))
            if capture.cut is Cut.CONNECTION_LOST and end - time.monotonic() >= MIN_STEP_S:
                # the cached connection died between steps and nothing ran: once more on a new one
                session = self._session(node, end - time.monotonic(), replace_failed=session)
                capture = session.run(probe, max(end - time.monotonic(), MIN_STEP_S))
        if capture.outcome is Outcome.TIMEOUT and left < probe.timeout_s:
            capture = cut_at_deadline(capture, left, probe)
        return self._keep(capture)

    def close(self) -> None:
        """Close every cached connection (between pair-test rounds too: thousands of idle SSH
        transports would hold a thread and a descriptor each)."""
        with self._lock:
            sessions, self._sessions = list(self._sessions.values()), {}
        for s in sessions:
            _close(s)

    def _session(self, node: Node, budget: float, replace_failed: Session | None = None) -> Session:
        with self._lock:
            lock = self._locks.setdefault(node.name, threading.Lock())
        with lock:  # one connect per node even when steps race
            current = self._sessions.get(node.name)
            if current is not None and current is not replace_failed:
                return current  # (another step already replaced a failed one)
            session = self.transport.connect(node, budget)
            self._sessions[node.name] = session
        if replace_failed is not None:
            _close(replace_failed)
        return session

    def _keep(self, capture: Capture) -> Capture:
        """Recorded for the report; a step that ran twice under one name keeps both (".2"). What is
        recorded has its secrets masked (redact: NAME=value of a secret-looking name, --token VALUE,
        URL credentials), whatever a tool echoed; the check itself judges what came back."""
        with self._lock:
            name, n = capture.probe, 1
            while (capture.node, name) in self._names:
                n += 1
                name = f"{capture.probe}.{n}"
            if name != capture.probe:
                capture = replace(capture, probe=name)
            self._names.add((capture.node, name))
            self.captures.append(
                replace(
                    capture,
                    argv=redact_argv(capture.argv),
                    stdout=redact_text(capture.stdout),
                    stderr=redact_text(capture.stderr),
                    detail=redact_text(capture.detail),
                )
            )
        return capture


@dataclass
class CheckContext:
    """One active check's ActiveContext: its nodes, its passive captures, and the executor's steps."""

    check: str
    nodes: Mapping[str, Node]  # the nodes it may use: their passive probes came back
    captures: Mapping[str, Mapping[str, Capture]]  # node -> this check's passive captures
    commands: CommandRunner
    allow_disruptive: bool = False  # --allow-disruptive on the command line
    order: Sequence[str] = ()  # every node of the run, inventory order
    data: ReportData | None = None  # the check's data for the report (pair matrix)
    undone: list[str] = field(default_factory=list)  # planned work left undone, in words
    progress: Progress = NULL_PROGRESS  # the check's sub-phases (a person's terminal; else nowhere)

    @property
    def parallel(self) -> int:
        return self.commands.parallel

    @property
    def on_this_host(self) -> bool:
        return self.commands.on_this_host

    def run(self, node: str, probe: Probe, *, fresh: bool = False, cleanup: bool = False) -> Capture:
        return self.commands.run(self.nodes[node], probe, fresh=fresh, cleanup=cleanup)

    def left(self) -> float:
        return self.commands.left()

    def stopped(self) -> bool:
        return self.commands.stop.is_set()

    def each(self, items: Sequence[T], step: Callable[[T], R], *, workers: int | None = None) -> list[R]:
        if not items:
            return []
        with ThreadPoolExecutor(
            max_workers=max(1, workers or min(len(items), self.parallel)), thread_name_prefix=f"nodecheck-{self.check}"
        ) as pool:
            return list(pool.map(self._told(step), items))

    def _told(self, step: Callable[[T], R]) -> Callable[[T], R]:
        """`step`, with progress told when its item is one of the check's nodes (a step per node)."""

        def told(item: T) -> R:
            if not (isinstance(item, str) and item in self.nodes):
                return step(item)
            self.progress.started(item)
            try:
                return step(item)
            finally:
                self.progress.done(item)

        return told

    def pair_rounds(
        self,
        nodes: Sequence[str],
        test: Callable[[int, planner.Pair], T],
        judge: Callable[[planner.Round, planner.Pair, T], bool | None],
        *,
        wave_s: float,
        not_run: Callable[[planner.Round, float, float], None],
        pairing: planner.Pairing,
        groups: Mapping[str, str] | None = None,
        steer: planner.Steer = "any",
        max_rounds: int,
    ) -> tuple[list[planner.PairResult], planner.Blame]:
        planned = 0  # the plan's rounds, known from its first round (Round.of)

        def run_round(rnd: planner.Round) -> list[planner.PairResult]:
            nonlocal planned
            planned = rnd.of or planned
            self.progress.phase(_round_name(rnd, planned, max_rounds), len(rnd.pairs), "pair")
            # every pair of a round at once, `parallel` at most; more pairs than that run in waves
            waves = math.ceil(len(rnd.pairs) / max(1, min(len(rnd.pairs), self.parallel)))
            needs = waves * wave_s + AFTER_RESERVE_S
            left = self.left()
            if left < needs:  # a round cut by the deadline would blame healthy nodes
                not_run(rnd, left, needs)
                return []
            # rounds are numbered from 1 in messages, capture names and the report
            done = self.each(list(rnd.pairs), lambda pair: self._pair(test, rnd.index + 1, pair))
            self.commands.close()  # idle connections are not kept between rounds
            results = []
            for pair, outcome in zip(rnd.pairs, done):
                ok = judge(rnd, pair, outcome)
                if ok is not None:  # None: never ran or cut, no evidence either way
                    results.append(planner.PairResult(pair, rnd.index, ok))
            return results

        return planner.localize(nodes, run_round, pairing=pairing, groups=groups, steer=steer, max_rounds=max_rounds)

    def _pair(self, test: Callable[[int, planner.Pair], T], number: int, pair: planner.Pair) -> T:
        label = f"{pair.a}+{pair.b}"
        self.progress.started(label)
        try:
            return test(number, pair)
        finally:
            self.progress.done(label)

    def report(self, data: ReportData) -> None:
        self.data = data

    def incomplete(self, why: str) -> None:
        self.undone.append(why)

    @property
    def extras(self) -> dict:
        """What the report's extras hold for this check ({} when it reported nothing)."""
        return active_extras(self.data, self.undone)


def _round_name(rnd: planner.Round, planned: int, max_rounds: int) -> str:
    """A pair round as a person reads it: the plan's "round 1 of 2", then "localization round 1
    (at most 3)" (localization rounds are numbered on from the plan's `planned`)."""
    if rnd.of:
        return f"round {rnd.index + 1} of {rnd.of}"
    return f"localization round {rnd.index + 1 - planned} (at most {max_rounds})"


@dataclass
class ActiveOutcome:
    """What one active check left: its verdicts by node group, its steps' captures, its report data."""

    grouped: list[Grouped]
    captures: list[Capture]
    extras: dict  # the JSON report's entry for it ({}: none)
    undone: list[str]  # planned work it left undone (the run is incomplete)


def run_check(
    name: str,
    judge: Callable[..., Iterable[Any]],
    params: object,
    nodes: Mapping[str, Node],
    captures: Mapping[str, Mapping[str, Capture]],
    commands: CommandRunner,
    allow_disruptive: bool,
    order: Sequence[str],
    on_error: Callable[[Exception], Verdict],
    progress: Progress = NULL_PROGRESS,
) -> ActiveOutcome:
    """Run one active check on `nodes` (the ones whose passive probes came back). A check that raises
    gets on_error's verdict for all of them: a check bug must not take the report down."""
    ctx = CheckContext(name, nodes, captures, commands, allow_disruptive, order, progress=progress)
    view: ActiveContext = ctx  # all the check sees (and what mypy holds CheckContext to)
    first = len(commands.captures)
    try:
        grouped: list[Grouped] = list(judge(view, params))
    except Exception as e:
        grouped = [(tuple(nodes), on_error(e))]
    return ActiveOutcome(grouped, commands.captures[first:], ctx.extras, list(ctx.undone))
