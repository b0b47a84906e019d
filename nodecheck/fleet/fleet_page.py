"""The sweeps' page, fleet.html: the retained sweeps of one playbook read from the sweep history
(fleet/history.py) and drawn as one self-contained HTML page (report/html): a node x sweep status
grid, the repeat offenders, the measurements over time (busbw, pair bandwidth, GPU figures) and
what changed in the latest sweep. `nodecheck history --html FILE` writes it, and every sweep
writes one beside its report (fleet.html in the sweep's report directory).

Reading only: each function gathers one thing from the history with History's own reads (the
ones `nodecheck history` uses), so the page and the table never disagree; render_fleet puts them
in the template. Every text from the history (node names, messages) is untrusted: the template
escapes it, the grid and the charts escape what they draw, and the JSON behind the click-through
is escaped for a <script> element.
"""

from __future__ import annotations

import heapq
import os
import statistics
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import NamedTuple

from markupsafe import Markup

from nodecheck.core.errors import ConfigError
from nodecheck.core.model import SEVERITY, Status
from nodecheck.fleet.history import History, SweepRow, utc_text
from nodecheck.report import diff as D
from nodecheck.report.diff import NodeSweep, Offender, natural
from nodecheck.report.html.embed import json_script
from nodecheck.report.html.grid import Column, GridRow, grid_rows, status_grid

PAGE_SWEEPS_MAX = 60  # columns of the grid: `history --html --last N` draws at most so many
# the sweep's own page: as many of the kept sweeps as make SWEEP_PAGE_CELLS (node, sweep) cells, 10
# to PAGE_SWEEPS_MAX of them. The sweep waits for the page, and its cost is the cells' measurements:
# 1,000 nodes x 10 sweeps (57 measurements a node: busbw, 8 HCAs, 8 GPUs x 6 figures) take ~4-5 s.
SWEEP_PAGE_CELLS = 10_000
SWEEP_PAGE_SWEEPS_MIN = 10
OFFENDER_MIN = 2  # a node not healthy in at least so many of the page's sweeps is a repeat offender
SERIES_MAX = 12  # a chart draws each measured thing up to so many; beyond, the fleet's median, minimum ...
LOWEST_SHOWN = 5  # ... and the things lowest in the latest sweep
CELL_RESULTS_MAX = 20  # results a clicked cell lists (the sweep's report has them all)
CELLS_WITH_RESULTS_MAX = 3000  # unhealthy (node, sweep) cells whose results the page carries
MESSAGE_MAX = 300  # characters of a message carried
CHANGES_MAX_LINES = 400  # of "what changed": a fleet-wide change is folded, but can still be long


class SweepLine(NamedTuple):
    """A sweep as the page's table lists it: the `nodecheck history` entry and where its report is."""

    entry: dict  # as `nodecheck history` has it: run_id, started, status, complete, nodes {status: count}
    incomplete_reason: str
    report_link: str | None  # relative href of its report.html, when there is one to link


class Chart(NamedTuple):
    """A measurement over the sweeps: series of (sweep start epoch seconds, value)."""

    check: str
    name: str
    unit: str
    series: tuple[tuple[str, str, tuple[tuple[float, float], ...]], ...]  # (name, status, points)
    things: int  # (node, subject) pairs measured: more than SERIES_MAX are summarised


# ---------------------------------------------------------------- gathering (one job each)


def page_window(h: History, playbook: str | None, last: int) -> tuple[str, list[SweepRow]]:
    """The playbook the page is about (given, or the latest sweep's) and its last `last` sweeps,
    oldest first. A history without a sweep (of that playbook) is bad input naming the file."""
    if playbook is None:
        latest = h.sweeps(1)
        if not latest:
            raise ConfigError(
                f"no sweep recorded in {h.path}",
                file="--history",
                hint="`nodecheck sweep INVENTORY --output-dir DIR` records each sweep in DIR/history.sqlite",
            )
        playbook = latest[0].playbook
    sweeps = h.sweeps(last, playbook)
    if not sweeps:
        raise ConfigError(f"no sweep of playbook {playbook!r} recorded in {h.path}", file="--history")
    return playbook, sweeps


