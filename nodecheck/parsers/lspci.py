"""`lspci -vvv` (with or without -nn, -D, -xxx): each device's address, class, vendor, bridge bus
range and Access Control Services state.

A device block starts with an unindented header line (`[DDDD:]BB:DD.F CLASS[ [cccc]]: NAME`) and goes
on with tab-indented lines; `-xxx` adds unindented hex dump lines (`00: 86 80 ...`). A bridge's
`Bus: primary=.., secondary=.., subordinate=..` gives the buses below it; `ACSCtl:` the ACS control
bits. lspci run without root cannot read the capability list and prints `Capabilities: <access
denied>` instead: that is recorded, never read as "no ACS".
"""

from __future__ import annotations

import re
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
_FLAG = re.compile(r"(\w+)([+-])")
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

    def below(self, bridge: PciDevice) -> bool:
        """On a bus that `bridge` forwards to (its secondary..subordinate range, same domain)."""
        return (
            bridge.is_bridge
            and bridge.address != self.address
            and bridge.domain == self.domain
            and bridge.secondary <= self.bus <= bridge.subordinate  # type: ignore[operator]
        )


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
    return tuple(_device(header, lines) for header, lines in blocks)


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
    denied = False
    for line in lines[1:]:
        if (bus := _BUS.match(line)) is not None:
            secondary, subordinate = int(bus["s"], 16), int(bus["u"], 16)
        elif (found := _ACS.match(line)) is not None:
            flags = tuple((flag, sign == "+") for flag, sign in _FLAG.findall(found["flags"]))
            if not flags:
                raise ParseError(TOOL, f"{address}: unreadable ACS{found['kind']} line", line)
            acs[found["kind"]] = flags
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
        capabilities_denied=denied,
        raw="\n".join(lines),
    )


def ancestors(device: PciDevice, devices: tuple[PciDevice, ...]) -> list[PciDevice]:
    """The bridges `device` sits below, the root port first (the widest bus range first)."""
    above = [b for b in devices if device.below(b)]
    return sorted(above, key=lambda b: (b.subordinate - b.secondary, b.address), reverse=True)  # type: ignore[operator]
