"""report.html of one run (nodecheck.report.html): the page's sections, its safety (hostile text
renders as text, nothing is fetched), the heatmap's cells, and rebuilding it from a report directory."""

from __future__ import annotations

import json
import os
import re
from dataclasses import replace
from pathlib import Path
from urllib.parse import unquote

import pytest
from markupsafe import escape

from nodecheck.checks.ib_pairs import PairsReport, RailResult
from nodecheck.core.errors import ConfigError
from nodecheck.core.model import CheckResult, Evidence, Status, Verdict
from nodecheck.report import Report, capture_relpath
from nodecheck.report.html import CONTENT_SECURITY_POLICY
from nodecheck.report.html import sections as S
from nodecheck.report.html.embed import script_json
from nodecheck.report.html.files import rebuild
from nodecheck.report.html.nccl import busbw_points, charts
from nodecheck.report.html.pairs import pair_view
from nodecheck.report.html.run_page import render_run
from nodecheck.report.json import from_dict
from nodecheck.report.store import store
from nodecheck.report.stored import capture_reader
from tests.helpers import DATA
from tests.report.html_fixtures import synthetic_report

DEMO = DATA / "html" / "derived-demo-run.json"
HOSTILE = "<script>alert(1)</script>"


def _texts(report: Report) -> dict[str, str]:
    return {capture_relpath(c.node, c.probe): c.stdout for c in report.captures}


def _page(report: Report) -> str:
    return render_run(report, _texts(report).get)


def _section(html: str, name: str) -> str:
    start = html.index(f'<section id="{name}">')
    return html[start : html.index("</section>", start)]


@pytest.fixture(scope="module")
def demo_data() -> dict:
    return json.loads(DEMO.read_text())


@pytest.fixture
def demo_dir(tmp_path: Path, demo_data: dict) -> Path:
    """The demo run stored as `nodecheck run` stores one: report.json, summary.txt, captures/."""
    texts = demo_data["captures"]
    by_probe = {
        (c["node"], c["probe"]): (texts.get(c["stdout"], ""), texts.get(c["stderr"] or "", ""))
        for c in demo_data["report"]["captures"]
    }
    report = from_dict(demo_data["report"], by_probe)
    return store(report, "summary\n", tmp_path / "reports")


@pytest.fixture(scope="module")
def sixteen() -> Report:
    return synthetic_report(16, "gpu0007")


@pytest.fixture(scope="module")
def sixteen_html(sixteen: Report) -> str:
    return _page(sixteen)


# ------------------------------------------------------------------------------ the demo run


def test_the_demo_rebuilds_with_every_node_section_and_capture_links_that_exist(demo_dir: Path, demo_data: dict):
    path = rebuild(demo_dir)
    assert path == demo_dir / "report.html"
    html = path.read_text()
    for node in demo_data["report"]["nodes"]:
        assert f'id="node-{node["node"]}"' in html
    links = re.findall(r'<a class="capture" href="([^"]+)"', html)
    assert len(links) >= 30
    for href in links:
        assert (demo_dir / unquote(href)).is_file(), href
    # a failing node's section is open and lists its captures; a healthy one is closed
    node9 = html[html.index('<details class="node" id="node-node9"') :]
    assert " open" in node9[: node9.index(">")]
    assert "captures/node9/nccl_all_reduce.txt" in node9[: node9.index("</details>")]
    node1 = html[html.index('<details class="node" id="node-node1"') :]
    assert " open" not in node1[: node1.index(">")]
    for banned in ("<link", "src=", "<img", "<iframe", "http://", "https://"):
        assert banned not in html, banned


def test_report_html_has_the_mode_of_report_json(demo_dir: Path):
    path = rebuild(demo_dir)
    assert (path.stat().st_mode & 0o777) == ((demo_dir / "report.json").stat().st_mode & 0o777)


def test_the_demo_page_shows_verdict_counts_and_unhealthy_nodes_first(demo_dir: Path):
    html = rebuild(demo_dir).read_text()
    top = _section(html, "summary")
    assert '<div class="verdict st st-fail">FAIL</div>' in top
    assert '<span class="st st-fail">7 fail</span>' in top
    assert '<span class="st st-unreachable">1 unreachable</span>' in top
    assert 'href="#node-node9"' in top and "ib.pairs: bad node" in top
    assert "cba57daeab57" in top  # the playbook's sha256, short
    assert top.index("Unhealthy nodes") < top.index("<th>playbook</th>")


