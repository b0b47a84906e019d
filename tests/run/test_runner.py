"""Runner: remote outcomes become statuses, only completed output reaches a judge, never a false PASS."""

import threading
import time
from pathlib import Path

import pytest
from pydantic import BaseModel

from nodecheck.config.playbook import PlannedCheck, load_playbook
from nodecheck.core.model import Capture, Node, Outcome, Probe, Status, Verdict
from nodecheck.core.registry import CheckSpec
from nodecheck.run.runner import judge_node, plan_probes, run
from tests.replay import ReplayTransport, exited, hang

DATA = Path(__file__).resolve().parents[1] / "data"
HEALTHY = (DATA / "ibstat/gpud-h100-ndr-ib-mixed-cx6dx-ethernet-down-disabled.txt").read_text()
DOWN = (DATA / "ibstat/derived-h100-ndr-mlx5_3-down-polling.txt").read_text()


@pytest.fixture
def book():
    return load_playbook(str(DATA / "playbooks" / "ib-only.yml"))


def nodes(n):
    return [Node(f"node{i}", f"127.0.1.{i}") for i in range(1, n + 1)]


def ibstat_probe(book):
    return book.checks[0].probes[0]


def statuses(report):
    return {n: report.node_status(n).value for n in report.node_names}


def test_each_remote_condition_maps_to_its_status(book):
    p = ibstat_probe(book)
    answers = {
        ("node1", "ibstat"): exited("node1", p, HEALTHY),
        ("node2", "ibstat"): exited("node2", p, DOWN),
        ("node3", "ibstat"): exited("node3", p, "", 127, "sh: 1: ibstat: not found"),
        ("node4", "ibstat"): exited("node4", p, "", 255, "ibpanic: [1234] main: stat of IB device 'mlx5_0' failed"),
        ("node5", "ibstat"): exited("node5", p, "garbage that is not ibstat\n"),
        ("node6", "ibstat"): Capture(
            "node6", "ibstat", p.argv, Outcome.TIMEOUT, None, "CA 'mlx5_0'\n", "", 5.0, "no answer within 5 s"
        ),
    }
    transport = ReplayTransport(answers, unreachable={"node7": "connection refused by 127.0.1.7:22"})
    report = run(book, nodes(7), transport, fanout=4)
    assert statuses(report) == {
        "node1": "pass",
        "node2": "fail",
        "node3": "error",
        "node4": "error",
        "node5": "error",
        "node6": "timeout",
        "node7": "unreachable",
    }
    by_node = {n: [r.verdict for r in report.results_for(n)] for n in report.node_names}
    assert len(by_node["node1"]) == 8 and all(v.status is Status.PASS for v in by_node["node1"])
    assert [v.subject for v in by_node["node2"] if v.status is Status.FAIL] == ["mlx5_3/1"]
    assert by_node["node3"][0].message == "ibstat not found on the node (exit 127)"
    assert by_node["node4"][0].message.startswith("ibstat exited 255: ibpanic:")
    assert "cannot read ibstat output" in by_node["node5"][0].message
    assert "garbage that is not ibstat" in by_node["node5"][0].excerpt
    assert by_node["node6"][0].message == "ibstat timed out: no answer within 5 s"
    assert by_node["node7"][0].message == "unreachable: connection refused by 127.0.1.7:22"
    assert report.status is Status.FAIL and report.exit_code == 2 and report.complete


@pytest.mark.parametrize(
    "layout, status, code",
    [
        ({}, Status.PASS, 0),
        ({"node2": "timeout"}, Status.TIMEOUT, 3),
        ({"node2": "unreachable"}, Status.UNREACHABLE, 3),
        ({"node2": "down", "node1": "unreachable"}, Status.FAIL, 2),
    ],
)
def test_exit_code_follows_the_worst_node(book, layout, status, code):
    p = ibstat_probe(book)
    answers = {
        (n.name, "ibstat"): exited(n.name, p, DOWN if layout.get(n.name) == "down" else HEALTHY) for n in nodes(2)
    }
    if layout.get("node2") == "timeout":
        answers[("node2", "ibstat")] = Capture("node2", "ibstat", p.argv, Outcome.TIMEOUT, None, "", "", 5, "x")
    unreachable = {n: "refused" for n, what in layout.items() if what == "unreachable"}
    report = run(book, nodes(2), ReplayTransport(answers, unreachable), fanout=2)
    assert (report.status, report.exit_code) == (status, code)


_PROBE = Probe("p", ("true",), 1)


def _spec(judge, probe=_PROBE):
    class NoParams(BaseModel):
        pass

    return PlannedCheck(CheckSpec("t.check", judge, [probe], NoParams), NoParams(), (probe,))


def test_a_judge_that_crashes_or_says_nothing_is_an_error_not_a_pass():
    def crash(out, params):
        raise KeyError("boom")
        yield

    def silent(out, params):
        return iter(())

    caps = {("n1", "p"): exited("n1", Probe("p", ("true",), 1), "ok")}
    [crashed] = judge_node(_spec(crash), "n1", caps)
    [quiet] = judge_node(_spec(silent), "n1", caps)
    assert crashed.verdict.status is Status.ERROR and "internal error in t.check: KeyError" in crashed.verdict.message
    assert "Traceback" in crashed.verdict.excerpt
    assert (quiet.verdict.status, quiet.verdict.message) == (Status.ERROR, "t.check produced no verdict")


