"""Retention of fleet sweeps (`nodecheck sweep --keep N`): the history rows of a playbook's sweeps
beyond the newest N, and their report directories, and nothing else; the version 1 -> 2 migration
of the history (counters WITHOUT ROWID)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from nodecheck import cli
from nodecheck.core.errors import ConfigError
from nodecheck.core.model import Status
from nodecheck.fleet.history import SCHEMA, SCHEMA_VERSION, History
from nodecheck.fleet.sweep import Retention, check_keep
from nodecheck.report import diff as D
from nodecheck.report.diff import CounterRow, ResultRow, SweepSnapshot
from nodecheck.report.store import remove_reports
from tests.report.test_diff import T0, r, report

P, F = Status.PASS, Status.FAIL
TABLES = ("nodes", "results", "facts", "counters", "measurements")
ROOT = Path(__file__).resolve().parents[2]


def snap(hour: int, playbook: str = "sweep") -> SweepSnapshot:
    started = T0 + timedelta(hours=hour)
    return SweepSnapshot(
        f"s{hour}",
        playbook,
        started,
        started + timedelta(minutes=5),
        True,
        ("node1", "node2"),
        (ResultRow("node1", "ib.ports", P, "ok"), ResultRow("node2", "ib.ports", F, "mlx5_0/1: Down")),
        (("node1", "kernel.version", "6.8.0"),),
        (CounterRow("node1", "mlx5_0/1", "SymbolErrorCounter", hour, "boot-1", "perfquery -x"),),
        (D.Measurement("node1", "ib.pairs", D.PAIR_BW, "mlx5_0", 390.5, "Gb/s"),),
    )


def rows_per_table(path) -> dict[str, int]:
    conn = sqlite3.connect(path)
    try:
        return {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("sweeps", *TABLES)}
    finally:
        conn.close()


# ---------------------------------------------------------------- History.prune


def test_prune_deletes_the_playbooks_sweeps_beyond_the_newest_n_from_every_table(tmp_path):
    with History.open(tmp_path / "h.sqlite") as h:
        ids = [h.record(snap(i), f"/r/s{i}") for i in range(5)]
        h.record(snap(0, "fabric"), None)
        pruned = h.prune("sweep", 3, ids[-1])
        assert [s.run_id for s in pruned.removed] == ["s0", "s1"]
        assert (pruned.older_than, pruned.left) == ("s2", 0)
        assert [s.report_dir for s in pruned.removed] == ["/r/s0", "/r/s1"]
        assert [s.run_id for s in h.sweeps(10, "sweep")] == ["s2", "s3", "s4"]
        assert [s.run_id for s in h.sweeps(10, "fabric")] == ["s0"]  # another playbook's: kept
        assert h.prune("sweep", 3, ids[-1]) is None  # nothing beyond 3
    # 4 sweeps of one row in each table are left
    assert rows_per_table(tmp_path / "h.sqlite") == {
        "sweeps": 4,
        "nodes": 8,
        "results": 8,
        "facts": 4,
        "counters": 4,
        "measurements": 4,
    }
    conn = sqlite3.connect(tmp_path / "h.sqlite")
    assert {
        t: conn.execute(f"SELECT COUNT(*) FROM {t} WHERE sweep_id IN (?, ?)", ids[:2]).fetchone()[0] for t in TABLES
    } == dict.fromkeys(TABLES, 0)


def test_prune_never_deletes_the_sweep_just_recorded_even_dated_oldest(tmp_path):
    """A clock stepped back: the sweep just recorded sorts first; it stays, and the line's "older
    than" names a sweep the deleted ones really are older than."""
    with History.open(tmp_path / "h.sqlite") as h:
        for i in range(1, 5):
            h.record(snap(i), None)
        recorded = h.record(snap(0), None)
        pruned = h.prune("sweep", 2, recorded)
        assert [s.run_id for s in pruned.removed] == ["s1", "s2"] and pruned.older_than == "s3"
        assert [s.run_id for s in h.sweeps(10)] == ["s0", "s3", "s4"]
        assert h.prune("sweep", 1, recorded).older_than == "s4"
        assert [s.run_id for s in h.sweeps(10)] == ["s0", "s4"]


