"""Bounded fan-out: every node's probes over one session, at most `fanout` nodes at once, one deadline
(on this machine a node's probes also run side by side, at most PROBES_AT_ONCE of them).

Workers are daemon threads, not a ThreadPoolExecutor: an SSH library stuck past every timeout must
not keep the process alive at exit, and the run must report at its deadline (or when it is told to
stop) whatever has come back.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

from nodecheck.core.model import Capture, Cut, Node, Outcome, Probe
from nodecheck.core.progress import NULL_PROGRESS, Progress
from nodecheck.transport import CUT_AT_DEADLINE, Transport

STRAGGLER_GRACE_S = 5.0  # how long past the deadline we wait for a stuck worker
STOP_GRACE_S = 1.0  # after a stop request, how long running probes may finish
POLL_S = 0.2  # how often the waiting thread looks at the stop request

Captures = dict[tuple[str, str], Capture]  # (node, probe) -> Capture


@dataclass
class FanoutResult:
    captures: Captures
    incomplete: str  # why probes were skipped or cut short; "" if none were


class _Run:
    """The shared state of one fan-out: results, the deadline and the stop request."""

    def __init__(self, work: Mapping[Node, Sequence[Probe]], deadline: float, stop: threading.Event) -> None:
        self.work, self.deadline, self.stop = work, deadline, stop
        self.captures: Captures = {}
        self.started: set[str] = set()  # nodes a worker has taken up
        self.lock = threading.Lock()
        self.incomplete = ""

    def record(self, capture: Capture, cut_short: bool = False) -> None:
        with self.lock:
            self.captures.setdefault((capture.node, capture.probe), capture)
            if cut_short and not self.incomplete:
                self.incomplete = self.why_cut()

    def why_cut(self) -> str:
        return why_cut(self.cut())

    def cut(self) -> Cut:
        return Cut.SIGNAL if self.stop.is_set() else Cut.DEADLINE

    def left(self) -> float:
        """Seconds a probe may still take: none once the deadline passed or a stop was asked."""
        return 0.0 if self.stop.is_set() else self.deadline - time.monotonic()


def run_probes(
    transport: Transport,
    work: Mapping[Node, Sequence[Probe]],
    *,
    fanout: int,
    deadline: float,
    stop: threading.Event | None = None,
    progress: Progress = NULL_PROGRESS,
) -> FanoutResult:
    """Run each node's probes over one session, in order (side by side where the session says it can:
    the local one); `deadline` is a time.monotonic() value. The captures come back in the order of
    `work`, whatever order they arrived in.
    Setting `stop` (e.g. from a SIGTERM handler) ends the run early with what has come back.
    A transport that runs a probe on many nodes at once (srun: one step per round) does it its way.
    `progress` hears each node start and end (the caller names the phase)."""

    if (rounds := getattr(transport, "run_rounds", None)) is not None:
        for node in work:  # one step for them all: every node is out from now
            progress.started(node.name)
        return rounds(work, deadline=deadline, on_node_done=progress.done, stop=stop)
    run = _Run(work, deadline, stop or threading.Event())
    todo: queue.Queue = queue.Queue()
    for node in work:
        todo.put(node)
    finished = threading.Semaphore(0)

    def worker() -> None:
        for node in _taken(todo):
            with run.lock:
                run.started.add(node.name)
            progress.started(node.name)
            try:
                _run_node(transport, node, run)
            except Exception as e:  # a bug here must not pass for a deadline or vanish
                for probe in work[node]:
                    run.record(_internal_error(node, probe, e))
            finally:
                finished.release()
                progress.done(node.name)

    for _ in range(max(1, min(fanout, len(work)))):
        threading.Thread(target=worker, daemon=True, name="nodecheck-fanout").start()
    _wait(run, finished, len(work))
    with run.lock:  # anything still missing is reported, never dropped
        for node, probes in work.items():
            for probe in probes:
                if (node.name, probe.name) not in run.captures:
                    run.captures[(node.name, probe.name)] = _unfinished(node, probe, run)
                    run.incomplete = run.incomplete or run.why_cut()
        # in the order of the work, not of arrival: the report is the same document however the
        # nodes and a node's probes raced
        ordered = {(n.name, p.name): run.captures[(n.name, p.name)] for n, probes in work.items() for p in probes}
        return FanoutResult({**ordered, **run.captures}, run.incomplete)


def _wait(run: _Run, finished: threading.Semaphore, count: int) -> None:
    """Until every node is done, or the deadline plus one grace, or a stop plus a short grace."""
    give_up = run.deadline + STRAGGLER_GRACE_S  # one grace for the whole run, not one per node
    for _ in range(count):
        while not finished.acquire(timeout=POLL_S):
            now = time.monotonic()
            if now >= give_up:
                return
            if run.stop.is_set():
                give_up = min(give_up, now + STOP_GRACE_S)


def _run_node(transport: Transport, node: Node, run: _Run) -> None:
    probes = run.work[node]
    if run.left() <= 0:
        for probe in probes:
            run.record(_skipped(node, probe, run), cut_short=True)
        return
    session = transport.connect(node, run.left())
    try:
        width = min(len(probes), getattr(session, "probes_at_once", 1))
        if width > 1:
            _run_side_by_side(session, node, probes, run, width)
        else:
            for probe in probes:
                _run_one(session, node, probe, run)
    finally:
        session.close()


def _run_one(session, node: Node, probe: Probe, run: _Run) -> None:
    left = run.left()
    if left <= 0:
        run.record(_skipped(node, probe, run), cut_short=True)
        return
    budget = min(probe.timeout_s, left)
    capture = session.run(probe, budget)
    cut = capture.outcome is Outcome.TIMEOUT and budget < probe.timeout_s
    if cut:
        capture = cut_at_deadline(capture, budget, probe)
    run.record(capture, cut_short=cut)


def _run_side_by_side(session, node: Node, probes: Sequence[Probe], run: _Run, width: int) -> None:
    """A session whose probes are each a process of their own (the local one: the node Prolog) runs
    them `width` at a time, so the node takes as long as its slowest probe, not their sum. Each keeps
    its own timeout; a probe that hangs holds one lane, not its siblings. Lanes are daemon threads,
    waited for until the deadline's grace: what is still out then is reported by the caller. A
    measurement (Probe.alone) runs after them, one at a time, with nothing beside it."""
    todo: queue.SimpleQueue[Probe] = queue.SimpleQueue()
    for probe in probes:
        if not probe.alone:
            todo.put(probe)

    def lane() -> None:
        for probe in _taken(todo):
            try:
                _run_one(session, node, probe, run)
            except Exception as e:  # a bug here must not pass for a deadline or vanish
                run.record(_internal_error(node, probe, e))

    lanes = [threading.Thread(target=lane, daemon=True, name=f"nodecheck-probe-{i}") for i in range(width)]
    for t in lanes:
        t.start()
    for t in lanes:
        t.join(max(0.0, run.deadline + STRAGGLER_GRACE_S - time.monotonic()))
    for probe in probes:
        if probe.alone:
            _run_one(session, node, probe, run)


def _taken(todo: queue.Queue | queue.SimpleQueue) -> Iterator:
    """What is left in `todo`, taken one at a time by each thread that reads it, until it is empty."""
    while True:
        try:
            yield todo.get_nowait()
        except queue.Empty:
            return


def _internal_error(node: Node, probe: Probe, e: Exception) -> Capture:
    return _capture(node, probe, Outcome.FAILED, f"internal error: {type(e).__name__}: {e}")


def _unfinished(node: Node, probe: Probe, run: _Run) -> Capture:
    if node.name not in run.started:  # still queued behind other nodes: never began
        return _skipped(node, probe, run)
    # cut by nodecheck's side (its deadline or a stop request), not by the probe's own timeout: never the node's
    return replace(
        _capture(
            node, probe, Outcome.TIMEOUT, f"still running when {run.why_cut()} (connection or command did not return)"
        ),
        cut=run.cut(),
    )


def _skipped(node: Node, probe: Probe, run: _Run) -> Capture:
    return not_started(node, probe, run.cut())


def _capture(node: Node, probe: Probe, outcome: Outcome, detail: str) -> Capture:
    return Capture(node.name, probe.name, probe.argv, outcome, None, "", "", 0.0, detail)


def why_cut(cut: Cut) -> str:
    """The words for a run cut short, in the report's incomplete_reason and a skipped probe's detail."""
    return "stopped by a signal" if cut is Cut.SIGNAL else "the run deadline was reached"


def not_started(node: Node, probe: Probe, cut: Cut) -> Capture:
    """A probe skipped because the run was cut (deadline or stop request) before it began."""
    return Capture(
        node.name, probe.name, probe.argv, Outcome.SKIPPED, None, "", "", 0.0, f"not started: {why_cut(cut)}", cut
    )


def cut_at_deadline(c: Capture, budget: float, probe: Probe) -> Capture:
    """A probe that timed out because the run deadline left it less than its own timeout: the
    deadline's doing, not the node's (the gate never drains for it)."""
    return replace(
        c, detail=f"{CUT_AT_DEADLINE} after {budget:.1f} s (probe timeout {probe.timeout_s:g} s)", cut=Cut.DEADLINE
    )
