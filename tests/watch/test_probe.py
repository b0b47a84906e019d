"""The watcher's sample script (nodecheck/watch/probe.py) run for real: the progress log and the
heartbeat a watch config names are read only as the job's user could (issue 17, slice I). A root
watcher handed a user's JOB.yml with `progress.log: /etc/shadow` (or a symlink to it) must not copy it
into a sample, an incident record or its output."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from nodecheck import cli
from nodecheck.core.model import Probe
from nodecheck.parsers.watch_sample import parse_sample
from nodecheck.transport.local import LocalTransport
from nodecheck.watch.config import WatchConfig
from nodecheck.watch.probe import sample_probe
from tests import everyone_tmp

tmp_path = everyone_tmp.tmp_path  # the job's user (nobody) opens the files: a directory everyone may enter
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="makes files owned by root and by another uid")

SECRET = "root:$6$s3cr3tshadowhash:19000:0:99999:7:::"
USER = 65534  # the job's user: nobody, a user of this machine (its files are opened as that user)
OTHER = 54322


def sampled(tmp_path: Path, log: str | None, beat: str | None = None, user: str = "") -> tuple[str, object]:
    cfg = WatchConfig.model_validate({"progress": {k: v for k, v in (("log", log), ("heartbeat", beat)) if v}})
    probe = sample_probe(cfg, "node1", user)
    proc = subprocess.run(
        list(probe.argv),
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    return proc.stdout, parse_sample(proc.stdout)


def shadow(tmp_path: Path) -> Path:
    """A root-owned file only root may read, as /etc/shadow is."""
    path = tmp_path / "shadow"
    path.write_text(SECRET + "\n")
    path.chmod(0o600)
    return path


def owned(path: Path, text: str, uid: int, mode: int = 0o600) -> Path:
    path.write_text(text)
    os.chown(path, uid, uid)
    path.chmod(mode)
    return path


def test_a_root_private_file_is_not_read_for_a_job_and_the_sample_says_why(tmp_path):
    secret = shadow(tmp_path)
    for user in (str(USER), ""):  # the job's user known, or not: root's private file never
        out, s = sampled(tmp_path, str(secret), str(secret), user)
        assert SECRET not in out and "s3cr3t" not in out
        assert s.log_error == f"nodecheck-watch: {secret}: not read: nobody cannot open it: Permission denied"
        assert s.heartbeat_error == s.log_error and s.heartbeat_mtime is None and s.log_size is None


def test_a_symlink_is_never_followed_and_another_users_file_is_not_the_jobs(tmp_path):
    link = tmp_path / "train.log"
    link.symlink_to(shadow(tmp_path))
    out, s = sampled(tmp_path, str(link), str(link), str(USER))
    assert SECRET not in out
    assert s.log_error == f"nodecheck-watch: {link}: not read: it is a symbolic link" == s.heartbeat_error
    other = owned(tmp_path / "other.log", "step: 7 secret of another user\n", OTHER, 0o644)
    out, s = sampled(tmp_path, str(other), None, str(USER))
    assert "another user" not in out
    assert (
        s.log_error == f"nodecheck-watch: {other}: not read: owned by uid {OTHER}, not by the job's user "
        f"(uid {USER}) or root"
    )


def test_the_jobs_own_log_root_readable_logs_and_an_operators_watch_of_any_users_log_are_read(tmp_path):
    mine = owned(tmp_path / "train.log", "step: 41\nstep: 42\n", USER)
    beat = owned(tmp_path / "beat", "", USER)
    out, s = sampled(tmp_path, str(mine), str(beat), str(USER))
    assert (s.log_error, s.heartbeat_error, s.log_size) == ("", "", 18)
    assert s.log_tail == "step: 41\nstep: 42\n" and s.heartbeat_mtime == pytest.approx(beat.stat().st_mtime, abs=1e-3)
    public = tmp_path / "root.log"
    public.write_text("step: 5\n")
    public.chmod(0o644)
    assert sampled(tmp_path, str(public), None, str(USER))[1].log_tail == "step: 5\n"
    # an operator's config (root's, no Slurm job): the job's user is not known; any user's log is read
    assert sampled(tmp_path, str(mine), None, "")[1].log_tail == "step: 41\nstep: 42\n"
    out, s = sampled(tmp_path, str(tmp_path / "missing.log"), None, str(USER))
    assert s.log_error == f"nodecheck-watch: {tmp_path / 'missing.log'}: No such file or directory"


def test_a_users_job_yml_naming_a_root_private_file_puts_it_in_no_sample_record_or_output(
    tmp_path, monkeypatch, capsys
):
    """The watch config is a user's JOB.yml (owned by them): the job's user is its owner, and the
    watcher (root here, as a systemd unit runs it) never copies root's private file anywhere. Which
    processes are the job's (--match) is root's to say: the command line (test_config_trust.py)."""
    secret = shadow(tmp_path)
    job = owned(
        tmp_path / "JOB.yml",
        f"world_size: 8\nwatch:\n  progress: {{log: {secret}, heartbeat: {secret}}}\n",
        USER,
        0o644,
    )
    inv = tmp_path / "hosts.yml"
    inv.write_text("nodes:\n  node1:\n    address: 127.0.0.1\n")
    answers = []

    class Recording(LocalTransport):
        def connect(self, node, timeout_s):
            session = super().connect(node, timeout_s)
            run = session.run
            session.run = lambda probe, t: answers.append(run(probe, t)) or answers[-1]
            return session

    monkeypatch.setattr("nodecheck.app.transports.ssh_transport", lambda args: Recording())
    probes: list[Probe] = []
    real = sample_probe

    def recording(cfg, node, job_user=""):
        probes.append(real(cfg, node, job_user))
        return probes[-1]

    monkeypatch.setattr("nodecheck.watch.probe.sample_probe", recording)
    out = tmp_path / "reports"
    cli.main(
        ["watch", str(inv), "--config", str(job), "--match", "no-such-trainer-x7", "--max-samples", "3"]
        + ["--interval", "0.2", "--output-dir", str(out)]
    )
    printed = capsys.readouterr()
    assert probes and all(p.argv[-1] == str(USER) for p in probes)
    assert "s3cr3t" not in printed.out + printed.err
    files = [p for p in out.rglob("*") if p.is_file()]
    assert files and not [p for p in files if b"s3cr3t" in p.read_bytes()]
    assert answers and all(
        f"nodecheck-watch: {secret}: not read: nobody cannot open it: Permission denied" in a.stdout
        and "s3cr3t" not in a.stdout
        for a in answers
    )


def test_the_job_user_is_the_configs_owner_else_the_slurm_jobs_never_root(tmp_path):
    from types import SimpleNamespace

    from nodecheck.watch.command import job_user
    from nodecheck.watch.config import load_watch_source

    users = load_watch_source(str(owned(tmp_path / "JOB.yml", "watch: {}\n", USER, 0o644))).owner_uid
    operators = tmp_path / "watch.yml"
    operators.write_text("{}\n")
    root = load_watch_source(str(operators)).owner_uid
    alice = SimpleNamespace(user="alice")
    assert job_user(users, alice) == str(USER)  # a user's JOB.yml names that user's files only
    assert job_user(root, alice) == "alice" == job_user(None, alice)
    assert job_user(root, SimpleNamespace(user="root")) == "" == job_user(None, object())
    assert job_user(None, SimpleNamespace(user="-rf x")) == ""


@pytest.mark.parametrize("shell", [s for s in ("dash", "bash") if __import__("shutil").which(s)])
def test_the_checks_hold_under_dash_and_bash(tmp_path, shell):
    secret, mine = shadow(tmp_path), owned(tmp_path / "train.log", "step: 3\n", USER)
    for log, error, tail in [
        (secret, "not read: nobody cannot open it: Permission denied", ""),
        (mine, "", "step: 3\n"),
    ]:
        probe = sample_probe(WatchConfig.model_validate({"progress": {"log": str(log)}}), "n1", str(USER))
        proc = subprocess.run([shell, *probe.argv[1:]], capture_output=True, text=True, timeout=30)
        s = parse_sample(proc.stdout)
        assert (s.log_error, s.log_tail) == ((f"nodecheck-watch: {log}: {error}" if error else ""), tail)
    with pytest.raises(ValueError, match="not a uid or a user name"):
        sample_probe(WatchConfig(), "n1", "-rf")