def test_a_probe_may_declare_nonzero_exits_it_can_read():
    probe = Probe("p", ("tool",), 1, ok_exit_codes=frozenset({0, 1}))
    check = _spec(lambda out, params: iter([Verdict(Status.WARN, out["p"].stdout)]), probe)
    [r] = judge_node(check, "n1", {("n1", "p"): exited("n1", probe, "half ok", 1)})
    assert (r.verdict.status, r.verdict.message) == (Status.WARN, "half ok")


def test_the_run_deadline_bounds_the_run_and_marks_the_report_incomplete(book):
    p = ibstat_probe(book)
    answers = {
        ("node1", "ibstat"): exited("node1", p, HEALTHY),
        ("node2", "ibstat"): hang,
        ("node3", "ibstat"): exited("node3", p, HEALTHY),
    }
    started = time.monotonic()
    # fanout 1: node3 waits behind node2's hang and never starts before the deadline
    report = run(book, nodes(3), ReplayTransport(answers), fanout=1, deadline_s=0.5)
    took = time.monotonic() - started
    assert took < 2.0
    assert statuses(report) == {"node1": "pass", "node2": "timeout", "node3": "skipped"}
    [r2] = report.results_for("node2")
    assert "stopped at the run deadline" in r2.verdict.message
    assert report.complete is False and report.exit_code == 3


def test_a_node_with_no_result_is_an_error():
    from datetime import datetime, timezone

    from nodecheck.report import Report

    now = datetime.now(timezone.utc)
    report = Report("id", "pb", "pb.yml", "0" * 64, None, now, now, 1.0, True, (("lonely", "lonely"),), ())
    assert report.node_status("lonely") is Status.ERROR and report.exit_code == 3


def test_a_probe_shared_by_two_checks_runs_once(book):
    assert plan_probes(book.checks + book.checks) == (ibstat_probe(book),)


def test_a_transport_bug_is_an_error_on_that_node_not_a_timeout_or_a_crash(book):
    p = ibstat_probe(book)

    class Broken(ReplayTransport):
        def connect(self, node, timeout_s):
            if node.name == "node2":
                raise RuntimeError("bug in a transport")
            return super().connect(node, timeout_s)

    answers = {(n.name, "ibstat"): exited(n.name, p, HEALTHY) for n in nodes(3)}
    report = run(book, nodes(3), Broken(answers), fanout=2)
    assert statuses(report) == {"node1": "pass", "node2": "error", "node3": "pass"}
    [r] = report.results_for("node2")
    assert r.verdict.message == "nodecheck could not run ibstat: internal error: RuntimeError: bug in a transport"
    assert report.complete


def test_connects_that_ignore_their_timeout_cannot_stretch_the_run_past_deadline_plus_grace(book, monkeypatch):
    import nodecheck.transport.fanout as fanout

    monkeypatch.setattr(fanout, "STRAGGLER_GRACE_S", 0.5)
    p = ibstat_probe(book)

    class Stuck(ReplayTransport):
        def connect(self, node, timeout_s):  # ignores timeout_s, a little longer for each node
            time.sleep(0.4 + 0.4 * int(node.name[4:]))
            return super().connect(node, timeout_s)

    answers = {(n.name, "ibstat"): exited(n.name, p, HEALTHY) for n in nodes(6)}
    started = time.monotonic()
    report = run(book, nodes(6), Stuck(answers), fanout=6, deadline_s=0.3)
    assert time.monotonic() - started < 0.3 + 0.5 + 0.3
    assert set(statuses(report).values()) <= {"timeout", "skipped"} and not report.complete
    assert report.incomplete_reason == "the run deadline was reached"


def test_a_stop_request_ends_the_run_early_with_a_partial_report(book):
    p = ibstat_probe(book)
    answers = {
        ("node1", "ibstat"): exited("node1", p, HEALTHY),
        ("node2", "ibstat"): hang,
        ("node3", "ibstat"): exited("node3", p, HEALTHY),
    }
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()  # what the SIGTERM handler does
    started = time.monotonic()
    report = run(book, nodes(3), ReplayTransport(answers), fanout=1, deadline_s=30, stop=stop)
    assert time.monotonic() - started < 3
    assert statuses(report) == {"node1": "pass", "node2": "timeout", "node3": "skipped"}
    assert (report.complete, report.incomplete_reason) == (False, "stopped by a signal")


def test_the_runners_report_has_secrets_masked_once_for_every_consumer(book):
    """A tool's stderr that echoes a token reaches the verdict's message; the runner masks it, so the
    table, the JSON, the gate's drain reason and the history all get the masked text, and the
    renderers' own last redaction of that report is the report itself (no second scan)."""
    from nodecheck.report import json as report_json

    p = ibstat_probe(book)
    answers = {("node1", "ibstat"): exited("node1", p, "", 255, "ibpanic: HF_TOKEN=hf_s3cr3t --api-key k3y5 failed")}
    report = run(book, nodes(1), ReplayTransport(answers), fanout=1)
    (result,) = report.results_for("node1")
    assert result.verdict.message == "ibstat exited 255: ibpanic: HF_TOKEN=<redacted> --api-key <redacted> failed"
    assert report_json.redacted(report) is report
    assert "hf_s3cr3t" not in report_json.dumps(report) and "k3y5" not in report_json.dumps(report)
