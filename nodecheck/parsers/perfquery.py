"""Parse InfiniBand port counters (perfquery, sysfs `counters/`) into typed facts.

Every reader names counters by their perfquery/libibmad names (SymbolErrorCounter, PortXmitData,
...) and records the bit width each value was read at, so a delta judge can tell a counter that
sits at its all-ones maximum (saturated, IBA counters clamp there) from one that is merely high.
Widths and names: /work/shared/context/formats.md section 2, from libibmad fields.c and the
kernel's drivers/infiniband/core/sysfs.c.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.core.model import quote
from nodecheck.parsers.lines import split_lines
from nodecheck.parsers.sysfs import Unreadable

# Bit widths in the basic PortCounters attribute (libibmad fields.c "Port counters"), in the
# order perfquery prints them. QP1Dropped is newer libibmad only.
BASIC_WIDTHS: dict[str, int] = {
    "SymbolErrorCounter": 16,
    "LinkErrorRecoveryCounter": 8,
    "LinkDownedCounter": 8,
    "PortRcvErrors": 16,
    "PortRcvRemotePhysicalErrors": 16,
    "PortRcvSwitchRelayErrors": 16,
    "PortXmitDiscards": 16,
    "PortXmitConstraintErrors": 8,
    "PortRcvConstraintErrors": 8,
    "LocalLinkIntegrityErrors": 4,
    "ExcessiveBufferOverrunErrors": 4,
    "QP1Dropped": 16,
    "VL15Dropped": 16,
    "PortXmitData": 32,
    "PortRcvData": 32,
    "PortXmitPkts": 32,
    "PortRcvPkts": 32,
    "PortXmitWait": 32,
}
DATA_COUNTERS = ("PortXmitData", "PortRcvData", "PortXmitPkts", "PortRcvPkts")
CAST_COUNTERS = ("PortUnicastXmitPkts", "PortUnicastRcvPkts", "PortMulticastXmitPkts", "PortMulticastRcvPkts")
# PortCountersExtended: data and cast counters, and (AdditionalPortCountersExtended, newer
# perfquery) 64-bit copies of the error counters printed under the SAME names as the basic ones
# (libibmad fields.c "More PortCountersExtended fields" @0538e6de).
EXTENDED_ERRORS = tuple(n for n in BASIC_WIDTHS if n not in DATA_COUNTERS)
EXTENDED_NAMES = frozenset(DATA_COUNTERS + CAST_COUNTERS + EXTENDED_ERRORS)
_BASIC_EXPECTED = tuple(n for n in BASIC_WIDTHS if n != "QP1Dropped")  # older builds lack it
# Hex selector fields perfquery prints among the counters; they say which counters a Set would
# touch and count nothing.
_NOT_COUNTERS = frozenset({"PortSelect", "CounterSelect", "CounterSelect2"})
_EXT_WIDTH_SUPPORTED = 0x200  # ClassPortInfo CapMask bit 9: unicast/multicast counters
_ADDL_PORT_CTRS_EXT = 0x2  # CapMask2 bit 1 (as perfquery prints it): 64-bit error counters

# sysfs file name → perfquery name (formats.md section 2 table; VL15_dropped has a capital VL)
SYSFS_NAMES: dict[str, str] = {
    "symbol_error": "SymbolErrorCounter",
    "link_error_recovery": "LinkErrorRecoveryCounter",
    "link_downed": "LinkDownedCounter",
    "port_rcv_errors": "PortRcvErrors",
    "port_rcv_remote_physical_errors": "PortRcvRemotePhysicalErrors",
    "port_rcv_switch_relay_errors": "PortRcvSwitchRelayErrors",
    "port_xmit_discards": "PortXmitDiscards",
    "port_xmit_constraint_errors": "PortXmitConstraintErrors",
    "port_rcv_constraint_errors": "PortRcvConstraintErrors",
    "local_link_integrity_errors": "LocalLinkIntegrityErrors",
    "excessive_buffer_overrun_errors": "ExcessiveBufferOverrunErrors",
    "VL15_dropped": "VL15Dropped",
    "port_xmit_data": "PortXmitData",
    "port_rcv_data": "PortRcvData",
    "port_xmit_packets": "PortXmitPkts",
    "port_rcv_packets": "PortRcvPkts",
    "port_xmit_wait": "PortXmitWait",
    "unicast_xmit_packets": "PortUnicastXmitPkts",
    "unicast_rcv_packets": "PortUnicastRcvPkts",
    "multicast_xmit_packets": "PortMulticastXmitPkts",
    "multicast_rcv_packets": "PortMulticastRcvPkts",
}
_U32_MAX = 2**32 - 1
_NO_PMA = "N/A (no PMA)"  # what older kernels print for a counter they cannot query

# re.ASCII where numbers are read: a str pattern's \d also matches other scripts' digits.
_HEADER = re.compile(
    r"# (Port counters|Port extended counters): (.+?) port (\d+)"
    r"(?: \(CapMask: (0x[0-9A-Fa-f]+)(?: CapMask2: (0x[0-9A-Fa-f]+))?\))?",
    re.ASCII,
)
_OTHER_HEADER = re.compile(r"# (\S.*?) counters: .*")  # PortRcvErrorDetails, PortXmitDataSL, ...
_FIELD = re.compile(r"([A-Za-z0-9]+):\.*(.*)")  # libibmad: Name, ':', dots to column 33
_WATCH = re.compile(r"Every [\d.]+s: .*", re.ASCII)  # watch(1) header line
_LID = re.compile(r"Lid (\d+)", re.ASCII)
_SYSFS_COUNTER = re.compile(r"/sys/class/infiniband/([^/\s]+)/ports/(\d+)/counters/([^/\s]+)", re.ASCII)


@dataclass(frozen=True)
class PortCounters:
    """One port's counters as read once, by their perfquery names, with the width of each."""

    ca: str | None  # "mlx5_0"; perfquery does not print it (the caller knows)
    port: int | None  # 255 = perfquery -a (all ports summed)
    lid: str | None  # "1719" from "Lid 1719"; None for a DR path or sysfs
    extended: bool  # PortCountersExtended (-x) / sysfs 64-bit data group
    cap_mask: str | None  # "0x5300" as printed; None: older perfquery or sysfs
    counters: dict[str, int]
    widths: dict[str, int]  # bits each counter was read at: saturated = 2**w - 1
    raw: str
    cap_mask2: str | None = None  # "0x0000002"; -x only
    missing: tuple[str, ...] = ()  # expected but unread: unreadable file, output cut
    source: str = "perfquery"  # "perfquery" | "sysfs"

    @property
    def where(self) -> str:
        """The subject a verdict names: "mlx5_0/1", or "Lid 1719 port 1" when the CA is unknown."""
        if self.ca is not None:
            return f"{self.ca}/{self.port}"
        return f"Lid {self.lid} port {self.port}" if self.lid is not None else f"port {self.port}"

    def saturated(self, name: str) -> bool:
        """Whether the counter sits at its all-ones maximum (it stops counting there)."""
        return name in self.counters and self.counters[name] == 2 ** self.widths[name] - 1


