"""What the run page's top, node, drift and counter sections show, built from a Report: plain data
(dataclasses, strings, numbers), no markup. Pure, so each is tested without Jinja; the templates
only lay it out (and escape it)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import quote

from nodecheck.core.hostlist import fold
from nodecheck.core.model import CheckResult, Status
from nodecheck.report import Report, capture_relpath, most_severe_first, table
from nodecheck.report.diff import natural

KV_MAX_CHARS = 400  # observed/expected shown compact; report.json has the rest
GROUP_LINKS_MAX = 64  # node links listed under one folded group; the rest are counted
DRIFT_GROUPS_MAX = 50  # value groups listed per drift fact


def node_anchor(node: str) -> str:
    """The fragment that jumps to a node's section: id="node-<name>", percent-quoted for the href."""
    return "#node-" + quote(node, safe="")


def capture_href(relpath: str) -> str:
    """A capture's link, relative to report.html: each path segment URL-quoted."""
    return "/".join(quote(part, safe="") for part in relpath.split("/"))


# ---------------------------------------------------------------------------------------- the top


@dataclass(frozen=True)
class UnhealthyGroup:
    """Nodes whose worst status and one-line reason are the same, folded."""

    status: str
    reason: str
    folded: str
    nodes: tuple[str, ...]  # the first GROUP_LINKS_MAX, each a link to its section
    more: int  # nodes of the group not listed as links


@dataclass(frozen=True)
class Overview:
    run_id: str
    status: str
    exit_code: int
    nodes: int
    counts: tuple[tuple[str, int], ...]  # (status, nodes) in severity order, zeros left out
    unhealthy: tuple[UnhealthyGroup, ...]
    meta: tuple[tuple[str, str], ...]  # (label, value) rows: playbook, inventory, versions, times
    complete: bool
    incomplete_reason: str
    excluded: str  # folded, "" for none


def overview(report: Report) -> Overview:
    took = (report.finished - report.started).total_seconds()
    meta = [
        ("run", report.run_id),
        ("playbook", f"{report.playbook} ({report.playbook_path}, sha256 {report.playbook_sha256[:12]})"),
    ]
    for path, sha in report.playbook_includes:
        meta.append(("  includes", f"{path} (sha256 {sha[:12]})"))
    meta += [
        ("inventory", report.inventory or "--local (this host)"),
        ("nodecheck", report.nodecheck_version or "unknown"),
        ("started", f"{report.started:%Y-%m-%d %H:%M:%S} UTC"),
        ("finished", f"{report.finished:%Y-%m-%d %H:%M:%S} UTC"),
        ("took", f"{took:.1f} s"),
        ("deadline", f"{report.deadline_s:g} s"),
    ]
    return Overview(
        run_id=report.run_id,
        status=report.status.value,
        exit_code=report.exit_code,
        nodes=len(report.nodes),
        counts=tuple(report.summary().items()),
        unhealthy=tuple(unhealthy_groups(report)),
        meta=tuple(meta),
        complete=report.complete,
        incomplete_reason=report.incomplete_reason or ("" if report.complete else "the run deadline was reached"),
        excluded=fold(report.excluded) if report.excluded else "",
    )


def unhealthy_groups(report: Report) -> list[UnhealthyGroup]:
    """The unhealthy nodes, worst first, nodes with the same status and reason folded together
    (the node's own name and address templated out, as the table does)."""
    addresses = dict(report.nodes)
    groups: dict[tuple[Status, str], list[str]] = defaultdict(list)
    for node in report.node_names:
        status = report.node_status(node)
        if not status.healthy:
            reason = table.node_reason(report.results_for(node))
            groups[(status, table.template(reason, node, addresses.get(node, "")))].append(node)
    out = []
    for (status, text), nodes in sorted(groups.items(), key=lambda kv: (-kv[0][0].rank, -len(kv[1]), kv[0][1])):
        nodes.sort(key=natural)
        out.append(
            UnhealthyGroup(
                status.value,
                table.fill(text, nodes, addresses),
                _fold(nodes),
                tuple(nodes[:GROUP_LINKS_MAX]),
                max(0, len(nodes) - GROUP_LINKS_MAX),
            )
        )
    return out


def _fold(nodes: Sequence[str]) -> str:
    return _fold_once(tuple(nodes))


@lru_cache(maxsize=4096)
def _fold_once(nodes: tuple[str, ...]) -> str:
    """A cross-node result is listed under each of its nodes: folded once, not once per node
    (1,024 folds of a 1,023-node group took a minute)."""
    try:
        return fold(nodes)
    except Exception:  # a name NodeSet cannot read (brackets, commas): listed as is
        return ",".join(nodes)


# ------------------------------------------------------------------------------------- per node


@dataclass(frozen=True)
class ResultRow:
    status: str
    check: str
    subject: str
    message: str
    observed: str  # compact key=value
    expected: str
    excerpt: str
    group: str  # folded group of a cross-node result, "" for one node


@dataclass(frozen=True)
class CaptureLink:
    probe: str
    href: str  # relative, URL-quoted
    label: str  # "ibstat.txt", "ibstat.stderr.txt"
    outcome: str
    exit_code: int | None


