"""The flight-recorder reader against dumps built to exhaust it (issue 17, finding 4): each is refused
by the opcode pre-scan before the unpickler runs, quickly and in bounded memory, as that dump's
ParseError; and a dump that still fails inside (a RecursionError, a MemoryError) is that dump's
ParseError too, never the run's. Every input is CONSTRUCTED here, opcode by opcode."""

from __future__ import annotations

import pickle
import resource
import struct
import time

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers import flight_recorder
from nodecheck.parsers.flight_recorder import MAX_DEPTH, MAX_EXPANDED, parse_dump
from tests.helpers import DATA

HEAD = b"\x80\x02}q\x00(X\x07\x00\x00\x00versionX\x04\x00\x00\x002.10X\x07\x00\x00\x00entries"


def ustr(text: str) -> bytes:
    raw = text.encode()
    return b"X" + struct.pack("<I", len(raw)) + raw


def refused(data: bytes, within_s: float = 2.0) -> str:
    """The dump's refusal, given within `within_s` of CPU time (not wall time: a busy machine's other
    processes do not count; the unguarded reader took minutes)."""
    started = time.process_time()
    with pytest.raises(ParseError) as e:
        parse_dump(data, "evil")
    assert time.process_time() - started < within_s
    assert e.value.tool == "flight-recorder" and len(e.value.reason) < 400
    return e.value.reason


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_long_binput_memo_index_of_100_million_is_refused_without_allocating():
    # PROTO 2, NONE, LONG_BINPUT 100000000, STOP: 9 bytes; the C unpickler sized its memo to 1.5 GiB
    data = b"\x80\x02Nr" + struct.pack("<I", 100_000_000) + b"."
    assert len(data) == 9
    before = peak_rss_mib()
    reason = refused(data, within_s=0.5)
    assert reason == "evil: refused: LONG_BINPUT stores memo index 100000000, beyond the 0 values stored before it"
    assert peak_rss_mib() - before < 100


def test_a_memo_read_of_an_index_never_stored_is_refused():
    assert (
        refused(b"\x80\x02j" + struct.pack("<I", 7) + b".")
        == "evil: refused: LONG_BINGET reads memo index 7, which was never stored"
    )


