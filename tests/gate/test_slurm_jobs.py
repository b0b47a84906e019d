"""Slurm.job / cancel / requeue against a fake squeue, scontrol and scancel that replay recorded outputs."""

from __future__ import annotations

import stat
import time
from pathlib import Path

import pytest

from nodecheck.app.slurm import Slurm, SlurmError
from tests.helpers import DATA

RUNNING = DATA / "slurm-job" / "derived-recorded-22.05-squeue-O-running-multinode.txt"
INVALID = DATA / "slurm-job" / "recorded-22.05-scontrol-show-job-invalid-id.txt"
SHOW_RUNNING = DATA / "slurm-job" / "recorded-22.05-scontrol-show-job-running-multinode.txt"


def _tool(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def fake(tmp_path):
    """squeue: `-h -t all -j 1 -O ...` prints the recorded job (its id is 1), 55 nothing (an array task
    Slurm does not know), any other id fails as Slurm 22.05 does; scontrol `show job 4` prints a
    recorded record (it must not be asked). Every call's argv (the -O list cut) is appended to calls.log."""
    log = tmp_path / "calls.log"
    _tool(
        tmp_path / "squeue",
        f"""echo "squeue $1 $2 $3 $4 $5 $6" >> {log}
[ "$1 $2 $3 $4 $6" = "-h -t all -j -O" ] || exit 2
[ "$5" = 1 ] && exec cat {RUNNING}
[ "$5" = 55_3 ] && exit 0
cat {INVALID} >&2; exit 1
""",
    )
    _tool(
        tmp_path / "scontrol",
        f"""echo "scontrol $*" >> {log}
if [ "$1 $2" = "show job" ]; then
  [ "$3" = 4 ] && exec cat {SHOW_RUNNING}
  cat {INVALID} >&2; exit 1
fi
if [ "$1" = requeue ]; then
  [ "$2" = 4 ] && exit 0
  echo "Invalid job id specified for job $2" >&2; exit 1
fi
exit 2
""",
    )
    _tool(tmp_path / "scancel", f'echo "scancel $*" >> {log}\n')
    return tmp_path


def _calls(fake: Path) -> list[str]:
    return (fake / "calls.log").read_text().splitlines()


def test_job_reads_the_record_from_squeue(fake):
    job = Slurm(scontrol=str(fake / "scontrol")).job("1")
    assert (job.job_id, job.state, job.nodes, job.num_nodes, job.requeue, job.user) == (
        "1",
        "RUNNING",
        ("node1", "node2", "node3"),
        3,
        True,
        "root",
    )
    assert _calls(fake) == ["squeue -h -t all -j 1 -O"]


def test_an_array_task_squeue_does_not_list_is_an_unknown_job(fake):
    with pytest.raises(SlurmError) as e:
        Slurm(scontrol=str(fake / "scontrol")).job("55_3")
    assert "Invalid job id specified" in str(e.value)
    assert str(e.value).startswith(f"{fake / 'squeue'} -j 55_3: squeue: no such job")


def test_unknown_job_is_a_slurm_error_with_returncode_and_words(fake):
    with pytest.raises(SlurmError) as e:
        Slurm(scontrol=str(fake / "scontrol")).job("77")
    assert e.value.returncode == 1
    assert "Invalid job id" in str(e.value)
    assert str(e.value).endswith("squeue -j 77: exit 1: slurm_load_jobs error: Invalid job id specified")


@pytest.mark.parametrize("bad", ["4 5", "4,5", "-1", "node1", "", "4;reboot"])
def test_not_a_job_id_is_refused_before_anything_runs(fake, bad):
    with pytest.raises(SlurmError, match="is not a Slurm job id"):
        Slurm(scontrol=str(fake / "scontrol")).job(bad)
    assert not (fake / "calls.log").exists()


def test_cancel_runs_scancel_beside_scontrol(fake):
    Slurm(scontrol=str(fake / "scontrol")).cancel("4")
    assert _calls(fake) == ["scancel 4"]


def test_requeue_and_its_refusal(fake):
    slurm = Slurm(scontrol=str(fake / "scontrol"))
    slurm.requeue("4")
    with pytest.raises(SlurmError) as e:
        slurm.requeue("9")
    assert "Invalid job id specified for job 9" in str(e.value)
    assert _calls(fake) == ["scontrol requeue 4", "scontrol requeue 9"]


def test_array_task_id_is_a_job_id(fake):
    with pytest.raises(SlurmError, match="Invalid job id"):
        Slurm(scontrol=str(fake / "scontrol")).job("4_7")
    assert _calls(fake) == ["squeue -h -t all -j 4_7 -O"]


def test_a_hanging_squeue_is_killed_at_the_bound_with_a_clear_error(tmp_path):
    _tool(tmp_path / "squeue", "echo 'squeue: error: slurm_receive_msg: Socket timed out' >&2\nsleep 60\n")
    started = time.monotonic()
    with pytest.raises(SlurmError) as e:
        Slurm(scontrol=str(tmp_path / "scontrol"), timeout_s=0.5).job("4")
    assert time.monotonic() - started < 5
    assert str(e.value) == (
        f"{tmp_path / 'squeue'} -j 4: no answer within 0.5 s; killed; "
        "stderr: 'squeue: error: slurm_receive_msg: Socket timed out'"
    )
