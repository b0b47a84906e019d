"""The sweep history (SQLite): schema, whole-sweep transactions, concurrent writers, reading it back
for the diff and for `nodecheck history` (whose command test_history_command.py tests); and
`nodecheck sweep` wired end to end around a canned run."""

from __future__ import annotations

import json
import multiprocessing
import sqlite3
import threading
import time
from dataclasses import replace
from datetime import timedelta

import pytest

from nodecheck import cli
from nodecheck.core.errors import ConfigError
from nodecheck.core.model import Status
from nodecheck.fleet.history import SCHEMA_VERSION, History
from nodecheck.fleet.sweep import parse_offender
from nodecheck.report import diff as D
from nodecheck.report.diff import CounterRow, NodeSweep, Offender
from tests.report.test_diff import T0, T1, current_report, previous_report

U, F, P, W = Status.UNREACHABLE, Status.FAIL, Status.PASS, Status.WARN


def recorded(tmp_path, *reports, report_dir="reports/x"):
    path = tmp_path / "h.sqlite"
    with History.open(path) as h:
        ids = [h.record(D.snapshot(r), report_dir, "0.1.0") for r in reports]
    return path, ids


def test_a_new_database_has_the_versioned_schema_in_wal_mode(tmp_path):
    path, _ = recorded(tmp_path)
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 2
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {
        name: [c[1] for c in conn.execute(f"PRAGMA table_info({name})")]
        for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
    }
    assert tables == {
        "sweeps": [
            "id",
            "run_id",
            "playbook",
            "started",
            "finished",
            "complete",
            "incomplete_reason",
            "status",
            "exit_code",
            "report_dir",
            "nodecheck_version",
        ],
        "nodes": ["sweep_id", "node", "status"],
        "results": ["sweep_id", "node", "check_name", "status", "message", "subject"],
        "facts": ["sweep_id", "node", "key", "value"],
        "counters": ["sweep_id", "node", "port", "counter", "value", "boot_id", "source", "seq"],
        "measurements": ["sweep_id", "node", "check_name", "name", "subject", "value", "unit"],
    }
    # counters is its primary key's b-tree alone: no rowid table beside an index of the same columns
    assert list(
        conn.execute("SELECT name, type, sql LIKE '%WITHOUT ROWID' FROM sqlite_master WHERE tbl_name = 'counters'")
    ) == [("counters", "table", 1)]


def test_a_sweep_reads_back_exactly_as_it_was_recorded(tmp_path):
    path, ids = recorded(tmp_path, previous_report(), current_report())
    assert ids == [1, 2]
    with History.open(path, readonly=True) as h:
        assert h.last("sweep") == D.snapshot(current_report())
        assert h.last("other-playbook") is None
        [first, second] = h.sweeps(10)
        assert (first.run_id, first.started, first.status, first.exit_code, first.report_dir) == (
            "20261129T100000Z_sweep",
            T0,
            F,
            2,
            "reports/x",
        )
        assert h.snapshot(first) == D.snapshot(previous_report())


def test_could_not_judge_is_kept_as_such_never_as_pass(tmp_path):
    path, _ = recorded(tmp_path, previous_report())
    conn = sqlite3.connect(path)
    assert (
        conn.execute("SELECT status, message FROM results WHERE node = 'node3' ORDER BY rowid").fetchall()
        == [("unreachable", "unreachable: connection refused by node3:22")] * 2
    )
    assert conn.execute("SELECT node, status FROM nodes WHERE sweep_id = 1").fetchall() == [
        ("node1", "warn"),
        ("node2", "fail"),
        ("node3", "unreachable"),
        ("node4", "fail"),
    ]
    with pytest.raises(sqlite3.IntegrityError):  # the schema refuses a made-up status
        conn.execute("INSERT INTO nodes VALUES (1, 'node9', 'ok')")


def test_a_saturated_64_bit_counter_is_kept_exactly(tmp_path):
    snap = D.snapshot(previous_report())
    big = CounterRow("node1", "mlx5_0/1", "SymbolErrorCounter", 2**64 - 1, "boot-1", "perfquery -x")
    with History.open(tmp_path / "h.sqlite") as h:
        h.record(replace(snap, counters=(big,)), None)
        assert h.last("sweep").counters == (big,)


