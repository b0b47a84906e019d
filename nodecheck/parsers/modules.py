"""Parse the loaded kernel modules: `lsmod` ("Module  Size  Used by", then "name size count users")
and /proc/modules ("name size count users, state address (taint)"). A `lsmod | grep` recording has
no header; both are read. A module named as a user of another one is loaded too (the kernel lists
only loaded modules as holders), which is how a filtered listing still shows them."""

from __future__ import annotations

import re
from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.core.model import quote
from nodecheck.parsers.counts import TOO_BIG, u64
from nodecheck.parsers.lines import split_lines

_NAME = re.compile(r"[A-Za-z0-9_]+", re.ASCII)
_LSMOD_HEADER = re.compile(r"Module\s+Size\s+Used by\s*")
_LSMOD_ROW = re.compile(
    r"(?P<name>[A-Za-z0-9_]+)\s+(?P<size>\d+)\s+(?P<count>-?\d+|-)(?:\s+(?P<users>\S+))?\s*", re.ASCII
)
# /proc/modules: name size refcount users-or-"-" state address [(taints)]; users end with ","
_PROC_ROW = re.compile(
    r"(?P<name>[A-Za-z0-9_]+) (?P<size>\d+) (?P<count>-?\d+|-) (?P<users>\S+) "
    r"(?P<state>Live|Loading|Unloading) 0x[0-9a-f]+(?: \((?P<taint>[A-Z]+)\))?\s*",
    re.ASCII,
)


@dataclass(frozen=True)
class Module:
    name: str  # as the kernel names it: underscores ("nvidia_uvm")
    size: int
    users: tuple[str, ...]  # the modules that use this one
    state: str = "Live"  # /proc/modules: Live, Loading, Unloading; lsmod shows only the name


@dataclass(frozen=True)
class LoadedModules:
    modules: dict[str, Module]  # by name, as listed
    holders: frozenset[str]  # names seen only as a user of a listed module
    form: str  # "lsmod" or "proc-modules"

    def loaded(self, name: str) -> bool:
        return canonical(name) in self.modules or canonical(name) in self.holders


def canonical(name: str) -> str:
    """modprobe treats "-" and "_" alike; the kernel names modules with "_"."""
    return name.replace("-", "_")


def parse_lsmod(text: str) -> LoadedModules:
    return _parse(text, "lsmod", _LSMOD_ROW, header=_LSMOD_HEADER)


def parse_proc_modules(text: str) -> LoadedModules:
    return _parse(text, "proc-modules", _PROC_ROW, header=None)


def _parse(text: str, form: str, row: re.Pattern[str], header: re.Pattern[str] | None) -> LoadedModules:
    tool = "lsmod" if form == "lsmod" else "/proc/modules"
    lines = [line for line in split_lines(text) if line.strip()]
    if header is not None and lines and header.fullmatch(lines[0]):
        lines = lines[1:]
    if not lines:
        # a running kernel with loadable modules lists some; an empty list is not "none loaded"
        raise ParseError(tool, "no module listed", text)
    modules: dict[str, Module] = {}
    for line in lines:
        m = row.fullmatch(line)
        if m is None:
            raise ParseError(tool, f"not a module line: {quote(line)}", text)
        # "-": no user; "[permanent]": a module that cannot be unloaded, not a user
        users = tuple(u for u in (m.group("users") or "").split(",") if _NAME.fullmatch(u))
        state = m.groupdict().get("state") or "Live"
        size = u64(m.group("size"))
        if size is None:
            raise ParseError(tool, f"module size is not a count ({TOO_BIG}): {quote(line)}", text)
        modules[m.group("name")] = Module(m.group("name"), size, users, state)
    holders = frozenset(u for mod in modules.values() for u in mod.users if u not in modules)
    return LoadedModules(modules, holders, form)
