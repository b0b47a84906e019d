"""The node x sweep status grid of the fleet page (fleet.html) as inline SVG (pure).

One row a node, one column a sweep (oldest left), one <rect class="cell"> per (node, sweep) the
history kept, coloured by the node's worst status in that sweep and marked with a letter for
the statuses that are not PASS (colour alone is lost in print and on colour-blind readers). A node
a sweep did not cover has no cell there: "not checked" is not a status.

Rows: repeat offenders first (most sweeps not healthy), then the worst status in the latest sweep,
then the worst in any sweep, then by name. Above COLLAPSE_ABOVE nodes the nodes healthy in every
sweep become one summary row with their count, so 1,000+ nodes stay a page someone reads: the ones
that were not healthy at least once are all still there.

Every text (node names come from inventories and nodes) is escaped here; the Markup returned is
only markup built here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from markupsafe import Markup, escape

from nodecheck.core.model import Status, worst
from nodecheck.report.diff import natural

COLLAPSE_ABOVE = 200  # nodes: above this, the always-healthy ones are one summary row
CELL = 14  # px, a cell's side
GAP = 2  # px between cells
LABEL_MAX = 32  # characters of a node name drawn; the whole name is in the row's <title>
CHAR_W = 7.2  # px per character of a label (a monospace guess: labels are clipped, not measured)
HEADER_H = 92  # px: the rotated sweep labels
# a letter on every cell that is not PASS: the status survives grey print
LETTER = {
    Status.PASS: "",
    Status.WARN: "w",
    Status.SKIPPED: "s",
    Status.ERROR: "E",
    Status.TIMEOUT: "T",
    Status.UNREACHABLE: "U",
    Status.FAIL: "F",
}


class Column(NamedTuple):
    """A sweep as the grid heads it."""

    sweep: str  # the run id: data-sweep
    label: str  # what the header shows ("11-29 10:00")


class GridRow(NamedTuple):
    """A row of the grid: one node, or (node None) the summary of `size` always-healthy nodes."""

    label: str
    statuses: tuple[Status | None, ...]  # per column; None: not covered by that sweep
    node: str | None
    size: int = 1  # nodes in the row


def offences(statuses: Sequence[Status | None]) -> int:
    """In how many sweeps a node was not healthy, by the repeat-offender rule (diff.offenders): a
    check the deadline cut (SKIPPED) is the sweep's clock, not the node."""
    return sum(1 for s in statuses if s is not None and not s.healthy and s is not Status.SKIPPED)


def ever_unhealthy(statuses: Sequence[Status | None]) -> bool:
    """Not healthy in some sweep (SKIPPED too: never judged healthy): such a node keeps its row."""
    return any(s is not None and not s.healthy for s in statuses)


def grid_rows(cells: Mapping[str, Sequence[Status | None]], collapse_above: int = COLLAPSE_ABOVE) -> list[GridRow]:
    """node -> its status per column, as rows worst first; above `collapse_above` nodes the
    always-healthy ones folded into one summary row (its cells: the worst of them per sweep)."""

    def order(node: str) -> tuple:
        statuses = cells[node]
        latest = next((s for s in reversed(statuses) if s is not None), None)
        ever = max((s.rank for s in statuses if s is not None), default=-1)
        return (-offences(statuses), -(latest.rank if latest else -1), -ever, natural(node))

    nodes = sorted(cells, key=order)
    if len(nodes) <= collapse_above:
        return [GridRow(node, tuple(cells[node]), node) for node in nodes]
    shown = [node for node in nodes if ever_unhealthy(cells[node])]
    healthy = [node for node in nodes if not ever_unhealthy(cells[node])]
    rows = [GridRow(node, tuple(cells[node]), node) for node in shown]
    if healthy:
        width = max(len(s) for s in cells.values())
        summary = tuple(_summary_status([cells[n][i] for n in healthy]) for i in range(width))
        rows.append(GridRow(f"{len(healthy)} nodes healthy in every sweep", summary, None, len(healthy)))
    return rows


def _summary_status(statuses: Sequence[Status | None]) -> Status | None:
    covered = [s for s in statuses if s is not None]
    return worst(covered) if covered else None


def status_grid(columns: Sequence[Column], rows: Sequence[GridRow]) -> Markup:
    """The grid as one <svg>. Cells carry data-node, data-sweep and data-status for the page's
    script (click: that node's results in that sweep) and for tests; the summary row's cells are
    class "summary", not "cell": they are no (node, sweep)."""
    longest = max((len(r.label) for r in rows), default=4)
    label_w = int(min(longest, LABEL_MAX) * CHAR_W) + 12
    pitch = CELL + GAP
    width = label_w + len(columns) * pitch + 64  # the last rotated sweep label reaches right
    height = HEADER_H + len(rows) * pitch + 4
    out = [
        f'<svg class="grid" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="status of {len(rows)} rows over '
        f'{len(columns)} sweeps">'
    ]
    for i, column in enumerate(columns):
        x = label_w + i * pitch + CELL / 2
        out.append(
            f'<text class="col" x="{x:.1f}" y="{HEADER_H - 6}" transform="rotate(-60 {x:.1f} {HEADER_H - 6})">'
            f"<title>{escape(column.sweep)}</title>{escape(column.label)}</text>"
        )
    for j, row in enumerate(rows):
        y = HEADER_H + j * pitch
        label = row.label if len(row.label) <= LABEL_MAX else row.label[: LABEL_MAX - 1] + "\u2026"
        kind = "node" if row.node is not None else "summary"
        out.append(
            f'<text class="row {kind}" x="{label_w - 6}" y="{y + CELL - 3}" text-anchor="end">'
            f"<title>{escape(row.label)}</title>{escape(label)}</text>"
        )
        for i, status in enumerate(row.statuses[: len(columns)]):
            if status is None:
                continue
            x = label_w + i * pitch
            if row.node is not None:
                attrs = f'class="cell" data-node="{escape(row.node)}" data-sweep="{escape(columns[i].sweep)}"'
            else:
                attrs = f'class="summary" data-count="{row.size}" data-sweep="{escape(columns[i].sweep)}"'
            out.append(f'<rect {attrs} data-status="{status.value}" x="{x}" y="{y}" width="{CELL}" height="{CELL}"/>')
            if LETTER[status]:
                out.append(f'<text class="mark" x="{x + CELL / 2:.0f}" y="{y + CELL - 3}">{LETTER[status]}</text>')
    out.append("</svg>")
    return Markup("".join(out))
