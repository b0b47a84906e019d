"""The sweeps' page (fleet/fleet_page.py, report/html/grid.py, fleet.html.j2): the status grid, the
repeat offenders, measurements over time, hostile names as text, `history --html` and the sweep's
own fleet.html. Histories are built as the other fleet tests build them (recorded, snap_of)."""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import replace

import pytest
from markupsafe import escape

from nodecheck import cli
from nodecheck.core.model import Status
from nodecheck.fleet import fleet_page
from nodecheck.fleet.fleet_page import (
    LOWEST_SHOWN,
    SERIES_MAX,
    bounded_lines,
    measurement_charts,
    node_cells,
    render_fleet,
    sweeps_on_page,
)
from nodecheck.fleet.history import History
from nodecheck.report.diff import Measurement
from nodecheck.report.html import CONTENT_SECURITY_POLICY
from nodecheck.report.html.grid import Column, grid_rows, status_grid
from tests.fleet.test_history import recorded, snap_of, sweep
from tests.report.test_diff import current_report, previous_report

P, W, F, U, S = Status.PASS, Status.WARN, Status.FAIL, Status.UNREACHABLE, Status.SKIPPED
CELL = re.compile(r'<rect class="cell" data-node="([^"]*)" data-sweep="([^"]*)" data-status="([^"]*)"')


def page_of(path, last: int = 10, **kw) -> str:
    with History.open(path, readonly=True) as h:
        return render_fleet(h, None, last, **kw)


def record_snaps(tmp_path, *snaps):
    path = tmp_path / "h.sqlite"
    with History.open(path) as h:
        for s in snaps:
            h.record(s, None, "0.1.0")
    return path


def bw(node: str, value: float, subject: str = "mlx5_0") -> Measurement:
    return Measurement(node, "ib.pairs", "ib_write_bw_best", subject, value, "Gb/s")


# ---------------------------------------------------------------- the grid


def test_the_grid_has_one_cell_per_node_and_sweep_the_history_kept(tmp_path):
    path, _ = recorded(tmp_path, previous_report(), current_report())
    page = page_of(path)
    cells = CELL.findall(page)
    with History.open(path, readonly=True) as h:
        sweeps = h.sweeps(10)
        kept = {(r.node, sweeps[r.sweep].run_id, r.status.value) for r in h.node_sweeps("sweep", 10)}
    assert len(cells) == len(kept) == 8  # node4 only in the first sweep, node5 only in the second
    assert set(cells) == kept


def test_rows_put_repeat_offenders_first_then_the_worst_latest_status():
    cells = {
        "node1": [P, P],
        "node2": [F, U],
        "node10": [P, F],
        "node3": [W, P],
        "node4": [S, S],  # the deadline's cut: not an offence, listed after the failures
    }
    assert [r.node for r in grid_rows(cells)] == ["node2", "node10", "node4", "node3", "node1"]


def test_above_the_bound_the_always_healthy_nodes_are_one_summary_row():
    cells = {f"node{i:04d}": [P, W, P] for i in range(1000)}
    cells["node0007"] = [P, F, P]
    cells["node0500"] = [None, S, P]  # never judged healthy in its second sweep: keeps its row
    rows = grid_rows(cells, collapse_above=200)
    assert [r.node for r in rows] == ["node0007", "node0500", None]
    assert rows[-1].size == 998 and rows[-1].statuses == (P, W, P)
    svg = status_grid([Column(f"run{i}", f"r{i}") for i in range(3)], rows)
    assert len(CELL.findall(svg)) == 3 + 2  # node0500 has no cell where it was not covered
    assert svg.count('class="summary" data-count="998"') == 3
    assert "998 nodes healthy in every sweep" in svg


def test_node_cells_leave_a_sweep_that_did_not_cover_the_node_empty(tmp_path):
    path, _ = recorded(tmp_path, previous_report(), current_report())
    with History.open(path, readonly=True) as h:
        cells = node_cells(h.node_sweeps("sweep", 2), 2)
    assert cells["node4"][1] is None and cells["node5"][0] is None
    assert cells["node2"] == [F, F]


# ---------------------------------------------------------------- offenders, changes, safety


def test_a_node_unhealthy_in_two_sweeps_is_a_repeat_offender(tmp_path):
    path, _ = recorded(tmp_path, previous_report(), current_report())
    page = page_of(path)
    table = page.split('<table id="offenders-table">')[1].split("</table>")[0]
    assert re.findall(r'<td class="mono wrap">(node\d)</td><td class="num">(\d) of (\d)</td>', table) == [
        ("node2", "2", "2"),
        ("node3", "2", "2"),
    ]
    assert "node1</td>" not in table  # warn, then fail: one offence


def test_the_page_says_what_changed_in_the_latest_sweep(tmp_path):
    path, _ = recorded(tmp_path, previous_report(), current_report())
    page = page_of(path)
    changes = page.split('<pre class="changes">')[1].split("</pre>")[0]
    assert "node1  ib.ports  fail: mlx5_5/1: rate 200 Gb/s, expected &gt;= 400 Gb/s" in changes
    assert page_of(path, changes="given by the sweep").count("given by the sweep") == 1


