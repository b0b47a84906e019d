"""`nodecheck forensics --log` and `watch --forensics` read the job's log as the job's user, or not at all
(issue 32, item 1.4): a 0600 root file named as the log, or a symbolic link to one, once put its NCCL
WARN lines into forensics.json, summary.txt and the snapshot capture. The snapshot probe runs for real
on this machine (as root, with `nobody` as the job's user), through investigate() and the local
transport, as `nodecheck forensics` runs it on a node."""

from __future__ import annotations

import os
import pwd
import shutil
import uuid
from pathlib import Path

import pytest

from nodecheck.core.model import Node
from nodecheck.forensics.collect import Where
from nodecheck.forensics.command import investigate
from nodecheck.transport.local import LocalTransport
from tests import everyone_tmp

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("setpriv"),
    reason="switches to the job's user: needs root and util-linux's setpriv",
)
NOBODY = pwd.getpwnam("nobody").pw_uid
SECRET = "s3cr3t-root-only"
WARN = f"node1:4242:4301 [0] NCCL WARN Cuda failure {SECRET}"


open_dir = everyone_tmp.tmp_path  # a directory everyone may enter (pytest's own: root's only)


def investigated(open_dir: Path, log: Path, user: str = "") -> tuple[dict, list[bytes]]:
    """forensics on this machine with `log` as the job's log: its record and every file written."""
    where = Where("match", f"no-such-trainer-{uuid.uuid4().hex}", str(log), None, user)
    out = open_dir / "reports"
    done = investigate(
        LocalTransport(),
        [Node(name="node1", address="127.0.0.1")],
        where,
        label="test",
        key="test",
        output_dir=out,
        stack_timeout_s=3,
    )
    assert done.where is not None and (done.where / "forensics.json").is_file()
    files = [p.read_bytes() for p in done.where.rglob("*") if p.is_file()]
    assert len(files) >= 3  # forensics.json, summary.txt and the captures
    return done.record, files


def root_private_log(open_dir: Path) -> Path:
    log = open_dir / "root-only.log"
    log.write_text(f"step 10\n{WARN}\n")
    log.chmod(0o600)
    return log


@pytest.mark.parametrize("user", ["", str(NOBODY)], ids=["no-user-known", "nobody"])
@pytest.mark.parametrize("via", ["path", "symlink"])
def test_a_root_only_log_or_a_link_to_one_reaches_no_record_file(open_dir, user, via):
    log = root_private_log(open_dir)
    if via == "symlink":
        link = open_dir / "train.log"
        os.symlink(log, link)
        os.lchown(link, NOBODY, NOBODY)
        log = link
    record, files = investigated(open_dir, log, user)
    node = record["nodes"]["node1"]
    assert node["nccl_warns"] == [] and node["log_error"].startswith(f"{log}: not read: "), node
    assert not [f for f in files if SECRET.encode() in f]
    assert ("symbolic link" in node["log_error"]) == (via == "symlink")


def test_the_jobs_own_private_log_is_read_as_the_job_and_as_its_owner(open_dir):
    log = open_dir / "train.log"
    log.write_text(f"step 10\n{WARN.replace(SECRET, 'own')}\n")
    os.chown(log, NOBODY, NOBODY)
    log.chmod(0o600)
    for user in (str(NOBODY), ""):
        record, _ = investigated(open_dir, log, user)
        node = record["nodes"]["node1"]
        assert (node["log_error"], node["nccl_warns"]) == ("", [WARN.replace(SECRET, "own")])
    missing = open_dir / "missing.log"
    record, _ = investigated(open_dir, missing, str(NOBODY))
    assert record["nodes"]["node1"]["log_error"] == f"{missing}: no such file"


@pytest.mark.parametrize("squeue_user, expected", [("alice", "alice"), ("root", ""), ("-rf x", "")])
def test_a_slurm_jobs_log_is_read_as_its_slurm_user_an_inventory_jobs_as_no_one_known(
    monkeypatch, squeue_user, expected
):
    """`forensics --slurm-job ID --log PATH`: squeue's UserName (which the job cannot forge) reads the log;
    never root; over an inventory no job's user is known (the log's owner reads it, root's as nobody)."""
    from argparse import Namespace
    from types import SimpleNamespace

    from nodecheck.forensics import command

    class FakeSlurm:
        def job(self, job_id):
            return SimpleNamespace(nodes=("gpu1", "gpu2"), state="RUNNING", user=squeue_user)

    monkeypatch.setattr("nodecheck.app.slurm.Slurm", FakeSlurm)
    monkeypatch.setattr("nodecheck.app.transports.ssh_transport", lambda args: "ssh")
    monkeypatch.setattr("nodecheck.app.transports.ensure_open_files", lambda n: None)
    args = Namespace(
        slurm_job="1234", inventory=None, dumps=None, match=None, nodes=None, dump_prefix=None, log="/w/train.log"
    )
    args.fanout = 8
    plan = command._plan(args)
    assert [n.name for n in plan["nodes"]] == ["gpu1", "gpu2"]
    assert (plan["where"].mode, plan["where"].log, plan["where"].user) == ("slurm", "/w/train.log", expected)


def test_watch_forensics_reads_the_log_as_the_watched_jobs_user(monkeypatch, tmp_path):
    """`watch --forensics` hands forensics the user its own sample reads the log as (watch.command.job_user:
    the config's owner when not root, else the Slurm job's user), never root."""
    from types import SimpleNamespace

    from nodecheck.watch import command as watch
    from nodecheck.watch.config import WatchConfig

    seen: list[Where] = []

    def investigate_here(transport, nodes, where, **kw):
        seen.append(where)
        raise RuntimeError("enough: what it was handed is what is tested")

    monkeypatch.setattr("nodecheck.forensics.command.investigate", investigate_here)
    cfg = WatchConfig.model_validate({"match": "train", "progress": {"log": "/w/train.log"}})
    alice = SimpleNamespace(user="alice")
    for owner, job in ((None, alice), (4242, alice), (None, SimpleNamespace(user="root")), (None, object())):
        plan = SimpleNamespace(
            label="job", key="job", job=job, config_owner=owner, output_dir=tmp_path, fanout=1, transport=None
        )
        me = SimpleNamespace(cfg=cfg, plan=plan, stop=None, log=SimpleNamespace(event=lambda *a, **kw: None))
        assert watch.Watcher._forensics(me, [])["verdict"].startswith("forensics failed")
    assert [(w.log, w.user) for w in seen] == [
        ("/w/train.log", "alice"),
        ("/w/train.log", "4242"),
        ("/w/train.log", ""),
        ("/w/train.log", ""),
    ]
