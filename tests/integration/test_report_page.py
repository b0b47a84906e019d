"""The demo's report.html in a real browser (Debian's headless chromium through chromium-driver),
and `nodecheck report show` against the run that wrote it: the README's demo layout (DEMO: one
fault per node, node9's HCAs slow in every pair test) run once for the module."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from harness.scenarios import DEMO, apply
from integration.runs import nodecheck

from tests.browser.chromium import errors, foreign_requests, page_requests

REPO = Path(__file__).resolve().parents[2]
SCREENSHOT = REPO / "reports" / "demo-report.png"  # CI's artefact; the README's picture is docs/images/


@dataclass
class Demo:
    dir: Path
    stdout: str
    stderr: str
    doc: dict


@pytest.fixture(scope="module")
def demo(cluster, tmp_path_factory) -> Demo:
    # the demo's nodes run their own daemons, slurmd among them: a real Slurm an earlier test left up
    # would be a second slurmd on each node, which `limits` rightly refuses to choose between
    cluster.slurm_down()
    apply(cluster, DEMO)
    out = tmp_path_factory.mktemp("demo-reports")
    code, stdout, stderr, _ = nodecheck(
        "run", str(cluster.inventory_path), "--playbook", "demo", "--output-dir", str(out), "--html"
    )
    assert code == 2, stderr
    [report] = out.iterdir()
    return Demo(report, stdout, stderr, json.loads((report / "report.json").read_text()))


def test_the_run_writes_report_html_and_says_where(demo):
    page = demo.dir / "report.html"
    assert f"report.html: {page}" in demo.stderr.splitlines()
    assert page.stat().st_mode & 0o777 == (demo.dir / "report.json").stat().st_mode & 0o777
    assert "node9" in page.read_text()


def test_report_show_reproduces_the_runs_table_byte_for_byte(demo):
    table = demo.stdout[: demo.stdout.rindex("report: ")]  # the run's last line says where the report went
    code, shown, err, _ = nodecheck("report", "show", str(demo.dir))
    assert (code, shown) == (2, table), err
    code, shown, err, _ = nodecheck("report", "show", str(demo.dir), "--format", "json")
    assert (code, json.loads(shown)) == (2, demo.doc), err
    code, shown, err, _ = nodecheck("report", "show", str(demo.dir), "--format", "junit")
    assert code == 2 and shown.startswith("<?xml") and 'name="node9"' in shown, err


def test_report_html_rebuilds_the_same_page_from_the_stored_report(demo, tmp_path):
    copy = tmp_path / demo.dir.name
    shutil.copytree(demo.dir, copy)
    (copy / "report.html").unlink()
    code, out, err, _ = nodecheck("report", "html", str(copy))
    assert (code, out.strip()) == (0, str(copy / "report.html")), err
    assert (copy / "report.html").read_text() == (demo.dir / "report.html").read_text()


def test_the_page_loads_with_no_console_error_and_no_network_request(demo, browser):
    loaded = browser.load(demo.dir / "report.html")
    assert errors(loaded) == []
    assert foreign_requests(loaded) == []
    assert page_requests(loaded) == [loaded.url]  # the page itself, and nothing else
    assert "FAIL" in browser.one(".verdict").text


def test_the_heatmap_has_one_cell_per_tested_pair_and_the_bad_nodes_row_is_marked(demo, browser):
    pairs = demo.doc["extras"]["ib.pairs"]
    tested = {frozenset((t["server"], t["client"])) for t in pairs["results"]}
    assert len(tested) == pairs["pairs_tested"] == 8
    browser.load(demo.dir / "report.html")
    cells = [c for c in browser.css("svg.heatmap rect.cell") if c.get_attribute("data-status") != "untested"]
    drawn = [frozenset((c.get_attribute("data-a"), c.get_attribute("data-b"))) for c in cells]
    assert sorted(map(sorted, drawn)) == sorted(map(sorted, tested))  # one cell each, no more
    failed = {
        frozenset((c.get_attribute("data-a"), c.get_attribute("data-b")))
        for c in cells
        if c.get_attribute("data-status") == "fail"
    }
    assert failed and all("node9" in pair for pair in failed)
    blamed = browser.css("svg.heatmap .blamed")
    assert blamed and {b.get_attribute("data-node") for b in blamed} == {"node9"}


def test_clicking_a_failing_node_shows_its_captures(demo, browser):
    browser.load(demo.dir / "report.html")
    browser.one('ul.unhealthy a.nodelink[data-node="node3"]').click()
    section = browser.one("#node-node3")
    assert section.is_displayed()
    links = [a.get_attribute("href") for a in section.find_elements("css selector", "a.capture") if a.is_displayed()]
    assert any(href.endswith("/captures/node3/ibstat.txt") for href in links), links
    assert (demo.dir / "captures/node3/ibstat.txt").is_file()
    assert "mlx5_3/1: Down/Polling" in section.text


def test_a_screenshot_of_the_demo_report_is_kept_under_reports(demo, browser):
    browser.load(demo.dir / "report.html")
    SCREENSHOT.parent.mkdir(exist_ok=True)
    assert browser.driver.save_screenshot(str(SCREENSHOT))
    assert SCREENSHOT.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and SCREENSHOT.stat().st_size > 20_000
