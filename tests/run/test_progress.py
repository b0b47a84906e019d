"""What a run tells its progress (nodecheck.core.progress): the passive phase a node at a time, a phase
per active check, and the sub-phases the active checks say (ib.pairs: its rounds, a pair per item)."""

from __future__ import annotations

import threading
import time

from pydantic import BaseModel

from nodecheck.checks.ib import IBSTAT
from nodecheck.checks.ib_pairs import IbPairs, pairs
from nodecheck.config.playbook import PlannedCheck, Playbook
from nodecheck.core.model import Capture, Node, Outcome, Probe, Status, Verdict
from nodecheck.core.progress import Progress, Tracker
from nodecheck.core.registry import CheckSpec
from nodecheck.judging.pair_plan import plan
from nodecheck.run.active import CheckContext, CommandRunner
from nodecheck.run.runner import run
from nodecheck.transport.fanout import run_probes
from tests.checks.test_ib_pairs import IBSTAT_OK, ScriptedCluster
from tests.replay import ReplayTransport, exited


class Recorder:
    """A RunProgress that writes down what it is told, in order (thread-safe: steps run in threads)."""

    def __init__(self) -> None:
        self.events: list[tuple] = []
        self._lock = threading.Lock()

    def _add(self, *event) -> None:
        with self._lock:
            self.events.append(event)

    def steps(self, count: int) -> None:
        self._add("steps", count)

    def phase(self, name: str, total: int, unit: str = "node") -> None:
        self._add("phase", name, total, unit)

    def started(self, item: str) -> None:
        self._add("started", item)

    def done(self, item: str) -> None:
        self._add("done", item)

    def within(self) -> Progress:
        outer = self

        class Within:
            def phase(self, name: str, total: int, unit: str = "node") -> None:
                outer._add("sub", name, total, unit)

            def started(self, item: str) -> None:
                outer.started(item)

            def done(self, item: str) -> None:
                outer.done(item)

        return Within()

    def phases(self) -> list[tuple]:
        return [e for e in self.events if e[0] in ("steps", "phase", "sub")]

    def items(self, kind: str) -> list[str]:
        return sorted(e[1] for e in self.events if e[0] == kind)


class NoParams(BaseModel):
    pass


def test_the_passive_fan_out_tells_each_node_out_then_back():
    probe = Probe("p", ("true",), 1)
    nodes = [Node(f"n{i}", f"10.0.0.{i}") for i in (1, 2, 3)]
    seen = Recorder()
    run_probes(
        ReplayTransport({(n.name, "p"): exited(n.name, probe) for n in nodes}),
        dict.fromkeys(nodes, (probe,)),
        fanout=2,
        deadline=time.monotonic() + 60,
        progress=seen,
    )
    assert seen.items("started") == seen.items("done") == ["n1", "n2", "n3"]
    for n in ("n1", "n2", "n3"):  # each node is out before it is back
        assert seen.events.index(("started", n)) < seen.events.index(("done", n))


def test_a_run_has_a_phase_for_the_probes_and_one_per_active_check_whose_steps_per_node_tick():
    probe = Probe("p", ("true",), 1)

    def judge(ctx, params):
        ctx.progress.phase("level 1", len(ctx.nodes))
        ctx.each(list(ctx.nodes), lambda node: node)  # a step per node: each node out, then back
        yield tuple(ctx.nodes), Verdict(Status.PASS, "fine")

    active = PlannedCheck(CheckSpec("t.active", judge, [probe], NoParams, scope="active"), NoParams(), (probe,))
    book = Playbook("t", "t.yml", "0" * 64, "", 60, frozenset(), (active,))
    nodes = [Node("n1", "10.0.0.1"), Node("n2", "10.0.0.2")]
    seen = Recorder()
    report = run(
        book, nodes, ReplayTransport({(n.name, "p"): exited(n.name, probe) for n in nodes}), fanout=2, progress=seen
    )
    assert report.status is Status.PASS
    assert seen.phases() == [
        ("steps", 2),
        ("phase", "probes", 2, "node"),
        ("phase", "t.active", 2, "node"),
        ("sub", "level 1", 2, "node"),
    ]
    # twice each: once by the fan-out, once by the check's steps
    assert seen.items("started") == seen.items("done") == ["n1", "n1", "n2", "n2"]


def ib_pairs_context(n: int, cluster: ScriptedCluster, progress: Progress) -> CheckContext:
    """ib.pairs' context as tests/checks/test_ib_pairs.py builds it, with a progress to listen to."""
    nodes = {f"node{i}": Node(f"node{i}", f"10.0.0.{i}") for i in range(1, n + 1)}
    cluster.by_address = {node.address: name for name, node in nodes.items()}
    ibstat = {
        name: {IBSTAT.name: Capture(name, IBSTAT.name, IBSTAT.argv, Outcome.EXITED, 0, IBSTAT_OK, "", 0)}
        for name in nodes
    }
    commands = CommandRunner(cluster, time.monotonic() + 600, threading.Event())
    return CheckContext("ib.pairs", nodes, ibstat, commands, order=list(nodes), progress=progress)


def test_ib_pairs_says_each_round_of_the_plan_and_each_pair_out_and_back():
    seen = Recorder()
    ctx = ib_pairs_context(4, ScriptedCluster(), seen.within())
    verdicts = list(pairs(ctx, IbPairs(devices=["mlx5_0"], bw_gbps={"fail_below": 100})))
    assert all(v.status is Status.PASS for _, v in verdicts)
    # a ring of 4: 2 rounds of 2 disjoint pairs, all healthy: no localization round
    assert seen.phases() == [("sub", "round 1 of 2", 2, "pair"), ("sub", "round 2 of 2", 2, "pair")]
    assert seen.items("started") == seen.items("done")
    assert len(seen.items("done")) == 4 and all("+" in pair for pair in seen.items("done"))


def test_ib_pairs_names_its_localization_rounds_after_the_plan():
    seen = Recorder()
    # two bad neighbours: each fails with the other and with one healthy partner, so more partners are tried
    ctx = ib_pairs_context(8, ScriptedCluster(bad_nodes=["node1", "node2"]), seen.within())
    list(pairs(ctx, IbPairs(devices=["mlx5_0"], bw_gbps={"fail_below": 100}, max_rounds=3)))
    assert seen.phases() == [
        ("sub", "round 1 of 2", 4, "pair"),
        ("sub", "round 2 of 2", 4, "pair"),
        ("sub", "localization round 1 (at most 3)", 2, "pair"),
    ]


def test_a_tracker_in_the_context_shows_the_round_under_the_check_phase():
    tracker = Tracker()
    tracker.steps(3)
    tracker.phase("probes", 4)
    tracker.phase("ib.pairs", 4)
    ctx = ib_pairs_context(4, ScriptedCluster(), tracker.within())
    list(pairs(ctx, IbPairs(devices=["mlx5_0"], bw_gbps={"fail_below": 100})))
    s = tracker.snapshot()
    assert (s.step, s.phase, s.sub, s.done, s.total, s.unit, s.out) == (2, "ib.pairs", "round 2 of 2", 2, 2, "pair", ())


def test_each_planned_round_says_how_many_rounds_the_plan_has():
    for n in range(10):
        nodes = [f"n{i}" for i in range(n)]
        rounds = plan(nodes, "all")
        assert len(rounds) == (0 if n < 2 else n - 1 if n % 2 == 0 else n)  # the circle method
        assert all(r.of == len(rounds) for r in rounds)
    assert {r.of for r in plan([f"n{i}" for i in range(8)], "ring")} == {2}
