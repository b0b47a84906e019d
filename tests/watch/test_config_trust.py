"""A job's user must never steer the root watcher (issue 32, 1.1). The watch config may be a user's
JOB.yml; the watcher runs as root. A config that root does not own, or that group or others may write,
describes only its own job (the progress log, read as that user; the regexes; the bounds; the
interval). Whatever makes root run, send, signal, collect or choose processes (alerts.*, on_hang,
forensics, match, and any field added later: an allowlist) comes only from a root-owned config or the
command line; otherwise exit 64 naming the file, the line, the field and why.

Run for real as root, with `nobody` as the job's user (files chowned to it)."""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
from argparse import Namespace
from pathlib import Path
from types import SimpleNamespace

import pytest
from pydantic import BaseModel

from nodecheck.core.errors import ConfigError
from nodecheck.watch.config import WatchConfig, apply_overrides, load_watch_config
from tests import everyone_tmp

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="makes files owned by root and by another uid")
NOBODY = pwd.getpwnam("nobody").pw_uid
REPO = Path(__file__).resolve().parents[2]

JOB_PART = "interval_s: 5\nprogress: {log: '/scratch/{node}/train.log'}\n"  # what a job may say: 2 lines
# (the field a job's user must not set, its text, the line within it, the option that gives it instead)
PRIVILEGED = [
    ("match", "match: sshd\n", 1, "--match"),
    ("on_hang", "on_hang: cancel\n", 1, "--on-hang"),
    ("forensics", "forensics: true\n", 1, "--forensics"),
    ("alerts.command", "alerts: {command: \"/bin/sh -c 'id > PROOF'\"}\n", 1, "--alert-command"),
    ("alerts.url", "alerts:\n  url: https://collector.example/x\n", 2, "--alert-url"),
    ("alerts.retries", "alerts:\n  retries: 50\n", 2, ""),
    ("history", "history: 100000\n", 1, ""),  # how much root keeps in memory and writes each tick
]
# (owner, mode, why the file is not root's word)
UNTRUSTED = [
    (NOBODY, 0o644, "owned by uid 65534"),
    (0, 0o664, "writable by group"),
    (0, 0o646, "writable by others"),
    (NOBODY, 0o666, "owned by uid 65534 and writable by group and others"),
]


tmp_path = everyone_tmp.tmp_path  # a directory everyone may enter (pytest's own: root's only)


def owned(path: Path, text: str, uid: int, mode: int = 0o644) -> str:
    path.write_text(text)
    os.chown(path, uid, uid)
    path.chmod(mode)
    return str(path)


def indented(text: str) -> str:
    return "".join("  " + line + "\n" for line in text.splitlines())


@pytest.mark.parametrize("owner, mode, why", UNTRUSTED, ids=["nobody", "root-0664", "root-0646", "nobody-0666"])
@pytest.mark.parametrize("field, text, line, option", PRIVILEGED, ids=[p[0] for p in PRIVILEGED])
def test_a_field_that_makes_root_act_is_refused_from_a_file_root_does_not_own(
    tmp_path, owner, mode, why, field, text, line, option
):
    path = owned(tmp_path / "watch.yml", JOB_PART + text, owner, mode)
    with pytest.raises(ConfigError) as e:
        load_watch_config(path)
    assert (e.value.file, e.value.line) == (path, 2 + line)
    assert e.value.message.startswith(f"{field}: not taken from this file ({why}): "), e.value.message
    assert "root-owned config or the command line" in e.value.message
    assert (option in e.value.hint) if option else ("no command-line option" in e.value.hint), e.value.hint
    assert "root-owned config" in e.value.hint


@pytest.mark.parametrize("field, text, line, option", PRIVILEGED, ids=[p[0] for p in PRIVILEGED])
def test_the_same_in_a_users_job_yml_watch_block_names_the_block(tmp_path, field, text, line, option):
    job = "world_size: 8\ngpus_per_node: 8\nwatch:\n" + indented(JOB_PART + text)
    path = owned(tmp_path / "JOB.yml", job, NOBODY)
    with pytest.raises(ConfigError) as e:
        load_watch_config(path)
    assert (e.value.file, e.value.line) == (path, 5 + line)
    assert e.value.message.startswith(f"watch.{field}: not taken from this file (owned by uid {NOBODY}): ")


def test_the_first_refused_field_is_named_and_the_others_listed(tmp_path):
    text = "match: sshd\non_hang: cancel\nprogress: {log: /l}\nalerts: {command: x, url: 'http://h/'}\n"
    with pytest.raises(ConfigError) as e:
        load_watch_config(owned(tmp_path / "watch.yml", text, NOBODY))
    assert e.value.line == 1 and e.value.message.startswith("match: not taken from this file")
    assert e.value.message.endswith("(also: on_hang, alerts.command, alerts.url)"), e.value.message


