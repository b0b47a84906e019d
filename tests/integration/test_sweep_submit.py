"""`nodecheck sweep --slurm-submit --wait` against the real Slurm of the harness: node3 runs a job
(an exclusive `sleep 300`), so the sweep's batch job gets node[1-2,4], runs there, and the report
lists node3 "not tested: busy (ALLOCATED)", never healthy; the others are judged."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest
from harness.scenarios import apply
from harness.sim.common import node_python
from integration.runs import nodecheck

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
NODES = ["node1", "node2", "node3", "node4"]
IB_PORTS = "version: 1\ndeadline_s: 60\nchecks:\n  ib.ports: {timeout_s: 5, expected_ports: 8, min_rate_gbps: 400}\n"


@pytest.fixture
def slurm(cluster):
    cluster.slurm_up(NODES)
    cluster.slurm_reset()
    jobs: list[int] = []
    yield jobs
    for job in jobs:
        cluster.slurm_command("scancel", str(job), check=False)
    cluster.slurm_command("scancel", "--name=nodecheck-sweep", check=False)
    cluster.slurm_down()


def sweep(cluster, tmp_path, *more: str):
    """The submission, as root on the operator host. The nodes see neither /root nor what lives there
    (this checkout's .venv may be made from a pyenv Python in /root): the job runs nodecheck with the
    nodes' /usr/bin/python3 and this checkout's packages (the config's slurm: python)."""
    (tmp_path / "book.yml").write_text(IB_PORTS)
    (tmp_path / "gate.yml").write_text("sweep:\n  slurm: {python: " + node_python() + "}\n")
    site = next(Path(sys.executable).parent.parent.glob("lib/python3*/site-packages"))
    env = cluster.slurm_env() | {"PYTHONPATH": f"{ROOT}:{site}"}
    return nodecheck(
        "sweep",
        str(cluster.inventory_path),
        "--nodes",
        "node[1-4]",
        "--playbook",
        str(tmp_path / "book.yml"),
        "--output-dir",
        str(tmp_path / "reports"),
        "--slurm-submit",
        "--config",
        str(tmp_path / "gate.yml"),
        *more,
        env=env,
        timeout=180,
    )


def test_the_sweep_job_runs_on_the_idle_nodes_and_the_busy_one_is_not_tested(cluster, tmp_path, slurm):
    apply(cluster, "ib-healthy")
    busy = cluster.sbatch("-w", "node3", "--exclusive", wrap="sleep 300")
    slurm.append(busy)
    cluster.wait_job(busy, ("RUNNING",))
    code, out, err, wall = sweep(cluster, tmp_path, "--wait", "--time", "5:00")
    assert "node3: not tested: busy (ALLOCATED)" in err, err
    [line] = [x for x in out.splitlines() if x.startswith("submitted sweep job ")]
    job = line.split()[3]
    assert line == f"submitted sweep job {job} on node[1-2,4] (3 nodes; 1 not tested)"
    state_dir = Path(next(x for x in out.splitlines() if x.startswith("report: ")).rsplit(": ", 1)[1])
    assert stat.S_IMODE(state_dir.stat().st_mode) == 0o700
    # the sweep's exit code: 3, not 0: a sweep that left a node untested is no clean bill of health
    # (the batch script exits with it, so Slurm says FAILED, ExitCode=3:0)
    assert code == 3, (out, err, (state_dir / f"slurm-{job}.out").read_text())
    record = cluster.job(int(job))
    assert (record["JobState"], record["ExitCode"]) == ("FAILED", "3:0")
    assert (record["NodeList"], record["OverSubscribe"]) == ("node[1-2,4]", "NO")  # --exclusive
    assert (state_dir / "exit_code").read_text() == "3\n"
    [report_dir] = [d for d in (tmp_path / "reports").iterdir() if d.name != "submit" and d.is_dir()]
    doc = json.loads((report_dir / "report.json").read_text())
    statuses = {n["node"]: n["status"] for n in doc["nodes"]}
    assert statuses == {"node1": "pass", "node2": "pass", "node4": "pass", "node3": "skipped"}
    [node3] = [n for n in doc["nodes"] if n["node"] == "node3"]
    assert [r["message"] for r in node3["results"]] == ["not tested: busy (ALLOCATED)"]
    # the busy job was left alone
    assert cluster.job(busy)["JobState"] == "RUNNING"


def test_nothing_idle_submits_nothing(cluster, tmp_path, slurm):
    busy = cluster.sbatch("-N", "4", "-w", "node[1-4]", "--exclusive", wrap="sleep 300")
    slurm.append(busy)
    cluster.wait_job(busy, ("RUNNING",))
    code, out, err, _ = sweep(cluster, tmp_path)
    assert code == 3 and "node[1-4]: not tested: busy (ALLOCATED)" in err and "nothing submitted" in err
    assert "submitted" not in out
    assert cluster.slurm_command("squeue", "-h", "-n", "nodecheck-sweep").stdout.strip() == ""
