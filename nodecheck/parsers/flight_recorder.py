"""Parse one rank's PyTorch flight-recorder dump (pickle or JSON) into typed entries, never executing it.

A dump is what ``TORCH_NCCL_DUMP_ON_TIMEOUT`` / ``_dump_fr_trace()`` / ``_dump_fr_trace_json()``
write to ``<TORCH_FR_DUMP_TEMP_FILE><rank>`` (default ``/tmp/nccl_trace_rank_<rank>``). The pickle
comes from an untrusted node, so it is loaded by an unpickler that can build only dicts, lists,
tuples, sets, str, bytes, numbers, bools and None: every GLOBAL/STACK_GLOBAL/INST/OBJ/EXT lookup
goes through ``find_class``, which always refuses, so REDUCE/BUILD/NEWOBJ never get a callable.

Before the unpickler sees a byte, a pre-scan (``pickletools.genops``, which reads opcodes and never
builds or allocates by what they say) proves the pickle is one the unpickler reads in bounded time and
memory: only the opcodes a dump needs; memo indexes no larger than the count of values stored so far
(the C unpickler sizes its memo array by the index: a 9-byte LONG_BINPUT 100000000 took 1.5 GiB);
dict keys that are strings (their hash is seeded per process: integer keys that all hash alike made
one dict take 136 s); nesting, opcode count, integer size and the size the pickle expands to (a
value used again through the memo counts each time: 5000 uses of one 1 MiB string are 5 GiB to any
walk of it) all bounded; and a time bound per dump. Any failure, whatever raised it, is that dump's
ParseError, and every message quotes input through a bounded excerpt (never repr() of a structure).

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
import pickletools
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from nodecheck.core.errors import ParseError
from nodecheck.core.model import shown

TOOL = "flight-recorder"
MAX_DUMP_BYTES = 256 * 1024 * 1024  # 2000 entries with stacks are a few MB; far bigger is not a dump
# the pre-scan's bounds. A recorded torch 2.13 dump nests 5 deep (dump, entries, entry, frames,
# frame); a 2000-entry dump is 92k opcodes and expands to about 1 MB
MAX_DEPTH = 32
MAX_OPCODES = 5_000_000
MAX_EXPANDED = 256 * 1024 * 1024  # strings' lengths plus one per value, every memo use counted
MAX_INT_BITS = 128  # ns timestamps and ids are 64 bits
DUMP_TIME_LIMIT_S = 30.0  # one dump's pre-scan, load and reading (a 2000-entry dump: 0.1 s)
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
    profiling_name: str  # "nccl:all_reduce", "gloo:reduce_scatter", "nccl:send 0->1", as written
    collective: str  # backend prefix and p2p peer stripped: "all_reduce", "send"
    state: str  # "scheduled" | "started" | "completed" (as written; unknown values kept)
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
    backend: str = ""  # "nccl", "gloo": the profiling_name prefix
    thread_name: str = ""  # 2.10+


@dataclass(frozen=True)
class FRGroup:  # pg_config
    name: str
    desc: str
    ranks: tuple[int, ...]


@dataclass(frozen=True)
class FRGroupStatus:  # pg_status; None where the dump says -1 (nothing yet)
    last_enqueued: int | None
    last_started: int | None
    last_completed: int | None


@dataclass(frozen=True)
class FRDump:
    source: str  # file name it came from
    version: str
    rank: int | None  # from the dump if it says, else from the file name's trailing digits
    format: str  # "pickle" | "json"
    groups: Mapping[str, FRGroup]  # key: the pg name as pg_config keys it
    status: Mapping[str, FRGroupStatus]  # key: as pg_status keys it (the pg_id, as a string)
    entries: tuple[FREntry, ...]


class _Refused(Exception):
    pass


class _PlainUnpickler(pickle.Unpickler):
    """Builds plain containers and scalars only; any class or function lookup is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise _Refused(f"refused to load {module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        raise _Refused("refused a persistent id")


def parse_dump(data: bytes, source: str = "", time_limit_s: float = DUMP_TIME_LIMIT_S) -> FRDump:
    """One dump file's bytes -> FRDump; ParseError for anything that is not a dump we understand,
    whatever went wrong inside (a RecursionError, a MemoryError: that dump's error, never the run's)."""
    where = source or "dump"
    if len(data) > MAX_DUMP_BYTES:
        raise ParseError(TOOL, f"{where}: {len(data)} bytes, over the {MAX_DUMP_BYTES} byte bound")
    deadline = time.monotonic() + time_limit_s
    try:
        return _parse(data, source, deadline, time_limit_s)
    except ParseError:
        raise
    except Exception as e:  # noqa: BLE001 - any failure is this dump's, reported as such
        raise ParseError(
            TOOL, f"{where}: not readable ({type(e).__name__}: {_error_text(e)})", excerpt=_excerpt(data)
        ) from None


def _parse(data: bytes, source: str, deadline: float, time_limit_s: float) -> FRDump:
    if not data.strip():
        raise ParseError(TOOL, f"{source or 'dump'}: empty file")
    fmt = "json" if data.lstrip()[:1] == b"{" else "pickle"
    raw = _load_json(data, source) if fmt == "json" else _load_pickle(data, source, deadline, time_limit_s)
    if not isinstance(raw, dict):
        raise ParseError(
            TOOL, f"{source or 'dump'}: top level is a {type(raw).__name__}, expected a dict", excerpt=_excerpt(data)
        )
    return _dump(raw, source, fmt, data, _Clock(deadline, time_limit_s, source or "dump"))


def _load_pickle(data: bytes, source: str, deadline: float, time_limit_s: float) -> Any:
    where = source or "dump"
    try:
        _prescan(data, _Clock(deadline, time_limit_s, where))
        obj = _PlainUnpickler(io.BytesIO(data)).load()
    except _Refused as e:
        raise ParseError(TOOL, f"{where}: {e}", excerpt=_excerpt(data)) from None
    except (
        pickle.UnpicklingError,
        EOFError,
        ValueError,
        TypeError,
        KeyError,
        IndexError,
        AttributeError,
        OverflowError,
        RecursionError,
        MemoryError,
        UnicodeDecodeError,
    ) as e:
        raise ParseError(
            TOOL, f"{where}: not a readable pickle ({type(e).__name__}: {_error_text(e)})", excerpt=_excerpt(data)
        ) from None
    # nothing but plain containers and scalars can come out (the pre-scan admits no other opcode and
    # find_class refuses every lookup), and the fields read below are type-checked one by one: no second
    # walk over the whole tree (it cost half the parse of a 2000-entry dump)
    return obj


class _Clock:
    """One dump's time bound, checked between steps of the pre-scan and of the reading."""

    def __init__(self, deadline: float, limit_s: float, where: str) -> None:
        self.deadline, self.limit_s, self.where = deadline, limit_s, where

    def check(self, inside: str = "") -> None:
        if time.monotonic() > self.deadline:
            at = f"{inside}: " if inside else ""
            raise ParseError(TOOL, f"{self.where}: {at}refused: not read within {self.limit_s:g} s")


# the opcodes a dump needs (torch's pickler writes protocol 2; Python's, for the built dumps, up to 5)
_NUMBERS = frozenset({"NONE", "NEWTRUE", "NEWFALSE", "BININT", "BININT1", "BININT2", "BINFLOAT"})
_LONGS = frozenset({"LONG1", "LONG4"})
_STRINGS = frozenset({"BINUNICODE", "SHORT_BINUNICODE", "BINUNICODE8"})
_BYTES = frozenset({"BINBYTES", "SHORT_BINBYTES", "BINBYTES8"})
_PUTS = frozenset({"BINPUT", "LONG_BINPUT"})
_GETS = frozenset({"BINGET", "LONG_BINGET"})
_TUPLES = {"EMPTY_TUPLE": 0, "TUPLE1": 1, "TUPLE2": 2, "TUPLE3": 3}
# what a value on the pre-scan's stack is: its kind, nesting depth and expanded size. A list or dict is
# one _Value shared by the stack and the memo, so a change through either is seen by both.
_NUM, _STR, _BYTE, _TUPLE, _LIST, _DICT = range(6)
_KIND_NAMES = ("number", "string", "bytes", "tuple", "list", "dict")


class _Value:
    __slots__ = ("depth", "kind", "nested", "size", "text")

    def __init__(self, kind: int, depth: int = 0, size: int = 1, text: str = "") -> None:
        self.kind, self.depth, self.size, self.nested, self.text = kind, depth, size, False, text


_NUMBER = _Value(_NUM)  # one for all: nothing about a number is tracked


def _prescan(data: bytes, clock: _Clock) -> None:
    """Walk the opcodes without building anything; _Refused for a pickle past a bound or holding an
    opcode a dump does not need. Containers are complete before they are nested (a pickler writes a
    list's items, then the list into its parent), so a depth and size known at nesting time stay true;
    a container changed after it was nested is refused."""
    stack: list = []
    marks: list[int] = []
    memo: dict[int, Any] = {}
    puts = 0
    arg: Any  # genops types it Any | None; each opcode's branch below knows its real type
    for count, (op, arg, _pos) in enumerate(pickletools.genops(data)):
        name = op.name
        if not count & 0xFFF:
            clock.check()
            if count >= MAX_OPCODES:
                raise _Refused(f"refused: more than {MAX_OPCODES} opcodes")
        if name in _GETS:
            if arg not in memo:
                raise _Refused(f"refused: {name} reads memo index {arg}, which was never stored")
            stack.append(memo[arg])
        elif name in _NUMBERS:
            stack.append(_NUMBER)
        elif name in _STRINGS:
            stack.append(_Value(_STR, 0, len(arg) + 1, arg))
        elif name in _PUTS:
            if arg > puts:
                raise _Refused(f"refused: {name} stores memo index {arg}, beyond the {puts} values stored before it")
            puts += 1
            memo[arg] = stack[-1]
        elif name == "MEMOIZE":
            memo[len(memo)] = stack[-1]
            puts += 1
        elif name == "MARK":
            marks.append(len(stack))
            if len(marks) > MAX_DEPTH:
                raise _Refused(f"refused: nested more than {MAX_DEPTH} deep")
        elif name == "EMPTY_DICT":
            stack.append(_Value(_DICT, 1))
        elif name == "EMPTY_LIST":
            stack.append(_Value(_LIST, 1))
        elif name == "SETITEMS":
            at = marks.pop()
            items = stack[at:]
            del stack[at:]
            if len(items) % 2:
                raise _Refused("refused: SETITEMS with a key and no value")
            _fill(stack[-1], _DICT, items)
        elif name == "SETITEM":
            items = stack[-2:]
            del stack[-2:]
            _fill(stack[-1], _DICT, items)
        elif name == "APPENDS":
            at = marks.pop()
            items = stack[at:]
            del stack[at:]
            _fill(stack[-1], _LIST, items)
        elif name == "APPEND":
            _fill(stack[-2], _LIST, [stack.pop()])
        elif name in _LONGS:
            if arg.bit_length() > MAX_INT_BITS:
                raise _Refused(f"refused: an integer of {arg.bit_length()} bits")
            stack.append(_NUMBER)
        elif name in _TUPLES:
            n = _TUPLES[name]
            items = stack[len(stack) - n :] if n else []
            del stack[len(stack) - n :]
            stack.append(_tuple(items))
        elif name == "TUPLE":
            at = marks.pop()
            items = stack[at:]
            del stack[at:]
            stack.append(_tuple(items))
        elif name in ("LIST", "DICT"):
            at = marks.pop()
            items = stack[at:]
            del stack[at:]
            box = _Value(_LIST if name == "LIST" else _DICT, 1)
            if name == "DICT" and len(items) % 2:
                raise _Refused("refused: DICT with a key and no value")
            _fill(box, box.kind, items)
            stack.append(box)
        elif name in _BYTES:
            stack.append(_Value(_BYTE, 0, len(arg) + 1))
        elif name == "POP":
            if marks and marks[-1] == len(stack):
                marks.pop()
            else:
                stack.pop()
        elif name == "POP_MARK":
            del stack[marks.pop() :]
        elif name == "DUP":
            stack.append(stack[-1])
        elif name == "PROTO":
            if not 2 <= arg <= pickle.HIGHEST_PROTOCOL:
                raise _Refused(f"refused: pickle protocol {arg}")
        elif name == "FRAME":
            pass
        elif name == "STOP":
            if len(stack) != 1 or marks:
                raise _Refused(f"refused: STOP with {len(stack)} values on the stack")
            return
        elif name == "GLOBAL":
            raise _Refused(f"refused to load {_show_text(str(arg).replace(' ', '.'))}")
        elif name == "STACK_GLOBAL":
            names = [x.text if x.kind == _STR else "?" for x in stack[-2:]]
            raise _Refused(f"refused to load {_show_text('.'.join(names))}")
        else:
            raise _Refused(f"refused the {name} opcode: a dump holds only dicts, lists, tuples, strings and numbers")
    raise _Refused("refused: no STOP opcode")  # genops ends at STOP or raises on truncation


def _fill(box: _Value, kind: int, items: list) -> None:
    """items nested into box (a list's new items, or a dict's key, value pairs), box's depth and size grown."""
    if box.kind != kind:
        raise _Refused(f"refused: {'SETITEM' if kind == _DICT else 'APPEND'} into a {_KIND_NAMES[box.kind]}")
    if box.nested:
        raise _Refused("refused: a list or dict changed after it was nested (not what a pickler writes)")
    if kind == _DICT:
        for key in items[::2]:
            if key.kind != _STR:
                raise _Refused(f"refused: a dict key is a {_KIND_NAMES[key.kind]}, not a string")
    depth, size = _nest(items, box)
    box.depth, box.size = max(box.depth, depth), box.size + size
    _bound(box.depth, box.size)


def _tuple(items: list) -> _Value:
    depth, size = _nest(items, None)
    _bound(depth, size + 1)
    return _Value(_TUPLE, depth, size + 1)


def _nest(items: list, into: _Value | None) -> tuple[int, int]:
    """Items being nested: each list or dict among them is complete from now on. (the depth they
    give their container, the size they add to it)"""
    depth, size = 1, 0
    for item in items:
        if item is into:
            raise _Refused("refused: a list or dict that holds itself")
        item.nested = True
        if item.depth >= depth:
            depth = item.depth + 1
        size += item.size
    return depth, size


def _bound(depth: int, size: int) -> None:
    if depth > MAX_DEPTH:
        raise _Refused(f"refused: nested more than {MAX_DEPTH} deep")
    if size > MAX_EXPANDED:
        raise _Refused(
            f"refused: expands past {MAX_EXPANDED} bytes (a value used again through the memo counts each time)"
        )


def _show_text(text: str) -> str:
    return text if len(text) <= 120 else text[:120] + "..."


def _error_text(e: BaseException) -> str:
    try:
        return _show_text(str(e))
    except Exception:  # noqa: BLE001
        return ""


def _load_json(data: bytes, source: str) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError, MemoryError) as e:
        raise ParseError(
            TOOL, f"{source or 'dump'}: not readable JSON ({type(e).__name__}: {e})", excerpt=_excerpt(data)
        ) from None


