"""A line chart as inline SVG, generic: series of (x, y) points, a linear or log2 x axis, an optional
threshold drawn dashed. Pure: data in, markup out; every text (series names, labels) is escaped
here, and the markup returned is only what this module built. No xmlns: the SVG lives inline in an
HTML page, which needs none (and a page of ours holds no URL at all)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

# distinguishable on white and in grey print; a failing series is drawn in FAIL_COLOUR regardless
PALETTE = ("#0969da", "#1a7f37", "#8250df", "#bc4c00", "#1b7c83", "#9a6700", "#6e7781", "#bf3989")
FAIL_COLOUR = "#cf222e"
MAX_LEGEND = 24  # a legend of 1,000 runs is no legend: the rest are counted, not listed


@dataclass(frozen=True)
class Series:
    name: str
    points: tuple[tuple[float, float], ...]
    status: str = "pass"  # "pass" | "fail" | anything a Status value says: a failing run drawn red


def line_chart(
    series: Sequence[Series],
    *,
    x_label: str,
    y_label: str,
    x_log2: bool = False,
    threshold: float | None = None,
    threshold_label: str = "",
    x_format: Callable[[float], str] | None = None,
    title: str = "",
    width: int = 640,
    height: int = 280,
) -> Markup:
    """The chart as one <svg class="chart">: axes with ticks, one polyline (and point markers with a
    <title> tooltip) per series, the threshold as a dashed horizontal line, a legend below."""
    fmt_x = x_format or _number
    drawn = [s for s in series if _usable(s, x_log2)]
    drawn_ids = {id(s) for s in drawn}
    legend_rows = min(len(series), MAX_LEGEND + 1)
    left, right, top = 64, 16, 28 if title else 12
    plot_bottom = height - 44
    total_height = height + 16 * legend_rows
    out: list[str] = [
        f'<svg class="chart" width="{width}" height="{total_height}" viewBox="0 0 {width} {total_height}" '
        f'role="img" aria-label="{escape(title or y_label)}">'
    ]
    if title:
        room = max(
            8, (width - 16) // 7
        )  # ~7 px a character at the title's size: a long title is cut, whole in its tooltip
        shown = title if len(title) <= room else title[: room - 1] + "…"
        out.append(
            f'<text x="{width / 2:.1f}" y="16" text-anchor="middle" font-weight="600">'
            f"<title>{escape(title)}</title>{escape(shown)}</text>"
        )
    if not drawn:
        out.append(
            f'<text x="{width / 2:.1f}" y="{(top + plot_bottom) / 2:.1f}" text-anchor="middle" '
            f'fill="#5c6670">no data</text></svg>'
        )
        return Markup("".join(out))

    xs = [_xt(x, x_log2) for s in drawn for x, _ in s.points if _ok_x(x, x_log2)]
    ys = [y for s in drawn for x, y in s.points if _ok_x(x, x_log2) and math.isfinite(y)]
    x0, x1 = min(xs), max(xs)
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1
    y_top = max(ys + ([threshold] if threshold is not None and math.isfinite(threshold) else []))
    y_bottom = min(0.0, min(ys))
    y_ticks = _nice_ticks(y_bottom, y_top if y_top > y_bottom else y_bottom + 1)
    y0, y1 = y_ticks[0], y_ticks[-1]

    def px(x: float) -> float:
        return left + (_xt(x, x_log2) - x0) / (x1 - x0) * (width - left - right)

    def py(y: float) -> float:
        return plot_bottom - (y - y0) / (y1 - y0) * (plot_bottom - top)

    # axes and grid
    out.append(
        f'<g class="axes" stroke="#8c959f" stroke-width="1"><line x1="{left}" y1="{plot_bottom}" '
        f'x2="{width - right}" y2="{plot_bottom}"/><line x1="{left}" y1="{top}" x2="{left}" y2="{plot_bottom}"/></g>'
    )
    for t in y_ticks:
        y = py(t)
        out.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}" stroke="#eaeef2"/>'
            f'<text x="{left - 4}" y="{y + 4:.1f}" text-anchor="end" font-size="11">{escape(_number(t))}</text>'
        )
    for t in _x_ticks(x0, x1, x_log2):
        raw = 2.0**t if x_log2 else t
        x = px(raw)
        out.append(
            f'<line x1="{x:.1f}" y1="{plot_bottom}" x2="{x:.1f}" y2="{plot_bottom + 4}" stroke="#8c959f"/>'
            f'<text x="{x:.1f}" y="{plot_bottom + 16}" text-anchor="middle" font-size="11">{escape(fmt_x(raw))}</text>'
        )
    out.append(
        f'<text x="{(left + width - right) / 2:.1f}" y="{plot_bottom + 32}" text-anchor="middle" '
        f'font-size="12">{escape(x_label)}</text>'
        f'<text transform="translate(14 {(top + plot_bottom) / 2:.1f}) rotate(-90)" text-anchor="middle" '
        f'font-size="12">{escape(y_label)}</text>'
    )
    # threshold
    if threshold is not None and math.isfinite(threshold):
        y = py(threshold)
        label = threshold_label or f"threshold {_number(threshold)}"
        out.append(
            f'<g class="threshold"><line x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}" '
            f'stroke="{FAIL_COLOUR}" stroke-width="1.5" stroke-dasharray="6 4"/>'
            f'<text x="{width - right - 2}" y="{y - 4:.1f}" text-anchor="end" font-size="11" '
            f'fill="{FAIL_COLOUR}">{escape(label)}</text></g>'
        )
    # series
    colours = {}
    for i, s in enumerate(series):
        colours[id(s)] = FAIL_COLOUR if s.status == "fail" else PALETTE[i % len(PALETTE)]
    for s in drawn:
        pts = sorted((x, y) for x, y in s.points if _ok_x(x, x_log2) and math.isfinite(y))
        colour = colours[id(s)]
        dash = ' stroke-dasharray="3 2"' if s.status not in ("pass", "fail", "warn") else ""
        coords = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        out.append(
            f'<g class="series" data-status="{escape(s.status)}"><polyline points="{coords}" fill="none" '
            f'stroke="{colour}" stroke-width="{2 if s.status == "fail" else 1.5}"{dash}/>'
        )
        if len(pts) <= 64:  # markers with a tooltip; a dense series is its line
            for x, y in pts:
                out.append(
                    f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.5" fill="{colour}">'
                    f"<title>{escape(s.name)}: {escape(fmt_x(x))}, {escape(_number(y))}</title></circle>"
                )
        out.append("</g>")
    # legend
    for i, s in enumerate(series[:MAX_LEGEND]):
        y = height + 16 * i
        note = "" if id(s) in drawn_ids else " (no data)"
        out.append(
            f'<rect x="{left}" y="{y - 9}" width="10" height="10" fill="{colours[id(s)]}"/>'
            f'<text x="{left + 16}" y="{y}" font-size="11">{escape(s.name)}{escape(note)}'
            f"{escape(' — ' + s.status.upper()) if s.status != 'pass' else ''}</text>"
        )
    if len(series) > MAX_LEGEND:
        out.append(
            f'<text x="{left}" y="{height + 16 * MAX_LEGEND}" font-size="11" fill="#5c6670">'
            f"and {len(series) - MAX_LEGEND} more series</text>"
        )
    out.append("</svg>")
    return Markup("".join(out))


def _ok_x(x: float, log2: bool) -> bool:
    return math.isfinite(x) and (x > 0 or not log2)


def _usable(s: Series, log2: bool) -> bool:
    return any(_ok_x(x, log2) and math.isfinite(y) for x, y in s.points)


def _xt(x: float, log2: bool) -> float:
    return math.log2(x) if log2 else x


def _x_ticks(x0: float, x1: float, log2: bool) -> list[float]:
    """Tick positions in transformed units: whole powers of two on a log2 axis (every k-th, at most
    ~9), nice decimal steps on a linear one."""
    if not log2:
        return [t for t in _nice_ticks(x0, x1) if x0 <= t <= x1]
    lo, hi = math.ceil(x0), math.floor(x1)
    step = max(1, math.ceil((hi - lo + 1) / 9))
    return [float(t) for t in range(lo, hi + 1, step)]


def _nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering [lo, hi]: steps of 1, 2, 2.5 or 5 times a power of ten."""
    if not hi > lo:
        hi = lo + 1
    raw = (hi - lo) / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks = []
    t = start
    while t < hi + step * 0.999:
        ticks.append(round(t, 10))
        t += step
    return ticks


def _number(v: float) -> str:
    if v == int(v) and abs(v) < 1e15:
        return str(int(v))
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}"


def bytes_label(v: float) -> str:
    """A message size as nccl-tests users say it: 8B, 64K, 1M, 8G (powers of 1024)."""
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if v >= scale:
            q = v / scale
            return f"{q:.0f}{unit}" if q == int(q) else f"{q:.3g}{unit}"
    return f"{v:.0f}B"
