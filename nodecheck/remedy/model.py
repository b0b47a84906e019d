"""What remediation reasons about, as data: a node's failures, its action record, and the plan."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from nodecheck.config.remedy import Step

# what the plan says about a node:
#   act    - take `step` now (within every budget, the node drained by nodecheck and idle)
#   hold   - stays drained for a person, with why ("needs a person: ...")
#   wait   - nothing now, try again on the next run (a job on it, the budget full, a reboot under way)
#   leave  - not ours to touch (not drained, or drained by someone else)
#   return - nothing fails any more after an action of its incident: resume it (re-proven)
#   healthy- nothing failed: the gate's resume rule applies, not remediation
Verb = Literal["act", "hold", "wait", "leave", "return", "healthy"]
Event = Literal["action", "returned", "held"]
# done/failed: the action was carried out (its effect is the re-proof's to judge) or failed; pending:
# under way (a reboot Slurm has not finished); refused: the node's idle guard refused it, nothing done
Outcome = Literal["done", "failed", "pending", "refused", ""]


@dataclass(frozen=True)
class Failure:
    """One failing verdict on a node, as remediation needs it."""

    node: str
    check: str
    subject: str  # "GPU3", "PCI:0000:3b:00", "nvidia-fabricmanager.service", "" (the node)
    message: str
    observed: Mapping[str, object] = field(default_factory=dict)
    capture: str = ""  # the evidence, inside the report dir

    @property
    def said(self) -> str:
        return f"{self.check} {self.message}"


@dataclass(frozen=True)
class Entry:
    """One line of a node's action record (nodecheck.remedy.record)."""

    at: datetime  # aware, UTC
    event: Event
    action: str = ""  # a Step's action, for event "action"
    target: str = ""  # "GPU3", a unit, "" (the node)
    ladder: str = ""
    check: str = ""
    outcome: Outcome = ""
    detail: str = ""
    evidence: str = ""  # the incident's evidence bundle (a directory beside a report)


@dataclass(frozen=True)
class NodePlan:
    node: str
    verb: Verb
    why: str
    step: Step | None = None  # verb "act": what
    target: str = ""  # verb "act": on what ("GPU3"; "" for the node)
    ladder: str = ""  # the ladder that chose the step ("" for none: `otherwise`)
    rung: tuple[int, int] = (0, 0)  # (this step's place, the ladder's length), 1-based
    failures: tuple[Failure, ...] = ()
    # verb "return" for failures an earlier, re-proven action answered (kernel-log events older than
    # it): re-prove with the log windows reaching back to this action's start, then return
    since: datetime | None = None

    @property
    def action(self) -> str:
        """The step as a person reads it: 'reset_gpu GPU3', 'restart_service X', 'reboot', 'hold'."""
        if self.step is None:
            return self.verb
        label = self.step.label
        return f"{label} {shown_target(self.target)}" if self.target and self.step.action == "reset_gpu" else label


def stamp(t: datetime) -> str:
    """A time in a plan's why or a hold's reason: '2026-12-07 11:24:00Z'."""
    return t.strftime("%Y-%m-%d %H:%M:%SZ")


def shown_target(target: str) -> str:
    """A GPU as a person reads it: 'GPU3' for an index, a PCI bus id as is."""
    return f"GPU{target}" if target.isdigit() else target


@dataclass(frozen=True)
class Plan:
    nodes: tuple[NodePlan, ...]
    ladders_file: str
    in_remediation: tuple[str, ...] = ()  # nodes already under way when planning (the budget's count)
    capacity: int = 0  # nodes that may be in remediation at once

    def of(self, node: str) -> NodePlan | None:
        return next((p for p in self.nodes if p.node == node), None)

    def by_verb(self, verb: Verb) -> list[NodePlan]:
        return [p for p in self.nodes if p.verb == verb]


@dataclass(frozen=True)
class Rise:
    """A sweep that read one of the node's error counters higher than the sweep before it (one boot)."""

    at: datetime  # the sweep's time, aware
    port: str  # "mlx5_0/1", "GPU3"
    counter: str  # "LinkDownedCounter"


@dataclass(frozen=True)
class Past:
    """What the memory rules read about one node: nodecheck's drains of it (the gate log) and its
    counters' rises (the sweep history). `read`: the sources that could be read ("gate log", "sweep
    history"); a rule whose source was not read does not match (it says so in the plan's notes)."""

    drains: tuple[datetime, ...] = ()  # when each drain began (a drain after a resume, or the first seen)
    rises: tuple[Rise, ...] = ()
    read: frozenset[str] = frozenset()
