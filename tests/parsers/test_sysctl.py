"""sysctl keys and values as sysctl shows them. (The `sysctl -a` recordings under tests/data/sysctl are kept
for a future reader: their parser, which nothing called, was removed in issue 32; kernel.params reads
/proc/sys files.)"""

from __future__ import annotations

import pytest

from nodecheck.parsers.sysctl import KEY, path_of, shown


@pytest.mark.parametrize(
    "key",
    [
        "vm.max_map_count",
        "net.ipv4.conf.all.rp_filter",
        "net.ipv4.conf.ens7f0np0.arp_ignore",
        "kernel.sched_rt_runtime_us",
    ],
)
def test_keys(key):
    assert KEY.fullmatch(key)


@pytest.mark.parametrize("key", ["vm", "vm..x", "../etc/shadow", "vm/max_map_count", "-n.x", "vm.max map", "vm.x\n"])
def test_not_keys(key):
    assert not KEY.fullmatch(key)


def test_path_and_shown_value():
    assert path_of("net.ipv4.tcp_rmem") == "/proc/sys/net/ipv4/tcp_rmem"
    assert shown("4096\t131072\t6291456\n") == "4096 131072 6291456"
