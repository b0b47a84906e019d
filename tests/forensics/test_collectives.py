"""analyze/describe on every flight-recorder scenario (recorded gloo dumps and built NCCL-style
ones, pickle and JSON alike): exact kind, seq, rank groups and the operator's line; plus ring-buffer
wrap, p2p kept apart from collectives, and a rank whose dump is missing."""

from __future__ import annotations

from dataclasses import replace

import pytest

from nodecheck.forensics.collectives import GroupFinding, RankAt, analyze, describe
from nodecheck.forensics.ranks import fold_ranks as fold
from nodecheck.parsers.flight_recorder import parse_dump
from tests.helpers import DATA

FR = DATA / "flight-recorder"


def dumps(scenario: str, fmt: str = "pickle", skip: tuple[int, ...] = ()):
    sub = FR / scenario / ("json" if fmt == "json" else "")
    files = sorted(sub.glob("nccl_trace_rank_*"), key=lambda p: int(p.name.rsplit("_", 1)[1]))
    return [parse_dump(p.read_bytes(), p.name) for p in files if int(p.name.rsplit("_", 1)[1]) not in skip]


def only(scenario: str, fmt: str = "pickle", **kw) -> GroupFinding:
    (f,) = analyze(dumps(scenario, fmt, **kw))
    return f


def place(r: int) -> str:
    return {2: "node2 GPU2", 3: "gpu-a07 GPU3"}.get(r, "")


BOTH = pytest.mark.parametrize("fmt", ["pickle", "json"])


@BOTH
def test_recorded_mismatched(fmt):
    f = only("mismatched", fmt)
    assert (f.kind, f.seq, f.pg, f.desc, f.members) == ("mismatched", 6, "0", "default_pg", tuple(range(8)))
    assert f.at_seq == (
        RankAt((0, 1, 2, 4, 5, 6, 7), "all_gather", "[64]", "scheduled"),
        RankAt((3,), "all_reduce", "[1]", "scheduled"),
    )
    assert (f.missing, f.no_dump, f.ahead) == ((), (), ())
    assert f.last_completed == dict.fromkeys(range(8), 5)
    assert describe(f, place) == (
        "pg 0 seq 6: ranks 0-2,4-7 in all_gather [64], rank 3 (gpu-a07 GPU3) in all_reduce [1]"
        " — mismatched collectives; rank 3 left the loop early"
    )


@BOTH
def test_recorded_missing_rank_through_a_wrapped_ring_buffer(fmt):
    f = only("missing-rank", fmt)
    assert (f.kind, f.seq, f.members) == ("missing", 21, (0, 1, 2, 3))
    assert f.at_seq == (RankAt((0, 1, 3), "all_reduce", "[1024]", "scheduled"),)
    assert (f.missing, f.no_dump, f.ahead) == ((2,), (), ())
    # rank 1's pg_status lags (18) but its entries 19 and 20 are retired: 20 it is
    assert f.last_completed == {0: 20, 1: 20, 2: 20, 3: 20}
    assert describe(f, place) == (
        "pg 0 seq 21: ranks 0-1,3 in all_reduce [1024] (scheduled), rank 2 (node2 GPU2) "
        "never joined (last completed seq 20) — missing rank"
    )


@BOTH
def test_recorded_same_collective(fmt):
    f = only("same-collective", fmt)
    assert (f.kind, f.seq, f.at_seq) == (
        "same_collective",
        4,
        (RankAt(tuple(range(8)), "all_reduce", "[1024]", "scheduled"),),
    )
    assert (f.missing, f.no_dump, f.ahead) == ((), (), ())
    assert describe(f) == (
        "pg 0 seq 4: all 8 ranks in all_reduce [1024] (scheduled), none completed — all ranks in "
        "the same collective: look below NCCL at the network"
    )


@BOTH
def test_recorded_never_started(fmt):
    f = only("never-started", fmt)
    assert (f.kind, f.seq, f.pg, f.members, f.at_seq) == ("never_started", None, "", tuple(range(8)), ())
    assert describe(f) == "pg (unnamed): no collective ever ran on any of 8 ranks — rendezvous or init"


@BOTH
def test_built_24_mismatched_16_ranks(fmt):
    f = only("built-2.4-mismatched", fmt)
    assert (f.kind, f.seq, f.members) == ("mismatched", 3851, tuple(range(16)))
    assert [(a.ranks, a.collective, a.sizes, a.state) for a in f.at_seq] == [
        ((0, 1, 2) + tuple(range(4, 16)), "reduce_scatter", "[2048x4096]", "started"),
        ((3,), "all_reduce", "[1]", "started"),
    ]
    assert describe(f, place) == (
        "pg 0 seq 3851: ranks 0-2,4-15 in reduce_scatter [2048x4096], rank 3 (gpu-a07 GPU3) "
        "in all_reduce [1] — mismatched collectives; rank 3 left the loop early"
    )


@BOTH
def test_built_22_missing_rank_without_pg_status(fmt):
    f = only("built-2.2-missing-rank", fmt)
    assert (f.kind, f.seq, f.missing, f.last_completed) == ("missing", 42, (2,), {0: 41, 1: 41, 2: 41, 3: 41})
    assert describe(f, place) == (
        "pg 0 seq 42: ranks 0-1,3 in all_reduce [1024] (started), rank 2 (node2 GPU2) "
        "never joined (last completed seq 41) — missing rank"
    )


