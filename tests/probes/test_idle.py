"""The idle guard, run for real with sh: fake pgrep, squeue and nvidia-smi on a PATH of their own (plus
the few coreutils the guard calls), one refusal reason per test, and the idle node that lets the step run."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from nodecheck.parsers.sections import split_sections
from nodecheck.probes.idle import IDLE_GUARD, NO_PGREP_EXIT, refusal

SCRIPT = IDLE_GUARD + 'echo "@@nodecheck ran yes"\n'


def tool(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)


@pytest.fixture
def node(tmp_path: Path) -> Path:
    """A PATH with timeout, head, hostname and grep, a pgrep that finds nothing, no squeue, no nvidia-smi."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("timeout", "head", "hostname", "sleep", "grep"):
        real = shutil.which(name)
        assert real, name
        (bin_dir / name).symlink_to(real)
    tool(bin_dir, "pgrep", "exit 1")
    return bin_dir


def guard(bin_dir: Path, **env: str) -> tuple[subprocess.CompletedProcess, dict[str, str]]:
    environ = {"PATH": str(bin_dir), **env}
    done = subprocess.run(
        ["/bin/sh", "-c", SCRIPT, "nodecheck-idle"], capture_output=True, text=True, timeout=60, env=environ
    )
    return done, split_sections(done.stdout, "idle").facts


def running(*names: str) -> str:
    """A pgrep -x that finds exactly these process names."""
    return 'case "$2" in ' + "|".join(names) + ") exit 0;; esac\nexit 1"


def test_an_idle_node_lets_the_step_run(node):
    tool(node, "nvidia-smi", "exit 0")  # GPUs, no compute process
    done, facts = guard(node)
    assert done.returncode == 0
    assert refusal(facts) is None
    assert facts["ran"] == "yes"


def test_a_node_without_nvidia_smi_or_slurm_is_idle(node):
    done, facts = guard(node)
    assert facts == {"ran": "yes"}


def test_a_slurm_job_step_refuses(node):
    tool(node, "pgrep", running("slurmstepd"))
    done, facts = guard(node)
    assert refusal(facts) == "a Slurm job step is running on this node (slurmstepd)"
    assert "ran" not in facts and done.returncode == 0


def test_running_inside_a_slurm_job_refuses(node):
    _, facts = guard(node, SLURM_JOB_ID="4242")
    assert refusal(facts) == "inside Slurm job 4242"


def test_jobs_allocated_to_the_node_refuse(node):
    tool(node, "pgrep", running("slurmd"))
    tool(node, "squeue", 'printf "1234\\n5678\\n"')
    _, facts = guard(node)
    assert refusal(facts) == "Slurm jobs are allocated on this node: 1234 5678"


def test_slurmd_without_allocated_jobs_is_idle(node):
    tool(node, "pgrep", running("slurmd"))
    tool(node, "squeue", "exit 0")
    _, facts = guard(node)
    assert refusal(facts) is None and facts["ran"] == "yes"


def test_a_failing_squeue_refuses_closed(node):
    tool(node, "pgrep", running("slurmd"))
    tool(node, "squeue", "echo 'slurm_load_jobs error: Unable to contact slurm controller' >&2; exit 1")
    _, facts = guard(node)
    assert refusal(facts) == (
        "slurmd runs here and squeue cannot tell whether jobs are allocated (it failed or timed out)"
    )


def test_a_hanging_squeue_is_cut_at_5_s_and_refuses(node):
    tool(node, "pgrep", running("slurmd"))
    tool(node, "squeue", "sleep 30")
    _, facts = guard(node)
    assert refusal(facts).startswith("slurmd runs here and squeue cannot tell")


def test_gpu_compute_processes_refuse_naming_them(node):
    tool(node, "nvidia-smi", 'printf "4242, python\\n4243, python\\n"')
    _, facts = guard(node)
    assert refusal(facts) == "GPU processes are running: 4242, python 4243, python"


def test_a_failing_nvidia_smi_refuses_closed(node):
    tool(
        node,
        "nvidia-smi",
        "echo 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver'; exit 9",
    )
    _, facts = guard(node)
    assert refusal(facts) == "cannot tell whether GPU processes run here (nvidia-smi failed or timed out)"


def test_without_pgrep_it_cannot_tell_and_exits_69(node):
    os.unlink(node / "pgrep")
    done, facts = guard(node)
    assert done.returncode == NO_PGREP_EXIT == 69
    assert "pgrep not found (procps)" in done.stderr
    assert facts == {}


def steps(*lines: str) -> str:
    """A pgrep that finds slurmstepd (and slurmd), and lists these slurmstepd command lines with -a."""
    listing = "\\n".join(lines)
    return (
        f'case "$1" in -a) printf "{listing}\\n"; exit 0;; esac\n'
        + 'case "$2" in slurmstepd|slurmd) exit 0;; esac\nexit 1'
    )


def test_in_its_own_allocation_the_sweeps_job_does_not_count_as_busy(node):
    tool(node, "pgrep", steps("101 slurmstepd: [42.extern]", "102 slurmstepd: [42.batch]", "103 slurmstepd: [42.3]"))
    tool(node, "squeue", 'printf "42\\n"')
    done, facts = guard(node, NODECHECK_OWN_JOB="42", SLURM_JOB_ID="42")
    assert refusal(facts) is None and facts["ran"] == "yes"


@pytest.mark.parametrize(
    "listing, queue, env, why",
    [
        (("101 slurmstepd: [42.batch]", "202 slurmstepd: [7.0]"), "42", {}, "a step of another Slurm job"),
        (("101 slurmstepd: [420.batch]",), "", {}, "a step of another Slurm job"),  # 420 is not 42
        (("101 slurmstepd: [42.batch]",), "42\\n7", {}, "Slurm jobs are allocated on this node: 7"),
        (("101 slurmstepd: [42.batch]",), "42", {"SLURM_JOB_ID": "7"}, "inside Slurm job 7"),
    ],
)
def test_another_job_still_refuses_beside_the_sweeps_own(node, listing, queue, env, why):
    tool(node, "pgrep", steps(*listing))
    tool(node, "squeue", f'printf "{queue}\\n"')
    _, facts = guard(node, NODECHECK_OWN_JOB="42", **env)
    assert refusal(facts).startswith(why), refusal(facts)


def test_an_own_job_that_is_not_a_job_id_exempts_nothing(node):
    tool(node, "pgrep", steps("101 slurmstepd: [42.batch]"))
    _, facts = guard(node, NODECHECK_OWN_JOB="42 || true")
    assert refusal(facts) == "a Slurm job step is running on this node (slurmstepd)"
