"""Each node's action record: one JSON line per action, return to service or hold, in
<state_dir>/<node>.jsonl (0600, its directory 0700: root's memory of what it did to a node).

The budgets and the ladders' progress are read from it, so a record that cannot be read is not an
empty one: RecordError, and the planner leaves the node waiting. Reads are bounded (the newest
MAX_ENTRIES lines of at most MAX_BYTES); a line that is not an entry is an error too (root wrote
every line, so a bad one means the file was damaged or edited)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path

from nodecheck.core.model import shown
from nodecheck.remedy.model import Entry
from nodecheck.report import store

MAX_BYTES = 256 * 1024
MAX_ENTRIES = 500  # a year of two actions a day; pruned to this on write
_NODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_EVENTS = ("action", "returned", "held")
_OUTCOMES = ("done", "failed", "pending", "refused", "")


class RecordError(Exception):
    pass


def path_of(state_dir: str | Path, node: str) -> Path:
    if not _NODE.fullmatch(node) or node in (".", ".."):
        raise RecordError(f"node name {shown(node)} cannot name a record file")
    return Path(state_dir) / f"{node}.jsonl"


def load(state_dir: str | Path, node: str) -> tuple[Entry, ...]:
    """The node's entries, oldest first; () when it has no record yet."""
    path = path_of(state_dir, node)
    try:
        found = store.read_newest(path, MAX_BYTES)
    except OSError as e:
        raise RecordError(f"{path}: {store.why(e)}") from None
    if found is None:
        return ()
    lines = found[0].splitlines()[-MAX_ENTRIES:]
    return tuple(_entry(line, path, i) for i, line in enumerate(lines, start=1) if line.strip())


def load_many(state_dir: str | Path, nodes: Iterable[str]) -> tuple[dict[str, tuple[Entry, ...]], dict[str, str]]:
    """(records by node, why a node's record could not be read)."""
    records: dict[str, tuple[Entry, ...]] = {}
    problems: dict[str, str] = {}
    for node in nodes:
        try:
            records[node] = load(state_dir, node)
        except RecordError as e:
            problems[node] = str(e)
    return records, problems


def append(state_dir: str | Path, node: str, entries: Sequence[Entry]) -> None:
    """Add entries to the node's record, synced; the file rewritten whole (atomically) when it has
    grown past MAX_ENTRIES lines."""
    path = path_of(state_dir, node)
    store.make_dirs(path.parent, store.private())
    text = "".join(dumps(e) + "\n" for e in entries)
    store.append_synced(path, text, store.private())
    kept = load(state_dir, node)
    if len(kept) >= MAX_ENTRIES:
        store.write_atomic(path, "".join(dumps(e) + "\n" for e in kept[-MAX_ENTRIES // 2 :]), store.private())


def dumps(e: Entry) -> str:
    data = {
        "at": e.at.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "event": e.event,
        "action": e.action,
        "target": e.target,
        "ladder": e.ladder,
        "check": e.check,
        "outcome": e.outcome,
        "detail": e.detail[:2000],
        "evidence": e.evidence[:1000],
    }
    return json.dumps({k: v for k, v in data.items() if v != "" or k in ("at", "event")}, ensure_ascii=False)


def _entry(line: str, path: Path, number: int) -> Entry:
    try:
        data = json.loads(line)
        if not isinstance(data, dict):
            raise ValueError("not an object")
        at = datetime.strptime(data["at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
        event, outcome = data["event"], data.get("outcome", "")
        if event not in _EVENTS or outcome not in _OUTCOMES:
            raise ValueError(f"event {shown(event)}, outcome {shown(outcome)}")
        fields = {k: data.get(k, "") for k in ("action", "target", "ladder", "check", "detail", "evidence")}
        if not all(isinstance(v, str) for v in fields.values()):
            raise ValueError("a field is not text")
        return Entry(at, event, outcome=outcome, **fields)
    except (ValueError, KeyError, TypeError) as e:
        raise RecordError(
            f"{path}: line {number} of the newest is not a record entry ({e}): {shown(line, 120)}"
        ) from None
