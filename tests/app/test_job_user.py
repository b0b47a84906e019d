"""Whose files a job names are read as (issue 17): the user who hands nodecheck the job's environment
(--job-env FILE's owner, JOB.yml's owner), else the Slurm job's user (squeue's UserName; in the node
Prolog, slurmd's SLURM_JOB_UID); never root (an operator's copy says nothing about whose job it is).
shell.job_file then reads that user's own private NCCL_CONF_FILE."""

from __future__ import annotations

import os
import subprocess
from argparse import Namespace

import pytest

from nodecheck.app import job_user
from nodecheck.checks.nccl_env import PROBE_NAME
from nodecheck.config.playbook import load_playbook
from nodecheck.gate import command as gatecmd
from nodecheck.job import command as job_command
from nodecheck.parsers.nccl_config import parse_probe
from tests import everyone_tmp

tmp_path = everyone_tmp.tmp_path  # files a job's user reads: in a directory everyone may enter

PLAYBOOK = "version: 1\nchecks:\n  nccl.env: {timeout_s: 7, reachability: {enabled: false}}\n  kernel.version: {}\n"


def _owned(path, uid: int, text: str = ""):
    path.write_text(text)
    os.chown(path, uid, uid)
    return str(path)


def _nccl_env(playbook):
    [check] = [c for c in playbook.checks if c.spec.name == "nccl.env"]
    return check


def test_the_files_owner_is_the_jobs_user_unless_it_is_root_then_the_slurm_jobs_user():
    assert job_user.job_user_of(4242) == "4242"
    assert job_user.job_user_of(4242, "alice") == "4242"  # a user's file names that user's own files
    assert job_user.job_user_of(0, "alice") == "alice"  # root's copy says nothing about whose job it is
    assert job_user.job_user_of(None, "alice") == "alice"
    for nobody_known in ((0, ""), (None, "root"), (None, "0"), (None, "-rf"), (None, "a b")):
        assert job_user.job_user_of(*nobody_known) == ""


def test_the_job_user_reaches_nccl_env_keeping_the_playbooks_timeout(tmp_path):
    book = load_playbook(_owned(tmp_path / "p.yml", 0, PLAYBOOK))
    assert _nccl_env(book).params.job_user == ""
    with_user = job_user.with_job_user(book, "4242")
    check = _nccl_env(with_user)
    [probe] = check.probes
    assert (check.params.job_user, probe.name, probe.timeout_s, probe.argv[4:7]) == (
        "4242",
        PROBE_NAME,
        7,
        ("1", "", "4242"),
    )
    kernel = [c for c in with_user.checks if c.spec.name == "kernel.version"]
    assert kernel == [c for c in book.checks if c.spec.name == "kernel.version"]  # untouched
    assert job_user.with_job_user(book, "") is book
    # a user the playbook names itself is the operator's choice
    pinned = load_playbook(_owned(tmp_path / "q.yml", 0, PLAYBOOK.replace("timeout_s: 7", "job_user: alice")))
    assert _nccl_env(job_user.with_job_user(pinned, "4242")).params.job_user == "alice"


def test_run_with_job_env_reads_the_jobs_own_private_conf_file(tmp_path, monkeypatch):
    """`nodecheck run --local --job-env FILE`: the file's owner's 0600 NCCL_CONF_FILE is read; the same
    file handed over by root (an operator's copy) is not."""
    conf = tmp_path / "job.conf"
    _owned(conf, 65534, "NCCL_SOCKET_IFNAME=eth9\n")
    conf.chmod(0o600)
    book = _owned(tmp_path / "p.yml", 0, PLAYBOOK)
    seen = []

    def fake_run(playbook, nodes, transport, **kw):
        [probe] = _nccl_env(playbook).probes
        out = subprocess.run(
            probe.argv, capture_output=True, text=True, timeout=20, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
        )
        [first, _] = parse_probe(out.stdout).conf
        seen.append((dict(first.settings), first.error))
        raise KeyboardInterrupt  # enough: the report is not what is tested here

    monkeypatch.setattr("nodecheck.run.runner.run", fake_run)
    from nodecheck.cli import main

    for owner in (65534, 0):
        env_file = _owned(tmp_path / f"job{owner}.env", owner, f"NCCL_CONF_FILE={conf}\n")
        assert (
            main(
                ["run", "--local", "--playbook", book, "--job-env", env_file, "--output-dir", str(tmp_path / "reports")]
            )
            == 130
        )
    assert seen == [({"NCCL_SOCKET_IFNAME": "eth9"}, ""), ({}, "not read: owned by uid 65534, not by root")]


@pytest.mark.parametrize(
    "environ, expected",
    [
        ({"SLURM_JOB_UID": "1000"}, "1000"),
        ({"SLURM_JOB_UID": "0"}, ""),  # root's job: nothing more than root's readable files
        ({"SLURM_JOB_UID": "10x"}, ""),
        ({}, ""),
    ],
)
def test_the_node_prolog_reads_the_jobs_files_as_slurm_job_uid(tmp_path, monkeypatch, environ, expected):
    monkeypatch.delenv("SLURM_JOB_UID", raising=False)
    for k, v in environ.items():
        monkeypatch.setenv(k, v)
    book = _owned(tmp_path / "p.yml", 0, PLAYBOOK)
    assert _nccl_env(gatecmd.load_playbook_for(Namespace(playbook=book), "prolog")).params.job_user == expected
    # health and the controller run over no job's environment of their own
    assert _nccl_env(gatecmd.load_playbook_for(Namespace(playbook=book), "health")).params.job_user == ""


