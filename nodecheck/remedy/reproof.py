"""The re-proof after an action: an ordinary run of the health playbook on the one node, then the
action's acceptance playbook (gpu.dcgm_diag level 2, gpu.perf after a GPU reset, as the site sets
it), stored as a report of its own. Only a node that passes all of it returns to service.

A kernel-log check (gpu.xid, node.oom, nvlink.sxid) looks back only to the action: the Xid that the
reset answered is in the log for hours, and judging it again would keep a repaired node drained. A
node that fails right after the action is checked again every RETRY_S until `reproof_s` runs out: a
restarted Fabric Manager takes a while to bring the fabric up."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Mapping
from datetime import datetime, timezone

from nodecheck.config.playbook import Playbook
from nodecheck.core.model import Node
from nodecheck.gate.answered import log_windows_since
from nodecheck.report import Report

RETRY_S = 10.0


def since_the_action(playbook: Playbook, started: datetime, now: datetime) -> Playbook:
    """The playbook with every kernel-log window reaching back to the action only."""
    return log_windows_since(playbook, started, now)


@dataclasses.dataclass
class Reproof:
    """Callable as nodecheck.remedy.act.Reprove: (node, when the action started, the action) ->
    (the re-proof's report, where it was stored)."""

    playbook: Playbook
    acceptance: Mapping[str, Playbook]
    transport: object
    run_gated: object  # nodecheck.gate.command.run_gated
    store: object  # (report, node) -> str | None: where the report went
    reproof_s: float = 180.0
    stop: threading.Event = dataclasses.field(default_factory=threading.Event)

    def __call__(self, node: Node, started: datetime, action: str) -> tuple[Report, str | None]:
        give_up = time.monotonic() + self.reproof_s
        while True:
            book = since_the_action(self.playbook, started, datetime.now(timezone.utc))
            report = self.run_gated(book, [node], self.transport, fanout=1, stop=self.stop)  # type: ignore[operator]
            left = give_up - time.monotonic()
            if report.node_status(node.name).healthy or left < RETRY_S or self.stop.is_set():
                break
            self.stop.wait(RETRY_S)
        if report.node_status(node.name).healthy and action in self.acceptance:
            accepted = self.run_gated(  # type: ignore[operator]
                self.acceptance[action], [node], self.transport, fanout=1, stop=self.stop, allow_disruptive=True
            )
            report = _merged(report, accepted)
        return report, self.store(report, node.name)  # type: ignore[operator]


def _merged(health: Report, acceptance: Report) -> Report:
    """One report: the health run's results, then the acceptance run's (its captures kept apart)."""
    captures = tuple(dataclasses.replace(c, probe=f"{c.probe}@acceptance") for c in acceptance.captures)
    return dataclasses.replace(
        health,
        results=health.results + acceptance.results,
        captures=health.captures + captures,
        finished=acceptance.finished,
        complete=health.complete and acceptance.complete,
        incomplete_reason=health.incomplete_reason or acceptance.incomplete_reason,
    )