def test_the_demo_heatmap_blames_node9(demo_dir: Path):
    pairs = _section(rebuild(demo_dir).read_text(), "pairs")
    cells = re.findall(r'<rect class="cell[^"]*" data-a="([^"]+)" data-b="([^"]+)" data-status="(\w+)"', pairs)
    assert len(cells) == 8  # pairs_tested
    assert {frozenset((a, b)) for a, b, s in cells if s == "fail"} == {
        frozenset(("node7", "node9")),
        frozenset(("node9", "node10")),
    }
    assert re.search(r'<text class="blamed" data-node="node9"', pairs)
    assert "Fail floor 320 Gb/s, warn below 360 Gb/s" in pairs


def test_the_demo_heatmap_says_which_nodes_it_could_not_test_and_why(demo_dir: Path):
    pairs = _section(rebuild(demo_dir).read_text(), "pairs")
    left_out = pairs[pairs.index('<p class="left-out">') :]
    left_out = left_out[: left_out.index("</p>")]
    assert "Not in the pair test (2):" in left_out
    assert re.findall(r'data-node="(node\d+)"><code>\1</code></a> \(([^;]+?)\)(?:;|$)', left_out) == [
        ("node6", "ibstat timed out: no answer within 5 s"),
        ("node8", "unreachable: connection refused by 127.0.1.8:22 (no sshd listening)"),
    ]


def test_the_demo_nccl_charts_draw_each_run_with_its_threshold(demo_dir: Path):
    nccl = _section(rebuild(demo_dir).read_text(), "nccl")
    assert nccl.count('<svg class="chart"') == 2  # single-node runs; the 9-node test and its pairs
    assert "fail below 400 GB/s" in nccl and "fail below 300 GB/s" in nccl
    assert nccl.count('<g class="series" data-status="fail">') >= 3  # the 9-node test and node9's 2 pairs


def test_busbw_points_read_a_capture(demo_data: dict):
    points, run = busbw_points(demo_data["captures"]["captures/node9/nccl_all_reduce.txt"])
    assert run is not None and len(points) == 31
    assert points[0][0] == 8.0 and points[-1][0] == float(8 << 30)
    assert max(y for _, y in points) > 400


def test_a_hung_run_says_its_stage():
    report = synthetic_report(4, "gpu0002")
    hung = [
        replace(
            r,
            verdict=replace(
                r.verdict,
                status=Status.FAIL,
                message="all_reduce: hung in NCCL init, killed after 60 s",
                observed={"stage": "init"},
            ),
        )
        if r.check == "nccl.allreduce_single" and r.nodes == ("gpu0003",)
        else r
        for r in report.results
    ]
    [chart] = charts(replace(report, results=tuple(hung)), _texts(report).get)
    assert any(n.startswith("gpu0003: stopped at stage 'init'") for n in chart.notes)


def test_drift_highlights_the_minority(demo_dir: Path):
    drift = _section(rebuild(demo_dir).read_text(), "drift")
    digest = drift[drift.index("<h3>container.digest") :]
    digest = digest[: digest.index("</table>")]
    assert re.search(r'<tr class="minority"><td class="wrap"><code>node5</code>', digest)
    assert re.search(r'<tr class="majority"><td class="wrap"><code>node\[1-4,6-7,9-10\]</code>', digest)
    assert "node8" not in digest  # unreachable: no value, named under the table


def test_counters_show_deltas_rates_and_classes(demo_dir: Path):
    counters = _section(rebuild(demo_dir).read_text(), "counters")
    row = re.search(r"<td>LinkDownedCounter</td><td>([a-z_]+)</td><td class=\"num\">([^<]*)</td>", counters)
    assert row is not None and row.groups() == ("fail_on_increase", "+1")
    assert "<td>SymbolErrorCounter</td><td>rate</td>" in counters


# ------------------------------------------------------------------------------- safety


