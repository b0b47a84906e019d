"""Kernel parameters under /proc/sys: the key syntax nodecheck accepts, the key's file, and a value as
`sysctl` shows it (kernel.params reads each key's file, never a `sysctl -a` listing)."""

from __future__ import annotations

import re

# dotted components of letters, digits, "_" and "-" (net.ipv4.conf.all.rp_filter,
# kernel.sched_rt_runtime_us, net.ipv4.conf.ens7f0np0.arp_ignore): never "/", "..", a space or a
# leading "-", so a key is a path below /proc/sys and a shell argument that is no option. An
# interface name holding a dot (a VLAN: eth0.100) cannot be written this way.
KEY_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_-]*(\.[A-Za-z0-9_][A-Za-z0-9_-]*)+$"
KEY = re.compile(KEY_PATTERN, re.ASCII)


def path_of(key: str) -> str:
    """/proc/sys/vm/max_map_count for vm.max_map_count."""
    return "/proc/sys/" + key.replace(".", "/")


def shown(value: str) -> str:
    """A value as one line: a multi-field sysctl (net.ipv4.tcp_rmem "4096\\t131072\\t6291456") with
    single spaces, trailing newline gone; what `expect:` values are compared with."""
    return " ".join(value.split())
