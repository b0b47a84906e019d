"""job-check's choice of nodes: --slurm-job, $SLURM_JOB_ID, --inventory/--nodes, --local."""

from __future__ import annotations

from argparse import Namespace

import pytest

from nodecheck.core.errors import ConfigError
from nodecheck.job import command
from nodecheck.parsers.slurm import parse_squeue_job
from tests.helpers import data

RUNNING = "slurm-job/derived-recorded-22.05-squeue-O-running-multinode.txt"  # job 1 on node[1-3]
COMPLETED = "slurm-job/derived-recorded-22.05-squeue-O-completed.txt"  # job 3


def args(**over) -> Namespace:
    base = dict(
        job="job.yml",
        inventory=None,
        local=False,
        slurm_job=None,
        nodes=None,
        fanout=4,
        connect_timeout=1.0,
        accept_new_host_keys=False,
    )
    base.update(over)
    return Namespace(**base)


@pytest.fixture
def slurm(monkeypatch):
    asked: list[str] = []

    def fake(job_id: str, implicit: bool = False):
        asked.append(job_id)
        return parse_squeue_job(data(COMPLETED), "3") if job_id == "3" else parse_squeue_job(data(RUNNING), "1")

    monkeypatch.setattr("nodecheck.app.targets.read_job", fake)
    monkeypatch.setattr("nodecheck.app.transports.ssh_transport", lambda a: "ssh")
    return asked


def test_slurm_job_id_comes_from_the_environment(slurm, monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "1")
    nodes, transport, record = command._nodes(args())
    assert ([n.name for n in nodes], transport, record.job_id, slurm) == (
        ["node1", "node2", "node3"],
        "ssh",
        "1",
        ["1"],
    )


def test_inventory_nodes_named_inside_an_allocation_are_used(slurm, monkeypatch, tmp_path):
    monkeypatch.setenv("SLURM_JOB_ID", "1")
    inv = tmp_path / "hosts.yml"
    inv.write_text("nodes:\n  gpu[1-2]:\n")
    nodes, _, record = command._nodes(args(inventory=str(inv), nodes="gpu2"))
    assert ([n.name for n in nodes], record, slurm) == (["gpu2"], None, [])


def test_an_ended_job_is_refused(slurm):
    with pytest.raises(ConfigError) as e:
        command._nodes(args(slurm_job="3"))
    assert str(e.value).startswith(
        "--slurm-job: Slurm job 3 has ended (COMPLETED): its nodes may run another job by now, and nodecheck "
        "judges a job's nodes inside its allocation"
    )


def test_the_issues_job_yml_runs_end_to_end_here_and_the_incident_counts_fail(tmp_path, capsys):
    """The issue's JOB.yml, unchanged, through `nodecheck job-check --local`: run's JSON report with the
    seven job checks; the incident's counts at the issue's per_step 1 (one block a step) fail."""
    import json

    from nodecheck.cli import main
    from tests.job.test_spec import ISSUE_SHAPE

    (tmp_path / "job.yml").write_text(ISSUE_SHAPE)
    (tmp_path / "counts.json").write_text(data("job/constructed-incident-counts.json"))
    code = main(
        [
            "job-check",
            str(tmp_path / "job.yml"),
            "--local",
            "--format",
            "json",
            "--output-dir",
            str(tmp_path / "reports"),
        ]
    )
    [node] = json.loads(capsys.readouterr().out)["nodes"]
    checks = {r["check"] for r in node["results"]}
    assert checks == {
        "job.data_balance",
        "job.world_size",
        "job.env_consistency",
        "job.timeouts",
        "job.flight_recorder",
        "job.checkpoints",
        "job.retries",
    }
    [balance] = [r for r in node["results"] if r["check"] == "job.data_balance"]
    assert balance["status"] == "fail"
    assert balance["message"].startswith(
        "rank 3: 30,835 blocks, rank 11: 30,888; 53 blocks = 0.17%; ranks would stop ~53 steps apart"
    )
    assert balance["message"].endswith(
        "truncate all ranks to the global minimum (30,835): drop 53 blocks max, 0.085% of tokens"
    )
    assert code == 2
    [report] = list((tmp_path / "reports").iterdir())  # run's report directory
    assert report.name.endswith("_job-check-job")


def test_a_failing_counts_command_is_placed_at_its_line_of_job_yml(tmp_path, capsys):
    from nodecheck.cli import main

    job = tmp_path / "job.yml"
    job.write_text("world_size: 8\ngpus_per_node: 8\ndata_balance:\n  per_step: 1\n  counts_command: 'false'\n")
    assert main(["job-check", str(job), "--local", "--output-dir", str(tmp_path / "reports")]) == 64
    assert capsys.readouterr().err.startswith(
        f"nodecheck: error: {job}:5: data_balance.counts_command: false exited 1: (no output)"
    )
    assert not (tmp_path / "reports").exists()  # nothing ran
