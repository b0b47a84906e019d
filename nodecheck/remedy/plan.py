"""The remediation planner, pure: failures + Slurm states + action records + ladders + budgets ->
what to do about each node. Nothing here runs a command (nodecheck.remedy.command shows the plan).

The safety rules, in the order they are applied to a node:
1. only a node drained by nodecheck (its reason marked with this site's token) is acted on; not
   drained, or drained by someone else: left alone;
2. a node already held for a person stays held; a node Slurm shows running a job, or rebooting,
   or whose last action has not finished, waits;
3. a failure whose ladder is used up, or that came back on the same target within the ladder's
   `again_within_h` of an action for it, is held; so is a node acted on `max_actions` times within
   `window_h` (NVSentinel's analyzer holds a node remediated twice in 7 days);
4. one step per node per run (its re-proof is the next run); at most `max_nodes` (and
   `max_share` of the cluster) nodes in remediation at once, the ones drained longest first; the
   others wait.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from nodecheck.config.remedy import Ladder, Ladders, RemedySettings, Step
from nodecheck.parsers.slurm import NodeState, reason_body
from nodecheck.remedy.failures import gpu_target, node_said
from nodecheck.remedy.model import Entry, Failure, NodePlan, Plan, shown_target

BUSY_FLAGS = frozenset({"ALLOCATED", "MIXED", "COMPLETING"})
REBOOT_FLAGS = frozenset({"REBOOT_REQUESTED", "REBOOT_ISSUED"})
HELD_MARK = "needs a person:"  # in a drain reason nodecheck set: held, never resumed or acted on by it


def held_reason(reason: str) -> bool:
    """Is a nodecheck drain reason a hold for a person? ('nodecheck[mark]: gpu.health needs a person: ...')"""
    return HELD_MARK in reason_body(reason)


@dataclass(frozen=True)
class _Choice:
    """The next step for one failure, or why there is none (hold)."""

    failure: Failure
    ladder: Ladder | None
    step: Step | None  # None: hold, for `why`
    target: str
    rung: tuple[int, int]
    why: str = ""


def plan(
    failures: Mapping[str, Sequence[Failure]],
    checked: Sequence[str],
    states: Mapping[str, NodeState],
    records: Mapping[str, Sequence[Entry]],
    ladders: Ladders,
    settings: RemedySettings,
    *,
    now: datetime,
    token: str = "",
    cluster_size: int = 0,
) -> Plan:
    """`checked`: the nodes the failures are from (a checked node with none is healthy). `records`:
    each node's action record, oldest first (the nodes that have one; other nodes' records count for
    the cluster budget too). `cluster_size`: the nodes Slurm lists (for max_share). `now`: aware."""
    under_way = sorted(n for n in set(records) | set(states) if _under_way(n, states.get(n), records.get(n, ()), now))
    capacity = _capacity(settings, cluster_size)
    planned: list[NodePlan] = []
    wanting: list[NodePlan] = []  # would act, subject to the cluster budget
    for node in checked:
        p = _plan_node(
            node,
            tuple(failures.get(node, ())),
            states.get(node),
            tuple(records.get(node, ())),
            ladders,
            settings,
            now,
            token,
        )
        (wanting if p.verb == "act" else planned).append(p)
    free = capacity - len([n for n in under_way if n not in {p.node for p in wanting}])
    for p in sorted(wanting, key=lambda p: (_drained_at(states.get(p.node)), p.node)):
        if free > 0:
            planned.append(p)
            free -= 1
        else:
            planned.append(
                NodePlan(
                    p.node,
                    "wait",
                    f"budget: {capacity} node{'s' if capacity != 1 else ''} in remediation at once"
                    + (
                        f" ({', '.join(under_way[:5])}{' ...' if len(under_way) > 5 else ''} under way)"
                        if under_way
                        else ""
                    )
                    + f"; next: {p.action}",
                    failures=p.failures,
                )
            )
    order = {n: i for i, n in enumerate(checked)}
    return Plan(
        tuple(sorted(planned, key=lambda p: order[p.node])),
        ladders.file,
        tuple(under_way),
        capacity,
    )


def _capacity(settings: RemedySettings, cluster_size: int) -> int:
    if settings.max_share is None or cluster_size <= 0:
        return settings.max_nodes
    return min(settings.max_nodes, max(1, math.floor(settings.max_share * cluster_size)))


def _under_way(node: str, state: NodeState | None, record: Sequence[Entry], now: datetime) -> bool:
    """In remediation now: a reboot Slurm has not finished, or an action whose outcome is not in yet."""
    if state is not None and state.flags & REBOOT_FLAGS:
        return True
    last = record[-1] if record else None
    return last is not None and last.event == "action" and last.outcome == "pending"


def _drained_at(state: NodeState | None) -> str:
    return state.reason_time if state is not None and state.reason_time else "~"  # unknown: last


def _plan_node(
    node: str,
    fs: tuple[Failure, ...],
    state: NodeState | None,
    record: tuple[Entry, ...],
    ladders: Ladders,
    settings: RemedySettings,
    now: datetime,
    token: str,
) -> NodePlan:
    if not fs:
        return NodePlan(node, "healthy", "no failure: the gate resumes it when nodecheck drained it")
    said = node_said(fs)
    if state is None:
        return NodePlan(node, "leave", f"Slurm does not list this node; {said}", failures=fs)
    if not state.drained:
        return NodePlan(node, "leave", f"not drained (the gate drains a failing node first); {said}", failures=fs)
    if state.owner(token) != "ours":
        return NodePlan(node, "leave", f"drained by someone else ({state.reason or state.state}); {said}", failures=fs)
    if held_reason(state.reason):
        return NodePlan(node, "hold", f"already held for a person: {reason_body(state.reason)}", failures=fs)
    if state.flags & BUSY_FLAGS:
        return NodePlan(node, "wait", f"a job is on it ({state.state}); {said}", failures=fs)
    if state.flags & REBOOT_FLAGS:
        return NodePlan(node, "wait", f"a reboot is under way ({state.state})", failures=fs)
    if record and record[-1].event == "action" and record[-1].outcome == "pending":
        last = record[-1]
        return NodePlan(
            node,
            "wait",
            f"{last.action} {last.target} at {_stamp(last.at)} has not finished".replace("  ", " "),
            failures=fs,
        )
    window = timedelta(hours=settings.window_h)
    recent = [e for e in record if e.event == "action" and now - e.at <= window]
    if len(recent) >= settings.max_actions:
        return NodePlan(
            node,
            "hold",
            f"{HELD_MARK} remediated {len(recent)} times in {_hours(settings.window_h)} "
            f"({', '.join(f'{e.action} {_stamp(e.at)}' for e in recent[-3:])}) and failing again: {said}",
            failures=fs,
        )
    incident = _incident(record)
    choices = [_choose(f, ladders, incident, record, now) for f in fs]
    holds = [c for c in choices if c.step is None or c.step.action == "hold"]
    if holds:
        return NodePlan(node, "hold", f"{HELD_MARK} " + "; ".join(c.why for c in holds), failures=fs)
    first = min(choices, key=lambda c: _ladder_rank(ladders, c.ladder))
    assert first.step is not None
    return NodePlan(
        node,
        "act",
        first.why,
        step=first.step,
        target=first.target,
        ladder=first.ladder.name if first.ladder else "",
        rung=first.rung,
        failures=fs,
    )


def _incident(record: Sequence[Entry]) -> list[Entry]:
    """The actions since the node last returned to service (or was held): this incident's rungs."""
    start = max((i + 1 for i, e in enumerate(record) if e.event in ("returned", "held")), default=0)
    return [e for e in record[start:] if e.event == "action"]