def test_a_users_file_describes_its_own_job(tmp_path):
    job = """\
world_size: 8
gpus_per_node: 4
checkpoint: {dir: /ckpt, every_steps: 10, save_s: 100}
watch:
  interval_s: 5
  sample_timeout_s: 3
  progress:
    log: /scratch/{node}/train.log
    heartbeat: /scratch/{node}/beat
    step_regex: 'it (?P<step>[0-9]+)'
    throughput_regex: null
    rank_time_regex: 'rank (?P<rank>[0-9]+) (?P<seconds>[0-9.]+)s'
    done_regex: 'all done'
    checkpoint_regex: 'saving'
  bounds: {hang_after_s: 300, startup_grace_s: 60, throughput_floor: 10, straggler_pct: 20, low_power_w: 150}
"""
    from nodecheck.watch.config import load_watch_source

    src = load_watch_source(owned(tmp_path / "JOB.yml", job, NOBODY))
    assert src.owner_uid == NOBODY
    cfg = src.cfg
    assert (cfg.interval_s, cfg.sample_timeout_s, cfg.gpus_per_node) == (5, 3, 4)
    assert cfg.bounds.checkpoint_max_s == 150  # 1.5 x the job's save_s
    assert cfg.progress.for_node("n1") == ("/scratch/n1/train.log", "/scratch/n1/beat")
    assert (cfg.match, cfg.on_hang, cfg.forensics, cfg.alerts.argv, cfg.alerts.url) == (None, None, False, None, None)


def test_a_root_owned_config_group_and_others_cannot_write_sets_everything(tmp_path):
    text = (
        JOB_PART + "match: 'train\\.py'\non_hang: cancel\nforensics: true\n"
        "alerts: {command: page-oncall, url: 'https://hooks.example/x', retries: 5, timeout_s: 3, backoff_s: 2}\n"
    )
    from nodecheck.watch.config import load_watch_source

    for mode in (0o644, 0o600, 0o640):
        src = load_watch_source(owned(tmp_path / f"watch-{mode:o}.yml", text, 0, mode))
        cfg = src.cfg
        assert src.owner_uid == 0
        assert (cfg.match, cfg.on_hang, cfg.forensics) == ("train\\.py", "cancel", True)
        assert (cfg.alerts.argv, cfg.alerts.url, cfg.alerts.retries) == (("page-oncall",), "https://hooks.example/x", 5)


def test_the_command_line_supplies_what_a_users_file_may_not(tmp_path):
    path = owned(tmp_path / "JOB.yml", "world_size: 8\nwatch:\n" + indented(JOB_PART), NOBODY)
    cfg = apply_overrides(
        load_watch_config(path),
        match="train\\.py",
        alert_command="page-oncall --team ml",
        alert_url="https://hooks.example/x",
        on_hang="cancel",
        forensics=True,
    )
    assert (cfg.match, cfg.on_hang, cfg.forensics, cfg.interval_s) == ("train\\.py", "cancel", True, 5)
    assert (cfg.alerts.argv, cfg.alerts.url) == (("page-oncall", "--team", "ml"), "https://hooks.example/x")


def _leaves(model: type[BaseModel], prefix: str = "") -> set[str]:
    out: set[str] = set()
    for name, field in model.model_fields.items():
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            out |= _leaves(kind, f"{prefix}{name}.")
        else:
            out.add(prefix + name)
    return out


def test_every_watch_setting_is_classified_as_the_jobs_or_roots():
    """A field added to WatchConfig (or a block of it) fails here until it is put in JOB_FIELDS
    (a job's user may set it: it only describes the job) or ROOT_FIELDS (it makes root act)."""
    from nodecheck.watch.config import JOB_FIELDS, ROOT_FIELDS

    assert not JOB_FIELDS & ROOT_FIELDS
    unclassified = _leaves(WatchConfig) - JOB_FIELDS - ROOT_FIELDS
    assert not unclassified, f"classify these in nodecheck/watch/config.py: {sorted(unclassified)}"
    assert not (JOB_FIELDS | ROOT_FIELDS) - _leaves(WatchConfig), "a classified field that no longer exists"
    assert {"match", "on_hang", "forensics", "alerts.command", "alerts.url"} <= ROOT_FIELDS
    assert {"progress.log", "progress.step_regex", "bounds.hang_after_s", "interval_s"} <= JOB_FIELDS


def test_a_field_not_on_the_allowlist_is_roots_by_default(tmp_path, monkeypatch):
    from nodecheck.watch import config

    path = owned(tmp_path / "watch.yml", JOB_PART + "bounds: {hang_after_s: 60}\n", NOBODY)
    assert load_watch_config(path).bounds.hang_after_s == 60
    monkeypatch.setattr(config, "JOB_FIELDS", config.JOB_FIELDS - {"bounds.hang_after_s"})
    with pytest.raises(ConfigError) as e:
        load_watch_config(path)
    assert e.value.line == 3 and e.value.message.startswith("bounds.hang_after_s: not taken from this file")


