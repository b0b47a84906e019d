"""How probes reach nodes: a Transport opens a Session per node; sessions return Captures, never raise.

Remote conditions (refused, timed out, auth or host-key failure, a hung or missing tool) come back as
Capture outcomes with a detail, so fan-out code needs no per-host try/except.
"""

from __future__ import annotations

import shlex
import signal
from typing import Protocol

from nodecheck.core.model import Capture, Node, Outcome, Probe

# A remote `timeout` outlives the client's own timeout by this much: the client decides, and the
# remote one only makes sure a hung tool does not linger on the node after we hung up.
REMOTE_KILL_GRACE_S = 5
# the detail of a probe cut short because nodecheck's own run deadline came before the probe's
# timeout: not the node's fault (the gate never drains for it; the report says the run was cut)
CUT_AT_DEADLINE = "stopped at the run deadline"
MAX_CAPTURE_BYTES = 16 * 1024 * 1024  # per stream: a runaway tool must not exhaust the client


class CappedBuffer:
    """An output stream as it arrives: the first `limit` bytes (default MAX_CAPTURE_BYTES) kept, the
    rest counted and dropped, so a runaway tool costs the client at most the bound (both transports)."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = MAX_CAPTURE_BYTES if limit is None else limit
        self.buf, self.dropped = bytearray(), 0

    def add(self, data: bytes) -> None:
        room = max(0, self.limit - len(self.buf))
        self.buf.extend(data[:room])
        self.dropped += max(0, len(data) - room)

    def text(self) -> str:
        return self.buf.decode(errors="replace")


def cut_details(out: CappedBuffer, err: CappedBuffer) -> list[str]:
    """What a capture says about streams cut at the bound: "stdout cut at 16 MiB (N bytes dropped)"."""

    def size(n: int) -> str:
        return f"{n >> 20} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n} bytes"

    return [
        f"{name} cut at {size(b.limit)} ({b.dropped} bytes dropped)"
        for name, b in (("stdout", out), ("stderr", err))
        if b.dropped
    ]


def signal_name(code: int) -> str:
    """A killed probe's exit code is -N, subprocess's convention, which the SSH transport follows for
    an `exit-signal`: -9 is "SIGKILL"; a number this host has no name for is "signal N"."""
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


class Session(Protocol):
    def run(self, probe: Probe, timeout_s: float) -> Capture: ...
    def close(self) -> None: ...


class Transport(Protocol):
    def connect(self, node: Node, timeout_s: float) -> Session: ...


def remote_command(probe: Probe, timeout_s: float) -> str:
    """The one place where argv becomes a shell string: every word is quoted with shlex.

    LC_ALL=C keeps tool output in the language the parsers read."""
    kill_after = int(timeout_s) + REMOTE_KILL_GRACE_S
    return shlex.join(["env", "LC_ALL=C", "timeout", "-k", "2", str(kill_after), *probe.argv])


class FailedSession:
    """A node we could not reach: every probe comes back UNREACHABLE with the same reason."""

    def __init__(self, node: Node, detail: str) -> None:
        self.node, self.detail = node, detail

    def run(self, probe: Probe, timeout_s: float) -> Capture:
        return Capture(self.node.name, probe.name, probe.argv, Outcome.UNREACHABLE, None, "", "", 0.0, self.detail)

    def close(self) -> None:
        pass


class RunArgvInstead(Exception):
    """Raised by a probe's in-process function (Probe.local_call) when the command must answer
    instead, e.g. NVML is not importable in this process; the message says why."""
