"""The generic inline-SVG line chart (nodecheck.report.html.linechart)."""

from __future__ import annotations

import re

from markupsafe import Markup

from nodecheck.report.html.linechart import FAIL_COLOUR, MAX_LEGEND, Series, bytes_label, line_chart


def _chart(**kw) -> str:
    series = kw.pop("series", [Series("run a", ((8.0, 0.1), (1024.0, 5.0), (1 << 20, 40.0)))])
    return str(line_chart(series, x_label="message size", y_label="busbw (GB/s)", **kw))


def test_returns_markup_of_one_svg_without_a_url():
    out = line_chart([Series("a", ((1.0, 2.0), (2.0, 3.0)))], x_label="x", y_label="y")
    assert isinstance(out, Markup)
    assert out.startswith('<svg class="chart"') and out.endswith("</svg>")
    assert out.count("<svg") == 1
    assert "http" not in out and "xmlns" not in out


def test_one_polyline_per_series_with_its_points():
    series = [Series("a", ((1.0, 1.0), (2.0, 2.0), (4.0, 3.0))), Series("b", ((1.0, 2.0), (4.0, 1.0)))]
    out = _chart(series=series)
    assert out.count("<polyline") == 2
    polylines = re.findall(r'<polyline points="([^"]+)"', out)
    assert [len(p.split()) for p in polylines] == [3, 2]


def test_series_names_and_labels_are_escaped():
    out = _chart(
        series=[Series("<script>alert(1)</script>", ((1.0, 1.0), (2.0, 2.0)))],
        title="<b>t</b>",
        threshold=1.0,
        threshold_label="<i>floor</i>",
    )
    assert "<script>" not in out and "<b>" not in out and "<i>" not in out
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in out
    assert "&lt;i&gt;floor&lt;/i&gt;" in out


def test_threshold_is_a_dashed_line_with_its_label():
    out = _chart(threshold=30.0, threshold_label="floor 30 GB/s")
    block = re.search(r'<g class="threshold">(.*?)</g>', out)
    assert block is not None
    assert 'stroke-dasharray="6 4"' in block.group(1)
    assert "floor 30 GB/s" in block.group(1)


def test_no_threshold_draws_no_threshold_line():
    assert 'class="threshold"' not in _chart()


def test_threshold_above_every_point_stays_inside_the_plot():
    out = _chart(threshold=1000.0, height=280)
    y = float(re.search(r'<g class="threshold"><line x1="\d+" y1="([\d.]+)"', out).group(1))
    assert 0 <= y <= 280


def test_log2_axis_ticks_are_powers_of_two_with_the_formatter():
    out = _chart(x_log2=True, x_format=bytes_label)
    labels = re.findall(r'text-anchor="middle" font-size="11">([^<]+)</text>', out)
    powers = {bytes_label(float(2**k)) for k in range(40)}
    assert labels[0] == "8B" and "2K" in labels
    assert 4 <= len(labels) <= 10 and set(labels) <= powers


def test_log2_axis_spreads_points_evenly_per_doubling():
    series = [Series("a", ((2.0, 1.0), (4.0, 1.0), (8.0, 1.0)))]
    out = _chart(series=series, x_log2=True)
    xs = [float(p.split(",")[0]) for p in re.search(r'<polyline points="([^"]+)"', out).group(1).split()]
    assert abs((xs[1] - xs[0]) - (xs[2] - xs[1])) < 0.2


def test_log2_axis_drops_non_positive_x():
    series = [Series("a", ((0.0, 1.0), (-4.0, 1.0), (2.0, 1.0), (4.0, 2.0)))]
    pts = re.search(r'<polyline points="([^"]+)"', _chart(series=series, x_log2=True)).group(1).split()
    assert len(pts) == 2


def test_failing_series_is_red_and_says_so_in_the_legend():
    series = [Series("good", ((1.0, 1.0), (2.0, 2.0))), Series("slow", ((1.0, 0.5), (2.0, 0.6)), status="fail")]
    out = _chart(series=series)
    assert 'data-status="fail"><polyline points="' in out
    fail_line = re.search(r'data-status="fail"><polyline [^>]*stroke="([^"]+)"', out).group(1)
    assert fail_line == FAIL_COLOUR
    assert "slow — FAIL" in out


def test_no_data_says_so():
    out = _chart(series=[Series("empty", ())])
    assert "no data" in out and "<polyline" not in out


def test_a_series_without_points_is_listed_but_not_drawn():
    out = _chart(series=[Series("a", ((1.0, 1.0), (2.0, 2.0))), Series("hung", (), status="timeout")])
    assert out.count("<polyline") == 1
    assert "hung (no data)" in out


def test_legend_is_bounded():
    series = [Series(f"s{i}", ((1.0, float(i)), (2.0, float(i + 1)))) for i in range(100)]
    out = _chart(series=series)
    assert out.count("<polyline") == 100
    assert f"and {100 - MAX_LEGEND} more series" in out
    assert ">s99<" not in out


def test_single_point_and_flat_series_render():
    out = _chart(series=[Series("a", ((4.0, 0.0),))], x_log2=True)
    assert out.count("<polyline") == 1 and "nan" not in out.lower()


def test_points_carry_a_tooltip():
    out = _chart(series=[Series("node1", ((1024.0, 12.5),))], x_log2=True, x_format=bytes_label)
    assert "<title>node1: 1K, 12.5</title>" in out


def test_bytes_label():
    assert [bytes_label(v) for v in (8, 1024, 3 << 20, 1 << 33, 1536)] == ["8B", "1K", "3M", "8G", "1.5K"]
