"""The active executor (nodecheck/run/active.py): how a step ended is a field of its capture, not words;
rounds the time left cannot hold are not started; what a check reports is typed and reaches the
report's extras as the same JSON."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel

from nodecheck.config.playbook import PlannedCheck, Playbook
from nodecheck.core.model import Capture, Cut, Node, Outcome, Probe, Status, Verdict
from nodecheck.core.registry import CheckSpec
from nodecheck.judging.pair_plan import Pair
from nodecheck.report.json import to_dict
from nodecheck.run.active import CheckContext, CommandRunner
from nodecheck.run.runner import run
from nodecheck.transport import CUT_AT_DEADLINE
from nodecheck.transport.fanout import run_probes
from tests.replay import ReplayTransport, exited

NODE = Node("node1", "10.0.0.1")


class Scripted:
    """A transport whose sessions answer from a list, one capture per step, and count connections."""

    def __init__(self, *answers: Capture) -> None:
        self.answers, self.connects = list(answers), 0

    def connect(self, node, timeout_s):
        self.connects += 1
        return self

    def run(self, probe, timeout_s):
        return self.answers.pop(0)

    def close(self):
        pass


def capture(outcome: Outcome, detail: str = "", cut: Cut | None = None, probe: str = "step") -> Capture:
    return Capture(
        "node1", probe, ("tool",), outcome, 0 if outcome is Outcome.EXITED else None, "", "", 0.1, detail, cut
    )


def test_a_step_the_deadline_cut_is_marked_so_and_still_says_it_in_words():
    commands = CommandRunner(
        Scripted(capture(Outcome.TIMEOUT, "no answer within 1 s")), time.monotonic() + 2, threading.Event()
    )
    got = commands.run(NODE, Probe("step", ("tool",), timeout_s=30))
    assert got.cut is Cut.DEADLINE
    assert got.detail.startswith(f"{CUT_AT_DEADLINE} after ") and got.detail.endswith(" s (probe timeout 30 s)")


def test_a_step_that_timed_out_within_its_own_timeout_is_not_a_cut():
    commands = CommandRunner(
        Scripted(capture(Outcome.TIMEOUT, "no answer within 5 s")), time.monotonic() + 600, threading.Event()
    )
    got = commands.run(NODE, Probe("step", ("tool",), timeout_s=5))
    assert got.cut is None and got.detail == "no answer within 5 s"


def test_a_step_not_started_names_the_deadline_or_the_stop_in_the_field():
    stop = threading.Event()
    late = CommandRunner(Scripted(), time.monotonic() - 1, stop).run(NODE, Probe("step", ("tool",)))
    stop.set()
    stopped = CommandRunner(Scripted(), time.monotonic() + 600, stop).run(NODE, Probe("step", ("tool",)))
    assert (late.outcome, late.cut, late.detail) == (
        Outcome.SKIPPED,
        Cut.DEADLINE,
        "not started: the run deadline was reached",
    )
    assert (stopped.outcome, stopped.cut, stopped.detail) == (
        Outcome.SKIPPED,
        Cut.SIGNAL,
        "not started: stopped by a signal",
    )


def test_a_kept_connection_lost_before_the_step_is_replaced_by_the_field_not_by_its_words():
    lost = Scripted(capture(Outcome.UNREACHABLE, "the peer went away", Cut.CONNECTION_LOST), capture(Outcome.EXITED))
    got = CommandRunner(lost, time.monotonic() + 600, threading.Event()).run(NODE, Probe("step", ("tool",)))
    assert got.outcome is Outcome.EXITED and lost.connects == 2
    # the same words without the field: the step ran and the connection broke under it, no second try
    words = Scripted(capture(Outcome.UNREACHABLE, "connection lost before step: EOF"), capture(Outcome.EXITED))
    got = CommandRunner(words, time.monotonic() + 600, threading.Event()).run(NODE, Probe("step", ("tool",)))
    assert got.outcome is Outcome.UNREACHABLE and words.connects == 1


def test_the_fan_out_marks_what_it_skipped_and_what_the_deadline_cut():
    slow = Probe("slow", ("tool",), timeout_s=30)
    never = Probe("never", ("tool",), timeout_s=30)
    answers = {("node1", "slow"): Capture("node1", "slow", ("tool",), Outcome.TIMEOUT, None, "", "", 1.0, "no answer")}

    class Late(ReplayTransport):  # the first probe eats the deadline
        def connect(self, node, timeout_s):
            session = super().connect(node, timeout_s)
            run_probe = session.run

            def run_and_wait(probe, timeout_s):
                time.sleep(1.2)
                return run_probe(probe, timeout_s)

            session.run = run_and_wait
            return session

    out = run_probes(Late(answers), {NODE: (slow, never)}, fanout=1, deadline=time.monotonic() + 1.0)
    assert out.captures[("node1", "slow")].cut is Cut.DEADLINE
    assert (out.captures[("node1", "never")].outcome, out.captures[("node1", "never")].cut) == (
        Outcome.SKIPPED,
        Cut.DEADLINE,
    )
    assert out.incomplete == "the run deadline was reached"


def test_a_round_the_time_left_cannot_hold_is_not_started():
    order = ["n1", "n2", "n3", "n4"]
    ctx = CheckContext(
        "t.pairs",
        {n: Node(n, f"10.0.0.{i}") for i, n in enumerate(order, 1)},
        {},
        CommandRunner(Scripted(), time.monotonic() + 80, threading.Event()),
        order=order,
    )
    ran: list[tuple[int, Pair]] = []
    cut: list[tuple[int, float, float]] = []

    def test(rnd, pair):
        ran.append((rnd, pair))
        return "fast"

    results, blame = ctx.pair_rounds(
        order,
        test,
        lambda rnd, pair, got: got == "fast",
        wave_s=60,
        not_run=lambda rnd, left, needs: cut.append((rnd.index, left, needs)),
        pairing="ring",
        max_rounds=4,
    )
    assert ran == [] and results == [] and [c[0] for c in cut] == [0, 1]
    assert all(left < needs == 90 for _, left, needs in cut)  # 1 wave of 60 s + the 30 s reserve
    ctx.commands.deadline = time.monotonic() + 600
    results, blame = ctx.pair_rounds(
        order,
        test,
        lambda rnd, pair, got: None if pair.a == "n1" else True,
        wave_s=60,
        not_run=lambda *_: None,
        pairing="ring",
        max_rounds=0,
    )
    first = [p for r, p in ran if r == 1]
    assert {r for r, _ in ran} == {1, 2} and len(first) == 2
    assert {first[0].a, first[0].b}.isdisjoint({first[1].a, first[1].b})  # a round's pairs are disjoint
    assert all(r.ok and "n1" not in (r.pair.a, r.pair.b) for r in results)  # None: no evidence either way


@dataclass
class Matrix:
    cells: dict

    def as_json(self, incomplete: Sequence[str]) -> dict:
        return {"cells": self.cells, **({"incomplete": list(incomplete)} if incomplete else {})}


class NoParams(BaseModel):
    pass


def test_an_active_check_reports_typed_data_and_undone_work_and_the_report_keeps_the_same_json():
    probe = Probe("p", ("true",), 1)

    why = "round 2 not run: 10 s left before the deadline, it needs 120 s"

    def judge(ctx, params):
        ctx.report(Matrix({"n1": {"n2": 1.5}}))
        ctx.incomplete(why)
        yield tuple(ctx.nodes), Verdict(Status.PASS, "fine")

    check = PlannedCheck(CheckSpec("t.active", judge, [probe], NoParams, scope="active"), NoParams(), (probe,))
    book = Playbook("t", "t.yml", "0" * 64, "", 60, frozenset(), (check,))
    nodes = [Node("n1", "10.0.0.1"), Node("n2", "10.0.0.2")]
    answers = {(n.name, "p"): exited(n.name, probe, "ok") for n in nodes}
    report = run(book, nodes, ReplayTransport(answers), fanout=2)
    assert report.extras == {"t.active": {"cells": {"n1": {"n2": 1.5}}, "incomplete": [why]}}
    assert not report.complete and report.incomplete_reason == f"t.active: {why}"
    assert to_dict(report)["extras"] == report.extras


def test_every_active_step_is_told_the_job_the_run_tests_in_and_only_a_job_id(tmp_path):
    import threading
    import time

    from nodecheck.core.model import Node, Probe
    from nodecheck.run.active import CommandRunner
    from nodecheck.transport.local import LocalTransport

    probe = Probe("own", ("sh", "-c", 'echo "${NODECHECK_OWN_JOB:-none}"'))
    node = Node("here", "localhost")
    said = []
    for own in ("4242", "42; reboot", None):
        runner = CommandRunner(LocalTransport(), time.monotonic() + 30, threading.Event(), own_job=own)
        said.append(runner.run(node, probe).stdout)
        runner.close()
    assert said == ["4242\n", "none\n", "none\n"]
