"""The remediation planner, pure: failures + Slurm states + action records + ladders + budgets ->
what to do about each node. Nothing here runs a command (nodecheck.remedy.command shows the plan).

The safety rules, in the order they are applied to a node:
1. only a node drained by nodecheck (its reason marked with this site's token) is acted on; not
   drained, or drained by someone else: left alone;
2. a node already held for a person stays held; a node Slurm shows running a job, or rebooting,
   or whose last action has not finished, waits;
3. a failure whose ladder is used up, or that came back on the same target within the ladder's
   `again_within_h` of an action for it, is held; so is a node acted on `max_actions` times within
   `window_h` (NVSentinel's analyzer holds a node remediated twice in 7 days), and one whose past
   matches a memory rule (drained 3 times in 7 days; a port's LinkDowned rose in 3 sweeps of a day:
   nodecheck.remedy.memory) when it would otherwise be acted on again;
4. one step per node per run; at most `max_nodes` nodes in remediation at once in the cluster
   (and `max_share` of each partition), the ones drained longest first; the others wait;
5. a node that passes again after an action of its incident (a reboot, typically) is returned.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone

from nodecheck.config.remedy import Ladder, Ladders, RemedySettings, Step, hours_said
from nodecheck.parsers.slurm import HELD_MARK, NodeState, held_for_a_person, reason_body
from nodecheck.remedy.failures import gpu_target, node_said
from nodecheck.remedy.memory import held_by
from nodecheck.remedy.model import Entry, Failure, NodePlan, Outcome, Past, Plan, shown_target, stamp

BUSY_FLAGS = frozenset({"ALLOCATED", "MIXED", "COMPLETING"})
REBOOT_FLAGS = frozenset({"REBOOT_REQUESTED", "REBOOT_ISSUED"})


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
    unjudged: Mapping[str, str] | None = None,
    past: Mapping[str, Past] | None = None,
) -> Plan:
    """`checked`: the nodes the failures are from (a checked node with none is healthy, unless it is
    in `unjudged`: node -> why it could not be judged, e.g. unreachable). `records`:
    each node's action record, oldest first (the nodes that have one; other nodes' records count for
    the cluster budget too). `cluster_size`: the nodes Slurm lists (for max_share). `past`: what the
    memory rules read about each node (none: no rule matches). `now`: aware."""
    records = {n: settled(r, states.get(n), now) for n, r in records.items()}
    under_way = sorted(
        n for n in set(records) | set(states) if _under_way(n, states.get(n), records.get(n, ()), now, token)
    )
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
            (unjudged or {}).get(node, ""),
            (past or {}).get(node, Past()),
        )
        (wanting if p.verb == "act" else planned).append(p)
    busy = list(under_way)
    for p in sorted(wanting, key=lambda p: (_drained_at(states.get(p.node)), p.node)):
        why = over_budget(p.node, busy, states, settings, cluster_size, under_way)
        if not why:
            planned.append(p)
            busy.append(p.node)
        else:
            planned.append(NodePlan(p.node, "wait", f"{why}; next: {p.action}", failures=p.failures))
    order = {n: i for i, n in enumerate(checked)}
    return Plan(
        tuple(sorted(planned, key=lambda p: order[p.node])),
        ladders.file,
        tuple(under_way),
        capacity,
    )


def _capacity(settings: RemedySettings, cluster_size: int) -> int:
    """Nodes under repair at once in the whole cluster: max_nodes (and max_share of the cluster,
    for the nodes Slurm lists in no partition)."""
    if settings.max_share is None or cluster_size <= 0:
        return settings.max_nodes
    return min(settings.max_nodes, max(1, math.floor(settings.max_share * cluster_size)))


def _share(settings: RemedySettings, size: int) -> int:
    assert settings.max_share is not None
    return max(1, math.floor(settings.max_share * size))  # never 0: a small partition still heals


def over_budget(
    node: str,
    busy: Sequence[str],
    states: Mapping[str, NodeState],
    settings: RemedySettings,
    cluster_size: int,
    under_way: Sequence[str] = (),
) -> str:
    """Why `node` may not start a repair while the `busy` nodes are under repair ("" = it may):
    max_nodes in the whole cluster; max_share of each partition the node is in (of the cluster,
    for a node in none). `under_way`: the nodes already under way before this plan, named in why."""
    started = [n for n in under_way if n in busy]
    shown = f" ({', '.join(started[:5])}{' ...' if len(started) > 5 else ''} under way)" if started else ""
    if len(busy) >= settings.max_nodes or (
        settings.max_share is None and len(busy) >= _capacity(settings, cluster_size)
    ):
        n = settings.max_nodes
        return f"budget: {n} node{'s' if n != 1 else ''} in remediation at once{shown}"
    if settings.max_share is None:
        return ""
    state = states.get(node)
    partitions = state.partitions if state is not None else ()
    if not partitions:
        cap = _capacity(settings, cluster_size)
        if len(busy) >= cap:
            plural = "s" if cap != 1 else ""
            return f"budget: {cap} node{plural} ({settings.max_share:.0%} of the cluster) in remediation at once{shown}"
        return ""
    for part in partitions:
        members = {n for n, s in states.items() if part in s.partitions}
        cap = _share(settings, len(members))
        inside = [n for n in busy if n in members]
        if len(inside) >= cap:
            return (
                f"budget: {cap} of partition {part}'s {len(members)} nodes ({settings.max_share:.0%}) in remediation "
                f"at once ({', '.join(inside[:5])})"
            )
    return ""


# what the executor writes after the check in the drain reason while it acts on a node: any node's
# nodecheck can count the cluster's nodes under repair from `scontrol show node` alone. (A reboot's
# reason, "<check> rebooting: ...", stays after the node is back: Slurm's REBOOT_* flags say when
# it is under way.)
REPAIRING = ("repairing:",)


STALE = timedelta(hours=2)  # a mark or a pending action this old was interrupted: it holds nothing up


def repairing(state: NodeState | None, token: str = "", now: datetime | None = None) -> bool:
    """Is a node under repair by nodecheck right now, as Slurm shows it? A reboot not finished, or a
    reason of ours saying an action is under way ("<check> repairing: ...")
    set less than STALE ago (`now` given; a nodecheck killed mid-action must not hold the budget)."""
    if state is None:
        return False
    if state.flags & REBOOT_FLAGS:
        return True
    _, _, rest = reason_body(state.reason).partition(" ")
    if state.owner(token) != "ours" or not rest.startswith(REPAIRING):
        return False
    return now is None or not _older(state.reason_time, now - STALE)


def _older(reason_time: str, cutoff: datetime) -> bool:
    """Slurm's reason time (local, naive) is readable and before `cutoff` (aware)."""
    try:
        return datetime.fromisoformat(reason_time) < cutoff.astimezone().replace(tzinfo=None)
    except (TypeError, ValueError):
        return False