def _excerpt(data: bytes) -> str:
    return data[:300].decode("latin-1")


def _dump(raw: dict, source: str, fmt: str, data: bytes, clock: _Clock) -> FRDump:
    where = source or "dump"
    version = raw.get("version")
    if not isinstance(version, str):
        raise ParseError(TOOL, f"{where}: no 'version' string", excerpt=_excerpt(data))
    if not _VERSION.fullmatch(version):
        raise ParseError(
            TOOL, f"{where}: version {shown(version, 120)}, expected <major>.<minor>", excerpt=_excerpt(data)
        )
    if "entries" in raw:
        raw_entries = raw["entries"]
    elif fmt == "json":
        raw_entries = []  # dump_json leaves the key out when the buffer is empty
    else:
        raise ParseError(TOOL, f"{where}: no 'entries'", excerpt=_excerpt(data))
    if not isinstance(raw_entries, (list, tuple)):
        raise ParseError(
            TOOL, f"{where}: 'entries' is a {type(raw_entries).__name__}, expected a list", excerpt=_excerpt(data)
        )
    common: dict = {}  # values every entry repeats (frames of a call site, names): one object each
    read = _Read(clock)  # what was read of each object the memo shares between entries
    entries = []
    for i, e in enumerate(raw_entries):
        if not i & 0xFF:
            clock.check()
        entries.append(_entry(e, i, where, fmt, common, read))
    return FRDump(
        source=source,
        version=version,
        rank=_rank(raw, source, where),
        format=fmt,
        groups=_groups(raw.get("pg_config", {}), where),
        status=_statuses(raw.get("pg_status", {}), where),
        entries=tuple(entries),
    )