def test_a_long_change_list_is_cut_with_a_count():
    text = "".join(f"line {i}\n" for i in range(10))
    assert bounded_lines(text, 10) == text
    assert bounded_lines(text, 3) == "line 0\nline 1\nline 2\n... and 7 more lines (all in the sweep's summary.txt)\n"


HOSTILE = "<script>alert(1)</script>"


def test_a_script_in_a_node_name_or_a_message_renders_as_text(tmp_path):
    rows = [(HOSTILE, "node.oom", F, f"</script>{HOSTILE}"), ("node1", "node.oom", P, "ok")]
    path = record_snaps(
        tmp_path,
        snap_of("run1", 0, rows, nodes=(HOSTILE, "node1")),
        replace(snap_of("run2", 1, rows, nodes=(HOSTILE, "node1")), measurements=(bw(HOSTILE, 10.0),)),
    )
    page = page_of(path)
    assert HOSTILE not in page and "</script><script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert page.count("<script") == 3  # the page's own: base's print script, the JSON, the click script
    data = page.split('<script type="application/json" id="cell-results">')[1].split("</script>")[0]
    assert "<" not in data
    assert json.loads(data)["run2"][HOSTILE] == [["node.oom", "fail", "", f"</script>{HOSTILE}"]]


def test_the_page_loads_nothing_from_anywhere_and_states_its_csp_first(tmp_path):
    path, _ = recorded(tmp_path, previous_report(), current_report())
    page = page_of(path)
    head = page.split("<head>", 1)[1].lstrip()
    assert head.startswith(f'<meta http-equiv="Content-Security-Policy" content="{escape(CONTENT_SECURITY_POLICY)}">')
    assert not re.search(r"(?i)(https?:|ftp:|//[a-z0-9]|url\(|@import|\ssrc=)", page)


# ---------------------------------------------------------------- measurements over time


def test_a_chart_draws_one_series_per_measured_thing_with_a_point_per_sweep(tmp_path):
    snaps = [
        replace(snap_of(f"run{i}", i, [("node1", "ib.pairs", P, "ok")]), measurements=(bw("node1", 390.0 + i),))
        for i in range(3)
    ]
    snaps[1] = replace(snaps[1], measurements=(bw("node1", 391.0), bw("node2", 120.0)))
    path = record_snaps(tmp_path, *snaps)
    with History.open(path, readonly=True) as h:
        [chart] = measurement_charts(h, h.sweeps(10))
    assert (chart.check, chart.name, chart.unit, chart.things) == ("ib.pairs", "ib_write_bw_best", "Gb/s", 2)
    assert [(name, [v for _, v in points]) for name, _, points in chart.series] == [
        ("node1 mlx5_0", [390.0, 391.0, 392.0]),
        ("node2 mlx5_0", [120.0]),
    ]
    figure = page_of(path).split('<figure class="chart"')[1].split("</figure>")[0]
    assert 'data-check="ib.pairs" data-name="ib_write_bw_best" data-series="2"' in figure
    assert figure.count('<g class="series"') == 2


def test_many_measured_things_are_the_median_the_minimum_and_the_lowest(tmp_path):
    nodes = [f"node{i}" for i in range(SERIES_MAX + 3)]
    snaps = [
        replace(
            snap_of(f"run{k}", k, [], nodes=tuple(nodes)),
            measurements=tuple(bw(n, 100.0 + i) for i, n in enumerate(nodes)),
        )
        for k in range(2)
    ]
    path = record_snaps(tmp_path, *snaps)
    with History.open(path, readonly=True) as h:
        [chart] = measurement_charts(h, h.sweeps(10))
    names = [name for name, _, _ in chart.series]
    assert names == [f"median of {len(nodes)}", "minimum", *[f"lowest: node{i} mlx5_0" for i in range(LOWEST_SHOWN)]]
    assert [v for _, v in chart.series[1][2]] == [100.0, 100.0]
    assert [v for _, v in chart.series[0][2]] == [107.0, 107.0]


# ---------------------------------------------------------------- nodecheck history --html


def test_history_html_writes_the_page_and_prints_its_path(tmp_path, capsys):
    path, _ = recorded(tmp_path, previous_report(), current_report())
    out = tmp_path / "fleet.html"
    assert cli.main(["history", "--history", str(path), "--html", str(out)]) == 0
    assert capsys.readouterr().out == f"{out}\n"
    assert len(CELL.findall(out.read_text())) == 8
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o640  # a report file's mode: not for others
    assert cli.main(["history", "--history", str(path), "--html", "-"]) == 0
    assert capsys.readouterr().out.startswith("<!DOCTYPE html>")


