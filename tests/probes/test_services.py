"""The services and time_sync probe scripts, run for real on this machine: the mount-namespace test
of the process list, and the clients called through PATH."""

from __future__ import annotations

import os
import stat
import subprocess

from nodecheck.parsers.sections import split_sections
from nodecheck.parsers.systemctl import parse_process_list
from nodecheck.probes.services import services_probe
from nodecheck.probes.time_sync import TIME_SYNC
from tests.helpers import data


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