def _hostile_report() -> Report:
    base = synthetic_report(4, "gpu0002")
    node = HOSTILE
    nodes = ((node, "10.9.9.9"), *base.nodes)
    result = CheckResult(
        "gpu.count",
        (node,),
        Verdict(
            Status.FAIL,
            f"message {HOSTILE}",
            f"subject {HOSTILE}",
            {"k": HOSTILE},
            {"k": HOSTILE},
            excerpt=f"excerpt {HOSTILE}",
        ),
        (Evidence(node, "ibstat", ("x",), 0, f"captures/{HOSTILE}/ibstat.txt"),),
    )
    extras = json.loads(json.dumps(base.extras))
    extras["ib.pairs"]["bad_nodes"].append(HOSTILE)
    extras["ib.pairs"]["matrix_gbps"][HOSTILE] = {"gpu0001": 10.0}
    extras["ib.pairs"]["evidence"][HOSTILE] = HOSTILE
    return replace(base, nodes=nodes, results=(*base.results, result), extras=extras)


def test_hostile_text_renders_as_text():
    html = _page(_hostile_report())
    assert "<script>alert" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # the node name, message, excerpt
    assert "message &lt;script&gt;" in html and "excerpt &lt;script&gt;" in html
    assert 'href="captures/%3Cscript%3Ealert%281%29%3C/script%3E/ibstat.txt"' in html
    assert 'href="#node-%3Cscript%3Ealert%281%29%3C%2Fscript%3E"' in html


def test_hostile_text_in_embedded_json_cannot_close_the_script():
    report = _hostile_report()
    many = synthetic_report(80, "gpu0002")  # lazy node rows and the aggregated matrix: embedded JSON
    extras = json.loads(json.dumps(many.extras))
    extras["ib.pairs"]["matrix_gbps"].setdefault("gpu0001", {})[HOSTILE] = 10.0
    html = _page(
        replace(many, nodes=(*many.nodes, (HOSTILE, "x")), results=(*many.results, *report.results[-1:]), extras=extras)
    )
    assert "<script>alert" not in html and "</script>alert" not in html
    assert html.count("<script") == html.count("</script>")
    assert "\\u003cscript\\u003ealert(1)\\u003c/script\\u003e" in html


def test_script_json_escapes_markup_characters():
    text = script_json({"a": "</script><!--&"})
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == {"a": "</script><!--&"}


def test_the_page_loads_nothing_from_anywhere(sixteen_html: str):
    head = sixteen_html[sixteen_html.index("<head>") : sixteen_html.index("</head>")]
    first = re.search(r"<head>\s*(<[^>]+>)", sixteen_html).group(1)
    assert first == f'<meta http-equiv="Content-Security-Policy" content="{escape(CONTENT_SECURITY_POLICY)}">'
    assert "<title>" in head
    for banned in ("http://", "https://", "//cdn", "<link", "src="):
        assert banned not in sixteen_html, banned


def test_the_page_is_printable(sixteen_html: str):
    assert "@media print" in sixteen_html
    assert "beforeprint" in sixteen_html


# ------------------------------------------------------------------------------- heatmap


def test_one_heatmap_cell_per_tested_pair_at_16_nodes(sixteen: Report, sixteen_html: str):
    pairs = _section(sixteen_html, "pairs")
    cells = re.findall(r'<rect class="cell[^"]*" data-a="([^"]+)" data-b="([^"]+)"', pairs)
    assert len(cells) == sixteen.extras["ib.pairs"]["pairs_tested"] == 16
    assert len({frozenset(c) for c in cells}) == 16
    assert pairs.count('class="rail-cell') == 16 * 8  # the per-rail views: their own class


def test_the_blamed_node_row_and_column_are_marked(sixteen_html: str):
    section = _section(sixteen_html, "pairs")
    pairs = section[section.index("<svg") : section.index("</svg>")]  # the main heatmap, not the per-rail ones
    assert len(re.findall(r'<text class="blamed" data-node="gpu0007"', pairs)) == 2  # row and column header
    assert len(re.findall(r'<rect class="blamed-band" data-node="gpu0007"', pairs)) == 2
    assert not re.search(r'<text class="blamed" data-node="gpu0006"', pairs)
    failed = re.findall(r'data-a="([^"]+)" data-b="([^"]+)" data-status="fail"', pairs)
    assert all("gpu0007" in pair for pair in failed) and len(failed) == 2


