"""Report ⇄ JSON (report_version 3; 2 still read). loads(dumps(r)) gives back r's results (a cross-node group in
NodeSet order), so sweeps can diff old reports."""

from __future__ import annotations

import heapq
import json
import weakref
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from itertools import pairwise

from ClusterShell.NodeSet import NodeSet

from nodecheck.core.hostlist import fold
from nodecheck.core.model import Capture, CheckResult, Evidence, Outcome, Status, Verdict
from nodecheck.core.redact import REDACTED, is_secret_name, redact_argv, redact_text
from nodecheck.report import REPORT_VERSION, Report, capture_relpath

READS = (2, REPORT_VERSION)  # the versions from_dict reads: a sweep's history holds older reports


def to_dict(report: Report) -> dict:
    report = redacted(report)  # whatever a check or a probe let through
    shared = _Shared()
    nodes = [
        {
            "node": name,
            "address": address,
            "status": report.node_status(name).value,
            "healthy": report.node_status(name).healthy,
            "results": [_result(r, name, shared) for r in report.results_for(name)],
        }
        for name, address in report.nodes
    ]
    captures = [_capture(c, shared) for c in report.captures]
    return {
        "report_version": REPORT_VERSION,
        "run_id": report.run_id,
        "status": report.status.value,
        "exit_code": report.exit_code,
        "complete": report.complete,
        "incomplete_reason": report.incomplete_reason,
        "playbook": report.playbook,
        "playbook_path": report.playbook_path,
        "playbook_sha256": report.playbook_sha256,  # covers the pins files below too
        "playbook_includes": [{"path": path, "sha256": sha} for path, sha in report.playbook_includes],
        "inventory": report.inventory,
        "started": _ts(report.started),
        "finished": _ts(report.finished),
        "deadline_s": report.deadline_s,
        "nodecheck_version": report.nodecheck_version,
        "summary": report.summary(),
        "excluded_nodes": list(report.excluded),
        # each distinct command line once (a probe's script is kilobytes, and the same on every node):
        # evidence and captures name theirs by its index here ("argv": 3)
        "argvs": shared.argvs,
        "nodes": nodes,
        "captures": captures,
        "extras": report.extras,
    }


def active_extras(data, incomplete: Sequence[str]) -> dict:
    """An active check's entry in the report's "extras": its typed report data
    (nodecheck.checks.context.ReportData) as JSON, with the planned work it left undone under
    "incomplete" where that data puts it; {} for a check that reported nothing."""
    if data is not None:
        return data.as_json(list(incomplete))
    return {"incomplete": list(incomplete)} if incomplete else {}


def dumps(report: Report) -> str:
    """One line: indentation was 40 % of a fleet's report and 5x its render time (`jq .` shows it)."""
    return json.dumps(to_dict(report), sort_keys=False, default=str) + "\n"


