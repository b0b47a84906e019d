"""The services and time_sync probe scripts, run for real on this machine: the mount-namespace test
of the process list, and the clients called through PATH."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess

import pytest

from nodecheck.checks.services import Services, services
from nodecheck.core.model import Status
from nodecheck.parsers.sections import split_sections
from nodecheck.parsers.systemctl import parse_process_list
from nodecheck.probes.services import services_probe
from nodecheck.probes.time_sync import TIME_SYNC
from tests.helpers import captures, data
from tests.probes.fake_daemons import AS_NOBODY, open_dir, setuid_sleep_as, sleep_copy, start, stop


def run(argv, env=None) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_process_of_this_mount_namespace_is_listed_as_this_nodes():
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        probe = services_probe(["nodecheck-none-such.service"], ["sleep"])
        sections = split_sections(run(probe.argv))
    finally:
        sleeper.kill()
        sleeper.wait()
    assert sections.facts["systemd"] in ("yes", "no")
    procs = parse_process_list(sections.require("procs", "t").text)
    assert any(
        p.pid == sleeper.pid and p.namespace == "same" and p.uid == os.getuid() and p.comm == "sleep" for p in procs
    )
    assert sections.require("nvswitch", "t").rc == 0


def test_the_time_probe_calls_chronyc_through_path(tmp_path):
    fake = tmp_path / "chronyc"
    recording = tmp_path / "tracking.txt"
    recording.write_text(data("chronyc-tracking/nelisys-ubuntu2004-normal-2ms-fast.txt"))
    fake.write_text(f'#!/bin/sh\n[ "$1 $2" = "-n tracking" ] || exit 2\ncat {recording}\n')
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    env = {**os.environ, "PATH": f"{tmp_path}:/usr/bin:/bin"}
    sections = split_sections(run(TIME_SYNC.argv, env))
    chrony = sections.require("chronyc", "t")
    assert chrony.rc == 0 and "seconds fast of NTP time" in chrony.text
    assert sections.require("daemons", "t").rc == 0


# --- which process is the daemon (issue 32, 1.3): its real uid and its binary, not its name -------------------

MUNGE_ONLY = Services(required=["munge"], with_nvswitch=[], optional=[])
no_systemd_as_root = pytest.mark.skipif(
    os.path.isdir("/run/systemd/system") or os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="judges the process list (no systemd as init) with processes started as root and as nobody",
)


def munge_verdict():
    probe = services_probe(["munge.service"], ["munged"])  # what the check asks for munge
    [verdict] = [v for v in services(captures(probe, run(probe.argv)), MUNGE_ONLY) if v.subject == "munge"]
    return verdict


@pytest.fixture
def no_munged_here():
    probe = services_probe(["munge.service"], ["munged"])
    listed = parse_process_list(split_sections(run(probe.argv)).require("procs", "t").text)
    if any(p.namespace == "same" for p in listed):
        pytest.skip("a munged runs here")


@no_systemd_as_root
def test_a_setuid_root_program_run_by_a_user_through_a_symlink_named_munged_is_not_munge(no_munged_here):
    # comm "munged" and a root-owned /proc/PID: what a job's user can make stand in for a stopped daemon
    with open_dir() as d:
        fake = start([*AS_NOBODY, str(setuid_sleep_as(d, "munged")), "60"], "munged", setuid=True)
        try:
            verdict = munge_verdict()
        finally:
            stop(fake)
    assert verdict.status is Status.FAIL
    assert verdict.message.startswith("munge.service not running: no process named munged of root or a system ")
    assert f"pid {fake.pid}" in verdict.message


@no_systemd_as_root
def test_a_root_process_named_munged_through_a_symlink_to_another_program_is_not_munge(no_munged_here):
    with open_dir() as d:
        (d / "munged").symlink_to(shutil.which("sleep") or "/bin/sleep")
        fake = start([str(d / "munged"), "60"], "munged")
        try:
            verdict = munge_verdict()
        finally:
            stop(fake)
    assert verdict.status is Status.FAIL
    assert f"pid {fake.pid}" in verdict.message and "not a root-owned munged binary" in verdict.message


@no_systemd_as_root
def test_root_running_a_root_owned_munged_binary_is_munge(no_munged_here):
    with open_dir() as d:
        daemon = start([str(sleep_copy(d, "munged")), "60"], "munged")
        try:
            verdict = munge_verdict()
        finally:
            stop(daemon)
    assert (verdict.status, verdict.message) == (
        Status.PASS,
        f"munged running (pid {daemon.pid}; no systemd: judged by process list)",
    )
