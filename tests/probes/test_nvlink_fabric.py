"""The NVLink fabric probe script, run for real on this machine with a fake lspci through PATH."""

from __future__ import annotations

import os
import stat
import subprocess

from nodecheck.parsers.nvlink_fabric import parse_nvlink_fabric
from nodecheck.probes.nvlink_fabric import NVLINK_FABRIC
from tests.helpers import data


def run(env) -> str:
    done = subprocess.run(NVLINK_FABRIC.argv, capture_output=True, text=True, timeout=30, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


def fake_tool(directory, name: str, body: str) -> None:
    tool = directory / name
    tool.write_text("#!/bin/sh\n" + body)
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)


def test_lspci_is_called_through_path_for_nvidias_devices_only(tmp_path):
    recording = tmp_path / "lspci.txt"
    recording.write_text(data("lspci-nvswitch/nvidia-fm-guide-hgx-h100-4-nvswitches.txt"))
    # the probe must ask for NVIDIA's devices with domain and codes: anything else is refused
    fake_tool(tmp_path, "lspci", f'[ "$*" = "-D -nn -d 10de:" ] || exit 2\ncat {recording}\n')
    node = parse_nvlink_fabric(run({**os.environ, "PATH": f"{tmp_path}:/usr/bin:/bin"}))
    assert [d.address for d in node.nvswitch_pci or ()] == [f"0000:{b}:00.0" for b in ("07", "08", "09", "0a")]
    assert node.systemd == os.path.isdir("/run/systemd/system")


def test_a_failing_lspci_is_a_note_with_its_words(tmp_path):
    fake_tool(tmp_path, "lspci", 'echo "pcilib: Cannot open /sys/bus/pci/devices" >&2\nexit 1\n')
    node = parse_nvlink_fabric(run({**os.environ, "PATH": f"{tmp_path}:/usr/bin:/bin"}))
    assert node.nvswitch_pci is None
    assert node.lspci_note == "lspci exited 1: pcilib: Cannot open /sys/bus/pci/devices"
