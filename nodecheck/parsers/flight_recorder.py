"""Parse one rank's PyTorch flight-recorder dump (pickle or JSON) into typed entries, never executing it.

A dump is what ``TORCH_NCCL_DUMP_ON_TIMEOUT`` / ``_dump_fr_trace()`` / ``_dump_fr_trace_json()``
write to ``<TORCH_FR_DUMP_TEMP_FILE><rank>`` (default ``/tmp/nccl_trace_rank_<rank>``). The pickle
comes from an untrusted node, so it is loaded by an unpickler that can build only dicts, lists,
tuples, sets, str, bytes, numbers, bools and None: every GLOBAL/STACK_GLOBAL/INST/OBJ/EXT lookup
goes through ``find_class``, which always refuses, so REDUCE/BUILD/NEWOBJ never get a callable.

Schema versions (``version_val`` in torch/csrc/distributed/c10d/{NCCLUtils,FlightRecorder}.hpp):
  1.x   pre-2.0 dumps; the sequence key was ``seq_id`` (kept as an alias of collective_seq_id; not
        checked against a shipped 1.x dump here)
  2.0+  ``collective_seq_id`` / ``p2p_seq_id`` split ("major when changing existing fields")
  2.3   NCCLUtils.hpp: pg_config, pg_status, is_p2p, retired, time_discovered_* all present
  2.4   moved to FlightRecorder.hpp (torch 2.5); input/output dims become int64
  2.5   the docs' example dump (pg_config ranks as the string "[0, 1]", pg_status ints)
  2.7   FlightRecorder.hpp, same keys
  2.10  + thread_id, thread_name per entry, + top-level comm_lib_version; gloo records too
        (torch 2.13.0 CPU wheel, verified: tests/data/flight-recorder/SOURCES.md)
Minor bumps only add keys, so any "<major>.<minor>" parses when the keys used here are there.

Format differences verified on torch 2.13.0's own dumps: JSON has no frames, writes absent
``time_discovered_*`` as 0, writes pg_status values as strings ("5"), and leaves out ``entries``
altogether when there are none; pickle keeps None, ints and an empty list.
"""
from __future__ import annotations

import io
import json
import math
import pickle
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from nodecheck.errors import ParseError

TOOL = "flight-recorder"
MAX_DUMP_BYTES = 256 * 1024 * 1024   # 2000 entries with stacks are a few MB; far bigger is not a dump
_VERSION = re.compile(r"(\d+)\.(\d+)")
_RANKS = re.compile(r"\[\s*(?:-?\d+\s*(?:,\s*-?\d+\s*)*)?\]")
_TRAILING_DIGITS = re.compile(r"(\d+)$")
_P2P_OPS = ("send", "recv")


@dataclass(frozen=True, slots=True)
class FRFrame:
    name: str
    filename: str
    line: int | None


@dataclass(frozen=True, slots=True)
class FREntry:
    record_id: int | None
    pg_id: int | None
    pg_name: str
    pg_desc: str
    collective_seq_id: int | None
    p2p_seq_id: int | None
    op_id: int | None
    profiling_name: str          # "nccl:all_reduce", "gloo:reduce_scatter", "nccl:send 0->1", as written
    collective: str              # backend prefix and p2p peer stripped: "all_reduce", "send"
    state: str                   # "scheduled" | "started" | "completed" (as written; unknown values kept)
    input_sizes: tuple[tuple[int, ...], ...]
    output_sizes: tuple[tuple[int, ...], ...]
    input_dtypes: tuple[str, ...]
    output_dtypes: tuple[str, ...]
    time_created_ns: int | None
    time_discovered_started_ns: int | None
    time_discovered_completed_ns: int | None
    duration_ms: float | None
    timeout_ms: int | None
    is_p2p: bool
    retired: bool | None
    frames: tuple[FRFrame, ...]
    backend: str = ""            # "nccl", "gloo": the profiling_name prefix
    thread_name: str = ""        # 2.10+


@dataclass(frozen=True)
class FRGroup:                   # pg_config
    name: str
    desc: str
    ranks: tuple[int, ...]


@dataclass(frozen=True)
class FRGroupStatus:             # pg_status; None where the dump says -1 (nothing yet)
    last_enqueued: int | None
    last_started: int | None
    last_completed: int | None


