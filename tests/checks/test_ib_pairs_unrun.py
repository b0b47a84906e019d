"""ib.pairs when a planned test did not run (a round the deadline could cut, a stop request): the
nodes it would have tested are never PASS on the tests that did run ("skipped is not healthy"), and
the check says which partner was not tested and why. Scripted context as in test_ib_pairs.py."""

from __future__ import annotations

import threading
import time

from nodecheck.checks.ib import IBSTAT
from nodecheck.checks.ib_pairs import IbPairs, _round_needs, pairs
from nodecheck.core.model import Capture, Cut, Node, Outcome, Status
from nodecheck.run.active import CheckContext, CommandRunner
from tests.checks.test_ib_pairs import FAST, IBSTAT_OK, SLOW, ScriptedCluster

PARAMS = {"devices": ["mlx5_0"], "bw_gbps": {"fail_below": 100}}
NEEDS = _round_needs(IbPairs(**PARAMS))  # one wave of one pair: 120 s with the default timeout


def run_check(n: int, cluster: ScriptedCluster, stop: threading.Event | None = None):
    """Three nodes are three ring rounds: node1-node2, node2-node3, node1-node3."""
    nodes = {f"node{i}": Node(f"node{i}", f"10.0.0.{i}") for i in range(1, n + 1)}
    cluster.by_address = {node.address: name for name, node in nodes.items()}
    ibstat = {
        name: {IBSTAT.name: Capture(name, IBSTAT.name, IBSTAT.argv, Outcome.EXITED, 0, IBSTAT_OK, "", 0)}
        for name in nodes
    }
    commands = CommandRunner(cluster, time.monotonic() + 600, stop or threading.Event())
    cluster.commands = commands
    ctx = CheckContext("ib.pairs", nodes, ibstat, commands, order=list(nodes))
    verdicts = list(pairs(ctx, IbPairs(**PARAMS)))
    return {nodes[0]: v for nodes, v in verdicts}, ctx.extras


class DeadlineAfter(ScriptedCluster):
    """After `pairs` pair tests, the deadline leaves 100 s: less than a round needs."""

    def __init__(self, pairs: int) -> None:
        super().__init__()
        self.pairs, self.clients = pairs, 0

    def outcome(self, server, client, device):
        self.clients += 1  # two client steps a pair (both directions)
        if self.clients == 2 * self.pairs:
            self.commands.deadline = time.monotonic() + 100
        return FAST, 0


CUT_3 = "round 3 not run: 100 s left before the deadline, it needs 120 s"


def test_the_last_ring_round_cut_by_the_deadline_leaves_its_nodes_partly_tested_not_pass():
    """The flaky fault test's "round 3 cut" case: every node passed what ran, but node1 and node3
    were never tested with each other. Before: all three PASS and exit 0 on an incomplete run."""
    assert NEEDS == 120
    verdicts, extras = run_check(3, DeadlineAfter(pairs=2))
    assert extras["incomplete"] == [CUT_3]
    assert {n: v.status for n, v in verdicts.items()} == {
        "node1": Status.SKIPPED,
        "node2": Status.PASS,
        "node3": Status.SKIPPED,
    }
    assert verdicts["node1"].message == (
        "partly tested: 2 tests with 1 partner pass; slowest 111.71 Gb/s (mlx5_0 with node2); "
        f"not tested with node3: {CUT_3}"
    )
    assert verdicts["node3"].message == (
        "partly tested: 2 tests with 1 partner pass; slowest 111.71 Gb/s (mlx5_0 with node2); "
        f"not tested with node1: {CUT_3}"
    )
    assert verdicts["node3"].observed["untested_partners"] == ["node1"]
    assert verdicts["node2"].message.startswith("4 tests with 2 partners pass")


def test_rounds_2_and_3_cut_leave_the_tested_pair_partly_tested_and_the_third_node_not_tested():
    verdicts, extras = run_check(3, DeadlineAfter(pairs=1))
    cut_2 = "round 2 not run: 100 s left before the deadline, it needs 120 s"
    assert extras["incomplete"] == [cut_2, CUT_3]
    assert {n: v.status for n, v in verdicts.items()} == {
        "node1": Status.SKIPPED,
        "node2": Status.SKIPPED,
        "node3": Status.SKIPPED,
    }
    assert verdicts["node1"].message.endswith(f"not tested with node3: {CUT_3}")
    assert verdicts["node2"].message.endswith(f"not tested with node3: {cut_2}")
    assert verdicts["node3"].message == f"not tested: {cut_2}; {CUT_3}"


def test_a_stop_before_the_last_round_leaves_its_nodes_partly_tested_not_pass():
    stop = threading.Event()

    class StopAfterRound2(ScriptedCluster):
        clients = 0

        def outcome(self, server, client, device):
            self.clients += 1
            if self.clients == 4:  # SIGTERM as round 2's last client ends
                stop.set()
            return FAST, 0

    verdicts, extras = run_check(3, StopAfterRound2(), stop=stop)
    assert {n: v.status for n, v in verdicts.items()} == {
        "node1": Status.SKIPPED,
        "node2": Status.PASS,
        "node3": Status.SKIPPED,
    }
    assert verdicts["node1"].message == (
        "partly tested: 2 tests with 1 partner pass; slowest 111.71 Gb/s (mlx5_0 with node2); "
        "not tested with node3: round 3 not run: stopped by a signal"
    )


def test_a_witness_whose_planned_tests_ran_still_passes_when_a_localization_round_is_cut():
    """node1 and node2 are bad: after the two ring rounds (6 pairs) node1, node2, node3 and node6
    passed with nobody, so localization would pair them with node4 and node5; the deadline cuts
    that round. The witnesses' own ring tests all ran and passed: PASS; no suspect is PASS."""

    class TwoBad(DeadlineAfter):
        def outcome(self, server, client, device):
            fast = super().outcome(server, client, device)
            return (SLOW, 0) if {server, client} & {"node1", "node2"} else fast

    verdicts, extras = run_check(6, TwoBad(pairs=6))
    assert extras["incomplete"] == ["round 3 not run: 100 s left before the deadline, it needs 120 s"]
    assert {n for n, v in verdicts.items() if v.status is Status.PASS} == {"node4", "node5"}
    assert {n for n, v in verdicts.items() if v.status is Status.FAIL} == {"node1", "node2", "node3", "node6"}
    assert verdicts["node4"].message == "4 tests with 2 partners pass; slowest 111.71 Gb/s (mlx5_0 with node3)"


def test_a_client_step_the_deadline_cut_is_no_evidence_whatever_its_words():
    """The deadline's cut is read from the capture's field: a detail without the words still makes
    the pair unrun (SKIPPED), never a hung test blamed on the nodes."""
    from tests.checks.test_ib_pairs import ScriptedSession

    class CutClient(ScriptedSession):
        def run(self, probe, timeout_s):
            got = super().run(probe, timeout_s)
            if probe.name.endswith(".client") and probe.name.startswith("ib_write_bw.r2."):
                return Capture(
                    got.node, got.probe, got.argv, Outcome.TIMEOUT, None, "", "", 1.0, "no answer", Cut.DEADLINE
                )
            return got

    class Cluster(ScriptedCluster):
        def connect(self, node, timeout_s):
            return CutClient(node.name, self)

    verdicts, extras = run_check(3, Cluster())
    assert Status.TIMEOUT not in {v.status for v in verdicts.values()}
    assert {r["status"] for r in extras["results"] if r["round"] == 2} == {"skipped"}
    assert any(r["message"].endswith(": not run to the end: no answer") for r in extras["results"])