def test_a_sweep_is_one_transaction_a_failure_leaves_nothing(tmp_path):
    snap = D.snapshot(previous_report())
    broken = replace(snap, facts=(("node1", "nccl.version", "2.23.4"),) * 2)  # the same key twice
    with History.open(tmp_path / "h.sqlite") as h:
        with pytest.raises(sqlite3.IntegrityError):
            h.record(broken, None)
        assert h.sweeps(10) == [] and h.conn.execute("SELECT COUNT(*) FROM nodes").fetchone() == (0,)
        h.record(snap, None)  # and the connection still works
        assert [s.run_id for s in h.sweeps(10)] == ["20261129T100000Z_sweep"]


def _writer(path: str, tag: int, count: int) -> None:
    snap = D.snapshot(current_report())
    with History.open(path) as h:
        for i in range(count):
            h.record(replace(snap, run_id=f"w{tag}-{i}", started=T1 + timedelta(seconds=i)), None)


def test_two_sweeps_writing_at_once_both_commit_whole_sweeps(tmp_path):
    path = str(tmp_path / "h.sqlite")
    ctx = multiprocessing.get_context("fork")
    writers = [ctx.Process(target=_writer, args=(path, tag, 15)) for tag in (1, 2)]
    for w in writers:
        w.start()
    for w in writers:
        w.join(60)
    assert [w.exitcode for w in writers] == [0, 0]
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT COUNT(*) FROM sweeps").fetchone() == (30,)
    per_sweep = conn.execute("SELECT COUNT(*) FROM results GROUP BY sweep_id").fetchall()
    assert per_sweep == [(20,)] * 30  # none half-written
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def _lock_for(path, seconds: float) -> threading.Thread:
    """Another sweep's connection holding the write lock (BEGIN EXCLUSIVE) for `seconds`, from its
    own thread (a sqlite3 connection is used by the thread that made it: a Timer calling COMMIT on
    the test's connection raises ProgrammingError and the lock is never given back)."""
    held = threading.Event()

    def hold() -> None:
        conn = sqlite3.connect(str(path), isolation_level=None)
        conn.execute("BEGIN EXCLUSIVE")
        held.set()
        time.sleep(seconds)
        conn.execute("COMMIT")
        conn.close()

    holder = threading.Thread(target=hold)
    holder.start()
    assert held.wait(10)
    return holder


@pytest.mark.parametrize("journal", ["wal", "delete"])
def test_a_history_locked_by_another_sweep_is_waited_for_and_the_sweep_recorded(tmp_path, journal):
    """The fault suite's "history database locked": another connection holds BEGIN EXCLUSIVE for a
    while. Opening (a WAL file, or one from before WAL that must be switched) and recording wait
    for it (the busy timeout) and record; nothing fails at the first "locked"."""
    path, _ = recorded(tmp_path, previous_report())
    if journal == "delete":
        sqlite3.connect(path, isolation_level=None).execute("PRAGMA journal_mode = DELETE").close()
    holder = _lock_for(path, 1.5)
    started = time.monotonic()
    try:
        with History.open(path) as h:
            h.record(D.snapshot(current_report()), None)
    finally:
        holder.join()
    assert time.monotonic() - started >= 1.0
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT COUNT(*) FROM sweeps").fetchone() == (2,)
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_a_history_locked_past_the_bound_fails_at_the_bound_and_says_locked(tmp_path, monkeypatch):
    path, _ = recorded(tmp_path, previous_report())
    monkeypatch.setattr("nodecheck.fleet.history.BUSY_TIMEOUT_S", 0.5)
    holder = _lock_for(path, 3)
    started = time.monotonic()
    try:
        with History.open(path) as h, pytest.raises(sqlite3.OperationalError, match="database is locked"):
            h.record(D.snapshot(current_report()), None)
        took = time.monotonic() - started
    finally:
        holder.join()
    assert 0.4 <= took < 2.5, took


