"""Kernel parameters under /proc/sys: the key syntax nodecheck accepts, the key's file, a value as
`sysctl` shows it, and `sysctl -a` listings ("vm.max_map_count = 65530")."""

from __future__ import annotations

import re
from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.core.model import quote
from nodecheck.parsers.lines import split_lines

# dotted components of letters, digits, "_" and "-" (net.ipv4.conf.all.rp_filter,
# kernel.sched_rt_runtime_us, net.ipv4.conf.ens7f0np0.arp_ignore): never "/", "..", a space or a
# leading "-", so a key is a path below /proc/sys and a shell argument that is no option. An
# interface name holding a dot (a VLAN: eth0.100) cannot be written this way.
KEY_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_-]*(\.[A-Za-z0-9_][A-Za-z0-9_-]*)+$"
KEY = re.compile(KEY_PATTERN, re.ASCII)
_ROW = re.compile(r"(?P<key>[A-Za-z0-9_][A-Za-z0-9_.-]*) = ?(?P<value>.*)", re.ASCII)
_DENIED = re.compile(r"sysctl: .*")  # "sysctl: permission denied on key 'fs.protected_fifos'" (stderr)


def path_of(key: str) -> str:
    """/proc/sys/vm/max_map_count for vm.max_map_count."""
    return "/proc/sys/" + key.replace(".", "/")


def shown(value: str) -> str:
    """A value as one line: a multi-field sysctl (net.ipv4.tcp_rmem "4096\\t131072\\t6291456") with
    single spaces, trailing newline gone; what `expect:` values are compared with."""
    return " ".join(value.split())


@dataclass(frozen=True)
class SysctlListing:
    values: dict[str, str]  # key -> shown(value)
    refused: tuple[str, ...]  # sysctl's own complaints (keys it may not read)


def parse_sysctl_a(text: str) -> SysctlListing:
    values: dict[str, str] = {}
    refused: list[str] = []
    for line in split_lines(text):
        if not line.strip():
            continue
        if m := _ROW.fullmatch(line):
            values[m.group("key")] = shown(m.group("value"))
        elif _DENIED.fullmatch(line):
            refused.append(line)
        else:
            raise ParseError("sysctl", f"not a 'key = value' line: {quote(line)}", text)
    if not values:
        raise ParseError("sysctl", "no 'key = value' line", text)
    return SysctlListing(values, tuple(refused))