@dataclass(frozen=True)
class NodeSection:
    name: str
    address: str
    status: str
    healthy: bool
    counts: tuple[tuple[str, int], ...]  # results by status, worst first
    rows: tuple[ResultRow, ...]  # unhealthy results first
    captures: tuple[CaptureLink, ...]


def node_sections(report: Report, stderr_paths: Collection[str] = ()) -> list[NodeSection]:
    """One per node: unhealthy nodes first (worst first), then the healthy ones, each in natural
    order; a node's results unhealthy first."""
    links = capture_links(report, stderr_paths)
    order = sorted(
        report.node_names, key=lambda n: (report.node_status(n).healthy, -report.node_status(n).rank, natural(n))
    )
    addresses = dict(report.nodes)
    out = []
    for node in order:
        results = report.results_for(node)
        status = report.node_status(node)
        counts: dict[str, int] = defaultdict(int)
        for r in results:
            counts[r.verdict.status.value] += 1
        ranked = most_severe_first(results)  # the order of the node's reason line at the top
        out.append(
            NodeSection(
                name=node,
                address=addresses.get(node, ""),
                status=status.value,
                healthy=status.healthy,
                counts=tuple(sorted(counts.items(), key=lambda kv: -Status(kv[0]).rank)),
                rows=tuple(result_row(r) for r in ranked),
                captures=tuple(links.get(node, ())),
            )
        )
    return out


EXCERPT_MAX_CHARS = 2000  # of a verdict's excerpt on the page; the whole output is its capture


def excerpt_of(text: str) -> str:
    """The excerpt as the page shows it: bounded (a timed-out probe's excerpt may be its whole
    output, on every node), the rest in the capture the row links to."""
    if len(text) <= EXCERPT_MAX_CHARS:
        return text
    return text[:EXCERPT_MAX_CHARS] + f"\n… ({len(text) - EXCERPT_MAX_CHARS:,} more characters: see the capture)"


def result_row(r: CheckResult) -> ResultRow:
    v = r.verdict
    return ResultRow(
        status=v.status.value,
        check=r.check,
        subject=v.subject,
        message=v.message,
        observed=compact(v.observed),
        expected=compact(v.expected),
        excerpt=excerpt_of(v.excerpt),
        group=_fold(r.nodes) if len(r.nodes) > 1 else "",
    )


def capture_links(report: Report, stderr_paths: Collection[str] = ()) -> dict[str, list[CaptureLink]]:
    """Each node's captures as links into captures/ (as store() wrote them), in probe order; the
    evidence's capture paths too where a result names one the captures do not list. A capture's
    stderr file where it has one: its text (a run's report) or `stderr_paths` (a Report rebuilt
    from report.json keeps no capture text; its JSON names the stderr files)."""
    with_stderr = set(stderr_paths)
    links: dict[str, list[CaptureLink]] = defaultdict(list)
    seen: set[str] = set()
    for c in report.captures:
        err = c.stderr or capture_relpath(c.node, c.probe, "stderr") in with_stderr
        for stream in ("stdout", "stderr") if err else ("stdout",):
            rel = capture_relpath(c.node, c.probe, stream)
            if rel in seen:
                continue
            seen.add(rel)
            links[c.node].append(
                CaptureLink(c.probe, capture_href(rel), rel.rsplit("/", 1)[-1], c.outcome.value, c.exit_code)
            )
    for r in report.results:
        for e in r.evidence:
            rel = e.capture_path
            if rel and rel not in seen and inside_report(rel):
                seen.add(rel)
                links[e.node].append(CaptureLink(e.probe, capture_href(rel), rel.rsplit("/", 1)[-1], "", e.exit_code))
    return links


def inside_report(rel: str) -> bool:
    """A plain relative path inside the report directory: not absolute, no "..", no backslash, NUL
    or drive/URL colon."""
    if not isinstance(rel, str) or not rel or len(rel) > 4096:
        return False
    if rel.startswith("/") or any(ch in rel for ch in ("\\", "\0", ":")):
        return False
    return all(part not in ("", ".", "..") for part in rel.split("/"))


def compact(values: Mapping, limit: int = KV_MAX_CHARS) -> str:
    """{"gbps": 150.0, "tests": [...]} as 'gbps=150 tests=[8 items]': one readable line."""
    parts = []
    for k, v in values.items():
        if k == "snapshot":  # ib.counters' whole counter read: in report.json, too long for a line
            continue
        parts.append(f"{k}={_value(v)}")
    text = " ".join(parts)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _value(v) -> str:
    if isinstance(v, bool) or v is None:
        return str(v).lower() if v is not None else "none"
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, (int, str)):
        return str(v)
    if isinstance(v, Mapping):
        inner = ", ".join(f"{k}={_value(x)}" for k, x in list(v.items())[:6])
        return "{" + inner + (", …" if len(v) > 6 else "") + "}"
    if isinstance(v, (list, tuple)):
        if len(v) <= 6 and all(isinstance(x, (str, int, float)) for x in v):
            return "[" + ", ".join(_value(x) for x in v) + "]"
        return f"[{len(v)} items]"
    return str(v)


