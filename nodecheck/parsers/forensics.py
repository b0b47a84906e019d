"""Parse the forensics probes' output (nodecheck/forensics/probe.py): a node's snapshot (GPUs, the job's
processes with their rank variables, flight-recorder dump files, NCCL WARN lines), the stacks probe's
per-process py-spy results, and one fetched dump file.
"""

from __future__ import annotations

import base64
import binascii
import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from nodecheck.core.errors import ParseError
from nodecheck.core.model import excerpt, one_line
from nodecheck.parsers.escapes import unescape
from nodecheck.parsers.lines import split_lines
from nodecheck.parsers.nccl_config import first_line
from nodecheck.parsers.sections import split_sections
from nodecheck.parsers.watch_sample import GpuSample, Proc, read_gpus, read_procs

SNAPSHOT_TOOL = "forensics snapshot"
STACKS_TOOL = "forensics stacks"
FETCH_TOOL = "forensics fetch"
_PSTATE = re.compile(r"(\d+) (\S*)\t(.*)", re.ASCII)
_ENCODING = re.compile(r"(gzip\+base64|base64) (\d+)", re.ASCII)
MAX_FETCHED_BYTES = 10 * 1024 * 1024  # what a fetch inflates to at most, unless told otherwise


@dataclass(frozen=True)
class JobProcess:
    proc: Proc
    env: Mapping[str, str]  # only the probe's RANK_VARS; {} when unreadable

    @property
    def pid(self) -> int:
        return self.proc.pid


@dataclass(frozen=True)
class DumpFile:
    path: str
    size: int
    mtime: int  # epoch seconds, the node's clock
    owner: int  # its uid: a rank's, the one the fetch requires again


@dataclass(frozen=True)
class NodeSnapshot:
    clock: int | None
    gpus: tuple[GpuSample, ...]
    gpu_error: str
    processes: tuple[JobProcess, ...]
    procs_error: str  # pgrep/ps failed: the processes are unknown, not absent
    dumps: tuple[DumpFile, ...]
    relative_prefixes: tuple[str, ...]  # dump prefixes relative to the job's directory: not listable
    nccl_warns: tuple[str, ...]
    log_error: str = ""
    log_watched: bool = False
    refused: tuple[tuple[str, str], ...] = ()  # (path, why) of files the listing would not read


@dataclass(frozen=True)
class StackResult:
    pid: int
    rc: int | None  # py-spy's exit code (timeout's 124/137: no answer in time)
    stdout: str
    stderr: str
    wchan: str = ""  # the kernel function the process waits in, after the dump
    state: str = ""  # /proc/PID/status State ("S (sleeping)"), "gone" when it ended
    unpaused: str = ""  # after a failed dump: py-spy --nonblocking's output ("" none)
    unpaused_rc: int | None = None


@dataclass(frozen=True)
class StacksOutput:
    pyspy: str | None  # py-spy's --version line; None when it is not installed
    results: Mapping[int, StackResult] = field(default_factory=dict)


@dataclass(frozen=True)
class FetchedDump:
    data: bytes | None  # the file's bytes; None with a note when not fetched
    size: int | None
    note: str = ""
    refused: bool = False  # the node's checks refused the file (a link, another user's)


def parse_snapshot(text: str) -> NodeSnapshot:
    parts = split_sections(text, SNAPSHOT_TOOL)
    clock_section = parts.require("clock", SNAPSHOT_TOOL)
    clock = int(clock_section.text.strip()) if clock_section.ok and clock_section.text.strip().isdigit() else None
    gpus, gpu_error = read_gpus(parts.get("gpus"))
    procs_section = parts.require("procs", SNAPSHOT_TOOL)
    processes: list[JobProcess] = []
    procs_error = ""
    if procs_section.rc != 0:
        procs_error = first_line(procs_section.text) or f"pgrep/ps exited {procs_section.rc}"
    else:
        for proc in read_procs(procs_section.text, SNAPSHOT_TOOL, text):
            env_section = parts.get(f"env-{proc.pid}")
            processes.append(JobProcess(proc, _env(env_section.text, text) if env_section is not None else {}))
    dumps, relative, refused = _dumps(parts.require("dumps", SNAPSHOT_TOOL).text, text)
    warns: tuple[str, ...] = ()
    log_error, log_watched = "", False
    section = parts.get("nccl_warn")
    if section is not None:
        log_watched = True
        if section.ok:
            warns = tuple(_unescaped(line, text) for line in split_lines(section.text) if line)
        else:
            log_error = first_line(section.text) or f"reading the log failed (exit {section.rc})"
    return NodeSnapshot(
        clock, gpus, gpu_error, tuple(processes), procs_error, dumps, relative, warns, log_error, log_watched, refused
    )


def _env(text: str, whole: str) -> dict[str, str]:
    env = {}
    for line in split_lines(text):
        name, has, value = _unescaped(line, whole).partition("=")
        if not has or not name:
            raise ParseError(SNAPSHOT_TOOL, f"environment line {line[:80]!r} is not NAME=VALUE", whole)
        env[name] = value.replace("\x01", "\n")  # the probe turned a value's own newlines into \001
    return env


