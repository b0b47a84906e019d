"""Smoke tests of the real Slurm cluster on the simulated nodes (tests/harness/slurm_cluster.sh):
slurmd runs inside each node's namespaces, so a Prolog on node3 sees node3's hostname and fake tools."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest
from harness.cluster import HarnessError

pytestmark = pytest.mark.integration

SLURM_NODES = ["node1", "node2", "node3", "node4", "node5"]

# No PATH in a Prolog's environment (RECIPE §3.2): it sets its own. A node whose nvidia-smi (the
# node's fake) fails drains itself with a nodecheck reason and fails, so Slurm requeues the job.
PROLOG = """#!/bin/sh
PATH=/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin
echo "$(hostname) $SLURMD_NODENAME $SLURM_JOB_ID" >> {log}
if [ -x /usr/local/sbin/nvidia-smi ] && ! out=$(nvidia-smi 2>&1); then
  scontrol update nodename="$SLURMD_NODENAME" state=drain reason="nodecheck: nvidia-smi failed on $(hostname): $out"
  echo "prolog: $out" >&2
  exit 1
fi
exit 0
"""

# the environment exactly as slurmctld gives it, before anything is set
PROLOG_SLURMCTLD = """#!/bin/sh
env > {dir}/ctld-$SLURM_JOB_ID.env
/bin/hostname > {dir}/ctld-$SLURM_JOB_ID.hostname
"""


def _executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o755)
    return path


@pytest.fixture(scope="module")
def slurm_files(tmp_path_factory):
    """The Prologs and their output, in a directory the nodes can read (not under /root)."""
    d = tmp_path_factory.mktemp("slurm")
    os.chmod(d, 0o755)
    (d / "prolog.log").touch()
    prolog = _executable(d / "prolog.sh", PROLOG.format(log=d / "prolog.log"))
    ctld = _executable(d / "prolog_slurmctld.sh", PROLOG_SLURMCTLD.format(dir=d))
    return {"dir": d, "prolog": prolog, "prolog_slurmctld": ctld, "log": d / "prolog.log"}


@pytest.fixture(scope="module")
def slurm_module(cluster, slurm_files):
    """The Slurm cluster of this module, on node1-5; stopped at the end of the module."""
    yield cluster
    cluster.slurm_down()


@pytest.fixture
def slurm(slurm_module, slurm_files):
    """Slurm up (one configuration for the whole module, so it starts once) and clean: reset BEFORE
    each test, i.e. after conftest's cluster.reset() of the previous one restarted stopped nodes."""
    slurm_module.slurm_up(SLURM_NODES, prolog=slurm_files["prolog"], prolog_slurmctld=slurm_files["prolog_slurmctld"])
    slurm_module.slurm_reset()
    return slurm_module


def _prolog_runs(log: Path, jobid: int) -> list[tuple[str, str]]:
    """(hostname, SLURMD_NODENAME) of every Prolog run of the job."""
    return sorted((f[0], f[1]) for f in (line.split() for line in log.read_text().splitlines()) if f[2] == str(jobid))


def test_job_on_four_healthy_nodes_completes_and_the_prolog_ran_on_each(slurm, slurm_files):
    conf = slurm.slurm_conf
    assert conf == slurm.state_dir / "slurm" / "slurm.conf"
    assert f"export SLURM_CONF={conf}\n" == (conf.parent / "env.sh").read_text()
    assert slurm.slurm_nodes() == dict.fromkeys(SLURM_NODES, "IDLE")

    jobid = slurm.sbatch("-N4", wrap="hostname")
    job = slurm.wait_job(jobid, timeout=30)

    assert (job["JobState"], job["NodeList"], job["BatchHost"], job["Restarts"], job["ExitCode"]) == (
        "COMPLETED",
        "node[1-4]",
        "node1",
        "0",
        "0:0",
    )
    # PrologFlags=Alloc: the Prolog ran on all 4 nodes, each inside its own node (hostname = node name)
    assert _prolog_runs(slurm_files["log"], jobid) == [(n, n) for n in ("node1", "node2", "node3", "node4")]
    # the batch script ran on node1 (the simulated node), from the jobs directory
    assert (slurm.slurm_dir / "jobs" / f"slurm-{jobid}.out").read_text() == "node1\n"