def test_prune_deletes_at_most_so_many_sweeps_a_run_the_rest_next_time(tmp_path):
    with History.open(tmp_path / "h.sqlite") as h:
        ids = [h.record(snap(i), None) for i in range(10)]
        first = h.prune("sweep", 2, ids[-1], at_most=5)
        assert ([s.run_id for s in first.removed], first.older_than, first.left) == (
            ["s0", "s1", "s2", "s3", "s4"],
            "s5",
            3,
        )
        assert Retention(2, tuple(s.run_id for s in first.removed), first.older_than, 5, first.left).line() == (
            "retention: removed 5 sweeps older than s5 (5 report directories); 3 more beyond --keep 2 go with "
            "the next sweeps"
        )
        second = h.prune("sweep", 2, ids[-1], at_most=5)
        assert ([s.run_id for s in second.removed], second.older_than, second.left) == (["s5", "s6", "s7"], "s8", 0)
        with pytest.raises(ValueError):
            h.prune("sweep", 0, ids[-1])


def test_prune_is_one_transaction_a_failure_deletes_nothing(tmp_path):
    path = tmp_path / "h.sqlite"
    with History.open(path) as h:
        ids = [h.record(snap(i), None) for i in range(4)]
        # the sweeps rows go last: every child row is deleted by then, and all of it rolls back
        h.conn.execute("CREATE TRIGGER refuse BEFORE DELETE ON sweeps BEGIN SELECT RAISE(ABORT, 'refused'); END")
        before = rows_per_table(path)
        with pytest.raises(sqlite3.IntegrityError, match="refused"):
            h.prune("sweep", 1, ids[-1])
        assert (
            rows_per_table(path)
            == before
            == {"sweeps": 4, "nodes": 8, "results": 8, "facts": 4, "counters": 4, "measurements": 4}
        )
        assert h.last("sweep") == snap(3)  # and the connection still works


# ---------------------------------------------------------------- report directories


def report_dir(root: Path, name: str, with_json: bool = True) -> Path:
    d = root / name
    (d / "captures" / "node1").mkdir(parents=True)
    (d / "captures" / "node1" / "versions.txt").write_text("6.8.0\n")
    (d / "summary.txt").write_text("1 node: 1 pass.\n")
    if with_json:
        (d / "report.json").write_text('{"report_version": 2}\n')
    return d


def row(run_id: str, path) -> tuple[str, str | None]:
    """(run id, report directory) as retire() hands them to remove_reports."""
    return run_id, None if path is None else str(path)


def test_only_the_sweeps_own_report_directories_inside_output_dir_are_removed(tmp_path):
    out, other = tmp_path / "reports", tmp_path / "elsewhere"
    kept_name = report_dir(out, "20261129T100000Z_sweep")
    suffixed = report_dir(out, "20261129T100000Z_sweep-2")
    outside = report_dir(other, "20261129T110000Z_sweep")
    renamed = report_dir(out, "keep-me")
    no_json = report_dir(out, "20261129T120000Z_sweep", with_json=False)
    target = report_dir(other, "target")
    (out / "20261129T130000Z_sweep").symlink_to(target, target_is_directory=True)
    plain_file = out / "20261129T140000Z_sweep"
    plain_file.write_text("not a directory\n")
    json_link = report_dir(out, "20261129T150000Z_sweep", with_json=False)
    (json_link / "report.json").symlink_to(target / "report.json")
    # a link inside a removed report directory: removed as a link, never followed
    (kept_name / "captures" / "outside").symlink_to(target, target_is_directory=True)
    removed, warnings = remove_reports(
        [
            row("20261129T100000Z_sweep", kept_name),
            row("20261129T100000Z_sweep", suffixed),
            row("20261129T110000Z_sweep", outside),
            row("20261129T110000Z_sweep", renamed),
            row("20261129T120000Z_sweep", no_json),
            row("20261129T130000Z_sweep", out / "20261129T130000Z_sweep"),
            row("20261129T140000Z_sweep", plain_file),
            row("20261129T150000Z_sweep", json_link),
            row("20261129T160000Z_sweep", out / "20261129T160000Z_sweep"),  # already gone: silent
            row("20261129T170000Z_sweep", None),
        ],
        out,
    )  # never written
    assert removed == 2
    assert warnings == [
        f"retention: left {outside} in place: not in the --output-dir {out}",
        f"retention: left {renamed} in place: not named after the sweep's run id 20261129T110000Z_sweep",
        f"retention: left {no_json} in place: no report.json in it",
        f"retention: left {out / '20261129T130000Z_sweep'} in place: a symbolic link",
        f"retention: left {plain_file} in place: not a directory",
        f"retention: left {json_link} in place: its report.json is not a file",
    ]
    assert sorted(p.name for p in out.iterdir()) == [
        "20261129T120000Z_sweep",
        "20261129T130000Z_sweep",
        "20261129T140000Z_sweep",
        "20261129T150000Z_sweep",
        "keep-me",
    ]
    assert sorted(str(p.relative_to(other)) for p in other.rglob("*")) == [
        "20261129T110000Z_sweep",
        "20261129T110000Z_sweep/captures",
        "20261129T110000Z_sweep/captures/node1",
        "20261129T110000Z_sweep/captures/node1/versions.txt",
        "20261129T110000Z_sweep/report.json",
        "20261129T110000Z_sweep/summary.txt",
        "target",
        "target/captures",
        "target/captures/node1",
        "target/captures/node1/versions.txt",
        "target/report.json",
        "target/summary.txt",
    ]