def test_node_sweeps_feed_offenders_per_playbook_and_in_time_order(tmp_path):
    path, _ = recorded(tmp_path, previous_report(), current_report())
    with History.open(path) as h:
        h.record(replace(D.snapshot(previous_report()), playbook="fabric"), None)
        rows = h.node_sweeps("sweep", 5)
        assert [r for r in rows if r.node in ("node2", "node4")] == [
            NodeSweep(0, "node2", F, ("gpu.xid", "ib.ports", "node.oom")),
            NodeSweep(0, "node4", F, ("gpu.health",)),
            NodeSweep(1, "node2", F, ("kernel.version", "node.oom")),
        ]
        assert D.offenders(rows, 2, 5) == [
            Offender("node2", 2, 2, ("gpu.xid", "ib.ports", "kernel.version", "node.oom")),
            Offender("node3", 2, 2, ("cuda.version", "gpu.health", "ib.ports")),
        ]
        assert h.node_sweeps("sweep", 0) == []


def test_a_newer_or_foreign_database_is_refused_naming_the_file(tmp_path):
    newer = tmp_path / "newer.sqlite"
    sqlite3.connect(newer).execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(ConfigError) as caught:
        History.open(newer)
    assert str(caught.value).startswith(
        f"{newer}: cannot use the sweep history: schema version 3 is newer than this nodecheck's (2): upgrade nodecheck"
    )
    garbage = tmp_path / "notes.sqlite"
    garbage.write_text("not a database, just notes\n" * 100)
    with pytest.raises(ConfigError) as caught:
        History.open(garbage)
    assert "file is not a database" in str(caught.value) and str(garbage) in str(caught.value)


@pytest.mark.parametrize("text, expected", [("3/5", (3, 5)), ("1/1", (1, 1)), ("2/3", (2, 3))])
def test_offender_rule(text, expected):
    assert parse_offender(text) == expected


@pytest.mark.parametrize("text", ["3", "0/5", "6/5", "a/b", "3/5/7", "1/1001"])
def test_a_bad_offender_rule_is_bad_input(text):
    with pytest.raises(ConfigError):
        parse_offender(text)


# ---------------------------------------------------------------- nodecheck sweep, around a canned run

# the `canned` fixture (sweep with the targets and the run replaced) is in tests/conftest.py


def sweep(tmp_path, *argv):
    return cli.main(["sweep", "hosts.yml", "--output-dir", str(tmp_path / "reports"), "--offender", "2/3", *argv])


def test_sweep_stores_compares_records_and_writes_metrics(tmp_path, capsys, canned):
    canned += [previous_report(), current_report()]
    prom = tmp_path / "nodecheck.prom"
    assert sweep(tmp_path, "--metrics", str(prom)) == 2
    out = capsys.readouterr().out
    assert "Since the last sweep: first sweep: nothing to compare.\n" in out
    assert sweep(tmp_path, "--metrics", str(prom)) == 2
    out = capsys.readouterr().out
    assert (
        "Since the last sweep (20261129T100000Z_sweep, 1 h 2 min ago):\nnewly failing:\n"
        "  node1  ib.ports  fail: mlx5_5/1: rate 200 Gb/s, expected >= 400 Gb/s\n" in out
    )
    assert (
        "repeat offenders (not healthy in at least 2 of the last 3 sweeps):\n"
        "  node2  failed in 2 of the last 2  gpu.xid, ib.ports, kernel.version, node.oom\n" in out
    )
    report_dir = out.splitlines()[-1].removeprefix("report: ")
    assert report_dir == str(tmp_path / "reports" / "20261129T110230Z_sweep")
    assert (
        "still failing: 1 (node, check) pair."
        in (tmp_path / "reports" / "20261129T110230Z_sweep" / "summary.txt").read_text()
    )
    with History.open(tmp_path / "reports" / "history.sqlite", readonly=True) as h:
        assert [(s.run_id, s.report_dir) for s in h.sweeps(5)] == [
            ("20261129T100000Z_sweep", str(tmp_path / "reports" / "20261129T100000Z_sweep")),
            ("20261129T110230Z_sweep", report_dir),
        ]
    assert 'nodecheck_check_status{node="node1",check="ib.ports"} 6\n' in prom.read_text()
    assert 'nodecheck_repeat_offender{node="node2"} 1\n' in prom.read_text()


