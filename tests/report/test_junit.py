"""JUnit XML report: one testcase per (node, check), every status mapped, never an unjudged pass."""

from __future__ import annotations

import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from datetime import datetime, timedelta, timezone

from nodecheck.core.model import Capture, CheckResult, Evidence, Outcome, Status, Verdict
from nodecheck.report import Report
from nodecheck.report.junit import render

T0 = datetime(2026, 11, 29, 9, 0, 0, tzinfo=timezone.utc)
NODES = ("gpu001", "gpu002", "gpu003", "gpu004", "gpu005")


def ev(node, probe):
    return Evidence(node, probe, (probe,), 0, f"captures/{node}/{probe}.txt")


def res(check, nodes, status, message, subject="", excerpt="", probe=None):
    nodes = (nodes,) if isinstance(nodes, str) else nodes
    evidence = tuple(ev(n, probe) for n in nodes) if probe else ()
    return CheckResult(check, nodes, Verdict(status, message, subject, {}, {}, excerpt), evidence)


def cap(node, probe, seconds, stderr=""):
    return Capture(node, probe, (probe,), Outcome.EXITED, 0, "out\n", stderr, seconds)


RESULTS = (
    res("ib.ports", "gpu001", Status.PASS, "Active/LinkUp 400 Gb/s", "mlx5_0/1", probe="ibstat"),
    res("ib.ports", "gpu001", Status.WARN, "rate 200 Gb/s, warn below 400 Gb/s", "mlx5_1/1", probe="ibstat"),
    res("gpu.health", "gpu001", Status.PASS, "healthy", "GPU0", probe="nvml"),
    res("gpu.health", "gpu002", Status.PASS, "healthy", "GPU0", probe="nvml"),
    res(
        "gpu.health",
        "gpu002",
        Status.FAIL,
        'row remap failure\x00\x07 <pending> & "x"',
        "GPU3",
        excerpt="remap\x1b[31m failed\x0b\nline2",
        probe="nvml",
    ),
    res("gpu.health", "gpu002", Status.FAIL, "ECC uncorrectable 2, expected 0", "GPU5", probe="nvml"),
    res("ib.ports", "gpu002", Status.ERROR, "ibstat: unknown line 'CA type: ???'", probe="ibstat"),
    # drift: one result over a group of nodes, and the outlier on its own
    res(
        "kernel.version",
        ("gpu001", "gpu002"),
        Status.PASS,
        "kernel 5.15.0-112 (majority: 2 of 3 nodes)",
        probe="versions",
    ),
    res(
        "kernel.version",
        "gpu003",
        Status.FAIL,
        "kernel 5.15.0-113 on gpu003, expected 5.15.0-112 (2 nodes)",
        probe="versions",
    ),
    res(
        "ib.pairs",
        ("gpu001", "gpu003"),
        Status.FAIL,
        "gpu001<->gpu003: 180 Gb/s, expected >= 360 Gb/s",
        probe="ib_write_bw",
    ),
    res("ib.ports", "gpu003", Status.TIMEOUT, "ibstat timed out: no answer within 10 s"),
    res("gpu.health", "gpu003", Status.SKIPPED, "not run: the run deadline had passed"),
    *(
        res(c, "gpu004", Status.UNREACHABLE, "unreachable: connection refused by 10.0.0.4:22")
        for c in ("ib.ports", "gpu.health", "kernel.version")
    ),
)  # gpu005: no result at all
CAPTURES = (
    cap("gpu001", "ibstat", 0.25),
    cap("gpu001", "nvml", 1.5),
    cap("gpu001", "versions", 0.125),
    cap("gpu001", "ib_write_bw", 4.0),
    cap("gpu002", "nvml", 2.0, stderr="nvml: warning\n"),
    cap("gpu002", "ibstat", 0.5),
    cap("gpu002", "versions", 0.25),
    cap("gpu003", "versions", 0.5),
    cap("gpu003", "ib_write_bw", 4.5),
)


def report(complete=True, nodes=NODES, results=RESULTS, captures=CAPTURES, reason=""):
    return Report(
        "20261129T090000Z_default",
        "default",
        "playbooks/default.yml",
        "ab" * 32,
        "hosts.yml",
        T0,
        T0 + timedelta(seconds=12.5),
        120.0,
        complete,
        tuple((n, f"10.0.0.{i}") for i, n in enumerate(nodes, 1)),
        results,
        captures,
        "0.1.0",
        incomplete_reason=reason,
        excluded=("gpu009", "gpu010"),
    )


def parse(text):
    return ET.fromstring(text.encode())


