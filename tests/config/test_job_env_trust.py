"""What a job chooses (--job-env) must not make a root-run nccl-tests load, run, read or write anything
of its choosing (issue 17, slice I): the playbook loader keeps the job's variables apart from the
operator's `env:`, and the probe script, run for real, never sees the refused ones."""

from __future__ import annotations

import pytest

from nodecheck.checks import nccl_allreduce
from nodecheck.config.playbook import load_playbook
from nodecheck.core.model import Status
from nodecheck.parsers.sections import split_sections
from nodecheck.probes.env_policy import LOADS_OR_WRITES
from tests.checks.test_nccl_allreduce import A3MEGA, wrapped
from tests.helpers import captures, data
from tests.probes.test_nccl_tests import SHELLS, run, tool

HOSTILE = (
    "LD_LIBRARY_PATH=/home/u/evil\nNCCL_NET_PLUGIN=/home/u/libevil.so\nNCCL_DEBUG_FILE=/etc/passwd\n"
    "OMPI_MCA_plm_rsh_agent='sh -c evil'\nNCCL_IB_HCA=mlx5_0:1\nNCCL_SOCKET_IFNAME=ib0\nNCCL_ALGO=Ring\n"
)
SHOW = """
case "$1" in -h) exit 0 ;; esac
for v in LD_LIBRARY_PATH NCCL_NET_PLUGIN NCCL_DEBUG_FILE OMPI_MCA_plm_rsh_agent NCCL_IB_HCA NCCL_SOCKET_IFNAME NCCL_ALGO; do
  eval "printf '%s=%s\\n' $v \\"\\${$v-unset}\\""
done
"""  # noqa: E501 - shell script text: wrapping its long lines would change the script


def playbook(tmp_path, env_block: str = "") -> str:
    path = tmp_path / "pb.yml"
    path.write_text("checks:\n  nccl.allreduce_single:\n    gpus: 8\n    json_report: 'off'\n" + env_block)
    return str(path)


@pytest.mark.parametrize("shell", SHELLS)
def test_a_jobs_library_plugin_and_file_variables_never_reach_the_test_and_its_tuning_does(tmp_path, shell):
    """--job-env LD_LIBRARY_PATH=/home/u/evil NCCL_NET_PLUGIN=/home/u/libevil.so NCCL_DEBUG_FILE=/etc/passwd:
    none is on the probe's stdin or in the test's environment on the node; NCCL_IB_HCA is."""
    job = tmp_path / "job.env"
    job.write_text(HOSTILE)
    [check] = load_playbook(playbook(tmp_path), job_env=str(job)).checks
    [probe] = check.probes
    for word in ("/home/u", "/etc/passwd", "evil"):
        assert word not in probe.stdin and not [w for w in probe.argv if word in w]
    assert "NCCL_IB_HCA=mlx5_0:1\n" in probe.stdin
    tool(tmp_path, "all_reduce_perf", SHOW)
    proc, _ = run(probe, tmp_path, shell)
    assert split_sections(proc.stdout).get("test").text.splitlines() == [
        "LD_LIBRARY_PATH=unset",
        "NCCL_NET_PLUGIN=unset",
        "NCCL_DEBUG_FILE=unset",
        "OMPI_MCA_plm_rsh_agent=unset",
        "NCCL_IB_HCA=mlx5_0:1",
        "NCCL_SOCKET_IFNAME=ib0",
        "NCCL_ALGO=Ring",
    ]


def test_the_operators_playbook_env_may_set_a_plugin_and_keeps_it_over_the_jobs(
    tmp_path,
):
    job = tmp_path / "job.env"
    job.write_text(HOSTILE)
    book = load_playbook(
        playbook(tmp_path, "    env: {NCCL_NET_PLUGIN: aws-ofi, LD_LIBRARY_PATH: /opt/ofi/lib, NCCL_IB_HCA: mlx5_1}\n"),
        job_env=str(job),
    )
    [check] = book.checks
    assert check.params.env == {
        "NCCL_NET_PLUGIN": "aws-ofi",
        "LD_LIBRARY_PATH": "/opt/ofi/lib",
        "NCCL_IB_HCA": "mlx5_1",
    }
    [probe] = check.probes
    assert probe.stdin == (
        "NCCL_DEBUG=VERSION\nNCCL_NET_PLUGIN=aws-ofi\nLD_LIBRARY_PATH=/opt/ofi/lib\n"
        "NCCL_IB_HCA=mlx5_0:1\nNCCL_SOCKET_IFNAME=ib0\nNCCL_ALGO=Ring\n"
    )


def test_the_verdict_says_which_of_the_jobs_variables_the_test_ran_without_and_why(tmp_path):
    job = tmp_path / "job.env"
    job.write_text(HOSTILE + "HF_TOKEN=s3cr3t\n")
    [check] = load_playbook(playbook(tmp_path), job_env=str(job)).checks
    [probe] = check.probes
    [v] = check.spec.judge(captures(probe, wrapped(data(A3MEGA), 0)), check.params)
    assert v.status is Status.FAIL  # 16 ranks, not 8: judged as before, with the note
    assert v.message.endswith(
        "; the test ran without the job's LD_LIBRARY_PATH, NCCL_DEBUG_FILE, NCCL_NET_PLUGIN, "
        "OMPI_MCA_plm_rsh_agent: each " + LOADS_OR_WRITES + " (a playbook's env: may set it)"
    ), v.message
    assert v.observed["env_not_passed"] == {
        "HF_TOKEN": "its name looks secret",
        "LD_LIBRARY_PATH": LOADS_OR_WRITES,
        "NCCL_DEBUG_FILE": LOADS_OR_WRITES,
        "NCCL_NET_PLUGIN": LOADS_OR_WRITES,
        "OMPI_MCA_plm_rsh_agent": LOADS_OR_WRITES,
    }
    assert "s3cr3t" not in repr(v) and "/home/u" not in repr(v)
    assert nccl_allreduce.NcclSingle().job_env == {}
