"""parse_show_job on every recorded `scontrol show job` output (tests/data/slurm/*job*)."""

from __future__ import annotations

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.slurm import parse_show_job, parse_squeue_job
from tests.helpers import data, data_files

R = "slurm-job/recorded-22.05-scontrol-show-job-"
# file -> (job_id, name, state, reason, node_list, nodes, num_nodes, num_tasks, gpus, requeue, restarts,
#          user, batch_host)
EXPECTED = {
    R + "completed.txt": ("1", "done", "COMPLETED", "None", "node1", ("node1",), 1, 1, None, True, 0, "root", "node1"),
    R + "failed.txt": (
        "2",
        "fails",
        "FAILED",
        "NonZeroExitCode",
        "node1",
        ("node1",),
        1,
        1,
        None,
        True,
        0,
        "root",
        "node1",
    ),
    R + "running.txt": ("3", "train", "RUNNING", "None", "node1", ("node1",), 1, 1, None, True, 0, "root", "node1"),
    R + "cancelled.txt": ("3", "train", "CANCELLED", "None", "node1", ("node1",), 1, 1, None, True, 0, "root", "node1"),
    R + "running-multinode.txt": (
        "4",
        "multi",
        "RUNNING",
        "None",
        "node[1-3]",
        ("node1", "node2", "node3"),
        3,
        3,
        None,
        True,
        0,
        "root",
        "node1",
    ),
    # `scontrol requeue 4` while it ran: back to PENDING (BeginTime), no nodes, Restarts=1 ...
    R + "requeued.txt": ("4", "multi", "PENDING", "BeginTime", "", (), 3, 3, None, True, 1, "root", ""),
    # ... and a few seconds later running again on the same nodes
    R + "requeued-later.txt": (
        "4",
        "multi",
        "RUNNING",
        "None",
        "node[1-3]",
        ("node1", "node2", "node3"),
        3,
        3,
        None,
        True,
        1,
        "root",
        "node1",
    ),
    R + "running-two-nodes.txt": (
        "5",
        "waits",
        "RUNNING",
        "None",
        "node[2-3]",
        ("node2", "node3"),
        2,
        2,
        None,
        True,
        0,
        "root",
        "node2",
    ),
    # NumNodes=1-1 while pending: the minimum
    R + "pending-begintime.txt": ("6", "later", "PENDING", "BeginTime", "", (), 1, 1, None, True, 0, "root", ""),
    "slurm-job/derived-recorded-22.05-scontrol-show-job-running-two-nodes-gres-gpu16.txt": (
        "5",
        "waits",
        "RUNNING",
        "None",
        "node[2-3]",
        ("node2", "node3"),
        2,
        2,
        16,
        True,
        0,
        "root",
        "node2",
    ),
    # Slurm 23.02 at a site: AllocTRES (not TRES), Requeue=0
    "slurm-job/hpc2n-course-scontrol-show-job-23.02-completed-two-nodes.txt": (
        "34815931",
        "compiler-run",
        "COMPLETED",
        "None",
        "b-cn[1703,1705]",
        ("b-cn1703", "b-cn1705"),
        2,
        12,
        None,
        False,
        0,
        "bbrydsoe",
        "b-cn1703",
    ),
}
FIELDS = (
    "job_id",
    "name",
    "state",
    "reason",
    "node_list",
    "nodes",
    "num_nodes",
    "num_tasks",
    "gpus",
    "requeue",
    "restarts",
    "user",
    "batch_host",
)


def test_every_job_file_is_covered():
    files = [f for f in data_files("slurm-job") if "show-job" in f]
    assert sorted([*EXPECTED, R + "invalid-id.txt"]) == files


@pytest.mark.parametrize("path", sorted(EXPECTED))
def test_recorded_job(path):
    job = parse_show_job(data(path))
    assert tuple(getattr(job, f) for f in FIELDS) == EXPECTED[path]
    assert job.raw.startswith(f"JobId={job.job_id} JobName=")
    assert job.ended == (job.state in ("COMPLETED", "FAILED", "CANCELLED"))
    assert job.running == (job.state == "RUNNING")


