"""GID tables from sysfs dumps. (show_gids/, ibv_devinfo/, rdma_link/ and ibdev2netdev/ under tests/data are
recordings kept for a future reader: their parsers, which nothing called, were removed in issue 32.)"""

from __future__ import annotations

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.gids import (
    Gid,
    make_gid,
    ports_from_sysfs,
    roce_v2_ipv4,
)
from nodecheck.parsers.sysfs import parse_sysfs_dump

MAPPED = "0000:0000:0000:0000:0000:ffff:"


def rows(gids: list[Gid]) -> list[tuple]:
    return [(g.ca, g.port, g.index, g.gid, g.type, g.netdev, g.ipv4, g.link_local) for g in gids]


# --- sysfs dumps (the probe's PATH<TAB>VALUE lines) -------------------------------------------

ROOT = "/sys/class/infiniband"
FE80 = "fe80:0000:0000:0000:0ac0:ebff:feda:1cfb"
ZERO = "0000:0000:0000:0000:0000:0000:0000:0000"
EINVAL = "!cat: read error: Invalid argument"


def sysfs_port(
    ca: str,
    gids: dict[int, tuple[str, str, str]],
    port: int = 1,
    link_layer: str = "Ethernet",
    state: str = "4: ACTIVE",
    rate: str = "400 Gb/sec (4X NDR)",
) -> str:
    """A dump of one port: gids maps index → (gid, types value, ndevs value), as the probe prints."""
    base = f"{ROOT}/{ca}/ports/{port}"
    lines = [
        f"{base}/link_layer\t{link_layer}",
        f"{base}/state\t{state}",
        f"{base}/phys_state\t5: LinkUp",
        f"{base}/rate\t{rate}",
    ]
    for index, (gid, gid_type, ndev) in gids.items():
        lines += [
            f"{base}/gids/{index}\t{gid}",
            f"{base}/gid_attrs/types/{index}\t{gid_type}",
            f"{base}/gid_attrs/ndevs/{index}\t{ndev}",
        ]
    return "\n".join(lines) + "\n"


def usual_table(ipv4_gid: str = MAPPED + "0a4d:0003", netdev: str = "ens7f0np0") -> dict:
    return {
        0: (FE80, "IB/RoCE v1", netdev),
        1: (FE80, "RoCE v2", netdev),
        2: (ipv4_gid, "IB/RoCE v1", netdev),
        3: (ipv4_gid, "RoCE v2", netdev),
        4: (ZERO, EINVAL, EINVAL),
        5: (ZERO, EINVAL, EINVAL),
    }


def test_sysfs_ipv4_v2_at_index_3():
    ports = ports_from_sysfs(parse_sysfs_dump(sysfs_port("mlx5_0", usual_table())))
    assert len(ports) == 1
    port = ports[0]
    assert (port.ca, port.port, port.link_layer, port.state, port.phys_state, port.rate) == (
        "mlx5_0",
        1,
        "Ethernet",
        "ACTIVE",
        "LinkUp",
        "400 Gb/sec (4X NDR)",
    )
    assert rows(list(port.gids)) == [
        ("mlx5_0", 1, 0, FE80, "v1", "ens7f0np0", None, True),
        ("mlx5_0", 1, 1, FE80, "v2", "ens7f0np0", None, True),
        ("mlx5_0", 1, 2, MAPPED + "0a4d:0003", "v1", "ens7f0np0", "10.77.0.3", False),
        ("mlx5_0", 1, 3, MAPPED + "0a4d:0003", "v2", "ens7f0np0", "10.77.0.3", False),
    ]
    assert port.netdevs == ("ens7f0np0",)
    assert roce_v2_ipv4(ports) == {("mlx5_0", 1): [port.gids[3]]}


def test_sysfs_renumbered_after_a_flap_leaves_3_empty():
    # the IPv4 pair came back at 4/5 while 2/3 were still held (formats.md §1, NCCL #1333)
    table = usual_table()
    table[4], table[5] = table[2], table[3]
    table[2] = table[3] = (ZERO, EINVAL, EINVAL)
    (port,) = ports_from_sysfs(parse_sysfs_dump(sysfs_port("mlx5_0", table)))
    assert [(g.index, g.type, g.ipv4) for g in port.gids] == [
        (0, "v1", None),
        (1, "v2", None),
        (4, "v1", "10.77.0.3"),
        (5, "v2", "10.77.0.3"),
    ]
    assert [g.index for g in roce_v2_ipv4([port])[("mlx5_0", 1)]] == [5]


