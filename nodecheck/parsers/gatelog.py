"""nodecheck's own gate log, read back: one event per line, as nodecheck.gate.command.GateLog writes it:

    2026-12-07T21:00:00Z nodecheck[prolog] action=drain node=node2 job=41 check="gpu.xid" reason="..."

Pure: text in, events out. Remediation's memory reads it (how often nodecheck drained a node). A line
that is not an event (cut by the bounded read, or not written by nodecheck) is counted, never guessed at.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone

MAX_LINE_CHARS = 16_384  # a longer line is not one nodecheck wrote (its fields are bounded)
_EVENT = re.compile(
    r"(?P<at>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ) nodecheck\[(?P<mode>[a-z][a-z-]{0,31})\] "
    r"action=(?P<action>[a-z][a-z-]{0,63}) node=(?P<node>\S{1,128})(?: |$)"
)


@dataclass(frozen=True)
class GateEvent:
    at: datetime  # aware, UTC
    mode: str  # prolog, health, sweep, watch, ...
    action: str  # drain, still-drained, resume, hold, remedy-done, ...
    node: str  # "-" for an event about no node


@dataclass(frozen=True)
class GateLogEvents:
    events: tuple[GateEvent, ...]  # in the log's order
    unparsed: int  # lines that are not an event


def parse_gate_log(text: str) -> GateLogEvents:
    events: list[GateEvent] = []
    unparsed = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        event = parse_gate_log_line(line)
        if event is None:
            unparsed += 1
        else:
            events.append(event)
    return GateLogEvents(tuple(events), unparsed)


def parse_gate_log_line(line: str) -> GateEvent | None:
    if len(line) > MAX_LINE_CHARS:
        return None
    m = _EVENT.match(line)
    if m is None:
        return None
    try:
        at = datetime.strptime(m["at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    except ValueError:  # 2026-13-45T...: the shape of a stamp, not a time
        return None
    return GateEvent(at, m["mode"], m["action"], m["node"])