@dataclass(frozen=True)
class FRDump:
    source: str                  # file name it came from
    version: str
    rank: int | None             # from the dump if it says, else from the file name's trailing digits
    format: str                  # "pickle" | "json"
    groups: Mapping[str, FRGroup]            # key: the pg name as pg_config keys it
    status: Mapping[str, FRGroupStatus]      # key: as pg_status keys it (the pg_id, as a string)
    entries: tuple[FREntry, ...]


class _Refused(Exception):
    pass


class _PlainUnpickler(pickle.Unpickler):
    """Builds plain containers and scalars only; any class or function lookup is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise _Refused(f"refused to load {module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        raise _Refused("refused a persistent id")


def parse_dump(data: bytes, source: str = "") -> FRDump:
    """One dump file's bytes -> FRDump; ParseError for anything that is not a dump we understand."""
    if len(data) > MAX_DUMP_BYTES:
        raise ParseError(TOOL, f"{source or 'dump'}: {len(data)} bytes, over the {MAX_DUMP_BYTES} byte bound")
    if not data.strip():
        raise ParseError(TOOL, f"{source or 'dump'}: empty file")
    fmt = "json" if data.lstrip()[:1] == b"{" else "pickle"
    raw = _load_json(data, source) if fmt == "json" else _load_pickle(data, source)
    if not isinstance(raw, dict):
        raise ParseError(TOOL, f"{source or 'dump'}: top level is a {type(raw).__name__}, expected a dict",
                         excerpt=_excerpt(data))
    return _dump(raw, source, fmt, data)


def _load_pickle(data: bytes, source: str) -> Any:
    try:
        obj = _PlainUnpickler(io.BytesIO(data)).load()
    except _Refused as e:
        raise ParseError(TOOL, f"{source or 'dump'}: {e}", excerpt=_excerpt(data)) from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, KeyError, IndexError, AttributeError,
            OverflowError, RecursionError, MemoryError, UnicodeDecodeError) as e:
        raise ParseError(TOOL, f"{source or 'dump'}: not a readable pickle ({type(e).__name__}: {e})",
                         excerpt=_excerpt(data)) from None
    # nothing but plain containers and scalars can come out (find_class refuses every lookup), and
    # the fields read below are type-checked one by one: no second walk over the whole tree (it cost
    # half the parse of a 2000-entry dump)
    return obj


def _load_json(data: bytes, source: str) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError, MemoryError) as e:
        raise ParseError(TOOL, f"{source or 'dump'}: not readable JSON ({type(e).__name__}: {e})",
                         excerpt=_excerpt(data)) from None


def _excerpt(data: bytes) -> str:
    return data[:300].decode("latin-1")


def _dump(raw: dict, source: str, fmt: str, data: bytes) -> FRDump:
    where = source or "dump"
    version = raw.get("version")
    if not isinstance(version, str):
        raise ParseError(TOOL, f"{where}: no 'version' string", excerpt=_excerpt(data))
    if not _VERSION.fullmatch(version):
        raise ParseError(TOOL, f"{where}: version {version!r}, expected <major>.<minor>", excerpt=_excerpt(data))
    if "entries" in raw:
        raw_entries = raw["entries"]
    elif fmt == "json":
        raw_entries = []             # dump_json leaves the key out when the buffer is empty
    else:
        raise ParseError(TOOL, f"{where}: no 'entries'", excerpt=_excerpt(data))
    if not isinstance(raw_entries, (list, tuple)):
        raise ParseError(TOOL, f"{where}: 'entries' is a {type(raw_entries).__name__}, expected a list",
                         excerpt=_excerpt(data))
    common: dict = {}                # values every entry repeats (frames of a call site, names): one object each
    entries = tuple(_entry(e, i, where, fmt, common) for i, e in enumerate(raw_entries))
    return FRDump(source=source, version=version, rank=_rank(raw, source, where), format=fmt,
                  groups=_groups(raw.get("pg_config", {}), where), status=_statuses(raw.get("pg_status", {}), where),
                  entries=entries)


