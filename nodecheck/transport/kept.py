"""SSH sessions kept between the watcher's ticks: a Transport that wraps another, keeps each node's
connection open and dials in the background (see KeptSessions).
"""

from __future__ import annotations

import threading
import time

from nodecheck.core.model import Capture, Node, Outcome, Probe
from nodecheck.transport import FailedSession, Session

# a background dial's bound: the SSH transport caps it at its own --connect-timeout
DIAL_TIMEOUT_S = 3600.0
KEPT_TIMEOUTS = 3  # samples timed out in a row before a kept connection is redialled


class KeptSessions:
    """A Transport that keeps each node's connection open between ticks, and dials in the background.

    A handshake per node per tick is most of a sample's cost; at a short interval it is the difference
    between answering within the sample timeout and not. So a connection is dialled once, with the
    whole --connect-timeout (not the tick's deadline): a tick waits for it only until its own deadline
    (the node then reads "still connecting", a failed sample like any other), and a later tick picks it
    up. A lost connection is closed and the next tick dials again; a kept one that died while idle gets
    one fresh dial within the same tick, so an sshd restart or an idle timeout is not counted against
    the node. A sample that timed out keeps its connection (redialling would eat the next tick's
    budget, and a slow node would never catch up), until KEPT_TIMEOUTS in a row: then the connection
    itself is suspect (a half-open TCP connection never errors) and is dialled afresh."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.idle: dict[str, Session] = {}
        self.dialling: dict[str, _Dial] = {}
        self.timeouts: dict[str, int] = {}  # samples timed out in a row on the kept connection
        self.lock = threading.Lock()

    def connect(self, node: Node, timeout_s: float):
        with self.lock:
            session = self.idle.pop(node.name, None)
            dial = None if session is not None else self.dialling.get(node.name)
            if session is None and dial is None:
                dial = self.dialling[node.name] = _Dial(self.inner, node)
        if session is not None:
            return _KeptSession(self, node, session, fresh=False)
        assert dial is not None  # no idle session: a dial was found or started above
        # a tenth of the budget is left for the fan-out to run the probe on what this returns: at
        # the deadline itself it would record "not started: the run deadline was reached" instead
        if not dial.done.wait(max(0.0, 0.9 * timeout_s)):
            return _StillConnecting(node, dial)
        with self.lock:
            if self.dialling.get(node.name) is dial:
                del self.dialling[node.name]
        return _KeptSession(self, node, dial.session, fresh=True)

    def close(self) -> None:
        with self.lock:
            sessions, self.idle = list(self.idle.values()), {}
            dials, self.dialling = list(self.dialling.values()), {}
        sessions += [d.session for d in dials if d.done.is_set() and d.session is not None]  # (set once done)
        for s in sessions:
            s.close()


class _Dial:
    """One connection being set up in a daemon thread (a stuck SSH library must not keep the watcher
    alive at exit), bounded by the transport's own connect timeout."""

    def __init__(self, inner, node: Node) -> None:
        self.node, self.started = node, time.monotonic()
        self.session: Session | None = None  # set by the dialling thread before `done`
        self.done = threading.Event()
        threading.Thread(target=self._run, args=(inner,), daemon=True, name="nodecheck-watch-dial").start()

    def _run(self, inner) -> None:
        try:
            self.session = inner.connect(self.node, DIAL_TIMEOUT_S)
        except Exception as e:  # a transport never raises; if it did, it is this node's failure
            self.session = FailedSession(self.node, f"internal error while connecting: {type(e).__name__}: {e}")
        self.done.set()


class _StillConnecting:
    """A node whose connection is still being dialled when the tick's deadline came: a failed sample."""

    def __init__(self, node: Node, dial: _Dial) -> None:
        self.node, self.dial = node, dial

    def run(self, probe: Probe, timeout_s: float) -> Capture:
        waited = time.monotonic() - self.dial.started
        # UNREACHABLE, as the SSH transport's own connect timeout: nothing ran on the node
        return Capture(
            self.node.name,
            probe.name,
            probe.argv,
            Outcome.UNREACHABLE,
            None,
            "",
            "",
            0.0,
            f"no SSH connection yet: still connecting after {waited:.1f} s",
        )

    def close(self) -> None:
        pass


class _KeptSession:
    def __init__(self, pool: KeptSessions, node: Node, session, fresh: bool) -> None:
        self.pool, self.node, self.session, self.fresh = pool, node, session, fresh
        self.healthy = True

    def run(self, probe: Probe, timeout_s: float) -> Capture:
        started = time.monotonic()
        capture = self.session.run(probe, timeout_s)
        left = timeout_s - (time.monotonic() - started)
        if not self.fresh and capture.outcome is Outcome.UNREACHABLE and left > 0:
            self.session.close()
            self.session, self.fresh = self.pool.inner.connect(self.node, left), True
            capture = self.session.run(probe, timeout_s - (time.monotonic() - started))
        with self.pool.lock:
            streak = self.pool.timeouts.get(self.node.name, 0) + 1 if capture.outcome is Outcome.TIMEOUT else 0
            self.pool.timeouts[self.node.name] = streak if streak < KEPT_TIMEOUTS else 0  # a new one starts afresh
        kept = capture.outcome is Outcome.EXITED or (capture.outcome is Outcome.TIMEOUT and 0 < streak < KEPT_TIMEOUTS)
        self.healthy = self.healthy and kept
        return capture

    def close(self) -> None:
        if self.healthy and not isinstance(self.session, FailedSession):
            with self.pool.lock:
                spare = self.pool.idle.pop(self.node.name, None)
                self.pool.idle[self.node.name] = self.session
            if spare is not None:
                spare.close()
        else:
            self.session.close()
