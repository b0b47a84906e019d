"""A hostile JOB.yml (issue 32, 1.1): a job's user hands the root watcher a JOB.yml of their own whose
`watch:` block tells root what to run (alerts.command), where to POST (alerts.url), which processes to
signal (match + on_hang cancel) and to collect every rank's stacks (forensics). Through the real CLI,
as a child process, against the simulated cluster: exit 64 naming the field and why, before any node
is contacted; root ran nothing, sent nothing, signalled nothing. The same file with those values given
by root on the command line watches the nodes and alerts through root's own hook."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from faults.support import assert_nothing_left, temp_entries

from tests.helpers import read_until
from tests.watch.test_alerts import Receiver

NOBODY = 65534
NODES = ["node1", "node2"]
JOB = """\
world_size: 16
gpus_per_node: 8
watch:
  progress: {log: /scratch/no-such-job/train.log}
  bounds: {startup_grace_s: 1.0, hang_after_s: 1.0, unresponsive_after_s: 60}
"""
HOOK = """import json, os, sys
open(sys.argv[1], "a").write(json.dumps({"uid": os.getuid(), **json.load(sys.stdin)}) + "\\n")
"""


def users_job(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "JOB.yml"
    path.write_text(JOB + extra)
    os.chown(path, NOBODY, NOBODY)
    path.chmod(0o644)
    return path


def argv(cluster, tmp_path: Path, job: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "nodecheck", "watch", str(cluster.inventory_path), "--nodes", "node[1-2]"] + [
        "--config",
        str(job),
        "--output-dir",
        str(tmp_path / "reports"),
        *extra,
    ]


def watch(cluster, tmp_path: Path, job: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        argv(cluster, tmp_path, job, "--max-samples", "12", *extra), capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def victim():
    """A root process a hostile `match:` would name: it must outlive the refused watch."""
    marker = f"nodecheck-victim-{uuid.uuid4().hex[:8]}"
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", marker])
    yield marker, proc
    proc.kill()
    proc.wait()


@pytest.mark.parametrize("case", ["alerts.command", "alerts.url", "match+on_hang", "forensics"])
def test_a_users_job_yml_cannot_make_the_root_watcher_act(cluster, tmp_path, victim, case):
    marker, victim_proc = victim
    proof, receiver = tmp_path / "PROOF", Receiver()
    before = temp_entries()
    try:
        field, line, extra = {
            "alerts.command": ("alerts.command", 6, f"  alerts: {{command: \"/bin/sh -c 'id > {proof}'\"}}\n"),
            "alerts.url": ("alerts.url", 6, f"  alerts: {{url: '{receiver.url}'}}\n"),
            "match+on_hang": ("match", 6, f"  match: '{marker}'\n  on_hang: cancel\n"),
            "forensics": ("forensics", 6, "  forensics: true\n"),  # --match from root: forensics alone
        }[case]
        job = users_job(tmp_path, extra)
        done = watch(cluster, tmp_path, job, *(["--match", marker] if case == "forensics" else []))
    finally:
        receiver.close()
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 64, (done.returncode, done.stdout, done.stderr)
    assert f"{job}:{line}: watch.{field}: not taken from this file (owned by uid {NOBODY}): " in done.stderr, (
        done.stderr
    )
    assert "root-owned config or the command line" in done.stderr
    assert done.stdout == ""  # not started: no watch line, no tick
    assert not proof.exists() and receiver.bodies == []
    assert victim_proc.poll() is None, "root signalled the process the user's file named"
    assert not (tmp_path / "reports").exists()  # no state, no incident, no forensics record
    assert_nothing_left(cluster, NODES, before)


def test_the_operator_gives_the_same_on_the_command_line_and_the_watcher_acts(cluster, tmp_path, victim):
    """The user's file keeps describing its job; root's command line names the processes and the hook:
    the watch runs on the real nodes (the processes found, the missing log said) and root's own hook
    gets the hang. Waits on the watcher's output, not on a number of ticks: on a loaded machine a tick
    may take longer than the interval."""
    marker, victim_proc = victim
    events = tmp_path / "events.jsonl"
    (tmp_path / "hook.py").write_text(HOOK)
    job = users_job(tmp_path, "")
    before = temp_entries()
    hook = f"{sys.executable} {tmp_path / 'hook.py'} {events}"
    proc = subprocess.Popen(
        # a user's file may not ask for ticks under 5 s; root's command line may (--interval)
        argv(cluster, tmp_path, job, "--match", marker, "--alert-command", hook, "--interval", "0.5"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        hung = read_until(proc, ": hung: no progress within the startup grace", timeout=90)[-1]
        wait_until(lambda: events.exists() and events.read_text().endswith("\n"), timeout=30)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert "Traceback" not in err, err
    assert proc.returncode == 2, (proc.returncode, out, err)  # the last verdict: hung
    assert "/scratch/no-such-job/train.log: No such file or directory" in hung
    [event] = [json.loads(x) for x in events.read_text().splitlines()]
    assert (event["uid"], event["kind"], event["verdict"]) == (0, "alarm", "hung"), event
    assert victim_proc.poll() is None  # no --on-hang: nothing touched
    assert_nothing_left(cluster, NODES, before)


def wait_until(ready, timeout: float) -> None:
    end = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < end, "not within the time"
        time.sleep(0.05)
