"""parse_squeue_job on every recorded `squeue -O` output (tests/data/slurm-job/*squeue-O*). (The
`scontrol show job` parser was removed in issue 32: nothing read a job that way, since a job's name,
which its owner writes, can forge the fields scontrol prints after it. Two of its recordings stay for
tests/gate/test_slurm_jobs.py's fake scontrol.)"""

from __future__ import annotations

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.slurm import parse_squeue_job
from tests.helpers import data, data_files

Q = "slurm-job/derived-recorded-22.05-squeue-O-"
# file -> (job_id, state, reason, node_list, nodes, num_nodes, num_tasks, gpus, requeue, user, batch_host)
SQUEUE_EXPECTED = {
    # submitted with the name HOSTILE (the recording asked for the name too: the fields before it are these)
    "running-multinode.txt": (
        "1",
        "1",
        "RUNNING",
        "None",
        "node[1-3]",
        ("node1", "node2", "node3"),
        3,
        3,
        None,
        True,
        "root",
        "node1",
    ),
    # the name had a newline, \x1f and '|'
    "pending-held.txt": ("2", "2", "PENDING", "JobHeldUser", "", (), 1, 1, None, True, "root", ""),
    "completed.txt": ("3", "3", "COMPLETED", "None", "node1", ("node1",), 1, 1, None, True, "root", "node1"),
    "array-task-pending.txt": ("4_2", "4_2", "PENDING", "JobHeldUser", "", (), 1, 1, None, True, "root", ""),
    "array-two-tasks-completed.txt": (
        "5",
        "5_2",
        "COMPLETED",
        "None",
        "node3",
        ("node3",),
        1,
        1,
        None,
        True,
        "root",
        "node3",
    ),
    "pending-no-requeue.txt": ("6", "6", "PENDING", "JobHeldUser", "", (), 1, 1, None, False, "root", ""),
    "requeued.txt": ("1", "1", "PENDING", "BeginTime", "", (), 3, 3, None, True, "root", ""),
}
SQUEUE_FIELDS = (
    "job_id",
    "state",
    "reason",
    "node_list",
    "nodes",
    "num_nodes",
    "num_tasks",
    "gpus",
    "requeue",
    "user",
    "batch_host",
)


def test_every_squeue_file_is_covered():
    assert sorted(Q + f for f in SQUEUE_EXPECTED) == [f for f in data_files("slurm-job") if "squeue-O" in f]


@pytest.mark.parametrize("name", sorted(SQUEUE_EXPECTED))
def test_recorded_squeue_job(name):
    asked, *want = SQUEUE_EXPECTED[name]
    job = parse_squeue_job(data(Q + name), asked)
    assert tuple(getattr(job, f) for f in SQUEUE_FIELDS) == tuple(want)


def test_squeue_gres_gpus_from_the_allocated_tres():
    text = data(Q + "running-multinode.txt").replace("billing=3", "billing=3,gres/gpu=24")
    assert parse_squeue_job(text, "1").gpus == 24


@pytest.mark.parametrize(
    "text, words",
    [
        ("", "no such job ('Invalid job id specified': squeue listed nothing for 1)"),
        ("\n", "no such job"),
        ("1\x1f1\x1fRUNNING\x1fnode1\n", "4 fields, expected 11"),
        # a name asked for (one field more) is refused, not read as the reason
        (
            "1\x1f1\x1fRUNNING\x1fnode1\x1froot\x1f1\x1f1\x1f1\x1f\x1fnode1\x1fNone\x1fNodeList=x\n",
            "12 fields, expected 11",
        ),
        (
            "2\x1f2\x1fRUNNING\x1fnode1\x1froot\x1f1\x1f1\x1f1\x1f\x1fnode1\x1fNone\n",
            "asked for job 1, squeue answered",
        ),
        ("1\x1f1\x1fRUN NING\x1fnode1\x1froot\x1f1\x1f1\x1f1\x1f\x1fnode1\x1fNone\n", "State='RUN NING' is not"),
        ("1\x1f1\x1fRUNNING\x1fnode[1-\x1froot\x1f1\x1f1\x1f1\x1f\x1fnode1\x1fNone\n", "is not a hostlist"),
        ("1\x1f1\x1fRUNNING\x1fnode1\x1froot\x1fyes\x1f1\x1f1\x1f\x1fnode1\x1fNone\n", "Requeue='yes' is not 0 or 1"),
        ("x\x1f1\x1fRUNNING\x1fnode1\x1froot\x1f1\x1f1\x1f1\x1f\x1fnode1\x1fNone\n", "are not job ids"),
    ],
)
def test_squeue_garbage_is_a_parse_error(text, words):
    with pytest.raises(ParseError) as e:
        parse_squeue_job(text, "1")
    assert words in e.value.reason


@pytest.mark.parametrize("digits", [5000, 400], ids=["5000 digits", "400 digits"])
def test_squeue_counts_no_slurm_prints_are_not_counts(digits):
    # int() of 5000 digits raised ValueError; 400 digits were read as that many nodes and GPUs
    line = data(Q + "running-multinode.txt").replace("\x1f3\x1f3\x1f", f"\x1f{'9' * digits}\x1f3\x1f", 1)
    line = line.replace("billing=3", f"billing=3,gres/gpu={'9' * digits}")
    job = parse_squeue_job(line, "1")
    assert (job.num_nodes, job.num_tasks, job.gpus) == (None, 3, None)