def sweep_lines(h: History, sweeps: Sequence[SweepRow], links_from: str | Path | None = None) -> list[SweepLine]:
    """The sweeps table, newest first: what `nodecheck history` prints of each (its status and its
    nodes counted by status, History.node_counts), with a link to its report.html when the page
    knows where it is written."""
    lines = []
    for s in reversed(sweeps):
        counts = h.node_counts(s.id)
        entry = {
            "run_id": s.run_id,
            "started": utc_text(s.started),
            "report_dir": s.report_dir,
            "complete": s.complete,
            "status": s.status.value,
            "nodes": {status.value: counts[status] for status in SEVERITY if status in counts},
        }
        lines.append(SweepLine(entry, s.incomplete_reason, report_link(s.report_dir, links_from)))
    return lines


def report_link(report_dir: str | None, links_from: str | Path | None) -> str | None:
    """A relative href from the page's directory to the sweep's report.html, if that file is there
    (a pruned or moved report is no link). Always starts with "." or "/": never read as a scheme."""
    if report_dir is None or links_from is None:
        return None
    target = Path(report_dir) / "report.html"
    if not target.is_file():
        return None
    href = os.path.relpath(target, links_from)
    return href if href.startswith((".", "/")) else f"./{href}"


def node_rows(h: History, playbook: str, sweeps: Sequence[SweepRow]) -> list[NodeSweep]:
    """Each node's status and failing checks per sweep (NodeSweep.sweep: 0 = the oldest shown)."""
    return h.node_sweeps(playbook, len(sweeps))


def node_cells(rows: Sequence[NodeSweep], width: int) -> dict[str, list[Status | None]]:
    """node -> its status in each of `width` sweeps (None: that sweep did not cover it)."""
    cells: dict[str, list[Status | None]] = {}
    for r in rows:
        cells.setdefault(r.node, [None] * width)[r.sweep] = r.status
    return cells


def repeat_offenders(rows: Sequence[NodeSweep], width: int) -> list[Offender]:
    """Nodes not healthy in at least OFFENDER_MIN of the page's sweeps, by the sweep's rule."""
    return D.offenders(rows, OFFENDER_MIN, width)


def cell_results(h: History, sweeps: Sequence[SweepRow], cells: dict[str, list[Status | None]]) -> dict:
    """{run id: {node: [[check, status, subject, message], ...]}} for each (node, sweep) that was not
    healthy: what clicking its cell lists. Bounded: CELLS_WITH_RESULTS_MAX cells, latest sweeps
    first, CELL_RESULTS_MAX results each, messages cut at MESSAGE_MAX."""
    out: dict[str, dict[str, list[list[str]]]] = {}
    budget = CELLS_WITH_RESULTS_MAX
    for i in reversed(range(len(sweeps))):
        for node, statuses in cells.items():
            status = statuses[i]
            if status is None or status.healthy or budget <= 0:
                continue
            budget -= 1
            rows = [r for r in h.results(sweeps[i].id, node) if r.status is not Status.PASS]
            out.setdefault(sweeps[i].run_id, {})[node] = [
                [r.check, r.status.value, r.subject, _cut(r.message)] for r in rows[:CELL_RESULTS_MAX]
            ] + ([["", "", "", f"... and {len(rows) - CELL_RESULTS_MAX} more"]] if len(rows) > CELL_RESULTS_MAX else [])
    return out


def _cut(text: str) -> str:
    return text if len(text) <= MESSAGE_MAX else text[: MESSAGE_MAX - 1] + "\u2026"


def measurement_charts(h: History, sweeps: Sequence[SweepRow]) -> list[Chart]:
    """One chart per (check, measurement, unit) the sweeps kept (History.kept, the rows `history
    --show measurements` lists): a series per (node, subject) with one point per sweep, or above
    SERIES_MAX of them the fleet's median and minimum per sweep and the LOWEST_SHOWN lowest in the
    latest sweep that measured them."""
    # (check, name, unit) -> (node, subject) -> points; and -> sweep start -> every value (the median's)
    things: dict[tuple[str, str, str], dict[tuple[str, str], list[tuple[float, float]]]] = {}
    by_sweep: dict[tuple[str, str, str], dict[float, list[float]]] = {}
    for sweep in sweeps:
        x = sweep.started.timestamp()
        for m in h.kept("measurements", sweep.id):
            what, value = (m.check, m.name, m.unit), float(m.value)
            if what not in things:
                things[what], by_sweep[what] = {}, {}
            things[what].setdefault((m.node, m.subject), []).append((x, value))
            by_sweep[what].setdefault(x, []).append(value)
    return [Chart(*what, _series(things[what], by_sweep[what]), len(things[what])) for what in sorted(things)]


