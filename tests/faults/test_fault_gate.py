"""Faults on the gate's side: Slurm unreachable or stuck while nodecheck drains (real Slurm 22.05 on
the simulated nodes, tests/harness/slurm_cluster.sh), and a history database locked or corrupt
under `nodecheck sweep`."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from faults.support import HEALTHY, assert_no_crash, assert_nothing_left, book, temp_entries
from harness.scenarios import IBSTAT_PORT_DOWN

from nodecheck.parsers.slurm import reason_body

DATA = HEALTHY.parents[1]
NODES = ["node1", "node2"]


@pytest.fixture(scope="module")
def slurm_up(cluster):
    cluster.slurm_up(NODES)
    yield cluster
    cluster.slurm_down()


@pytest.fixture
def slurm(slurm_up):
    slurm_up.slurm_up(NODES)  # slurmctld back if a test killed it
    slurm_up.slurm_reset()
    return slurm_up


def _health(
    cluster, tmp_path: Path, timeout: float = 90, playbook: str | None = None, **options
) -> tuple[int, str, str, float]:
    (tmp_path / "book.yml").write_text(playbook or book(timeout_s=2, deadline_s=20))
    config = tmp_path / "gate.yml"
    config.write_text(
        yaml.safe_dump(
            {
                "output_dir": str(tmp_path / "reports"),
                "log_file": str(tmp_path / "gate.log"),
                "health": {"playbook": str(tmp_path / "book.yml")},
                **options,
            }
        )
    )
    started = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "nodecheck",
            "health",
            str(cluster.inventory_path),
            "--nodes",
            "node[1-2]",
            "--config",
            str(config),
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=cluster.slurm_env(),
    )
    assert_no_crash(proc.returncode, proc.stderr)
    return proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started


def _events(tmp_path: Path) -> list[dict[str, str]]:
    log = tmp_path / "gate.log"
    lines = log.read_text().splitlines() if log.exists() else []
    return [
        {k: json.loads(v) if v.startswith('"') else v for k, v in re.findall(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)', line)}
        for line in lines
    ]


def _stored(tmp_path: Path) -> dict:
    [report] = list((tmp_path / "reports").glob("*/report.json"))
    return json.loads(report.read_text())


def test_slurmctld_down_while_the_gate_drains_drains_nothing_and_says_so(slurm, tmp_path):
    slurm.fake_replay("node1", "ibstat", HEALTHY)
    slurm.fake_replay("node2", "ibstat", DATA / IBSTAT_PORT_DOWN)
    slurm.slurmctld_kill()
    before = temp_entries()
    code, out, err, wall = _health(slurm, tmp_path)
    doc = _stored(tmp_path)
    assert doc["complete"] is True and [n["node"] for n in doc["nodes"]] == NODES
    assert [n["status"] for n in doc["nodes"]] == ["pass", "fail"]
    assert code == 2, out + err  # the report's FAIL, as `run` (README "Exit codes")
    events = _events(tmp_path)
    actions = [e.get("action") for e in events]
    assert "slurm-unreadable" in actions and "drain" not in actions, actions
    [failed] = [e for e in events if e.get("action") == "failed"]
    assert failed["node"] == "node2" and "Unable to contact slurm controller" in failed["reason"]
    assert_nothing_left(slurm, NODES, before)


def test_scontrol_hanging_while_the_gate_drains_is_bounded_and_drains_nothing(slurm, tmp_path):
    """`scontrol update` never returns: the call is killed at the gate's bound (its process group:
    no `sleep` is left on the host), the node is not drained, the log says the drain failed."""
    slurm.fake_replay("node1", "ibstat", HEALTHY)
    slurm.fake_replay("node2", "ibstat", DATA / IBSTAT_PORT_DOWN)
    real = subprocess.run(["which", "scontrol"], capture_output=True, text=True).stdout.strip()
    stuck = tmp_path / "scontrol"
    stuck.write_text(f'#!/bin/sh\ncase "$1" in update) exec sleep 3599 ;; esac\nexec {real} "$@"\n')
    stuck.chmod(0o755)
    before = temp_entries()
    code, out, err, wall = _health(slurm, tmp_path, scontrol=str(stuck))
    doc = _stored(tmp_path)
    assert doc["complete"] is True and [n["status"] for n in doc["nodes"]] == ["pass", "fail"]
    assert code == 2, out + err
    assert wall < 30
    assert slurm.node("node2")["State"] == "IDLE"
    actions = [e.get("action") for e in _events(tmp_path)]
    assert "drain" not in actions and "failed" in actions, actions
    [failed] = [e for e in _events(tmp_path) if e.get("action") == "failed"]
    assert failed["node"] == "node2" and failed["reason"].endswith(": no answer within 10 s; killed")
    assert not _host_processes(b"sleep\x003599\x00")
    assert_nothing_left(slurm, NODES, before)


MOUNTS_BOOK = """version: 1
deadline_s: 30
checks:
  fs.mounts: {mounts: [{path: /mnt/shared, fstype: fuse.hangfs}], stat_timeout_s: 2}
