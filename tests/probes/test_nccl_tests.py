"""The nccl-tests probe script, run for real under dash and bash with stand-in binaries on PATH:
the environment reaches the test, a hang ends as exit 124 with the output so far, a missing binary is
exit 127, and the JSON report is read when the binary's usage lists the option."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import textwrap
import time

import pytest

from nodecheck.parsers.sections import split_sections
from nodecheck.probes import nccl_tests as nccltest

SHELLS = [s for s in ("dash", "bash") if shutil.which(s)]


def tool(directory, name: str, body: str) -> None:
    path = directory / name
    path.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    path.chmod(0o755)


def run(probe, path_dir, shell: str, timeout: float = 30):
    env = {"PATH": f"{path_dir}:/usr/bin:/bin", "TMPDIR": str(path_dir)}
    argv = (shell, *probe.argv[1:])
    started = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout, input=probe.stdin or "")
    return proc, time.monotonic() - started


@pytest.fixture(params=SHELLS)
def shell(request):
    return request.param


def test_the_environment_reaches_the_test_and_the_output_is_one_section(tmp_path, shell):
    tool(
        tmp_path,
        "all_reduce_perf",
        """
        case "$1" in -h) echo "usage: no json here"; exit 0 ;; esac
        echo "NCCL_DEBUG=$NCCL_DEBUG NCCL_SPACED=$NCCL_SPACED args=$*"
        """,
    )
    probe = nccltest.single_node(
        "t", nccltest.Sweep(max_bytes=64), 2, {"NCCL_DEBUG": "VERSION", "NCCL_SPACED": "a b"}, 5
    )
    proc, _ = run(probe, tmp_path, shell)
    assert proc.returncode == 0, proc.stderr
    test = split_sections(proc.stdout).get("test")
    assert test.rc == 0
    assert test.text.strip() == (
        "NCCL_DEBUG=VERSION NCCL_SPACED=a b args=-b 8 -e 64 -f 2 -g 2 -n 20 -w 5 -c 1 -d float -o sum"
    )
    assert split_sections(proc.stdout).get("json") is None


def test_a_hung_test_is_killed_at_its_limit_with_its_output_so_far(tmp_path, shell):
    tool(
        tmp_path,
        "all_reduce_perf",
        """
        case "$1" in -h) exit 0 ;; esac
        echo "# nThread 1 nGpus 8 minBytes 8 maxBytes 64"
        exec sleep 60
        """,
    )
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
    tool(
        tmp_path,
        "all_reduce_perf",
        f'''
        case "$1" in -h) echo "  {nccltest.JSON_USAGE_MARK} <file>  write results as JSON"; exit 0 ;; esac
        echo "text output"
        out=; prev=
        for a do [ "$prev" = "{nccltest.JSON_OPTION}" ] && out=$a; prev=$a; done
        [ -n "$out" ] && printf '{{"version": 2}}' > "$out"
        ''',
    )
    probe = nccltest.single_node("t", nccltest.Sweep(), 8, {}, 5)
    proc, _ = run(probe, tmp_path, shell)
    parts = split_sections(proc.stdout)
    assert parts.get("test").text.strip() == "text output"
    assert parts.get("json").text.strip() == '{"version": 2}'
    assert not [p for p in os.listdir(tmp_path) if p.startswith("nodecheck-nccl.")]  # cleaned up
    off = nccltest.single_node("t", nccltest.Sweep(), 8, {}, 5, json="off")
    proc, _ = run(off, tmp_path, shell)
    assert split_sections(proc.stdout).get("json") is None


def test_job_variables_named_like_the_scripts_own_cannot_change_the_limit_or_the_binary(tmp_path, shell):
    """Such names never travel (jobenv.travels); and a stdin line naming the script's own variables is
    read before the script sets them, so it changes nothing either."""
    tool(
        tmp_path,
        "all_reduce_perf",
        """
        case "$1" in -h) exit 0 ;; esac
        echo "nc_tool=$nc_tool nc_limit=$nc_limit"
        exec sleep 60
        """,
    )
    for name in ("tool", "nc_limit", "limit"):
        with pytest.raises(ValueError, match="not a variable a test may be given"):
            nccltest.single_node("t", nccltest.Sweep(max_bytes=64), 8, {name: "100"}, 1)
    probe = nccltest.single_node("t", nccltest.Sweep(max_bytes=64), 8, {}, 1)
    probe = dataclasses.replace(probe, stdin="nc_tool=/nowhere/x\nnc_limit=100\nnc_json=on\n")
    proc, wall = run(probe, tmp_path, shell)
    assert proc.returncode == 0, proc.stderr
    test = split_sections(proc.stdout).get("test")
    assert test.rc == 124 and wall < 10  # killed at 1 s, not 100
    assert test.text.strip() == "nc_tool=all_reduce_perf nc_limit=1"
    assert split_sections(proc.stdout).get("json") is None


# --- the job's secrets stay off the node's command lines and out of the report (issue 17, finding 3) -------

ANCESTRY = r"""
p=$$
while [ "${p:-0}" -gt 1 ]; do
  printf 'cmdline %s\n' "$(tr '\000' ' ' </proc/$p/cmdline)"
  p=$(sed -n 's/^PPid:[[:space:]]*//p' /proc/$p/status)
