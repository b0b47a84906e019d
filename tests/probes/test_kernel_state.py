"""The kernel-state probes run here with sh: the modules probe with and without lsmod (this machine
has neither lsmod nor /proc/modules), built-in modules, /proc/sys keys that exist and one that does
not, and /proc/cmdline."""

from __future__ import annotations

import os
import subprocess

import pytest

from nodecheck.checks.kernel_modules import KernelModules, modules
from nodecheck.checks.kernel_params import KernelParams, params
from nodecheck.core.errors import ParseError
from nodecheck.core.model import Status
from nodecheck.probes.kernel_state import CMDLINE, modules_probe, read_cmdline, read_modules, sysctl_probe
from tests.helpers import DATA, captures

H100 = DATA / "lsmod/gpud-pr39-h100-fm535-lsmod-grep-peermem.txt"


def run(probe, path=None):
    env = {**os.environ, "PATH": path if path is not None else os.environ["PATH"]}
    done = subprocess.run(probe.argv, capture_output=True, text=True, env=env, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return captures(probe, done.stdout)


def fake_lsmod(tmp_path, source):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "lsmod").write_text(f"#!/bin/sh\ncat '{source}'\n")
    (bin_dir / "lsmod").chmod(0o755)
    return f"{bin_dir}{os.pathsep}{os.environ['PATH']}"


def test_a_replayed_lsmod_is_judged(tmp_path):
    want = KernelModules(required=["nvidia", "nvidia_uvm", ["nvidia_peermem", "nv_peer_mem"], "ib_core", "mlx5_ib"])
    out = run(modules_probe(want.names()), fake_lsmod(tmp_path, H100))
    assert read_modules(out, modules_probe(want.names())).source == "lsmod"
    assert [(v.status, v.message) for v in modules(out, want)] == [
        (Status.PASS, "nvidia loaded"),
        (Status.PASS, "nvidia_uvm loaded (seen as a user of another module in lsmod)"),
        (Status.PASS, "nvidia_peermem loaded"),
        (Status.PASS, "ib_core loaded"),
        (Status.PASS, "mlx5_ib loaded (seen as a user of another module in lsmod)"),
        (Status.PASS, "nouveau not loaded"),
    ]


@pytest.mark.skipif(os.path.exists("/proc/modules"), reason="this node has /proc/modules")
def test_neither_lsmod_nor_proc_modules_is_an_error_naming_both(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    probe = modules_probe(KernelModules().names())
    out = run(probe, os.pathsep.join([str(empty), "/bin", "/usr/bin"]))
    if "@@nodecheck begin lsmod" in out[probe.name].stdout:
        pytest.skip("lsmod is in /bin or /usr/bin here")
    with pytest.raises(ParseError) as caught:
        read_modules(out, probe)
    assert (caught.value.tool, caught.value.reason) == (
        "kernel modules",
        "neither lsmod nor /proc/modules is on the node: the loaded modules cannot be read",
    )


@pytest.mark.skipif(
    not os.path.isdir("/sys/module/8250") or os.path.exists("/sys/module/8250/initstate"),
    reason="needs the 8250 serial driver built into the kernel",
)
def test_a_built_in_module_counts_as_loaded(tmp_path):
    want = KernelModules(required=["8250"], forbidden=[])
    out = run(modules_probe(want.names()), fake_lsmod(tmp_path, H100))
    assert [(v.status, v.message) for v in modules(out, want)] == [(Status.PASS, "8250 loaded (built into the kernel)")]


@pytest.mark.skipif(not os.path.exists("/proc/sys/vm/max_map_count"), reason="needs /proc/sys")
def test_sysctls_that_exist_and_one_that_does_not():
    with open("/proc/sys/vm/max_map_count") as f:
        current = int(f.read())
    want = KernelParams(sysctl={"vm.max_map_count": {"fail_below": current}, "vm.no_such_key": 1})
    out = run(sysctl_probe(list(want.sysctl)))
    assert [(v.status, v.subject, v.message) for v in params(out, want)] == [
        (Status.PASS, "vm.max_map_count", f"vm.max_map_count = {current} (>= {current})"),
        (Status.ERROR, "vm.no_such_key", "vm.no_such_key: cannot read /proc/sys/vm/no_such_key: no such key"),
    ]


@pytest.mark.skipif(not os.path.exists("/proc/cmdline"), reason="needs /proc/cmdline")
def test_the_command_line_is_read():
    out = run(CMDLINE)
    with open("/proc/cmdline") as f:
        first = f.read().split()[0]
    assert read_cmdline(out).params[0].text() == first