def test_untested_pairs_are_distinct_from_failed_ones(sixteen: Report):
    extras = json.loads(json.dumps(sixteen.extras))
    data = extras["ib.pairs"]
    data["results"].append(
        {
            "round": 2,
            "server": "gpu0003",
            "client": "gpu0012",
            "device": "mlx5_0",
            "status": "skipped",
            "gbps": None,
            "message": "not run: deadline",
        }
    )
    data["matrix_gbps"]["gpu0003"]["gpu0012"] = None
    data["matrix_gbps"].setdefault("gpu0012", {})["gpu0003"] = None
    pairs = _section(_page(replace(sixteen, extras=extras)), "pairs")
    untested = re.search(
        r'<rect class="cell" data-a="gpu0003" data-b="gpu0012" data-status="untested"[^>]*fill="([^"]+)"', pairs
    )
    failed = re.search(
        r'<rect class="cell" data-a="gpu0006" data-b="gpu0007" data-status="fail"[^>]*fill="([^"]+)"', pairs
    )
    assert untested is not None and failed is not None
    assert untested.group(1).startswith("url(#") and failed.group(1).startswith("#")
    # a pair never planned has no cell at all: the hatched background shows
    assert 'data-a="gpu0001" data-b="gpu0005"' not in pairs


def test_bad_links_are_outlined(sixteen: Report):
    extras = json.loads(json.dumps(sixteen.extras))
    extras["ib.pairs"]["bad_links"] = [["gpu0003", "gpu0004"]]
    pairs = _section(_page(replace(sixteen, extras=extras)), "pairs")
    assert re.search(r'<rect class="cell bad-link" data-a="gpu0003" data-b="gpu0004"[^>]*stroke="#1b1f24"', pairs)


def test_nodes_sort_by_rack_label_when_known():
    report = synthetic_report(8, "gpu0002")
    extras = json.loads(json.dumps(report.extras))
    extras["ib.pairs"]["groups"] = {n: ("b" if int(n[3:]) % 2 else "a") for n, _ in report.nodes}
    extras["ib.pairs"]["group_label"] = "rack"
    view = pair_view(extras, report.node_names)
    assert view is not None
    assert view.nodes == ("gpu0002", "gpu0004", "gpu0006", "gpu0008", "gpu0001", "gpu0003", "gpu0005", "gpu0007")


def test_above_64_nodes_the_heatmap_aggregates_with_the_matrix_embedded():
    report = synthetic_report(1024, "gpu0500", rack_size=64)
    html = _page(report)
    pairs = _section(html, "pairs")
    assert 'rect class="cell' not in pairs  # no node x node cells until a group is clicked
    assert 16 <= pairs.count('class="gcell"') <= 3 * 16
    assert re.search(r'<text class="blamed"[^>]*><title>r08: 64 nodes</title>', pairs)  # gpu0500's rack
    matrix = json.loads(re.search(r'<script type="application/json" id="pairs-matrix">(.*?)</script>', html).group(1))
    assert len(matrix["nodes"]) == 1024 and len(matrix["pairs"]) == 1024
    assert [matrix["nodes"][i] for i in matrix["blamed"]] == ["gpu0500"]
    # healthy nodes' rows are drawn on demand: their sections hold no result table
    rows = json.loads(re.search(r'<script type="application/json" id="node-rows">(.*?)</script>', html).group(1))
    assert len(rows["n"]) == 1022 and "gpu0500" not in rows["n"]
    assert html.count('data-lazy="1"') == 1022
    assert html.count('<table class="results">') == 2
    assert len(html) < 3_000_000


# ------------------------------------------------------------------------------- rebuild()


def test_rebuild_refuses_a_symlinked_report_json(demo_dir: Path, tmp_path: Path):
    real = tmp_path / "elsewhere.json"
    real.write_bytes((demo_dir / "report.json").read_bytes())
    (demo_dir / "report.json").unlink()
    (demo_dir / "report.json").symlink_to(real)
    with pytest.raises(ConfigError, match="symbolic link") as e:
        rebuild(demo_dir)
    assert e.value.file == str(demo_dir / "report.json")
    assert not (demo_dir / "report.html").exists()


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (None, "no report.json"),
        ("{not json", "not JSON"),
        ('{"report_version": 99}', "report_version 99, this nodecheck reads 2, 3"),
    ],
)
def test_rebuild_says_what_is_wrong_with_the_directory(tmp_path: Path, content, words):
    if content is not None:
        (tmp_path / "report.json").write_text(content)
    with pytest.raises(ConfigError, match=words) as e:
        rebuild(tmp_path)
    assert e.value.file == str(tmp_path / "report.json") and e.value.hint


