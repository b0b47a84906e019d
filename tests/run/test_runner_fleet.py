"""Fleet-scope checks through runner.run with the replay transport: nodes that did not complete get
their own result, the rest are judged together, a judge's bug or silence is an ERROR, and the JSON
report lists a group's result under each node (with only that node's evidence) and merges it back."""

from __future__ import annotations

import json
from collections.abc import Iterator

from pydantic import BaseModel

from nodecheck.checks import all_checks
from nodecheck.checks.ib import IBSTAT
from nodecheck.config.playbook import PlannedCheck, Playbook
from nodecheck.core.model import Capture, CheckResult, Evidence, Node, Outcome, Status, Verdict
from nodecheck.core.registry import CheckSpec
from nodecheck.judging.drift import PinOrDrift
from nodecheck.probes.versions import VERSIONS
from nodecheck.report import json as report_json
from nodecheck.run.runner import run
from tests.checks.test_versions import versions_out
from tests.helpers import data
from tests.replay import ReplayTransport, exited

NODES = [Node(f"node{i}", f"127.0.1.{i}") for i in range(1, 4)]
NAMES = ("node1", "node2", "node3")
STDOUT = versions_out()  # kernel 5.15.0-112-generic, Ubuntu 22.04.4 LTS
HEALTHY_IB = data("ibstat/gpud-h100-ndr-ib-mixed-cx6dx-ethernet-down-disabled.txt")


def planned(name: str, **params) -> PlannedCheck:
    spec = all_checks()[name]
    model = spec.params.model_validate(params)
    return PlannedCheck(spec, model, spec.probes_for(model))


def playbook(*checks: PlannedCheck) -> Playbook:
    return Playbook(
        name="fleet",
        path="fleet.yml",
        sha256="0" * 64,
        description="",
        deadline_s=30.0,
        select_labels=frozenset(),
        checks=checks,
    )


def answers(outputs: dict[str, str], probe=VERSIONS) -> dict:
    return {(node, probe.name): exited(node, probe, text) for node, text in outputs.items()}


def rows(results) -> list[tuple[str, tuple[str, ...], Status, str]]:
    return [(r.check, r.nodes, r.verdict.status, r.verdict.message) for r in results]


def evidence(node: str, probe=VERSIONS) -> Evidence:
    return Evidence(node, probe.name, probe.argv, 0, f"captures/{node}/{probe.name}.txt")


# -- who is judged together ------------------------------------------------------------------------------


def test_all_nodes_agree_is_one_group_result():
    transport = ReplayTransport(answers(dict.fromkeys(NAMES, STDOUT)))
    report = run(playbook(planned("kernel.version")), NODES, transport, fanout=3)
    assert rows(report.results) == [
        ("kernel.version", NAMES, Status.PASS, "kernel 5.15.0-112-generic (all 3 nodes agree)")
    ]
    assert report.results[0].evidence == tuple(evidence(n) for n in NAMES)
    assert (report.status, report.exit_code, report.complete) == (Status.PASS, 0, True)


def test_an_unreachable_node_gets_its_own_result_and_the_rest_are_judged_together():
    transport = ReplayTransport(
        answers({"node1": STDOUT, "node3": STDOUT}), unreachable={"node2": "connection refused by 127.0.1.2:22"}
    )
    report = run(playbook(planned("kernel.version")), NODES, transport, fanout=3)
    assert rows(report.results) == [
        ("kernel.version", ("node2",), Status.UNREACHABLE, "unreachable: connection refused by 127.0.1.2:22"),
        ("kernel.version", ("node1", "node3"), Status.PASS, "kernel 5.15.0-112-generic (all 2 nodes agree)"),
    ]
    assert report.results[1].evidence == (evidence("node1"), evidence("node3"))
    assert {n: report.node_status(n) for n in NAMES} == {
        "node1": Status.PASS,
        "node2": Status.UNREACHABLE,
        "node3": Status.PASS,
    }
    assert report.exit_code == 3


def test_timeouts_and_bad_exits_stay_out_of_the_vote():
    table = answers({"node1": STDOUT})
    table[("node2", "versions")] = Capture(
        "node2", "versions", VERSIONS.argv, Outcome.TIMEOUT, None, "", "", 20.0, "no answer within 20 s"
    )
    table[("node3", "versions")] = exited("node3", VERSIONS, "", 126, "sh: permission denied")
    report = run(playbook(planned("kernel.version")), NODES, ReplayTransport(table), fanout=3)
    assert [(r.nodes, r.verdict.status) for r in report.results] == [
        (("node2",), Status.TIMEOUT),
        (("node3",), Status.ERROR),
        (("node1",), Status.PASS),
    ]
    assert report.results[0].verdict.message.endswith(" timed out: no answer within 20 s")
    assert report.results[1].verdict.message.startswith("versions probe exited 126: ")
    assert report.results[2].verdict.message == (
        "kernel 5.15.0-112-generic (the only node judged; nothing to compare with)"
    )


def test_drift_splits_the_nodes_into_groups():
    outputs = {"node1": STDOUT, "node2": STDOUT, "node3": versions_out(kernel="5.15.0-113-generic\n")}
    report = run(playbook(planned("kernel.version")), NODES, ReplayTransport(answers(outputs)), fanout=3)
    assert rows(report.results) == [
        ("kernel.version", ("node1", "node2"), Status.PASS, "kernel 5.15.0-112-generic (majority: 2 of 3 nodes)"),
        (
            "kernel.version",
            ("node3",),
            Status.FAIL,
            "kernel 5.15.0-113-generic on node3, expected 5.15.0-112-generic (2 nodes)",
        ),
    ]
    assert (report.status, report.exit_code) == (Status.FAIL, 2)


