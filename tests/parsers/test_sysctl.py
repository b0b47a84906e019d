"""sysctl keys, values as sysctl shows them, and `sysctl -a` recordings under tests/data/sysctl."""

from __future__ import annotations

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.sysctl import KEY, parse_sysctl_a, path_of, shown
from tests.helpers import data, data_files

EXPECTED = {
    "sysctl/chef-bach-901-sysctl-a-grep-max_map_count-256gb.txt": {"vm.max_map_count": "16498985"},
    "sysctl/devbox-linux-sysctl-keys-tcp_rmem-tabs.txt": {
        "vm.max_map_count": "65530",
        "net.core.rmem_max": "4194304",
        "net.core.wmem_max": "4194304",
        "net.ipv4.tcp_rmem": "4096 131072 33554432",
        "kernel.numa_balancing": "0",
        "vm.overcommit_memory": "0",
        "kernel.pid_max": "32768",
    },
}


def test_every_recording_has_expectations():
    assert sorted(EXPECTED) == data_files("sysctl")


@pytest.mark.parametrize("path", data_files("sysctl"))
def test_recordings(path):
    assert parse_sysctl_a(data(path)).values == EXPECTED[path]


def test_refusals_are_kept_apart():
    # sysctl -a's stderr line for a key root may not read (util-linux/procps wording)
    listing = parse_sysctl_a("fs.protected_fifos = 1\nsysctl: permission denied on key 'fs.protected_regular'\n")
    assert listing.values == {"fs.protected_fifos": "1"}
    assert listing.refused == ("sysctl: permission denied on key 'fs.protected_regular'",)


@pytest.mark.parametrize("text", ["", "vm.max_map_count 65530\n"])
def test_not_a_listing(text):
    with pytest.raises(ParseError):
        parse_sysctl_a(text)


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