def test_sweep_json_is_one_document_with_the_changes(tmp_path, capsys, canned):
    canned += [previous_report(), current_report()]
    sweep(tmp_path, "--format", "json")
    capsys.readouterr()
    assert sweep(tmp_path, "--format", "json", "--history", str(tmp_path / "elsewhere.sqlite")) == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["run_id"] == "20261129T110230Z_sweep" and doc["report_version"] == 3
    assert doc["sweep"]["history"] == str(tmp_path / "elsewhere.sqlite")
    assert doc["sweep"]["changes"]["first"] is True  # another history: nothing before
    assert doc["sweep"]["problems"] == [] and doc["sweep"]["gate"] == []


def test_a_sweep_that_could_not_keep_its_report_is_no_clean_bill_of_health(tmp_path, capsys, canned):
    healthy = replace(
        previous_report(),
        results=tuple(r for r in previous_report().results if r.verdict.status is P and r.nodes != ("node3",)),
        nodes=(("node1", "node1"),),
    )
    canned += [healthy]
    (tmp_path / "reports").write_text("a file where the report directory should be")
    assert sweep(tmp_path, "--history", str(tmp_path / "h.sqlite")) == 3
    err = capsys.readouterr().err
    assert "nodecheck: error: could not write the report under" in err
    with History.open(tmp_path / "h.sqlite", readonly=True) as h:
        assert [(s.status, s.report_dir) for s in h.sweeps(5)] == [(P, None)]  # the history still has it


def test_sweep_refuses_before_running_a_metrics_file_node_exporter_would_ignore(tmp_path, capsys, canned):
    canned += [previous_report()]
    assert sweep(tmp_path, "--metrics", str(tmp_path / "nodecheck.txt")) == 64
    assert "node_exporter's textfile collector reads only *.prom files" in capsys.readouterr().err
    assert sweep(tmp_path, "--metrics", str(tmp_path / "missing" / "n.prom")) == 64
    assert sweep(tmp_path, "--offender", "5/3") == 64
    assert len(canned) == 1  # nothing ran


def test_sweep_junit_is_the_junit_renderers_output_alone(tmp_path, capsys, canned, monkeypatch):
    import sys
    import types

    import nodecheck.report

    fake = types.ModuleType("nodecheck.report.junit")
    fake.render = lambda report: f"<testsuites name={report.run_id!r}/>\n"
    monkeypatch.setitem(sys.modules, "nodecheck.report.junit", fake)
    monkeypatch.setattr(nodecheck.report, "junit", fake, raising=False)  # if already imported
    canned += [previous_report()]
    assert sweep(tmp_path, "--format", "junit") == 2
    out, err = capsys.readouterr()
    assert out == "<testsuites name='20261129T100000Z_sweep'/>\n"
    assert err == f"report: {tmp_path / 'reports' / '20261129T100000Z_sweep'}\n"


# ---------------------------------------------------------------- review: the baseline, foreign files, readers


def snap_of(run_id, hour, rows, counters=(), facts=(), complete=True, nodes=("node1", "node2")):
    from nodecheck.report.diff import ResultRow, SweepSnapshot

    started = T0 + timedelta(hours=hour)
    return SweepSnapshot(
        run_id,
        "sweep",
        started,
        started + timedelta(minutes=5),
        complete,
        nodes,
        tuple(ResultRow(*row) for row in rows),
        tuple(facts),
        tuple(counters),
    )


S = Status.SKIPPED
CUT = "perfquery not run: the run deadline was reached"


def counter(node, value, boot="boot-1"):
    return CounterRow(node, "mlx5_0/1", "SymbolErrorCounter", value, boot, "perfquery -x")


