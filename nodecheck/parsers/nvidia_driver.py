"""The NVIDIA kernel driver's version as the node's kernel reports it (/proc/driver/nvidia/version,
/sys/module/nvidia/version). (A user-space driver of another version is nvidia.libraries' FAIL, read from
the libraries' file names, not from nvidia-smi's "Driver/library version mismatch" text.)"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.parsers.lines import split_lines

# Driver versions: 384.98, 555.58 (two parts on some branches), 550.90.07
VERSION = r"[0-9]+\.[0-9]+(?:\.[0-9]+)*"
# The proprietary module: "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.90.07  <build date>";
# the open one (515+): "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  565.57.01  Release Build ..."
# (README kernel_open.html, "Determine if the driver is the proprietary or open module").
_NVRM = re.compile(
    rf"^NVRM version: NVIDIA UNIX (?:(?P<open>Open) Kernel Module for (?P<arch_open>\S+)|(?P<arch>\S+) Kernel Module)"
    rf"\s+(?P<version>{VERSION})(?:\s|$)",
    re.ASCII,
)
_SYS_VERSION = re.compile(rf"{VERSION}", re.ASCII)


@dataclass(frozen=True)
class KernelDriver:
    version: str  # "550.90.07"
    flavor: str | None  # "open", "proprietary"; None where the source does not say (/sys/module)
    arch: str | None  # "x86_64", "aarch64"
    source: str  # "/proc/driver/nvidia/version" or "/sys/module/nvidia/version"


def parse_proc_version(text: str) -> KernelDriver:
    """/proc/driver/nvidia/version: its NVRM line (the GCC line after it is not needed)."""
    for line in split_lines(text):
        if m := _NVRM.match(line):
            return KernelDriver(
                version=m["version"],
                flavor="open" if m["open"] else "proprietary",
                arch=m["arch_open"] or m["arch"],
                source="/proc/driver/nvidia/version",
            )
    raise ParseError(
        "/proc/driver/nvidia/version", "no 'NVRM version: NVIDIA UNIX ... Kernel Module VERSION' line", text
    )


def parse_sys_module_version(text: str) -> KernelDriver:
    """/sys/module/nvidia/version: the module's version string alone."""
    value = text.strip()
    if not _SYS_VERSION.fullmatch(value):
        raise ParseError("/sys/module/nvidia/version", "not a driver version like 550.90.07", text)
    return KernelDriver(version=value, flavor=None, arch=None, source="/sys/module/nvidia/version")