def test_a_relative_report_dir_is_the_one_under_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    report_dir(tmp_path / "reports", "s1")
    assert remove_reports([row("s1", "reports/s1")], "reports") == (1, [])
    assert list((tmp_path / "reports").iterdir()) == []


def test_a_report_dir_that_cannot_be_removed_is_a_warning(tmp_path, monkeypatch):
    out = tmp_path / "reports"
    stuck = report_dir(out, "s1")
    real_rmdir = os.rmdir

    def refuse(path, *args, **kw):  # as a read-only mount would: root ignores chmod
        if str(path) == str(stuck):
            raise PermissionError(13, "Permission denied", str(path))
        return real_rmdir(path, *args, **kw)

    monkeypatch.setattr(os, "rmdir", refuse)
    assert remove_reports([row("s1", stuck)], out) == (
        0,
        [f"retention: could not remove the report directory {stuck}: {stuck}: Permission denied"],
    )
    assert list(stuck.iterdir()) == []  # what could go, went


# ---------------------------------------------------------------- --keep and the offender window


def test_keep_must_leave_the_offender_window_its_sweeps():
    check_keep(0, 3, 5)  # 0: keep every sweep
    check_keep(5, 3, 5)
    with pytest.raises(ConfigError) as caught:
        check_keep(4, 3, 5)
    assert str(caught.value) == (
        "arguments: --keep 4 keeps fewer sweeps than --offender 3/5 looks back on; "
        "hint: --keep 5 or more (0 keeps every sweep), or a shorter --offender window"
    )


# ---------------------------------------------------------------- nodecheck sweep --keep, around a canned run

# the `canned` fixture (sweep with the targets and the run replaced) is in tests/conftest.py


def sweeps(n: int) -> list:
    return [
        report(
            f"20261129T{10 + i:02d}0000Z_sweep",
            T0 + timedelta(hours=i),
            ["node1"],
            [r("node1", "kernel.version", P, "6.8.0", observed={"node1": "6.8.0"})],
        )
        for i in range(n)
    ]


def sweep(tmp_path, *argv):
    return cli.main(["sweep", "hosts.yml", "--output-dir", str(tmp_path / "reports"), "--offender", "1/2", *argv])


def test_sweep_keep_deletes_the_oldest_sweep_and_its_report_and_says_so(tmp_path, capsys, canned):
    canned += sweeps(4)
    assert [sweep(tmp_path, "--keep", "2") for _ in range(2)] == [0, 0]
    assert "retention:" not in capsys.readouterr().out  # nothing beyond 2 yet
    assert sweep(tmp_path, "--keep", "2") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-2:] == [
        "retention: removed 1 sweep older than 20261129T110000Z_sweep (1 report directory)",
        f"report: {tmp_path / 'reports' / '20261129T120000Z_sweep'}",
    ]
    assert sorted(p.name for p in (tmp_path / "reports").iterdir()) == [
        "20261129T110000Z_sweep",
        "20261129T120000Z_sweep",
        "history.sqlite",
    ]
    assert sweep(tmp_path, "--keep", "2", "--format", "json") == 0
    doc, err = capsys.readouterr()
    assert json.loads(doc)["sweep"]["retention"] == {
        "keep": 2,
        "removed": ["20261129T110000Z_sweep"],
        "older_than": "20261129T120000Z_sweep",
        "report_dirs": 1,
        "left": 0,
    }
    assert err.splitlines()[0] == "retention: removed 1 sweep older than 20261129T120000Z_sweep (1 report directory)"
    with History.open(tmp_path / "reports" / "history.sqlite", readonly=True) as h:
        assert [s.run_id for s in h.sweeps(10)] == ["20261129T120000Z_sweep", "20261129T130000Z_sweep"]