def _rank(raw: dict, source: str, where: str) -> int | None:
    if "rank" in raw:
        if not _is_int(raw["rank"]):
            raise ParseError(TOOL, f"{where}: 'rank' is {shown(raw['rank'], 120)}, expected an int")
        return raw["rank"]
    m = _TRAILING_DIGITS.search(source.rsplit("/", 1)[-1])  # DebugInfoWriter names it <prefix><rank>
    return int(m.group(1)) if m else None


def _groups(cfg: Any, where: str) -> dict[str, FRGroup]:
    if not isinstance(cfg, dict):
        raise ParseError(TOOL, f"{where}: 'pg_config' is a {type(cfg).__name__}, expected a dict")
    out = {}
    for key, g in cfg.items():
        if not isinstance(key, str) or not isinstance(g, dict):
            raise ParseError(TOOL, f"{where}: pg_config[{shown(key, 120)}] is not a name -> dict")
        name, desc = g.get("name", key), g.get("desc", "")
        if not isinstance(name, str) or not isinstance(desc, str):
            raise ParseError(TOOL, f"{where}: pg_config[{shown(key, 120)}] name/desc are not strings")
        out[key] = FRGroup(
            name=name, desc=desc, ranks=_ranks(g.get("ranks", "[]"), f"{where}: pg_config[{shown(key, 120)}]")
        )
    return out


