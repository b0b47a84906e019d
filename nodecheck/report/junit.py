"""The report as JUnit XML, for CI systems (Jenkins, GitLab, GitHub test reporters).

One testsuite per node, one testcase per (node, check): a check with several results on a node
(one per GPU, per port) is one testcase whose failure/error text lists them all, and a cross-node
result (drift over a group) appears in each of its nodes' testcases. A first testsuite,
"nodecheck.run", carries the run's properties and a "complete" testcase that errors when the run
was cut short, so a partial run never reads as a green build. Elements and attributes stay within
the shape of the widely used junit-10.xsd (Jenkins xUnit plugin): `skipped` is counted per
testsuite only, as that schema has no such attribute on testsuites.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import defaultdict
from datetime import datetime, timezone

from nodecheck.core.hostlist import fold
from nodecheck.core.model import Capture, CheckResult, Evidence, Status, worst
from nodecheck.report import Report, capture_relpath

RUN_SUITE = "nodecheck.run"
NO_RESULT_CASE = "results"  # a node no check reported on: an error, never a pass

# Status of a testcase (the worst of its results) -> the element that says so; PASS and WARN have none.
_ELEMENT = {
    Status.FAIL: "failure",
    Status.ERROR: "error",
    Status.TIMEOUT: "error",
    Status.UNREACHABLE: "error",
    Status.SKIPPED: "skipped",
}
_COUNTER = {"failure": "failures", "error": "errors", "skipped": "skipped"}

# Characters XML 1.0 cannot carry even escaped (NUL, most C0 controls, lone surrogates, U+FFFE/F);
# tool output relayed in messages and excerpts can contain them.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def render(report: Report) -> str:
    from nodecheck.report.json import redacted

    report = redacted(report)  # CI dashboards keep these files: no secret in them
    captures = {(c.node, c.probe): c for c in report.captures}
    node_seconds: dict[str, float] = defaultdict(float)  # summed once, not once per node
    for c in captures.values():
        node_seconds[c.node] += c.duration_s
    folds: dict[int, str] = {}  # a drift result over 1000 nodes is folded once
    evidence = _Evidence()  # ...and its evidence indexed by node once (not searched once per node)
    root = ET.Element("testsuites", name=_clean(f"nodecheck {report.playbook}"))
    suites = [_run_suite(report)]
    suites += [
        _node_suite(report, node, i, captures, folds, evidence, node_seconds[node])
        for i, node in enumerate(report.node_names, 1)
    ]
    for key in ("tests", "failures", "errors"):
        root.set(key, str(sum(int(s.attrib[key]) for s in suites)))
    root.set("time", _wall(report))
    root.extend(suites)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _run_suite(report: Report) -> ET.Element:
    suite = _suite(RUN_SUITE, report, 0)
    props = ET.SubElement(suite, "properties")
    for name, value in _properties(report):
        ET.SubElement(props, "property", name=name, value=_clean(value))
    suite.set("time", _wall(report))
    case = ET.SubElement(suite, "testcase", classname=RUN_SUITE, name="complete", time=_wall(report))
    if not report.complete:
        why = report.incomplete_reason or "the run deadline was reached"
        _outcome(
            case,
            "error",
            f"run incomplete: {why}",
            "error",
            f"{why} (deadline {report.deadline_s:g} s): probes were cut or skipped, the results are partial",
        )
    _count(suite)
    return suite


def _properties(report: Report) -> list[tuple[str, str]]:
    props = [
        ("run_id", report.run_id),
        ("playbook", report.playbook),
        ("playbook_sha256", report.playbook_sha256),
        ("complete", str(report.complete).lower()),
        ("incomplete_reason", report.incomplete_reason),
        ("nodecheck_version", report.nodecheck_version),
        ("status", report.status.value),
        ("exit_code", str(report.exit_code)),
    ]
    if report.excluded:
        props.append(("excluded_nodes", fold(report.excluded)))
    return props


def _node_suite(
    report: Report,
    node: str,
    index: int,
    captures: dict[tuple[str, str], Capture],
    folds: dict[int, str],
    evidence: _Evidence,
    seconds: float,
) -> ET.Element:
    suite = _suite(node, report, index)
    suite.set("hostname", _clean(node))
    by_check: dict[str, list[CheckResult]] = defaultdict(list)
    for r in report.results_for(node):
        by_check[r.check].append(r)
    for check, results in by_check.items():
        _testcase(suite, node, check, results, captures, folds, evidence)
    if not by_check:
        case = ET.SubElement(suite, "testcase", classname=_classname(node), name=NO_RESULT_CASE, time=_seconds(0))
        _outcome(case, "error", "no check produced a result for this node", "error", "")
    suite.set("time", _seconds(seconds))
    _count(suite)
    return suite


def _testcase(
    suite: ET.Element,
    node: str,
    check: str,
    results: list[CheckResult],
    captures: dict[tuple[str, str], Capture],
    folds: dict[int, str],
    evidence: _Evidence,
) -> None:
    """Add one (node, check) testcase; its time is that of the captures its verdicts read."""
    mine = [e for r in results for e in evidence.of(r, node)]
    probes = list(dict.fromkeys(e.probe for e in mine))
    seconds = sum(captures[(node, p)].duration_s for p in probes if (node, p) in captures)
    case = ET.SubElement(suite, "testcase", classname=_classname(node), name=_clean(check), time=_seconds(seconds))
    status = worst(r.verdict.status for r in results)
    lines = [_line(r, folds) for r in results]
    element = _ELEMENT.get(status)
    if element is not None:
        first = next(r for r in results if r.verdict.status is status)
        others = sum(1 for r in results if not r.verdict.status.healthy) - 1
        message = _subject(first) + first.verdict.message + (f" (and {others} more)" if others else "")
        _outcome(case, element, message, status.value, "\n".join(lines))
    out = [] if element is not None else lines  # a pass (or warning) says what was seen here
    out += [f"evidence: {p}" for p in _evidence_paths(node, probes, mine, captures)]
    if out:
        ET.SubElement(case, "system-out").text = _clean("\n".join(out))


def _outcome(case: ET.Element, element: str, message: str, kind: str, text: str) -> None:
    attrs = {"message": _clean(message)} if element == "skipped" else {"message": _clean(message), "type": kind}
    node = ET.SubElement(case, element, attrs)
    if text:
        node.text = _clean(text)


def _line(r: CheckResult, folds: dict[int, str]) -> str:
    v = r.verdict
    text = f"{v.status.value}: {_subject(r)}{v.message}"
    if len(r.nodes) > 1:
        if id(r) not in folds:
            folds[id(r)] = fold(r.nodes)
        text += f"\n  group: {folds[id(r)]} ({len(r.nodes)} nodes)"
    if v.excerpt and not v.status.healthy:
        text += "\n" + "\n".join("  | " + ln for ln in v.excerpt.rstrip("\n").split("\n"))
    return text


def _subject(r: CheckResult) -> str:
    return f"{r.verdict.subject}: " if r.verdict.subject else ""


class _Evidence:
    """Each result's evidence by node, indexed the first time a node asks: a drift result over N
    nodes carries N entries, and searching them once per node made the XML quadratic (154 s at
    16,000 nodes)."""

    def __init__(self) -> None:
        self._by_node: dict[int, dict[str, list[Evidence]]] = {}

    def of(self, r: CheckResult, node: str) -> list[Evidence]:
        if id(r) not in self._by_node:
            index: dict[str, list[Evidence]] = defaultdict(list)
            for e in r.evidence:
                index[e.node].append(e)
            self._by_node[id(r)] = index
        return self._by_node[id(r)].get(node, [])


def _evidence_paths(
    node: str, probes: list[str], mine: list[Evidence], captures: dict[tuple[str, str], Capture]
) -> list[str]:
    """Paths relative to the report directory: the evidence's own, plus stderr where there was some."""
    paths = [e.capture_path for e in mine if e.capture_path]
    for p in probes:
        c = captures.get((node, p))
        if c is not None and c.stderr:
            paths.append(capture_relpath(node, p, "stderr"))
    return list(dict.fromkeys(paths))


def _suite(name: str, report: Report, index: int) -> ET.Element:
    return ET.Element(
        "testsuite",
        name=_clean(name),
        tests="0",
        failures="0",
        errors="0",
        skipped="0",
        time="0",
        timestamp=_timestamp(report.started),
        id=str(index),
        package="nodecheck",
    )


def _count(suite: ET.Element) -> None:
    cases = suite.findall("testcase")
    suite.set("tests", str(len(cases)))
    for element, counter in _COUNTER.items():
        suite.set(counter, str(sum(1 for c in cases if c.find(element) is not None)))


def _classname(node: str) -> str:
    return _clean(f"nodecheck.{node}")


def _timestamp(t: datetime) -> str:
    """ISO 8601 in UTC without an offset, the form JUnit readers (Ant's schema) accept."""
    if t.tzinfo is not None:
        t = t.astimezone(timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S")


def _wall(report: Report) -> str:
    return _seconds((report.finished - report.started).total_seconds())


def _seconds(s: float) -> str:
    return f"{max(s, 0.0):.3f}"


def _clean(text: str) -> str:
    return _NOT_XML.sub("", text)