def test_sweep_keep_0_keeps_everything_and_a_short_keep_is_refused_before_running(tmp_path, capsys, canned):
    canned += sweeps(3)
    assert [sweep(tmp_path, "--keep", "0", "--offender", "3/3") for _ in range(3)] == [0, 0, 0]
    assert len(list((tmp_path / "reports").glob("2026*"))) == 3 and "retention:" not in capsys.readouterr().out
    canned += sweeps(1)
    assert sweep(tmp_path, "--keep", "2", "--offender", "3/5") == 64
    assert (
        "--keep 2 keeps fewer sweeps than --offender 3/5 looks back on; hint: --keep 5 or more"
        in capsys.readouterr().err
    )
    assert len(canned) == 1  # nothing ran
    with pytest.raises(SystemExit) as caught:  # argparse: 0..1000000
        sweep(tmp_path, "--keep", "-1")
    assert caught.value.code == 64 and "argument --keep: must be >= 0, got -1" in capsys.readouterr().err


def test_a_sweep_that_was_not_recorded_deletes_nothing(tmp_path, capsys, canned, monkeypatch):
    canned += sweeps(3)
    sweep(tmp_path, "--keep", "1", "--offender", "1/1")
    sweep(tmp_path, "--keep", "1", "--offender", "1/1")

    def broken(*a, **kw):
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(History, "record", broken)
    monkeypatch.setattr(History, "prune", lambda *a, **kw: pytest.fail("pruned after a failed record"))
    assert sweep(tmp_path, "--keep", "1", "--offender", "1/1") == 3
    assert "could not record the sweep" in capsys.readouterr().err
    assert len(list((tmp_path / "reports").glob("2026*"))) == 2  # the first was retired by the second


def test_retention_that_fails_is_a_warning_the_sweep_is_kept(tmp_path, capsys, canned, monkeypatch):
    canned += sweeps(1)

    def locked(*a, **kw):
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(History, "prune", locked)
    assert sweep(tmp_path, "--keep", "1", "--offender", "1/1") == 0  # still the report's exit code
    assert capsys.readouterr().err == (
        "nodecheck: warning: retention: could not delete old sweeps from "
        f"{tmp_path / 'reports' / 'history.sqlite'}: database is locked\n"
    )


# ---------------------------------------------------------------- schema version 1 -> 2

V1_COUNTERS = """CREATE TABLE counters (
        sweep_id INTEGER NOT NULL REFERENCES sweeps (id) ON DELETE CASCADE,
        node TEXT NOT NULL,
        port TEXT NOT NULL,
        counter TEXT NOT NULL,
        value NOT NULL,
        boot_id TEXT,
        source TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (sweep_id, node, port, counter))"""


def version_1_history(path: Path) -> list[CounterRow]:
    """A history as nodecheck wrote it before version 2: one sweep, counters in an order that is
    not their key's."""
    conn = sqlite3.connect(path, isolation_level=None)
    for statement in SCHEMA:
        conn.execute(V1_COUNTERS if statement.startswith("CREATE TABLE counters") else statement)
    conn.execute("PRAGMA user_version = 1")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(
        "INSERT INTO sweeps VALUES (1, 's0', 'sweep', '2026-11-29T10:00:00.000000Z', "
        "'2026-11-29T10:05:00.000000Z', 1, '', 'pass', 0, NULL, '0.1.0')"
    )
    conn.execute("INSERT INTO nodes VALUES (1, 'node2', 'pass'), (1, 'node10', 'pass')")
    rows = [
        CounterRow("node2", "mlx5_1/1", "SymbolErrorCounter", 2**64 - 1, "boot-2", "perfquery -x"),
        CounterRow("node2", "mlx5_0/1", "LinkDownedCounter", 3, "boot-2", "perfquery -x"),
        CounterRow("node10", "mlx5_0/1", "PortRcvErrors", 0, None, "sysfs counters"),
    ]
    conn.executemany(
        "INSERT INTO counters VALUES (1, ?, ?, ?, ?, ?, ?)",
        [
            (c.node, c.port, c.counter, str(c.value) if c.value > 2**63 - 1 else c.value, c.boot_id, c.source)
            for c in rows
        ],
    )
    conn.close()
    return rows