def test_rebuild_of_no_directory(tmp_path: Path):
    with pytest.raises(ConfigError, match="no such report directory"):
        rebuild(tmp_path / "missing")


def test_capture_paths_escaping_the_directory_are_neither_read_nor_linked(demo_dir: Path, tmp_path: Path):
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.txt").write_text("SECRET")
    (demo_dir / "captures" / "node1" / "link.txt").symlink_to(secret)
    (demo_dir / "captures" / "out").symlink_to(outside)
    read = capture_reader(demo_dir)
    assert read("captures/node1/ibstat.txt")
    for rel in (
        "../secret.txt",
        "captures/../../secret.txt",
        str(secret),
        "captures/node1/link.txt",  # a symlink: not followed
        "captures/out/x.txt",  # a directory link leading out
        "captures\\node1\\ibstat.txt",
        "",
    ):
        assert read(rel) is None, rel
    data = json.loads((demo_dir / "report.json").read_text())
    evidence = data["nodes"][0]["results"][0]["evidence"]
    evidence.append({**evidence[0], "capture": "../secret.txt"} if evidence else {})
    data["nodes"][0]["results"][0]["evidence"] = [e for e in evidence if e] + [
        {"node": "node1", "probe": "x", "argv": 0, "exit_code": 0, "capture": "/etc/passwd"}
    ]
    (demo_dir / "report.json").write_text(json.dumps(data))
    html = rebuild(demo_dir).read_text()
    assert "secret.txt" not in html and "/etc/passwd" not in html and "SECRET" not in html


def test_store_writes_report_html_redacted(tmp_path: Path, sixteen: Report):
    page = "<p>HF_TOKEN=hf_s3cr3tvalue</p>"
    where = store(sixteen, "summary\n", tmp_path, html=page)
    written = (where / "report.html").read_text()
    assert "hf_s3cr3tvalue" not in written and "HF_TOKEN=" in written
    assert (where / "report.html").stat().st_mode & 0o777 == (where / "report.json").stat().st_mode & 0o777


def test_store_without_html_writes_none(tmp_path: Path, sixteen: Report):
    where = store(sixteen, "summary\n", tmp_path)
    assert not (where / "report.html").exists()


# ------------------------------------------------------------------------ the data, pure


def test_unhealthy_groups_fold_identical_reasons():
    report = synthetic_report(8, "gpu0002")
    down = [
        CheckResult("ib.ports", (n,), Verdict(Status.FAIL, f"{n}: mlx5_3/1 Down, expected Active", "mlx5_3/1"))
        for n in ("gpu0004", "gpu0005", "gpu0006")
    ]
    groups = S.unhealthy_groups(replace(report, results=(*report.results, *down)))
    folded = {g.folded: g for g in groups}
    assert folded["gpu[0004-0006]"].reason == "ib.ports: <node>: mlx5_3/1 Down, expected Active"
    assert folded["gpu[0004-0006]"].nodes == ("gpu0004", "gpu0005", "gpu0006")


def test_node_sections_put_unhealthy_nodes_first(sixteen: Report):
    order = [n.name for n in S.node_sections(sixteen)]
    assert order[:2] == ["gpu0007", "gpu0016"] and order[2:] == [
        f"gpu{i:04d}" for i in range(1, 17) if i not in (7, 16)
    ]


def test_compact_observed_values():
    assert S.compact(
        {"gbps": 150.0, "tests": [1, 2, 3, 4, 5, 6, 7], "ok": True, "none": None, "snapshot": {"x": 1}}
    ) == ("gbps=150 tests=[7 items] ok=true none=none")


def test_incomplete_run_says_why():
    report = replace(synthetic_report(4, "gpu0002"), complete=False, incomplete_reason="the run deadline was reached")
    top = _section(_page(report), "summary")
    assert "INCOMPLETE: the run deadline was reached" in top


