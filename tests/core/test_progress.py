"""The progress model (nodecheck/core/progress.py): phases, done of total, what is still out and for
how long, on an injected clock; reports from many threads at once."""

from __future__ import annotations

import threading

from nodecheck.core.progress import NULL_PROGRESS, Out, State, Tracker, single


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_phase_counts_its_items_and_lists_what_is_out_oldest_first_with_its_age():
    clock = Clock()
    t = Tracker(clock)
    t.steps(3)
    t.phase("probes", 4)
    t.started("node2")
    clock.now += 5
    t.started("node1")
    t.started("node3")
    clock.now += 36
    t.done("node3")
    assert t.snapshot() == State(
        step=1,
        steps=3,
        phase="probes",
        sub="",
        done=1,
        total=4,
        unit="node",
        out=(Out("node2", 41.0), Out("node1", 36.0)),
        elapsed_s=41.0,
    )


def test_a_new_phase_numbers_itself_and_starts_its_counts_over():
    clock = Clock()
    t = Tracker(clock)
    t.steps(2)
    t.phase("probes", 2)
    t.started("a")
    t.done("a")
    clock.now += 3
    t.phase("ib.pairs", 2)
    s = t.snapshot()
    assert (s.step, s.steps, s.phase, s.done, s.total, s.out, s.elapsed_s) == (2, 2, "ib.pairs", 0, 2, (), 0.0)


def test_a_sub_phase_keeps_the_phase_and_its_number_and_has_its_own_unit_and_counts():
    clock = Clock()
    t = Tracker(clock)
    t.steps(3)
    t.phase("probes", 16)
    t.phase("ib.pairs", 16)
    inner = t.within()
    inner.phase("round 1 of 2", 8, "pair")
    inner.started("node1+node2")
    inner.started("node3+node4")
    inner.done("node1+node2")
    s = t.snapshot()
    assert (s.step, s.phase, s.sub, s.done, s.total, s.unit) == (2, "ib.pairs", "round 1 of 2", 1, 8, "pair")
    assert [o.item for o in s.out] == ["node3+node4"]
    t.phase("probes again", 16)  # the next phase of the run clears the check's sub-phase
    assert (t.snapshot().step, t.snapshot().sub) == (3, "")


def test_an_item_done_twice_counts_once_and_one_still_running_stays_out():
    t = Tracker(Clock())
    t.phase("gpu.perf", 2)
    t.started("node1")
    t.started("node1")  # a second step on the same node, at once
    t.done("node1")
    s = t.snapshot()
    assert (s.done, [o.item for o in s.out]) == (1, ["node1"])
    t.done("node1")
    t.started("node1")  # a re-run of the node (gpu.perf's second try)
    t.done("node1")
    assert (t.snapshot().done, t.snapshot().out) == (1, ())


def test_single_is_a_phase_of_one_item_out_while_the_block_runs():
    t = Tracker(Clock())
    with single(t, "multi-node test", "node[1-4]"):
        inside = t.snapshot()
    after = t.snapshot()
    assert (inside.phase, inside.total, inside.unit, [o.item for o in inside.out]) == (
        "multi-node test",
        1,
        "test",
        ["node[1-4]"],
    )
    assert (after.done, after.out) == (1, ())


def test_the_null_progress_takes_everything_and_its_sub_phases_go_nowhere_too():
    NULL_PROGRESS.steps(3)
    NULL_PROGRESS.phase("probes", 2)
    NULL_PROGRESS.started("a")
    NULL_PROGRESS.done("a")
    assert NULL_PROGRESS.within() is NULL_PROGRESS


def test_many_threads_reporting_at_once_lose_no_item():
    t = Tracker()
    t.phase("probes", 800)
    barrier = threading.Barrier(8)

    def worker(k: int) -> None:
        barrier.wait()
        for i in range(100):
            name = f"node{k}-{i}"
            t.started(name)
            t.snapshot()  # a view reading while the workers write
            t.done(name)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    s = t.snapshot()
    assert (s.done, s.total, s.out) == (800, 800, ())