# ---------------------------------------------------------------------------------------------
# perfquery


def parse_perfquery(text: str, ca: str | None = None) -> list[PortCounters]:
    """Every PortCounters / PortCountersExtended block of perfquery output (basic, -x, -l, -a,
    under watch). `ca` stamps the CA the caller queried (perfquery prints only the LID)."""
    _raise_on_failure(text)
    lines = [line.rstrip() for line in split_lines(text)]
    cut = bool(text) and not text.endswith("\n")  # perfquery ends with a newline: else cut mid-value
    blocks: list[tuple[re.Match, list[str]]] = []
    for line in lines:
        if not line.strip() or _WATCH.fullmatch(line) or line.startswith("ibwarn:"):
            continue
        header = _HEADER.fullmatch(line)
        if header:
            blocks.append((header, [line]))
        elif other := _OTHER_HEADER.fullmatch(line):
            raise ParseError(
                "perfquery",
                f"'{other[1]} counters' block is not PortCounters; run perfquery with or without -x only",
                text,
            )
        elif not blocks:
            raise ParseError("perfquery", f"expected '# Port counters: ...', got {quote(line)}", text)
        else:
            blocks[-1][1].append(line)
    if not blocks:
        raise ParseError("perfquery", "no '# Port counters' block in output", text)
    result = [_block(h, body, ca, cut=cut and i == len(blocks) - 1) for i, (h, body) in enumerate(blocks)]
    _expect_unique(result, text)
    return result


def _raise_on_failure(text: str) -> None:
    """perfquery prints `ibwarn:` lines and ends with `perfquery: iberror: failed: ...` (exit 255).
    An iberror means the run stopped: blocks before it do not make the output whole."""
    lines = [line.strip() for line in split_lines(text) if line.strip()]
    failed = [line for line in lines if "iberror:" in line or line.startswith("ibpanic:")]
    if not failed and not all(line.startswith("ibwarn:") for line in lines):
        return
    if not lines:
        raise ParseError("perfquery", "empty output", text)
    joined = "\n".join(lines)
    if "ib_umad module loaded" in joined or "can't open UMAD port" in joined:
        reason = "perfquery could not open the port (no ib_umad? load the ib_umad kernel module)"
    elif "client_register for mgmt" in joined:
        # umad refuses the SMI class on a port with no InfiniBand link layer (RoCE/Ethernet)
        reason = (
            "perfquery could not open the port: MAD client registration failed "
            "(no InfiniBand port on this CA, e.g. RoCE/Ethernet only, or no ib_umad?)"
        )
    else:
        last = (failed or lines)[-1]
        reason = f"perfquery failed: {last.split('iberror:', 1)[-1].strip()}"
    raise ParseError("perfquery", reason, text)