def test_prolog_failing_on_node3_drains_it_and_the_job_completes_on_other_nodes(slurm, slurm_files):
    for n in SLURM_NODES:
        slurm.fake_output(n, "nvidia-smi", "GPU 0: NVIDIA H100 80GB HBM3\n")
    slurm.fake_exit(
        "node3", "nvidia-smi", 9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"
    )

    jobid = slurm.sbatch("-N4")
    # requeued (nohold_on_prolog_fail), eligible again cred_expire + 1 = 6 s after the failure
    job = slurm.wait_job(jobid, timeout=30)

    assert (job["JobState"], job["NodeList"], job["Restarts"]) == ("COMPLETED", "node[1-2,4-5]", "1")
    node3 = slurm.node("node3")
    assert node3["State"] == "IDLE+DRAIN"
    assert node3["ReasonText"] == (
        "nodecheck: nvidia-smi failed on node3: NVIDIA-SMI has failed because "
        "it couldn't communicate with the NVIDIA driver"
    )
    assert node3["ReasonUser"] == "root" and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", node3["ReasonTime"])
    assert node3["Reason"] == f"{node3['ReasonText']} [root@{node3['ReasonTime']}]"
    runs = _prolog_runs(slurm_files["log"], jobid)
    assert runs == sorted(
        [(n, n) for n in ("node1", "node2", "node3", "node4")] + [(n, n) for n in ("node1", "node2", "node4", "node5")]
    )
    assert "prolog failed" in (slurm.slurm_dir / "log" / "slurmd-node3.log").read_text()


def test_prolog_slurmctld_gets_the_job_nodelist_and_no_slurm_conf(slurm, slurm_files):
    jobid = slurm.sbatch("-N2", "-J", "ctld-env")
    slurm.wait_job(jobid, timeout=30)

    env = dict(
        line.split("=", 1)
        for line in (slurm_files["dir"] / f"ctld-{jobid}.env").read_text().splitlines()
        if "=" in line
    )
    assert env["SLURM_JOB_NODELIST"] == "node[1-2]"
    assert (env["SLURM_SCRIPT_CONTEXT"], env["SLURM_JOB_ID"], env["SLURM_JOB_NAME"]) == (
        "prolog_slurmctld",
        str(jobid),
        "ctld-env",
    )
    # Slurm 22.05 gives PrologSlurmctld neither SLURM_CONF nor PATH (nodecheck must not rely on them);
    # scontrol finds /etc/slurm/slurm.conf, bound there in slurmctld's namespace
    assert "SLURM_CONF" not in env and "PATH" not in env and "SLURMD_NODENAME" not in env
    assert (slurm_files["dir"] / f"ctld-{jobid}.hostname").read_text() == "ctl\n"


def test_drain_and_resume_as_an_operator_and_run_on_node(slurm):
    reason = 'operator: GPU3 reseat, ticket=4711 "urgent" ü'
    slurm.drain("node5", reason)
    node5 = slurm.node("node5")
    assert (node5["State"], node5["ReasonText"]) == ("IDLE+DRAIN", reason)

    slurm.resume("node5")
    node5 = slurm.wait_node("node5", lambda n: n["State"] == "IDLE", timeout=10)
    assert (node5["Reason"], node5["ReasonText"]) == ("", "")
    with pytest.raises(HarnessError, match="Invalid node state specified"):
        slurm.resume("node5")  # resuming a node that is not drained fails

    # a command "on" node3 as slurmd runs its HealthCheckProgram: node3's namespaces, almost no env
    slurm.fake_output("node3", "nvidia-smi", "GPU 0: node3's fake\n")
    rc, out, err = slurm.run_on_node(
        "node3", ["/bin/sh", "-c", "hostname; env | sort; nvidia-smi; /usr/bin/sinfo -h -N -o %N | wc -l"]
    )
    assert (rc, err) == (0, "")
    assert out.splitlines() == [
        "node3",
        f"PWD={slurm.slurm_dir / 'log'}",
        "SLURMD_NODENAME=node3",
        "GPU 0: node3's fake",
        "5",
    ]