def _series(
    things: dict[tuple[str, str], list[tuple[float, float]]], by_sweep: dict[float, list[float]]
) -> tuple[tuple[str, str, tuple[tuple[float, float], ...]], ...]:
    def label(node: str, subject: str) -> str:
        return f"{node} {subject}".strip()

    if len(things) <= SERIES_MAX:
        ordered = sorted(things, key=lambda k: (natural(k[0]), k[1]))
        return tuple((label(*k), "pass", tuple(things[k])) for k in ordered)
    xs = sorted(by_sweep)
    median = tuple((x, statistics.median(by_sweep[x])) for x in xs)
    low = tuple((x, min(by_sweep[x])) for x in xs)
    # the lowest where last measured (the latest sweep first): the things to look at now
    lowest = heapq.nsmallest(LOWEST_SHOWN, things.items(), key=lambda kv: (-kv[1][-1][0], kv[1][-1][1], kv[0]))
    return (
        (f"median of {len(things)}", "pass", median),
        ("minimum", "pass", low),
        *((f"lowest: {label(*k)}", "pass", tuple(points)) for k, points in lowest),
    )


def changes_text(h: History, sweeps: Sequence[SweepRow]) -> str:
    """What changed in the latest sweep against the one before it (diff.diff of their snapshots,
    rendered as the sweep prints it). The sweep's own page passes the text the sweep computed."""
    last = h.snapshot(sweeps[-1])
    previous = h.snapshot(sweeps[-2]) if len(sweeps) > 1 else None
    return D.render(D.diff(previous, last), [], OFFENDER_MIN, len(sweeps), last.started, max_lines=None)


def bounded_lines(text: str, most: int = CHANGES_MAX_LINES) -> str:
    """At most `most` lines of the text, then how many more (the sweep's summary.txt has them all)."""
    lines = text.splitlines()
    if len(lines) <= most:
        return text
    return "\n".join([*lines[:most], f"... and {len(lines) - most} more lines (all in the sweep's summary.txt)"]) + "\n"


# ---------------------------------------------------------------- the page


def _when(t: datetime) -> str:
    return t.astimezone(timezone.utc).strftime("%m-%d %H:%M")


def _date_label(x: float) -> str:
    return datetime.fromtimestamp(x, timezone.utc).strftime("%m-%d %H:%M")


def chart_markup(chart: Chart) -> Markup:
    from nodecheck.report.html.linechart import Series, line_chart

    shown = "" if chart.things <= SERIES_MAX else f" ({chart.things} measured: median, minimum, lowest)"
    return line_chart(
        [Series(name, points, status) for name, status, points in chart.series],
        x_label="sweep started (UTC)",
        y_label=f"{chart.name} ({chart.unit})" if chart.unit else chart.name,
        x_format=_date_label,
        title=f"{chart.check} {chart.name}{shown}",
    )


