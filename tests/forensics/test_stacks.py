"""forensics/stacks.py on real py-spy recordings (tests/data/py-spy, tests/data/forensics): identical
Python stacks grouped across processes whose native frames differ (ASLR), the largest group first and
failures last, the one-line text of a group, and where a stack waits (collective, init)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from nodecheck.forensics.ranks import RankProcess, rank_process
from nodecheck.forensics.stacks import (
    SHOWN_FRAMES,
    ProcessStack,
    StackGroup,
    chain_text,
    collective_of,
    describe_group,
    frame_text,
    group_stacks,
    in_init,
    python_frames,
    summary_frames,
    who,
)
from nodecheck.parsers.forensics import JobProcess, parse_stacks
from nodecheck.parsers.pyspy import PyFrame, PyStacks, parse_pyspy_dump
from nodecheck.parsers.watch_sample import Proc
from tests.helpers import DATA

PYSPY = DATA / "py-spy"


def recording(name: str) -> PyStacks:
    return parse_pyspy_dump((PYSPY / name).read_text())


def as_pid(stacks: PyStacks, pid: int) -> PyStacks:
    """The same recording as another process would give it (py-spy names the pid in its header)."""
    return replace(stacks, pid=pid)


def rank(node: str, pid: int, r: int | None, **env: str) -> RankProcess:
    if r is not None:
        env = dict(RANK=str(r), LOCAL_RANK=str(r % 4), WORLD_SIZE="8", **env)
    return rank_process(node, JobProcess(Proc(pid, "Sl", 60, "python train.py", 1), env))


ALL_REDUCE = recording("recorded-hung-rank-all_reduce.txt")
REDUCE_SCATTER = recording("recorded-hung-rank-reduce_scatter.txt")
VIA_AGGREGATE = recording("recorded-hung-rank-all_reduce-via-aggregate-threads.txt")
NATIVE_VIA_AGGREGATE = recording("recorded-native-hung-rank-all_reduce-via-aggregate-threads.txt")
NONE = recording("recorded-hung-rank-none.txt")
FROZEN_UNPAUSED = recording("recorded-frozen-nonblocking.txt")

RS_CHAIN = (
    "wait (distributed_c10d.py:13) \u2190 reduce_scatter (distributed_c10d.py:21) \u2190 train (training.py:20)"
    " \u2190 \u2026 (5 frames)"
)
AR_CHAIN = (
    "wait (distributed_c10d.py:13) \u2190 all_reduce (distributed_c10d.py:17) \u2190 train (training.py:20)"
    " \u2190 \u2026 (5 frames)"
)
AGG_CHAIN = (
    "wait (distributed_c10d.py:13) \u2190 all_reduce (distributed_c10d.py:17) \u2190 _aggregate_total_loss "
    "(engine.py:6) \u2190 \u2026 (6 frames)"
)


def test_native_and_plain_dump_of_the_same_place_group_on_their_python_frames():
    # the --native recording has clock_nanosleep and 0x7f... libc frames around the same Python frames
    assert len(NATIVE_VIA_AGGREGATE.threads[0].frames) == 8 and len(VIA_AGGREGATE.threads[0].frames) == 6
    assert python_frames(NATIVE_VIA_AGGREGATE) == python_frames(VIA_AGGREGATE)
    a, b = rank("node1", 7389, 3), rank("node2", 7390, 5)
    (g,) = group_stacks([ProcessStack(a, NATIVE_VIA_AGGREGATE), ProcessStack(b, as_pid(VIA_AGGREGATE, 7390))])
    assert g.failure == "" and g.members == (a, b) and g.ranks == (3, 5) and g.nodes == ("node1", "node2")
    assert [f.function for f in g.frames] == [
        "wait",
        "all_reduce",
        "_aggregate_total_loss",
        "train",
        "main",
        "<module>",
    ]
    assert not any(f.native for f in g.frames)


def test_two_recorded_ranks_whose_libc_addresses_differ_group_as_one():
    out = parse_stacks((DATA / "forensics" / "recorded-stacks-two-answer-one-frozen.txt").read_text())
    r0, r1 = (parse_pyspy_dump(out.results[pid].stdout) for pid in (4999, 5000))
    # ASLR: the outermost native frame is at a different address in each process
    assert r0.threads[0].frames[-1].function == "0x7f52dc03124a"
    assert r1.threads[0].frames[-1].function == "0x7f93ddd0524a"
    (g,) = group_stacks([ProcessStack(rank("node1", 4999, 0), r0), ProcessStack(rank("node1", 5000, 1), r1)])
    assert g.ranks == (0, 1) and collective_of(g.frames) == "reduce_scatter"


def test_largest_group_first_then_smaller_then_failures_last():
    stacks = [ProcessStack(rank("node1", 100 + r, r), as_pid(REDUCE_SCATTER, 100 + r)) for r in (0, 1, 2)]
    stacks += [ProcessStack(rank("node2", 104, 4), as_pid(ALL_REDUCE, 104))]
    # two failures outnumber the one-rank group and still come last
    stacks += [
        ProcessStack(rank("node2", 105 + k, 5 + k), None, failure="py-spy failed: permission denied (ptrace)")
        for k in range(2)
    ]
    stacks += [ProcessStack(rank("node2", 107, 7), None, failure="no such process")]
    groups = group_stacks(list(reversed(stacks)))
    assert [g.ranks for g in groups] == [(0, 1, 2), (4,), (5, 6), (7,)]
    assert [g.failure for g in groups] == ["", "", "py-spy failed: permission denied (ptrace)", "no such process"]
    assert [collective_of(g.frames) for g in groups] == ["reduce_scatter", "all_reduce", None, None]
    assert [p.pid for p in groups[0].members] == [100, 101, 102]  # members sorted by rank


def test_groups_of_equal_size_are_ordered_by_their_lowest_rank():
    stacks = [ProcessStack(rank("node2", 5, 5), ALL_REDUCE), ProcessStack(rank("node1", 2, 2), REDUCE_SCATTER)]
    assert [g.ranks for g in group_stacks(stacks)] == [(2,), (5,)]


def test_failures_with_different_unpaused_stacks_stay_apart():
    why = "py-spy got no answer within 3 s; process state D (disk sleep)"
    stacks = [
        ProcessStack(rank("node1", 1, 1), None, why, unpaused=FROZEN_UNPAUSED),
        ProcessStack(rank("node1", 2, 2), None, why, unpaused=NONE),
        ProcessStack(rank("node1", 3, 3), None, why, unpaused=as_pid(FROZEN_UNPAUSED, 3)),
    ]
    groups = group_stacks(stacks)
    assert [g.ranks for g in groups] == [(1, 3), (2,)]
    assert [collective_of(g.unpaused) for g in groups] == ["all_reduce", None]
    assert groups[0].frames == ()


def test_describe_seven_ranks_on_two_nodes_folds_the_nodes():
    stacks = [
        ProcessStack(rank(f"node{1 + r // 4}", 200 + r, r), as_pid(REDUCE_SCATTER, 200 + r)) for r in range(8) if r != 3
    ]
    stacks.append(ProcessStack(rank("node1", 203, 3), as_pid(ALL_REDUCE, 203)))
    big, odd = group_stacks(stacks)
    assert describe_group(big) == f"7 ranks 0-2,4-7 (node[1-2]) in {RS_CHAIN}"
    assert describe_group(odd) == f"rank 3 (node1 GPU3) in {AR_CHAIN}"


def test_describe_up_to_four_ranks_names_each_place():
    stacks = [ProcessStack(rank("node1", 300 + r, r), as_pid(VIA_AGGREGATE, 300 + r)) for r in (0, 1)]
    stacks.append(ProcessStack(rank("node2", 306, 6), NATIVE_VIA_AGGREGATE))
    (g,) = group_stacks(stacks)
    assert describe_group(g) == f"3 ranks 0-1,6 (node1 GPU0, node1 GPU1, node2 GPU2) in {AGG_CHAIN}"


def test_describe_a_frozen_rank_with_the_stack_read_without_stopping_it():
    why = "py-spy got no answer within 5 s; process state D (disk sleep)"
    (g,) = group_stacks([ProcessStack(rank("node1", 7389, 3), None, why, unpaused=FROZEN_UNPAUSED)])
    assert g.failure == why and g.ranks == (3,)
    assert describe_group(g) == (
        f"rank 3 (node1 GPU3): py-spy got no answer within 5 s; process state D (disk sleep);"
        f" read without stopping it: in {AGG_CHAIN}"
    )


def test_describe_a_failure_without_an_unpaused_stack():
    (g,) = group_stacks([ProcessStack(rank("node1", 7389, 3), None, "py-spy failed: permission denied (ptrace)")])
    assert describe_group(g) == "rank 3 (node1 GPU3): py-spy failed: permission denied (ptrace)"


def test_describe_processes_without_a_rank():
    one = group_stacks([ProcessStack(rank("node1", 7, None), ALL_REDUCE)])[0]
    assert one.ranks == () and describe_group(one) == f"1 process without a rank (node1 pid 7) in {AR_CHAIN}"
    two = group_stacks(
        [ProcessStack(rank("node1", 8, None), ALL_REDUCE), ProcessStack(rank("node1", 7, None), ALL_REDUCE)]
    )[0]
    assert describe_group(two) == f"2 processes without a rank (node1 pids 7,8) in {AR_CHAIN}"


def test_who_joins_ranked_and_unranked_members():
    members = [rank("node1", 3, 3), rank("node2", 9, None)]
    assert who(members) == "rank 3 (node1 GPU3) and 1 process without a rank (node2 pid 9)"


def test_a_main_thread_without_python_frames_is_kept_apart_as_a_failure():
    # the --native recording's MainThread with its Python frames taken out: only libc is left
    native_only = tuple(f for f in NATIVE_VIA_AGGREGATE.threads[0].frames if f.native)
    assert [f.function for f in native_only] == ["clock_nanosleep", "0x7f5067f9e24a"]
    thread = replace(NATIVE_VIA_AGGREGATE.threads[0], frames=native_only)
    stacks = replace(NATIVE_VIA_AGGREGATE, threads=(thread,))
    good, bare = group_stacks(
        [ProcessStack(rank("node1", 1, 1), stacks), ProcessStack(rank("node1", 2, 2), ALL_REDUCE)]
    )
    assert good.ranks == (2,)
    assert (bare.ranks, bare.failure, bare.frames) == ((1,), "no Python frames in the main thread", ())
    assert describe_group(bare) == "rank 1 (node1 GPU1): no Python frames in the main thread"


def test_the_main_thread_is_the_one_named_mainthread():
    # the watchdog thread (watchdog_loop in distributed_c10d.py) does not count
    assert [f.function for f in python_frames(VIA_AGGREGATE)][:2] == ["wait", "all_reduce"]
    reordered = replace(VIA_AGGREGATE, threads=tuple(reversed(VIA_AGGREGATE.threads)))
    assert python_frames(reordered) == python_frames(VIA_AGGREGATE)


@pytest.mark.parametrize(
    "name, collective",
    [
        ("recorded-hung-rank-all_reduce.txt", "all_reduce"),
        ("recorded-hung-rank-reduce_scatter.txt", "reduce_scatter"),
        ("recorded-hung-rank-broadcast.txt", "broadcast"),
        ("recorded-hung-rank-broadcast-via-aggregate.txt", "broadcast"),
        ("recorded-hung-rank-barrier.txt", "barrier"),
        ("recorded-hung-rank-all_gather.txt", "all_gather"),
        ("recorded-native-hung-rank-all_reduce-via-aggregate-threads.txt", "all_reduce"),
        ("recorded-hung-rank-none.txt", None),
    ],
)
def test_collective_of_real_stacks(name, collective):
    frames = python_frames(recording(name))
    assert collective_of(frames) == collective
    assert in_init(frames) is False  # no recording is in rendezvous / init


def test_in_init_on_a_stack_inside_init_process_group():
    # no recording holds init: the recorded stack with init_process_group in place of the collective
    frames = python_frames(ALL_REDUCE)
    init = (PyFrame("init_process_group", "distributed_c10d.py", 1505),) + frames[2:]
    assert in_init(init) is True and collective_of(init) is None


def test_summary_skips_the_standard_library_waiting_frames():
    # a rank blocked in a queue/condition: threading.py and queue.py innermost, the job's frames below
    waiting = (PyFrame("Condition.wait", "threading.py", 327), PyFrame("Queue.get", "queue.py", 171))
    frames = waiting + python_frames(NONE)
    assert [frame_text(f) for f in summary_frames(frames)] == [
        "DataLoaderIter._next_data (dataloader.py:15)",
        "DataLoaderIter.__next__ (dataloader.py:10)",
        "train (training.py:13)",
    ]
    assert chain_text(frames) == (
        "DataLoaderIter._next_data (dataloader.py:15) \u2190 DataLoaderIter.__next__ "
        "(dataloader.py:10) \u2190 train (training.py:13) \u2190 \u2026 (7 frames)"
    )


def test_summary_of_only_waiting_frames_keeps_the_last_one():
    # the recorded watchdog thread below its own frame: Thread.run <- _bootstrap_inner <- _bootstrap,
    # full file names (--full-filenames) included
    full = recording("recorded-full-filenames-hung-rank-all_reduce-via-aggregate-threads.txt")
    (watchdog,) = [t for t in full.threads if t.name == "pt_nccl_watchdog"]
    below = watchdog.frames[1:]
    assert all(f.file == "/usr/lib/python3.11/threading.py" for f in below)
    assert [f.function for f in summary_frames(below)] == ["Thread._bootstrap"]


def test_chain_shows_three_frames_then_the_count():
    assert SHOWN_FRAMES == 3
    frames = python_frames(ALL_REDUCE)
    assert len(frames) == 5 and chain_text(frames) == AR_CHAIN
    assert chain_text(frames[:SHOWN_FRAMES]) == (
        "wait (distributed_c10d.py:13) \u2190 all_reduce (distributed_c10d.py:17) \u2190 train (training.py:20)"
    )


def test_frame_text_of_a_native_frame_has_no_line():
    innermost = NATIVE_VIA_AGGREGATE.threads[0].frames[0]
    assert innermost.native and frame_text(innermost) == "clock_nanosleep (libc.so.6)"


def test_stack_group_ranks_and_nodes_are_sorted_and_unique():
    g = StackGroup((), "no such process", (rank("node2", 5, 5), rank("node1", 2, 2), rank("node2", 9, None)))
    assert g.ranks == (2, 5) and g.nodes == ("node1", "node2")


def test_the_innermost_native_frame_is_said_when_every_member_waits_in_it():
    from nodecheck.forensics.stacks import innermost_native

    assert innermost_native(NATIVE_VIA_AGGREGATE) == "clock_nanosleep (libc.so.6)"
    assert innermost_native(VIA_AGGREGATE) == ""  # no --native frames: nothing said
    both = group_stacks(
        [
            ProcessStack(rank("node1", 7389, 3), NATIVE_VIA_AGGREGATE),
            ProcessStack(rank("node2", 7390, 5), as_pid(NATIVE_VIA_AGGREGATE, 7390)),
        ]
    )
    assert both[0].native == "clock_nanosleep (libc.so.6)"
    assert describe_group(both[0]).endswith(" [native: clock_nanosleep (libc.so.6)]")
    mixed = group_stacks(
        [
            ProcessStack(rank("node1", 7389, 3), NATIVE_VIA_AGGREGATE),
            ProcessStack(rank("node2", 7390, 5), as_pid(VIA_AGGREGATE, 7390)),
        ]
    )
    assert mixed[0].native == "" and "[native:" not in describe_group(mixed[0])