def _rank(raw: dict, source: str, where: str) -> int | None:
    if "rank" in raw:
        if not _is_int(raw["rank"]):
            raise ParseError(TOOL, f"{where}: 'rank' is {raw['rank']!r}, expected an int")
        return raw["rank"]
    m = _TRAILING_DIGITS.search(source.rsplit("/", 1)[-1])   # DebugInfoWriter names it <prefix><rank>
    return int(m.group(1)) if m else None


def _groups(cfg: Any, where: str) -> dict[str, FRGroup]:
    if not isinstance(cfg, dict):
        raise ParseError(TOOL, f"{where}: 'pg_config' is a {type(cfg).__name__}, expected a dict")
    out = {}
    for key, g in cfg.items():
        if not isinstance(key, str) or not isinstance(g, dict):
            raise ParseError(TOOL, f"{where}: pg_config[{key!r}] is not a name -> dict")
        name, desc = g.get("name", key), g.get("desc", "")
        if not isinstance(name, str) or not isinstance(desc, str):
            raise ParseError(TOOL, f"{where}: pg_config[{key!r}] name/desc are not strings")
        out[key] = FRGroup(name=name, desc=desc, ranks=_ranks(g.get("ranks", "[]"), f"{where}: pg_config[{key!r}]"))
    return out


def _ranks(value: Any, where: str) -> tuple[int, ...]:
    # the C++ side writes the list as its string form "[0, 1]"; read it without eval
    if isinstance(value, str):
        if not _RANKS.fullmatch(value.strip()):
            raise ParseError(TOOL, f"{where}: ranks {value[:80]!r}, expected \"[0, 1, ...]\"")
        return tuple(int(x) for x in re.findall(r"-?\d+", value))
    if isinstance(value, (list, tuple)) and all(_is_int(x) for x in value):
        return tuple(value)
    raise ParseError(TOOL, f"{where}: ranks {value!r:.80}, expected a list of ints")


def _statuses(st: Any, where: str) -> dict[str, FRGroupStatus]:
    if not isinstance(st, dict):
        raise ParseError(TOOL, f"{where}: 'pg_status' is a {type(st).__name__}, expected a dict")
    out = {}
    for key, s in st.items():
        if not isinstance(s, dict):
            raise ParseError(TOOL, f"{where}: pg_status[{key!r}] is a {type(s).__name__}, expected a dict")
        seq = {k: _status_seq(s.get(f"last_{k}_collective"), f"{where}: pg_status[{key!r}].last_{k}_collective")
               for k in ("enqueued", "started", "completed")}
        out[str(key)] = FRGroupStatus(last_enqueued=seq["enqueued"], last_started=seq["started"],
                                      last_completed=seq["completed"])
    return out


def _status_seq(v: Any, where: str) -> int | None:
    # pickle writes ints, JSON writes the same numbers as strings; -1 means "none yet"
    if isinstance(v, str) and re.fullmatch(r"-?\d+", v):
        v = int(v)
    if v is None:
        return None
    if not _is_int(v):
        raise ParseError(TOOL, f"{where} is {v!r}, expected an int")
    return v if v >= 0 else None


def _entry(e: Any, i: int, where: str, fmt: str, common: dict) -> FREntry:
    """One entry, its recurring values taken from `common` (the dump's table of shared objects)."""
    if not isinstance(e, dict):
        raise ParseError(TOOL, f"{where}: entry {i} is a {type(e).__name__}, expected a dict")
    get = _Getter(e, i, where)
    pg_name, pg_desc = _process_group(get)
    name = get.req("profiling_name", str)
    backend, collective = _split_name(name)
    seq_key = "collective_seq_id" if "collective_seq_id" in e or "seq_id" not in e else "seq_id"
    started = get.opt("time_discovered_started_ns", _is_int)
    completed = get.opt("time_discovered_completed_ns", _is_int)
    if fmt == "json":            # dump_json writes a missing timestamp as 0
        started, completed = started or None, completed or None
    is_p2p = get.opt("is_p2p", _is_bool)
    # the same names, states, sizes and dtypes recur in every entry: one object each (a 2000-entry dump's
    # parse holds a third of the memory it would)
    same = common.setdefault
    return FREntry(
        record_id=get.opt("record_id", _is_int), pg_id=get.opt("pg_id", _is_int), pg_name=same(pg_name, pg_name),
        pg_desc=same(pg_desc, pg_desc), collective_seq_id=get.opt(seq_key, _is_int),
        p2p_seq_id=get.opt("p2p_seq_id", _is_int), op_id=get.opt("op_id", _is_int), profiling_name=same(name, name),
        collective=same(collective, collective), state=same(state := get.req("state", str), state),
        input_sizes=same(sizes := get.sizes("input_sizes"), sizes),
        output_sizes=same(sizes := get.sizes("output_sizes"), sizes),
        input_dtypes=same(dtypes := get.strs("input_dtypes"), dtypes),
        output_dtypes=same(dtypes := get.strs("output_dtypes"), dtypes),
        time_created_ns=get.opt("time_created_ns", _is_int), time_discovered_started_ns=started,
        time_discovered_completed_ns=completed, duration_ms=get.opt("duration_ms", _is_number),
        timeout_ms=get.opt("timeout_ms", _is_int),
        is_p2p=is_p2p if is_p2p is not None else collective in _P2P_OPS,
        retired=get.opt("retired", _is_bool), frames=get.frames(common), backend=same(backend, backend),
        thread_name=same(thread := get.opt("thread_name", lambda v: isinstance(v, str)) or "", thread))