def test_a_version_1_history_is_migrated_by_the_next_sweep_keeping_every_counter_in_order(tmp_path):
    path = tmp_path / "h.sqlite"
    rows = version_1_history(path)
    with pytest.raises(ConfigError) as caught:  # a reader may not write: it says so
        History.open(path, readonly=True)
    assert (
        "schema version 1, of an older nodecheck: the next `nodecheck sweep` that uses this history "
        "upgrades it" in str(caught.value)
    )
    with History.open(path) as h:
        assert h.last("sweep").counters == tuple(rows)
        h.record(snap(1), None)
        assert h.prune("sweep", 1, 2).removed[0].run_id == "s0"
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    assert list(
        conn.execute("SELECT name, sql LIKE '%WITHOUT ROWID' FROM sqlite_master WHERE name LIKE '%counters%'")
    ) == [("counters", 1)]
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert conn.execute("SELECT node, counter, seq FROM counters").fetchall() == [("node1", "SymbolErrorCounter", 0)]


def test_an_unknown_schema_version_is_not_migrated(tmp_path):
    path = tmp_path / "h.sqlite"
    sqlite3.connect(path).execute("PRAGMA user_version = -1")
    with pytest.raises(ConfigError) as caught:
        History.open(path)
    assert "not a nodecheck history (schema version -1)" in str(caught.value)


# ---------------------------------------------------------------- end to end


def test_sweep_local_keep_2_three_times_removes_one_sweep_and_one_report_dir(tmp_path):
    """`python -m nodecheck sweep --local`, from a working directory with a relative --output-dir, as
    the systemd unit runs it."""
    book = tmp_path / "kernel.yml"
    book.write_text("version: 1\ndeadline_s: 60\nchecks:\n  kernel.version: {drift: fail}\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}

    def run(*extra):
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "nodecheck",
                "sweep",
                "--local",
                "--playbook",
                str(book),
                "--output-dir",
                "reports",
                *extra,
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    refused = run("--keep", "2")  # --offender 3/5 needs 5
    assert refused.returncode == 64 and "--keep 2 keeps fewer sweeps than --offender 3/5" in refused.stderr
    assert not (tmp_path / "reports").exists()
    done = [run("--keep", "2", "--offender", "1/2") for _ in range(3)]
    assert [d.returncode for d in done] == [0, 0, 0], [d.stderr for d in done]
    dirs = [d.stdout.splitlines()[-1].removeprefix("report: ") for d in done]
    assert [d.startswith("reports/") for d in dirs] == [True] * 3 and len(set(dirs)) == 3
    assert not (tmp_path / dirs[0]).exists()
    run_ids = [json.loads((tmp_path / d / "report.json").read_text())["run_id"] for d in dirs[1:]]
    assert sorted(p.name for p in (tmp_path / "reports").iterdir()) == sorted(
        [Path(d).name for d in dirs[1:]] + ["history.sqlite"]
    )
    assert [ln for ln in done[2].stdout.splitlines() if ln.startswith("retention:")] == [
        f"retention: removed 1 sweep older than {run_ids[0]} (1 report directory)"
    ]
    assert all("retention:" not in d.stdout for d in done[:2])
    conn = sqlite3.connect(tmp_path / "reports" / "history.sqlite")
    assert conn.execute("SELECT run_id, report_dir FROM sweeps ORDER BY id").fetchall() == [
        (run_ids[0], str(tmp_path / dirs[1])),
        (run_ids[1], str(tmp_path / dirs[2])),
    ]
    assert conn.execute("SELECT MIN(id) FROM sweeps").fetchone() == (2,)
    assert conn.execute("SELECT COUNT(*) FROM nodes WHERE sweep_id = 1").fetchone() == (0,)
