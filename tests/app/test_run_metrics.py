"""`run --metrics FILE`: a plain run writes the Prometheus textfile a sweep writes (report/metrics.py),
atomically, with every node's status; a file that cannot be written keeps the run from exiting 0 or 1."""

from __future__ import annotations

import dataclasses
import stat
from argparse import Namespace

import pytest

from nodecheck.app.publish import publish, write_metrics
from nodecheck.cli import main
from nodecheck.core.model import Status
from nodecheck.report import metrics, table
from nodecheck.report.diff import snapshot
from tests.report.test_report import result, sample


def args(tmp_path, metrics_path=None, fmt="table") -> Namespace:
    return Namespace(output_dir=str(tmp_path / "reports"), format=fmt, metrics=metrics_path)


def test_a_run_writes_the_textfile_with_every_node_s_status(tmp_path, capsys):
    report = sample()  # gpu001-004 pass, gpu005 fail, gpu006 unreachable
    prom = tmp_path / "textfile" / "nodecheck.prom"
    prom.parent.mkdir()
    assert publish(report, args(tmp_path, str(prom))) == 2
    text = prom.read_text(encoding="utf-8")
    assert text == metrics.render(snapshot(report), run=True)
    assert 'nodecheck_run_node_status{node="gpu001"} 0\n' in text
    assert 'nodecheck_run_node_status{node="gpu005"} 6\n' in text  # fail
    assert 'nodecheck_run_node_status{node="gpu006"} 5\n' in text  # unreachable
    assert 'nodecheck_run_check_status{node="gpu005",check="ib.ports"} 6\n' in text
    assert 'nodecheck_run_nodes{status="pass"} 4\n' in text
    assert "nodecheck_run_problems 0\n" in text
    assert "# HELP nodecheck_run_node_status The node's worst status in the run: 0 pass," in text
    assert stat.S_IMODE(prom.stat().st_mode) == 0o644  # node_exporter reads it as its own user
    assert [p.name for p in prom.parent.iterdir()] == ["nodecheck.prom"]  # no temporary left
    out = capsys.readouterr().out
    assert out.startswith(table.render(report))  # the table is printed as without --metrics


def test_the_textfile_is_replaced_whole_on_the_next_run(tmp_path):
    prom = tmp_path / "nodecheck.prom"
    prom.write_text("old\n", encoding="utf-8")
    passing = dataclasses.replace(sample(2), results=(result("gpu001", Status.PASS, "ok"),), captures=())
    passing = dataclasses.replace(passing, nodes=passing.nodes[:1])
    assert write_metrics(passing, str(prom)) == ""  # written: no problem to tell
    text = prom.read_text(encoding="utf-8")
    assert "old" not in text
    assert 'nodecheck_run_node_healthy{node="gpu001"} 1\n' in text


def test_no_metrics_asked_writes_none(tmp_path, capsys):
    assert publish(sample(), Namespace(output_dir=str(tmp_path / "reports"), format="table")) == 2
    assert not list(tmp_path.glob("**/*.prom"))


def test_a_textfile_that_cannot_be_written_keeps_a_passing_run_from_exiting_0(tmp_path, capsys):
    passing = dataclasses.replace(sample(2), results=(result("gpu001", Status.PASS, "ok"),), captures=())
    passing = dataclasses.replace(passing, nodes=passing.nodes[:1])
    gone = tmp_path / "gone" / "nodecheck.prom"  # its directory vanished after the arguments were checked
    assert publish(passing, args(tmp_path, str(gone))) == 3
    err = capsys.readouterr().err
    assert f"nodecheck: error: could not write the metrics file {gone}: " in err


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("nodecheck.txt", "reads only *.prom files"),
        ("missing/nodecheck.prom", "no directory"),
    ],
)
def test_a_bad_metrics_path_is_refused_before_anything_runs(tmp_path, capsys, name, said):
    with pytest.raises(SystemExit) as exit_:
        main(["run", "--local", "--metrics", str(tmp_path / name)])
    assert exit_.value.code == 64
    err = capsys.readouterr().err
    assert "argument --metrics: " in err and said in err
    assert not (tmp_path / "reports").exists()


def test_a_runs_families_never_collide_with_a_sweeps_in_one_textfile_directory():
    """node_exporter reads every *.prom of its directory and refuses a series two files both
    have: a run's file beside the sweep's must share no family name with it."""
    report = sample()
    families = [
        {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}
        for text in (metrics.render(snapshot(report), run=True), metrics.render(snapshot(report)))
    ]
    run_families, sweep_families = families
    assert run_families and sweep_families and not run_families & sweep_families
    assert all(name.startswith("nodecheck_run_") for name in run_families)
    assert "nodecheck_run_repeat_offender" not in run_families  # the sweeps' history, not a run's
