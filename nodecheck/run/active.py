"""What an active check (scope "active") gets: the nodes it may use and a way to run commands on them.

Passive checks hand the runner a fixed probe list. Active checks (pairwise bandwidth, a port flap)
decide what to run from what came back, so they run commands themselves, through an ActiveContext:
every command is bounded by its own timeout and the run's deadline, and every capture is kept for the
report under a name that says which step it was ("ib_write_bw.r2.server").
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

from nodecheck.core.model import Capture, Node, Outcome, Probe
from nodecheck.core.redact import redact_argv, redact_text
from nodecheck.transport import CUT_AT_DEADLINE, Session, Transport

MAX_PARALLEL = 64                              # commands in flight at once, as the passive fan-out
MIN_STEP_S = 0.5                               # less time than this left: the step is SKIPPED, not tried
# what an active check leaves of the deadline for the probes that read again after the active checks
# (ib.counters' second read): a step that would eat into it is not started
AFTER_RESERVE_S = 30


def _close(session: Session) -> None:
    try:
        session.close()
    except Exception:                          # closing a dead connection must not fail the run
        pass


class CommandRunner:
    """One SSH session per node, opened on first use and reused; a dead one is replaced once."""

    def __init__(self, transport: Transport, deadline: float, stop: threading.Event,
                 parallel: int = MAX_PARALLEL) -> None:
        self.transport, self.deadline, self.stop, self.parallel = transport, deadline, stop, parallel
        self.captures: list[Capture] = []
        self._names: set[tuple[str, str]] = set()
        self._sessions: dict[str, Session] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    def left(self) -> float:
        return 0.0 if self.stop.is_set() else self.deadline - time.monotonic()

    def run(self, node: Node, probe: Probe, *, fresh: bool = False, cleanup: bool = False) -> Capture:
        """Run one probe, bounded by one end time for connecting and running together.

        `fresh`: on a connection of its own (after one may have been cut on purpose), closed after.
        `cleanup`: a step that undoes what an earlier one started (kill the test servers, check a
        flapped port): it runs within its own timeout even after the deadline or a stop request."""
        left = probe.timeout_s if cleanup else min(probe.timeout_s, self.left())
        if left < MIN_STEP_S:
            why = "stopped by a signal" if self.stop.is_set() else "the run deadline was reached"
            return self._keep(Capture(node.name, probe.name, probe.argv, Outcome.SKIPPED, None, "", "",
                                      0.0, f"not started: {why}"))
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
            if capture.outcome is Outcome.UNREACHABLE and capture.detail.startswith("connection lost before") \
                    and end - time.monotonic() >= MIN_STEP_S:
                # the cached connection died between steps and nothing ran: once more on a new one
                session = self._session(node, end - time.monotonic(), replace_failed=session)
                capture = session.run(probe, max(end - time.monotonic(), MIN_STEP_S))
        if capture.outcome is Outcome.TIMEOUT and left < probe.timeout_s:
            capture = replace(capture, detail=f"{CUT_AT_DEADLINE} after {left:.1f} s "
                                              f"(probe timeout {probe.timeout_s:g} s)")
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
        with lock:                             # one connect per node even when steps race
            current = self._sessions.get(node.name)
            if current is not None and current is not replace_failed:
                return current                 # (another step already replaced a failed one)
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
            self.captures.append(replace(capture, argv=redact_argv(capture.argv), stdout=redact_text(capture.stdout),
                                         stderr=redact_text(capture.stderr), detail=redact_text(capture.detail)))
        return capture


@dataclass
class ActiveContext:
    """An active check's view of the run."""
    check: str
    nodes: Mapping[str, Node]                  # the nodes it may use: their passive probes came back
    captures: Mapping[str, Mapping[str, Capture]]   # node -> this check's passive captures
    commands: CommandRunner
    allow_disruptive: bool = False             # --allow-disruptive on the command line
    order: Sequence[str] = ()                  # every node of the run, inventory order
    extras: dict = field(default_factory=dict)     # the check's data for the report (pair matrix)

    def run(self, node: str, probe: Probe, *, fresh: bool = False, cleanup: bool = False) -> Capture:
        return self.commands.run(self.nodes[node], probe, fresh=fresh, cleanup=cleanup)

    def left(self) -> float:
        return self.commands.left()
