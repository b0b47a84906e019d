"""The processes probe run here with sh: a `ps` first on PATH (a recording replayed, or one that
hangs) and the real one; what proc.health makes of it."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

from nodecheck.checks.proc import ProcHealth, health
from nodecheck.core.model import Status
from nodecheck.probes.processes import processes_probe, read_processes
from tests.helpers import DATA, captures

FAULT = DATA / "ps/derived-azure-local-csi-153-h100-lvm-D-probe-columns.txt"


def run(probe, path_dirs=(), timeout=60):
    env = {**os.environ, "PATH": os.pathsep.join([*map(str, path_dirs), os.environ["PATH"]])}
    done = subprocess.run(probe.argv, capture_output=True, text=True, env=env, timeout=timeout, check=False)
    assert done.returncode == 0, done.stderr
    return captures(probe, done.stdout)


def fake(tmp_path, name, body):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    tool = bin_dir / name
    tool.write_text("#!/bin/sh\n" + body)
    tool.chmod(0o755)
    return bin_dir


def test_a_replayed_listing_with_processes_stuck_in_d_state_fails(tmp_path):
    bin_dir = fake(tmp_path, "ps", f"cat '{FAULT}'\n")
    want = ProcHealth(sample_gap_s=1, load_warn_per_cpu=None)
    [probe] = [processes_probe(1, want.ps_timeout_s, want.uid_min)]
    out = run(probe, [bin_dir])
    facts = read_processes(out, probe)
    assert facts.second is not None and facts.second.table is not None
    verdicts = list(health(out, want))
    assert [(v.status, v.subject) for v in verdicts] == [
        (Status.FAIL, "D state"),
        (Status.PASS, "zombies"),
        (Status.PASS, "leftovers"),
    ]
    assert verdicts[0].message.startswith(
        "6 processes in D state (uninterruptible) in both samples 1 s apart, running longer than 300 s: "
        "auoms (pid 12405, root, running 2h 0m), jbd2/dm-8-8 (pid 105408, root, running 23h 58m), "
        "lvm (pid 1233013, root, running 1h 0m)"
    )


def test_a_ps_that_hangs_is_killed_at_its_bound_and_named(tmp_path):
    bin_dir = fake(tmp_path, "ps", "exec sleep 30\n")
    want = ProcHealth(sample_gap_s=0, ps_timeout_s=1, load_warn_per_cpu=None)
    probe = processes_probe(0, 1, want.uid_min)
    started = time.monotonic()
    out = run(probe, [bin_dir])
    assert time.monotonic() - started < 10
    assert [(v.status, v.message) for v in health(out, want)] == [
        (
            Status.TIMEOUT,
            "ps did not finish within 1 s (reading /proc hangs: a process stuck in the kernel?)",
        )
    ]


def test_no_ps_on_the_node_is_an_error_naming_it(tmp_path):
    bin_dir = fake(tmp_path, "ps", "echo 'sh: 1: ps: not found' >&2; exit 127\n")
    want = ProcHealth(sample_gap_s=0, load_warn_per_cpu=None)
    out = run(processes_probe(0, want.ps_timeout_s, want.uid_min), [bin_dir])
    [verdict] = health(out, want)
    assert (verdict.status, verdict.message) == (Status.ERROR, "ps exited 127: sh: 1: ps: not found")


@pytest.mark.skipif(shutil.which("ps") is None or not os.path.exists("/proc/loadavg"), reason="needs procps and /proc")
def test_the_real_ps_and_loadavg_are_read():
    want = ProcHealth(sample_gap_s=0, load_warn_per_cpu=1000.0)
    probe = processes_probe(0, want.ps_timeout_s, want.uid_min)
    out = run(probe)
    facts = read_processes(out, probe)
    assert facts.first.table is not None
    assert facts.first.table.columns == ("PID", "PPID", "UID", "USER", "STAT", "ELAPSED", "COMMAND")
    assert "ps" in {p.command for p in facts.first.table.processes}
    assert facts.cpus is not None and facts.cpus >= 1 and facts.load is not None
    load = next(v for v in health(out, want) if v.subject == "load")
    assert load.status is Status.PASS and load.message.startswith("load average ")


def test_the_probe_says_how_many_lines_ps_printed(tmp_path):
    # issue 32, 3.1: the count the judge holds each listing to (a cut listing is then an ERROR)
    bin_dir = fake(tmp_path, "ps", f"cat '{FAULT}'\n")
    want = ProcHealth(sample_gap_s=1, load_warn_per_cpu=None)
    probe = processes_probe(1, want.ps_timeout_s, want.uid_min)
    out = run(probe, [bin_dir])
    text = out[probe.name].stdout
    assert "@@nodecheck lines:ps1 10\n" in text and "@@nodecheck lines:ps2 10\n" in text
    first = FAULT.read_text()
    cut = text.replace(first, "".join(first.splitlines(keepends=True)[:2]), 1)
    verdicts = list(health(captures(probe, cut), want))
    assert [(v.status, v.message) for v in verdicts] == [
        (Status.ERROR, "ps printed 10 lines, 2 arrived: the listing is not whole")
    ]


def test_no_process_in_d_state_in_the_first_sample_takes_no_second_and_no_sleep(tmp_path):
    # issue 34, 7: the second sample can only confirm a process the first saw in D state; with none
    # there, sleeping the gap could not change the verdict, and every job start would wait for it
    calm = FAULT.read_text().replace(" D ", " S ").replace(" Dsl ", " Ssl ")
    listing = tmp_path / "calm.txt"
    listing.write_text(calm)
    bin_dir = fake(tmp_path, "ps", f"cat '{listing}'\n")
    want = ProcHealth(sample_gap_s=20, load_warn_per_cpu=None)
    probe = processes_probe(20, want.ps_timeout_s, want.uid_min)
    started = time.monotonic()
    out = run(probe, [bin_dir])
    assert time.monotonic() - started < 15  # not the 20 s gap (a busy machine may be slow)
    text = out[probe.name].stdout
    assert "@@nodecheck begin ps2" not in text
    assert "@@nodecheck second skipped: no process in D state in the first sample\n" in text
    facts = read_processes(out, probe)
    assert facts.first.table is not None and facts.second is None
    assert next((v.status, v.subject, v.message) for v in health(out, want)) == (
        Status.PASS,
        "D state",
        "no process stuck in D state",
    )


def test_a_process_in_d_state_in_the_first_sample_still_gets_the_whole_gap(tmp_path):
    bin_dir = fake(tmp_path, "ps", f"cat '{FAULT}'\n")
    probe = processes_probe(2, 10, 1000)
    started = time.monotonic()
    out = run(probe, [bin_dir])
    assert time.monotonic() - started >= 2  # the gap is slept in full: the rule is not weakened
    assert "@@nodecheck begin ps2" in out[probe.name].stdout


def test_a_first_sample_that_failed_still_gets_a_second(tmp_path):
    # ps failing says nothing about D state: the second sample is taken as before
    bin_dir = fake(tmp_path, "ps", "echo 'ps: fatal' >&2; exit 1\n")
    probe = processes_probe(1, 10, 1000)
    out = run(probe, [bin_dir])
    assert "@@nodecheck begin ps2" in out[probe.name].stdout
