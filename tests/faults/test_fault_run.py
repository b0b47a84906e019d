"""Faults around the run itself: a signal, the deadline, a clock step, and a report directory that
cannot take the report."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from faults.support import (
    HEALTHY,
    REMOTE_BACKSTOP_S,
    assert_nothing_left,
    assert_report,
    book,
    finish,
    run,
    start,
    temp_entries,
)
from harness.scenarios import IB_CAS, IBSTAT_HEALTHY, Fabric, Replay, apply

from nodecheck.checks.ib_pairs import IbPairs, _round_needs

NODES = ["node1", "node2"]
CLOCKSTEP = Path(__file__).resolve().parent / "clockstep"


def test_sigterm_mid_run_writes_a_partial_report_and_leaves_nothing(cluster, tmp_path):
    cluster.fake_replay("node1", "ibstat", HEALTHY)
    cluster.fake_hang("node2", "ibstat")
    before = temp_entries()
    started = time.monotonic()
    proc = start(cluster, tmp_path, "node[1-2]", playbook=book(timeout_s=3))
    _wait_for_process(cluster, "node2", "sleep 3600")
    proc.send_signal(signal.SIGTERM)
    o = finish(proc, tmp_path, started)
    assert_report(o, NODES, complete=False, reason="stopped by a signal")
    assert (o.status("node1"), o.status("node2"), o.code) == ("pass", "timeout", 3)
    # the hung tool ends by the remote `timeout` wrapper, the backstop after the client hung up
    assert_nothing_left(cluster, NODES, before, within=3 + REMOTE_BACKSTOP_S + 2)


def _wait_for_process(cluster, node: str, argv: str, timeout: float = 20) -> None:
    end = time.monotonic() + timeout
    while not any(argv in a for _, a in cluster.node_processes(node)):
        assert time.monotonic() < end, f"{argv!r} never ran on {node}"
        time.sleep(0.05)


PAIRS = "  ib.pairs: {devices: [mlx5_0], duration_s: 1, test_timeout_s: %d}\n"


def _pair_layout(cluster, test_s: float, nodes=NODES) -> None:
    apply(
        cluster,
        {"*": [Fabric(devices=IB_CAS, test_s=test_s)], **{n: [Replay("ibstat", IBSTAT_HEALTHY)] for n in nodes}},
    )


def test_sigterm_during_a_pair_test_round_stops_it_and_cleans_the_nodes(cluster, tmp_path):
    _pair_layout(cluster, test_s=6)
    before = temp_entries()
    started = time.monotonic()
    proc = start(cluster, tmp_path, "node[1-2]", playbook="version: 1\ndeadline_s: 120\nchecks:\n" + PAIRS % 10)
    _wait_for_process(cluster, "node1", "ib_write_bw")
    proc.send_signal(signal.SIGTERM)
    o = finish(proc, tmp_path, started)
    assert_report(o, NODES, complete=False, reason="stopped by a signal")
    assert time.monotonic() - started < 15
    assert {o.status(n) for n in NODES} == {"skipped"}, [o.messages(n) for n in NODES]
    assert o.code == 3
    assert_nothing_left(cluster, NODES, before, within=5)


def test_the_deadline_hit_during_the_pair_test_rounds_is_a_partial_report(cluster, tmp_path):
    """ib.pairs starts a round only when the round's worst case fits before the deadline (a round
    is bounded by test_timeout_s), so the deadline can only fall between rounds. 3 nodes are 3 ring
    rounds (node1-node2, node2-node3, node1-node3); each test takes 10 s. The deadline leaves round 1
    7 s for the probes before it (they take about 1 s) and then 7 s less than a round needs: round 1
    runs, rounds 2 and 3 cannot, whatever the machine's speed. No node was tested with all of its
    partners, so none is PASS ("skipped is not healthy"): the pair that ran is partly tested."""
    nodes = ["node1", "node2", "node3"]
    _pair_layout(cluster, test_s=10, nodes=nodes)
    needs = _round_needs(IbPairs(devices=["mlx5_0"], duration_s=1, test_timeout_s=14))
    before = temp_entries()
    o = run(
        cluster, tmp_path, "node[1-3]", "--deadline", f"{needs + 7:g}", playbook="version: 1\nchecks:\n" + PAIRS % 14
    )
    cut = r"round {} not run: \d+ s left before the deadline, it needs %d s" % needs
    assert re.fullmatch(r"ib\.pairs: " + cut.format(2) + "; " + cut.format(3), o.doc["incomplete_reason"]), o.doc[
        "incomplete_reason"
    ]
    assert_report(o, nodes, complete=False, reason=o.doc["incomplete_reason"])
    assert [o.status(n) for n in nodes] == ["skipped", "skipped", "skipped"], [o.messages(n) for n in nodes]
    [(_, first)], [(_, second)], [(_, third)] = (o.messages(n) for n in nodes)
    assert re.fullmatch(
        r"partly tested: 2 tests with 1 partner pass; slowest \S+ Gb/s \(mlx5_0 with node2\); "
        r"not tested with node3: " + cut.format(3),
        first,
    ), first
    assert re.fullmatch(
        r"partly tested: 2 tests with 1 partner pass; slowest \S+ Gb/s \(mlx5_0 with node1\); "
        r"not tested with node3: " + cut.format(2),
        second,
    ), second
    assert re.fullmatch("not tested: " + cut.format(2) + "; " + cut.format(3), third), third
    assert [r["round"] for r in o.doc["extras"]["ib.pairs"]["results"]] == [1, 1]
    assert o.code == 3 and o.wall < 30
    assert_nothing_left(cluster, nodes, before, within=5)


@pytest.mark.parametrize("step_s", [3600, -3600], ids=["clock-forward-1h", "clock-back-1h"])
def test_a_clock_step_during_the_run_changes_no_verdict_and_no_bound(cluster, tmp_path, step_s):
    """The wall clock jumps an hour while node2's probe runs (see clockstep/sitecustomize.py for what
    is real): the probe asks for the step and waits until it was made, then runs 2.5 s more, with its
    timeout and the run's deadline running. Those run on the monotonic clock, so nothing times out
    early (forward: a wall-clock bound would be an hour past, the probe TIMEOUT, the report partial)
    or late (back: a wall-clock wait would hold the run an hour, past run()'s 120 s limit). The step
    waits on the probe, not on a delay after start-up, so a slow start on a busy machine cannot move
    it before the run or after it; the bounds are ones such a machine keeps inside of."""
    trigger = tmp_path / "step-now"
    cluster.fake_replay("node1", "ibstat", HEALTHY)
    cluster.fake_script(
        "node2",
        "ibstat",
        f"touch {trigger}\nwhile [ ! -e {trigger}.stepped ]; do sleep 0.05; done\nsleep 2.5; cat {HEALTHY}",
    )
    env = dict(os.environ, PYTHONPATH=str(CLOCKSTEP), NODECHECK_FAULT_CLOCK_STEP=f"{trigger}:{step_s}")
    before = temp_entries()
    o = run(cluster, tmp_path, "node[1-2]", playbook=book(timeout_s=10, deadline_s=20), env=env)
    assert Path(f"{trigger}.stepped").exists(), "the clock was never stepped"
    assert_report(o, NODES, complete=True)
    assert (o.status("node1"), o.status("node2"), o.code) == ("pass", "pass", 0), o.messages("node2")
    assert_nothing_left(cluster, NODES, before)


@pytest.fixture
def mount(tmp_path):
    """mount(options) -> a fresh tmpfs directory under tmp_path; unmounted after the test."""
    mounted = []

    def make(options: str) -> Path:
        where = tmp_path / f"fs{len(mounted)}"
        where.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", options, "nodecheck-fault", str(where)], check=True)
        mounted.append(where)
        return where

    yield make
    for where in mounted:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.mark.parametrize(
    "options, why",
    [("size=8k", "No space left on device"), ("ro,size=1m", "Read-only file system")],
    ids=["report-dir-full", "report-dir-not-writable"],
)
def test_a_report_dir_that_cannot_take_the_report_is_no_clean_bill_of_health(cluster, tmp_path, mount, options, why):
    """All nodes pass, but the report cannot be kept: exit 3 (never 0), stdout still carries the
    whole report, stderr says why, and no half-written report is left where it was to go."""
    cluster.fake_replay("node1", "ibstat", HEALTHY)
    cluster.fake_replay("node2", "ibstat", HEALTHY)
    where = mount(options)
    before = temp_entries()
    o = run(cluster, tmp_path, "node[1-2]", out=where)
    assert o.stored is None
    assert [(n["node"], n["status"]) for n in o.doc["nodes"]] == [("node1", "pass"), ("node2", "pass")]
    assert o.doc["complete"] is True and o.code == 3
    assert f"nodecheck: error: could not write the report under {where}" in o.err and why in o.err, o.err
    assert [p for p in where.rglob("*") if p.is_file()] == []
    assert_nothing_left(cluster, NODES, before)
