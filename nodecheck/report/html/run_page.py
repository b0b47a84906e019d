"""report.html of one run: the whole page from a Report and its captures. The sections' data come
from sections/pairs/nccl (pure), the pictures from heatmap/linechart (inline SVG), the layout from
templates/run.html.j2; nothing on the page is fetched from anywhere."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

from markupsafe import Markup

from nodecheck.core.model import Status
from nodecheck.report import Report, capture_relpath
from nodecheck.report.diff import natural
from nodecheck.report.html import render
from nodecheck.report.html import sections as S
from nodecheck.report.html.counter_deltas import port_deltas
from nodecheck.report.html.embed import json_script
from nodecheck.report.html.heatmap import aggregated, embedded_matrix, heatmap, legend
from nodecheck.report.html.linechart import bytes_label, line_chart
from nodecheck.report.html.nccl import charts
from nodecheck.report.html.pairs import PairView, pair_view

LAZY_ABOVE = 64  # nodes: above this, result rows are drawn on demand from embedded JSON, but for
EAGER_UNHEALTHY = 32  # the first (worst) unhealthy nodes': a fleet-wide failure (every node's mount
# hung) must not make a 1,024-node page a 60,000-row DOM (23 MB, minutes and 6 GB in Chromium)
PORT_TABLE_NODES = 64  # nodes whose counter captures are parsed again for the every-port table
RAIL_VIEWS_MAX = 16  # per-HCA heatmaps drawn (a node has 8-12 rails; more is not a GPU node's HCA list)

ReadCapture = Callable[[str], "str | None"]


@dataclass(frozen=True)
class PairsSection:
    view: PairView
    svg: Markup  # the node x node heatmap, or the group x group one above AGGREGATE_ABOVE nodes
    legend: Markup
    rails: tuple[tuple[str, Markup], ...]  # (device, its heatmap) for the per-rail view
    matrix_json: Markup  # the embedded matrix a click on an aggregated cell draws from ("" below)
    left_out: tuple[tuple[str, str], ...] = ()  # (node, why): run nodes the pair test could not test


@dataclass(frozen=True)
class ChartSection:
    title: str
    svg: Markup
    notes: tuple[str, ...]
    left_out: int


def render_run(report: Report, read_capture: ReadCapture, *, stderr_paths: Collection[str] = ()) -> str:
    """The page. read_capture(relpath) -> the capture's text (already redacted) or None; relpath as
    nodecheck.report.capture_relpath gives. stderr_paths: the captures' stderr files where the
    Report has no capture texts (one rebuilt from report.json)."""
    from nodecheck.report.json import redacted

    report = redacted(report)  # the last line of defence, free for a report the runner made
    nodes = S.node_sections(report, stderr_paths)
    lazy = len(report.nodes) > LAZY_ABOVE
    unhealthy = [n.name for n in nodes if not n.healthy]  # worst first
    eager = set(unhealthy[:EAGER_UNHEALTHY] if lazy else unhealthy)
    lazy_nodes = [n for n in nodes if n.name not in eager]
    facts = S.drift(report, _fleet_checks())
    return render(
        "run.html.j2",
        o=S.overview(report),
        pairs=_pairs(report),
        charts=_charts(report, read_capture),
        drift=[f for f in facts if len(f.groups) > 1],
        drift_same=[f for f in facts if len(f.groups) < 2],
        counters=S.counters(report, *_counter_classes()),
        ports=_ports(report, read_capture),
        nodes=nodes,
        lazy=lazy,
        eager=eager,
        lazy_json=json_script("node-rows", _lazy_rows(lazy_nodes)) if lazy_nodes else Markup(""),
        anchor=S.node_anchor,
    )


def _pairs(report: Report) -> PairsSection | None:
    floors = [
        float(bound)
        for r in report.results
        if r.check == "ib.pairs" and isinstance(bound := r.verdict.expected.get("min"), (int, float))
    ]
    view = pair_view(report.extras, report.node_names, floors)
    if view is None or not view.nodes:
        return None
    left_out = _left_out_of_pairs(report, set(view.nodes))
    if view.aggregated:
        return PairsSection(
            view, aggregated(view), legend(view), (), json_script("pairs-matrix", embedded_matrix(view)), left_out
        )
    rails: tuple[tuple[str, Markup], ...] = ()
    if 1 < len(view.devices) <= RAIL_VIEWS_MAX:
        cell = max(5, min(14, 320 // max(len(view.nodes), 1)))
        rails = tuple((d, heatmap(view, rail=d, cell=cell, id_prefix=f"rail-{i}")) for i, d in enumerate(view.devices))
    return PairsSection(view, heatmap(view), legend(view), rails, Markup(""), left_out)


def _left_out_of_pairs(report: Report, drawn: set[str]) -> tuple[tuple[str, str], ...]:
    """The run's nodes missing from the heatmap, each with why (its ib.pairs verdict: unreachable,
    ibstat timed out, no port to test): a node with no row is not a node that passed."""
    out = []
    for node in report.node_names:
        if node in drawn:
            continue
        verdicts = [r.verdict for r in report.results_for(node) if r.check == "ib.pairs"]
        unhealthy = [v for v in verdicts if not v.status.healthy]
        why = (unhealthy or verdicts)[0].message if verdicts else "no ib.pairs result"
        out.append((node, why))
    return tuple(out)


def _charts(report: Report, read_capture: ReadCapture) -> list[ChartSection]:
    out = []
    for c in charts(report, read_capture):
        svg = line_chart(
            c.series,
            x_label="message size (bytes)",
            y_label="bus bandwidth (GB/s)",
            x_log2=True,
            threshold=c.threshold,
            threshold_label=c.threshold_label,
            x_format=bytes_label,
            title=c.title,
        )
        out.append(ChartSection(c.title, svg, c.notes, c.left_out))
    return out


@dataclass(frozen=True)
class PortRow:
    node: str
    port: str
    status: str  # the worst ib.counters verdict on that port
    window_s: float
    source: str
    changes: tuple[str, ...]  # "SymbolErrorCounter +42 (rate, 5350/h)", "PortXmitData +1.2e9 (info, 340 Gb/s)"


def _ports(report: Report, read_capture: ReadCapture) -> list[PortRow]:
    """Every port's counter deltas, from ib.counters' two reads (up to PORT_TABLE_NODES nodes: the
    captures are parsed again here; a larger run shows the verdicts' findings only)."""
    results = [r for r in report.results if r.check == "ib.counters" and len(r.nodes) == 1]
    nodes = list(dict.fromkeys(r.nodes[0] for r in results))
    if not nodes or len(nodes) > PORT_TABLE_NODES:
        return []
    worst: dict[tuple[str, str], Status] = {}
    for r in results:
        key = (r.nodes[0], r.verdict.subject)
        if key not in worst or r.verdict.status.rank > worst[key].rank:
            worst[key] = r.verdict.status
    rows = []
    for node in sorted(nodes, key=natural):
        for p in port_deltas(node, read_capture):
            words = []
            for c in p.changes:
                amount = "unknown" if c.increase is None else f"+{c.increase:,}"
                rate = f"{c.gbps:.1f} Gb/s" if c.gbps is not None else (f"{c.per_hour:.4g}/h" if c.per_hour else "")
                state = "" if c.state == "ok" else f", {c.state}"
                words.append(f"{c.counter} {amount} ({c.kind}{', ' + rate if rate else ''}{state})")
            status = worst.get((node, p.port), Status.PASS)
            rows.append(PortRow(node, p.port, status.value, round(p.window_s, 1), p.source, tuple(words)))
    return sorted(rows, key=lambda r: (not r.changes, -Status(r.status).rank))  # stable: node order within


def _fleet_checks() -> list[str]:
    from nodecheck.checks import all_checks

    return [name for name, spec in all_checks().items() if spec.scope == "fleet"]


def _counter_classes() -> tuple[dict[str, str], dict[str, str]]:
    from nodecheck.judging import counter_rules as C

    kinds = {name: info.kind for name, info in C.COUNTERS.items()}
    words = {
        C.FAIL_ON_INCREASE: "fails on any increase (link down, buffer overrun, integrity)",
        C.RATE: "judged by rate per hour against warn/fail limits (bit errors, retrains, discards)",
        C.CONGESTION: "congestion: reported, not a fault",
        C.INFO: "information only",
    }
    return kinds, words


def _lazy_rows(nodes: list[S.NodeSection]) -> dict:
    """The rows of the nodes drawn on demand, for the page's script, each distinct string once (at
    1,024 nodes most messages repeat): {"s": [strings], "n": {node: {"r": [[status, check, subject,
    message, observed, expected, group, excerpt] as string indexes, ...], "c": [[label, href], ...]}}}."""
    strings: dict[str, int] = {}

    def ref(text: str) -> int:
        if text not in strings:
            strings[text] = len(strings)
        return strings[text]

    out = {}
    for n in nodes:
        out[n.name] = {
            "r": [
                [
                    ref(r.status),
                    ref(r.check),
                    ref(r.subject),
                    ref(r.message),
                    ref(r.observed),
                    ref(r.expected),
                    ref(r.group),
                    ref(r.excerpt if r.status != "pass" else ""),
                ]
                for r in n.rows
            ],
            "c": [[ref(c.label), ref(c.href)] for c in n.captures],
        }
    return {"s": list(strings), "n": out}


def page_of(report: Report) -> str:
    """The page of a run whose Report still holds its capture texts (the runner's, before it is
    stored): what store(..., html=) writes as report.html. Captures are read from the Report,
    redacted as store() writes them."""
    from nodecheck.core.redact import redact_text

    texts = {}
    for c in report.captures:
        texts[capture_relpath(c.node, c.probe)] = c.stdout
        if c.stderr:
            texts[capture_relpath(c.node, c.probe, "stderr")] = c.stderr

    def read_capture(rel: str) -> str | None:
        text = texts.get(rel)
        return None if text is None else redact_text(text)

    return render_run(report, read_capture)


def page_or_none(report: Report, warn: Callable[[str], object]) -> str | None:
    """page_of(report), or None with `warn` told why: the page is a view of the report, and a
    defect in drawing it must never cost the run its report.json (the report is stored anyway;
    `nodecheck report html DIR` draws the page again later)."""
    try:
        return page_of(report)
    except Exception as e:  # noqa: BLE001 (any defect of the page; the report itself must be kept)
        warn(f"report.html not written: {type(e).__name__}: {e}")
        return None