def cases(root):
    return {(c.get("classname"), c.get("name")): c for c in root.iter("testcase")}


def outcome(case):
    kids = [k for k in case if k.tag != "system-out"]
    return (kids[0].tag, kids[0].get("type"), kids[0].get("message")) if kids else ("passed", None, None)


def test_one_testcase_per_node_and_check_with_every_status_mapped():
    root = parse(render(report()))
    got = {key: outcome(c)[:2] for key, c in cases(root).items()}
    assert got == {
        ("nodecheck.run", "complete"): ("passed", None),
        ("nodecheck.gpu001", "ib.ports"): ("passed", None),  # a WARN passes
        ("nodecheck.gpu001", "gpu.health"): ("passed", None),
        ("nodecheck.gpu001", "kernel.version"): ("passed", None),
        ("nodecheck.gpu001", "ib.pairs"): ("failure", "fail"),
        ("nodecheck.gpu002", "gpu.health"): ("failure", "fail"),
        ("nodecheck.gpu002", "ib.ports"): ("error", "error"),
        ("nodecheck.gpu002", "kernel.version"): ("passed", None),
        ("nodecheck.gpu003", "kernel.version"): ("failure", "fail"),
        ("nodecheck.gpu003", "ib.pairs"): ("failure", "fail"),
        ("nodecheck.gpu003", "ib.ports"): ("error", "timeout"),
        ("nodecheck.gpu003", "gpu.health"): ("skipped", None),
        ("nodecheck.gpu004", "ib.ports"): ("error", "unreachable"),
        ("nodecheck.gpu004", "gpu.health"): ("error", "unreachable"),
        ("nodecheck.gpu004", "kernel.version"): ("error", "unreachable"),
        ("nodecheck.gpu005", "results"): ("error", "error"),  # nothing judged is not a pass
    }
    assert len(list(root.iter("testcase"))) == 16


def test_counts_and_attributes_of_suites():
    root = parse(render(report()))
    assert root.tag == "testsuites"
    assert dict(root.attrib) == {
        "name": "nodecheck default",
        "tests": "16",
        "failures": "4",
        "errors": "6",
        "time": "12.500",
    }
    suites = root.findall("testsuite")
    assert [
        (s.get("name"), s.get("tests"), s.get("failures"), s.get("errors"), s.get("skipped"), s.get("time"))
        for s in suites
    ] == [
        ("nodecheck.run", "1", "0", "0", "0", "12.500"),
        ("gpu001", "4", "1", "0", "0", "5.875"),
        ("gpu002", "3", "1", "1", "0", "2.750"),
        ("gpu003", "4", "2", "1", "1", "5.000"),
        ("gpu004", "3", "0", "3", "0", "0.000"),
        ("gpu005", "1", "0", "1", "0", "0.000"),
    ]
    gpu002 = suites[2]
    assert {k: gpu002.get(k) for k in ("hostname", "timestamp", "id", "package")} == {
        "hostname": "gpu002",
        "timestamp": "2026-11-29T09:00:00",
        "id": "2",
        "package": "nodecheck",
    }
    assert suites[0].get("hostname") is None  # the run is not a host


def test_testcase_time_is_its_captures_durations():
    got = {key: c.get("time") for key, c in cases(parse(render(report()))).items()}
    assert got[("nodecheck.gpu001", "ib.ports")] == "0.250"
    assert got[("nodecheck.gpu001", "ib.pairs")] == "4.000"  # this node's side of the pair only
    assert got[("nodecheck.gpu003", "ib.pairs")] == "4.500"
    assert got[("nodecheck.gpu003", "ib.ports")] == "0.000"  # no evidence: no time
    assert got[("nodecheck.gpu004", "gpu.health")] == "0.000"


def test_several_results_of_one_check_are_one_testcase_listing_them_all():
    case = cases(parse(render(report())))[("nodecheck.gpu002", "gpu.health")]
    failure = case.find("failure")
    assert failure.get("message") == 'GPU3: row remap failure <pending> & "x" (and 1 more)'
    assert failure.text == (
        "pass: GPU0: healthy\n"
        'fail: GPU3: row remap failure <pending> & "x"\n'
        "  | remap[31m failed\n"
        "  | line2\n"
        "fail: GPU5: ECC uncorrectable 2, expected 0"
    )
    assert case.find("system-out").text == (
        "evidence: captures/gpu002/nvml.txt\nevidence: captures/gpu002/nvml.stderr.txt"
    )


