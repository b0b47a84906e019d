"""What nodecheck writes (issue 17, "Trust"): nothing readable by others (0640/0750, forensics
0600/0700, the operators' group from NODECHECK_REPORT_GROUP), no secret value in any of it, every
write atomic, and a full, read-only, locked or corrupt destination never costs the run its verdict
nor leaves half a file behind."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from nodecheck import cli
from nodecheck.core.model import Capture, CheckResult, Evidence, Outcome, Status, Verdict
from nodecheck.fleet.history import History
from nodecheck.report import json as report_json
from nodecheck.report import junit
from nodecheck.report.store import GROUP_ENV, private, store, store_files
from tests.cli.test_cli import DOWN, HEALTHY, IB_ONLY, fake_ibstat  # noqa: F401  (a fixture)
from tests.report.test_diff import previous_report
from tests.report.test_report import sample

SECRET = "hf_s3cr3tV4lu3xyz"  # a value no output would hold by chance
P = Status.PASS


@pytest.fixture
def umask0():
    """The most permissive umask a service can run with: what the files get is then their own mode."""
    old = os.umask(0)
    yield
    os.umask(old)


def modes(top: Path) -> dict[str, int]:
    return {str(p.relative_to(top)): p.lstat().st_mode & 0o777 for p in [top, *top.rglob("*")]}


def everything_under(top: Path) -> bytes:
    return b"".join(p.read_bytes() for p in top.rglob("*") if p.is_file())


# ---------------------------------------------------------------- modes and group


def test_reports_belong_to_the_operators_group_named_by_the_environment(tmp_path, umask0, monkeypatch):
    monkeypatch.setenv(GROUP_ENV, "adm")
    where = store(sample(), "summary\n", tmp_path / "reports")
    for top in (tmp_path / "reports", where):
        assert {p.stat().st_gid for p in [top, *top.rglob("*")]} == {4}  # adm
    assert set(modes(where).values()) == {0o640, 0o750}
    monkeypatch.setenv(GROUP_ENV, "4")  # a gid works too
    assert store(sample(), "s\n", tmp_path / "reports").stat().st_gid == 4


def test_an_unknown_group_is_said_and_the_files_keep_the_process_group_closed(tmp_path, umask0, monkeypatch, capsys):
    monkeypatch.setenv(GROUP_ENV, "no-such-operators")
    where = store(sample(), "summary\n", tmp_path)
    assert (
        f"{GROUP_ENV}=no-such-operators: no such group; reports keep the process's own group" in capsys.readouterr().err
    )
    assert {p.stat().st_gid for p in [where, *where.rglob("*")]} == {os.getgid()}
    assert set(modes(where).values()) == {0o640, 0o750}


def test_forensics_records_are_the_owners_alone(tmp_path, umask0):
    where = store_files(
        "20260101T000000Z_forensics_1234",
        {"record.json": "{}\n", "dumps/node1/rank0": b"\x80\x02"},
        tmp_path / "reports",
        private(),
    )
    assert modes(where) == {
        ".": 0o700,
        "record.json": 0o600,
        "dumps": 0o700,
        "dumps/node1": 0o700,
        "dumps/node1/rank0": 0o600,
    }


def test_forensics_investigate_writes_a_private_record(tmp_path, umask0):
    from nodecheck.forensics.command import investigate

    found = investigate(None, None, None, label="job 1234", key="1234", output_dir=tmp_path)
    assert found.where is not None
    assert {m & 0o077 for m in modes(Path(found.where)).values()} == {0}


def test_an_existing_output_dir_is_neither_widened_nor_changed(tmp_path, umask0):
    (tmp_path / "open").mkdir(0o755)
    (tmp_path / "closed").mkdir(0o700)
    store(sample(), "s\n", tmp_path / "open")
    store(sample(), "s\n", tmp_path / "closed")
    assert ((tmp_path / "open").stat().st_mode & 0o777, (tmp_path / "closed").stat().st_mode & 0o777) == (0o755, 0o700)


def test_the_history_and_its_wal_and_shm_are_not_readable_by_others(tmp_path, umask0):
    path = tmp_path / "var" / "reports" / "history.sqlite"
    with History.open(path) as h:
        h.record(_snap(), None)
        assert modes(tmp_path / "var") == {
            ".": 0o750,
            "reports": 0o750,
            "reports/history.sqlite": 0o640,
            "reports/history.sqlite-wal": 0o640,
            "reports/history.sqlite-shm": 0o640,
        }


def test_an_existing_world_readable_history_is_narrowed(tmp_path, umask0):
    path = tmp_path / "history.sqlite"
    with History.open(path):
        pass
    os.chmod(path, 0o644)  # as an older nodecheck made it
    with History.open(path):
        pass
    assert path.stat().st_mode & 0o777 == 0o640


def _snap():
    from nodecheck.report import diff as D

    return D.snapshot(previous_report())


# ---------------------------------------------------------------- secrets


def secret_report():
    """A report in which a probe and a check let secrets through: the argv, the output, the message,
    the observed values, the extras."""
    base = sample()
    argv = ("env", f"HF_TOKEN={SECRET}", "all_reduce_perf", "--token", SECRET, f"https://u:{SECRET}@hub/x")
    cap = Capture(
        "gpu001",
        "nccl_tests",
        argv,
        Outcome.EXITED,
        0,
        f"HF_TOKEN={SECRET}\n# Avg bus bandwidth : 1\n",
        f"WANDB_API_KEY={SECRET}\n",
        1.0,
    )
    verdict = Verdict(
        Status.FAIL,
        f"job env HF_TOKEN={SECRET} differs",
        "",
        {"HF_TOKEN": SECRET, "NCCL_IB_HCA": "mlx5"},
        {},
        f"export HF_TOKEN={SECRET}",
    )
    result = CheckResult(
        "nccl.env", ("gpu001",), verdict, (Evidence("gpu001", "nccl_tests", argv, 0, "captures/gpu001/nccl_tests.txt"),)
    )
    return replace(
        base,
        results=(*base.results, result),
        captures=(*base.captures, cap),
        extras={
            "nccl.allreduce": {
                "env": {"HF_TOKEN": SECRET, "NCCL_DEBUG": "WARN"},
                "cmd": f"mpirun -x AWS_SECRET_ACCESS_KEY={SECRET}",
            }
        },
    )


def test_no_secret_reaches_the_report_directory(tmp_path):
    report = secret_report()
    where = store(report, f"summary HF_TOKEN={SECRET}\n", tmp_path)
    assert SECRET.encode() not in everything_under(where)
    doc = json.loads((where / "report.json").read_text())
    cap = next(c for c in doc["captures"] if c["probe"] == "nccl_tests")
    assert doc["argvs"][cap["argv"]] == [
        "env",
        "HF_TOKEN=<redacted>",
        "all_reduce_perf",
        "--token",
        "<redacted>",
        "https://***@hub/x",
    ]
    assert doc["extras"]["nccl.allreduce"]["env"] == {"HF_TOKEN": "<redacted>", "NCCL_DEBUG": "WARN"}
    result = next(r for r in doc["nodes"][0]["results"] if r["check"] == "nccl.env")
    assert result["observed"] == {"HF_TOKEN": "<redacted>", "NCCL_IB_HCA": "mlx5"}
    assert result["message"] == "job env HF_TOKEN=<redacted> differs"
    assert (where / "captures/gpu001/nccl_tests.txt").read_text() == "HF_TOKEN=<redacted>\n# Avg bus bandwidth : 1\n"


def test_no_secret_reaches_json_junit_or_the_history(tmp_path):
    from nodecheck.report import diff as D

    report = secret_report()
    assert SECRET not in report_json.dumps(report)
    assert SECRET not in junit.render(report)
    with History.open(tmp_path / "h.sqlite") as h:
        h.record(D.snapshot(report), None)
    conn = sqlite3.connect(tmp_path / "h.sqlite")
    assert not [r for r in conn.execute("SELECT message FROM results") if SECRET in r[0]]
    assert [r[0] for r in conn.execute("SELECT message FROM results WHERE check_name = 'nccl.env'")] == [
        "job env HF_TOKEN=<redacted> differs"
    ]


def test_an_alert_event_carries_no_secret_from_the_job_log():
    from nodecheck.watch.alerts import build_event

    event = build_event(
        job="1",
        kind="alarm",
        verdict="hung",
        previous="progressing",
        at=0,
        since=0,
        message=f"no step since 12: last line: export HF_TOKEN={SECRET}",
        nodes=["n1"],
        ranks=[],
        incident=None,
    )
    assert event["message"] == "no step since 12: last line: export HF_TOKEN=<redacted>"


# ---------------------------------------------------------------- a full or read-only report directory, for real


@pytest.fixture
def mount_tmpfs(tmp_path):
    """mount -t tmpfs (size 64k) on a new directory; root is needed (as for the integration tests)."""
    mounted = []

    def mount(name: str, options: str) -> Path:
        where = tmp_path / name
        where.mkdir()
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size=64k,{options}", "tmpfs", str(where)], capture_output=True, text=True
        )
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        mounted.append(where)
        return where

    yield mount
    for where in mounted:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(where: Path) -> None:
    fd = os.open(where / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError:  # ENOSPC: full
        pass
    finally:
        os.close(fd)


def run_cli(argv) -> subprocess.CompletedProcess:
    """The real command line, in a process of its own (its exit, its umask)."""
    return subprocess.run(
        [sys.executable, "-m", "nodecheck", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_a_full_report_filesystem_still_prints_the_run_and_leaves_nothing_half_written(fake_ibstat, mount_tmpfs, fmt):  # noqa: F811
    fake_ibstat(f"cat '{HEALTHY}'")
    full = mount_tmpfs("full", "rw")
    fill(full)
    out = run_cli(["run", "--local", "--playbook", IB_ONLY, "--format", fmt, "--output-dir", str(full / "reports")])
    assert out.returncode == 3  # PASS, but the report is lost: never 0
    assert (
        f"nodecheck: error: could not write the report under {full / 'reports'}: No space left on device "
        f"(ENOSPC); nothing was left there" in out.stderr
    )
    if fmt == "json":
        assert json.loads(out.stdout)["status"] == "pass"  # still exactly one document
        assert "report: NOT WRITTEN (see the error above); exit 3" in out.stderr
    else:
        assert "Status PASS, but exit 3: could not write the report under" in out.stdout  # never "(exit 0)"
        assert out.stdout.endswith("report: NOT WRITTEN (see the error above); exit 3\n")
    assert sorted(os.listdir(full)) == ["filler", "reports"] and os.listdir(full / "reports") == []
    assert "Traceback" not in out.stderr


def test_a_report_that_could_not_be_written_says_the_exit_it_gives(fake_ibstat, tmp_path):  # noqa: F811
    """A file where the reports directory should be (as root, too): the status line says exit 3,
    the exit the run gives, and why; never "Status PASS (exit 0)" before an exit 3."""
    fake_ibstat(f"cat '{HEALTHY}'")
    (tmp_path / "afile").write_text("")
    where = tmp_path / "afile" / "reports"
    out = run_cli(["run", "--local", "--playbook", IB_ONLY, "--output-dir", str(where)])
    assert out.returncode == 3
    why = f"could not write the report under {where}: Not a directory (ENOTDIR); nothing was left there"
    assert f"nodecheck: error: {why}\n" in out.stderr
    assert f"1 node: 1 pass. Status PASS, but exit 3: {why}.\n" in out.stdout
    assert "(exit 0)" not in out.stdout and out.stdout.endswith("report: NOT WRITTEN (see the error above); exit 3\n")


def test_a_metrics_file_that_could_not_be_written_says_the_exit_it_gives(fake_ibstat, tmp_path):  # noqa: F811
    fake_ibstat(f"cat '{HEALTHY}'")
    (tmp_path / "n.prom").mkdir()  # a directory where the file should go
    argv = ["run", "--local", "--playbook", IB_ONLY, "--output-dir", str(tmp_path / "reports")]
    out = run_cli([*argv, "--metrics", str(tmp_path / "n.prom")])
    assert out.returncode == 3
    why = f"could not write the metrics file {tmp_path / 'n.prom'}: Is a directory (EISDIR)"
    assert f"nodecheck: error: {why}\n" in out.stderr
    assert f"1 node: 1 pass. Status PASS, but exit 3: {why}.\n" in out.stdout and "(exit 0)" not in out.stdout
    summary = next((tmp_path / "reports").iterdir()) / "summary.txt"  # the report itself was kept, as it was
    assert "1 node: 1 pass. Status PASS (exit 0).\n" in summary.read_text()


def test_a_read_only_report_filesystem_keeps_a_failing_verdict(fake_ibstat, mount_tmpfs):  # noqa: F811
    fake_ibstat(f"cat '{DOWN}'")
    ro = mount_tmpfs("ro", "ro")
    out = run_cli(["run", "--local", "--playbook", IB_ONLY, "--output-dir", str(ro)])
    assert out.returncode == 2  # the failure is still the verdict
    assert f"could not write the report under {ro}: Read-only file system (EROFS)" in out.stderr
    assert "Status FAIL (exit 2)" in out.stdout and "report: NOT WRITTEN (see the error above); exit 2" in out.stdout
    assert os.listdir(ro) == []


def test_a_default_run_writes_nothing_others_can_read(fake_ibstat, tmp_path):  # noqa: F811
    fake_ibstat(f"cat '{HEALTHY}'")
    out = run_cli(["run", "--local", "--playbook", IB_ONLY, "--output-dir", str(tmp_path / "reports")])
    assert out.returncode == 0, out.stderr
    assert {m & 0o027 for m in modes(tmp_path / "reports").values()} == {0}


# ---------------------------------------------------------------- the sweep history: corrupt, locked, on a full disk


def sweep(tmp_path, *argv):
    return cli.main(["sweep", "hosts.yml", "--output-dir", str(tmp_path / "reports"), *argv])


def healthy_report():
    rep = previous_report()
    return replace(
        rep,
        results=tuple(r for r in rep.results if r.verdict.status is P and r.nodes == ("node1",)),
        nodes=(("node1", "node1"),),
    )


def test_a_corrupt_history_is_left_in_place_and_the_sweep_still_reports(tmp_path, capsys, canned):
    canned += [healthy_report(), previous_report()]
    db = tmp_path / "h.sqlite"
    garbage = b"not a database\n" * 100
    db.write_bytes(garbage)
    prom = tmp_path / "n.prom"
    assert sweep(tmp_path, "--history", str(db), "--metrics", str(prom)) == 3  # PASS, not recorded: never 0
    out, err = capsys.readouterr()
    assert (
        f"nodecheck: error: cannot use the sweep history: file is not a database ({db}); this sweep is not "
        "compared or recorded; the file was left as it is (move it aside: the next sweep starts a new history "
        "there)" in err
    )
    assert "Status PASS, but exit 3: cannot use the sweep history: file is not a database" in out
    assert "(exit 0)" not in out and "report: " + str(tmp_path / "reports" / "20261129T100000Z_sweep") in out
    assert "nodecheck_sweep_problems 1\n" in prom.read_text()
    assert sweep(tmp_path, "--history", str(db)) == 2  # a failure stays a failure
    assert db.read_bytes() == garbage  # never deleted, never rewritten
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h.sqlite", "n.prom", "reports"]


def test_a_locked_history_costs_the_sweep_its_record_not_its_report(tmp_path, capsys, canned, monkeypatch):
    import nodecheck.fleet.history as history

    canned += [healthy_report()]
    db = tmp_path / "h.sqlite"
    with History.open(db):
        pass
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import sqlite3, sys, time\n"
                f"c = sqlite3.connect({str(db)!r}, isolation_level=None)\n"
                "c.execute('BEGIN IMMEDIATE')\n"
                "c.execute('INSERT INTO sweeps (run_id, playbook, started, finished, complete, "
                "incomplete_reason, status, "
                'exit_code) VALUES (1, 1, 1, 1, 1, 1, "pass", 0)\')\n'
                "print('locked', flush=True)\n"
                "time.sleep(60)\n"
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline() == "locked\n"
        monkeypatch.setattr(history, "BUSY_TIMEOUT_S", 0.5)
        assert sweep(tmp_path, "--history", str(db)) == 3
    finally:
        holder.kill()
        holder.wait()
    out, err = capsys.readouterr()
    assert f"nodecheck: error: could not record the sweep in {db}: database is locked\n" in err
    assert f"Status PASS, but exit 3: could not record the sweep in {db}: database is locked." in out
    assert (tmp_path / "reports" / "20261129T100000Z_sweep" / "report.json").is_file()
    with History.open(db, readonly=True) as h:
        assert h.sweeps(5) == []  # the holder's insert was never committed; nothing half


def test_a_sweep_onto_a_full_filesystem_reports_and_leaves_no_temporary(tmp_path, capsys, canned, mount_tmpfs):
    canned += [healthy_report()]
    full = mount_tmpfs("full", "rw")
    fill(full)
    prom = tmp_path / "n.prom"
    code = cli.main(["sweep", "hosts.yml", "--output-dir", str(full), "--metrics", str(prom)])
    out, err = capsys.readouterr()
    assert code == 3 and "report: NOT WRITTEN (see the error above)" in out
    status = next(line for line in out.splitlines() if line.startswith("1 node: 1 pass. Status PASS, but exit 3: "))
    assert f"could not write the report under {full}: No space left on device" in status
    assert f"could not write the report under {full}: No space left on device (ENOSPC); nothing was left there" in err
    assert not [n for n in os.listdir(full) if n.startswith(".") or n.endswith("_sweep")]
    assert "nodecheck_sweep_problems 2\n" in prom.read_text()


def test_an_incident_record_keeps_no_secret_from_the_job_log(tmp_path):
    from nodecheck.watch.incident import write_incident
    from nodecheck.watch.verdicts import Assessment

    a = Assessment("hung", "hung: no step since 3854", ("node001",), (3,), 0.0, {"step": 3854})
    tick = {
        "at": "2026-01-01T00:00:00.000Z",
        "at_epoch": 0.0,
        "job_state": "RUNNING",
        "nodes": {
            "node001": {"failure": None, "raw": {"stdout": f"step 3854\nexport HF_TOKEN={SECRET}\n", "stderr": ""}}
        },
    }
    event = {"job": "1234", "previous": "progressing", "at": "2026-01-01T00:00:00Z", "verdict": "hung"}
    where = write_incident(tmp_path, event=event, assessment=a, ticks=[tick], job_key="1234", at=60.0)
    assert SECRET.encode() not in everything_under(where)
    [line] = (where / "samples.jsonl").read_text().splitlines()
    assert json.loads(line)["nodes"]["node001"]["raw"]["stdout"] == "step 3854\nexport HF_TOKEN=<redacted>\n"