done
"""


def test_the_job_environment_travels_on_stdin_and_only_what_the_test_needs(tmp_path, shell):
    """--job-env HF_TOKEN=s3cr3t NCCL_FOO=1: NCCL_FOO reaches the test, HF_TOKEN does not reach the node
    at all, and no value is on a command line there (every process up to init is read) or in the
    probe's argv (report.json keeps it)."""
    tool(
        tmp_path,
        "all_reduce_perf",
        """
        case "$1" in -h) exit 0 ;; esac
        echo "NCCL_FOO=$NCCL_FOO HF_TOKEN=${HF_TOKEN-unset}"
        """
        + ANCESTRY,
    )
    env = nccltest.job_env(
        {"HF_TOKEN": "s3cr3t", "NCCL_FOO": "1", "TORCH_HUB_TOKEN": "s3cr3t2", "NCCL_IB_HCA": "mlx5_0"}, "default"
    )
    assert env == {"NCCL_DEBUG": "VERSION", "NCCL_FOO": "1", "NCCL_IB_HCA": "mlx5_0"}
    probe = nccltest.single_node("t", nccltest.Sweep(max_bytes=64), 8, env, 5)
    assert not [w for w in probe.argv if "NCCL_FOO" in w or "s3cr3t" in w or "mlx5_0" in w]
    assert "NCCL_FOO=1\n" in probe.stdin and "s3cr3t" not in probe.stdin
    proc, _ = run(probe, tmp_path, shell)
    text = split_sections(proc.stdout).get("test").text
    assert text.splitlines()[0] == "NCCL_FOO=1 HF_TOKEN=unset"
    cmdlines = [ln for ln in text.splitlines() if ln.startswith("cmdline ")]
    assert len(cmdlines) >= 3 and any("all_reduce_perf" in c for c in cmdlines)
    assert not [c for c in cmdlines if "NCCL_FOO=" in c or "mlx5_0" in c]
    assert nccltest.left_behind({"HF_TOKEN": "x", "NCCL_FOO": "1", "WANDB_API_KEY": "y", "PATH": "/x"}) == {
        "HF_TOKEN": "its name looks secret",
        "PATH": "not a variable the test needs",
        "WANDB_API_KEY": "its name looks secret",
    }


def test_values_with_newlines_backslashes_and_unicode_arrive_unchanged(tmp_path, shell):
    tool(
        tmp_path,
        "all_reduce_perf",
        """
        case "$1" in -h) exit 0 ;; esac
        printf '[%s]' "$NCCL_A" "$NCCL_B" "$NCCL_C" "$NCCL_D"; echo
        """,
    )
    env = {"NCCL_A": "line1\nNCCL_INJECTED=1\n", "NCCL_B": "a\\cb\\0101\\n%s", "NCCL_C": "ünï cødé\t", "NCCL_D": ""}
    proc, _ = run(nccltest.single_node("t", nccltest.Sweep(max_bytes=64), 8, env, 5), tmp_path, shell)
    assert split_sections(proc.stdout).get("test").text == "[" + "][".join(env.values()) + "]\n"


def test_mpirun_gets_the_names_to_export_never_the_values():
    p = nccltest.multi_node(
        "m",
        "mpirun",
        ["n1", "n2"],
        8,
        1,
        nccltest.Sweep(),
        nccltest.job_env({"NCCL_FOO": "1", "HF_TOKEN": "s3cr3t"}, "network_only"),
        5,
    )
    cmd = nccltest.command_words(p.argv)
    exported = [cmd[i + 1] for i, w in enumerate(cmd) if w == "-x"]
    assert exported == ["NCCL_DEBUG", "NCCL_FOO", "NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE"]
    assert not [w for w in p.argv if "=1" in w or "s3cr3t" in w or "HF_TOKEN" in w]
    assert p.stdin == "NCCL_DEBUG=VERSION\nNCCL_FOO=1\nNCCL_P2P_DISABLE=1\nNCCL_SHM_DISABLE=1\n"
