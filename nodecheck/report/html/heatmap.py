"""The pair-bandwidth heatmap as inline SVG. Pure: a PairView in, markup out; every node name and
number is escaped here and the Markup returned is only what this module built.

The matrix is symmetric: ib.pairs keeps per node pair the slower of both directions and every rail
(min), so cell (a, b) and (b, a) are one pair. Each tested pair is ONE <rect class="cell"> (below
the diagonal); its mirror above the diagonal is a plain <rect class="mirror"> so the blamed node's
whole row and column read red. A pair never tested has no rect: the hatched background shows."""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import quote

from markupsafe import Markup, escape

from nodecheck.report.html.pairs import Pair, PairView

LABEL_CHARS = 18  # a header shows this much of a node name; its <title> has the whole name
PASS_LIGHT, PASS_DARK = (198, 236, 205), (26, 127, 55)  # a pass cell: light near the floor, dark at the best
FAIL_LIGHT, FAIL_DARK = (255, 170, 170), (164, 14, 38)  # a fail cell: darker the further below the floor
WARN = "#e3b341"
UNTESTED = "#c9ced4"


def cell_fill(pair_status: str, worst: str, gbps: float | None, floor: float | None, top: float) -> str:
    """A cell's colour: green scaled by Gb/s from the floor to the best, red scaled by how far below
    the floor, amber for a warning; grey (hatched) for a planned test that never ran."""
    if pair_status == "untested":
        return UNTESTED
    if pair_status == "fail":
        if gbps is None or not floor:
            return _rgb(FAIL_DARK)
        return _mix(FAIL_LIGHT, FAIL_DARK, 1 - max(0.0, min(1.0, gbps / floor)))
    if worst == "warn":
        return WARN
    low = floor or 0.0
    if gbps is None or top <= low:
        return _rgb(PASS_DARK)
    return _mix(PASS_LIGHT, PASS_DARK, max(0.0, min(1.0, (gbps - low) / (top - low))))