def _ranks(value: Any, where: str) -> tuple[int, ...]:
    # the C++ side writes the list as its string form "[0, 1]"; read it without eval
    if isinstance(value, str):
        if not _RANKS.fullmatch(value.strip()):
            raise ParseError(TOOL, f'{where}: ranks {shown(value, 120)}, expected "[0, 1, ...]"')
        return tuple(int(x) for x in re.findall(r"-?\d+", value))
    if isinstance(value, (list, tuple)) and all(_is_int(x) for x in value):
        return tuple(value)
    raise ParseError(TOOL, f"{where}: ranks {shown(value, 120)}, expected a list of ints")


def _statuses(st: Any, where: str) -> dict[str, FRGroupStatus]:
    if not isinstance(st, dict):
        raise ParseError(TOOL, f"{where}: 'pg_status' is a {type(st).__name__}, expected a dict")
    out = {}
    for key, s in st.items():
        if not isinstance(s, dict):
            raise ParseError(TOOL, f"{where}: pg_status[{shown(key, 120)}] is a {type(s).__name__}, expected a dict")
        seq = {
            k: _status_seq(s.get(f"last_{k}_collective"), f"{where}: pg_status[{shown(key, 120)}].last_{k}_collective")
            for k in ("enqueued", "started", "completed")
        }
        out[str(key)] = FRGroupStatus(
            last_enqueued=seq["enqueued"], last_started=seq["started"], last_completed=seq["completed"]
        )
    return out


