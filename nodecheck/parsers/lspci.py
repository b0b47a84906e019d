"""`lspci -vvv` (with or without -nn, -D, -xxx): each device's address, class, vendor, bridge bus
range and Access Control Services state.

A device block starts with an unindented header line (`[DDDD:]BB:DD.F CLASS[ [cccc]]: NAME`) and goes
on with tab-indented lines; `-xxx` adds unindented hex dump lines (`00: 86 80 ...`). A bridge's
`Bus: primary=.., secondary=.., subordinate=..` gives the buses below it; `ACSCtl:` the ACS control
bits. lspci run without root cannot read the capability list and prints `Capabilities: <access
denied>` instead: that is recorded, never read as "no ACS".

PciTree reads the path above a device bus by bus (the bridge whose secondary bus is the device's, then
the one above that bridge, ...), and refuses a listing whose path cannot be trusted: a PCI bridge
without its `Bus:` line, two bridges forwarding to one bus, a bus inside a bridge's range that no
bridge forwards to, or a device with no bridge above on a bus where no host bridge or root port sits
(a listing cut or missing a line: "no bridge above" would otherwise pass as "nothing to judge").
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.parsers.lines import split_lines

TOOL = "lspci"
_HEADER = re.compile(
    r"^(?:(?P<domain>[0-9a-fA-F]{4,8}):)?(?P<bus>[0-9a-fA-F]{2}):(?P<dev>[0-9a-fA-F]{2})\.(?P<fn>[0-7]) "
    r"(?P<cls>[^:\[]+?)(?: \[(?P<code>[0-9a-fA-F]{4})\])?: (?P<name>.*)$"
)
_IDS = re.compile(r"\[(?P<vendor>[0-9a-fA-F]{4}):(?P<device>[0-9a-fA-F]{4})\]")
_BUS = re.compile(
    r"^\s+Bus: primary=(?P<p>[0-9a-fA-F]{2}), secondary=(?P<s>[0-9a-fA-F]{2}), subordinate=(?P<u>[0-9a-fA-F]{2})"
)
_ACS = re.compile(r"^\s+ACS(?P<kind>Cap|Ctl):\s*(?P<flags>.*)$")
# the capability's own line: `lspci -v` prints only this one, -vv and more add ACSCap and ACSCtl
_ACS_CAPABILITY = re.compile(r"^\s+Capabilities: \[[^\]]*\] Access Control Services\s*$")
_HEX_DUMP = re.compile(r"^[0-9a-f]{2,3}: (?:[0-9a-f]{2} ?){1,16}$")
# lines lspci and libpci print between devices (a missing pci.ids or kmod), not device data
_NOISE = re.compile(r"^(?:lspci|pcilib): ")

# class names lspci prints without -nn (pci.ids), by the code -nn prints
CLASS_NAMES = {
    "VGA compatible controller": "0300",
    "3D controller": "0302",
    "Display controller": "0380",
    "Ethernet controller": "0200",
    "Network controller": "0280",
    "Infiniband controller": "0207",
    "PCI bridge": "0604",
    "Host bridge": "0600",
}
VENDOR_NAMES = {"NVIDIA Corporation": "10de", "Mellanox Technologies": "15b3"}
HOST_BRIDGE, PCI_BRIDGE = "0600", "0604"


@dataclass(frozen=True)
class PciDevice:
    address: str  # "0000:04:00.0": with the domain, whether or not lspci printed it (-D)
    class_name: str  # "3D controller"
    class_code: str | None  # "0302", from -nn or the class name; None for a class this parser does not name
    vendor: str | None  # "10de", from -nn or the vendor name; None when neither says
    name: str  # the rest of the header: "NVIDIA Corporation GP100GL [Tesla P100 PCIe 12GB] (rev a1)"
    secondary: int | None = None  # a bridge's bus range: the buses behind it
    subordinate: int | None = None
    acs_cap: tuple[tuple[str, bool], ...] | None = None  # None: no ACS capability listed
    acs_ctl: tuple[tuple[str, bool], ...] | None = None
    acs_listed: bool = False  # the ACS capability is listed (its name line, or ACSCap/ACSCtl), read or not
    capabilities_denied: bool = False  # "Capabilities: <access denied>": lspci ran without root
    raw: str = ""

    @property
    def domain(self) -> str:
        return self.address[: self.address.index(":")]

    @property
    def bus(self) -> int:
        return int(self.address.split(":")[-2], 16)

    @property
    def is_bridge(self) -> bool:
        return self.secondary is not None and self.subordinate is not None


def parse_lspci(text: str) -> tuple[PciDevice, ...]:
    """Every device block of an `lspci -v[vv]` output, in order. ParseError when there is none, or a
    line is neither a device header, an indented detail, a hex dump line nor libpci's own notice."""
    blocks: list[tuple[re.Match, list[str]]] = []
    for number, line in enumerate(split_lines(text), 1):
        if not line.strip() or _NOISE.match(line):
            continue
        if line[0] in " \t":
            if not blocks:
                raise ParseError(TOOL, f"line {number}: device details before any device header", line)
            blocks[-1][1].append(line)
            continue
        if (header := _HEADER.match(line)) is not None:
            blocks.append((header, [line]))
            continue
        if blocks and _HEX_DUMP.match(line):
            blocks[-1][1].append(line)
            continue
        raise ParseError(TOOL, f"line {number} is not an lspci device line", line)
    if not blocks:
        raise ParseError(TOOL, "no PCI device in the output", text)
    devices = tuple(_device(header, lines) for header, lines in blocks)
    _refuse_duplicates(devices)
    return devices