def _under_way(node: str, state: NodeState | None, record: Sequence[Entry], now: datetime, token: str = "") -> bool:
    """In remediation now: under repair as Slurm shows it, or an action whose outcome is not in yet."""
    if repairing(state, token, now):
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
    unjudged: str = "",
    past: Past = Past(),  # noqa: B008 (frozen: one shared empty past is safe)
) -> NodePlan:
    if state is not None and state.flags & REBOOT_FLAGS:
        return NodePlan(node, "wait", f"a reboot is under way ({state.state})", failures=fs)
    if not fs:
        if unjudged:
            return NodePlan(node, "wait", f"could not be judged ({unjudged}): neither repaired nor returned")
        return _healthy(node, state, record, token)
    said = node_said(fs)
    if state is None:
        return NodePlan(node, "leave", f"Slurm does not list this node; {said}", failures=fs)
    if not state.drained:
        return NodePlan(node, "leave", f"not drained (the gate drains a failing node first); {said}", failures=fs)
    if state.owner(token) != "ours":
        return NodePlan(node, "leave", f"drained by someone else ({state.reason or state.state}); {said}", failures=fs)
    if held_for_a_person(state.reason):
        return NodePlan(node, "hold", f"already held for a person: {reason_body(state.reason)}", failures=fs)
    if state.flags & BUSY_FLAGS:
        return NodePlan(node, "wait", f"a job is on it ({state.state}); {said}", failures=fs)
    if record and record[-1].event == "action" and record[-1].outcome == "pending":
        last = record[-1]
        return NodePlan(
            node,
            "wait",
            f"{last.action} {last.target} at {stamp(last.at)} has not finished".replace("  ", " "),
            failures=fs,
        )
    answered, by = _answered(fs, record)
    if answered and len(answered) == len(fs):
        return NodePlan(
            node,
            "return",
            f"answered: {node_said(fs)}: logged before {by.action} {shown_target(by.target)} at {stamp(by.at)}, "
            "which was re-proven and returned; re-proving since then".replace("  ", " "),
            failures=fs,
            since=by.at,
        )
    fs = tuple(f for f in fs if f not in answered)
    said = node_said(fs)
    window = timedelta(hours=settings.window_h)
    recent = [e for e in taken(record) if now - e.at <= window]
    if len(recent) >= settings.max_actions:
        return NodePlan(
            node,
            "hold",
            f"{HELD_MARK} remediated {len(recent)} times in {hours_said(settings.window_h)} "
            f"({', '.join(f'{e.action} {stamp(e.at)}' for e in recent[-3:])}) and failing again: {said}",
            failures=fs,
        )
    current = incident(record)
    choices = [_choose(f, ladders, current, record, now) for f in fs]
    holds = [c for c in choices if c.step is None or c.step.action == "hold"]
    if holds:
        return NodePlan(node, "hold", f"{HELD_MARK} " + "; ".join(c.why for c in holds), failures=fs)
    if remembered := held_by(past, ladders.memory, now):
        return NodePlan(node, "hold", f"{HELD_MARK} {remembered} and failing again: {said}", failures=fs)
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