def test_sysfs_unreadable_types_and_empty_gids():
    table = {
        0: (FE80, EINVAL, "ens7f0np0"),  # type unreadable: unknown, still listed
        1: (MAPPED + "0a4d:0003", "RoCE v2", EINVAL),  # no ndev: None
        2: (ZERO, "RoCE v2", "ens7f0np0"),  # zero GID: empty slot whatever its type
        3: (MAPPED + "0a4d:0004", "Invalid GID type", "ens7f0np0"),
    }
    (port,) = ports_from_sysfs(parse_sysfs_dump(sysfs_port("mlx5_0", table)))
    assert [(g.index, g.type, g.netdev) for g in port.gids] == [
        (0, None, "ens7f0np0"),
        (1, "v2", None),
        (3, None, "ens7f0np0"),
    ]
    assert port.netdevs == ("ens7f0np0",)
    assert [g.index for g in roce_v2_ipv4([port])[("mlx5_0", 1)]] == [1]


def test_sysfs_missing_type_file_and_ib_port_and_order():
    base = f"{ROOT}/mlx5_0/ports/1"
    text = (
        sysfs_port(
            "mlx5_10",
            {0: ("fe80:0000:0000:0000:946d:ae03:00cd:e72c", "IB/RoCE v1", EINVAL)},
            link_layer="InfiniBand",
            rate=EINVAL,
        )
        + sysfs_port("mlx5_0", {})
        + f"{base}/gids/7\t{MAPPED}0a4d:0009\n"  # no types/7 or ndevs/7 in the dump
        + f"{base}/counters/link_downed\t0\n/sys/class/net/eth0/mtu\t9000\n"
    )
    ports = ports_from_sysfs(parse_sysfs_dump(text))
    assert [(p.ca, p.link_layer, p.rate, len(p.gids)) for p in ports] == [
        ("mlx5_0", "Ethernet", "400 Gb/sec (4X NDR)", 1),
        ("mlx5_10", "InfiniBand", None, 1),
    ]
    assert (ports[0].gids[0].index, ports[0].gids[0].type, ports[0].gids[0].ipv4) == (7, None, "10.77.0.9")
    assert ports[1].gids[0].netdev is None and ports[1].netdevs == ()
    assert roce_v2_ipv4(ports) == {("mlx5_0", 1): [], ("mlx5_10", 1): []}


@pytest.mark.parametrize(
    "text, reason",
    [
        ("/sys/class/net/eth0/mtu\t9000\n", "no /sys/class/infiniband"),
        (sysfs_port("mlx5_0", {}).replace("link_layer", "link_layer_x"), "mlx5_0/1: link_layer missing"),
        (sysfs_port("mlx5_0", {}, state=EINVAL), "mlx5_0/1: state unreadable"),
        (sysfs_port("mlx5_0", {}, state="ACTIVE"), "mlx5_0/1: state 'ACTIVE' is not '<number>: <name>'"),
        (sysfs_port("mlx5_0", {3: ("fe80::zz", "RoCE v2", "eth0")}), "mlx5_0/1: gids/3: not a GID"),
        (sysfs_port("mlx5_0", {3: (EINVAL, "RoCE v2", "eth0")}), "mlx5_0/1: gids/3 unreadable"),
        (sysfs_port("mlx5_0", {3: (FE80, "RoCE v3", "eth0")}), "unknown GID type 'RoCE v3'"),
    ],
)
def test_sysfs_garbage(text, reason):
    with pytest.raises(ParseError, match=reason):
        ports_from_sysfs(parse_sysfs_dump(text))


@pytest.mark.parametrize(
    "text, expected",
    [
        ("::", ("0000:0000:0000:0000:0000:0000:0000:0000", None, False, True)),
        ("FE80::1", ("fe80:0000:0000:0000:0000:0000:0000:0001", None, True, False)),
        ("::ffff:169.254.3.4", ("0000:0000:0000:0000:0000:ffff:a9fe:0304", "169.254.3.4", True, False)),
    ],
)
def test_make_gid_normalizes(text, expected):
    gid = make_gid("mlx5_0", 1, 0, text)
    assert (gid.gid, gid.ipv4, gid.link_local, gid.is_empty) == expected


# -- issue 17 -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("breaker", ["\x0c", "\x1c", "\x85", "\u2028"], ids=ascii)
def test_a_splitlines_break_inside_a_sysfs_value_stays_in_it(breaker):
    # one line with a stray separator is one odd line, not two lines, the second without its path
    values = parse_sysfs_dump(f"/sys/class/infiniband/mlx5_0/ports/1/rate\t400 Gb/sec{breaker}(4X NDR)\n")
    assert values == {"/sys/class/infiniband/mlx5_0/ports/1/rate": f"400 Gb/sec{breaker}(4X NDR)"}
