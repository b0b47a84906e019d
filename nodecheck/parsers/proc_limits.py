"""Parse a process's resource limits: /proc/PID/limits (soft and hard, bytes), and the `ulimit -a`
listings of bash ("max locked memory (kbytes, -l) 64") and dash ("locked memory(kbytes) 64"), soft
only, converted to the kernel's units (bytes for memlock and stack)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.core.model import quote
from nodecheck.parsers.counts import TOO_BIG, u64
from nodecheck.parsers.lines import split_lines

UNLIMITED = None  # RLIM_INFINITY, printed "unlimited"

# /proc/PID/limits rows (fs/proc/base.c lnames[]) -> the rlimit names prlimit(1) and limits.conf use
PROC_NAMES = {
    "Max cpu time": "cpu",
    "Max file size": "fsize",
    "Max data size": "data",
    "Max stack size": "stack",
    "Max core file size": "core",
    "Max resident set": "rss",
    "Max processes": "nproc",
    "Max open files": "nofile",
    "Max locked memory": "memlock",
    "Max address space": "as",
    "Max file locks": "locks",
    "Max pending signals": "sigpending",
    "Max msgqueue size": "msgqueue",
    "Max nice priority": "nice",
    "Max realtime priority": "rtprio",
    "Max realtime timeout": "rttime",
}
# bash's `ulimit -a` option letters; dash's names
BASH_FLAGS = {
    "c": "core",
    "d": "data",
    "e": "nice",
    "f": "fsize",
    "i": "sigpending",
    "l": "memlock",
    "m": "rss",
    "n": "nofile",
    "q": "msgqueue",
    "r": "rtprio",
    "R": "rttime",
    "s": "stack",
    "t": "cpu",
    "u": "nproc",
    "v": "as",
    "x": "locks",
}
DASH_NAMES = {
    "time": "cpu",
    "file": "fsize",
    "data": "data",
    "stack": "stack",
    "coredump": "core",
    "memory": "rss",
    "locked memory": "memlock",
    "process": "nproc",
    "nofiles": "nofile",
    "vmemory": "as",
    "locks": "locks",
    "rtprio": "rtprio",
}
# what one unit of a shell's number is in the kernel's unit (kbytes -> bytes; bash's blocks are 1024 bytes)
_SCALE = {"kbytes": 1024, "kb": 1024, "blocks": 1024}
_KERNEL_UNIT = {"memlock": "bytes", "stack": "bytes", "nofile": "files", "nproc": "processes"}

_PROC_HEADER = re.compile(r"Limit\s+Soft Limit\s+Hard Limit\s+Units\s*")
# the rows are split with str methods, not matched by regexes: a lazy name group next to `\s+`
# backtracked over a long run of spaces (24 s for a 40 KB row; 1 MB did not finish)
_NAMES_LONGEST_FIRST = sorted(PROC_NAMES, key=len, reverse=True)


@dataclass(frozen=True)
class Limit:
    soft: int | None  # None: unlimited
    hard: int | None  # None: unlimited, or not shown (`ulimit -a` shows the soft limit only)
    unit: str  # the kernel's: "bytes", "files", "processes", ...


@dataclass(frozen=True)
class Limits:
    limits: Mapping[str, Limit]  # by rlimit name: "memlock", "nofile", "nproc", "stack", ...
    form: str  # "proc" (/proc/PID/limits: soft and hard), "bash" or "dash" (ulimit -a: soft only)

    @property
    def has_hard(self) -> bool:
        return self.form == "proc"


@dataclass(frozen=True)
class _ShellRow:
    name: str  # bash: the option letter ("l"); dash: the name ("locked memory")
    unit: str  # "kbytes", "blocks", ... or ""
    value: str
    label: str  # the row's own words, for messages


def parse_limits(text: str, tool: str = "limits") -> Limits:
    """/proc/PID/limits or a `ulimit -a` listing (bash or dash), told apart by their first line."""
    lines = [line for line in split_lines(text) if line.strip()]
    if not lines:
        raise ParseError(tool, "empty output", text)
    if _PROC_HEADER.fullmatch(lines[0]):
        return _proc(lines[1:], text, tool)
    if _bash_row(lines[0]) is not None:
        return _shell(lines, text, tool, "bash")
    if _dash_row(lines[0]) is not None:
        return _shell(lines, text, tool, "dash")
    raise ParseError(tool, f"neither /proc/PID/limits nor `ulimit -a`: {quote(lines[0])}", text)


def _proc(rows: list[str], text: str, tool: str) -> Limits:
    limits: dict[str, Limit] = {}
    for row in rows:
        label, words = _proc_row(row)
        if label is None or len(words) not in (2, 3):
            raise ParseError(tool, f"not a limits row: {quote(row)}", text)
        soft, hard = _value(words[0], 1, label, row, tool), _value(words[1], 1, label, row, tool)
        if hard is not UNLIMITED and (soft is UNLIMITED or soft > hard):
            # setrlimit(2) refuses soft > hard: the row is garbled (a hard value cut short?)
            shown = "unlimited" if soft is UNLIMITED else soft
            raise ParseError(tool, f"{label}: soft limit {shown} above its hard limit {hard}", row)
        limits[PROC_NAMES[label]] = Limit(soft, hard, words[2] if len(words) == 3 else "")
    if not limits:
        raise ParseError(tool, "a header and no limit", text)
    return Limits(limits, "proc")


def _proc_row(row: str) -> tuple[str | None, list[str]]:
    """(the row's kernel name, the words after it); (None, []) when it names no limit. The kernel
    pads the name to 25 columns: a space follows it."""
    for label in _NAMES_LONGEST_FIRST:
        if row.startswith(label) and row[len(label) : len(label) + 1].isspace():
            return label, row[len(label) :].split()
    return None, []


def _bash_row(row: str) -> _ShellRow | None:
    """bash's `NAME (UNIT, -X) VALUE` or `NAME (-X) VALUE` row, or None."""
    parts = row.rsplit(None, 1)
    if len(parts) != 2 or not parts[0].endswith(")"):
        return None
    head, value = parts
    opening = head.rfind("(")
    name, inside = head[:opening], head[opening + 1 : -1]
    if opening < 1 or not name[-1].isspace() or not name.strip():
        return None
    unit, comma, option = inside.rpartition(", ")
    if comma and (not unit or any(c in unit for c in ",()")):
        return None
    if len(option) != 2 or option[0] != "-" or not (option[1].isascii() and option[1].isalpha()):
        return None
    return _ShellRow(option[1], unit, value, name.strip())


def _dash_row(row: str) -> _ShellRow | None:
    """dash's `NAME(UNIT) VALUE` or `NAME VALUE` row (a lower-case name), or None."""
    parts = row.rsplit(None, 1)
    if len(parts) != 2:
        return None
    head, value = parts
    name, unit = head, ""
    if head.endswith(")") and (opening := head.rfind("(")) > 0:
        name, unit = head[:opening], head[opening + 1 : -1]
        if not (unit.isascii() and unit.isalpha() and unit.islower()):
            return None
    if not (name[:1].isascii() and name[:1].islower()) or not all(c == " " or "a" <= c <= "z" for c in name):
        return None
    return _ShellRow(name, unit, value, name)


def _shell(rows: list[str], text: str, tool: str, form: str) -> Limits:
    limits: dict[str, Limit] = {}
    for row in rows:
        shell_row = _bash_row(row) if form == "bash" else _dash_row(row)
        if shell_row is None:
            raise ParseError(tool, f"not a `ulimit -a` row ({form}): {quote(row)}", text)
        name = BASH_FLAGS.get(shell_row.name) if form == "bash" else DASH_NAMES.get(shell_row.name)
        if name is None:
            continue  # a row that is no rlimit (bash's pipe size) or one this shell names newly
        scale = _SCALE.get(shell_row.unit, 1)
        soft = _value(shell_row.value, scale, shell_row.label, row, tool)
        limits[name] = Limit(soft, UNLIMITED if soft is UNLIMITED else None, _KERNEL_UNIT.get(name, ""))
    if "memlock" not in limits:
        raise ParseError(tool, f"no max locked memory row in this `ulimit -a` ({form})", text)
    return Limits(limits, form)


def _value(word: str, scale: int, label: str, row: str, tool: str) -> int | None:
    if word == "unlimited":
        return UNLIMITED
    number = u64(word)
    if number is None:  # rlim_t is 64 bits; RLIM_INFINITY prints as "unlimited"
        raise ParseError(tool, f"{label}: {quote(word)} is not a number or unlimited ({TOO_BIG})", row)
    return number * scale