def _healthy(node: str, state: NodeState | None, record: Sequence[Entry], token: str) -> NodePlan:
    """Nothing failed. A node nodecheck drained with an incident under way (an action taken since it
    was last returned) is returned now: this run was its re-proof. Otherwise it is the gate's."""
    current = incident(record)
    # drained by nodecheck (the re-proof resumes it), or already resumed by the gate this run (the
    # record is closed): either way the incident ends here
    ours = state is not None and state.drained and state.owner(token) == "ours" and not held_for_a_person(state.reason)
    back = state is not None and not state.drained
    if current and (ours or back) and not (state is not None and state.flags & BUSY_FLAGS and ours):
        last = current[-1]
        what = f"{last.action} {shown_target(last.target)}".strip()
        return NodePlan(
            node,
            "return",
            f"re-proven: every check passes after {what} at {stamp(last.at)}",
        )
    return NodePlan(node, "healthy", "no failure: the gate resumes it when nodecheck drained it")


def _answered(fs: Sequence[Failure], record: Sequence[Entry]) -> tuple[list[Failure], Entry]:
    """The failures whose events the node's last re-proven action answered: kernel-log events
    (observed "time": gpu.xid, nvlink.sxid, node.oom) logged before that action started. The log
    keeps them for hours after a reset; the re-proof after the action looked back to the action only
    and passed, and the node returned. (The action; a placeholder when there is none.)"""
    returns = [i for i, e in enumerate(record) if e.event == "returned"]
    if not returns:
        return [], Entry(datetime.min.replace(tzinfo=timezone.utc), "action")
    before = [e for e in incident(record[: returns[-1]]) if e.outcome == "done"]
    if not before:
        return [], Entry(datetime.min.replace(tzinfo=timezone.utc), "action")
    last = before[-1]
    return [f for f in fs if (t := _event_time(f)) is not None and t < last.at], last


def _event_time(f: Failure) -> datetime | None:
    value = f.observed.get("time")
    if not isinstance(value, str):
        return None
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        return None
    return t if t.tzinfo is not None else None  # a naive time cannot be compared: never answered


def taken(record: Sequence[Entry]) -> list[Entry]:
    """The actions that count (for the budgets and a ladder's progress): each carried out or failed,
    and one still under way when it is the last entry. A pending entry followed by its outcome is
    the same action (one action at a time per node); a refused one did nothing."""
    out = [e for e in record if e.event == "action" and e.outcome in ("done", "failed")]
    last = record[-1] if record else None
    if last is not None and last.event == "action" and last.outcome == "pending":
        out.append(last)
    return out


def incident(record: Sequence[Entry]) -> list[Entry]:
    """The actions since the node last returned to service (or was held): this incident's rungs."""
    start = max((i + 1 for i, e in enumerate(record) if e.event in ("returned", "held")), default=0)
    return taken(record[start:])


def settled(record: Sequence[Entry], state: NodeState | None, now: datetime) -> tuple[Entry, ...]:
    """The record with the outcome of its last, pending action added where it is known: a reboot
    Slurm has finished (failed when Slurm gave up on it: DOWN, "reboot timed out"), or another
    action pending for longer than STALE (failed: interrupted)."""
    last = record[-1] if record else None
    if last is None or last.event != "action" or last.outcome != "pending":
        return tuple(record)
    if last.action != "reboot":
        if now - last.at < STALE:
            return tuple(record)  # under way (another nodecheck is acting on it)
        interrupted = "interrupted: no outcome was recorded (nodecheck stopped during the action?)"
        return (*record, replace(last, at=now, outcome="failed", detail=interrupted))
    if state is None or state.flags & REBOOT_FLAGS:
        return tuple(record)
    timed_out = "DOWN" in state.flags and "reboot timed out" in state.reason
    outcome: Outcome = "failed" if timed_out else "done"
    detail = f"Slurm: {state.state}" + (f", {state.reason}" if timed_out else ", the node booted")
    return (*record, replace(last, at=now, outcome=outcome, detail=detail))


def _choose(f: Failure, ladders: Ladders, current: Sequence[Entry], record: Sequence[Entry], now: datetime) -> _Choice:
    ladder = ladders.for_failure(f.check, f.observed)
    steps = tuple(ladder.steps) if ladder else ladders.otherwise
    name = ladder.name if ladder else ""
    target = gpu_target(f)
    named = f"ladder {name}" if name else "no ladder names it"
    if ladder is not None and ladder.again_within_h is not None:
        earlier = _again(ladder, target, current, record, now)
        if earlier is not None:
            return _Choice(
                f,
                ladder,
                None,
                target,
                (0, len(steps)),
                f"{f.said}: again within {hours_said(ladder.again_within_h)} of {earlier.action} "
                f"{shown_target(earlier.target)} at {stamp(earlier.at)} ({named})".replace("  ", " "),
            )
    tried = [e for e in current if (e.ladder or "") == name]
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
    ladder: Ladder, target: str, current: Sequence[Entry], record: Sequence[Entry], now: datetime
) -> Entry | None:
    """The last action of this ladder on this target before this incident and within its window."""
    assert ladder.again_within_h is not None
    window = timedelta(hours=ladder.again_within_h)
    earlier = [e for e in taken(record) if e not in current]
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