def test_80k_integer_keys_that_hash_alike_are_refused_not_136_s():
    # {"version": ..., "entries": [], k*(2**61-1): None ...}: every key hashes to 0 on 64-bit
    body = b"".join(
        b"\x8a" + bytes([len(b)]) + b + b"N"
        for b in (
            (k * (2**61 - 1)).to_bytes(((k * (2**61 - 1)).bit_length() + 8) // 8, "little", signed=True)
            for k in range(1, 80_001)
        )
    )
    data = HEAD + b"]" + body + b"u."
    assert len(data) > 1_000_000
    assert refused(data, within_s=5.0) == "evil: refused: a dict key is a number, not a string"


def test_100k_nesting_levels_refused_at_the_depth_bound():
    n = 100_000
    data = HEAD + b"]" * n + b"a" * (n - 1) + b"u."
    assert refused(data) == f"evil: refused: nested more than {MAX_DEPTH} deep"


def test_nesting_through_the_memo_without_a_deep_stack_is_refused():
    # a = []; then 100 times: b = [a]; a = b - the stack never holds more than two values
    step = b"]h\x00aq\x000"  # EMPTY_LIST, BINGET 0, APPEND, BINPUT 0, POP
    data = b"\x80\x02]q\x000" + step * 100 + b"h\x00."
    assert refused(data) == f"evil: refused: nested more than {MAX_DEPTH} deep"


def test_5000_memo_uses_of_one_1_mib_string_are_refused_not_a_memory_error():
    big = b"X" + struct.pack("<I", 2**20) + b"a" * 2**20 + b"q\x01"
    data = HEAD + b"](" + big + b"h\x01" * 4999 + b"eu."
    reason = refused(data)
    assert reason == (
        f"evil: refused: expands past {MAX_EXPANDED} bytes (a value used again through the memo counts each time)"
    )


def test_a_billion_laughs_of_lists_is_refused():
    # l0 = ["aaaa..."]; l(k+1) = [l(k), l(k)]: 2**60 strings behind 300 bytes
    data = b"\x80\x02]q\x00" + ustr("a" * 100) + b"a"
    for k in range(60):
        data += b"](" + b"h" + bytes([k]) + b"h" + bytes([k]) + b"eq" + bytes([k + 1])
    data += b"."
    assert refused(data) == (
        f"evil: refused: expands past {MAX_EXPANDED} bytes (a value used again through the memo counts each time)"
    )


@pytest.mark.parametrize(
    "data, reason",
    [
        (b"\x80\x02\x8f.", "refused the EMPTY_SET opcode: a dump holds only dicts, lists, tuples, strings and numbers"),
        (b"\x80\x02c__builtin__\nset\n.", "refused to load __builtin__.set"),
        (b"\x80\x04\x8c\x02os\x8c\x06system\x93.", "refused to load os.system"),
        (b"\x80\x02\x8a\x40" + b"\x01" * 64 + b".", "refused: an integer of 505 bits"),
        # a = []; b = [a]; then None appended to a: a container changed after it was nested
        (
            b"\x80\x02]q\x00]h\x00a0h\x00Na.",
            "refused: a list or dict changed after it was nested (not what a pickler writes)",
        ),
    ],
)
def test_opcodes_and_values_a_dump_never_holds(data, reason):
    assert refused(data) == f"evil: {reason}"


def test_a_list_that_holds_itself_is_refused():
    assert refused(b"\x80\x02]q\x00h\x00a.") == "evil: refused: a list or dict that holds itself"


def test_the_time_bound_is_a_refusal_of_that_dump():
    data = (DATA / "flight-recorder" / "mismatched" / "nccl_trace_rank_0").read_bytes()
    with pytest.raises(ParseError) as e:
        parse_dump(data, "slow", time_limit_s=-1)
    assert e.value.reason == "slow: refused: not read within -1 s"


def test_any_exception_inside_is_that_dumps_parse_error(monkeypatch):
    def explode(*_a, **_k):
        raise MemoryError("out of memory")

    monkeypatch.setattr(flight_recorder, "_entry", explode)
    data = (DATA / "flight-recorder" / "mismatched" / "nccl_trace_rank_0").read_bytes()
    with pytest.raises(ParseError) as e:
        parse_dump(data, "x")
    assert e.value.reason == "x: not readable (MemoryError: out of memory)"


def test_a_wrong_value_is_quoted_bounded_never_whole():
    # entry 0's input_sizes is 1000 uses of one 64 KiB string (64 MiB to a repr): the message quotes a few
    # characters of it
    s = ustr("b" * 65536) + b"q\x01"
    entry = (
        b"}("
        + ustr("process_group")
        + ustr("0")
        + ustr("")
        + b"\x86"
        + ustr("profiling_name")
        + ustr("nccl:all_reduce")
        + ustr("state")
        + ustr("started")
        + ustr("input_sizes")
        + b"]("
        + s
        + b"h\x01" * 999
        + b"eu"
    )
    data = HEAD + b"](" + entry + b"eu."
    reason = refused(data)
    assert reason.startswith("evil: entry 0 'input_sizes' is ['bbbbbbbbbb") and len(reason) < 300


def test_json_deeper_than_the_interpreter_is_a_parse_error():
    data = b'{"version": "2.10", "entries": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    assert "not readable JSON (RecursionError" in refused(data)


def test_a_recorded_dump_still_reads_with_the_pre_scan_and_its_memo():
    d = parse_dump((DATA / "flight-recorder" / "mismatched" / "nccl_trace_rank_3").read_bytes(), "nccl_trace_rank_3")
    assert (d.version, d.rank, len(d.entries)) == ("2.10", 3, 6)
    assert d.entries[-1].frames[-1].name == "<module>"


def test_python_pickler_protocols_2_to_5_of_a_dump_read_the_same():
    base = pickle.loads((DATA / "flight-recorder" / "mismatched" / "nccl_trace_rank_3").read_bytes())  # our own file
    first = parse_dump(pickle.dumps(base, protocol=2), "r3")
    for proto in (3, 4, 5):
        assert parse_dump(pickle.dumps(base, protocol=proto), "r3") == first


# --- issue 32, 1.5: memory bounded by what is materialised, the clock inside an entry ---------------
SHARED = r"""
import pickle, resource, sys, time
from nodecheck.parsers.flight_recorder import parse_dump
dims = list(range(int(sys.argv[1])))  # one list, stored once, used by every entry through the memo
entry = lambda i: {"process_group": ["0", "default_pg"], "profiling_name": "nccl:all_reduce", "state": "completed",
                   "record_id": i, "input_sizes": [dims], "output_sizes": [dims], "frames": []}
data = pickle.dumps({"version": "2.10", "entries": [entry(i) for i in range(int(sys.argv[2]))]}, protocol=2)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started = time.process_time()  # CPU time: another process's load does not count
dump = parse_dump(data, "shared", time_limit_s=float(sys.argv[3]))
took = time.process_time() - started
grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
print(len(data), len(dump.entries), grew // 1024, round(took, 2))
"""


@pytest.mark.growth
def test_a_list_shared_through_the_memo_by_every_entry_is_read_once():
    """A 0.3 MB pickle whose 2,000 entries all name one 60,000-long list took 23 s: every entry
    checked and copied the list again (its like took 52 s and 1.9 GiB). A value shared through the
    memo is one value, read once: a shared list 100x as long costs about the same (proved by growth,
    not by seconds), and memory stays what the pickle holds."""
    import subprocess
    import sys

    def run(length: int) -> tuple[int, float]:
        done = subprocess.run(
            [sys.executable, "-c", SHARED, str(length), "2000", "120"], capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr[-2000:]
        size, entries, grew_mib, took = done.stdout.split()
        assert int(entries) == 2000
        return int(grew_mib), float(took)

    _, short = run(600)
    grew_mib, long = run(60_000)
    assert long < 5 * max(short, 0.05), f"{short:.2f} s with a 600-long list, {long:.2f} s with a 60,000-long one"
    assert grew_mib < 150, f"grew {grew_mib} MiB"


def test_the_clock_is_checked_inside_an_entry():
    """One entry whose frames and sizes are huge is still stopped by the dump's time bound, inside the
    entry (the bound was looked at only between entries, every 256th)."""
    frames = [{"name": f"f{i}", "filename": "x.py", "line": i} for i in range(100_000)]
    entry = {
        "process_group": ["0", "default_pg"],
        "profiling_name": "nccl:all_reduce",
        "state": "completed",
        "frames": frames,
        "input_sizes": [[1] * 10] * 100_000,
    }
    data = pickle.dumps({"version": "2.10", "entries": [entry]}, protocol=2)
    real_monotonic, real_load = time.monotonic, flight_recorder._load_pickle
    looks_after_load: list[int] = []

    def load(*args, **kwargs):
        out = real_load(*args, **kwargs)
        looks_after_load.append(0)
        return out

    def clock() -> float:  # after the load, the first look is in time and every later one is not
        if looks_after_load:
            looks_after_load.append(0)
            return real_monotonic() + (0 if len(looks_after_load) <= 2 else 100_000)
        return real_monotonic()

    import unittest.mock

    with (
        unittest.mock.patch.object(flight_recorder, "_load_pickle", load),
        unittest.mock.patch.object(flight_recorder.time, "monotonic", clock),
        pytest.raises(ParseError) as e,
    ):
        parse_dump(data, "one-entry", time_limit_s=7200)
    assert e.value.reason == "one-entry: entry 0: refused: not read within 7200 s"