def test_the_watcher_reads_as_the_owner_of_the_config_it_read_not_whoever_owns_the_path_later(tmp_path):
    """The job's user is fixed when the config is read: deleting the JOB.yml, or putting a root file in
    its place, must not make the watcher read the job's log as root."""
    from nodecheck.cli.parser import build_parser
    from nodecheck.watch.command import job_user, plan_watch

    inv = tmp_path / "hosts.yml"
    inv.write_text("nodes:\n  node1:\n    address: 127.0.0.1\n    port: 1\n")
    job = owned(tmp_path / "JOB.yml", "world_size: 8\nwatch:\n" + indented(JOB_PART), NOBODY)
    args: Namespace = build_parser().parse_args(["watch", str(inv), "--config", job, "--match", "train\\.py"])
    plan = plan_watch(args)
    os.unlink(job)
    Path(job).write_text("watch: {}\n")  # root's now
    assert plan.config_owner == NOBODY
    assert job_user(plan.config_owner, plan.job) == str(NOBODY)
    assert job_user(0, SimpleNamespace(user="alice")) == "alice" == job_user(None, SimpleNamespace(user="alice"))


def test_a_users_job_yml_cannot_make_the_root_watcher_run_its_command(tmp_path):
    """The reproduction, as a job's user would do it: their JOB.yml given to `nodecheck watch` (a
    child process, as root): exit 64 before any node is contacted, and no proof file. Before the fix
    the watcher ran `id` as root once the (unreachable) node turned the verdict unresponsive."""
    proof = tmp_path / "PROOF"
    inv = tmp_path / "hosts.yml"
    inv.write_text("nodes:\n  node1:\n    address: 127.0.0.1\n    port: 1\n")  # refused at once
    job = owned(
        tmp_path / "JOB.yml",
        "world_size: 8\nwatch:\n  interval_s: 0.2\n  progress: {log: /tmp/train.log}\n"
        "  bounds: {unresponsive_after_s: 0.3, startup_grace_s: 0.3}\n"
        f"  match: no-such-trainer\n  alerts: {{command: \"/bin/sh -c 'id > {proof}'\"}}\n",
        NOBODY,
    )
    done = subprocess.run(
        [sys.executable, "-m", "nodecheck", "watch", str(inv), "--config", job, "--max-samples", "4"]
        + ["--output-dir", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert not proof.exists(), f"root ran the user's command: {proof.read_text()!r}"
    assert done.returncode == 64, (done.returncode, done.stderr)
    assert f"{job}:6: watch.match: not taken from this file (owned by uid {NOBODY})" in done.stderr, done.stderr
    assert "(also: watch.alerts.command)" in done.stderr
    assert "--match" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()  # nothing started: no state, no incident


def test_a_watcher_run_by_a_user_trusts_that_users_own_file_and_still_not_a_group_writable_one(tmp_path, monkeypatch):
    """Not root: the watcher can make nothing act beyond its own user's rights, so its own file is its
    word (the rule, root's or the watcher's own, not writable by group or others, is the same)."""
    text = JOB_PART + "match: 'train\\.py'\nalerts: {command: page-oncall}\n"
    path = owned(tmp_path / "watch.yml", text, NOBODY)
    monkeypatch.setattr(os, "geteuid", lambda: NOBODY)
    assert load_watch_config(path).alerts.argv == ("page-oncall",)
    os.chmod(path, 0o664)
    with pytest.raises(ConfigError, match=r"^.*:3: match: not taken from this file \(writable by group\)"):
        load_watch_config(path)


@pytest.mark.parametrize("interval", ["0.001", "4.9"])
def test_a_users_file_cannot_make_root_sample_the_nodes_more_often_than_every_5_s(tmp_path, interval):
    """interval_s is the job's to choose, within what root is willing to do for it: a user's 0.001 s
    would make the root watcher probe every node of the job a thousand times a second."""
    path = owned(tmp_path / "JOB.yml", f"progress: {{log: /scratch/x.log}}\ninterval_s: {interval}\n", NOBODY)
    with pytest.raises(ConfigError) as e:
        load_watch_config(path)
    assert e.value.line == 2
    assert "interval_s" in e.value.message and "owned by uid 65534" in e.value.message
    assert "--interval" in e.value.hint
    root = owned(tmp_path / "watch.yml", f"progress: {{log: /scratch/x.log}}\ninterval_s: {interval}\n", 0)
    assert load_watch_config(root).interval_s == float(interval)  # an operator may
    assert load_watch_config(owned(tmp_path / "ok.yml", "interval_s: 5\n", NOBODY)).interval_s == 5