def test_a_cross_node_result_is_in_each_of_its_nodes_testcases():
    by_key = cases(parse(render(report())))
    for node in ("gpu001", "gpu003"):
        f = by_key[(f"nodecheck.{node}", "ib.pairs")].find("failure")
        assert f.get("message") == "gpu001<->gpu003: 180 Gb/s, expected >= 360 Gb/s"
        assert f.text.endswith("\n  group: gpu[001,003] (2 nodes)")
    for node in ("gpu001", "gpu002"):
        case = by_key[(f"nodecheck.{node}", "kernel.version")]
        assert case.find("system-out").text == (
            "pass: kernel 5.15.0-112 (majority: 2 of 3 nodes)\n"
            "  group: gpu[001-002] (2 nodes)\n"
            f"evidence: captures/{node}/versions.txt"
        )


def test_a_warning_passes_with_its_text_in_system_out():
    case = cases(parse(render(report())))[("nodecheck.gpu001", "ib.ports")]
    assert [k.tag for k in case] == ["system-out"]
    assert case.find("system-out").text == (
        "pass: mlx5_0/1: Active/LinkUp 400 Gb/s\n"
        "warn: mlx5_1/1: rate 200 Gb/s, warn below 400 Gb/s\n"
        "evidence: captures/gpu001/ibstat.txt"
    )


def test_skipped_and_unreachable_carry_their_messages():
    by_key = cases(parse(render(report())))
    skipped = by_key[("nodecheck.gpu003", "gpu.health")].find("skipped")
    assert (skipped.get("message"), skipped.get("type")) == ("not run: the run deadline had passed", None)
    err = by_key[("nodecheck.gpu004", "kernel.version")].find("error")
    assert err.get("message") == "unreachable: connection refused by 10.0.0.4:22"
    assert err.text == "unreachable: unreachable: connection refused by 10.0.0.4:22"
    assert (
        by_key[("nodecheck.gpu005", "results")].find("error").get("message")
        == "no check produced a result for this node"
    )


def test_characters_xml_forbids_are_stripped_and_the_rest_escaped():
    text = render(report())
    assert "\x00" not in text and "\x07" not in text and "\x1b" not in text and "\x0b" not in text
    assert 'message="GPU3: row remap failure &lt;pending&gt; &amp; &quot;x&quot; (and 1 more)"' in text
    parse(text)  # well-formed (expat rejects any control character)


def test_run_properties():
    root = parse(render(report()))
    props = {p.get("name"): p.get("value") for p in root.find("testsuite").find("properties")}
    assert props == {
        "run_id": "20261129T090000Z_default",
        "playbook": "default",
        "playbook_sha256": "ab" * 32,
        "complete": "true",
        "incomplete_reason": "",
        "nodecheck_version": "0.1.0",
        "status": "fail",
        "exit_code": "2",
        "excluded_nodes": "gpu[009-010]",
    }


def test_an_incomplete_run_is_an_error_testcase_and_a_property():
    root = parse(render(report(complete=False, reason="stopped by a signal")))
    run = root.find("testsuite")
    props = {p.get("name"): p.get("value") for p in run.find("properties")}
    assert (props["complete"], props["incomplete_reason"]) == ("false", "stopped by a signal")
    error = cases(root)[("nodecheck.run", "complete")].find("error")
    assert (error.get("type"), error.get("message")) == ("error", "run incomplete: stopped by a signal")
    assert error.text == ("stopped by a signal (deadline 120 s): probes were cut or skipped, the results are partial")
    assert (run.get("errors"), root.get("errors"), root.get("tests")) == ("1", "7", "16")


def test_exact_document_for_a_small_report():
    small = report(
        nodes=("n1",),
        results=(res("gpu.health", "n1", Status.PASS, "healthy", "GPU0", probe="nvml"),),
        captures=(cap("n1", "nvml", 1.25),),
    )
    assert (
        render(small)
        == """\
<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="nodecheck default" tests="2" failures="0" errors="0" time="12.500">
  <testsuite name="nodecheck.run" tests="1" failures="0" errors="0" skipped="0" time="12.500" \
timestamp="2026-11-29T09:00:00" id="0" package="nodecheck">
    <properties>
      <property name="run_id" value="20261129T090000Z_default" />
      <property name="playbook" value="default" />
      <property name="playbook_sha256" value="%s" />
      <property name="complete" value="true" />
      <property name="incomplete_reason" value="" />
      <property name="nodecheck_version" value="0.1.0" />
      <property name="status" value="pass" />
      <property name="exit_code" value="0" />
      <property name="excluded_nodes" value="gpu[009-010]" />
    </properties>
    <testcase classname="nodecheck.run" name="complete" time="12.500" />
  </testsuite>
  <testsuite name="n1" tests="1" failures="0" errors="0" skipped="0" time="1.250" \
timestamp="2026-11-29T09:00:00" id="1" package="nodecheck" hostname="n1">
    <testcase classname="nodecheck.n1" name="gpu.health" time="1.250">
      <system-out>pass: GPU0: healthy
evidence: captures/n1/nvml.txt</system-out>
    </testcase>
  </testsuite>
</testsuites>
"""
        % ("ab" * 32)
    )


