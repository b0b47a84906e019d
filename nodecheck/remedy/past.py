"""Reading a node's past for the memory rules (nodecheck.remedy.memory): nodecheck's drains of it
from the gate log (each node's own, or the sweep host's), and its counters' rises from the sweep
history, which the sweep hands in (the history is the fleet's: nodecheck.fleet reads it).

The gate log is read bounded (its newest MAX_BYTES), never through a symbolic link, and only when
it is root's word: a log another user could write could make root hold nodes (and a forged resume
could hide a drain). What cannot be read is said, and its rules match nothing."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from nodecheck.config.remedy import MemoryRule
from nodecheck.config.yaml_source import not_roots_word
from nodecheck.parsers.gatelog import GateEvent, parse_gate_log
from nodecheck.remedy.memory import GATE_LOG, SWEEP_HISTORY, source_of
from nodecheck.remedy.model import Past, Rise
from nodecheck.report import store

MAX_BYTES = 8 * 1024 * 1024  # weeks of a busy node's gate log (a line is about 300 bytes)
# the events that leave a node drained by nodecheck, and the one that ends that
DRAINED = ("drain", "still-drained")
RESUMED = ("resume",)

# the sweep history's answer: for these nodes and counters, each rise since the time given
RisesOf = Callable[[Sequence[str], Sequence[str], datetime], Mapping[str, Sequence[Rise]]]


@dataclass(frozen=True)
class Read:
    past: dict[str, Past]
    problems: tuple[str, ...]  # a source that could not be read, and why


def read_past(
    nodes: Sequence[str],
    rules: Sequence[MemoryRule],
    now: datetime,
    *,
    gate_log: str | None,
    rises_of: RisesOf | None = None,
) -> Read:
    """The past of `nodes` that `rules` need (nothing is read for a source no rule counts)."""
    sources = {source_of(r) for r in rules}
    read: set[str] = set()
    problems: list[str] = []
    drains: dict[str, tuple[datetime, ...]] = {}
    rises: dict[str, tuple[Rise, ...]] = {}
    if GATE_LOG in sources and gate_log:
        try:
            drains = drain_starts(read_gate_log(gate_log), nodes)
            read.add(GATE_LOG)
        except GateLogUnreadable as e:
            problems.append(str(e))
    if SWEEP_HISTORY in sources and rises_of is not None:
        counters = sorted({r.counter for r in rules if r.counter})
        longest = max(r.within_h for r in rules if r.counter)
        try:
            found = rises_of(nodes, counters, now - timedelta(hours=longest))
            rises = {n: tuple(found.get(n, ())) for n in nodes}
            read.add(SWEEP_HISTORY)
        except HistoryUnreadable as e:
            problems.append(f"the sweep history could not be read: {e}")
    frozen = frozenset(read)
    return Read({n: Past(drains.get(n, ()), rises.get(n, ()), frozen) for n in nodes}, tuple(problems))


class GateLogUnreadable(Exception):
    pass


class HistoryUnreadable(Exception):
    """What a RisesOf raises when the sweep history cannot be read."""


def read_gate_log(path: str) -> str:
    """The newest MAX_BYTES of the gate log, whole lines ("" when there is none yet)."""
    try:
        found = store.read_newest(path, MAX_BYTES)
    except OSError as e:
        raise GateLogUnreadable(f"the gate log {path} cannot be read: {store.why(e)}") from None
    if found is None:
        return ""
    text, st = found
    if why := not_roots_word(st.st_uid, st.st_mode):
        raise GateLogUnreadable(f"the gate log {path} is not root's word ({why}): its drains are not counted")
    return text


def drain_starts(text: str, nodes: Sequence[str]) -> dict[str, tuple[datetime, ...]]:
    """When each of nodecheck's drains of each node began: a drain while the log last showed the node
    resumed (or never saw it), not the refresh of a drain under way."""
    wanted = set(nodes)
    drained: dict[str, bool] = {}
    starts: dict[str, list[datetime]] = {n: [] for n in nodes}
    for e in parse_gate_log(text).events:
        if e.node not in wanted:
            continue
        _step(e, drained, starts)
    return {n: tuple(ts) for n, ts in starts.items() if ts}


def _step(e: GateEvent, drained: dict[str, bool], starts: dict[str, list[datetime]]) -> None:
    if e.action in DRAINED:
        if not drained.get(e.node):
            starts[e.node].append(e.at)
        drained[e.node] = True
    elif e.action in RESUMED:
        drained[e.node] = False
