"""What an active check (scope "active") gets: the nodes it may use and a way to run commands on them.

Passive checks hand the runner a fixed probe list. Active checks (pairwise bandwidth, a port flap)
decide what to run from what came back, so they run commands themselves, through an ActiveContext:
every command is bounded by its own timeout and the run's deadline, and every capture is kept for the
report under a name that says which step it was ("ib_write_bw.r2.server").
"""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

from nodecheck.model import Capture, Node, Outcome, Probe
from nodecheck.transport import Session, Transport

MAX_PARALLEL = 64                              # commands in flight at once, as the passive fan-out


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

    def run(self, node: Node, probe: Probe, *, fresh: bool = False) -> Capture:
        """Run one probe; `fresh`: on a new connection (after one may have been cut on purpose)."""
        budget = min(probe.timeout_s, self.left())
        if budget <= 0:
            why = "stopped by a signal" if self.stop.is_set() else "the run deadline was reached"
            return self._keep(Capture(node.name, probe.name, probe.argv, Outcome.SKIPPED, None, "", "",
                                      0.0, f"not started: {why}"))
        session = self._session(node, budget, fresh)
        capture = session.run(probe, budget)
        if capture.outcome is Outcome.UNREACHABLE and not fresh and self.left() > 0:
            # a session that died between steps (the flap took its route away, sshd restarted)
            capture = self._session(node, min(budget, self.left()), True).run(probe, min(budget, self.left()))
        if capture.outcome is Outcome.TIMEOUT and budget < probe.timeout_s:
            capture = replace(capture, detail=f"stopped at the run deadline after {budget:.1f} s "
                                              f"(probe timeout {probe.timeout_s:g} s)")
        return self._keep(capture)

    def run_all(self, calls: Sequence[tuple[Node, Probe]]) -> list[Capture]:
        """Several probes at once (on different nodes, or independent ones on one node), in order."""
        if not calls:
            return []
        with ThreadPoolExecutor(max_workers=min(self.parallel, len(calls)),
                                thread_name_prefix="nodecheck-active") as pool:
            return list(pool.map(lambda call: self.run(*call), calls))

    def close(self) -> None:
        with self._lock:
            sessions, self._sessions = list(self._sessions.values()), {}
        for s in sessions:
            try:
                s.close()
            except Exception:                  # closing a dead connection must not fail the run
                pass

    def _session(self, node: Node, budget: float, fresh: bool) -> Session:
        with self._lock:
            lock = self._locks.setdefault(node.name, threading.Lock())
        with lock:                             # one connect per node even when steps race
            old = self._sessions.get(node.name)
            if old is not None and not fresh:
                return old
            session = self.transport.connect(node, budget)
            self._sessions[node.name] = session
        if old is not None:
            try:
                old.close()
            except Exception:
                pass
        return session

    def _keep(self, capture: Capture) -> Capture:
        """Recorded for the report; a step that ran twice under one name keeps both (".2")."""
        with self._lock:
            name, n = capture.probe, 1
            while (capture.node, name) in self._names:
                n += 1
                name = f"{capture.probe}.{n}"
            if name != capture.probe:
                capture = replace(capture, probe=name)
            self._names.add((capture.node, name))
            self.captures.append(capture)
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

    def run(self, node: str, probe: Probe, *, fresh: bool = False) -> Capture:
        return self.commands.run(self.nodes[node], probe, fresh=fresh)

    def run_all(self, calls: Sequence[tuple[str, Probe]]) -> list[Capture]:
        return self.commands.run_all([(self.nodes[n], p) for n, p in calls])

    def left(self) -> float:
        return self.commands.left()