def _refuse_duplicates(devices: Iterable[PciDevice]) -> None:
    """lspci lists each address once (it prints the domain when there is more than one): a second block
    for an address is a line repeated or two listings joined, never a device."""
    seen: set[str] = set()
    for device in devices:
        if device.address in seen:
            raise ParseError(TOOL, f"device {device.address} is listed twice", device.raw)
        seen.add(device.address)


def _device(header: re.Match, lines: list[str]) -> PciDevice:
    domain = (header["domain"] or "0000").lower().rjust(4, "0")
    address = f"{domain}:{header['bus']}:{header['dev']}.{header['fn']}".lower()
    class_name = header["cls"].strip()
    name = header["name"]
    ids = _IDS.findall(name)
    vendor = ids[-1][0].lower() if ids else next((v for n, v in VENDOR_NAMES.items() if name.startswith(n)), None)
    code = (header["code"] or CLASS_NAMES.get(class_name) or "").lower() or None
    secondary = subordinate = None
    acs: dict[str, tuple[tuple[str, bool], ...]] = {}
    acs_listed = denied = False
    for line in lines[1:]:
        if (bus := _BUS.match(line)) is not None:
            secondary, subordinate = int(bus["s"], 16), int(bus["u"], 16)
        elif (found := _ACS.match(line)) is not None:
            flags = _flags(found["flags"])
            if flags is None:
                raise ParseError(TOOL, f"{address}: unreadable ACS{found['kind']} line", line)
            acs[found["kind"]] = flags
            acs_listed = True
        elif _ACS_CAPABILITY.match(line):
            acs_listed = True
        elif line.strip() == "Capabilities: <access denied>":
            denied = True
    return PciDevice(
        address=address,
        class_name=class_name,
        class_code=code,
        vendor=vendor,
        name=name,
        secondary=secondary,
        subordinate=subordinate,
        acs_cap=acs.get("Cap"),
        acs_ctl=acs.get("Ctl"),
        acs_listed=acs_listed,
        capabilities_denied=denied,
        raw="\n".join(lines),
    )


def _flags(text: str) -> tuple[tuple[str, bool], ...] | None:
    """'SrcValid+ TransBlk- ...' -> (("SrcValid", True), ("TransBlk", False), ...); None unless every
    word is a name with its sign (split, not a regex findall: that rescans a long word from each letter)."""
    flags = []
    for word in text.split():
        name, sign = word[:-1], word[-1:]
        if sign not in ("+", "-") or not (name.isascii() and name.isalpha()):
            return None
        flags.append((name, sign == "+"))
    return tuple(flags) or None


