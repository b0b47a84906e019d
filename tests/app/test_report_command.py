"""`nodecheck report show DIR` prints what `run` printed, from the stored report.json, and exits with
the report's code; `nodecheck report html DIR` rebuilds report.html. Nothing is re-run, and a report
directory is read as untrusted input."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
import types
from pathlib import Path

import pytest

from nodecheck.cli import main
from nodecheck.core.model import Status
from nodecheck.report import json as report_json
from nodecheck.report import junit, table
from nodecheck.report import stored as stored_dir
from nodecheck.report.store import store
from tests.helpers import DATA
from tests.report.test_report import result, sample

DEMO = DATA / "report_show"


def stored(tmp_path: Path, report=None, summary: str | None = None) -> Path:
    """A report directory as `run` leaves it (report.store, with the summary `run` stores)."""
    report = report_json.redacted(report or sample())
    return store(report, table.render(report) if summary is None else summary, tmp_path / "reports")


def show(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["report", "show", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_show_prints_the_table_run_printed_byte_for_byte_and_exits_with_the_report_s_code(tmp_path, capsys):
    report = sample()
    where = stored(tmp_path, report)
    code, out, err = show(capsys, str(where))
    assert out == table.render(report_json.redacted(report))
    assert out == (where / "summary.txt").read_text(encoding="utf-8")
    assert (code, err) == (report.exit_code, "")
    assert code == 2  # a failed node, as `run` exited


def test_show_of_a_passing_report_exits_0(tmp_path, capsys):
    report = dataclasses.replace(sample(), results=(result("gpu001", Status.PASS, "ok"),))
    report = dataclasses.replace(report, nodes=report.nodes[:1], captures=())
    code, out, _ = show(capsys, str(stored(tmp_path, report)))
    assert code == 0
    assert out == table.render(report)


def test_show_of_a_sweep_report_prints_the_table_part_of_its_summary(tmp_path, capsys):
    report = sample()
    outcomes = table.render(report) + "\n"
    where = stored(tmp_path, report, outcomes + "changes since the last sweep:\n  gpu005: pass -> fail\n")
    code, out, _ = show(capsys, str(where))
    assert out == table.render(report)
    assert (where / "summary.txt").read_text(encoding="utf-8").startswith(out)
    assert "changes since" not in out


def test_show_format_json_prints_the_document_run_format_json_printed(tmp_path, capsys):
    report = sample()
    where = stored(tmp_path, report)
    code, out, _ = show(capsys, str(where), "--format", "json")
    assert out == report_json.dumps(report_json.redacted(report))
    assert out == (where / "report.json").read_text(encoding="utf-8")
    assert code == 2


def test_show_format_junit_prints_the_xml_run_format_junit_printed(tmp_path, capsys):
    report = report_json.redacted(sample())  # its captures have stderr: JUnit names those files
    where = stored(tmp_path, report)
    code, out, _ = show(capsys, str(where), "--format", "junit")
    assert out == junit.render(report)
    assert "evidence: captures/gpu001/ibstat.stderr.txt" in out
    assert code == 2


def test_show_reproduces_the_demo_run_s_table(tmp_path, capsys):
    """A copy of the demo's report (5 of its nodes, scripts and large observed values elided) and the
    table `run` printed for it."""
    where = tmp_path / "20261206T154046Z_demo"
    where.mkdir()
    shutil.copyfile(DEMO / "derived-demo-report.json", where / "report.json")
    code, out, _ = show(capsys, str(where))
    assert out == (DEMO / "derived-demo-summary.txt").read_text(encoding="utf-8")
    assert "node3          fail         ib.ports               mlx5_3/1: Down/Polling, expected Active/LinkUp" in out
    assert code == json.loads((where / "report.json").read_text(encoding="utf-8"))["exit_code"] == 2
    code, out, _ = show(capsys, str(where), "--format", "json")
    assert out == (where / "report.json").read_text(encoding="utf-8")


def test_a_missing_directory_is_bad_input_naming_it(tmp_path, capsys):
    code, out, err = show(capsys, str(tmp_path / "nope"))
    assert (code, out) == (64, "")
    assert err.startswith(f"nodecheck: error: {tmp_path / 'nope'}: no such report directory; hint: give the directory")


def test_a_symlinked_directory_is_refused_not_followed(tmp_path, capsys):
    link = tmp_path / "link"
    link.symlink_to(stored(tmp_path), target_is_directory=True)
    code, out, err = show(capsys, str(link))
    assert (code, out) == (64, "")
    assert f"{link}: is a symbolic link: not followed" in err


def test_a_symlinked_report_json_is_refused_not_followed(tmp_path, capsys):
    where = stored(tmp_path)
    (tmp_path / "elsewhere.json").write_bytes((where / "report.json").read_bytes())
    (where / "report.json").unlink()
    (where / "report.json").symlink_to(tmp_path / "elsewhere.json")
    code, out, err = show(capsys, str(where))
    assert (code, out) == (64, "")
    assert f"{where / 'report.json'}: is a symbolic link: not ours, not followed" in err


def test_a_file_or_a_directory_without_report_json_is_bad_input(tmp_path, capsys):
    (tmp_path / "file").write_text("x", encoding="utf-8")
    assert show(capsys, str(tmp_path / "file"))[0] == 64
    (tmp_path / "empty").mkdir()
    code, _, err = show(capsys, str(tmp_path / "empty"))
    assert code == 64
    assert "no report.json here: not a report directory" in err


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "not a report: a JSON list, not an object"),
        ('{"report_version": 99, "nodecheck_version": "9.0"}', "report_version 99, this nodecheck reads 2, 3"),
        ('{"report_version": 3}', "not a nodecheck report: KeyError"),
    ],
)
def test_a_bad_report_json_is_bad_input_naming_the_file_and_the_fix(tmp_path, capsys, text, said):
    where = stored(tmp_path)
    (where / "report.json").write_text(text, encoding="utf-8")
    code, out, err = show(capsys, str(where))
    assert (code, out) == (64, "")
    assert f"{where / 'report.json'}: {said}" in err
    assert "; hint: " in err


def test_a_report_json_over_the_size_cap_is_refused_unread(tmp_path, capsys, monkeypatch):
    where = stored(tmp_path)
    monkeypatch.setattr(stored_dir, "REPORT_JSON_MAX", 100)
    code, _, err = show(capsys, str(where))
    assert code == 64
    assert "more than the 100 bytes a report may be" in err


def test_report_without_an_action_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["report"])
    assert exit_.value.code == 64


def test_report_html_rebuilds_the_page_and_prints_its_path(tmp_path, capsys, monkeypatch):
    where = stored(tmp_path)
    asked = []

    def rebuild(directory: Path) -> Path:
        asked.append(directory)
        return directory / "report.html"

    fake = types.ModuleType("nodecheck.report.html.files")
    fake.rebuild = rebuild  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "nodecheck.report.html.files", fake)
    assert main(["report", "html", str(where)]) == 0
    assert capsys.readouterr().out == f"{where / 'report.html'}\n"
    assert asked == [where]


def test_report_html_refuses_a_symlinked_directory_before_writing(tmp_path, capsys):
    link = tmp_path / "link"
    link.symlink_to(stored(tmp_path), target_is_directory=True)
    assert main(["report", "html", str(link)]) == 64
    assert "is a symbolic link: not followed" in capsys.readouterr().err
    assert not os.path.exists(link / "report.html")


def test_report_html_with_the_real_page_writer_writes_report_html(tmp_path, capsys):
    pytest.importorskip("nodecheck.report.html.files")
    where = stored(tmp_path)
    assert main(["report", "html", str(where)]) == 0
    assert capsys.readouterr().out == f"{where / 'report.html'}\n"
    page = (where / "report.html").read_text(encoding="utf-8")
    assert "gpu005" in page and "Content-Security-Policy" in page
