"""The limits probe run here with sh: a process named slurmd in this mount namespace with memlock
64 KiB (what the simulated cluster's fault sets with prlimit), slurm.conf's PropagateResourceLimits,
and the probe's own limits when no slurmd runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from nodecheck.checks.limits import LimitsParams, limits
from nodecheck.core.model import Status
from nodecheck.probes.limits import LIMITS, read_limits
from tests.helpers import captures

pytestmark = pytest.mark.skipif(
    shutil.which("prlimit") is None or not os.path.exists("/proc/self/limits"), reason="needs util-linux and /proc"
)


def run(path_dirs=(), **extra_env):
    env = {**os.environ, "PATH": os.pathsep.join([*map(str, path_dirs), os.environ["PATH"]]), **extra_env}
    done = subprocess.run(LIMITS.argv, capture_output=True, text=True, env=env, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return captures(LIMITS, done.stdout)


def slurmd_here() -> bool:
    """A slurmd in this mount namespace (what the probe would find): the simulated nodes' slurmds,
    which the integration tests leave running in the nodes' own namespaces, do not count."""
    mine = os.stat("/proc/self/ns/mnt")
    for comm in Path("/proc").glob("[0-9]*/comm"):
        try:
            if comm.read_text().strip() == "slurmd":
                ns = os.stat(comm.parent / "ns" / "mnt")
                if (ns.st_dev, ns.st_ino) == (mine.st_dev, mine.st_ino):
                    return True
        except OSError:  # gone meanwhile
            continue
    return False


@pytest.fixture
def slurmd(tmp_path):
    """A process named slurmd (a copy of sleep) started with memlock 64 KiB, soft and hard."""
    binary = tmp_path / "slurmd"
    shutil.copy(shutil.which("sleep"), binary)
    process = subprocess.Popen(["prlimit", "--memlock=65536:65536", str(binary), "60"])
    try:
        for _ in range(100):  # until prlimit has exec'd it
            with open(f"/proc/{process.pid}/comm") as f:
                if f.read().strip() == "slurmd":
                    break
            time.sleep(0.05)
        yield process.pid
    finally:
        process.kill()
        process.wait()


def test_slurmd_memlock_64k_fails_naming_slurmd(slurmd):
    out = run()
    facts = read_limits(out)
    assert (facts.slurmd_pid, facts.source) == (slurmd, "slurmd's limits")
    memlock = next(v for v in limits(out, LimitsParams()) if v.subject == "memlock")
    assert memlock.status is Status.FAIL
    assert memlock.message.startswith(
        "memlock 64 KiB (slurmd's limits), expected unlimited (RDMA memory registration fails)"
    )


def test_propagation_from_the_nodes_slurm_conf_is_read(slurmd, tmp_path):
    conf = tmp_path / "slurm.conf"
    # slurm.conf as sites write it: a comment, other settings, the setting in another case
    conf.write_text("# limits\nProctrackType=proctrack/cgroup\npropagateresourcelimitsexcept=MEMLOCK\n")
    out = run(SLURM_CONF=str(conf))
    facts = read_limits(out)
    assert facts.propagation is not None
    assert facts.propagation.text == "PropagateResourceLimits=ALL, PropagateResourceLimitsExcept=MEMLOCK"
    assert not facts.propagation.propagated("memlock") and facts.propagation.propagated("nofile")
    memlock = next(v for v in limits(out, LimitsParams()) if v.subject == "memlock")
    assert memlock.message == (
        "memlock 64 KiB (slurmd's limits), expected unlimited (RDMA memory registration fails); "
        "PropagateResourceLimits=ALL, PropagateResourceLimitsExcept=MEMLOCK: not propagated, a job gets "
        "slurmd's soft limit"
    )


def test_without_slurmd_the_probes_own_limits_are_judged_and_said():
    if slurmd_here():
        pytest.skip("a slurmd runs here")
    out = run()
    facts = read_limits(out)
    assert facts.slurmd_pid is None
    assert facts.limits.form == "proc"
    verdicts = list(limits(out, LimitsParams(memlock=0, nofile=1, nproc=1, stack=0)))
    assert [v.subject for v in verdicts] == ["memlock", "nofile", "nproc", "stack"]
    assert all(v.status is Status.PASS for v in verdicts)
    assert all("(the probe's own login limits, set by PAM)" in v.message for v in verdicts)
    assert verdicts[0].message.endswith("; no slurmd on this node")


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="starts a process as another uid")
def test_a_users_process_named_slurmd_is_not_taken_for_slurmd(tmp_path):
    # any process may call itself slurmd: a job's user must not choose the limits that are judged
    if slurmd_here():
        pytest.skip("a slurmd runs here")
    binary = tmp_path / "slurmd"
    shutil.copy(shutil.which("sleep"), binary)
    binary.chmod(0o755)
    os.chmod(tmp_path, 0o755)
    process = subprocess.Popen(["setpriv", "--reuid=4242", "--regid=4242", "--clear-groups", str(binary), "60"])
    try:
        for _ in range(100):
            with open(f"/proc/{process.pid}/comm") as f:
                if f.read().strip() == "slurmd":
                    break
            time.sleep(0.05)
        else:
            pytest.fail("the user's slurmd did not start")
        facts = read_limits(run())
        assert (facts.slurmd_pid, facts.source) == (None, "the probe's own login limits, set by PAM")
    finally:
        process.kill()
        process.wait()
