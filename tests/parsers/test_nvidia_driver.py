"""The kernel driver's version from every /proc/driver/nvidia/version and /sys/module/nvidia/version
recording (open and proprietary modules, 3xx-5xx, a localised build date). (nvidia-smi-mismatch/ holds
recordings of nvidia-smi's version-mismatch text, kept for a future reader: its parser, which nothing
called, was removed in issue 32.)"""

from __future__ import annotations

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.nvidia_driver import (
    parse_proc_version,
    parse_sys_module_version,
)
from tests.helpers import data, data_files

PROC = {
    "proc-driver-nvidia-version/derived-nct-1099-proprietary-570.153.02-from-dmesg.txt": (
        "570.153.02",
        "proprietary",
        "x86_64",
    ),
    "proc-driver-nvidia-version/hyprland-6715-open-555.58-ru-date-first-line.txt": ("555.58", "open", "x86_64"),
    "proc-driver-nvidia-version/neofetch-876-proprietary-384.98-ubuntu.txt": ("384.98", "proprietary", "x86_64"),
    "proc-driver-nvidia-version/nixgl-121-open-525.60.11-arch.txt": ("525.60.11", "open", "x86_64"),
    "proc-driver-nvidia-version/nixgl-186-open-565.57.01-ubuntu2404.txt": ("565.57.01", "open", "x86_64"),
}


@pytest.mark.parametrize("path", data_files("proc-driver-nvidia-version"))
def test_every_proc_version_recording(path):
    driver = parse_proc_version(data(path))
    assert (driver.version, driver.flavor, driver.arch) == PROC[path]
    assert driver.source == "/proc/driver/nvidia/version"


@pytest.mark.parametrize("path", data_files("sys-module-nvidia-version"))
def test_every_sys_module_version_recording(path):
    driver = parse_sys_module_version(data(path))
    assert (driver.version, driver.flavor, driver.source) == ("550.90.07", None, "/sys/module/nvidia/version")


@pytest.mark.parametrize(
    "text",
    [
        "",
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module\n",  # cut before the version
        "GCC version:  gcc version 12.2.0 (GCC)\n",
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  banana  Release Build\n",
    ],
)
def test_garbage_and_truncated_proc_versions_raise(text):
    with pytest.raises(ParseError):
        parse_proc_version(text)


@pytest.mark.parametrize("text", ["", "550.90.07 extra\n", "R550\n", "550.\n"])
def test_garbage_sys_versions_raise(text):
    with pytest.raises(ParseError):
        parse_sys_module_version(text)