# The shape of junit-10.xsd (jenkinsci/xunit-plugin), which CI readers accept: element -> (allowed
# children, required attributes, allowed attributes). No validator library is a dependency here.
SCHEMA = {
    "testsuites": ({"testsuite"}, set(), {"name", "time", "tests", "failures", "errors"}),
    "testsuite": (
        {"testsuite", "properties", "testcase", "system-out", "system-err"},
        {"name", "tests", "failures", "errors"},
        {
            "name",
            "tests",
            "failures",
            "errors",
            "group",
            "time",
            "skipped",
            "timestamp",
            "hostname",
            "id",
            "package",
            "file",
            "log",
            "url",
        },
    ),
    "properties": ({"property"}, set(), set()),
    "property": (set(), {"name", "value"}, {"name", "value"}),
    "testcase": (
        {"skipped", "error", "failure", "system-out", "system-err"},
        {"name"},
        {"name", "time", "classname", "group"},
    ),
    "failure": (set(), set(), {"type", "message"}),
    "error": (set(), set(), {"type", "message"}),
    "skipped": (set(), set(), {"type", "message"}),
    "system-out": (set(), set(), set()),
    "system-err": (set(), set(), set()),
}
SUREFIRE_TIME = r"(([0-9]{0,3},)*[0-9]{3}|[0-9]{0,3})*(\.[0-9]*)?"


def schema_errors(element, path=""):
    children, required, allowed = SCHEMA[element.tag]
    where = f"{path}/{element.tag}"
    errors = [f"{where}: child {k.tag}" for k in element if k.tag not in children]
    errors += [f"{where}: missing @{a}" for a in sorted(required - set(element.attrib))]
    errors += [f"{where}: unknown @{a}" for a in sorted(set(element.attrib) - allowed)]
    timed = element.tag in ("testsuites", "testsuite") and "time" in element.attrib
    if timed and not re.fullmatch(SUREFIRE_TIME, element.get("time")):
        errors.append(f"{where}: time {element.get('time')!r}")
    for k in element:
        if k.tag in SCHEMA:
            errors += schema_errors(k, where)
    return errors


def test_the_document_has_the_junit_schema_shape():
    for r in (report(), report(complete=False)):
        root = parse(render(r))
        assert root.tag == "testsuites" and schema_errors(root) == []
        for case in root.iter("testcase"):  # at most one outcome each, as readers expect
            assert len([k for k in case if k.tag in ("failure", "error", "skipped")]) <= 1
    bad = ET.fromstring('<testsuites skipped="1"><testsuite name="x" tests="1"><bogus/></testsuite></testsuites>')
    assert schema_errors(bad) == [
        "/testsuites: unknown @skipped",
        "/testsuites/testsuite: child bogus",
        "/testsuites/testsuite: missing @errors",
        "/testsuites/testsuite: missing @failures",
    ]


def test_run_local_format_junit_end_to_end(tmp_path):
    book = tmp_path / "kernel-pin.yml"
    book.write_text('version: 1\ndeadline_s: 60\nchecks:\n  kernel.version: {expect: "0.0.0-not-this-kernel"}\n')
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "nodecheck",
            "run",
            "--local",
            "--playbook",
            str(book),
            "--format",
            "junit",
            "--output-dir",
            str(tmp_path / "reports"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 2, out.stderr
    root = parse(out.stdout)  # stdout is the XML document alone
    assert (root.get("name"), root.get("tests"), root.get("failures"), root.get("errors")) == (
        "nodecheck kernel-pin",
        "2",
        "1",
        "0",
    )
    [node_suite] = root.findall("testsuite")[1:]
    [case] = node_suite.findall("testcase")
    assert (case.get("classname"), case.get("name")) == (f"nodecheck.{node_suite.get('name')}", "kernel.version")
    failure = case.find("failure")
    assert failure.get("type") == "fail" and "expected 0.0.0-not-this-kernel" in failure.get("message")
    assert case.find("system-out").text == f"evidence: captures/{node_suite.get('name')}/versions.txt"
    [report_dir] = (tmp_path / "reports").iterdir()
    assert out.stderr.strip().endswith(f"report: {report_dir}")
    assert {p.name for p in report_dir.iterdir()} >= {"report.json", "summary.txt", "captures"}
