"""Which nodes a run reaches, and how: an inventory over SSH, a Slurm job's nodes (--slurm-job or
$SLURM_JOB_ID) over srun or SSH, or this machine."""

from __future__ import annotations

from argparse import Namespace

import pytest

from nodecheck.app import targets
from nodecheck.core.errors import ConfigError
from nodecheck.parsers.slurm import parse_squeue_job
from nodecheck.transport.srun import SrunTransport
from nodecheck.transport.ssh import SshTransport
from tests.helpers import data

RUNNING = "slurm-job/derived-recorded-22.05-squeue-O-running-multinode.txt"  # job 1 on node[1-3]
COMPLETED = "slurm-job/derived-recorded-22.05-squeue-O-completed.txt"  # job 3


def args(**over) -> Namespace:
    base = dict(
        command="run",
        inventory=None,
        local=False,
        slurm_job=None,
        nodes=None,
        transport="auto",
        fanout=4,
        connect_timeout=1.0,
        accept_new_host_keys=False,
    )
    return Namespace(**(base | over))


@pytest.fixture
def slurm(monkeypatch):
    asked: list[str] = []

    def read(job_id: str, implicit: bool = False):
        asked.append(job_id)
        return parse_squeue_job(data(COMPLETED), "3") if job_id == "3" else parse_squeue_job(data(RUNNING), "1")

    monkeypatch.setattr(targets, "read_job", read)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    return asked


@pytest.fixture
def inventory(tmp_path):
    inv = tmp_path / "hosts.yml"
    inv.write_text("nodes:\n  node[1-3]:\n    address: 10.0.0.[1-3]\n  node9:\n")
    return str(inv)


def test_a_job_without_an_inventory_is_reached_by_srun_in_that_job(slurm):
    nodes, transport = targets.reach(args(slurm_job="1"))
    assert [(n.name, n.address) for n in nodes] == [("node1", "node1"), ("node2", "node2"), ("node3", "node3")]
    assert isinstance(transport, SrunTransport) and transport.job_id == "1" and slurm == ["1"]


def test_a_job_with_an_inventory_is_reached_over_ssh_as_the_inventory_says(slurm, inventory):
    nodes, transport = targets.reach(args(slurm_job="1", inventory=inventory))
    assert [(n.name, n.address) for n in nodes] == [("node1", "10.0.0.1"), ("node2", "10.0.0.2"), ("node3", "10.0.0.3")]
    assert isinstance(transport, SshTransport)
    _, transport = targets.reach(args(slurm_job="1", inventory=inventory, transport="srun"))
    assert isinstance(transport, SrunTransport)


def test_inside_an_allocation_the_job_is_the_default_unless_nodes_are_named(slurm, inventory, monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "1")
    nodes, _ = targets.reach(args(inventory=inventory))
    assert [n.name for n in nodes] == ["node1", "node2", "node3"] and slurm == ["1"]
    nodes, transport = targets.reach(args(inventory=inventory, nodes="node9"))
    assert [n.name for n in nodes] == ["node9"] and isinstance(transport, SshTransport) and slurm == ["1"]


@pytest.mark.parametrize(
    "over, words",
    [
        (dict(transport="srun"), "--transport srun runs inside a Slurm job's allocation"),
        (dict(local=True, slurm_job="1"), "--local runs on this machine only"),
        (dict(slurm_job="1", nodes="node1"), "--nodes picks inventory nodes"),
        (dict(slurm_job="3"), "Slurm job 3 has ended (COMPLETED): its nodes may run another job by now"),
    ],
)
def test_contradictions_and_an_ended_job_are_bad_input(slurm, over, words):
    with pytest.raises(ConfigError) as e:
        targets.reach(args(**over))
    assert words in str(e.value)