def render_fleet(
    history: History,
    playbook: str | None,
    last: int,
    changes: str | None = None,
    *,
    links_from: str | Path | None = None,
    now: datetime | None = None,
) -> str:
    """The page of the last `last` sweeps of `playbook` (None: the latest sweep's). `changes`: the
    latest sweep's "since the last sweep" text (the sweep passes its own; None: computed from the
    two latest sweeps). `links_from`: the directory the page is written to, for relative links
    to each sweep's report.html (None: no links)."""
    from nodecheck.report.html import render

    playbook, sweeps = page_window(history, playbook, last)
    rows = node_rows(history, playbook, sweeps)
    cells = node_cells(rows, len(sweeps))
    columns = [Column(s.run_id, _when(s.started)) for s in sweeps]
    grid: list[GridRow] = grid_rows(cells)
    others = sorted({s.playbook for s in history.sweeps(last)} - {playbook})
    return render(
        "fleet.html.j2",
        playbook=playbook,
        other_playbooks=others,
        history_path=str(history.path),
        generated=(now or datetime.now(timezone.utc)).strftime("%Y-%m-%d %H:%M:%SZ"),
        sweeps=sweep_lines(history, sweeps, links_from),
        latest=sweeps[-1],
        nodes=len(cells),
        grid=status_grid(columns, grid),
        grid_rows=len(grid),
        collapsed=next((r.size for r in grid if r.node is None), 0),
        offenders=repeat_offenders(rows, len(sweeps)),
        offender_min=OFFENDER_MIN,
        series_max=SERIES_MAX,
        charts=[(c, chart_markup(c)) for c in measurement_charts(history, sweeps)],
        changes=bounded_lines(changes if changes is not None else changes_text(history, sweeps)),
        cell_results=json_script("cell-results", cell_results(history, sweeps, cells)),
    )


# ---------------------------------------------------------------- nodecheck history --html FILE


def html_command(args) -> int:
    """`nodecheck history --html FILE`: the page of the last --last sweeps of the latest sweep's
    playbook, written atomically (the report files' modes) and its path printed; FILE "-": stdout."""
    import sys

    from nodecheck.report.store import why, write_atomic

    narrowed = [flag for flag, given in (("--node", args.node), ("--check", args.check)) if given]
    if args.show != "results":
        narrowed.append("--show")
    if narrowed or args.format != "table":
        raise ConfigError(
            f"--html with {', '.join(narrowed) or '--format'}: the page shows every node, check and measurement",
            file="--html",
            hint="leave them out, or use them without --html for a table",
        )
    if args.last > PAGE_SWEEPS_MAX:
        raise ConfigError(
            f"--last {args.last}: the page shows at most {PAGE_SWEEPS_MAX} sweeps",
            file="--html",
            hint="a smaller --last",
        )
    target = None if args.html == "-" else Path(args.html)
    with History.open(args.history, readonly=True) as h:
        page = render_fleet(h, None, args.last, links_from=target.resolve().parent if target else None)
    if target is None:
        sys.stdout.write(page)
        return 0
    try:
        write_atomic(target, page)
    except OSError as e:
        raise ConfigError(f"cannot write the fleet page {target}: {why(e)}", file="--html") from None
    print(target)
    return 0


# ---------------------------------------------------------------- the sweep's own page

PAGE_NAME = "fleet.html"


def write_sweep_page(
    history: History, playbook: str, report_dir: str, changes: str, keep: int, nodes: int
) -> tuple[str | None, str]:
    """fleet.html in the sweep's report directory, this sweep included (it is recorded), over the
    last sweeps_on_page(nodes, keep) kept sweeps (`nodes`: this sweep's). Returns (its path,
    "") or (None, why not): a page that cannot be drawn or written is a warning, never a failed
    sweep."""
    from nodecheck.report.store import why, write_atomic

    last = sweeps_on_page(nodes, keep)
    target = Path(report_dir) / PAGE_NAME
    try:
        write_atomic(target, render_fleet(history, playbook, last, changes, links_from=report_dir))
    except OSError as e:
        return None, f"could not write the fleet page {target}: {why(e)}"
    except Exception as e:  # noqa: BLE001 - a page is a view of the sweep: it must never cost the sweep
        return None, f"could not draw the fleet page {target}: {type(e).__name__}: {e}"
    return str(target), ""


def sweeps_on_page(nodes: int, keep: int) -> int:
    """How many sweeps the sweep's own page shows: SWEEP_PAGE_CELLS cells' worth (60 at 16 nodes,
    10 at 1,000), never more than `sweep --keep` keeps (0: every sweep)."""
    fit = max(SWEEP_PAGE_SWEEPS_MIN, min(PAGE_SWEEPS_MAX, SWEEP_PAGE_CELLS // max(nodes, 1)))
    return min(fit, keep) if keep > 0 else fit