def heatmap(view: PairView, *, rail: str | None = None, cell: int | None = None, id_prefix: str = "pairs") -> Markup:
    """Node x node, every node of view.nodes (≤ AGGREGATE_ABOVE for a readable page). rail: one
    HCA's tests only (the per-rail view), else the pair's slowest over every rail."""
    nodes = view.nodes
    n = len(nodes)
    size = cell or max(6, min(26, 640 // max(n, 1)))
    label_w = 12 + 8 * min(LABEL_CHARS, max((len(x) for x in nodes), default=4))  # bold blamed names are wider
    left = top = label_w
    width = height = left + n * size + 8
    index = {x: i for i, x in enumerate(nodes)}
    blamed = set(view.bad_nodes)
    pid = escape(f"{id_prefix}-hatch")
    out = [
        f'<svg class="chart heatmap" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="pair bandwidth, {n} nodes{escape(", " + rail) if rail else ""}">',
        _hatch(str(pid)),
        f'<rect class="untested-bg" x="{left}" y="{top}" width="{n * size}" height="{n * size}" fill="url(#{pid})"/>',
    ]
    # headers: rows at the left, columns rotated along the top
    for i, name in enumerate(nodes):
        cls = ' class="blamed"' if name in blamed else ""
        fill = ' fill="#cf222e" font-weight="700"' if name in blamed else ""
        label = escape(_short(name))
        y = top + i * size + size / 2 + 4
        x = left + i * size + size / 2 + 4
        font = min(12, max(7, size - 2))
        head = f'<text{cls} data-node="{escape(name)}"'
        out.append(
            f'{head} x="{left - 4}" y="{y:.1f}" text-anchor="end" font-size="{font}"{fill}>'
            f"<title>{escape(name)}</title>{label}</text>"
            f'{head} transform="translate({x:.1f} {top - 4}) rotate(-90)" font-size="{font}"{fill}>'
            f"<title>{escape(name)}</title>{label}</text>"
        )
    # the diagonal: a node is not paired with itself
    out.append(
        "".join(
            f'<rect x="{left + i * size}" y="{top + i * size}" width="{size}" height="{size}" fill="#ffffff"/>'
            for i in range(n)
        )
    )
    for p in view.pairs:
        if p.a not in index or p.b not in index:
            continue
        shown = _on_rail(p, rail) if rail else p
        if shown is None:
            continue
        i, j = index[p.a], index[p.b]  # i < j: the cell sits in row j, column i (below the diagonal)
        fill = cell_fill(shown.status, shown.worst, shown.gbps, view.floor, view.top)
        if shown.status == "untested":
            fill = f"url(#{pid})"
        tip = escape(_tip(shown, view, rail))
        stroke = ' stroke="#1b1f24" stroke-width="2"' if p.bad_link else ""
        link = " bad-link" if p.bad_link else ""
        kind = "rail-cell" if rail else "cell"  # the page's cells (one per tested pair) are the main view's
        attrs = (
            f'data-a="{escape(p.a)}" data-b="{escape(p.b)}" data-status="{shown.status}" '
            f'data-gbps="{"" if shown.gbps is None else f"{shown.gbps:g}"}"'
        )
        out.append(
            f'<rect class="{kind}{link}" {attrs} x="{left + i * size}" y="{top + j * size}" width="{size}" '
            f'height="{size}" fill="{fill}"{stroke}><title>{tip}</title></rect>'
            f'<rect class="mirror" x="{left + j * size}" y="{top + i * size}" width="{size}" height="{size}" '
            f'fill="{fill}"{stroke}><title>{tip}</title></rect>'
        )
    # the blamed node's row and column outlined over the cells
    for name in view.bad_nodes:
        if name not in index:
            continue
        k = index[name]
        out.append(
            f'<rect class="blamed-band" data-node="{escape(name)}" x="{left}" y="{top + k * size}" width="{n * size}" '
            f'height="{size}" fill="none" stroke="#cf222e" stroke-width="2"/>'
            f'<rect class="blamed-band" data-node="{escape(name)}" x="{left + k * size}" y="{top}" width="{size}" '
            f'height="{n * size}" fill="none" stroke="#cf222e" stroke-width="2"/>'
        )
    out.append("</svg>")
    return Markup("".join(out))


def aggregated(view: PairView, *, cell: int = 18) -> Markup:
    """Group x group (rack label, else blocks of consecutive nodes): each cell the worst status and
    slowest pair between the two groups; clicking one draws that block's node x node detail (the
    page's script, from the embedded matrix)."""
    blocks = view.block_of()
    group_of = {}
    for g, (_, members) in enumerate(blocks):
        for node in members:
            group_of[node] = g
    agg: dict[tuple[int, int], list[Pair]] = {}
    for p in view.pairs:
        ga, gb = group_of.get(p.a), group_of.get(p.b)
        if ga is None or gb is None:
            continue
        agg.setdefault((min(ga, gb), max(ga, gb)), []).append(p)
    blamed_groups = {group_of[n] for n in view.bad_nodes if n in group_of}
    g = len(blocks)
    label_w = 12 + 8 * min(LABEL_CHARS + 6, max((len(label) for label, _ in blocks), default=4))
    left = top = label_w
    width = height = left + g * cell + 8
    out = [
        f'<svg class="chart heatmap aggregated" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="pair bandwidth by group, {g} groups">',
        _hatch("agg-hatch"),
        f'<rect x="{left}" y="{top}" width="{g * cell}" height="{g * cell}" fill="url(#agg-hatch)"/>',
    ]
    for k, (label, members) in enumerate(blocks):
        cls = ' class="blamed"' if k in blamed_groups else ""
        fill = ' fill="#cf222e" font-weight="700"' if k in blamed_groups else ""
        text = escape(_short(label, LABEL_CHARS + 6))
        title = escape(f"{label}: {len(members)} nodes")
        out.append(
            f'<text{cls} x="{left - 4}" y="{top + k * cell + cell / 2 + 4:.1f}" text-anchor="end" font-size="11"{fill}>'
            f"<title>{title}</title>{text}</text>"
            f'<text{cls} transform="translate({left + k * cell + cell / 2 + 4:.1f} {top - 4}) rotate(-90)" '
            f'font-size="11"{fill}><title>{title}</title>{text}</text>'
        )
    for (ga, gb), pairs in sorted(agg.items()):
        failed = sum(1 for p in pairs if p.status == "fail")
        judged = [p for p in pairs if p.status != "untested"]
        status = "fail" if failed else ("pass" if judged else "untested")
        worst = "warn" if not failed and any(p.worst == "warn" for p in pairs) else status
        numbers = [p.gbps for p in pairs if p.gbps is not None]
        low = min(numbers) if numbers else None
        fill = cell_fill(status, worst, low, view.floor, view.top) if status != "untested" else "url(#agg-hatch)"
        tip = escape(
            f"{blocks[ga][0]} × {blocks[gb][0]}: {len(pairs)} pairs tested, {failed} failed"
            + (f", slowest {low:g} Gb/s" if low is not None else "")
            + " (click for the nodes)"
        )
        for row, col in {(gb, ga), (ga, gb)}:
            out.append(
                f'<rect class="gcell" tabindex="0" data-ga="{ga}" data-gb="{gb}" data-status="{status}" '
                f'x="{left + col * cell}" y="{top + row * cell}" width="{cell}" height="{cell}" fill="{fill}" '
                f'stroke="#ffffff"><title>{tip}</title></rect>'
            )
    for k in sorted(blamed_groups):  # the blamed node's group: its row and column outlined
        out.append(
            f'<rect class="blamed-band" x="{left}" y="{top + k * cell}" width="{g * cell}" height="{cell}" '
            f'fill="none" stroke="#cf222e" stroke-width="2" pointer-events="none"/>'
            f'<rect class="blamed-band" x="{left + k * cell}" y="{top}" width="{cell}" height="{g * cell}" '
            f'fill="none" stroke="#cf222e" stroke-width="2" pointer-events="none"/>'
        )
    out.append("</svg>")
    return Markup("".join(out))


def embedded_matrix(view: PairView) -> dict:
    """The matrix the page's script draws a block's detail from: nodes by index, pairs as
    [i, j, gbps or null, status code (0 pass, 1 fail, 2 untested, 3 warn), bad link 0/1]."""
    index = {n: i for i, n in enumerate(view.nodes)}
    code = {"pass": 0, "fail": 1, "untested": 2}
    blocks = view.block_of()
    return {
        "nodes": list(view.nodes),
        "groups": [[label, [index[m] for m in members]] for label, members in blocks],
        "pairs": [
            [
                index[p.a],
                index[p.b],
                p.gbps,
                3 if p.status == "pass" and p.worst == "warn" else code[p.status],
                int(p.bad_link),
            ]
            for p in view.pairs
            if p.a in index and p.b in index
        ],
        "blamed": [index[n] for n in view.bad_nodes if n in index],
        "floor": view.floor,
        "top": view.top,
        "colours": {
            "passLight": list(PASS_LIGHT),
            "passDark": list(PASS_DARK),
            "failLight": list(FAIL_LIGHT),
            "failDark": list(FAIL_DARK),
            "warn": WARN,
        },
        "anchors": ["#node-" + quote(n, safe="") for n in view.nodes],
    }


def legend(view: PairView) -> Markup:
    """The colour key, in words and swatches."""
    floor = f"{view.floor:g} Gb/s" if view.floor else "the floor"
    items = [
        (cell_fill("pass", "pass", view.top, view.floor, view.top), f"pass (darker: faster, up to {view.top:g} Gb/s)"),
        (cell_fill("pass", "pass", view.floor, view.floor, view.top), f"pass, near {floor}"),
        (WARN, "warn" + (f" (below {view.warn:g} Gb/s)" if view.warn else "")),
        (cell_fill("fail", "fail", (view.floor or 0) * 0.9, view.floor, view.top), f"fail: below {floor}"),
        (cell_fill("fail", "fail", 0.0, view.floor, view.top), "fail, far below / no result"),
    ]
    parts = [f'<span><span class="swatch" style="background:{c}"></span>{escape(t)}</span>' for c, t in items]
    parts.append('<span><span class="swatch hatch"></span>not tested (no pair planned, or cut)</span>')
    parts.append(
        '<span><span class="swatch" style="background:#fff;border:2px solid #cf222e"></span>blamed node</span>'
    )
    parts.append('<span><span class="swatch" style="background:#fff;border:2px solid #1b1f24"></span>bad link</span>')
    return Markup('<div class="legend">' + "".join(parts) + "</div>")


def _on_rail(p: Pair, rail: str) -> Pair | None:
    tests = [t for t in p.rails if t.device == rail]
    if not tests:
        return None
    judged = [t for t in tests if t.status != "skipped"]
    failed = any(t.status not in ("pass", "warn") for t in judged)
    numbers = [t.gbps for t in tests if t.gbps is not None]
    status = "untested" if not judged else ("fail" if failed else "pass")
    worst = "warn" if not failed and any(t.status == "warn" for t in judged) else status
    return Pair(p.a, p.b, min(numbers) if numbers else None, status, worst, tuple(tests), p.bad_link)


def _tip(p: Pair, view: PairView, rail: str | None) -> str:
    head = f"{p.a} ↔ {p.b}: " + (f"{p.gbps:g} Gb/s" if p.gbps is not None else "no result") + f", {p.worst}"
    if view.floor:
        head += f" (floor {view.floor:g} Gb/s)"
    if p.bad_link:
        head += " — bad link"
    lines = [head]
    rails: Sequence = p.rails if not rail else [t for t in p.rails if t.device == rail]
    for t in rails[:32]:
        number = f"{t.gbps:g} Gb/s" if t.gbps is not None else "no result"
        lines.append(f"  r{t.round} {t.device} {t.direction}: {number} {t.status}")
    if len(rails) > 32:
        lines.append(f"  … {len(rails) - 32} more tests")
    return "\n".join(lines)


def _hatch(pattern_id: str) -> str:
    """The hatched fill of untested cells, a <pattern> named pattern_id (escaped by the caller)."""
    return (
        f'<defs><pattern id="{pattern_id}" width="6" height="6" patternUnits="userSpaceOnUse" '
        'patternTransform="rotate(45)"><rect width="6" height="6" fill="#f6f8fa"/>'
        '<line x1="0" y1="0" x2="0" y2="6" stroke="#c9ced4" stroke-width="2"/></pattern></defs>'
    )


def _short(name: str, limit: int = LABEL_CHARS) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"


def _mix(a: tuple[int, int, int], b: tuple[int, int, int], t: float) -> str:
    return _rgb(tuple(round(x + (y - x) * t) for x, y in zip(a, b, strict=True)))  # type: ignore[arg-type]


def _rgb(c: tuple[int, int, int]) -> str:
    return f"#{c[0]:02x}{c[1]:02x}{c[2]:02x}"
