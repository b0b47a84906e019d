"""Parse `scontrol show node` (the multi-line form) into each node's state and drain reason."""
from __future__ import annotations

import re
from dataclasses import dataclass

from nodecheck.errors import ParseError

OWNER = "nodecheck:"                           # every drain reason nodecheck sets starts with this
TOOL = "scontrol show node"

# Flags that mean "taken out of service by someone, with a reason": an admin's or a health
# check's drain, Slurm's own DOWN ("Not responding", "Kill task failed") or FAIL. MAINT is left
# out: it is a reservation's flag, not a decision about the node's health.
UNAVAILABLE_FLAGS = frozenset({"DRAIN", "DRAINED", "DRAINING", "DOWN", "FAIL", "FAILING"})

_NODE_NAME = re.compile(r"NodeName=(\S+)")
_KEY = re.compile(r"([A-Za-z][A-Za-z0-9_]*)=")          # each line of a block starts with Key=
_STATE_FIELD = re.compile(r"(?:^|\s)State=(\S*)")        # not NextState=
# 22.05 prints base+FLAG+FLAG ("DOWN+DRAIN+NOT_RESPONDING"); 20.11 and older mark a node that
# does not respond with '*' on the base ("DOWN*+DRAIN").
_STATE = re.compile(r"[A-Z][A-Z_]*\*?(?:\+[A-Z][A-Z_]*\*?)*")
# " [root@2026-11-29T14:02:03]" that Slurm appends to the first line of a reason. The user may be
# a uid or "user@domain" (sssd): the '@' that counts is the one before the timestamp.
_STAMP = re.compile(r"(.*) \[([^\s\[\]]+)@(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\]\s*", re.ASCII | re.DOTALL)
# Keys whose value is the rest of the line, spaces and '=' included.
_FREE_TEXT = frozenset({"OS", "Reason", "Comment", "Extra"})
# Slurm prints each further line of a multi-line reason after the block's 3-space indent and 7
# more spaces (node_info.c: line_end + "       ").
_REASON_MORE = " " * 10
_NO_NODES = "No nodes in the system"         # what scontrol prints for a cluster without nodes


@dataclass(frozen=True)
class NodeState:
    name: str
    state: str                                 # raw State= value: "IDLE+DRAIN", "DOWN+NOT_RESPONDING"
    flags: frozenset[str]                      # its words, '*' stripped: {"IDLE", "DRAIN"}
    reason: str                                # without the " [user@timestamp]" suffix; "" if none
    reason_user: str = ""                      # "root"
    reason_time: str = ""                      # "2026-11-29T14:00:00", as Slurm printed it
    not_responding: bool = False               # '*' in State (20.11 and older) or +NOT_RESPONDING (22.05)

    @property
    def drained(self) -> bool:
        """Out of service with a reason someone set: DRAIN, DOWN or FAIL (Slurm's own DOWN included)."""
        return bool(self.flags & UNAVAILABLE_FLAGS)

    @property
    def ours(self) -> bool:
        """The reason is one nodecheck set."""
        return self.reason.startswith(OWNER)


@dataclass
class _Block:
    name: str
    first_line: int                            # index into the lines, for the excerpt
    state: str | None = None
    reason: list[str] | None = None            # the reason's lines, suffix removed
    reason_user: str = ""
    reason_time: str = ""


def parse_show_node(text: str) -> dict[str, NodeState]:
    """Every node block of `scontrol show node [names]`, by name in output order.

    Raises ParseError for text that is not that output: empty text, a line before the first
    NodeName=, a line in a block that is not Key=..., a block without State=, a node twice."""
    lines = text.splitlines()
    if not any(line.strip() for line in lines):
        raise ParseError(TOOL, "empty output", text)
    if [line.strip() for line in lines if line.strip()] == [_NO_NODES]:
        return {}
    blocks: list[_Block] = []
    current: _Block | None = None
    in_reason = False                          # the previous line was the reason or more of it
    for i, line in enumerate(lines):
        if not line.strip():
            current, in_reason = None, False   # a blank line ends a block
            continue
        if current is not None and in_reason and line.startswith(_REASON_MORE):
            current.reason.append(line[len(_REASON_MORE):])
            continue
        stripped = line.strip()
        match = _NODE_NAME.match(stripped)
        if match:
            current, in_reason = _Block(match[1], i), False
            blocks.append(current)
            _fields(current, stripped, text)
            continue
        if current is None:
            raise ParseError(TOOL, f"expected a line like NodeName=<name> ..., got {_quote(stripped)}", text)
        if not _KEY.match(stripped):
            # indentation may be lost (a forum post), but every line still starts with Key=
            raise ParseError(TOOL, f"node {current.name}: unexpected line {_quote(stripped)}", text)
        in_reason = _fields(current, line.lstrip(), text)
    return _states(blocks, lines, text)


def _fields(block: _Block, line: str, text: str) -> bool:
    """Read the fields nodecheck needs from one line of a block; True if it was the Reason line."""
    key = _KEY.match(line)[1]
    if key in _FREE_TEXT:
        if key == "Reason":
            if block.reason is not None:
                raise ParseError(TOOL, f"node {block.name}: two Reason= lines", text)
            _reason(block, line[len("Reason="):])
            return True
        return False
    match = _STATE_FIELD.search(line)
    if match:
        if block.state is not None:
            raise ParseError(TOOL, f"node {block.name}: two State= fields", text)
        if not _STATE.fullmatch(match[1]):
            raise ParseError(TOOL, f"node {block.name}: State={match[1]} is not a Slurm state", text)
        block.state = match[1]
    return False


def _reason(block: _Block, value: str) -> None:
    stamp = _STAMP.fullmatch(value)
    if stamp:
        block.reason = [stamp[1]]
        block.reason_user, block.reason_time = stamp[2], stamp[3]
    else:                                      # no reason_time recorded: Slurm prints the text alone
        block.reason = [value]


def _states(blocks: list[_Block], lines: list[str], text: str) -> dict[str, NodeState]:
    states: dict[str, NodeState] = {}
    for block in blocks:
        if block.state is None:                # cut off, or not scontrol's block
            raise ParseError(TOOL, f"node {block.name}: no State= field (output cut off?)",
                             "\n".join(lines[block.first_line:]))
        if block.name in states:
            raise ParseError(TOOL, f"node {block.name} appears twice", text)
        words = block.state.split("+")
        flags = frozenset(word.rstrip("*") for word in words)
        states[block.name] = NodeState(
            name=block.name, state=block.state, flags=flags,
            reason="\n".join(block.reason or ()), reason_user=block.reason_user,
            reason_time=block.reason_time,
            not_responding="*" in block.state or "NOT_RESPONDING" in flags)
    return states


def _quote(value: str, limit: int = 60) -> str:
    """A value for a message: quoted, and bounded so one garbage line cannot flood a report."""
    return repr(value) if len(value) <= limit else repr(value[:limit]) + f"… ({len(value)} characters)"
