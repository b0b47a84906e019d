"""time.skew: node clocks read through a fake ActiveContext whose `date` answers with a chosen offset."""

from __future__ import annotations

import re
import time

import pytest
from pydantic import ValidationError

from nodecheck.checks.time_skew import Sample, SkewReport, TimeSkew, _judge, skew
from nodecheck.core.model import Capture, Node, Outcome, Probe, Status
from tests.helpers import SerialActiveContext


class FakeContext(SerialActiveContext):
    """ActiveContext for time.skew: each node's `date` prints the operator's clock plus its offset,
    after `delay` seconds (a slow link); `broken` nodes answer with what a failed step returns."""

    check = "time.skew"

    def __init__(self, offsets: dict[str, float], delay: float = 0.0, broken: dict[str, Capture] | None = None):
        super().__init__()
        self.offsets, self.delay, self.broken = offsets, delay, broken or {}
        self.nodes = {n: Node(n, n) for n in offsets}
        self.captures: dict = {n: {} for n in offsets}
        self.order = list(offsets)
        self.runs: list[str] = []

    def run(self, node: str, probe: Probe, *, fresh: bool = False, cleanup: bool = False) -> Capture:
        self.runs.append(node)
        if node in self.broken:
            return self.broken[node]
        time.sleep(self.delay)
        stdout = f"{time.time() + self.offsets[node]:.9f}\n"
        time.sleep(self.delay)
        return Capture(node, probe.name, probe.argv, Outcome.EXITED, 0, stdout, "", 2 * self.delay)

    def incomplete(self, why: str) -> None:
        raise AssertionError(why)


def run(ctx: FakeContext, **params):
    return {nodes[0]: v for nodes, v in skew(ctx, TimeSkew(**params))}


def test_a_node_3_s_off_fails_naming_its_offset_and_the_median():
    ctx = FakeContext({"node1": 0.0, "node2": 0.001, "node3": 3.0, "node4": -0.001})
    verdicts = run(ctx)
    bad = verdicts["node3"]
    assert bad.status is Status.FAIL
    said = re.match(r"node3 clock ([0-9.]+) s ± ([0-9.]+) s ahead of the fleet median \(which is ", bad.message)
    assert said and float(said.group(1)) == pytest.approx(3.0, abs=0.05)
    assert bad.message.endswith("expected within 1 s")
    assert bad.observed["offset_s"] == pytest.approx(3.0, abs=0.05)
    assert [n for n, v in verdicts.items() if v.status is Status.PASS] == ["node1", "node2", "node4"]
    assert ctx.runs.count("node3") == 3  # K reads, the shortest kept


def test_the_operators_own_clock_being_off_does_not_fail_the_fleet():
    # every node 5 s ahead of the operator host: the operator is off, not the nodes
    verdicts = run(FakeContext({f"node{i}": 5.0 for i in range(1, 6)}))
    assert {v.status for v in verdicts.values()} == {Status.PASS}
    assert verdicts["node1"].observed["operator_offset_s"] == pytest.approx(-5.0, abs=0.05)


def test_the_report_holds_every_nodes_offset_spread_and_operator_offset():
    ctx = FakeContext({"node1": 0.0, "node2": 0.0, "node3": 2.0})
    run(ctx)
    assert isinstance(ctx.data, SkewReport)
    extras = ctx.data.as_json([])
    assert extras["reference"] == "fleet median"
    assert extras["spread_s"] == pytest.approx(2.0, abs=0.05)
    assert extras["nodes"]["node3"]["offset_s"] == pytest.approx(2.0, abs=0.05)
    assert set(extras["nodes"]["node1"]) == {"offset_s", "rtt_s", "uncertainty_s"}


def test_with_two_nodes_the_operator_clock_is_the_reference_and_the_message_says_so():
    verdicts = run(FakeContext({"node1": 0.0, "node2": 0.3}))
    assert verdicts["node2"].status is Status.WARN
    assert "the operator host's clock (fewer than 3 nodes: no fleet median)" in verdicts["node2"].message
    assert verdicts["node1"].status is Status.PASS


def test_a_round_trip_too_long_to_decide_is_an_error_never_a_pass():
    # 0.9 s off with +-1 s of uncertainty: it may be within 1 s or not
    sample = Sample(offset_s=0.9, rtt_s=2.0)
    v = _judge("node7", sample, 0.0, 0.0, "operator clock", 0.9, TimeSkew())
    assert v.status is Status.ERROR
    assert "cannot tell whether it is within 1 s, the round trip (2.000 s) was too long" in v.message
    # far enough off that even the uncertainty cannot bring it back: a FAIL
    assert _judge("node7", Sample(3.0, 2.0), 0.0, 0.0, "operator clock", 3.0, TimeSkew()).status is Status.FAIL


def test_a_node_whose_date_fails_or_lacks_nanoseconds_is_named_and_left_out_of_the_median():
    dead = Capture("node2", "date", ("date",), Outcome.TIMEOUT, None, "", "", 10.0, detail="timed out after 10 s")
    busybox = Capture("node3", "date", ("date",), Outcome.EXITED, 0, "1733000000.N\n", "", 0.01)
    ctx = FakeContext(
        {"node1": 0.0, "node2": 0.0, "node3": 0.0, "node4": 0.0}, broken={"node2": dead, "node3": busybox}
    )
    verdicts = run(ctx)
    assert verdicts["node2"].status is Status.TIMEOUT and "timed out after 10 s" in verdicts["node2"].message
    assert verdicts["node3"].status is Status.ERROR and "not seconds.nanoseconds" in verdicts["node3"].message
    assert verdicts["node1"].status is Status.PASS
    assert "fewer than 3 nodes" in verdicts["node1"].message  # two nodes read: no median


def test_bad_parameters_are_refused():
    with pytest.raises(ValidationError):
        TimeSkew(samples=0)
    with pytest.raises(ValidationError):
        TimeSkew(offset_s={"fail_above": 0.1, "warn_above": 1.0})


ON_THE_NODE = (
    "not judged: nodecheck runs on the node itself (--local, the Prolog, health), so there is no other clock "
    "to compare it with; run time.skew from the operator host over SSH"
)


def test_on_the_node_itself_the_clock_is_not_compared_with_itself():
    ctx = FakeContext({"here": 0.0})
    ctx.on_this_host = True
    assert [(nodes, v.status, v.message) for nodes, v in skew(ctx, TimeSkew())] == [
        (("here",), Status.SKIPPED, ON_THE_NODE)
    ]
    assert ctx.runs == [] and ctx.data is None  # nothing read, no offsets reported


def test_run_local_says_time_skew_was_not_judged(tmp_path, capsys):
    from nodecheck import cli

    playbook = tmp_path / "skew.yml"
    playbook.write_text("version: 1\ndescription: the clock\ndeadline_s: 60\nchecks:\n  time.skew: {}\n")
    code = cli.main(["run", "--local", "--playbook", str(playbook), "--output-dir", str(tmp_path / "reports")])
    out = capsys.readouterr().out
    assert "ahead of" not in out and "behind" not in out
    assert "skipped   time.skew  not judged: nodecheck runs on the node itself" in out
    assert code == 3 and "1 node: 1 skipped. Status SKIPPED (exit 3)." in out