@pytest.mark.parametrize(
    "owner, slurm_user, expected",
    [
        (4242, "", "4242"),  # JOB.yml's author: whose files it may name
        (4242, "alice", "4242"),  # bob's JOB.yml for alice's job: still bob, never alice
        (0, "alice", "alice"),  # root's copy: the Slurm job's user (squeue, unforgeable)
        (0, "root", ""),
        (0, "", ""),
    ],
)
def test_job_check_reads_the_jobs_files_as_its_author_else_as_the_slurm_jobs_user(
    tmp_path, owner, slurm_user, expected
):
    from nodecheck.job.spec import load_job_spec

    job = _owned(tmp_path / "job.yml", owner, "world_size: 8\ngpus_per_node: 8\n")
    record = Namespace(user=slurm_user) if slurm_user else None
    assert job_command.job_user(load_job_spec(job), record) == expected  # the owner of JOB.yml as read


def test_job_check_local_reads_the_job_ymls_owners_private_conf_file(tmp_path, monkeypatch):
    conf = tmp_path / "job.conf"
    _owned(conf, 65534, "NCCL_IB_HCA=mlx5_1\n")
    conf.chmod(0o600)
    job = _owned(tmp_path / "job.yml", 65534, f"world_size: 8\ngpus_per_node: 8\nenv: {{NCCL_CONF_FILE: {conf}}}\n")
    seen = []

    def fake_run(playbook, nodes, transport, **kw):
        from nodecheck.job.probe import PROBE_NAME as JOB_PROBE
        from nodecheck.job.probe import parse_job_probe

        probes = {p for c in playbook.checks for p in c.probes if p.name == JOB_PROBE}
        [probe] = probes  # one probe, shared by the job checks
        out = subprocess.run(
            probe.argv, capture_output=True, text=True, timeout=30, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
        )
        [first, _] = parse_job_probe(out.stdout).conf
        seen.append((dict(first.settings), first.error))
        raise KeyboardInterrupt

    monkeypatch.setattr("nodecheck.run.runner.run", fake_run)
    from nodecheck.cli import main

    assert main(["job-check", job, "--local", "--output-dir", str(tmp_path / "reports")]) == 130
    assert seen == [({"NCCL_IB_HCA": "mlx5_1"}, "")]


@pytest.mark.parametrize("shell", ["dash", "bash", "sh"])
def test_every_script_that_reads_a_job_named_file_parses_in_every_sh(shell):
    """job_file's refusals once held a ' inside "${3:+...}", which bash (not in POSIX mode) cannot parse."""
    import shutil

    from nodecheck.checks import nccl_env, roce
    from nodecheck.job.probe import job_probe
    from nodecheck.job.spec import JobSpec

    if shutil.which(shell) is None:
        pytest.skip(f"no {shell} here")
    for argv in (
        nccl_env.probes(nccl_env.NcclEnv())[0].argv,
        roce.ROCE_GIDS.argv,
        job_probe(JobSpec(world_size=8, gpus_per_node=8)).argv,
    ):
        done = subprocess.run([shell, "-n", "-c", argv[2]], capture_output=True, text=True, timeout=10)
        assert done.returncode == 0, done.stderr


def test_the_job_env_files_owner_is_that_of_the_file_read_not_what_lies_at_its_path_later(tmp_path, monkeypatch):
    """Issue 32 (1.1's race, for --job-env): the owner was stat'ed by path after the playbook had read
    the file. A user who owns the directory swaps their file for a root-owned one in between: their
    variables would be taken with no job's user at all, so root's view reads the files they name. The
    owner is that of the file as read."""
    from nodecheck.cli import main
    from nodecheck.config import playbook as playbook_module

    book = _owned(tmp_path / "p.yml", 0, PLAYBOOK)
    env = _owned(tmp_path / "job.env", 65534, "NCCL_SOCKET_IFNAME=eth9\n")
    real_load = playbook_module.load_playbook

    def load_then_swap(*args, **kwargs):
        out = real_load(*args, **kwargs)
        os.unlink(env)
        _owned(tmp_path / "job.env", 0, "NCCL_SOCKET_IFNAME=eth9\n")  # root's, at the same path
        return out

    monkeypatch.setattr(playbook_module, "load_playbook", load_then_swap)
    users = []

    def fake_run(playbook, nodes, transport, **kw):
        users.append(_nccl_env(playbook).params.job_user)
        raise KeyboardInterrupt

    monkeypatch.setattr("nodecheck.run.runner.run", fake_run)
    argv = ["run", "--local", "--playbook", book, "--job-env", env, "--output-dir", str(tmp_path / "reports")]
    assert main(argv) == 130
    assert users == ["65534"]
