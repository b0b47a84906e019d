"""The nccl-tests probe script, run for real under dash and bash with stand-in binaries on PATH:
the environment reaches the test, a hang ends as exit 124 with the output so far, a missing binary is
exit 127, and the JSON report is read when the binary's usage lists the option."""
from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
import time

import pytest

from nodecheck.parsers.sections import split_sections
from nodecheck.probes import nccltest

SHELLS = [s for s in ("dash", "bash") if shutil.which(s)]


def tool(directory, name: str, body: str) -> None:
    path = directory / name
    path.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    path.chmod(0o755)


def run(probe, path_dir, shell: str, timeout: float = 30):
    env = {"PATH": f"{path_dir}:/usr/bin:/bin", "TMPDIR": str(path_dir)}
    argv = (shell, *probe.argv[1:])
    started = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout)
    return proc, time.monotonic() - started


@pytest.fixture(params=SHELLS)
def shell(request):
    return request.param


def test_the_environment_reaches_the_test_and_the_output_is_one_section(tmp_path, shell):
    tool(tmp_path, "all_reduce_perf", '''
        case "$1" in -h) echo "usage: no json here"; exit 0 ;; esac
        echo "NCCL_DEBUG=$NCCL_DEBUG SPACED=$SPACED args=$*"
        ''')
    probe = nccltest.single_node("t", nccltest.Sweep(max_bytes=64), 2, {"NCCL_DEBUG": "VERSION", "SPACED": "a b"}, 5)
    proc, _ = run(probe, tmp_path, shell)
    assert proc.returncode == 0, proc.stderr
    test = split_sections(proc.stdout).get("test")
    assert test.rc == 0
    assert test.text.strip() == ("NCCL_DEBUG=VERSION SPACED=a b args=-b 8 -e 64 -f 2 -g 2 -n 20 -w 5 -c 1 "
                                 "-d float -o sum")
    assert split_sections(proc.stdout).get("json") is None


def test_a_hung_test_is_killed_at_its_limit_with_its_output_so_far(tmp_path, shell):
    tool(tmp_path, "all_reduce_perf", '''
        case "$1" in -h) exit 0 ;; esac
        echo "# nThread 1 nGpus 8 minBytes 8 maxBytes 64"
        exec sleep 60
        ''')
    probe = nccltest.single_node("t", nccltest.Sweep(max_bytes=64), 8, {}, 1)
    proc, wall = run(probe, tmp_path, shell)
    test = split_sections(proc.stdout).get("test")
    assert test.rc == 124 and test.text.startswith("# nThread 1 nGpus 8")
    assert wall < 10


def test_a_missing_binary_is_exit_127_naming_it(tmp_path, shell):
    probe = nccltest.single_node("t", nccltest.Sweep(), 8, {}, 5, binary_dir=str(tmp_path / "nowhere"))
    proc, _ = run(probe, tmp_path, shell)
    assert proc.returncode == 127
    assert "nowhere/all_reduce_perf not found" in proc.stderr


def test_the_json_report_is_asked_for_when_the_usage_lists_it_and_printed_as_a_section(tmp_path, shell):
    tool(tmp_path, "all_reduce_perf", f'''
        case "$1" in -h) echo "  {nccltest.JSON_USAGE_MARK} <file>  write results as JSON"; exit 0 ;; esac
        echo "text output"
        out=; prev=
        for a do [ "$prev" = "{nccltest.JSON_OPTION}" ] && out=$a; prev=$a; done
        [ -n "$out" ] && printf '{{"version": 2}}' > "$out"
        ''')
    probe = nccltest.single_node("t", nccltest.Sweep(), 8, {}, 5)
    proc, _ = run(probe, tmp_path, shell)
    parts = split_sections(proc.stdout)
    assert parts.get("test").text.strip() == "text output"
    assert parts.get("json").text.strip() == '{"version": 2}'
    assert not [p for p in os.listdir(tmp_path) if p.startswith("nodecheck-nccl.")]     # cleaned up
    off = nccltest.single_node("t", nccltest.Sweep(), 8, {}, 5, json="off")
    proc, _ = run(off, tmp_path, shell)
    assert split_sections(proc.stdout).get("json") is None


def test_job_variables_named_like_the_scripts_own_cannot_change_the_limit_or_the_binary(tmp_path, shell):
    tool(tmp_path, "all_reduce_perf", '''
        case "$1" in -h) exit 0 ;; esac
        echo "tool=$tool limit=$limit json=$json out=$out"
        exec sleep 60
        ''')
    env = {"tool": "/nowhere/x", "limit": "100", "json": "on", "out": "kept"}
    probe = nccltest.single_node("t", nccltest.Sweep(max_bytes=64), 8, env, 1)
    proc, wall = run(probe, tmp_path, shell)
    assert proc.returncode == 0, proc.stderr
    test = split_sections(proc.stdout).get("test")
    assert test.rc == 124 and wall < 10        # killed at 1 s, not 100
    assert test.text.strip() == "tool=/nowhere/x limit=100 json=on out=kept"
    assert split_sections(proc.stdout).get("json") is None
