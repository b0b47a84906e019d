"""A Slurm job's facts as nodecheck reads them (Slurm.job: squeue) against a real Slurm 22.05: a job
name chosen to rewrite `scontrol show job`'s fields (issue 17, finding 5) changes nothing."""

from __future__ import annotations

import pytest

from nodecheck.app.slurm import Slurm, SlurmError

pytestmark = pytest.mark.integration

HOSTILE = "waits NodeList=gpu[001-064] UserId=alice(0) Requeue=0 JobState=COMPLETED"


@pytest.fixture
def slurm(cluster, monkeypatch):
    cluster.slurm_up(["node1", "node2"])
    cluster.slurm_reset()
    monkeypatch.setenv("SLURM_CONF", str(cluster.slurm_conf))
    yield cluster
    cluster.slurm_command("scancel", "--user=root", check=False)


def test_a_hostile_job_name_does_not_change_the_jobs_facts(slurm):
    running = slurm.sbatch("-J", HOSTILE, "-N", "2", wrap="sleep 60")
    slurm.wait_job(running, ("RUNNING",))
    # scontrol prints the name as the rest of its first line: these are its first fields
    assert slurm.scontrol("show", "job", str(running)).startswith(f"JobId={running} JobName={HOSTILE}\n")
    job = Slurm().job(str(running))
    assert (job.job_id, job.state, job.node_list, job.nodes, job.user, job.requeue, job.num_nodes) == (
        str(running),
        "RUNNING",
        "node[1-2]",
        ("node1", "node2"),
        "root",
        True,
        2,
    )
    # a name with a newline (sbatch accepts it), the squeue separator and '|'
    held = slurm.sbatch(
        "-J", "x\n   JobState=COMPLETED NodeList=node9 BatchHost=node9\x1f|", "--hold", "--no-requeue", wrap="true"
    )
    job = Slurm().job(str(held))
    assert (job.state, job.reason, job.nodes, job.batch_host, job.requeue) == ("PENDING", "JobHeldUser", (), "", False)
    slurm.slurm_command("scancel", str(running))
    slurm.wait_job(running, ("CANCELLED",))
    assert (Slurm().job(str(running)).state, Slurm().job(str(running)).nodes) == ("CANCELLED", ("node1", "node2"))


def test_an_unknown_job_is_said_as_slurm_says_it(slurm):
    with pytest.raises(SlurmError) as e:
        Slurm().job("999999")
    assert "Invalid job id specified" in str(e.value) and e.value.returncode == 1
