"""The job probe's checkpoint and dump-directory tests run as the job's user, not root (issue 17,
slice I): as root, `writable` says "ok" for a directory only root can write, `[ -e resume ]` is a
file-exists oracle and the first entry of a root-only directory leaks a name. Run for real as root,
with `nobody` as the job's user."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess

import pytest

from nodecheck.job.probe import job_probe, parse_job_probe
from nodecheck.job.spec import JobSpec
from nodecheck.probes.shell import AS_JOB_FUNCTION, WRITABLE_FUNCTION
from tests import everyone_tmp

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not (shutil.which("setpriv") or shutil.which("runuser")),
    reason="switches to the job's user: needs root and util-linux",
)
NOBODY = str(pwd.getpwnam("nobody").pw_uid)


tmp_path = everyone_tmp.tmp_path  # a directory everyone may enter (pytest's own: root's only)


def spec(ckpt: str, resume_from: str | None = None) -> JobSpec:
    return JobSpec.model_validate(
        {
            "world_size": 8,
            "gpus_per_node": 8,
            "checkpoint": {
                "dir": ckpt,
                "every_minutes": 30,
                "resume": True,
                **({"resume_from": resume_from} if resume_from else {}),
            },
        }
    )


def facts(job: JobSpec, user: str, path: str = "/usr/bin:/bin"):
    probe = job_probe(job, user)
    done = subprocess.run(probe.argv, capture_output=True, text=True, timeout=30, env={"PATH": path, "HOME": "/"})
    assert "@@nodecheck end gpus" in done.stdout, done.stderr
    return parse_job_probe(done.stdout), done.stdout


def root_only(tmp_path, name: str = "ckpt"):
    tmp_path.chmod(0o755)
    d = tmp_path / name
    d.mkdir(mode=0o700)
    (d / "step-000100-secret-name").write_text("x")
    return d


def test_a_directory_only_root_can_write_is_not_writable_for_the_jobs_user(tmp_path):
    d = tmp_path / "ckpt"
    d.mkdir(mode=0o755)
    tmp_path.chmod(0o755)
    f, _ = facts(spec(str(d)), NOBODY)
    assert f.writable["checkpoint"].startswith("!") and "Permission denied" in f.writable["checkpoint"]
    assert f.checked_as == "nobody"
    f, _ = facts(spec(str(d)), "")  # no job's user known: root's view, and said so
    assert f.writable["checkpoint"] == "ok" and f.checked_as == "root"
    d.chmod(0o777)
    assert facts(spec(str(d)), NOBODY)[0].writable["checkpoint"] == "ok"


def test_a_root_only_directory_gives_the_jobs_user_no_entry_name_and_no_file_exists_answer(tmp_path):
    d = root_only(tmp_path)
    f, out = facts(spec(str(d)), NOBODY)
    assert "secret-name" not in out and f.resume == "missing"
    f, out = facts(spec(str(d), resume_from=str(d / "step-000100-secret-name")), NOBODY)
    assert f.resume == "missing"
    assert facts(spec(str(d), resume_from=str(d / "step-000100-secret-name")), "")[0].resume == "exists"


def test_without_setpriv_or_runuser_nothing_is_checked_as_root_for_a_known_user(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("sh", "id", "mktemp", "rm", "df", "stat", "awk", "head", "cat"):
        if shutil.which(tool):
            (bin_dir / tool).symlink_to(shutil.which(tool))
    d = root_only(tmp_path)
    f, out = facts(spec(str(d)), NOBODY, path=str(bin_dir))
    why = "!not checked as the job's user: neither setpriv nor runuser (util-linux) is on this node"
    assert f.checked_as == why and f.writable["checkpoint"] == "?" + why[1:]
    assert "secret-name" not in out and f.resume == "" and f.ckpt_exists is None


def test_the_as_job_function_runs_as_the_user_and_as_ourselves_without_one():
    script = AS_JOB_FUNCTION + WRITABLE_FUNCTION + 'job_as "$1"; as_job id -u; echo "[$ja_how]"'
    out = subprocess.run(["sh", "-c", script, "sh", NOBODY], capture_output=True, text=True).stdout.split()
    assert out == [NOBODY, "[nobody]"]
    out = subprocess.run(["sh", "-c", script, "sh", ""], capture_output=True, text=True).stdout.split()
    assert out == ["0", "[root]"]


def test_nccl_envs_dump_directory_test_runs_as_the_jobs_user_too(tmp_path):
    """nccl.env's probe shares `writable` (shell.py): with a job's user (from --job-env's owner or the
    Prolog's SLURM_JOB_UID) its dump directory is tested as that user."""
    from nodecheck.checks.nccl_env import NcclEnv, probes
    from nodecheck.parsers.nccl_config import parse_probe

    d = tmp_path / "dumps"
    d.mkdir(mode=0o755)
    for user, expect in ((NOBODY, "!"), ("", "ok")):
        want = NcclEnv(env={"TORCH_FR_DUMP_TEMP_FILE": f"{d}/fr_"}, job_user=user, node_env=False)
        [probe] = probes(want)
        done = subprocess.run(
            probe.argv, capture_output=True, text=True, timeout=30, env={"PATH": "/usr/bin:/bin", "HOME": "/"}
        )
        got = parse_probe(done.stdout).writable["job:TORCH_FR_DUMP_TEMP_FILE"]
        assert got.startswith(expect) and ("Permission denied" in got) == (expect == "!"), got


def test_a_command_run_as_the_jobs_user_gets_none_of_roots_environment_or_open_files(tmp_path):
    """The job's user could read their own process's environment and descriptors (ptrace, /proc): a
    process run as them holds only PATH and LC_ALL of root's session, and none of its fds 3-9."""
    secret = tmp_path / "root-only"
    secret.write_text("s3cr3t\n")
    secret.chmod(0o600)
    script = (
        AS_JOB_FUNCTION
        + 'job_as "$1"; exec 7<"$2"; '
        + 'as_job sh -c \'env | sort | grep -v "^PWD="; ls /proc/self/fd | tr "\\n" " "\''
    )
    env = {"PATH": "/usr/bin:/bin", "HF_TOKEN": "hf_rootsecret", "HOME": "/root"}
    out = subprocess.run(["sh", "-c", script, "sh", NOBODY, str(secret)], capture_output=True, text=True, env=env)
    assert "hf_rootsecret" not in out.stdout and "HOME=" not in out.stdout, out.stdout
    assert "LC_ALL=C" in out.stdout and "PATH=/usr/bin:/bin" in out.stdout
    fds = out.stdout.strip().splitlines()[-1].split()
    assert "7" not in fds, fds
