"""parse_show_job on every recorded `scontrol show job` output (tests/data/slurm/*job*)."""
from __future__ import annotations

import pytest

from nodecheck.errors import ParseError
from nodecheck.parsers.slurm import parse_show_job
from tests.helpers import data, data_files

R = "slurm-job/recorded-22.05-scontrol-show-job-"
# file -> (job_id, name, state, reason, node_list, nodes, num_nodes, num_tasks, gpus, requeue, restarts,
#          user, batch_host)
EXPECTED = {
    R + "completed.txt": ("1", "done", "COMPLETED", "None", "node1", ("node1",), 1, 1, None, True, 0, "root", "node1"),
    R + "failed.txt": ("2", "fails", "FAILED", "NonZeroExitCode", "node1", ("node1",), 1, 1, None, True, 0, "root",
                       "node1"),
    R + "running.txt": ("3", "train", "RUNNING", "None", "node1", ("node1",), 1, 1, None, True, 0, "root", "node1"),
    R + "cancelled.txt": ("3", "train", "CANCELLED", "None", "node1", ("node1",), 1, 1, None, True, 0, "root",
                          "node1"),
    R + "running-multinode.txt": ("4", "multi", "RUNNING", "None", "node[1-3]", ("node1", "node2", "node3"), 3, 3,
                                  None, True, 0, "root", "node1"),
    # `scontrol requeue 4` while it ran: back to PENDING (BeginTime), no nodes, Restarts=1 ...
    R + "requeued.txt": ("4", "multi", "PENDING", "BeginTime", "", (), 3, 3, None, True, 1, "root", ""),
    # ... and a few seconds later running again on the same nodes
    R + "requeued-later.txt": ("4", "multi", "RUNNING", "None", "node[1-3]", ("node1", "node2", "node3"), 3, 3,
                               None, True, 1, "root", "node1"),
    R + "running-two-nodes.txt": ("5", "waits", "RUNNING", "None", "node[2-3]", ("node2", "node3"), 2, 2, None,
                                  True, 0, "root", "node2"),
    # NumNodes=1-1 while pending: the minimum
    R + "pending-begintime.txt": ("6", "later", "PENDING", "BeginTime", "", (), 1, 1, None, True, 0, "root", ""),
    "slurm-job/derived-recorded-22.05-scontrol-show-job-running-two-nodes-gres-gpu16.txt":
        ("5", "waits", "RUNNING", "None", "node[2-3]", ("node2", "node3"), 2, 2, 16, True, 0, "root", "node2"),
    # Slurm 23.02 at a site: AllocTRES (not TRES), Requeue=0
    "slurm-job/hpc2n-course-scontrol-show-job-23.02-completed-two-nodes.txt":
        ("34815931", "compiler-run", "COMPLETED", "None", "b-cn[1703,1705]", ("b-cn1703", "b-cn1705"), 2, 12, None,
         False, 0, "bbrydsoe", "b-cn1703"),
}
FIELDS = ("job_id", "name", "state", "reason", "node_list", "nodes", "num_nodes", "num_tasks", "gpus", "requeue",
          "restarts", "user", "batch_host")


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
    text = data(R + "pending-begintime.txt").replace("JobState=PENDING", "JobState=REQUEUED+") \
        .replace("   NodeList=\n", "   NodeList=(null)\n")
    job = parse_show_job(text)
    assert (job.state, job.node_list, job.nodes) == ("REQUEUED", "", ())


def test_job_name_with_spaces():
    text = data(R + "running.txt").replace("JobName=train", "JobName=my train run")
    assert parse_show_job(text).name == "my train run"


@pytest.mark.parametrize("text, words", [
    ("", "empty output"),
    ("\n\n", "empty output"),
    ("NodeName=node1 Arch=x86_64\n   State=IDLE\n", "expected a line like JobId="),
    ("JobId=7 JobName=x\n   UserId=root(0)\n", "no JobState"),
    ("JobId=7 JobName=x\n   JobState=RUNNING\n   garbage line here\n", "unexpected line 'garbage line here'"),
    ("JobId=7 JobName=x\n   JobState=RUNNING\n   NodeList=node[1-\n", "is not a hostlist"),
])
def test_garbage_is_a_parse_error(text, words):
    with pytest.raises(ParseError) as e:
        parse_show_job(text)
    assert words in e.value.reason


def test_a_job_whose_comment_quotes_scontrols_error_is_still_read():
    text = data(R + "running-multinode.txt").replace("   Command=", "   Comment=retry: Invalid job id specified\n"
                                                     "   Command=", 1)
    assert "Comment=retry" in text
    job = parse_show_job(text)
    assert (job.job_id, job.state, job.nodes) == ("4", "RUNNING", ("node1", "node2", "node3"))