def _dumps(text: str, whole: str) -> tuple[tuple[DumpFile, ...], tuple[str, ...], tuple[tuple[str, str], ...]]:
    files, relative, refused = [], [], []
    for line in split_lines(text):
        kind, _, rest = line.partition("\t")
        if kind == "relative":
            relative.append(_unescaped(rest, whole))
            continue
        if kind == "refused":
            why, _, path = rest.rpartition("\t")  # the path is escaped: it holds no tab
            if not why or not path:
                raise ParseError(
                    SNAPSHOT_TOOL, f"dump listing line {excerpt(line, 80)!r} is not 'refused WHY PATH'", whole
                )
            refused.append((_unescaped(path, whole), why))
            continue
        size, mtime, owner, path = (rest.split("\t", 3) + ["", "", ""])[:4]
        if kind != "file" or not (size.isdigit() and mtime.isdigit() and owner.isdigit()) or not path:
            raise ParseError(
                SNAPSHOT_TOOL, f"dump listing line {excerpt(line, 80)!r} is not 'file SIZE MTIME OWNER PATH'", whole
            )
        files.append(DumpFile(_unescaped(path, whole), int(size), int(mtime), int(owner)))
    return tuple(files), tuple(relative), tuple(refused)


def parse_stacks(text: str) -> StacksOutput:
    parts = split_sections(text, STACKS_TOOL)
    version = parts.facts.get("pyspy")
    if version is None:
        raise ParseError(STACKS_TOOL, "no py-spy line: not the stacks probe's output", text)
    if version == "missing":
        return StacksOutput(None)
    states: dict[int, tuple[str, str]] = {}
    for line in split_lines(text):
        if line.startswith("@@nodecheck pstate "):
            match = _PSTATE.fullmatch(line[len("@@nodecheck pstate ") :])
            if match:
                states[int(match.group(1))] = (match.group(2), match.group(3))
    results = {}
    for name, section in parts.sections.items():
        if not name.startswith("stack-"):
            continue
        pid_text = name[len("stack-") :]
        if not pid_text.isdigit():
            raise ParseError(STACKS_TOOL, f"section {name!r} does not name a pid", text)
        pid = int(pid_text)
        err = parts.get(f"stackerr-{pid}")
        stderr = "\n".join(_unescaped(line, text) for line in split_lines(err.text)) if err is not None else ""
        wchan, state = states.get(pid, ("", ""))
        unpaused = parts.get(f"unpaused-{pid}")
        results[pid] = StackResult(
            pid,
            section.rc,
            section.text,
            stderr,
            "" if wchan == "0" else wchan,
            state,
            unpaused.text if unpaused is not None else "",
            unpaused.rc if unpaused is not None else None,
        )
    return StacksOutput(version, results)


def parse_fetch(text: str, max_bytes: int = MAX_FETCHED_BYTES) -> FetchedDump:
    """The fetch probe's output -> the file's bytes, or why there are none. The bytes are decoded and
    decompressed to at most max_bytes (what the probe was told to send): a gzip bomb from a node
    (1.4 MB that inflates to 1 GiB) is a ParseError, never inflated."""
    first, _, body = text.partition("\n")
    if first == "@@nodecheck missing":
        return FetchedDump(None, None, "the file was gone when it was fetched")
    if first.startswith("@@nodecheck refused "):
        return FetchedDump(
            None, None, f"refused: {one_line(excerpt(first[len('@@nodecheck refused ') :], 200))}", refused=True
        )
    if first.startswith("@@nodecheck too_large "):
        shown = first.split()[-1]
        return FetchedDump(None, int(shown) if shown.isdigit() else None, "too large to fetch")
    match = (
        _ENCODING.fullmatch(first[len("@@nodecheck encoding ") :])
        if first.startswith("@@nodecheck encoding ")
        else None
    )
    if match is None:
        raise ParseError(FETCH_TOOL, "no encoding line: not the fetch probe's output", excerpt(text))
    try:
        data = base64.b64decode("".join(body.split()), validate=True)
        if len(data) > max_bytes and match.group(1) == "base64":
            raise ParseError(FETCH_TOOL, f"the fetched file is {len(data)} bytes, more than the {max_bytes} asked for")
        if match.group(1) == "gzip+base64":
            data = _gunzip(data, max_bytes)
    except (binascii.Error, ValueError, OSError, EOFError, zlib.error) as e:
        raise ParseError(FETCH_TOOL, f"the fetched file does not decode: {e}", excerpt(text)) from None
    size = int(match.group(2))
    if len(data) != size:  # the file grew or shrank while it was read: a dump being written
        return FetchedDump(data, size, f"read {len(data)} bytes of {size}: the file changed while it was read")
    return FetchedDump(data, size)


def _gunzip(data: bytes, max_bytes: int) -> bytes:
    """One gzip member, inflated to at most max_bytes."""
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = inflate.decompress(data, max_bytes + 1)
    if len(out) > max_bytes or inflate.unconsumed_tail:
        raise ParseError(FETCH_TOOL, f"the fetched file inflates past {max_bytes} bytes: not inflated further")
    if not inflate.eof:
        raise ParseError(FETCH_TOOL, "the fetched file does not decode: the gzip stream is cut short")
    if inflate.unused_data:
        raise ParseError(FETCH_TOOL, "the fetched file does not decode: data after the gzip stream")
    return out


def _unescaped(value: str, text: str) -> str:
    try:
        return unescape(value)
    except ValueError as e:
        raise ParseError(SNAPSHOT_TOOL, str(e), excerpt(text)) from None