def _status_seq(v: Any, where: str) -> int | None:
    # pickle writes ints, JSON writes the same numbers as strings; -1 means "none yet"
    if isinstance(v, str) and re.fullmatch(r"-?\d+", v):
        v = int(v)
    if v is None:
        return None
    if not _is_int(v):
        raise ParseError(TOOL, f"{where} is {shown(v, 120)}, expected an int")
    return v if v >= 0 else None


def _entry(e: Any, i: int, where: str, fmt: str, common: dict, read: _Read) -> FREntry:
    """One entry, its recurring values taken from `common` (the dump's table of shared objects)."""
    if not isinstance(e, dict):
        raise ParseError(TOOL, f"{where}: entry {i} is a {type(e).__name__}, expected a dict")
    get = _Getter(e, i, where, read)
    pg_name, pg_desc = _process_group(get)
    name = get.req("profiling_name", str)
    backend, collective = _split_name(name)
    seq_key = "collective_seq_id" if "collective_seq_id" in e or "seq_id" not in e else "seq_id"
    started = get.opt("time_discovered_started_ns", _is_int)
    completed = get.opt("time_discovered_completed_ns", _is_int)
    if fmt == "json":  # dump_json writes a missing timestamp as 0
        started, completed = started or None, completed or None
    is_p2p = get.opt("is_p2p", _is_bool)
    # the same names, states, sizes and dtypes recur in every entry: one object each (a 2000-entry dump's
    # parse holds a third of the memory it would)
    same = common.setdefault
    return FREntry(
        record_id=get.opt("record_id", _is_int),
        pg_id=get.opt("pg_id", _is_int),
        pg_name=same(pg_name, pg_name),
        pg_desc=same(pg_desc, pg_desc),
        collective_seq_id=get.opt(seq_key, _is_int),
        p2p_seq_id=get.opt("p2p_seq_id", _is_int),
        op_id=get.opt("op_id", _is_int),
        profiling_name=same(name, name),
        collective=same(collective, collective),
        state=same(state := get.req("state", str), state),
        input_sizes=get.sizes("input_sizes", common),
        output_sizes=get.sizes("output_sizes", common),
        input_dtypes=get.strs("input_dtypes", common),
        output_dtypes=get.strs("output_dtypes", common),
        time_created_ns=get.opt("time_created_ns", _is_int),
        time_discovered_started_ns=started,
        time_discovered_completed_ns=completed,
        duration_ms=get.opt("duration_ms", _is_number),
        timeout_ms=get.opt("timeout_ms", _is_int),
        is_p2p=is_p2p if is_p2p is not None else collective in _P2P_OPS,
        retired=get.opt("retired", _is_bool),
        frames=get.frames(common),
        backend=same(backend, backend),
        thread_name=same(thread := get.opt("thread_name", lambda v: isinstance(v, str)) or "", thread),
    )


