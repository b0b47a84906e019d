"""The sweep history as the remediation memory rules read it: each sweep in which one of a node's
kept error counters rose (on one port, within one boot, read the same way) since a time, by the
same rule as the sweep's diff (nodecheck.report.diff.counter_changes)."""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime
from itertools import pairwise

from nodecheck.fleet.history import History
from nodecheck.remedy.model import Rise
from nodecheck.remedy.past import HistoryUnreadable, RisesOf
from nodecheck.report.diff import CounterRow, counter_changes


def rises_in(history: History) -> RisesOf:
    def rises(nodes: Sequence[str], counters: Sequence[str], since: datetime) -> Mapping[str, Sequence[Rise]]:
        try:
            sweeps = history.counters_since(nodes, counters, since)
        except (sqlite3.Error, ValueError) as e:  # ValueError: a damaged row (a time that does not parse)
            raise HistoryUnreadable(f"{history.path}: {e}") from None
        return counter_rises(sweeps, since)

    return rises


def counter_rises(sweeps: Sequence[tuple[datetime, Sequence[CounterRow]]], since: datetime) -> dict[str, list[Rise]]:
    """Each node's rises, sweep to sweep: each sweep is compared with the node's previous sweep that
    read its counters (a sweep that did not cover the node neither rises nor hides a rise)."""
    by_node: dict[str, list[tuple[datetime, list[CounterRow]]]] = defaultdict(list)
    for finished, rows in sweeps:
        mine: dict[str, list[CounterRow]] = defaultdict(list)
        for row in rows:
            mine[row.node].append(row)
        for node, node_rows in mine.items():
            by_node[node].append((finished, node_rows))
    out: dict[str, list[Rise]] = {}
    for node, seen in by_node.items():
        found = [
            Rise(finished, r.port, r.counter)
            for (_, before), (finished, now) in pairwise(seen)
            if finished >= since
            for r in counter_changes(before, now)[0]
        ]
        if found:
            out[node] = found
    return out