@BOTH
def test_built_mismatched_sizes(fmt):
    f = only("built-2.10-mismatched-sizes", fmt)
    assert (f.kind, f.seq) == ("mismatched", 7)
    assert f.at_seq == (
        RankAt((0, 2, 3), "all_reduce", "[64x32]", "started"),
        RankAt((1,), "all_reduce", "[32x32]", "started"),
    )
    assert describe(f) == (
        "pg 0 seq 7: ranks 0,2-3 in all_reduce [64x32], rank 1 in all_reduce [32x32] — mismatched "
        "collectives: same collective, different sizes"
    )


@BOTH
def test_built_ahead_and_p2p_kept_apart(fmt):
    pg0, pg1 = analyze(dumps("built-2.10-ahead-p2p", fmt))
    assert (pg0.pg, pg0.kind, pg0.seq, pg0.ahead) == ("0", "ahead", 10, (0, 1, 2))
    assert pg0.at_seq == (
        RankAt((0, 1, 2), "all_reduce", "[4096]", "completed"),
        RankAt((3,), "all_reduce", "[4096]", "started"),
    )
    assert describe(pg0) == (
        "pg 0 seq 10: ranks 0-2 in all_reduce [4096] (completed), rank 3 in all_reduce [4096] "
        "(started); ranks 0-2 moved on past it — rank 3 behind: a straggler"
    )
    # the pending send/recv carry collective_seq_id 3 like the completed all_reduce; not mixed in
    assert (pg1.pg, pg1.desc, pg1.kind, pg1.members, pg1.seq) == ("1", "pp", "completed", (0, 1), None)
    assert pg1.p2p_pending == {
        0: ("send 0->1 [8x16] (started, p2p seq 5)",),
        1: ("recv 1<-0 [8x16] (started, p2p seq 5)",),
    }
    assert describe(pg1) == (
        "pg 1: all 2 ranks completed every collective they enqueued (last seq 3); pending p2p: "
        "rank 0 send 0->1 [8x16] (started, p2p seq 5); rank 1 recv 1<-0 [8x16] (started, p2p seq 5)"
    )


def test_a_rank_without_a_dump_is_no_dump_not_missing():
    f = only("built-2.4-mismatched", skip=(9,))
    assert (f.kind, f.no_dump, f.missing) == ("mismatched", (9,), ())
    assert describe(f).endswith(
        "rank 3 in all_reduce [1], rank 9 left no readable dump — mismatched collectives; rank 3 left the loop early"
    )
    g = only("built-2.10-mismatched-sizes", skip=(1,))
    assert (g.kind, g.seq, g.no_dump, g.at_seq) == (
        "missing",
        7,
        (1,),
        (RankAt((0, 2, 3), "all_reduce", "[64x32]", "started"),),
    )
    assert describe(g, place) == (
        "pg 0 seq 7: ranks 0,2-3 in all_reduce [64x32] (started), rank 1 left no readable dump — missing rank"
    )


def test_recorded_gloo_without_pg_config_members_come_from_the_dumps():
    # gloo's pg_config is keyed "", so pg "0"'s members are the ranks whose dumps mention it
    f = only("same-collective", skip=(5,))
    assert (f.members, f.no_dump, f.kind) == ((0, 1, 2, 3, 4, 6, 7), (), "same_collective")


def test_ring_buffer_wrap_older_is_passed_newer_is_missing():
    ds = dumps("built-2.4-mismatched")
    # rank 0's buffer lost everything up to 3850: it passed those seqs, it is not missing there
    ds[0] = replace(ds[0], entries=ds[0].entries[-1:], status={})
    f = analyze(ds)[0]
    assert (f.kind, f.seq, f.missing, f.last_completed[0]) == ("mismatched", 3851, (), 3850)
    # rank 5 never reached 3851 (newer than its newest entry): missing
    ds[5] = replace(ds[5], entries=ds[5].entries[:-1], status={})
    f = analyze(ds)[0]
    assert (f.seq, f.missing) == (3851, (5,))


def test_nothing_at_all():
    (f,) = analyze([])
    assert (f.kind, f.members) == ("never_started", ())


def test_worst_first():
    kinds = [f.kind for f in analyze(dumps("built-2.10-ahead-p2p"))]
    assert kinds == ["ahead", "completed"]


@pytest.mark.parametrize(
    "ranks, text", [((0, 1, 2, 4, 5, 6, 7), "0-2,4-7"), ((0, 1, 3), "0-1,3"), ((5,), "5"), ((), "")]
)
def test_fold(ranks, text):
    assert fold(ranks) == text


def test_places_only_for_small_groups():
    f = only("built-2.4-mismatched")
    text = describe(f, lambda r: f"n{r}")
    assert "ranks 0-2,4-15 in" in text and "rank 3 (n3) in" in text


def test_last_completed_per_rank_grouped_newest_first():
    from nodecheck.forensics.collectives import last_completed_text

    ahead, pp = analyze(dumps("built-2.10-ahead-p2p"))
    assert last_completed_text(ahead) == "seq 10 on ranks 0-2; seq 9 on rank 3"
    assert last_completed_text(pp) == "seq 3 on ranks 0-1"
    (never,) = analyze(dumps("never-started"))
    assert last_completed_text(never) == "none on ranks 0-7"
