"""A replay transport for runner tests: (node, probe) → a recorded Capture, like Fabric's Session."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from nodecheck.core.model import Capture, Node, Outcome, Probe
from nodecheck.transport import FailedSession

Answer = Capture | Callable[[Node, Probe, float], Capture]


def exited(node: str, probe: Probe, stdout: str = "", code: int = 0, stderr: str = "") -> Capture:
    return Capture(node, probe.name, probe.argv, Outcome.EXITED, code, stdout, stderr, 0.01)


class ReplayTransport:
    """Answers from a table; a node listed in `unreachable` fails to connect with that detail."""

    def __init__(
        self,
        answers: Mapping[tuple[str, str], Answer],
        unreachable: Mapping[str, str] = {},
        connect_delay_s: float = 0.0,
    ) -> None:
        self.answers, self.unreachable, self.connect_delay_s = answers, unreachable, connect_delay_s
        self.ran: list[tuple[str, str]] = []

    def connect(self, node: Node, timeout_s: float):
        time.sleep(self.connect_delay_s)
        if node.name in self.unreachable:
            return FailedSession(node, self.unreachable[node.name])
        return _Session(self, node)


class _Session:
    def __init__(self, owner: ReplayTransport, node: Node) -> None:
        self.owner, self.node = owner, node

    def run(self, probe: Probe, timeout_s: float) -> Capture:
        self.owner.ran.append((self.node.name, probe.name))
        answer = self.owner.answers[(self.node.name, probe.name)]
        return answer(self.node, probe, timeout_s) if callable(answer) else answer

    def close(self) -> None:
        pass


def hang(node: Node, probe: Probe, timeout_s: float) -> Capture:
    """Behaves like a tool that never answers: uses its whole budget, then times out."""
    time.sleep(timeout_s)
    return Capture(
        node.name, probe.name, probe.argv, Outcome.TIMEOUT, None, "", "", timeout_s, f"no answer within {timeout_s:g} s"
    )
