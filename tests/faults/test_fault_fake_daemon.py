"""A job's user forges a daemon on a node (issue 32, 1.3): a setuid-root program run through a symlink
named like the daemon, started as `nobody` inside the node's namespaces. Its comm is the daemon's
name and its /proc/PID is root's, which is all the limits and services checks used to ask; its
memlock of 64 KiB read as "FAIL memlock 64 KiB (slurmd's limits)" and drained the node, and a fake
munged stood in for a stopped one. Through the real CLI: the forgery is never taken for the daemon,
and the real slurmd still is."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from faults.support import assert_nothing_left, assert_report, run, temp_entries

NODE = "node1"
NOBODY = 65534
MEMLOCK_64K = 65536
LIMITS_BOOK = (
    "version: 1\ndeadline_s: 30\nchecks:\n"
    # memlock only: above the fake's 64 KiB, at most what a login gets (the kernel's default is 8 MiB)
    f"  limits: {{memlock: {2 * MEMLOCK_64K}, nofile: null, nproc: null, stack: null}}\n"
)
MUNGE_BOOK = "version: 1\ndeadline_s: 30\nchecks:\n  services: {required: [munge], with_nvswitch: [], optional: []}\n"


@contextmanager
def forged(cluster, name: str) -> Iterator[int]:
    """A copy of sleep, setuid root (4755), run through a symlink `name` by nobody with memlock 64 KiB,
    inside the node's mount and UTS namespaces; its pid once the setuid exec took (comm `name`, /proc/PID
    root's). The directory lies in /tmp, which the nodes share, and everyone may enter it."""
    d = Path(tempfile.mkdtemp(prefix="nodecheck-test.fake-daemon-"))
    pid = None
    try:
        d.chmod(0o755)
        target = d / "sleep"
        shutil.copy(shutil.which("sleep") or "/bin/sleep", target)
        target.chmod(0o4755)
        (d / name).symlink_to(target)
        out = cluster.in_node(
            NODE,
            f"prlimit --memlock={MEMLOCK_64K}:{MEMLOCK_64K} setpriv --reuid={NOBODY} --regid={NOBODY} "
            '--clear-groups "$1" 300 </dev/null >/dev/null 2>&1 &\necho $!',
            str(d / name),
        )
        pid = int(out.strip())
        deadline = time.monotonic() + 10
        while not _is_forged(pid, name):
            assert time.monotonic() < deadline, f"the forged {name} (pid {pid}) did not start"
            time.sleep(0.01)
        yield pid
    finally:
        if pid is not None:
            _kill(pid)
        shutil.rmtree(d, ignore_errors=True)


def _is_forged(pid: int, name: str) -> bool:
    try:
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
        return comm == name and os.stat(f"/proc/{pid}").st_uid == 0
    except OSError:
        return False


def _kill(pid: int) -> None:
    try:
        os.kill(pid, 9)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and "\nState:\tZ" not in _status(pid):
        assert time.monotonic() < deadline, f"pid {pid} did not die"
        time.sleep(0.01)


def _status(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return ""


def _results(o, check: str) -> list[dict]:
    return [r for r in o.by_node[NODE]["results"] if r["check"] == check]


@pytest.fixture
def no_slurm(cluster):
    cluster.slurm_down()  # an earlier test's Slurm: its slurmd would be judged, rightly
    return cluster


def test_a_forged_slurmd_does_not_choose_the_limits_judged(no_slurm, tmp_path):
    cluster = no_slurm
    before = temp_entries()
    with forged(cluster, "slurmd") as fake:
        o = run(cluster, tmp_path, NODE, playbook=LIMITS_BOOK)
        assert Path(f"/proc/{fake}").exists()  # it ran through the whole run
    assert_report(o, [NODE], complete=True)
    [memlock] = _results(o, "limits")
    assert "slurmd's limits" not in memlock["message"] and "64 KiB" not in memlock["message"]
    assert "(the probe's own login limits, set by PAM)" in memlock["message"]
    assert memlock["message"].endswith(
        f"; no slurmd on this node (1 process named slurmd, pid {fake}, is not root running a root-owned slurmd "
        "binary: not judged)"
    )
    assert_nothing_left(cluster, [NODE], before)


def test_a_forged_munged_does_not_stand_in_for_a_stopped_munge(cluster, tmp_path):
    before = temp_entries()
    with forged(cluster, "munged") as fake:
        o = run(cluster, tmp_path, NODE, playbook=MUNGE_BOOK)
    assert_report(o, [NODE], complete=True)
    [munge] = _results(o, "services")
    assert (munge["status"], o.code) == ("fail", 2)
    assert munge["message"].startswith(
        "munge.service not running: no process named munged of root or a system account on this node; 1 process(es) "
        f"of that name run as a user account (uid {NOBODY}, pid {fake}), not the daemon"
    )
    assert_nothing_left(cluster, [NODE], before)


def test_beside_a_forged_slurmd_the_real_slurmd_is_judged(cluster, tmp_path):
    # Debian's slurmd of tests/harness/slurm_cluster.sh, root's, in the node's mount namespace
    cluster.slurm_up([NODE])
    try:
        real = int((cluster.slurm_dir / f"slurmd-{NODE}.pid").read_text())
        with forged(cluster, "slurmd"):
            o = run(cluster, tmp_path, NODE, playbook=LIMITS_BOOK)
    finally:
        cluster.slurm_down()
    assert_report(o, [NODE], complete=True)
    [memlock] = _results(o, "limits")
    assert "(slurmd's limits)" in memlock["message"] and "64 KiB" not in memlock["message"]
    [stored] = (tmp_path / "reports").glob("*/report.json")
    probe_out = (stored.parent / o.capture(NODE, "limits")["stdout"]).read_text()
    assert f"@@nodecheck source slurmd pid={real} via=exe\n" in probe_out
