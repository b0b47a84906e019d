"""The nccl_env probe's output read into facts, on constructed outputs; `output()` builds them for the
nccl.env check's tests too.

The `ip -o addr show` lines follow iproute2 6.1's output on this build machine (one address a line,
the `\\` that stands for the folded lifetime line); the sysfs lines follow the probe's `sysfs_dump`."""

from __future__ import annotations

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.nccl_config import parse_probe

LIFETIME = "\\       valid_lft forever preferred_lft forever"
IP_ADDRS = "".join(
    f"{line}{LIFETIME}\n"
    for line in (
        "1: lo    inet 127.0.0.1/8 scope host lo",
        "1: lo    inet6 ::1/128 scope host ",
        "2: eth0    inet 10.1.0.17/16 brd 10.1.255.255 scope global eth0",
        "2: eth0    inet6 fe80::5054:ff:fe12:3417/64 scope link ",
        "3: docker0    inet 172.17.0.1/16 brd 172.17.255.255 scope global docker0",
        "5: ib0    inet 10.2.0.17/16 brd 10.2.255.255 scope global ib0",
        "5: ib0    inet6 fe80::ba3f:d203:77:4a01/64 scope link tentative ",
    )
)
LINKS = "docker0 down\neth0 up\neth1 up\nib0 up\nlo unknown\n"
IB = "".join(
    f"/sys/class/infiniband/{ca}/ports/{port}/{name}\t{value}\n"
    for ca, port, name, value in (
        ("mlx5_0", 1, "state", "4: ACTIVE"),
        ("mlx5_0", 1, "link_layer", "InfiniBand"),
        ("mlx5_1", 1, "state", "1: DOWN"),
        ("mlx5_1", 1, "link_layer", "InfiniBand"),
        ("mlx5_2", 1, "state", "4: ACTIVE"),
        ("mlx5_2", 1, "link_layer", "Ethernet"),
    )
)


def output(
    node_env: str = "",
    links: str = LINKS,
    addrs: str = IP_ADDRS,
    addrs_rc: int = 0,
    hcas: str = "mlx5_0\nmlx5_1\nmlx5_2\n",
    ib: str = IB,
    memlock: str = "unlimited",
    python3: str = "/usr/bin/python3",
    writable: str = "default\tok\n",
    user_conf: str = "",
    etc_conf: str = "",
    conf_path: str = "/root/.nccl.conf",
) -> str:
    """What the nccl_env probe prints on a node."""
    return (
        f"@@nodecheck conf_path {conf_path}\n@@nodecheck begin user.conf\n{user_conf}"
        f"@@nodecheck end user.conf rc=0\n@@nodecheck begin nccl.conf\n{etc_conf}@@nodecheck end nccl.conf rc=0\n"
        f"@@nodecheck begin node_env\n{node_env}@@nodecheck end node_env rc=0\n"
        f"@@nodecheck begin links\n{links}@@nodecheck end links rc=0\n"
        f"@@nodecheck begin addrs\n{addrs}@@nodecheck end addrs rc={addrs_rc}\n"
        f"@@nodecheck begin hcas\n{hcas}@@nodecheck end hcas rc=0\n"
        f"@@nodecheck begin ib\n{ib}@@nodecheck end ib rc=0\n"
        f"@@nodecheck memlock {memlock}\n@@nodecheck python3 {python3}\n"
        f"@@nodecheck begin writable\n{writable}@@nodecheck end writable rc=0\n"
    )


def test_the_probe_output_is_read_into_facts():
    facts = parse_probe(output(node_env="NCCL_DEBUG=INFO\nMASTER_ADDR=node1\n"))
    assert facts.node_env == {"NCCL_DEBUG": "INFO", "MASTER_ADDR": "node1"}
    assert facts.links == {"docker0": "down", "eth0": "up", "eth1": "up", "ib0": "up", "lo": "unknown"}
    # ::1 (NCCL skips IPv6 loopback) and a tentative address are not usable addresses
    assert {n: [a.cidr for a in addrs] for n, addrs in facts.addresses.items()} == {
        "lo": ["127.0.0.1/8"],
        "eth0": ["10.1.0.17/16", "fe80::5054:ff:fe12:3417/64"],
        "docker0": ["172.17.0.1/16"],
        "ib0": ["10.2.0.17/16"],
    }
    assert facts.hcas == ("mlx5_0", "mlx5_1", "mlx5_2")
    assert [(p.where, p.state, p.link_layer, p.active) for p in facts.rdma_ports.values()] == [
        ("mlx5_0/1", "4: ACTIVE", "InfiniBand", True),
        ("mlx5_1/1", "1: DOWN", "InfiniBand", False),
        ("mlx5_2/1", "4: ACTIVE", "Ethernet", True),
    ]
    assert (facts.memlock, facts.python3, dict(facts.writable)) == ("unlimited", "/usr/bin/python3", {"default": "ok"})


def test_a_long_unreadable_line_is_quoted_bounded():
    # issue 17: every message that quotes input quotes a bounded excerpt
    from nodecheck.parsers.nccl_config import key_values

    with pytest.raises(ParseError) as caught:
        key_values("x" * 1_000_000, "=", "env")
    assert len(caught.value.reason) < 200 and caught.value.reason.startswith("expected KEY'='VALUE, got 'xxx")
    assert caught.value.reason == "expected KEY'='VALUE, got 'xxxxxxxxxxxx...xxxxxxxxxxxxx'"