def test_a_node_stopped_and_started_gets_its_slurmd_back(slurm):
    slurmd = slurm.slurm_dir / "slurmd-node2.pid"
    before = int(slurmd.read_text())
    slurm.stop("node2")  # "power off": its slurmd dies with everything on it
    assert not Path(f"/proc/{before}").exists() or "Z" in Path(f"/proc/{before}/stat").read_text().rsplit(")", 1)[1][:3]
    slurm.start("node2")

    slurm.slurm_reset()  # revive: a new slurmd inside node2's new namespaces
    after = int(slurmd.read_text())
    assert after != before
    assert os.readlink(f"/proc/{after}/ns/mnt") == os.readlink(f"/proc/{slurm.pid('node2')}/ns/mnt")
    job = slurm.wait_job(slurm.sbatch("-N5"), timeout=30)
    assert (job["JobState"], job["NodeList"]) == ("COMPLETED", "node[1-5]")


def test_programs_under_root_are_refused_before_anything_starts(slurm):
    with pytest.raises(HarnessError, match="under /root"):
        slurm.slurm_up(SLURM_NODES, prolog="/root/venv/bin/nodecheck-prolog")
    assert slurm.slurm_nodes() == dict.fromkeys(SLURM_NODES, "IDLE")  # the running cluster is untouched


def test_slurm_down_leaves_no_daemon_and_no_bind(slurm_module, slurm_files):
    c = slurm_module
    c.slurm_up(SLURM_NODES, prolog=slurm_files["prolog"], prolog_slurmctld=slurm_files["prolog_slurmctld"])
    jobid = c.sbatch("-N2", wrap="sleep 300")
    c.wait_job(jobid, {"RUNNING"}, timeout=30)
    conf = str(c.slurm_conf)
    assert _slurm_processes(conf)

    c.slurm_down()

    assert _slurm_processes(conf) == []
    assert not c.slurm_dir.exists()
    for n in SLURM_NODES:  # /etc/slurm in the nodes is the host's again
        assert " /etc/slurm " not in Path(f"/proc/{c.pid(n)}/mountinfo").read_text()
    c.slurm_down()  # a second down is a no-op


def test_slurm_down_also_ends_a_health_check_still_running(slurm_module, slurm_files):
    """slurmd's HealthCheckProgram gets no SLURM_CONF and no job id, only SLURMD_NODENAME: one still
    running when Slurm goes down must end with it, or its scontrol drains nodes of the next test's
    cluster (same ports, same node names)."""
    c = slurm_module
    c.slurm_up(SLURM_NODES, prolog=slurm_files["prolog"], prolog_slurmctld=slurm_files["prolog_slurmctld"])
    check = subprocess.Popen(
        ["nsenter", "-t", str(c.pid("node1")), "-u", "-m", "--", "/usr/bin/env", "-i", "SLURMD_NODENAME=node1"]
        + ["/bin/sleep", "300"],
        stdin=subprocess.DEVNULL,
    )
    # the same environment on this machine, outside every node: another test's (a fake srun's task,
    # a `nodecheck health` under test), not this cluster's; a SIGKILL from here failed those at random
    bystander = subprocess.Popen(
        ["/usr/bin/env", "-i", "SLURMD_NODENAME=node1", "/bin/sleep", "300"], stdin=subprocess.DEVNULL
    )
    try:
        time.sleep(0.3)
        assert check.poll() is None

        c.slurm_down()

        assert check.wait(timeout=10) == -9  # SIGKILL, as slurm_down ends every job process
        assert bystander.poll() is None
    finally:
        check.kill()
        bystander.kill()
        bystander.wait()


def _slurm_processes(conf: str) -> list[str]:
    """Live processes of the Slurm cluster with this slurm.conf: daemons by command line, job
    processes (slurmstepd, the job's sleep) by SLURM_CONF in their environment."""
    found, munge = [], f"--socket={Path(conf).parent}/munge/munge.socket".encode()
    for p in Path("/proc").iterdir():
        if not p.name.isdigit() or int(p.name) == os.getpid():
            continue
        try:
            if (p / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
            argv = (p / "cmdline").read_bytes().split(b"\0")
            env = (p / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if conf.encode() in argv or f"SLURM_CONF={conf}".encode() in env or munge in argv:
            found.append(f"{p.name} {b' '.join(argv).decode(errors='replace')}")
    return found
