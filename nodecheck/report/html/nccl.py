"""The nccl-tests charts of the run page: bus bandwidth by message size per run, read from the raw
captures (the pure parsers: nccl-tests' JSON report where the capture has a complete one, else its
text), the threshold from the verdicts, the stage a hung run stopped at. Pure but for read_capture."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from nodecheck.core.model import CheckResult, Status
from nodecheck.judging.nccl_runs import read_run
from nodecheck.parsers.nccl_tests_facts import NcclTestRun
from nodecheck.report import Report, capture_relpath
from nodecheck.report.diff import natural
from nodecheck.report.html.linechart import Series

SERIES_MAX = 16  # runs drawn in one chart: the unhealthy first, then the slowest; the rest counted
_GBS = re.compile(r"(?:expected\s*)?>=\s*([0-9]+(?:\.[0-9]+)?)\s*GB/s")
ReadCapture = Callable[[str], "str | None"]


@dataclass(frozen=True)
class Chart:
    title: str
    series: tuple[Series, ...]
    threshold: float | None
    threshold_label: str
    left_out: int  # runs not drawn (beyond SERIES_MAX)
    notes: tuple[str, ...]  # hung runs and where they stopped, runs whose output could not be read


def busbw_points(text: str) -> tuple[tuple[tuple[float, float], ...], NcclTestRun | None]:
    """(size bytes, best busbw GB/s of the row's out-of-place and in-place halves) per row of a
    test probe's capture (sections `test`, `json`), or of plain nccl-tests output, read as the
    judge reads it (judging.nccl_runs.read_run)."""
    run = read_run(text)
    if run is None:
        return (), None
    points = []
    for row in run.rows:
        values = [m.busbw_gbs for m in (row.out_of_place, row.in_place) if m is not None and m.busbw_gbs is not None]
        if values and row.size > 0:
            points.append((float(row.size), max(values)))
    return tuple(points), run


def charts(report: Report, read_capture: ReadCapture) -> list[Chart]:
    """One chart per single-node nccl check and subject (one series per node), one per multi-node
    test of extras["nccl.allreduce_multi"] (the whole test and its 2-node localization runs)."""
    return [*_single_node(report, read_capture), *_multi_node(report, read_capture)]


def _single_node(report: Report, read_capture: ReadCapture) -> list[Chart]:
    by_fact: dict[tuple[str, str], list[tuple[CheckResult, str, str]]] = defaultdict(list)
    for r in report.results:
        if not r.check.startswith("nccl.") or r.check == "nccl.allreduce_multi" or len(r.nodes) != 1:
            continue
        if r.verdict.status in (Status.UNREACHABLE, Status.SKIPPED):  # never ran: no output to draw
            continue
        probes = [e for e in r.evidence if e.probe.startswith("nccl_") and e.probe != "nccl_tools"]
        if not probes:
            continue
        e = probes[0]
        by_fact[(r.check, r.verdict.subject)].append((r, e.node, capture_relpath(e.node, e.probe)))
    out = []
    for (check, subject), runs in by_fact.items():
        ranked = sorted(
            runs,
            key=lambda x: (x[0].verdict.status.healthy, _plateau(x[0]), natural(x[1])),
        )
        drawn, notes = [], []
        for r, node, rel in ranked[:SERIES_MAX]:
            points, _ = busbw_points(read_capture(rel) or "")
            status = _series_status(r.verdict.status)
            drawn.append(Series(node, points, status))
            if not points:
                notes.append(f"{node}: no data row ({r.verdict.message})")
        for r, node, _ in ranked:
            stage = r.verdict.observed.get("stage")
            if isinstance(stage, str) and stage not in ("done", ""):
                notes.append(f"{node}: stopped at stage '{stage}': {r.verdict.message}")
        threshold = next((t for t in (_threshold(r) for r, _, _ in runs) if t is not None), None)
        out.append(
            Chart(
                f"{check} {subject}: one run per node".replace("  ", " "),
                tuple(drawn),
                threshold,
                f"fail below {threshold:g} GB/s" if threshold is not None else "",
                max(0, len(runs) - SERIES_MAX),
                tuple(dict.fromkeys(notes)),
            )
        )
    return out


def _multi_node(report: Report, read_capture: ReadCapture) -> list[Chart]:
    data = report.extras.get("nccl.allreduce_multi")
    if not isinstance(data, Mapping):
        return []
    by_probe: dict[str, list[str]] = defaultdict(list)
    for c in report.captures:
        if c.probe.startswith("nccl_"):
            by_probe[c.probe].append(c.node)
    out = []
    for test in _list(data.get("tests")):
        if not isinstance(test, Mapping):
            continue
        name = str(test.get("test", ""))
        prefix = f"nccl_{name}_"
        series, notes = [], []
        full = next((p for p in by_probe if p.startswith(prefix) and re.search(r"_\d+nodes$", p)), None)
        status = str(test.get("status", "pass"))
        if full is not None:
            points, _ = busbw_points(read_capture(capture_relpath(by_probe[full][0], full)) or "")
            series.append(Series(f"{test.get('ranks', '?')} ranks on {test.get('nodes', '')}", points, status))
        if test.get("hang"):
            notes.append(f"the whole test hung: {test.get('hang')} ({test.get('message', '')})")
        thresholds = [_said(str(test.get("message", "")))]
        pairs = [p for p in _list(test.get("pairs")) if isinstance(p, Mapping)]
        ranked = sorted(pairs, key=lambda p: (p.get("status") in ("pass", "warn"), _int(p.get("round"))))
        for p in ranked[: SERIES_MAX - len(series)]:
            nodes = [str(n) for n in _list(p.get("nodes"))]
            tag = f"_pair_r{_int(p.get('round'))}_{'_'.join(nodes)}_"
            probe = next((x for x in by_probe if x.startswith(prefix) and tag in x), None)
            points = ()
            if probe is not None:
                points, _ = busbw_points(read_capture(capture_relpath(by_probe[probe][0], probe)) or "")
            series.append(Series(f"r{_int(p.get('round'))} {'+'.join(nodes)}", points, str(p.get("status", ""))))
            thresholds.append(_said(str(p.get("message", ""))))
        for p in pairs:
            if p.get("hang"):
                who = "+".join(str(n) for n in _list(p.get("nodes")))
                notes.append(f"r{_int(p.get('round'))} {who}: hung at {p.get('hang')}: {p.get('message', '')}")
        found = [t for t in thresholds if t is not None]
        threshold = min(found) if found else None
        out.append(
            Chart(
                f"nccl.allreduce_multi {name}: {test.get('nodes', '')} + 2-node runs",
                tuple(series),
                threshold,
                f"fail below {threshold:g} GB/s" if threshold is not None else "",
                max(0, len(pairs) - (SERIES_MAX - (1 if full else 0))),
                tuple(notes),
            )
        )
    return out


def _threshold(r: CheckResult) -> float | None:
    band = r.verdict.expected.get("busbw_gbps")
    if isinstance(band, Mapping) and isinstance(band.get("fail_below"), (int, float)):
        return float(band["fail_below"])
    return _said(r.verdict.message) if r.verdict.status is Status.FAIL else None


def _said(message: str) -> float | None:
    """The floor a message names: "expected >= 300 GB/s" (a failure) or "(>= 335 GB/s)"."""
    found = _GBS.search(message)
    return float(found.group(1)) if found else None


def _plateau(r: CheckResult) -> float:
    v = r.verdict.observed.get("busbw_plateau_gbs")
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else float("inf")


def _series_status(s: Status) -> str:
    return "pass" if s is Status.PASS else s.value


def _list(v) -> list:
    """A list from the extras (data read back from a file), or [] for anything else."""
    return v if isinstance(v, list) else []


def _int(v) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0
