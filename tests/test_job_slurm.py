"""Slurm.job / cancel / requeue against a fake scontrol and scancel that replay recorded outputs."""
from __future__ import annotations

import stat
from pathlib import Path

import pytest

from nodecheck.slurm import Slurm, SlurmError
from tests.helpers import DATA

RUNNING = DATA / "slurm-job" / "recorded-22.05-scontrol-show-job-running-multinode.txt"
INVALID = DATA / "slurm-job" / "recorded-22.05-scontrol-show-job-invalid-id.txt"


def _tool(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def fake(tmp_path):
    """scontrol: `show job 4` prints the recorded job; any other id fails as Slurm 22.05 does.
    Every call's argv is appended to calls.log."""
    log = tmp_path / "calls.log"
    _tool(tmp_path / "scontrol", f'''echo "scontrol $*" >> {log}
if [ "$1 $2" = "show job" ]; then
  [ "$3" = 4 ] && exec cat {RUNNING}
  cat {INVALID} >&2; exit 1
fi
if [ "$1" = requeue ]; then
  [ "$2" = 4 ] && exit 0
  echo "Invalid job id specified for job $2" >&2; exit 1
fi
exit 2
''')
    _tool(tmp_path / "scancel", f'echo "scancel $*" >> {log}\n')
    return tmp_path


def _calls(fake: Path) -> list[str]:
    return (fake / "calls.log").read_text().splitlines()


def test_job_reads_the_record(fake):
    job = Slurm(scontrol=str(fake / "scontrol")).job("4")
    assert (job.job_id, job.state, job.nodes, job.num_nodes, job.requeue) == \
        ("4", "RUNNING", ("node1", "node2", "node3"), 3, True)
    assert _calls(fake) == ["scontrol show job 4"]


def test_unknown_job_is_a_slurm_error_with_returncode_and_words(fake):
    with pytest.raises(SlurmError) as e:
        Slurm(scontrol=str(fake / "scontrol")).job("77")
    assert e.value.returncode == 1
    assert "Invalid job id" in str(e.value)
    assert str(e.value).endswith("show job 77: exit 1: slurm_load_jobs error: Invalid job id specified")


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
    assert _calls(fake) == ["scontrol show job 4_7"]
