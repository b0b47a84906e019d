"""`ldconfig -p` lines, and the driver-stack probe's output (probes/nvidia_libraries.py): the kernel
module's version, the loader cache's entries for the driver's libraries, and where each entry's chain
of symbolic links ends (its file's name, type and size)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.parsers.counts import TOO_BIG, u64
from nodecheck.parsers.escapes import unescape
from nodecheck.parsers.lines import split_lines
from nodecheck.parsers.nvidia_driver import VERSION, KernelDriver, parse_proc_version, parse_sys_module_version
from nodecheck.parsers.sections import Section, split_sections

# A shared library's name as the loader asks for it: libnvidia-ml.so.1, libnvidia-nvvm.so.4, libcuda.so
LIBRARY_NAME_PATTERN = r"^lib[A-Za-z0-9_+-][A-Za-z0-9_.+-]{0,126}\.so(\.[0-9]+)*$"
LIBRARY_NAME = re.compile(LIBRARY_NAME_PATTERN, re.ASCII)
# "\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1"; glibc 2.3x may add
# ", OS ABI: Linux 3.2.0" or ", hwcap: ..." inside the parentheses
_LDCONFIG = re.compile(r"^\s*(?P<soname>\S+) \((?P<flags>[^)]*)\) => (?P<path>/.*)$")
_LDCONFIG_HEADER = re.compile(r"^\d+ libs found in cache `?'?\S+'?$")
# the flags of the node's own ABI (the others are 32-bit compat copies the 64-bit CUDA never loads)
NATIVE_FLAGS = ("x86-64", "AArch64", "64bit")
# the driver version a file name carries: libnvidia-ml.so.550.90.07 -> 550.90.07
_FILE_VERSION = re.compile(rf"\.so\.(?P<version>{VERSION})$", re.ASCII)
_TOOL = "nvidia libraries probe"


@dataclass(frozen=True)
class LdconfigEntry:
    soname: str  # "libnvidia-ml.so.1"
    flags: str  # "libc6,x86-64"
    path: str  # "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"

    @property
    def native(self) -> bool:
        return any(tag in self.flags for tag in NATIVE_FLAGS)


def parse_ldconfig(text: str) -> tuple[LdconfigEntry, ...]:
    """`ldconfig -p` (or lines of it), in the cache's order: the loader takes the first that fits."""
    entries = []
    for line in split_lines(text):
        if not line.strip() or _LDCONFIG_HEADER.match(line.strip()):
            continue
        m = _LDCONFIG.match(line)
        if m is None:
            raise ParseError("ldconfig -p", f"not a cache line: {line[:120]!r}", text)
        entries.append(LdconfigEntry(m["soname"], m["flags"], m["path"]))
    return tuple(entries)


def file_version(path: str) -> str | None:
    """The driver version a library file's name ends with, or None (libcuda.so.1 as a plain file)."""
    m = _FILE_VERSION.search(path.rsplit("/", 1)[-1])
    return m["version"] if m else None


@dataclass(frozen=True)
class Chain:
    """An entry's path followed link by link, as far as the probe went."""

    start: str
    links: tuple[tuple[str, str], ...]  # (link, its target as written)
    end: str | None  # the path the chain ends at (None: stopped before it)
    kind: str  # "regular", "empty" (a 0-byte regular file), "missing" (dangling), "stopped", or stat's %F
    size: int | None
    stopped: str | None = None  # why the probe did not follow a link

    @property
    def version(self) -> str | None:
        return file_version(self.end) if self.end else None

    def shown(self) -> str:
        """ "libnvidia-ml.so.1 -> libnvidia-ml.so.550.90.07": the names, in the order the loader follows them."""
        names = [self.start.rsplit("/", 1)[-1]] + [target for _, target in self.links]
        return " -> ".join(names)


@dataclass(frozen=True)
class LibraryFacts:
    kernel: KernelDriver | None  # None: no NVIDIA kernel module loaded (neither file exists)
    ldconfig_rc: int  # 0: the cache answered; 127: no ldconfig; other: it failed or was cut off
    entries: tuple[LdconfigEntry, ...]  # the cache's lines for the asked names
    found: dict[str, str]  # a name the cache lacks -> where a standard directory has it
    chains: dict[str, Chain]  # by start path
    siblings: dict[str, tuple[tuple[str, int | None], ...]]  # a chain's end -> other versioned files beside it

    def locations(self, name: str) -> tuple[str, ...]:
        """Where the loader finds `name`: the cache's native entries in order, else the directory scan."""
        native = tuple(e.path for e in self.entries if e.soname == name and e.native)
        if native:
            return native
        return (self.found[name],) if name in self.found else ()

    def foreign_only(self, name: str) -> tuple[str, ...]:
        """Cache entries for `name` of another ABI (32-bit) when it has no native one."""
        if any(e.soname == name and e.native for e in self.entries):
            return ()
        return tuple(e.path for e in self.entries if e.soname == name)