# ---------------------------------------------------------------------------------------- drift


@dataclass(frozen=True)
class DriftGroup:
    status: str
    folded: str
    size: int
    value: str  # the observed value(s), compact
    message: str
    minority: bool  # fewer nodes than the largest group of the same fact


@dataclass(frozen=True)
class DriftFact:
    check: str
    subject: str
    groups: tuple[DriftGroup, ...]  # largest first
    more: int  # groups not listed
    not_compared: str  # nodes with no value to compare (unreachable, timed out, skipped), folded


_NO_VALUE = (Status.UNREACHABLE, Status.TIMEOUT, Status.SKIPPED)


def drift(report: Report, fleet_checks: Iterable[str] = ()) -> list[DriftFact]:
    """Per fact (a check and subject whose results group nodes: group_size > 1, or a fleet-scope
    check), the node groups and their values; a group smaller than the largest is the minority.
    Nodes that gave no value (unreachable, timed out, skipped) are named, not a group. Facts where
    every node agrees come after those that differ."""
    fleet = set(fleet_checks)
    by_check: dict[str, list[CheckResult]] = defaultdict(list)
    for r in report.results:
        by_check[r.check].append(r)
    facts = []
    for check, all_results in by_check.items():
        if check not in fleet and all(len(r.nodes) < 2 for r in all_results):
            continue
        silent = [n for r in all_results if r.verdict.status in _NO_VALUE for n in r.nodes]
        by_subject: dict[str, list[CheckResult]] = defaultdict(list)
        for r in all_results:
            if r.verdict.status not in _NO_VALUE:
                by_subject[r.verdict.subject].append(r)
        for subject, results in by_subject.items():
            biggest = max(len(r.nodes) for r in results)
            ranked = sorted(results, key=lambda r: (-len(r.nodes), -r.verdict.status.rank))
            groups = tuple(
                DriftGroup(
                    r.verdict.status.value,
                    _fold(r.nodes),
                    len(r.nodes),
                    compact(r.verdict.observed, 200),
                    r.verdict.message,
                    len(r.nodes) < biggest
                    or (len(r.nodes) == biggest and not r.verdict.status.healthy and len(results) > 1),
                )
                for r in ranked[:DRIFT_GROUPS_MAX]
            )
            facts.append(
                DriftFact(
                    check,
                    subject,
                    groups,
                    max(0, len(ranked) - DRIFT_GROUPS_MAX),
                    _fold(sorted(set(silent), key=natural)) if silent else "",
                )
            )
    facts.sort(key=lambda f: (len(f.groups) < 2, f.check, f.subject))
    return facts


# ------------------------------------------------------------------------------------- counters


@dataclass(frozen=True)
class CounterRow:
    node: str
    port: str
    status: str
    counter: str
    kind: str  # the counter's class (judging.counter_rules): fail-on-increase, rate, congestion, info
    increase: str
    per_hour: str
    limit: str
    window_s: str
    message: str


@dataclass(frozen=True)
class Counters:
    rows: tuple[CounterRow, ...]  # every port with something to say (not PASS), worst first
    quiet_ports: int  # ports where no error counter rose
    quiet_nodes: str  # their nodes, folded
    classes: tuple[tuple[str, str], ...]  # (class, what it means) for the legend


def counters(report: Report, kinds: Mapping[str, str], explanations: Mapping[str, str]) -> Counters | None:
    """The ib.counters results per port: the counters that rose with their increase, rate per hour
    and class; ports where none rose counted (their snapshots are in report.json)."""
    results = [r for r in report.results if r.check == "ib.counters"]
    if not results:
        return None
    rows, quiet_nodes, quiet = [], set(), 0
    for r in results:
        v = r.verdict
        node = r.nodes[0] if r.nodes else ""
        if v.status is Status.PASS:
            quiet += 1
            quiet_nodes.add(node)
            continue
        o = v.observed
        name = str(o.get("counter", ""))
        rows.append(
            CounterRow(
                node=node,
                port=v.subject,
                status=v.status.value,
                counter=name,
                kind=kinds.get(name, ""),
                increase=_num(o.get("increase"), "+"),
                per_hour=_num(o.get("per_hour")),
                limit=_num(v.expected.get("limit_per_hour")),
                window_s=_num(o.get("window_s")),
                message=v.message,
            )
        )
    rows.sort(key=lambda c: (-Status(c.status).rank, natural(c.node), c.port))
    used = sorted({c.kind for c in rows if c.kind})
    return Counters(
        tuple(rows),
        quiet,
        _fold(sorted(quiet_nodes, key=natural)),
        tuple((k, explanations.get(k, "")) for k in used),
    )


def _num(v, sign: str = "") -> str:
    if v is None or isinstance(v, bool):
        return ""
    if isinstance(v, (int, float)):
        return f"{sign}{v:.4g}" if isinstance(v, float) else f"{sign}{v}"
    return str(v)