def test_what_the_last_sweep_did_not_read_is_compared_with_an_older_one(tmp_path):
    """The hour nobody watched: node1's counters could not be read in sweep 2 (and node2 was cut);
    sweep 3 must still see the rise since sweep 1, node2's failure as still failing, the upgrade."""
    one = snap_of(
        "s1",
        0,
        [("node1", "ib.counters", P, "8 of 8 pass"), ("node2", "ib.ports", F, "mlx5_3/1: Down")],
        counters=[counter("node1", 0)],
        facts=[("node1", "nccl.version", "2.23.4")],
    )
    two = snap_of(
        "s2",
        1,
        [("node1", "ib.counters", Status.ERROR, "perfquery exited 1: no such port"), ("node2", "ib.ports", S, CUT)],
        complete=False,
    )
    three = snap_of(
        "s3",
        2,
        [("node1", "ib.counters", P, "8 of 8 pass"), ("node2", "ib.ports", F, "mlx5_3/1: Down")],
        counters=[counter("node1", 42)],
        facts=[("node1", "nccl.version", "2.23.5")],
    )
    with History.open(tmp_path / "h.sqlite") as h:
        h.record(one, None)
        h.record(two, None)
        assert D.diff(h.last("sweep"), three).counters_risen == ()  # against sweep 2 alone: lost
        base = h.baseline("sweep", three)
    assert (base.run_id, base.filled, base.filled_from) == ("s2", 3, ("s1",))
    c = D.diff(base, three)
    assert [(r.counter, r.old, r.new) for r in c.counters_risen] == [("SymbolErrorCounter", 0, 42)]
    assert [(v.node, v.old, v.new) for v in c.versions_changed] == [("node1", "2.23.4", "2.23.5")]
    assert c.still_failing == 1 and c.newly_failing == ()
    assert c.recovered == (D.Finding("node1", "ib.counters", Status.ERROR, "perfquery exited 1: no such port"),)
    assert D.render(c, [], 3, 5, three.started).splitlines()[:2] == [
        "Since the last sweep (s2, 1 h 0 min ago; it was cut short: no reason recorded):",
        "  (3 results, counters or versions it did not judge or read are compared with an older sweep: s1)",
    ]


def test_the_baseline_looks_back_a_bounded_number_of_sweeps(tmp_path):
    old = snap_of("old", 0, [("node1", "ib.counters", P, "ok")], counters=[counter("node1", 0)])
    unread = [snap_of(f"u{i}", 1 + i, [("node1", "ib.counters", Status.ERROR, "unreadable")]) for i in range(3)]
    now = snap_of("now", 9, [("node1", "ib.counters", P, "ok")], counters=[counter("node1", 7)])
    with History.open(tmp_path / "h.sqlite") as h:
        for s in (old, *unread):
            h.record(s, None)
        assert h.baseline("sweep", now, lookback=4).filled_from == ("old",)
        assert h.baseline("sweep", now, lookback=3).counters == ()  # beyond the window: not compared
        assert h.baseline("fabric", now) is None
        assert h.baseline("sweep", snap_of("x", 9, [("node1", "ib.counters", Status.ERROR, "unreadable")])) == h.last(
            "sweep"
        )  # nothing missing: the last sweep as is


def test_another_programs_sqlite_database_is_refused_untouched(tmp_path):
    foreign = tmp_path / "jobs.sqlite"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE jobs (id INTEGER, name TEXT)")
    conn.commit()
    conn.close()
    with pytest.raises(ConfigError) as caught:
        History.open(foreign)
    assert "not a nodecheck history: a SQLite database of something else (tables jobs, ...)" in str(caught.value)
    conn = sqlite3.connect(foreign)
    assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["jobs"]
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)


def test_a_newer_database_is_not_switched_to_wal_either(tmp_path):
    newer = tmp_path / "newer.sqlite"
    sqlite3.connect(newer).execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(ConfigError):
        History.open(newer)
    assert sqlite3.connect(newer).execute("PRAGMA journal_mode").fetchone() == ("delete",)


def _read_as_nobody(path: str, conn) -> None:
    import os

    try:
        if os.geteuid() == 0:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
        with History.open(path, readonly=True) as h:
            conn.send([s.run_id for s in h.sweeps(5)])
    except BaseException as e:
        conn.send(f"{type(e).__name__}: {e}")


