"""The job check's probe reads the job's NCCL_CONF_FILE as nccl.env does: only a plain, small file
of root (or the job's user) that everyone may read (issue 17, finding 3: /etc/shadow was captured), and
opened by the job's user, or by nobody when none is known, never by root (issue 32, item 1.7: a root
file readable by everyone in a directory only root may enter was captured)."""

from __future__ import annotations

import os
import pwd
import subprocess

from nodecheck.job.probe import job_probe, parse_job_probe
from nodecheck.job.spec import JobSpec
from tests import everyone_tmp

tmp_path = everyone_tmp.tmp_path  # files a job's user reads: in a directory everyone may enter


def run(spec: JobSpec, home) -> str:
    probe = job_probe(spec)
    done = subprocess.run(
        probe.argv, capture_output=True, text=True, timeout=30, env={"PATH": "/usr/bin:/bin", "HOME": str(home)}
    )
    assert "@@nodecheck end gpus" in done.stdout, done.stderr
    return done.stdout


def test_a_root_only_conf_file_the_job_names_is_not_captured_a_readable_one_is(tmp_path):
    shadow = tmp_path / "shadow"
    shadow.write_text("root:$6$s3cr3t-hash:19000::::::\n")
    shadow.chmod(0o600)
    text = run(JobSpec(world_size=8, gpus_per_node=8, env={"NCCL_CONF_FILE": str(shadow)}), tmp_path)
    assert "s3cr3t" not in text
    [conf, _] = parse_job_probe(text).conf
    assert (conf.path, dict(conf.settings)) == (str(shadow), {})
    assert conf.error == "not read: nobody cannot open it: Permission denied"  # nobody: no job's user known
    shadow.chmod(0o644)
    shadow.write_text("NCCL_IB_HCA=mlx5_1\n")
    [conf, _] = parse_job_probe(
        run(JobSpec(world_size=8, gpus_per_node=8, env={"NCCL_CONF_FILE": str(shadow)}), tmp_path)
    ).conf
    assert (dict(conf.settings), conf.error) == ({"NCCL_IB_HCA": "mlx5_1"}, "")


def test_the_jobs_own_private_conf_file_is_read_for_the_jobs_user_and_nobody_elses(tmp_path):
    conf_file = tmp_path / "job.conf"
    conf_file.write_text("NCCL_IB_HCA=mlx5_1\n")
    conf_file.chmod(0o600)
    os.chown(conf_file, 65534, 65534)
    spec = JobSpec(world_size=8, gpus_per_node=8, env={"NCCL_CONF_FILE": str(conf_file)})
    for user in ("65534", "nobody"):
        [conf, _] = parse_job_probe(run_probe(job_probe(spec, job_user=user), tmp_path)).conf
        assert (dict(conf.settings), conf.error) == ({"NCCL_IB_HCA": "mlx5_1"}, "")
    other = next(p.pw_name for p in pwd.getpwall() if p.pw_uid not in (0, 65534))  # another user of this machine
    [conf, _] = parse_job_probe(run_probe(job_probe(spec, job_user=other), tmp_path)).conf
    assert (dict(conf.settings), conf.error) == ({}, f"not read: {other} cannot open it: Permission denied")
    [conf, _] = parse_job_probe(run_probe(job_probe(spec, job_user="4243"), tmp_path)).conf  # no such user here
    assert (dict(conf.settings), conf.error) == (
        {},
        "not read: owned by uid 65534, not by root (the job's user 4243 is not known on this node)",
    )
    [conf, _] = parse_job_probe(run_probe(job_probe(spec), tmp_path)).conf
    assert (dict(conf.settings), conf.error) == ({}, "not read: owned by uid 65534, not by root")


def run_probe(probe, home) -> str:
    done = subprocess.run(
        probe.argv, capture_output=True, text=True, timeout=30, env={"PATH": "/usr/bin:/bin", "HOME": str(home)}
    )
    assert "@@nodecheck end gpus" in done.stdout, done.stderr
    return done.stdout