def test_node_and_fleet_checks_share_a_probe_that_runs_once_per_node():
    table = answers(dict.fromkeys(NAMES, STDOUT))
    table.update(answers(dict.fromkeys(NAMES, HEALTHY_IB), probe=IBSTAT))
    transport = ReplayTransport(table)
    book = playbook(planned("ib.ports", expected_ports=8), planned("kernel.version"), planned("os.release"))
    report = run(book, NODES, transport, fanout=3)
    assert sorted(transport.ran) == sorted((n, p) for n in NAMES for p in ("ibstat", "versions"))
    assert [r.check for r in report.results_for("node2")] == ["ib.ports"] * 8 + ["kernel.version", "os.release"]
    assert rows(report.results[-2:]) == [
        ("kernel.version", NAMES, Status.PASS, "kernel 5.15.0-112-generic (all 3 nodes agree)"),
        ("os.release", NAMES, Status.PASS, "OS Ubuntu 22.04.4 LTS (all 3 nodes agree)"),
    ]


# -- a judge that fails or forgets ------------------------------------------------------------------------


class _NoParams(BaseModel):
    pass


def _fleet_check(judge) -> PlannedCheck:
    return PlannedCheck(CheckSpec("t.fleet", judge, [VERSIONS], _NoParams, scope="fleet"), _NoParams(), (VERSIONS,))


def test_a_judge_that_raises_is_an_error_for_the_ready_nodes():
    def crash(by_node, params) -> Iterator:
        raise KeyError("boom")
        yield

    transport = ReplayTransport(answers({"node1": STDOUT, "node3": STDOUT}), unreachable={"node2": "refused"})
    report = run(playbook(_fleet_check(crash)), NODES, transport, fanout=3)
    assert rows(report.results) == [
        ("t.fleet", ("node2",), Status.UNREACHABLE, "unreachable: refused"),
        ("t.fleet", ("node1", "node3"), Status.ERROR, "internal error in t.fleet: KeyError: 'boom'"),
    ]
    assert "Traceback" in report.results[1].verdict.excerpt
    assert report.results[1].evidence == (evidence("node1"), evidence("node3"))


def test_a_judge_that_forgets_a_node_is_an_error_for_that_node():
    def forgetful(by_node, params) -> Iterator:
        yield ("node1",), Verdict(Status.PASS, "fine")
        yield ("node2", "node9"), Verdict(Status.WARN, "meh")  # node9 is not in the run

    transport = ReplayTransport(answers(dict.fromkeys(NAMES, STDOUT)))
    report = run(playbook(_fleet_check(forgetful)), NODES, transport, fanout=3)
    assert rows(report.results) == [
        ("t.fleet", ("node1",), Status.PASS, "fine"),
        ("t.fleet", ("node2",), Status.WARN, "meh"),
        ("t.fleet", ("node3",), Status.ERROR, "t.fleet produced no verdict for these nodes"),
    ]
    assert report.results[2].evidence == (evidence("node3"),)
    assert report.node_status("node3") is Status.ERROR


def test_a_judge_that_yields_nothing_leaves_no_node_silent():
    def silent(by_node, params) -> Iterator:
        return iter(())

    report = run(
        playbook(_fleet_check(silent)), NODES, ReplayTransport(answers(dict.fromkeys(NAMES, STDOUT))), fanout=3
    )
    assert rows(report.results) == [("t.fleet", NAMES, Status.ERROR, "t.fleet produced no verdict for these nodes")]
    assert {report.node_status(n) for n in NAMES} == {Status.ERROR}


# -- the JSON report ------------------------------------------------------------------------------------------


def test_json_lists_a_group_result_under_each_node_and_loads_merge_it_back():
    transport = ReplayTransport(answers(dict.fromkeys(NAMES, STDOUT)))
    report = run(playbook(planned("kernel.version", expect="5.15.0-112-generic")), NODES, transport, fanout=3)
    text = report_json.dumps(report)
    d = json.loads(text)
    for node in d["nodes"]:
        [listed] = node["results"]
        assert {k: listed[k] for k in ("check", "status", "message", "group", "group_size")} == {
            "check": "kernel.version",
            "status": "pass",
            "message": "kernel 5.15.0-112-generic (pinned; 3 nodes)",
            "group": "node[1-3]",
            "group_size": 3,
        }
        assert listed["evidence"] == [
            {
                "node": node["node"],
                "probe": "versions",
                "argv": d["argvs"].index(list(VERSIONS.argv)),  # the command line once, in the table
                "exit_code": 0,
                "capture": f"captures/{node['node']}/versions.txt",
            }
        ]
    loaded = report_json.loads(text)
    assert loaded.results == report.results
    [merged] = loaded.results
    assert merged == CheckResult("kernel.version", NAMES, report.results[0].verdict, tuple(evidence(n) for n in NAMES))
    assert {n: loaded.node_status(n) for n in NAMES} == dict.fromkeys(NAMES, Status.PASS)


def test_json_round_trips_groups_of_a_split_run():
    outputs = {"node1": STDOUT, "node2": versions_out(kernel="5.15.0-113-generic\n"), "node3": STDOUT}
    report = run(playbook(planned("kernel.version")), NODES, ReplayTransport(answers(outputs)), fanout=3)
    d = json.loads(report_json.dumps(report))
    assert [(n["node"], [r["group"] for r in n["results"]]) for n in d["nodes"]] == [
        ("node1", ["node[1,3]"]),
        ("node2", ["node2"]),
        ("node3", ["node[1,3]"]),
    ]
    loaded = report_json.loads(report_json.dumps(report))
    assert loaded.results == report.results
    assert [len(r.evidence) for r in loaded.results] == [2, 1]


def test_pin_or_drift_defaults_are_what_the_playbook_gets():
    assert planned("kernel.version").params == PinOrDrift(drift="fail")
