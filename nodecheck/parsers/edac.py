"""Read a listing of the EDAC memory-controller sysfs tree (/sys/devices/system/edac/mc).

Two forms, one file per line:
    /sys/devices/system/edac/mc/mc0/ce_count<TAB>0      what the mem probe prints (sysfs_dump)
    /sys/devices/system/edac/mc/mc0/ce_count:0          what `grep . FILES` prints (issue threads)
A path may also be relative to the mc directory ("mc0/mc_name:..."), as `cd .../mc; grep . mc*/x` prints.

The kernel's layout (Documentation/admin-guide/ras.rst, "EDAC sysfs"): per controller mcN/{mc_name,
size_mb, ce_count, ue_count, ce_noinfo_count, ue_noinfo_count, seconds_since_reset}; per memory
module mcN/dimmM/ (or mcN/rankM/ when the controller cannot tell modules apart) with dimm_label,
size (MB), dimm_ce_count, dimm_ue_count; and the legacy mcN/csrowM/{ce_count, ue_count, chK_*}
view of the same errors, which is kept only where a controller has no dimm/rank directories.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from nodecheck.core.errors import ParseError
from nodecheck.core.model import quote
from nodecheck.parsers.counts import TOO_BIG, u64
from nodecheck.parsers.lines import split_lines

TOOL = "EDAC sysfs"
_PATH = re.compile(r"^(?:.*/)?mc(\d+)/(?:(dimm|rank|csrow)(\d+)/)?([A-Za-z0-9_]+)$", re.ASCII)
_CONTROLLER_COUNTS = {
    "ce_count": "ce",
    "ue_count": "ue",
    "ce_noinfo_count": "ce_noinfo",
    "ue_noinfo_count": "ue_noinfo",
    "size_mb": "size_mb",
    "seconds_since_reset": "seconds_since_reset",
}
_MODULE_COUNTS = {"dimm_ce_count": "ce", "dimm_ue_count": "ue", "ce_count": "ce", "ue_count": "ue", "size": "size_mb"}


@dataclass(frozen=True)
class Module:
    """A DIMM (dimmN), a rank (rankN) or a legacy chip-select row (csrowN) of one controller."""

    controller: int
    kind: str  # "dimm", "rank" or "csrow"
    index: int
    label: str | None = None
    ce: int | None = None
    ue: int | None = None
    size_mb: int | None = None

    @property
    def name(self) -> str:
        """How a message names it: its label when the firmware gave one, else mc0/dimm3."""
        where = f"mc{self.controller}/{self.kind}{self.index}"
        return f"{self.label} ({where})" if self.label else where


@dataclass(frozen=True)
class Controller:
    index: int
    name: str | None = None  # "Intel_10nm Socket#0 IMC#0"
    size_mb: int | None = None
    ce: int | None = None
    ue: int | None = None
    ce_noinfo: int | None = None
    ue_noinfo: int | None = None
    seconds_since_reset: int | None = None
    modules: tuple[Module, ...] = ()

    @property
    def title(self) -> str:
        return f"mc{self.index} ({self.name})" if self.name else f"mc{self.index}"


@dataclass(frozen=True)
class Edac:
    controllers: tuple[Controller, ...]
    unreadable: tuple[tuple[str, str], ...]  # (path, why) of files the probe could not read

    @property
    def modules(self) -> list[Module]:
        return [m for c in self.controllers for m in c.modules]


def parse_edac(text: str) -> Edac:
    """The controllers and their modules, in index order. A line that names no file of an mc
    directory, or a counter that is not a number, raises ParseError."""
    controllers: dict[int, dict[str, Any]] = {}
    modules: dict[tuple[int, str, int], dict[str, Any]] = {}
    unreadable: list[tuple[str, str]] = []
    for number, line in enumerate(split_lines(text), 1):
        if not line.strip():
            continue
        path, value = _split(line, number)
        match = _PATH.match(path)
        if match is None:
            raise ParseError(TOOL, f"line {number}: {path!r} is not a file of an EDAC mc directory", line)
        mc, kind, index, name = int(match.group(1)), match.group(2), match.group(3), match.group(4)
        controller = controllers.setdefault(mc, {"index": mc})
        if value.startswith("!"):  # the probe could not read it: no value, never zero
            unreadable.append((path, value[1:] or "unreadable"))
            continue
        if kind is None:
            if name == "mc_name":
                controller["name"] = value.strip()
            elif name in _CONTROLLER_COUNTS:
                controller[_CONTROLLER_COUNTS[name]] = _count(name, value, line, number)
            continue
        module = modules.setdefault((mc, kind, int(index)), {"controller": mc, "kind": kind, "index": int(index)})
        if name == "dimm_label":
            module["label"] = value.strip() or None
        elif name in _MODULE_COUNTS:
            module[_MODULE_COUNTS[name]] = _count(name, value, line, number)
    built = []
    for mc in sorted(controllers):
        mine = [Module(**m) for (c, _, _), m in sorted(modules.items()) if c == mc]
        # csrowN repeats what dimmN/rankN say (older drivers have only csrows): keep one view
        if any(m.kind != "csrow" for m in mine):
            mine = [m for m in mine if m.kind != "csrow"]
        built.append(replace(Controller(**controllers[mc]), modules=tuple(mine)))
    return Edac(tuple(built), tuple(unreadable))


def _split(line: str, number: int) -> tuple[str, str]:
    path, tab, value = line.partition("\t")
    if not tab:  # grep's "PATH:VALUE": sysfs paths under edac/mc hold no ":"
        path, colon, value = line.partition(":")
        if not colon:
            raise ParseError(TOOL, f"line {number} is neither 'PATH<TAB>VALUE' nor 'PATH:VALUE'", line)
    return path.strip(), value.rstrip("\r\n")


def _count(name: str, value: str, line: str, number: int) -> int:
    count = u64(value.strip())
    if count is None:
        raise ParseError(TOOL, f"line {number}: {name} {quote(value.strip())} is not a count ({TOO_BIG})", line)
    return count