def _process_group(get: "_Getter") -> tuple[str, str]:
    pg = get.req("process_group", (list, tuple))
    if len(pg) != 2 or not all(isinstance(x, str) for x in pg):
        get.fail("process_group", pg, "a (name, desc) pair of strings")
    return pg[0], pg[1]


def _split_name(name: str) -> tuple[str, str]:
    # "nccl:all_reduce" -> ("nccl", "all_reduce"); "nccl:send 0->1" -> ("nccl", "send")
    backend, _, op = name.partition(":") if ":" in name else ("", "", name)
    return backend, op.split(" ", 1)[0]


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_bool(v: Any) -> bool:
    return isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return (_is_int(v) or isinstance(v, float)) and math.isfinite(v)


class _Getter:
    """Typed reads from one entry; a wrong type names the entry index and the key."""

    def __init__(self, e: dict, i: int, where: str) -> None:
        self.e, self.i, self.where = e, i, where

    def fail(self, key: str, value: Any, expected: str) -> None:
        raise ParseError(TOOL, f"{self.where}: entry {self.i} '{key}' is {value!r:.80}, expected {expected}")

    def req(self, key: str, kind: type | tuple[type, ...]) -> Any:
        if key not in self.e:
            raise ParseError(TOOL, f"{self.where}: entry {self.i} has no '{key}'")
        if not isinstance(self.e[key], kind):
            self.fail(key, self.e[key], getattr(kind, "__name__", "a list"))
        return self.e[key]

    def opt(self, key: str, ok: Callable[[Any], bool]) -> Any:
        v = self.e.get(key)
        if v is not None and not ok(v):
            self.fail(key, v, ok.__name__.removeprefix("_is_").replace("_", " "))
        return v

    def sizes(self, key: str) -> tuple[tuple[int, ...], ...]:
        v = self.e.get(key, [])
        if not isinstance(v, (list, tuple)) or not all(
                isinstance(d, (list, tuple)) and all(_is_int(x) for x in d) for d in v):
            self.fail(key, v, "a list of int lists")
        return tuple(tuple(d) for d in v)

    def strs(self, key: str) -> tuple[str, ...]:
        v = self.e.get(key, [])
        if not isinstance(v, (list, tuple)) or not all(isinstance(x, str) for x in v):
            self.fail(key, v, "a list of strings")
        return tuple(v)

    def frames(self, cache: dict) -> tuple[FRFrame, ...]:
        v = self.e.get("frames", [])
        if not isinstance(v, (list, tuple)):
            self.fail("frames", v, "a list")
        key = []
        for f in v:
            if not (isinstance(f, dict) and isinstance(f.get("name", ""), str)
                    and isinstance(f.get("filename", ""), str) and (f.get("line") is None or _is_int(f.get("line")))):
                self.fail("frames", f, "{name, filename, line}")
            key.append((f.get("name", ""), f.get("filename", ""), f.get("line")))
        key = tuple(key)
        if key not in cache:
            cache[key] = tuple(FRFrame(name=n, filename=fn, line=ln) for n, fn, ln in key)
        return cache[key]
