"""Parse `ps` output by its header line: any subset and order of the columns nodecheck reads
(PID, PPID, UID, USER, STAT or S, ELAPSED, CGROUP, COMMAND), so `ps -e -o ...`, `ps aux` and `ps ax`
recordings read alike. The last column is the rest of the line (a command may hold spaces); every
other column is one word."""

from __future__ import annotations

import re
from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.core.model import quote
from nodecheck.parsers.counts import TOO_BIG, u64
from nodecheck.parsers.lines import split_lines

TOOL = "ps"
# header words -> the field they fill; ps names `etime` and `etimes` both ELAPSED (the values tell
# which: digits are seconds), `stat` STAT and `state`/`s` S, `comm` COMMAND (or COMM), `args` COMMAND
# (or CMD), `user`/`euser` USER, `ruser` RUSER
_FIELDS = {
    "PID": "pid",
    "PPID": "ppid",
    "UID": "uid",
    "EUID": "uid",
    "USER": "user",
    "RUSER": "user",
    "STAT": "state",
    "S": "state",
    "ELAPSED": "elapsed",
    "CGROUP": "cgroup",
    "COMMAND": "command",
    "CMD": "command",
    "COMM": "command",
}
# [[dd-]hh:]mm:ss, ps's etime; bare digits: etimes (seconds). Bounded: no process is older than
# the clock (10 digits of days is 27 million years), and int() of thousands of digits raises
_ELAPSED = re.compile(r"(?:(?:(\d{1,10})-)?(\d{1,10}):)?(\d{1,10}):(\d{1,10})", re.ASCII)
# a process state letter, then BSD flags ("Ds+", "Sl", "Z", "I<")
_STATE = re.compile(r"[DRSTtWXZIPK][<NLsl+]*", re.ASCII)


@dataclass(frozen=True)
class Process:
    pid: int
    state: str  # as printed: "Ds+"; `code` is its first letter
    ppid: int | None = None
    uid: int | None = None
    user: str | None = None
    elapsed_s: int | None = None  # the process's age (ps has no time-in-state)
    cgroup: str | None = None
    command: str = ""  # comm or args, whichever column came first
    raw: str = ""  # the line as printed

    @property
    def code(self) -> str:
        return self.state[:1]


@dataclass(frozen=True)
class ProcessTable:
    columns: tuple[str, ...]  # the header's words, as printed
    processes: tuple[Process, ...]

    def has(self, field: str) -> bool:
        """Whether the header had a column for `field` ("elapsed", "uid", "cgroup", ...)."""
        return any(_FIELDS.get(c) == field for c in self.columns)


def parse_elapsed(text: str) -> int:
    """ps ELAPSED: "51-21:05:51", "02:03:04", "05:09" (etime) or "4711" (etimes) -> seconds."""
    if text.isascii() and text.isdigit():
        if (seconds := u64(text)) is None:
            raise ValueError(f"not an elapsed time: {quote(text)} ({TOO_BIG} seconds)")
        return seconds
    m = _ELAPSED.fullmatch(text)
    if m is None:
        raise ValueError(f"not an elapsed time: {quote(text)}")
    days, hours, minutes, seconds = (int(g) if g else 0 for g in m.groups())
    if minutes > 59 or seconds > 59:
        raise ValueError(f"not an elapsed time: {quote(text)}")
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def parse_ps(text: str) -> ProcessTable:
    """A ps listing: a header line naming PID and a state column (STAT or S), then one process a line."""
    lines = [line for line in split_lines(text) if line.strip()]
    if not lines:
        raise ParseError(TOOL, "empty output: no header, no process", text)
    columns = tuple(lines[0].split())
    fields = [_FIELDS.get(c) for c in columns]
    if "pid" not in fields:
        raise ParseError(TOOL, f"the first line is not a ps header naming PID: {quote(lines[0])}", text)
    if "state" not in fields:
        raise ParseError(TOOL, "no process state column (STAT or S) in the header", text)
    processes = []
    for number, line in enumerate(lines[1:], start=2):
        words = line.split(None, len(columns) - 1)
        if len(words) < len(columns):
            raise ParseError(TOOL, f"line {number} has {len(words)} of {len(columns)} columns (cut off?)", line)
        values: dict[str, str] = {}
        for field, word in zip(fields, words):
            if field is not None and field not in values:  # two COMMAND columns: comm, then args
                values[field] = word
        try:
            processes.append(_process(values, line))
        except ValueError as e:
            raise ParseError(TOOL, f"line {number}: {e}", line) from None
    return ProcessTable(columns, tuple(processes))


def _process(values: dict[str, str], line: str) -> Process:
    state = values["state"]
    if not _STATE.fullmatch(state):
        raise ValueError(f"not a process state: {quote(state)}")
    return Process(
        pid=_int(values["pid"], "PID"),
        state=state,
        ppid=_int(values["ppid"], "PPID") if "ppid" in values else None,
        uid=_int(values["uid"], "UID") if "uid" in values else None,
        user=values.get("user"),
        elapsed_s=parse_elapsed(values["elapsed"]) if "elapsed" in values else None,
        cgroup=values.get("cgroup"),
        command=values.get("command", ""),
        raw=line,
    )


def _int(text: str, what: str) -> int:
    number = u64(text)
    if number is None:
        too_big = f" ({TOO_BIG})" if text.isascii() and text.isdigit() else ""
        raise ValueError(f"{what} {quote(text)} is not a number{too_big}")
    return number
