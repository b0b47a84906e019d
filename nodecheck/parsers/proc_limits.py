"""Parse a process's resource limits: /proc/PID/limits (soft and hard, bytes), and the `ulimit -a`
listings of bash ("max locked memory (kbytes, -l) 64") and dash ("locked memory(kbytes) 64"), soft
only, converted to the kernel's units (bytes for memlock and stack)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.core.model import quote
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
_PROC_ROW = re.compile(r"(Max [a-z ]+?)\s{2,}(\S+)\s+(\S+)(?:\s+(\S+))?\s*")
_BASH_ROW = re.compile(r"(?P<name>.+?)\s+\((?:(?P<unit>[^,()]+), )?-(?P<flag>[A-Za-z])\)\s+(?P<value>\S+)\s*")
_DASH_ROW = re.compile(r"(?P<name>[a-z][a-z ]*?)(?:\((?P<unit>[a-z]+)\))?\s+(?P<value>\S+)\s*")
_NUMBER = re.compile(r"\d+", re.ASCII)


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


def parse_limits(text: str, tool: str = "limits") -> Limits:
    """/proc/PID/limits or a `ulimit -a` listing (bash or dash), told apart by their first line."""
    lines = [line for line in split_lines(text) if line.strip()]
    if not lines:
        raise ParseError(tool, "empty output", text)
    if _PROC_HEADER.fullmatch(lines[0]):
        return _proc(lines[1:], text, tool)
    if _BASH_ROW.fullmatch(lines[0]):
        return _shell(lines, text, tool, "bash")
    if _DASH_ROW.fullmatch(lines[0]):
        return _shell(lines, text, tool, "dash")
    raise ParseError(tool, f"neither /proc/PID/limits nor `ulimit -a`: {quote(lines[0])}", text)


def _proc(rows: list[str], text: str, tool: str) -> Limits:
    limits: dict[str, Limit] = {}
    for row in rows:
        m = _PROC_ROW.fullmatch(row)
        if m is None or m.group(1) not in PROC_NAMES:
            raise ParseError(tool, f"not a limits row: {quote(row)}", text)
        name = PROC_NAMES[m.group(1)]
        limits[name] = Limit(_value(m.group(2), 1, row, tool), _value(m.group(3), 1, row, tool), m.group(4) or "")
    if not limits:
        raise ParseError(tool, "a header and no limit", text)
    return Limits(limits, "proc")


def _shell(rows: list[str], text: str, tool: str, form: str) -> Limits:
    limits: dict[str, Limit] = {}
    for row in rows:
        m = (_BASH_ROW if form == "bash" else _DASH_ROW).fullmatch(row)
        name = None
        if m is not None:
            name = BASH_FLAGS.get(m.group("flag")) if form == "bash" else DASH_NAMES.get(m.group("name"))
        if m is None:
            raise ParseError(tool, f"not a `ulimit -a` row ({form}): {quote(row)}", text)
        if name is None:
            continue  # a row that is no rlimit (bash's pipe size) or one this shell names newly
        scale = _SCALE.get(m.group("unit") or "", 1)
        soft = _value(m.group("value"), scale, row, tool)
        limits[name] = Limit(soft, UNLIMITED if soft is UNLIMITED else None, _KERNEL_UNIT.get(name, ""))
    if "memlock" not in limits:
        raise ParseError(tool, f"no max locked memory row in this `ulimit -a` ({form})", text)
    return Limits(limits, form)


def _value(word: str, scale: int, row: str, tool: str) -> int | None:
    if word == "unlimited":
        return UNLIMITED
    if not _NUMBER.fullmatch(word):
        raise ParseError(tool, f"{quote(word)} is not a number or unlimited", row)
    return int(word) * scale