def test_an_operator_who_may_not_write_the_directory_reads_the_history(tmp_path):
    """`nodecheck history` as a user other than the sweep's: SQLite cannot create the WAL index
    (-shm) beside a WAL database in a directory that user may not write."""
    import os
    import shutil
    import tempfile

    where = tempfile.mkdtemp(prefix="nodecheck-history-")  # outside pytest's 0700 tmp tree
    try:
        path, _ = recorded(tmp_path, previous_report(), current_report())
        shutil.copy(path, f"{where}/h.sqlite")
        check = sqlite3.connect(f"{where}/h.sqlite")
        assert check.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        check.close()  # the last connection: SQLite removes -wal and -shm
        assert sorted(os.listdir(where)) == ["h.sqlite"]
        os.chmod(f"{where}/h.sqlite", 0o444)
        os.chmod(where, 0o555)
        parent, child = multiprocessing.get_context("fork").Pipe()
        reader = multiprocessing.get_context("fork").Process(target=_read_as_nobody, args=(f"{where}/h.sqlite", child))
        reader.start()
        reader.join(30)
        assert parent.recv() == ["20261129T100000Z_sweep", "20261129T110230Z_sweep"]
        assert sorted(os.listdir(where)) == ["h.sqlite"]
    finally:
        os.chmod(where, 0o755)
        shutil.rmtree(where)


def test_a_nan_bandwidth_does_not_cost_the_sweep_its_history(tmp_path):
    rep = current_report()
    rep.results[6].verdict.observed["busbw_plateau_gbs"] = float("nan")  # node1's nccl.allreduce_single
    with History.open(tmp_path / "h.sqlite") as h:
        h.record(D.snapshot(rep), None)
        assert [m.name for m in h.last("sweep").measurements] == ["ib_write_bw_best"] * 3


def test_the_terminal_is_cut_the_reports_summary_keeps_every_change(tmp_path, capsys, canned):
    from tests.report.test_diff import r, report

    nodes = [f"node{i}" for i in range(1, 51)]
    canned += [
        report("a", T0, nodes, [r(n, "ib.ports", P, "ok") for n in nodes]),
        report("b", T1, nodes, [r(n, "ib.ports", F, f"mlx5_{i}/1: Down") for i, n in enumerate(nodes)]),
    ]
    sweep(tmp_path)
    sweep(tmp_path)
    out = capsys.readouterr().out
    assert "  ... and 10 more (all in the report's summary.txt)\n" in out
    kept = (tmp_path / "reports" / "b" / "summary.txt").read_text()
    assert "  node50  ib.ports  fail: mlx5_49/1: Down\n" in kept and "... and" not in kept


def test_an_unreadable_history_is_said_in_the_output_and_the_metrics(tmp_path, capsys, canned, monkeypatch):
    canned += [previous_report()]

    def broken(*args, **kw):
        raise sqlite3.DatabaseError("database disk image is malformed")

    monkeypatch.setattr(History, "baseline", broken)
    prom = tmp_path / "n.prom"
    assert sweep(tmp_path, "--metrics", str(prom)) == 2
    out = capsys.readouterr().out
    assert (
        "Since the last sweep: not compared: could not read the sweep history "
        f"{tmp_path / 'reports' / 'history.sqlite'}: database disk image is malformed\n"
    ) in out
    assert "nodecheck_sweep_problems 1\n" in prom.read_text()


def test_a_broken_gate_config_is_refused_before_the_sweep_runs(tmp_path, capsys, canned):
    canned += [previous_report()]
    (tmp_path / "gate.yml").write_text("sweep: {nonsense_option: 3}\n")
    assert sweep(tmp_path, "--drain", "--observe", "--config", str(tmp_path / "gate.yml")) == 64
    assert "gate.yml:1: unknown key 'sweep.nonsense_option'" in capsys.readouterr().err
    assert len(canned) == 1 and not (tmp_path / "reports").exists()  # nothing ran, nothing kept
