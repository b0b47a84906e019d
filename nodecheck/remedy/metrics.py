"""Remediation in Prometheus' textfile format, from the action records: every action by kind and
outcome, the nodes under repair or held, and each node's mean time between incidents. Gauges over
the records (which are pruned to their newest entries), so use them as levels, and increase() on
nodecheck_remedy_actions only within a record's span."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime

from nodecheck.remedy.model import Entry, Plan
from nodecheck.report.metrics import write_family


def incidents(entries: Sequence[Entry]) -> list[datetime]:
    """When each incident began: its first action (an incident ends with a return or a hold)."""
    starts: list[datetime] = []
    open_ = False
    for e in entries:
        if e.event == "action" and e.outcome in ("done", "failed", "pending") and not open_:
            starts.append(e.at)
            open_ = True
        elif e.event in ("returned", "held"):
            open_ = False
    return starts


def mean_time_between_incidents_s(entries: Sequence[Entry]) -> float | None:
    """Mean seconds between the starts of a node's incidents; None with fewer than two."""
    starts = incidents(entries)
    if len(starts) < 2:
        return None
    return (starts[-1] - starts[0]).total_seconds() / (len(starts) - 1)


def render(records: Mapping[str, Sequence[Entry]], the_plan: Plan | None = None) -> str:
    actions: Counter[tuple[str, str, str]] = Counter()
    for node, entries in records.items():
        for e in entries:
            if e.event == "action" and e.outcome != "pending":
                actions[(node, e.action, e.outcome)] += 1
    out: list[str] = []
    write_family(
        out,
        "nodecheck_remedy_actions",
        "actions in the node's remediation record, by kind and outcome (done, failed, refused)",
        [({"node": n, "action": a, "outcome": o}, c) for (n, a, o), c in sorted(actions.items())],
    )
    write_family(
        out,
        "nodecheck_remedy_held",
        "1 when the node's last record entry holds it for a person",
        [({"node": n}, int(bool(es) and es[-1].event == "held")) for n, es in sorted(records.items())],
    )
    mtbi = [(n, mean_time_between_incidents_s(es)) for n, es in sorted(records.items())]
    write_family(
        out,
        "nodecheck_remedy_mean_time_between_incidents_seconds",
        "mean time between the starts of the node's remediation incidents (nodes with two or more)",
        [({"node": n}, v) for n, v in mtbi if v is not None],
    )
    if the_plan is not None:
        verbs = Counter(p.verb for p in the_plan.nodes)
        write_family(
            out,
            "nodecheck_remedy_plan_nodes",
            "nodes by what the last remediation plan said about them",
            [({"plan": v}, verbs.get(v, 0)) for v in ("act", "return", "hold", "wait", "leave", "healthy")],
        )
    return "".join(out)