def _choose(f: Failure, ladders: Ladders, incident: Sequence[Entry], record: Sequence[Entry], now: datetime) -> _Choice:
    ladder = ladders.for_failure(f.check, f.observed)
    steps = tuple(ladder.steps) if ladder else ladders.otherwise
    name = ladder.name if ladder else ""
    target = gpu_target(f)
    named = f"ladder {name}" if name else "no ladder names it"
    if ladder is not None and ladder.again_within_h is not None:
        earlier = _again(ladder, target, incident, record, now)
        if earlier is not None:
            return _Choice(
                f,
                ladder,
                None,
                target,
                (0, len(steps)),
                f"{f.said}: again within {_hours(ladder.again_within_h)} of {earlier.action} "
                f"{shown_target(earlier.target)} at {_stamp(earlier.at)} ({named})".replace("  ", " "),
            )
    tried = [e for e in incident if (e.ladder or "") == name]
    skipped: list[str] = []
    for i in range(len(tried), len(steps)):
        step = steps[i]
        if step.action == "reset_gpu" and not target:
            skipped.append("reset_gpu (the failure names no GPU)")
            continue
        why = f"{f.said} ({named}, step {i + 1} of {len(steps)}"
        why += f"; skipped {', '.join(skipped)})" if skipped else ")"
        if step.action == "hold":
            done = ", ".join(e.action for e in tried)
            return _Choice(
                f, ladder, None, "", (i + 1, len(steps)), f"{f.said} ({named}" + (f"; tried {done})" if done else ")")
            )
        return _Choice(f, ladder, step, _step_target(step, target), (i + 1, len(steps)), why)
    done = ", ".join(e.action for e in tried) or "nothing applied"
    return _Choice(f, ladder, None, "", (len(steps), len(steps)), f"{f.said} ({named} used up: {done})")


def _step_target(step: Step, gpu: str) -> str:
    if step.action == "reset_gpu":
        return gpu
    if step.action == "restart_service":
        return step.unit or ""
    return ""


def _again(
    ladder: Ladder, target: str, incident: Sequence[Entry], record: Sequence[Entry], now: datetime
) -> Entry | None:
    """The last action of this ladder on this target before this incident and within its window."""
    assert ladder.again_within_h is not None
    window = timedelta(hours=ladder.again_within_h)
    earlier = [e for e in record if e.event == "action" and e not in incident]
    return next(
        (
            e
            for e in reversed(earlier)
            if e.ladder == ladder.name and (not target or e.target in (target, "")) and now - e.at <= window
        ),
        None,
    )


def _ladder_rank(ladders: Ladders, ladder: Ladder | None) -> int:
    return ladders.ladders.index(ladder) if ladder is not None else len(ladders.ladders)


def _hours(h: float) -> str:
    return f"{h / 24:g} days" if h >= 48 and h % 24 == 0 else f"{h:g} h"


def _stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%SZ")