def _unescaped(text: str) -> str:
    try:
        return unescape(text)
    except ValueError as e:
        raise ParseError(_TOOL, f"a line not written by the probe: {e}", text) from e


def _fields(line: str) -> list[str]:
    return [_unescaped(f) for f in line.split("\t")]


def _size(field: str, text: str) -> int | None:
    """A file's size as stat printed it; None where the probe's stat failed ("?", or nothing for a
    sibling); anything else is not the probe's output."""
    if field in ("", "?"):
        return None
    size = u64(field)
    if size is None:
        raise ParseError(_TOOL, f"file size {field[:40]!r} is not a count ({TOO_BIG})", text)
    return size


def _kind(size: int | None, stat_type: str) -> str:
    if stat_type in ("regular file", "regular empty file"):
        return "empty" if size == 0 else "regular"
    return stat_type


def _kernel(text: str) -> KernelDriver | None:
    sections = split_sections(text, _TOOL)
    if sections.facts.get("kernel-module") == "none":
        return None
    for name, parse in (("proc-version", parse_proc_version), ("sys-version", parse_sys_module_version)):
        section = sections.get(name)
        if section is not None:
            _require_ok(section, name)
            return parse(section.text)
    raise ParseError(_TOOL, "neither the kernel module's version nor its absence in the output", text)


def _require_ok(section: Section, name: str) -> None:
    if section.rc != 0:
        raise ParseError(_TOOL, f"{name} could not be read (exit {section.rc})", section.text)


def parse_libraries_probe(text: str) -> LibraryFacts:
    sections = split_sections(text, _TOOL)
    kernel = _kernel(text)
    ldconfig = sections.require("ldconfig", "ldconfig -p")
    if ldconfig.rc is None:
        raise ParseError(_TOOL, "output cut off in the ldconfig section", ldconfig.text)
    lines = [_unescaped(ln) for ln in split_lines(ldconfig.text)]
    entries = parse_ldconfig("\n".join(lines)) if ldconfig.rc == 0 else ()
    libs = sections.require("libs", _TOOL)
    if libs.rc != 0:
        raise ParseError(_TOOL, "the libraries' records were cut off", libs.text)
    return _records(kernel, ldconfig.rc, entries, libs.text)


def _records(kernel: KernelDriver | None, rc: int, entries: tuple[LdconfigEntry, ...], text: str) -> LibraryFacts:
    found: dict[str, str] = {}
    chains: dict[str, Chain] = {}
    siblings: dict[str, list[tuple[str, int | None]]] = {}
    start: str | None = None
    links: list[tuple[str, str]] = []

    def close(end: str | None, kind: str, size: int | None, stopped: str | None = None) -> None:
        nonlocal start, links
        first = start if start is not None else (links[0][0] if links else end)
        if first is None:
            raise ParseError(_TOOL, "a chain without a start", text)
        chains.setdefault(first, Chain(first, tuple(links), end, kind, size, stopped))
        start, links = None, []

    last_end: str | None = None
    for line in split_lines(text):
        if not line:
            continue
        record, *fields = _fields(line)
        if record == "found" and len(fields) == 2:
            found[fields[0]] = fields[1]
            start = fields[1]
        elif record == "link" and len(fields) == 2:
            if start is None and not links:
                start = fields[0]
            links.append((fields[0], fields[1]))
        elif record == "stop" and len(fields) == 2:
            start = start if start is not None else fields[0]
            close(None, "stopped", None, fields[1])
        elif record == "file" and len(fields) == 3:
            size = _size(fields[1], text)
            close(fields[0], _kind(size, fields[2]), size)
            last_end = fields[0]
        elif record == "gone" and len(fields) == 1:
            close(fields[0], "missing", None)
        elif record == "sibling" and len(fields) == 2 and last_end is not None:
            entry = (fields[0], _size(fields[1], text))
            if entry not in siblings.setdefault(last_end, []):
                siblings[last_end].append(entry)
        else:
            raise ParseError(_TOOL, f"unknown record {line[:120]!r}", text)
    if start is not None or links:
        raise ParseError(_TOOL, "a chain without its end", text)
    return LibraryFacts(kernel, rc, entries, found, chains, {k: tuple(v) for k, v in siblings.items()})