class PciTree:
    """The bridges of one listing by the bus each forwards to (its secondary bus): the path above a device
    is read bus by bus, in as many steps as it is deep, whatever the number of devices."""

    def __init__(self, devices: Iterable[PciDevice]):
        self._forwarding: dict[tuple[str, int], PciDevice] = {}  # (domain, secondary bus) -> its bridge
        self._root_complex: set[tuple[str, int]] = set()  # buses holding a host bridge or a PCI bridge
        spans: dict[str, list[tuple[int, int, str]]] = {}  # domain -> (secondary, subordinate, bridge)
        for device in devices:
            if device.class_code in (HOST_BRIDGE, PCI_BRIDGE):
                self._root_complex.add((device.domain, device.bus))
            if device.class_code == PCI_BRIDGE and not device.is_bridge:
                raise ParseError(
                    TOOL,
                    f"PCI bridge {device.address} has no 'Bus:' line: the buses below it are unknown "
                    "(not an `lspci -v` listing, or a line was lost)",
                    device.raw,
                )
            if (buses := _forwards_to(device)) is None:
                continue
            first, last = buses
            if (other := self._forwarding.get((device.domain, first))) is not None:
                raise ParseError(
                    TOOL, f"{other.address} and {device.address} both forward to bus {first:02x}", device.raw
                )
            self._forwarding[(device.domain, first)] = device
            spans.setdefault(device.domain, []).append((first, last, device.address))
        self._reach = {domain: _reach(ranges) for domain, ranges in spans.items()}

    def above(self, device: PciDevice, name: str = "") -> list[PciDevice]:
        """The bridges `device` sits below, the root port first; ParseError where the listing does not
        show how the device reaches its root bus. `name` ("GPU 0000:04:00.0") is for the message."""
        name = name or f"{device.class_name} {device.address}"
        path = []
        bus = device.bus
        while (bridge := self._forwarding.get((device.domain, bus))) is not None:
            if not bridge.secondary <= device.bus <= bridge.subordinate:  # type: ignore[operator]
                raise ParseError(
                    TOOL,
                    f"{name}: bus {device.bus:02x} is outside the range "
                    f"{bridge.secondary:02x}-{bridge.subordinate:02x} of {bridge.address}, which it sits below",
                    bridge.raw,
                )
            path.append(bridge)
            bus = bridge.bus  # below the bus it forwards to (_forwards_to): the walk ends
        if (covering := self._covering(device.domain, bus)) is not None:
            raise ParseError(
                TOOL,
                f"{name}: bus {bus:02x} is behind {covering} (in its bus range) but no bridge in the listing "
                "forwards to it: a bridge is missing",
                device.raw,
            )
        if not path and (device.domain, bus) not in self._root_complex:
            raise ParseError(
                TOOL,
                f"{name} has no bridge above it and bus {bus:02x} holds no host bridge or PCI bridge: "
                "the bridge above it is missing from the listing (cut short, or its 'Bus:' line lost)",
                device.raw,
            )
        return path[::-1]

    def _covering(self, domain: str, bus: int) -> str | None:
        """A bridge whose bus range holds `bus`, if any."""
        if domain not in self._reach:
            return None
        firsts, reach = self._reach[domain]
        at = bisect_right(firsts, bus) - 1
        return reach[at][1] if at >= 0 and reach[at][0] >= bus else None


def _forwards_to(device: PciDevice) -> tuple[int, int] | None:
    """The buses a configured bridge forwards to (secondary, subordinate), all after its own bus; None for
    a device that is not a bridge, or an unconfigured one (an empty hot-plug slot: 'secondary=00,
    subordinate=00'), which forwards to none."""
    first, last = device.secondary, device.subordinate
    if first is None or last is None or not device.bus < first <= last:
        return None
    return first, last


def _reach(ranges: list[tuple[int, int, str]]) -> tuple[list[int], list[tuple[int, str]]]:
    """Bus ranges sorted by first bus, each with the furthest last bus (and its bridge) of it and the
    ranges before it: the bridge covering a bus is found by bisection."""
    ranges.sort()
    firsts, reach = [], []
    furthest = (-1, "")
    for first, last, address in ranges:
        if last > furthest[0]:
            furthest = (last, address)
        firsts.append(first)
        reach.append(furthest)
    return firsts, reach
