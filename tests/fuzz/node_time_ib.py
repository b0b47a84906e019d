"""Fuzz targets of the node-level parsers (issue 32, section 3): time, ib."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nodecheck.checks.ib import IBSTAT, IbPorts, fleet_port_count, ports
from nodecheck.checks.time import TimeSync, sync
from nodecheck.parsers import chrony, ntpq, timedatectl
from nodecheck.probes.time_sync import TIME_SYNC
from tests.fuzz.targets import Target
from tests.helpers import captures, data


def _show_seeds() -> tuple[str, ...]:
    # `timedatectl show` (systemd >= 239): no public recording; what tests/parsers/test_timedatectl.py reads
    return ("Timezone=UTC\nLocalRTC=no\nCanNTP=yes\nNTP=yes\nNTPSynchronized=yes\n",)


def _ipv6_peer_seeds() -> tuple[str, ...]:
    # a long remote printed alone, its columns on the next line: what tests/parsers/test_ntpq.py reads
    return (
        "     remote           refid      st t when poll reach   delay   offset  jitter\n"
        "==============================================================================\n"
        "*2001:db8::123:4567\n"
        "                 .GPS.            1 u   12   64  377    0.254   -0.031   0.017\n",
    )


TARGETS: tuple[Target, ...] = (
    Target("chrony.parse_chronyc_tracking", chrony.parse_chronyc_tracking, ("chronyc-tracking/*",), "time"),
    Target("ntpq.parse_ntpq_peers", ntpq.parse_ntpq_peers, ("ntpq/*",), "time", _ipv6_peer_seeds),
    Target("timedatectl.parse_timedatectl", timedatectl.parse_timedatectl, ("timedatectl/*",), "time", _show_seeds),
)


def _section(name: str, body: str, rc: int = 0) -> str:
    return f"@@nodecheck begin {name}\n{body}@@nodecheck end {name} rc={rc}\n"


def _time_sync(text: str):
    return list(sync(captures(TIME_SYNC, text), TimeSync()))


# the time_sync probe's output on a node whose chronyd keeps the clock 2 ms off its source
_CHRONY_SYNCED = _section("chronyc", data("chronyc-tracking/nelisys-ubuntu2004-normal-2ms-fast.txt")) + _section(
    "daemons", "612\tsame\t0\tchronyd\n"
)

_IBSTAT_NDR = data("ibstat/gpud-h100-ndr-ib-mixed-cx6dx-ethernet-down-disabled.txt")
_FLEET = IbPorts(link_layer="InfiniBand", min_rate_gbps=400, expected_ports="fleet")


def _ib_ports_fleet(text: str):
    """ib.ports under expected_ports: fleet, `text` on node3 beside two nodes with the real output,
    as the runner's relate step judges it: node3's verdicts after fleet_port_count."""
    alone = {
        node: list(ports(captures(IBSTAT, out, node=node), _FLEET))
        for node, out in (("node1", _IBSTAT_NDR), ("node2", _IBSTAT_NDR), ("node3", text))
    }
    return fleet_port_count(alone, _FLEET)["node3"]


# check -> (judge of one output as the runner routes it, a real output it passes)
HOLLOW: dict[str, tuple[Callable[[str], Any], str]] = {
    "time.sync": (_time_sync, _CHRONY_SYNCED),
    "ib.ports(fleet)": (_ib_ports_fleet, _IBSTAT_NDR),
}
