"""`--transport srun` against the real Slurm of the harness: the same scenarios as over SSH (healthy,
a failing node, a node down, a hung tool, a pair test), the probes run by srun steps inside a job's
allocation, no SSH and no inventory."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from harness.scenarios import IB_CAS, IB_DEMO, IBSTAT_HEALTHY, Fabric, Replay, apply
from integration.runs import nodecheck
from integration.test_run import _sleepers

pytestmark = pytest.mark.integration

DATA = Path(__file__).resolve().parents[1] / "data"

NODES = [f"node{i}" for i in range(1, 9)]
IB_PORTS = "version: 1\ndeadline_s: 60\nchecks:\n  ib.ports: {timeout_s: 2, expected_ports: 8, min_rate_gbps: 400}\n"


@pytest.fixture
def job(cluster):
    """A running 8-node job holding node1-8 (sleep): the allocation the srun steps run in."""
    cluster.slurm_up(NODES)
    cluster.slurm_reset()
    # --no-kill, as an operator allocates for a check: a node that dies must not end the allocation
    # (Slurm would, once srun reported the failed launch, and every later step would fail)
    jobid = cluster.sbatch("-N", "8", "-w", "node[1-8]", "--exclusive", "--no-kill", wrap="sleep 600")
    cluster.wait_job(jobid, ("RUNNING",))
    yield str(jobid)
    cluster.slurm_command("scancel", str(jobid), check=False)
    cluster.slurm_down()  # (a node the test stopped has no slurmd: the next Slurm starts whole)


def run(cluster, tmp_path, book: str, *args: str) -> tuple[int, dict, float]:
    (tmp_path / "book.yml").write_text(book)
    code, out, err, wall = nodecheck(
        "run",
        *args,
        "--playbook",
        str(tmp_path / "book.yml"),
        "--format",
        "json",
        "--output-dir",
        str(tmp_path / "reports"),
        env=cluster.slurm_env(),
    )
    assert code != 64, err
    return code, json.loads(out), wall


def statuses(doc) -> dict[str, str]:
    return {n["node"]: n["status"] for n in doc["nodes"]}


def messages(doc) -> dict[str, list[str]]:
    return {n["node"]: sorted(r["message"] for r in n["results"] if r["status"] != "pass") for n in doc["nodes"]}


def test_srun_gives_the_ssh_verdicts_on_the_demo_layout_with_slurms_words_for_a_node_down(cluster, tmp_path, job):
    apply(cluster, IB_DEMO)  # node8's sshd is stopped, and with it everything on node8: its slurmd too
    code_ssh, ssh, _ = run(cluster, tmp_path, IB_PORTS, str(cluster.inventory_path), "--nodes", "node[1-8]")
    code, srun, wall = run(cluster, tmp_path, IB_PORTS, "--slurm-job", job)  # no inventory: srun
    assert (
        statuses(srun)
        == statuses(ssh)
        == {
            "node1": "pass",
            "node2": "pass",
            "node3": "fail",
            "node4": "pass",
            "node5": "fail",
            "node6": "timeout",
            "node7": "error",
            "node8": "unreachable",
        }
    )
    assert code == code_ssh == 2 and srun["complete"] is True
    same = {n: m for n, m in messages(ssh).items() if n != "node8"}
    assert {n: m for n, m in messages(srun).items() if n != "node8"} == same
    assert messages(srun)["node6"] == ["ibstat timed out: no answer within 2 s"]
    [down] = messages(srun)["node8"]
    assert down.startswith("unreachable: Slurm could not start it: error: Task launch for StepId=")
    # one srun step per probe round: the round's first step (the job's step 0) reached every node
    assert f"Task launch for StepId={job}.0 failed on node node8: " in down
    [capture] = [c for c in srun["captures"] if c["node"] == "node1"]
    assert capture["outcome"] == "exited"
    # the tool's bytes, exactly, through base64 in the step's framing (and as SSH brought them)
    recorded = [(d / "captures/node1/ibstat.txt").read_bytes() for d in (tmp_path / "reports").iterdir()]
    assert recorded == [(DATA / IBSTAT_HEALTHY).read_bytes()] * 2
    assert wall < 40  # Slurm's MessageTimeout (10 s) for node8, then the round again without it


def test_a_hung_tool_under_srun_times_out_and_the_step_ends_it(cluster, tmp_path, job):
    apply(cluster, {n: [Replay("ibstat", IBSTAT_HEALTHY)] for n in NODES} | {"node6": IB_DEMO["node6"]})
    earlier = set(_sleepers())
    code, doc, wall = run(cluster, tmp_path, IB_PORTS.replace("timeout_s: 2", "timeout_s: 1"), "--slurm-job", job)
    [hung] = [c for c in doc["captures"] if c["node"] == "node6"]
    assert hung["outcome"] == "timeout" and 1.0 <= hung["duration_s"] < 3.0
    assert (code, statuses(doc)["node6"]) == (3, "timeout")
    assert all(s == "pass" for n, s in statuses(doc).items() if n != "node6")
    deadline = time.monotonic() + 15  # the aborted step's slurmstepd kills the task's processes
    while set(_sleepers()) - earlier and time.monotonic() < deadline:
        time.sleep(0.3)
    assert set(_sleepers()) - earlier == set()
    assert wall < 15


def test_all_healthy_through_srun_passes_with_the_inventory_only_for_names(cluster, tmp_path, job):
    apply(cluster, "ib-healthy")
    code, doc, _ = run(
        cluster, tmp_path, IB_PORTS, str(cluster.inventory_path), "--slurm-job", job, "--transport", "srun"
    )
    assert (code, doc["status"], set(statuses(doc).values()), len(doc["nodes"])) == (0, "pass", {"pass"}, 8)
    assert doc["nodes"][0]["address"] == "127.0.1.1"  # the inventory's entry, though srun reached it


def test_a_pair_test_through_srun_names_the_bad_node(cluster, tmp_path, job):
    layout = {"*": [Fabric(devices=IB_CAS, nodes=(("node5", (("gbps", 120.0),)),))]}
    apply(cluster, layout | {n: [Replay("ibstat", IBSTAT_HEALTHY)] for n in NODES})
    book = "version: 1\nchecks:\n  ib.pairs: {devices: [mlx5_0, mlx5_3], duration_s: 1, test_timeout_s: 4}\n"
    code, doc, wall = run(cluster, tmp_path, book, "--slurm-job", job)
    extras = doc["extras"]["ib.pairs"]
    assert extras["bad_nodes"] == ["node5"] and extras["bad_links"] == [] and extras["rounds"] == 2
    assert statuses(doc) == {n: "fail" if n == "node5" else "pass" for n in NODES}
    [(message)] = messages(doc)["node5"]
    assert message.startswith("bad node: fails with 2/2 partners, which pass with others:")
    assert code == 2 and wall < 40


def test_srun_needs_a_job(cluster, tmp_path):
    (tmp_path / "book.yml").write_text(IB_PORTS)
    env = {k: v for k, v in cluster.slurm_env().items() if k != "SLURM_JOB_ID"}
    code, out, err, _ = nodecheck(
        "run", str(cluster.inventory_path), "--transport", "srun", "--playbook", str(tmp_path / "book.yml"), env=env
    )
    assert code == 64 and "--transport srun runs inside a Slurm job's allocation" in err