def test_history_html_without_a_history_or_with_no_sweep_is_bad_input_naming_the_file(tmp_path, capsys):
    missing = tmp_path / "none.sqlite"
    assert cli.main(["history", "--history", str(missing), "--html", str(tmp_path / "f.html")]) == 64
    assert f"no sweep history at {missing}" in capsys.readouterr().err
    empty = tmp_path / "empty.sqlite"
    History.open(empty).close()
    assert cli.main(["history", "--history", str(empty), "--html", str(tmp_path / "f.html")]) == 64
    assert f"--history: no sweep recorded in {empty}" in capsys.readouterr().err
    assert not (tmp_path / "f.html").exists()


@pytest.mark.parametrize("argv", [["--node", "node1"], ["--show", "counters"], ["--format", "json"], ["--last", "61"]])
def test_history_html_refuses_what_the_page_does_not_do(tmp_path, capsys, argv):
    path, _ = recorded(tmp_path, previous_report(), current_report())
    assert cli.main(["history", "--history", str(path), "--html", str(tmp_path / "f.html"), *argv]) == 64
    assert "nodecheck: error: --html" in capsys.readouterr().err


# ---------------------------------------------------------------- the sweep's own fleet.html


def test_a_sweep_writes_fleet_html_in_its_report_directory(tmp_path, capsys, canned):
    canned += [previous_report(), current_report()]
    sweep(tmp_path)
    capsys.readouterr()
    sweep(tmp_path)
    out = capsys.readouterr().out
    report_dir = tmp_path / "reports" / "20261129T110230Z_sweep"
    page = (report_dir / "fleet.html").read_text()
    assert f"fleet page: {report_dir / 'fleet.html'}\n" in out
    assert len(CELL.findall(page)) == 8  # both sweeps, this one included
    assert "repeat offenders (not healthy in at least 2 of the last 3 sweeps)" in page  # the sweep's own text


def test_a_fleet_page_that_cannot_be_drawn_is_a_warning_not_a_failed_sweep(tmp_path, capsys, canned, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(fleet_page, "render_fleet", broken)
    canned += [previous_report()]
    assert sweep(tmp_path) == 2  # as without the page: node2 fails
    captured = capsys.readouterr()
    report_dir = tmp_path / "reports" / "20261129T100000Z_sweep"
    assert f"nodecheck: warning: could not draw the fleet page {report_dir / 'fleet.html'}: RuntimeError: boom" in (
        captured.err
    )
    assert not (report_dir / "fleet.html").exists() and "fleet page:" not in captured.out
    assert captured.out.splitlines()[-1] == f"report: {report_dir}"


@pytest.mark.parametrize(
    "nodes, keep, shown", [(16, 720, 60), (200, 720, 50), (1000, 720, 10), (5000, 720, 10), (16, 3, 3), (16, 0, 60)]
)
def test_the_sweeps_own_page_shows_as_many_sweeps_as_a_bounded_grid_holds(nodes, keep, shown):
    assert sweeps_on_page(nodes, keep) == shown


def test_the_sweeps_table_links_each_kept_report_relatively(tmp_path):
    kept = tmp_path / "reports" / "run1"
    kept.mkdir(parents=True)
    (kept / "report.html").write_text("x")
    path = tmp_path / "h.sqlite"
    with History.open(path) as h:
        h.record(snap_of("run1", 0, [("node1", "node.oom", P, "ok")]), str(kept), "0.1.0")
        h.record(snap_of("run2", 1, [("node1", "node.oom", P, "ok")]), str(tmp_path / "gone"), "0.1.0")
    page = page_of(path, links_from=tmp_path / "reports" / "run2")
    assert page.count("<a href=") == 1 + page.count('<a href="#')  # the gone report is no link
    assert '<a href="../run1/report.html">report.html</a>' in page


# ---------------------------------------------------------------- in a real browser (tests/browser/chromium.py)


def test_the_page_in_a_browser_loads_nothing_logs_nothing_and_a_click_shows_the_results(tmp_path, browser):
    from tests.browser.chromium import errors, foreign_requests

    path, _ = recorded(tmp_path, previous_report(), current_report())
    page = tmp_path / "fleet.html"
    page.write_text(page_of(path))
    browser.load(page)  # the first page of a fresh browser logs its own chrome:// start-up requests
    loaded = browser.load(page)
    assert errors(loaded) == [] and foreign_requests(loaded) == []
    assert len(browser.css("svg.grid rect.cell")) == 8
    [cell] = browser.css('rect.cell[data-node="node2"][data-sweep="20261129T100000Z_sweep"]')
    browser.script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", cell)
    assert browser.one("#cell-detail").text.splitlines() == [
        "node2 in 20261129T100000Z_sweep: FAIL",
        "ib.ports fail: mlx5_3/1: Down/Polling, expected Active/LinkUp",
        "gpu.xid fail: Xid 79 on PCI:0000:b3:00: GPU has fallen off the bus",
        "node.oom fail: OOM killed python3 2x in 24h, expected none",
    ]
