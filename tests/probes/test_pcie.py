"""The lspci probe run for real through sh, with a fake lspci on PATH replaying a recording (as the
simulated nodes do), and with none."""

from __future__ import annotations

import os
import subprocess

from nodecheck.checks.pcie import PcieAcs, acs
from nodecheck.core.model import Status
from nodecheck.probes.pcie import LSPCI
from tests.helpers import DATA, captures


def run(tmp_path, fake: str | None) -> subprocess.CompletedProcess:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if fake is not None:
        (bin_dir / "lspci").write_text(f"#!/bin/sh\nexec cat '{DATA / fake}'\n")
        (bin_dir / "lspci").chmod(0o755)
    for tool in ("sh", "head", "cat"):  # the script's shell and helpers, and nothing else of the host's PATH
        os.symlink(subprocess.check_output(["sh", "-c", f"command -v {tool}"], text=True).strip(), bin_dir / tool)
    env = {"PATH": str(bin_dir)}
    return subprocess.run(LSPCI.argv, capture_output=True, text=True, timeout=30, env=env, check=False)


def test_the_probe_calls_lspci_through_path_and_the_check_reads_it(tmp_path):
    done = run(tmp_path, "lspci/derived-cmlgpu-tesla-p100-acs-enabled-on-root-port-00-02-0.txt")
    assert done.returncode == 0 and done.stdout.rstrip().endswith("@@nodecheck end lspci rc=0")
    [v] = acs(captures(LSPCI, done.stdout), PcieAcs())
    assert v.status is Status.FAIL and v.subject == "0000:00:02.0"


def test_no_lspci_is_exit_127_naming_the_tool(tmp_path):
    done = run(tmp_path, None)
    assert done.returncode == 127 and done.stderr.strip() == "lspci not found in PATH (install pciutils)"


def test_the_aer_probe_runs_on_this_host_and_prints_its_clock_and_paths():
    from nodecheck.probes.pcie import AER_BEFORE

    done = subprocess.run(AER_BEFORE.argv, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0 and done.stdout.startswith("@@nodecheck uptime ")
    for line in done.stdout.splitlines():  # whatever GPUs/HCAs this host has: each path is its BDFs
        if line.startswith("@@nodecheck path "):
            assert line.split()[2] in ("GPU", "HCA") and all(len(b) == 12 for b in line.split()[3:])