"""


def test_a_hung_mount_is_judged_and_drains_its_node(slurm, tmp_path):
    """Issue 32, 2.1: node2's /mnt/shared stops answering (a FUSE daemon that stopped reading, as an
    unreachable NFS server): the check bounded the statfs itself, so it is a judged FAIL naming the
    mount, and the gate drains node2 even over SSH, where a timeout of the connection would not."""
    slurm.hang_mount("node2", "pending")
    before = temp_entries()
    code, out, err, wall = _health(slurm, tmp_path, playbook=MOUNTS_BOOK)
    doc = _stored(tmp_path)
    assert doc["complete"] is True and [n["status"] for n in doc["nodes"]] == ["pass", "fail"]
    [result] = doc["nodes"][1]["results"]
    assert result["message"].startswith("/mnt/shared (fuse.hangfs rw from hangfs): statfs did not answer within 2 s"), (
        result
    )
    assert code == 2, out + err
    node2 = slurm.wait_node("node2", lambda n: "DRAIN" in n["State"])
    assert reason_body(node2["ReasonText"]).startswith("fs.mounts /mnt/shared (fuse.hangfs rw from hangfs): statfs")
    assert "DRAIN" not in slurm.node("node1")["State"]
    [drain] = [e for e in _events(tmp_path) if e.get("action") == "drain"]
    assert (drain["node"], drain["check"]) == ("node2", "fs.mounts")
    assert_nothing_left(slurm, NODES, before)


def _host_processes(argv: bytes) -> list[int]:
    found = []
    for p in Path("/proc").iterdir():
        try:
            if (
                p.name.isdigit()
                and (p / "cmdline").read_bytes() == argv
                and "\nState:\tZ" not in (p / "status").read_text()
            ):
                found.append(int(p.name))
        except OSError:
            pass
    return found


def _sweep(cluster, tmp_path: Path, history: Path) -> tuple[int, str, str]:
    (tmp_path / "book.yml").write_text(book(timeout_s=2, deadline_s=20))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "nodecheck",
            "sweep",
            str(cluster.inventory_path),
            "--nodes",
            "node[1-2]",
            "--playbook",
            str(tmp_path / "book.yml"),
            "--output-dir",
            str(tmp_path / "reports"),
            "--history",
            str(history),
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert_no_crash(proc.returncode, proc.stderr)
    return proc.returncode, proc.stdout, proc.stderr


def test_a_history_database_locked_by_another_sweep_waits_and_records(cluster, tmp_path):
    """Another sweep holds the write lock for 3 s: this sweep waits (busy timeout) and records."""
    cluster.fake_replay("node1", "ibstat", HEALTHY)
    cluster.fake_replay("node2", "ibstat", HEALTHY)
    history = tmp_path / "history.sqlite"
    code, out, err = _sweep(cluster, tmp_path, history)  # creates it
    assert code == 0, err
    # check_same_thread=False: the Timer's thread commits. Without it sqlite3 refuses the COMMIT
    # there (ProgrammingError, printed by the thread and lost), the lock stays held until close()
    # below, and the sweep rightly gives up at its busy timeout (60 s): "database is locked", exit 3
    holder = sqlite3.connect(str(history), isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")
    release = threading.Timer(3.0, holder.execute, args=("COMMIT",))
    release.start()
    try:
        code, out, err = _sweep(cluster, tmp_path, history)
    finally:
        release.join()
        holder.close()
    assert code == 0, err
    with sqlite3.connect(str(history)) as db:
        assert db.execute("SELECT count(*) FROM sweeps").fetchone()[0] == 2


def test_a_corrupt_history_database_is_an_error_not_a_crash(cluster, tmp_path):
    """A history file that is not SQLite: the sweep still runs and keeps its report, exits 3 (a
    sweep whose history could not be kept never exits 0), says why, and leaves the file alone."""
    cluster.fake_replay("node1", "ibstat", HEALTHY)
    cluster.fake_replay("node2", "ibstat", HEALTHY)
    history = tmp_path / "history.sqlite"
    garbage = b"SQLite format 3\x00" + os.urandom(4096)
    history.write_bytes(garbage)
    code, out, err = _sweep(cluster, tmp_path, history)
    assert code == 3, err
    assert str(history) in err, err
    assert [n["status"] for n in json.loads(out)["nodes"]] == ["pass", "pass"]
    assert len(list((tmp_path / "reports").glob("*/report.json"))) == 1
    assert history.read_bytes() == garbage