def test_pairs_report_json_carries_rack_labels_when_grouped():
    rail = RailResult(1, "a", "b", "mlx5_0", Status.FAIL, 150.0, "slow", floor=320.0)
    made = PairsReport("ring", 1, (rail,), 1, 1, {"a": {"b": 150.0}}, (), (), (), {}, {"a": "r1", "b": "r2"}, "rack")
    data = made.as_json([])
    assert data["groups"] == {"a": "r1", "b": "r2"} and data["group_label"] == "rack"
    assert data["results"][0]["floor"] == 320.0
    plain = PairsReport("ring", 1, (rail,), 1, 1, {}, (), (), (), {})
    assert "groups" not in plain.as_json([])


def test_the_rounds_after_the_plans_are_marked_localization():
    rails = tuple(
        RailResult(rnd, a, b, "mlx5_0", Status.PASS if rnd < 3 else Status.FAIL, 150.0, "m", floor=100.0)
        for rnd, a, b in ((1, "a", "b"), (2, "b", "c"), (3, "a", "c"))
    )
    made = PairsReport("ring", 3, rails, 3, 3, {}, (), (), (), {}, planned_rounds=2)
    view = pair_view({"ib.pairs": made.as_json([])}, ["a", "b", "c"])
    assert view is not None
    assert [(r.round, r.kind) for r in view.rounds] == [(1, "planned"), (2, "planned"), (3, "localization")]
    older = {k: v for k, v in made.as_json([]).items() if k != "planned_rounds"}  # a report before the count
    unknown = pair_view({"ib.pairs": older}, ["a", "b", "c"])
    assert unknown is not None and [r.kind for r in unknown.rounds] == ["", "", ""]
    html = _page(replace(synthetic_report(4, "gpu0002"), extras={"ib.pairs": made.as_json([])}))
    assert '<tr class="localization"><td class="num">3</td><td>localization</td>' in _section(html, "pairs")


def test_synthetic_report_is_fast_and_whole():
    report = synthetic_report(1024, "gpu0007")
    assert len(report.nodes) == 1024
    assert report.node_status("gpu0007") is Status.FAIL
    assert report.extras["ib.pairs"]["pairs_tested"] == 1024
    assert os.path.basename(capture_relpath("gpu0001", "nccl_all_reduce")) == "nccl_all_reduce.txt"


# --------------------------------------------------------------------- every run writes it


def test_a_run_writes_report_html_and_html_prints_its_path(tmp_path: Path, capsys, sixteen: Report):
    from argparse import Namespace

    from nodecheck.app.publish import publish

    code = publish(sixteen, Namespace(output_dir=str(tmp_path), format="table", html=True, metrics=None))
    out, err = capsys.readouterr()
    [line] = [ln for ln in err.splitlines() if ln.startswith("report.html: ")]
    page = Path(line.removeprefix("report.html: "))
    assert page.is_file() and page.parent == Path(out.splitlines()[-1].removeprefix("report: "))
    assert 'id="node-gpu0007"' in page.read_text()
    assert code == sixteen.exit_code
    publish(sixteen, Namespace(output_dir=str(tmp_path / "b"), format="json", html=False, metrics=None))
    assert "report.html:" not in capsys.readouterr().err
    assert len(list((tmp_path / "b").glob("*/report.html"))) == 1


def test_run_takes_html():
    from nodecheck.cli.parser import build_parser

    assert build_parser().parse_args(["run", "--html"]).html is True
    assert build_parser().parse_args(["run"]).html is False


def test_every_port_shows_its_counter_deltas_from_the_two_reads(demo_dir: Path):
    counters = _section(rebuild(demo_dir).read_text(), "counters")
    ports = counters[counters.index('<details class="ports"') :]
    first = re.search(r"<tr><td>node10</td><td>mlx5_3/1</td><td><span class=\"st st-fail\">.*?</tr>", ports)
    assert first is not None and ports.index("mlx5_3/1") < ports.index("mlx5_0/1")  # changed ports first
    assert "LinkDownedCounter +1 (fail_on_increase, 127.4/h)" in first.group(0)
    assert "SymbolErrorCounter +42 (rate, 5350/h)" in first.group(0)
    assert ports.count("<tr><td>node10</td>") == 8 and "none changed" in ports


