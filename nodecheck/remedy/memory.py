"""The memory rules, pure: a node's past (its drains, its counters' rises) and the rules -> why it
is held for a person rather than acted on again, or "" when no rule matches.

Each rule counts its own source: `drains` the times nodecheck drained the node (the gate log),
`counter`/`rises` the sweeps in which that counter rose on one port (the sweep history). A source
that could not be read matches nothing: memory makes a plan more careful, never bolder, so a lost
log means fewer holds, never an action that would not otherwise be taken."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime, timedelta

from nodecheck.config.remedy import MemoryRule, hours_said
from nodecheck.remedy.model import Past, stamp

GATE_LOG = "gate log"
SWEEP_HISTORY = "sweep history"


def source_of(rule: MemoryRule) -> str:
    return GATE_LOG if rule.drains is not None else SWEEP_HISTORY


def held_by(past: Past, rules: Sequence[MemoryRule], now: datetime) -> str:
    """Why the node is held (the first rule that matches, with what it counted), or ""."""
    for rule in rules:
        if source_of(rule) not in past.read:
            continue
        since = now - timedelta(hours=rule.within_h)
        why = _drains(past, rule, since) if rule.drains is not None else _rises(past, rule, since)
        if why:
            return why
    return ""


def _drains(past: Past, rule: MemoryRule, since: datetime) -> str:
    assert rule.drains is not None
    times = sorted(t for t in past.drains if t >= since)
    if len(times) < rule.drains:
        return ""
    shown = ", ".join(stamp(t) for t in times[-3:])
    return (
        f"drained {len(times)} times within {hours_said(rule.within_h)} ({'... ' if len(times) > 3 else ''}{shown}; "
        f"memory rule {rule.name}: {rule.drains} or more)"
    )


def _rises(past: Past, rule: MemoryRule, since: datetime) -> str:
    assert rule.rises is not None
    by_port: dict[str, set[datetime]] = defaultdict(set)
    for r in past.rises:
        if r.counter == rule.counter and r.at >= since:
            by_port[r.port].add(r.at)
    # the port that rose in the most sweeps (natural tie-break: its name)
    port, sweeps = max(sorted(by_port.items()), key=lambda kv: len(kv[1]), default=("", set()))
    if len(sweeps) < rule.rises:
        return ""
    return (
        f"port {port}: {rule.counter} rose in {len(sweeps)} sweeps within {hours_said(rule.within_h)} "
        f"(the last {stamp(max(sweeps))}; memory rule {rule.name}: {rule.rises} or more)"
    )