def _block(header: re.Match, lines: Sequence[str], ca: str | None, *, cut: bool) -> PortCounters:
    raw = "\n".join(lines)
    body = list(lines[1:])
    if cut and body:
        body.pop()  # its value may be cut short ("4" of "441")
    fields: dict[str, str] = {}
    for line in body:
        match = _FIELD.fullmatch(line)
        if not match or not match[2]:
            raise ParseError("perfquery", f"unexpected line {quote(line)}", raw)
        if match[1] in fields:
            raise ParseError("perfquery", f"{match[1]} appears twice in one block", raw)
        fields[match[1]] = match[2]
    counters = {name: _count(name, value, raw) for name, value in fields.items() if name not in _NOT_COUNTERS}
    extended = header[1] == "Port extended counters" or next(iter(counters), "") == "PortXmitData"
    widths = _widths(counters, extended, raw)
    cap_mask, cap_mask2 = header[4], header[5]
    expected = _expected(extended, cap_mask, cap_mask2)
    lid = _LID.fullmatch(header[2])
    return PortCounters(
        ca=ca,
        port=int(header[3]),
        lid=lid[1] if lid else None,
        extended=extended,
        cap_mask=cap_mask,
        cap_mask2=cap_mask2,
        counters=counters,
        widths=widths,
        raw=raw,
        missing=tuple(n for n in expected if n not in counters),
    )


def _count(name: str, value: str, raw: str) -> int:
    if not value.isdigit() or not value.isascii():
        raise ParseError("perfquery", f"{name} value {quote(value)} is not a number", raw)
    return int(value)


def _widths(counters: Mapping[str, int], extended: bool, raw: str) -> dict[str, int]:
    # an unknown name has no known width, and a guessed width would misjudge saturation
    known = EXTENDED_NAMES if extended else BASIC_WIDTHS
    for name in counters:
        if name not in known:
            kind = "PortCountersExtended" if extended else "PortCounters"
            raise ParseError("perfquery", f"unknown {kind} field {name}", raw)
    return {name: 64 if extended else BASIC_WIDTHS[name] for name in counters}


def _expected(extended: bool, cap_mask: str | None, cap_mask2: str | None) -> tuple[str, ...]:
    """The counters this kind of block always prints, given the capability masks it shows."""
    if not extended:
        return _BASIC_EXPECTED
    names: tuple[str, ...] = DATA_COUNTERS
    if cap_mask is not None and int(cap_mask, 16) & _EXT_WIDTH_SUPPORTED:
        names += CAST_COUNTERS
    if cap_mask2 is not None and int(cap_mask2, 16) & _ADDL_PORT_CTRS_EXT:
        names += EXTENDED_ERRORS
    return names


def _expect_unique(blocks: Sequence[PortCounters], text: str) -> None:
    # basic and -x for the same port may be printed together; the same block twice may not
    seen: set[tuple] = set()
    for block in blocks:
        key = (block.lid, block.port, block.extended)
        if key in seen:
            kind = "extended " if block.extended else ""
            raise ParseError("perfquery", f"{kind}counters for {block.where} appear twice", text)
        seen.add(key)


# ---------------------------------------------------------------------------------------------
# sysfs


def counters_from_sysfs(values: Mapping[str, str | Unreadable]) -> list[PortCounters]:
    """One PortCounters per CA/port found under /sys/class/infiniband/<ca>/ports/<p>/counters/ in a
    sysfs dump (parse_sysfs_dump); other paths are ignored. [] when the dump has no counters."""
    ports: dict[tuple[str, int], dict[str, str | Unreadable]] = {}
    raws: dict[tuple[str, int], list[str]] = {}
    for path, value in values.items():
        match = _SYSFS_COUNTER.fullmatch(path)
        if match:
            key = (match[1], int(match[2]))
            ports.setdefault(key, {})[match[3]] = value
            shown = f"!{value.reason}" if isinstance(value, Unreadable) else value
            raws.setdefault(key, []).append(f"{path}\t{shown}")
    return [_sysfs_port(ca, port, files, "\n".join(raws[(ca, port)])) for (ca, port), files in ports.items()]


def _sysfs_port(ca: str | None, port: int | None, files: Mapping[str, str | Unreadable], raw: str) -> PortCounters:
    counters: dict[str, int] = {}
    missing: list[str] = []
    for name, value in files.items():
        canonical = SYSFS_NAMES.get(name)
        if canonical is None:  # a file this table does not know: no width to judge by
            continue
        if isinstance(value, Unreadable) or value.strip() == _NO_PMA:
            missing.append(canonical)
        elif value.strip().isdigit() and value.isascii():
            counters[canonical] = int(value)
        else:
            raise ParseError("sysfs counters", f"{name}: {quote(value)} is not a counter value", raw)
    # the kernel's pma_group_ext adds unicast/multicast files and 64-bit data counters; the
    # noietf group has 64-bit data only, which shows once a value passes 2^32-1
    ext = any(SYSFS_NAMES.get(n) in CAST_COUNTERS for n in files) or any(
        counters.get(n, 0) > _U32_MAX for n in DATA_COUNTERS
    )
    widths = {
        name: 64 if name in CAST_COUNTERS or (ext and name in DATA_COUNTERS) else BASIC_WIDTHS[name]
        for name in counters
    }
    return PortCounters(
        ca=ca,
        port=port,
        lid=None,
        extended=ext,
        cap_mask=None,
        counters=counters,
        widths=widths,
        raw=raw,
        missing=tuple(missing),
        source="sysfs",
    )