def test_invalid_job_id_is_a_parse_error_naming_it():
    with pytest.raises(ParseError) as e:
        parse_show_job(data(R + "invalid-id.txt"))
    assert "Invalid job id specified" in e.value.reason
    assert e.value.excerpt == "slurm_load_jobs error: Invalid job id specified\n"


def test_only_the_first_record_of_several():
    text = data(R + "running.txt") + data(R + "completed.txt")
    job = parse_show_job(text)
    assert (job.job_id, job.state) == ("3", "RUNNING")
    assert "JobId=1" not in job.raw


def test_trailing_plus_of_a_state_is_stripped_and_null_nodelist_is_empty():
    text = (
        data(R + "pending-begintime.txt")
        .replace("JobState=PENDING", "JobState=REQUEUED+")
        .replace("   NodeList=\n", "   NodeList=(null)\n")
    )
    job = parse_show_job(text)
    assert (job.state, job.node_list, job.nodes) == ("REQUEUED", "", ())


def test_job_name_with_spaces():
    text = data(R + "running.txt").replace("JobName=train", "JobName=my train run")
    assert parse_show_job(text).name == "my train run"


@pytest.mark.parametrize(
    "text, words",
    [
        ("", "empty output"),
        ("\n\n", "empty output"),
        ("NodeName=node1 Arch=x86_64\n   State=IDLE\n", "expected a line like JobId="),
        ("JobId=7 JobName=x\n   UserId=root(0)\n", "no JobState"),
        ("JobId=7 JobName=x\n   JobState=RUNNING\n   garbage line here\n", "unexpected line 'garbage line here'"),
        ("JobId=7 JobName=x\n   JobState=RUNNING\n   NodeList=node[1-\n", "is not a hostlist"),
    ],
)
def test_garbage_is_a_parse_error(text, words):
    with pytest.raises(ParseError) as e:
        parse_show_job(text)
    assert words in e.value.reason


def test_a_job_whose_comment_quotes_scontrols_error_is_still_read():
    text = data(R + "running-multinode.txt").replace(
        "   Command=", "   Comment=retry: Invalid job id specified\n   Command=", 1
    )
    assert "Comment=retry" in text
    job = parse_show_job(text)
    assert (job.job_id, job.state, job.nodes) == ("4", "RUNNING", ("node1", "node2", "node3"))


# ---- a job's name is its owner's text (issue 17, finding 5) ----------------------------------------

HOSTILE = "waits NodeList=gpu[001-064] UserId=alice(0) Requeue=0 JobState=COMPLETED"


def test_a_job_name_cannot_rewrite_the_fields_of_scontrol_show_job():
    # as Slurm 22.05 printed `sbatch -J "<HOSTILE>" -N2` (tests/harness): the name is the rest of line 1
    text = data(R + "running-two-nodes.txt").replace("JobName=waits", f"JobName={HOSTILE}")
    assert text.startswith(f"JobId=5 JobName={HOSTILE}\n")
    job = parse_show_job(text)
    assert (job.name, job.node_list, job.user, job.requeue, job.state) == (
        HOSTILE,
        "node[2-3]",
        "root",
        True,
        "RUNNING",
    )


def test_a_job_name_with_a_newline_that_forges_lines_is_refused():
    # sbatch accepts a newline in -J; the forged line is indented as Slurm's own are
    text = data(R + "running-two-nodes.txt").replace(
        "JobName=waits", "JobName=x\n   JobState=COMPLETED NodeList=gpu[001-064] UserId=alice(0) Requeue=0"
    )
    with pytest.raises(ParseError) as e:
        parse_show_job(text)
    assert "printed twice (a job name with a newline can forge lines; read the job with squeue)" in e.value.reason


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
    assert (job.name, job.restarts) == ("", None)  # squeue is not asked for the name; it has no restart count


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
