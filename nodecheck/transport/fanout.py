"""Bounded fan-out: every node's probes over one session, at most `fanout` nodes at once, one deadline.

Workers are daemon threads, not a ThreadPoolExecutor: an SSH library stuck past every timeout must
not keep the process alive at exit, and the run must report at its deadline whatever has come back.
"""
from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from nodecheck.model import Capture, Node, Outcome, Probe
from nodecheck.transport import Transport

DEFAULT_FANOUT = 64                            # as clush: enough for speed, gentle on sshd MaxStartups
STRAGGLER_GRACE_S = 5.0                        # how long past the deadline we wait for a stuck worker

Captures = dict[tuple[str, str], Capture]      # (node, probe) -> Capture


@dataclass
class FanoutResult:
    captures: Captures
    deadline_hit: bool                         # some probe was skipped or cut short by the run deadline


def run_probes(transport: Transport, work: Mapping[Node, Sequence[Probe]], *, fanout: int,
               deadline: float, on_node_done: Callable[[str], None] | None = None) -> FanoutResult:
    """Run each node's probes in order over one session; `deadline` is a time.monotonic() value."""
    todo: queue.Queue = queue.Queue()
    for node in work:
        todo.put(node)
    captures: Captures = {}
    lock = threading.Lock()
    finished = threading.Semaphore(0)
    state = {"deadline_hit": False}

    def record(capture: Capture, cut_by_deadline: bool) -> None:
        with lock:
            captures[(capture.node, capture.probe)] = capture
            state["deadline_hit"] |= cut_by_deadline

    def worker() -> None:
        while True:
            try:
                node = todo.get_nowait()
            except queue.Empty:
                return
            try:
                _run_node(transport, node, work[node], deadline, record)
            except Exception as e:             # a bug here must not pass for a deadline or vanish
                with lock:
                    for probe in work[node]:
                        captures.setdefault((node.name, probe.name), _failed(node, probe, e))
            finally:
                finished.release()
                if on_node_done:
                    on_node_done(node.name)

    for _ in range(max(1, min(fanout, len(work)))):
        threading.Thread(target=worker, daemon=True, name="nodecheck-fanout").start()
    for _ in work:
        if not finished.acquire(timeout=max(0.0, deadline - time.monotonic()) + STRAGGLER_GRACE_S):
            break
    with lock:                                 # anything still missing is reported, never dropped
        for node, probes in work.items():
            for probe in probes:
                if (node.name, probe.name) not in captures:
                    captures[(node.name, probe.name)] = _deadline_capture(node, probe)
                    state["deadline_hit"] = True
        return FanoutResult(dict(captures), state["deadline_hit"])


def _run_node(transport: Transport, node: Node, probes: Sequence[Probe], deadline: float,
              record: Callable[[Capture, bool], None]) -> None:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        for probe in probes:
            record(_skipped(node, probe), True)
        return
    session = transport.connect(node, remaining)
    try:
        for probe in probes:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                record(_skipped(node, probe), True)
                continue
            budget = min(probe.timeout_s, remaining)
            capture = session.run(probe, budget)
            cut = capture.outcome is Outcome.TIMEOUT and budget < probe.timeout_s
            if cut:
                capture = _with_detail(capture, f"stopped at the run deadline after {budget:.1f} s "
                                                f"(probe timeout {probe.timeout_s:g} s)")
            record(capture, cut)
    finally:
        session.close()


def _skipped(node: Node, probe: Probe) -> Capture:
    return Capture(node.name, probe.name, probe.argv, Outcome.SKIPPED, None, "", "", 0.0,
                   "not started: the run deadline had passed")


def _failed(node: Node, probe: Probe, e: Exception) -> Capture:
    return Capture(node.name, probe.name, probe.argv, Outcome.FAILED, None, "", "", 0.0,
                   f"internal error: {type(e).__name__}: {e}")


def _deadline_capture(node: Node, probe: Probe) -> Capture:
    return Capture(node.name, probe.name, probe.argv, Outcome.TIMEOUT, None, "", "", 0.0,
                   "still running at the run deadline (connection or command did not return)")


def _with_detail(c: Capture, detail: str) -> Capture:
    return Capture(c.node, c.probe, c.argv, c.outcome, c.exit_code, c.stdout, c.stderr,
                   c.duration_s, detail)
