"""A GPU figure against the node's own history: the sweep warns when a figure is below the node's median
over its recent sweeps by the band's history_warn_below_pct, even where its peers dropped with it (a
driver update that slowed the whole fleet, a cooling fault in a whole row). gpu.perf judges the figures
against their peers in the run; this adds the dimension only the sweep database has."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from nodecheck.checks.gpu_perf import GpuPerf
from nodecheck.config.playbook import Playbook
from nodecheck.core.model import CheckResult
from nodecheck.judging.gpu_perf_rules import PerfFigure
from nodecheck.judging.relative import judge_history
from nodecheck.report import Report
from nodecheck.report.diff import PERF_CHECK, gpu_figures

HISTORY_SWEEPS = 5  # the node's median over this many recent sweeps: one odd sweep does not move it


def with_history_warnings(report: Report, playbook: Playbook, history) -> Report:
    """The report with a WARN per GPU figure below its node's recent median (none when the playbook's
    gpu.perf band sets no history_warn_below_pct, or the history has no figures yet)."""
    want = next((c.params for c in playbook.checks if isinstance(c.params, GpuPerf)), None)
    if want is None:
        return report
    current = gpu_figures(report)
    if not current:
        return report
    past = history.recent_measurements(report.playbook, PERF_CHECK, HISTORY_SWEEPS)
    models = _models(report)
    found: list[CheckResult] = []
    for m in current:
        gpu = int(m.subject.removeprefix("GPU"))
        figure = PerfFigure(m.node, gpu, models.get((m.node, gpu), ""), m.name, m.subject, m.value, "")
        floor = want.floor(figure)
        band = floor.relative if floor is not None and floor.relative is not None else want.relative
        if band is None:
            continue
        v = judge_history(
            m.value, past.get((m.node, m.name, m.subject), []), band, what=m.name, unit=m.unit, subject=m.subject
        )
        if v is not None:
            found.append(CheckResult(PERF_CHECK, (m.node,), v))
    return dataclasses.replace(report, results=report.results + tuple(found)) if found else report


def _models(report: Report) -> Mapping[tuple[str, int], str]:
    block = report.extras.get(PERF_CHECK)
    nodes = block.get("nodes", {}) if isinstance(block, Mapping) else {}
    return {
        (node, int(i)): name
        for node, data in nodes.items()
        if isinstance(data, Mapping) and isinstance(data.get("gpus"), Mapping)
        for i, name in data["gpus"].items()
        if isinstance(name, str) and str(i).isdigit()
    }