def _ts(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class _Shared:
    """What a cross-node result's entries share, computed once per result rather than once per
    node of its group (a drift verdict over 1000 nodes is listed 1000 times)."""

    def __init__(self) -> None:
        self._fold: dict[int, str] = {}
        self._evidence: dict[int, dict[str, list]] = {}
        self.argvs: list[list[str]] = []  # the report's table of command lines
        self._argv_ids: dict[tuple[str, ...], int] = {}

    def argv(self, argv: tuple[str, ...]) -> int:
        """The index of `argv` in the report's table of command lines."""
        if argv not in self._argv_ids:
            self._argv_ids[argv] = len(self.argvs)
            self.argvs.append(list(argv))
        return self._argv_ids[argv]

    def fold(self, r: CheckResult) -> str:
        if id(r) not in self._fold:
            self._fold[id(r)] = fold(r.nodes)
        return self._fold[id(r)]

    def evidence(self, r: CheckResult, node: str) -> list:
        if id(r) not in self._evidence:
            by_node: dict[str, list] = {}
            for e in r.evidence:
                by_node.setdefault(e.node, []).append(
                    {
                        "node": e.node,
                        "probe": e.probe,
                        "argv": self.argv(e.argv),
                        "exit_code": e.exit_code,
                        "capture": e.capture_path,
                    }
                )
            self._evidence[id(r)] = by_node
        return self._evidence[id(r)].get(node, [])


def _result(r: CheckResult, node: str, shared: _Shared) -> dict:
    """One result as listed under `node`. A cross-node result (drift) is listed under each node of
    its group, with the group folded ("gpu[001-510]") and only this node's evidence, so a report
    on thousands of nodes stays linear in size."""
    v = r.verdict
    return {
        "check": r.check,
        "status": v.status.value,
        "subject": v.subject,
        "message": v.message,
        "observed": dict(v.observed),
        "expected": dict(v.expected),
        "excerpt": v.excerpt,
        "group": shared.fold(r),
        "group_size": len(r.nodes),
        "evidence": shared.evidence(r, node),
    }


def _capture(c: Capture, shared: _Shared) -> dict:
    return {
        "node": c.node,
        "probe": c.probe,
        "argv": shared.argv(c.argv),
        "outcome": c.outcome.value,
        "exit_code": c.exit_code,
        "duration_s": round(c.duration_s, 4),
        "detail": c.detail,
        "stdout": capture_relpath(c.node, c.probe),
        "stderr": capture_relpath(c.node, c.probe, "stderr") if c.stderr else None,
    }


def from_dict(d: dict, captures_text: dict[tuple[str, str], tuple[str, str]] | None = None) -> Report:
    """Rebuild a Report; capture texts are files beside report.json, passed in when wanted."""
    version = d.get("report_version")
    if version not in READS:
        raise ValueError(f"report_version {version!r}, this nodecheck reads {', '.join(map(str, READS))}")
    argv = _argv_table(d)
    merged: dict[tuple[str, int], tuple[dict, list]] = {}
    chains: list[list[tuple[str, int]]] = []  # each node's results, in its order
    for node in d["nodes"]:
        seen: dict[str, int] = {}
        chain = []
        for r in node["results"]:
            # a cross-node result is listed under each node of its group, with that node's evidence;
            # the same verdict twice on one node is two results, so it is counted per node
            key = json.dumps({k: v for k, v in r.items() if k != "evidence"}, sort_keys=True)
            nth = seen[key] = seen.get(key, -1) + 1
            merged.setdefault((key, nth), (r, []))[1].extend(r["evidence"])
            chain.append((key, nth))
        chains.append(chain)
    results = [_load_result(*merged[ident], argv) for ident in _merge_orders(list(merged), chains)]
    texts = captures_text or {}
    caps = tuple(
        Capture(
            c["node"],
            c["probe"],
            argv(c["argv"]),
            Outcome(c["outcome"]),
            c["exit_code"],
            *texts.get((c["node"], c["probe"]), ("", "")),
            c["duration_s"],
            c["detail"],
        )
        for c in d.get("captures", [])
    )
    return Report(
        run_id=d["run_id"],
        playbook=d["playbook"],
        playbook_path=d["playbook_path"],
        playbook_sha256=d["playbook_sha256"],
        inventory=d["inventory"],
        started=_parse_ts(d["started"]),
        finished=_parse_ts(d["finished"]),
        deadline_s=d["deadline_s"],
        complete=d["complete"],
        nodes=tuple((n["node"], n["address"]) for n in d["nodes"]),
        results=tuple(results),
        captures=caps,
        nodecheck_version=d.get("nodecheck_version", ""),
        incomplete_reason=d.get("incomplete_reason", ""),
        excluded=tuple(d.get("excluded_nodes", ())),
        playbook_includes=tuple((i["path"], i["sha256"]) for i in d.get("playbook_includes", ())),
        extras=d.get("extras", {}),
    )


def _merge_orders(first_seen: list[tuple[str, int]], chains: list[list[tuple[str, int]]]) -> list[tuple[str, int]]:
    """One order of all results that keeps every node's own order (each chain's): the order the
    run had them in, as far as the report says it, so every node lists its results as the run did
    (report.html rebuilt from report.json is the page the run wrote). Ties go to the first seen;
    chains that contradict each other (a hand-edited report) end the merge in first-seen order."""
    rank = {ident: i for i, ident in enumerate(first_seen)}
    after: dict[tuple[str, int], set[tuple[str, int]]] = {ident: set() for ident in first_seen}
    waits = dict.fromkeys(first_seen, 0)
    for chain in chains:
        for a, b in pairwise(chain):
            if b not in after[a]:
                after[a].add(b)
                waits[b] += 1
    ready = [rank[i] for i, n in waits.items() if n == 0]
    heapq.heapify(ready)
    order: list[tuple[str, int]] = []
    while ready:
        ident = first_seen[heapq.heappop(ready)]
        order.append(ident)
        for b in after[ident]:
            waits[b] -= 1
            if waits[b] == 0:
                heapq.heappush(ready, rank[b])
    if len(order) < len(first_seen):  # a cycle: the rest as first seen
        placed = set(order)
        order.extend(i for i in first_seen if i not in placed)
    return order


def loads(text: str) -> Report:
    return from_dict(json.loads(text))


def _argv_table(d: dict):
    """How an entry's "argv" reads: an index into the report's "argvs" (report_version 3), or the
    command line itself (2: the sweeps' history keeps reports of earlier versions)."""
    table = d.get("argvs", [])

    def argv(ref) -> tuple[str, ...]:
        if isinstance(ref, int) and not isinstance(ref, bool) and 0 <= ref < len(table):
            return tuple(table[ref])
        if isinstance(ref, list):
            return tuple(ref)
        raise ValueError(f"argv {ref!r} names no command line of the report")

    return argv


def _load_result(r: dict, evidence: list, argv) -> CheckResult:
    verdict = Verdict(Status(r["status"]), r["message"], r["subject"], r["observed"], r["expected"], r["excerpt"])
    return CheckResult(
        r["check"],
        tuple(NodeSet(r["group"])),
        verdict,
        tuple(Evidence(e["node"], e["probe"], argv(e["argv"]), e["exit_code"], e["capture"]) for e in evidence),
    )


def _parse_ts(s: str) -> datetime:
    return datetime.strptime(s.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z")


# ---------------------------------------------------------------- secrets: the last line of defence

# reports this module made: redacted() of one of them is itself, not a second scan of every message
_MADE: weakref.WeakValueDictionary[int, Report] = weakref.WeakValueDictionary()


def redacted(report: Report) -> Report:
    """The report as it may be written or printed: secrets masked (nodecheck.core.redact) in every argv,
    message, excerpt, observed/expected value and extras entry (capture texts: store()). Probes and
    checks keep secrets out at the source (a job's environment travels on stdin, never in an argv);
    this is for what they missed. The runner hands on only reports made here, so every consumer (the
    renderers, the gate's drain reasons, the history) sees the same masked text; the renderers call
    it again as a last line of defence, which costs nothing for a report made here."""
    if _MADE.get(id(report)) is report:
        return report
    out = _redacted(report)
    _MADE[id(out)] = out
    return out


def _redacted(report: Report) -> Report:
    # a probe's argv (its whole script) is the same on every node and in every result's evidence,
    # and most messages repeat across nodes: each distinct text is scanned once, and the masked
    # argv is one shared tuple (16,000 nodes x 25 probes scanned one by one took most of a run)
    texts = _Memo(redact_text)
    argvs = _Memo(redact_argv)
    return replace(
        report,
        results=tuple(_redact_result(r, texts, argvs) for r in report.results),
        # the capture texts are store()'s (no renderer prints them): not scanned twice
        captures=tuple(replace(c, argv=argvs(c.argv), detail=texts(c.detail)) for c in report.captures),
        incomplete_reason=redact_text(report.incomplete_reason),
        extras=scrub(report.extras),
    )


class _Memo:
    """A pure function of one hashable argument, each distinct argument computed once."""

    def __init__(self, fn: Callable) -> None:
        self._fn = fn
        self._seen: dict = {}

    def __call__(self, arg):
        if arg not in self._seen:
            self._seen[arg] = self._fn(arg)
        return self._seen[arg]


def _redact_result(r: CheckResult, texts: _Memo, argvs: _Memo) -> CheckResult:
    v = r.verdict
    verdict = replace(
        v,
        message=texts(v.message),
        subject=texts(v.subject),
        excerpt=texts(v.excerpt),
        observed=scrub(dict(v.observed)),
        expected=scrub(dict(v.expected)),
    )
    return replace(r, verdict=verdict, evidence=tuple(replace(e, argv=argvs(e.argv)) for e in r.evidence))


def scrub(value):
    """Plain JSON data with secrets masked: a text value under a secret-looking key (an environment:
    {"HF_TOKEN": ...}) is REDACTED, any other text has its NAME=value, --token and URL credentials
    masked (redact_text); numbers, booleans and keys are kept."""
    if isinstance(value, dict):
        return {
            k: (REDACTED if isinstance(v, str) and isinstance(k, str) and is_secret_name(k) and v else scrub(v))
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return type(value)(scrub(v) for v in value)
    if isinstance(value, str):
        return redact_text(value)
    return value