def _process_group(get: _Getter) -> tuple[str, str]:
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


class _Read:
    """The reading of one dump's lists, each object read once. A pickle's memo lets every entry name
    the same list (2,000 entries, one 60,000-long list: 0.3 MB of pickle), which the pre-scan counts
    as expanded but which is ONE object in memory: reading it again for every entry cost 23 s (and its
    copies, for its like, 1.9 GiB). So what was read of an object is kept by its identity (the raw
    objects live while the dump is read, so an id is never reused) and the work stays that of the
    pickle's own size. The clock is looked at every CLOCK_EVERY items inside an entry too: one entry
    can hold a million frames."""

    CLOCK_EVERY = 4096

    def __init__(self, clock: _Clock) -> None:
        self.clock, self.items = clock, 0
        self.done: dict[int, tuple[Any, Any]] = {}

    def once(self, value: Any, build: Callable[[], Any]) -> Any:
        key = id(value)
        if key not in self.done:
            self.done[key] = (value, build())  # (the value kept alive with its reading)
        return self.done[key][1]

    def tick(self, count: int, inside: str) -> None:
        before, self.items = self.items, self.items + count
        if before // self.CLOCK_EVERY != self.items // self.CLOCK_EVERY:
            self.clock.check(inside)


class _Getter:
    """Typed reads from one entry; a wrong type names the entry index and the key."""

    def __init__(self, e: dict, i: int, where: str, read: _Read) -> None:
        self.e, self.i, self.where, self.read = e, i, where, read

    def fail(self, key: str, value: Any, expected: str) -> None:
        raise ParseError(TOOL, f"{self.where}: entry {self.i} '{key}' is {shown(value, 120)}, expected {expected}")

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

    def sizes(self, key: str, common: dict) -> tuple[tuple[int, ...], ...]:
        """The sizes, one object for equal ones (`common`), hashed once per object read."""
        v = self.e.get(key, [])
        if not isinstance(v, (list, tuple)):
            self.fail(key, v, "a list of int lists")

        def build() -> tuple[tuple[int, ...], ...]:
            sizes = tuple(self._dims(key, v, d, common) for d in v)
            # keyed by the identities of its (already one-per-value) dims: hashing the dims again for
            # every entry is the cost this reading avoids
            return common.setdefault(("sizes", *map(id, sizes)), sizes)

        return self.read.once(v, build)

    def _dims(self, key: str, v: Any, d: Any, common: dict) -> tuple[int, ...]:
        def build() -> tuple[int, ...]:
            self.read.tick(len(d) + 1, f"entry {self.i}")
            if not all(_is_int(x) for x in d):
                self.fail(key, v, "a list of int lists")
            dims = tuple(d)
            return common.setdefault(dims, dims)  # hashed once per object read

        if not isinstance(d, (list, tuple)):
            self.fail(key, v, "a list of int lists")
        return self.read.once(d, build)

    def strs(self, key: str, common: dict) -> tuple[str, ...]:
        v = self.e.get(key, [])

        def build() -> tuple[str, ...]:
            self.read.tick(len(v) + 1, f"entry {self.i}")
            if not all(isinstance(x, str) for x in v):
                self.fail(key, v, "a list of strings")
            strs = tuple(v)
            return common.setdefault(strs, strs)

        if not isinstance(v, (list, tuple)):
            self.fail(key, v, "a list of strings")
        return self.read.once(v, build)

    def frames(self, cache: dict) -> tuple[FRFrame, ...]:
        v = self.e.get("frames", [])
        if not isinstance(v, (list, tuple)):
            self.fail("frames", v, "a list")
        return self.read.once(v, lambda: self._frames(v, cache))

    def _frames(self, v: list | tuple, cache: dict) -> tuple[FRFrame, ...]:
        frames = []
        for f in v:
            self.read.tick(1, f"entry {self.i}")
            if not (
                isinstance(f, dict)
                and isinstance(f.get("name", ""), str)
                and isinstance(f.get("filename", ""), str)
                and (f.get("line") is None or _is_int(f.get("line")))
            ):
                self.fail("frames", f, "{name, filename, line}")
            frames.append((f.get("name", ""), f.get("filename", ""), f.get("line")))
        key = tuple(frames)
        if key not in cache:
            cache[key] = tuple(FRFrame(name=n, filename=fn, line=ln) for n, fn, ln in key)
        return cache[key]
