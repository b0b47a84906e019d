"""parse_dump on every recorded (torch 2.13 gloo) and built flight-recorder dump, with exact facts;
hostile, truncated, foreign and garbage files refused with ParseError, the hostile ones never run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.flight_recorder import MAX_DEPTH, MAX_DUMP_BYTES, FRFrame, FRGroup, FRGroupStatus, parse_dump
from tests.helpers import DATA

FR = DATA / "flight-recorder"


def fr(path: str):
    p = FR / path
    return parse_dump(p.read_bytes(), source=p.name)


def rank_files(scenario: str) -> list[str]:
    return sorted(
        f"{scenario}/{sub}{p.name}" for sub in ("", "json/") for p in (FR / scenario / sub).glob("nccl_trace_rank_*")
    )


ALL = [
    f
    for s in (
        "mismatched",
        "missing-rank",
        "same-collective",
        "never-started",
        "built-2.4-mismatched",
        "built-2.2-missing-rank",
        "built-2.10-mismatched-sizes",
        "built-2.10-ahead-p2p",
    )
    for f in rank_files(s)
]


def test_every_dump_file_is_covered():
    on_disk = {str(p.relative_to(FR)) for p in FR.rglob("nccl_trace_rank_*")} - {"odd/nccl_trace_rank_1"}
    assert set(ALL) == on_disk and len(ALL) == 2 * (8 + 4 + 8 + 8 + 16 + 4 + 4 + 4)


@pytest.mark.parametrize("path", ALL)
def test_every_dump_parses_with_its_rank_and_format(path):
    d = fr(path)
    assert d.rank == int(path.rsplit("_", 1)[1])
    assert d.format == ("json" if "/json/" in path else "pickle")
    assert d.source == Path(path).name


def test_recorded_mismatched_rank3_pickle():
    d = fr("mismatched/nccl_trace_rank_3")
    assert (d.version, d.rank, d.format) == ("2.10", 3, "pickle")
    assert [e.collective_seq_id for e in d.entries] == [1, 2, 3, 4, 5, 6]
    assert [e.collective for e in d.entries] == ["all_reduce"] * 6
    assert [e.input_sizes for e in d.entries] == [((64, 32),)] * 5 + [((1,),)]
    last = d.entries[-1]
    assert (last.profiling_name, last.backend, last.state, last.retired) == (
        "gloo:all_reduce",
        "gloo",
        "scheduled",
        False,
    )
    assert (last.pg_name, last.pg_desc, last.pg_id, last.is_p2p) == ("0", "default_pg", 0, False)
    assert last.input_dtypes == ("Float",) and last.timeout_ms == 20000
    assert last.time_discovered_started_ns is None and last.duration_ms is None
    assert last.frames[-1].name == "<module>" and last.frames[-1].filename.endswith("record.py")
    assert all(isinstance(f, FRFrame) and isinstance(f.line, int) for f in last.frames)
    assert d.status == {"0": FRGroupStatus(last_enqueued=6, last_started=None, last_completed=5)}
    # gloo keys its pg_config "" (see SOURCES.md)
    assert d.groups == {"": FRGroup(name="", desc="", ranks=tuple(range(8)))}


def test_recorded_mismatched_others_in_all_gather():
    e = fr("mismatched/nccl_trace_rank_0").entries[-1]
    assert (e.collective_seq_id, e.collective, e.input_sizes, e.output_sizes) == (6, "all_gather", ((64,),), ((8, 64),))


def test_recorded_json_differs_from_pickle_the_documented_ways():
    j, p = fr("mismatched/json/nccl_trace_rank_3"), fr("mismatched/nccl_trace_rank_3")
    assert j.format == "json" and j.status == p.status  # "5" strings read as ints
    assert all(e.frames == () for e in j.entries)  # dump_json writes no frames
    assert all(e.time_discovered_started_ns is None for e in j.entries)  # 0 there means absent
    assert [(e.collective_seq_id, e.collective, e.input_sizes) for e in j.entries] == [
        (e.collective_seq_id, e.collective, e.input_sizes) for e in p.entries
    ]


def test_recorded_ring_buffer_keeps_the_last_16():
    d = fr("missing-rank/nccl_trace_rank_0")
    assert [e.collective_seq_id for e in d.entries] == list(range(6, 22))
    assert [e.retired for e in d.entries] == [True] * 15 + [False]
    assert [e.collective_seq_id for e in fr("missing-rank/nccl_trace_rank_2").entries] == list(range(5, 21))
    assert fr("missing-rank/nccl_trace_rank_1").status["0"].last_completed == 18


def test_recorded_never_started_json_has_no_entries_key():
    assert b'"entries"' not in (FR / "never-started/json/nccl_trace_rank_0").read_bytes()
    for path in ("never-started/nccl_trace_rank_0", "never-started/json/nccl_trace_rank_0"):
        d = fr(path)
        assert (d.entries, d.status, d.version) == ((), {}, "2.10")


def test_built_24_mismatched():
    d = fr("built-2.4-mismatched/nccl_trace_rank_3")
    assert d.version == "2.4" and len(d.entries) == 5
    assert [e.collective_seq_id for e in d.entries] == [3847, 3848, 3849, 3850, 3851]
    assert [e.state for e in d.entries] == ["completed"] * 4 + ["started"]
    assert d.entries[-1].profiling_name == "nccl:all_reduce" and d.entries[-1].input_sizes == ((1,),)
    other = fr("built-2.4-mismatched/json/nccl_trace_rank_15").entries[-1]
    assert (other.collective, other.input_sizes, other.output_sizes) == (
        "reduce_scatter",
        ((2048, 4096),),
        ((128, 4096),),
    )
    assert d.groups["0"] == FRGroup(name="0", desc="default_pg", ranks=tuple(range(16)))
    assert d.status["0"] == FRGroupStatus(3851, 3851, 3850)


def test_built_22_minimal_entry_defaults():
    d = fr("built-2.2-missing-rank/nccl_trace_rank_2")
    assert d.version == "2.2" and d.status == {}
    assert [(e.collective_seq_id, e.state) for e in d.entries] == [(40, "completed"), (41, "completed")]
    e = d.entries[0]
    assert (e.is_p2p, e.retired, e.time_discovered_completed_ns) == (False, None, None)
    assert len(fr("built-2.2-missing-rank/json/nccl_trace_rank_0").entries) == 3


def test_built_210_p2p_and_thread_name():
    d = fr("built-2.10-ahead-p2p/nccl_trace_rank_0")
    send = d.entries[-1]
    assert (send.profiling_name, send.collective, send.is_p2p, send.p2p_seq_id, send.collective_seq_id) == (
        "nccl:send 0->1",
        "send",
        True,
        5,
        3,
    )
    assert (send.pg_name, send.pg_desc, send.pg_id, send.thread_name) == ("1", "pp", 1, "pt_main_thread")
    assert d.groups["1"].ranks == (0, 1) and set(d.status) == {"0", "1"}
    recv = fr("built-2.10-ahead-p2p/json/nccl_trace_rank_1").entries[-1]
    assert (recv.collective, recv.is_p2p, recv.input_sizes) == ("recv", True, ((8, 16),))


def test_unknown_newer_version_with_extra_keys_parses():
    d = fr("odd/nccl_trace_rank_1")
    assert (d.version, d.rank, len(d.entries)) == ("3.1", 1, 1)
    assert (d.entries[0].backend, d.entries[0].collective) == ("xccl", "all_reduce")


@pytest.mark.parametrize(
    "name, payload, refused",
    [
        ("malicious-os-system.pkl", "/tmp/nodecheck-fr-pwned-os-system", "refused to load os.system"),
        ("malicious-builtins-eval.pkl", "/tmp/nodecheck-fr-pwned-eval", "refused to load builtins.eval"),
    ],
)
def test_malicious_pickle_refused_and_never_run(name, payload, refused):
    if os.path.exists(payload):
        os.remove(payload)
    with pytest.raises(ParseError) as e:
        fr(f"bad/{name}")
    assert refused in e.value.reason and e.value.tool == "flight-recorder"
    assert e.value.excerpt
    assert not os.path.exists(payload)


@pytest.mark.parametrize(
    "name, reason",
    [
        ("truncated.pkl", "not a readable pickle"),
        ("garbage.bin", "not a readable pickle"),
        ("list.pkl", "top level is a list, expected a dict"),
        ("no-version.pkl", "no 'version' string"),
        ("no-entries.pkl", "no 'entries'"),
    ],
)
def test_broken_files_are_parse_errors_with_an_excerpt(name, reason):
    with pytest.raises(ParseError) as e:
        fr(f"bad/{name}")
    assert reason in e.value.reason and e.value.excerpt


def test_wrong_type_names_the_entry_and_key():
    with pytest.raises(ParseError) as e:
        fr("bad/wrong-type-entry.json")
    assert "entry 1 'collective_seq_id' is 'two', expected int" in e.value.reason


@pytest.mark.parametrize(
    "data, reason",
    [
        (b"", "empty file"),
        (b'{"version": "2.10", "entries": [1]}', "entry 0 is a int, expected a dict"),
        (b'{"version": "two", "entries": []}', "version 'two', expected <major>.<minor>"),
        (
            b'{"version": "2.10", "entries": [], "pg_config": {"0": {"ranks": "__import__(1)"}}}',
            'expected "[0, 1, ...]"',
        ),
        (
            b'{"version": "2.10", "entries": [{"profiling_name": "nccl:all_reduce", "state": "started"}]}',
            "entry 0 has no 'process_group'",
        ),
        (
            b'{"version": "2.10", "entries": [], "pg_status": {"0": {"last_completed_collective": "x"}}}',
            "expected an int",
        ),
        (b"{" * 5, "not readable JSON"),
        (b"[" * 100_000, "not a readable pickle"),
    ],
)
def test_malformed_inputs(data, reason):
    with pytest.raises(ParseError) as e:
        parse_dump(data, "x")
    assert reason in e.value.reason


def test_deeply_nested_pickle_is_refused_before_it_is_loaded():
    # {"version": "2.10", "entries": [[[...]]]} 100,000 lists deep, written opcode by opcode (pickle.dumps
    # itself recurses): the pre-scan refuses it at the bound, before the unpickler builds anything
    n = 100_000
    data = (
        b"\x80\x02}(X\x07\x00\x00\x00versionX\x04\x00\x00\x002.10X\x07\x00\x00\x00entries"
        + b"]" * n
        + b"a" * (n - 1)
        + b"u."
    )
    with pytest.raises(ParseError) as e:
        parse_dump(data, "deep")
    assert e.value.reason == f"deep: refused: nested more than {MAX_DEPTH} deep"


def test_oversized_dump_is_refused_unread():
    class Huge(bytes):
        def __len__(self):
            return MAX_DUMP_BYTES + 1

    with pytest.raises(ParseError) as e:
        parse_dump(Huge(b"{}"), "huge")
    assert "over the" in e.value.reason


def test_rank_from_the_dump_wins_over_the_file_name():
    assert parse_dump(b'{"version": "2.10", "entries": [], "rank": 5}', "nccl_trace_rank_3").rank == 5
    assert parse_dump(b'{"version": "2.10", "entries": []}', "trace").rank is None