def test_extras_of_any_shape_do_not_break_the_page():
    report = synthetic_report(4, "gpu0002")
    odd = {
        "ib.pairs": {"matrix_gbps": [1, 2], "results": "x", "bad_nodes": 5, "evidence": [], "groups": "r1"},
        "nccl.allreduce_multi": {"tests": [{"pairs": 3, "hang": "init", "nodes": 7}, "x"]},
    }
    html = _page(replace(report, extras=odd))
    assert 'id="node-gpu0002"' in html and "the whole test hung: init" in html


def test_a_run_with_nothing_judged_renders():
    report = replace(synthetic_report(2, "gpu0002"), results=(), captures=(), extras={})
    html = _page(report)
    assert '<div class="verdict st st-error">ERROR</div>' in html
    assert 'id="pairs"' not in html and 'id="nccl"' not in html
    assert html.count('<details class="node"') == 2


# ------------------------------------------------------------------------------- size


def test_a_fleet_wide_failure_draws_only_the_first_unhealthy_nodes_up_front():
    """Every node of a 100-node run failing (a shared mount hung everywhere): 32 nodes' rows drawn,
    the other 68 drawn when opened, with their excerpts; the page stays a page, not every row."""
    from nodecheck.report.html.run_page import EAGER_UNHEALTHY

    base = synthetic_report(100, "gpu0050")
    hung = tuple(
        CheckResult(
            "fs.mounts",
            (node,),
            Verdict(Status.TIMEOUT, "fs-mounts probe timed out", excerpt="x" * 10_000),
        )
        for node in base.node_names
    )
    html = _page(replace(base, results=(*base.results, *hung)))
    nodes = _section(html, "nodes")
    assert len(re.findall(r'<details class="node"[^>]* open>', nodes)) == EAGER_UNHEALTHY == 32
    assert nodes.count('data-lazy="1"') == 100 - 32
    assert nodes.count("fs-mounts probe timed out") == 32  # the others' rows are in the embedded JSON
    # an excerpt is bounded on the page; the whole output is the capture's
    assert "x" * 2000 + "\n… (8,000 more characters: see the capture)" in html
    assert "x" * 2001 not in html
    rows = json.loads(re.search(r'<script type="application/json" id="node-rows">(.*?)</script>', html, re.S)[1])
    lazy_unhealthy = rows["n"]["gpu0099"]["r"]
    strings = rows["s"]
    assert any(strings[r[0]] == "timeout" and strings[r[7]].startswith("x" * 100) for r in lazy_unhealthy)


def test_the_stored_page_is_the_rendered_page_its_scripts_untouched_by_masking(demo_dir: Path):
    """report.html is masked as a whole before it is written (report/store: the last line of defence).
    Masking must find nothing to mask in the page's own code: `ev.key === "Enter"` became
    `ev.key =<redacted>` once masking took `NAME = value` with blanks (issue 32, 1.10), and every
    script on the page stopped with a SyntaxError."""
    from nodecheck.core.redact import redact_text

    page = rebuild(demo_dir).read_text()  # written as `run --html` writes it: masked, atomically
    scripts = re.findall(r"<script>(.*?)</script>", page, re.S)
    assert len(scripts) >= 2 and all("<redacted>" not in s for s in scripts)
    for script in scripts:
        assert redact_text(script) == script


def test_the_top_lists_a_nodes_failures_before_what_could_not_be_judged():
    report = synthetic_report(4, "gpu0002")
    unable = "cannot read the tool's output: " + "x" * 90
    late = [
        *(CheckResult(c, ("gpu0003",), Verdict(Status.ERROR, f"{unable} ({c})")) for c in ("cpu", "mem", "pcie.acs")),
        CheckResult("services", ("gpu0003",), Verdict(Status.FAIL, "slurmd inactive (dead), expected active")),
        CheckResult("time.sync", ("gpu0003",), Verdict(Status.TIMEOUT, "chronyc did not answer within 5 s")),
    ]
    report = replace(report, results=(*report.results, *late))
    group = next(g for g in S.unhealthy_groups(report) if g.folded == "gpu0003")
    assert group.reason.startswith(
        "services: slurmd inactive (dead), expected active; time.sync: chronyc did not answer within 5 s; cpu: "
    )
    top = _section(_page(report), "summary")
    assert "services: slurmd inactive (dead), expected active; time.sync: chronyc did not answer" in top
    rows = next(n for n in S.node_sections(report) if n.name == "gpu0003").rows
    assert [r.check for r in rows][:2] == ["services", "time.sync"]
