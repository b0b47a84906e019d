"""RoCE GID tables and RDMA port → netdev maps, from sysfs, show_gids, ibv_devinfo, rdma link, ibdev2netdev.

A RoCE job names its GID by index (NCCL_IB_GID_INDEX=3), but the kernel hands out indices first-free
and can renumber them after a port flap (/work/shared/context/formats.md §1). So every source here
is read into the same `Gid` shape, keyed by (ca, port, index), with the GID normalized to the sysfs
`%pI6` full form so tables from different tools and snapshots compare as strings.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.core.model import quote
from nodecheck.parsers.lines import split_lines
from nodecheck.parsers.sysfs import Unreadable

_ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"

# Type words as each source prints them: sysfs gid_attrs/types (kernel cache.c gid_type_str),
# ibv_devinfo's suffix (libibverbs devinfo.c, "RoCE v1" in newer and "IB/RoCE v1" in older
# releases) and show_gids's VER column (the sysfs word from its "v" on).
_TYPES = {"IB/RoCE v1": "v1", "RoCE v1": "v1", "RoCE v2": "v2", "v1": "v1", "v2": "v2"}
# The kernel's and libibverbs's word for a type they cannot name: a fact ("unknown"), not garbage.
_INVALID_TYPES = ("Invalid GID type", "Invalid gid type")

_SYSFS_PORT_FILE = re.compile(
    r"/sys/class/infiniband/([^/]+)/ports/(\d+)/"
    r"(?:(link_layer|state|phys_state|rate)|gids/(\d+)|gid_attrs/(types|ndevs)/(\d+))",
    re.ASCII,
)
_SYSFS_NUMBERED = re.compile(r"\d+: (\S.*)", re.ASCII)  # state "4: ACTIVE", "5: LinkUp"

_DEVINFO_GID = re.compile(r"GID\[\s*(\d+)\]:\s*(\S+?)(?:,\s*(.+))?", re.ASCII)
_DEVINFO_CA = re.compile(r"hca_id:\s*(\S+)")
_DEVINFO_PORT = re.compile(r"port:\s*(\d+)", re.ASCII)

_DOTTED_QUAD = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}", re.ASCII)
_SHOW_GIDS_COUNT = re.compile(r"n_gids_found=(\d+)", re.ASCII)

# `rdma link show`: "link mlx5_0/1 ..." (current iproute2 rdma/link.c), "link mlx5_0/1: ..." (MLNX
# OFED's iproute2, /opt/mellanox/iproute2), or, in older builds (seen in OFED 23.07 docs),
# "8/1: mlx5_bond_0/1: ..." with the device index first.
_RDMA_LINK = re.compile(r"(?:link (\S+)/(\d+):?|\d+/\d+: (\S+)/(\d+):)(?:\s+(.*))?", re.ASCII)
_RDMA_CAPS = re.compile(r"caps: <[^>]*>")  # `rdma -d` only; not key/value
# iproute2 rdma/link.c link_state_to_str / phys_state_to_str, "UNKNOWN" for out-of-range numbers
_RDMA_STATES = {"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER", "UNKNOWN"}
_RDMA_PHYS_STATES = {
    "NOP",
    "SLEEP",
    "POLLING",
    "DISABLED",
    "ARMED",
    "LINK_UP",
    "LINK_ERROR_RECOVER",
    "PHY_TEST",
    "OPA_OFFLINE",
    "OPA_TEST",
    "UNKNOWN",
}
# the kernel adds these only for IB-protocol ports (nldev fill_port_info), so they say "InfiniBand"
_RDMA_IB_KEYS = {"subnet_prefix", "lid", "sm_lid", "lmc"}

# mlnx-tools ofed_scripts/ibdev2netdev: "mlx5_0 port 1 ==> ens7f0np0 (Up)"; with -v a PCI address,
# device description and port state come first; the old style is "mlx4_0 port 1 <===> eth2".
# The description "(MT4123 - MCX653105A-HDAT) ConnectX-6 VPI" holds no ")" after its "(...)": read
# as such, so no two greedy runs retry each other over a long line (that was quadratic).
_IBDEV2NETDEV = re.compile(
    r"(?:\S+ )?(\S+)(?: \([^)]*\)[^)]*? fw \S+)? port (\d+)(?: \(\S+\s*\))? "
    r"(?:==> (\S+) \((\w*)\)|<===> (\S+))",
    re.ASCII,
)


@dataclass(frozen=True)
class Gid:
    ca: str | None  # None: the output does not say (grep-filtered ibv_devinfo)
    port: int | None
    index: int
    gid: str  # sysfs full form: "0000:0000:0000:0000:0000:ffff:0a16:74dd"
    type: str | None  # "v1", "v2"; None when the source does not say
    netdev: str | None  # "ens7f0np0"; None for IB ports and where not printed
    ipv4: str | None  # "10.22.116.221" when the GID is IPv4-mapped
    link_local: bool  # fe80::/10, or 169.254/16 for an IPv4-mapped GID

    @property
    def is_empty(self) -> bool:
        return self.gid == _ZERO_GID

    @property
    def is_roce_v2_ipv4(self) -> bool:
        """The entry NCCL and perftest want on a RoCE fabric: RoCE v2 over an IPv4 address."""
        return self.type == "v2" and self.ipv4 is not None


@dataclass(frozen=True)
class RdmaPort:
    ca: str
    port: int
    link_layer: str  # sysfs word: "Ethernet", "InfiniBand", "Unknown"
    state: str  # sysfs word after the number: "ACTIVE", "DOWN"
    phys_state: str  # "LinkUp", "Disabled", "Polling"
    rate: str | None  # "400 Gb/sec (4X NDR)" as read; None if unreadable
    gids: tuple[Gid, ...]  # non-empty entries only, by index
    netdevs: tuple[str, ...]  # distinct netdevs of those entries, in index order

    @property
    def where(self) -> str:
        return f"{self.ca}/{self.port}"


@dataclass(frozen=True)
class RdmaLink:
    """One line of `rdma link show`; in rdma's own words ("ACTIVE", "LINK_UP")."""

    ca: str
    port: int
    state: str | None  # None only when the line is cut off before it
    phys_state: str | None
    netdev: str | None
    link_layer: str | None  # hint: "InfiniBand" (lid/subnet_prefix printed),
    # "Ethernet" (a whole line without them), None if cut
    truncated: bool = False  # the output ends inside this line

    @property
    def where(self) -> str:
        return f"{self.ca}/{self.port}"


def make_gid(
    ca: str | None, port: int | None, index: int, text: str, type_: str | None = None, netdev: str | None = None
) -> Gid:
    """A Gid from any printed form: sysfs full form, or ibv_devinfo's compressed `::ffff:10.0.0.1`."""
    try:
        address = ipaddress.IPv6Address(text)
    except ValueError:
        raise ValueError(f"not a GID: {quote(text)}") from None
    mapped = address.ipv4_mapped
    link_local = mapped.is_link_local if mapped is not None else address.is_link_local
    return Gid(
        ca, port, index, address.exploded, type_, netdev, str(mapped) if mapped is not None else None, link_local
    )


def ports_from_sysfs(values: Mapping[str, str | Unreadable]) -> list[RdmaPort]:
    """Every port under /sys/class/infiniband in a sysfs dump, with its non-empty GID entries."""
    files: dict[tuple[str, int], dict[str, str | Unreadable]] = {}
    gid_files: dict[tuple[str, int], dict[int, dict[str, str | Unreadable]]] = {}
    for path, value in values.items():
        match = _SYSFS_PORT_FILE.fullmatch(path)
        if not match:
            continue  # other sysfs facts share the dump (counters, ...)
        ca, port, attribute, gid_index, attr_kind, attr_index = match.groups()
        key = (ca, int(port))
        files.setdefault(key, {})
        slots = gid_files.setdefault(key, {})
        if attribute:
            files[key][attribute] = value
        elif gid_index is not None:
            slots.setdefault(int(gid_index), {})["gid"] = value
        else:
            slots.setdefault(int(attr_index), {})[attr_kind] = value
    if not files:
        raise ParseError("sysfs", "no /sys/class/infiniband/<ca>/ports/<port>/ entries", "\n".join(list(values)[:20]))
    return [_sysfs_port(ca, port, files[(ca, port)], gid_files[(ca, port)]) for ca, port in sorted(files)]


def roce_v2_ipv4(ports: Iterable[RdmaPort]) -> dict[tuple[str, int], list[Gid]]:
    """{(ca, port): its RoCE v2 IPv4 entries}; every port given is a key, [] when it has none."""
    return {(p.ca, p.port): [g for g in p.gids if g.is_roce_v2_ipv4] for p in ports}


def parse_show_gids(text: str) -> list[Gid]:
    """Rows of mlnx-tools `show_gids`, checked against its closing `n_gids_found=N` line."""
    lines = [line for line in split_lines(text) if line.strip()]
    if not lines:
        raise ParseError("show_gids", "empty output", text)
    head = lines[0].split()
    if head[:4] != ["DEV", "PORT", "INDEX", "GID"]:
        raise ParseError(
            "show_gids", f"expected the header 'DEV PORT INDEX GID ...', got {quote(lines[0].strip())}", text
        )
    body = lines[2:] if len(lines) > 1 and lines[1].lstrip().startswith("---") else lines[1:]
    count = _SHOW_GIDS_COUNT.fullmatch(body[-1].strip()) if body else None
    if count is None:
        # the script prints the count last: without it the table may be cut anywhere
        raise ParseError("show_gids", "no closing 'n_gids_found=' line: output cut off", text)
    gids = []
    for line in body[:-1]:
        try:
            gids.append(_show_gids_row(line))
        except ValueError as why:
            raise ParseError("show_gids", f"{why} in row {quote(line.strip())}", text) from None
    if len(gids) != int(count[1]):
        raise ParseError("show_gids", f"{len(gids)} rows but {count[0]}", text)
    _expect_unique_indices("show_gids", gids, text)
    return gids


def parse_ibv_devinfo_gids(text: str) -> list[Gid]:
    """The `GID[ i]:` lines of `ibv_devinfo -v`, whole or grep-filtered.

    ca/port come from the last `hca_id:`/`port:` lines above a GID. A grep `--` separator means
    lines were dropped (maybe another device's header), so it resets both to unknown (None).
    """
    ca: str | None = None
    port: int | None = None
    gids: list[Gid] = []
    for line in split_lines(text):
        stripped = line.strip()
        if stripped.startswith("Failed to") or stripped == "No IB devices found":
            raise ParseError("ibv_devinfo", f"no devices listed: {quote(stripped)}", text)
        if stripped == "--":
            ca = port = None
        elif match := _DEVINFO_CA.fullmatch(stripped):
            ca, port = match[1], None
        elif match := _DEVINFO_PORT.fullmatch(stripped):
            port = int(match[1])
        elif match := _DEVINFO_GID.fullmatch(stripped):
            try:
                gids.append(make_gid(ca, port, int(match[1]), match[2], _gid_type(match[3])))
            except ValueError as why:
                raise ParseError("ibv_devinfo", f"{why} in {quote(stripped)}", text) from None
        # every other line is a field of the device or port (or cut off); GIDs are all we read
    if not gids:
        raise ParseError("ibv_devinfo", "no 'GID[ n]:' lines (is this `ibv_devinfo -v`?)", text)
    _expect_unique_indices("ibv_devinfo", [g for g in gids if g.ca is not None], text)
    return gids


def parse_rdma_link(text: str) -> list[RdmaLink]:
    """Every port line of `rdma link show`; a last line cut short comes back `truncated`. Nothing
    at all is no port: rdma prints nothing (exit 0) where no RDMA device exists."""
    if text == "":
        return []
    lines = [line.strip() for line in split_lines(text) if line.strip()]
    if not lines:
        raise ParseError("rdma link", "only blank lines", text)
    links = []
    for number, line in enumerate(lines, 1):
        match = _RDMA_LINK.fullmatch(line)
        if not match:
            reason = "no RDMA netlink in this kernel" if "NETLINK_RDMA" in line else "unexpected line"
            raise ParseError("rdma link", f"{reason}: {quote(line)}", text)
        last = number == len(lines) and not text.endswith("\n")
        try:
            links.append(_rdma_link(match, last))
        except ValueError as why:
            raise ParseError("rdma link", f"{why} in {quote(line)}", text) from None
    names = [link.where for link in links]
    if len(set(names)) != len(names):
        raise ParseError("rdma link", "a port is listed twice", text)
    return links


def parse_ibdev2netdev(text: str) -> dict[tuple[str, int], tuple[str, str | None]]:
    """{(ca, port): (netdev, "Up" | "Down" | None)}; None where the script prints NA, nothing, or
    (old style, "<===>") no state at all."""
    ports: dict[tuple[str, int], tuple[str, str | None]] = {}
    for line in (line.strip() for line in split_lines(text)):
        if not line:
            continue
        match = _IBDEV2NETDEV.fullmatch(line)
        if not match:
            raise ParseError("ibdev2netdev", f"unexpected line {quote(line)}", text)
        ca, port, netdev, state, old_netdev = match.groups()
        key = (ca, int(port))
        if key in ports:
            raise ParseError("ibdev2netdev", f"{ca} port {port} appears twice", text)
        ports[key] = (netdev or old_netdev, state if state in ("Up", "Down") else None)
    if not ports:
        raise ParseError("ibdev2netdev", "empty output", text)
    return ports


def _sysfs_port(
    ca: str, port: int, files: Mapping[str, str | Unreadable], slots: Mapping[int, Mapping[str, str | Unreadable]]
) -> RdmaPort:
    where = f"{ca}/{port}"
    link_layer = _required(files, "link_layer", where)
    state = _numbered(_required(files, "state", where), where, "state")
    phys_state = _numbered(_required(files, "phys_state", where), where, "phys_state")
    rate = files.get("rate")
    gids = []
    for index in sorted(slots):
        slot = slots[index]
        raw = slot.get("gid")
        if raw is None:
            continue  # a type or ndev whose gid file was not dumped
        if isinstance(raw, Unreadable):
            # the kernel answers an empty or invalid entry with the zero GID; a failed read is
            # something else, and the table around it cannot be trusted to be whole
            raise ParseError("sysfs", f"{where}: gids/{index} unreadable: {raw.reason}", raw.reason)
        try:
            gid = make_gid(ca, port, index, raw, _gid_type(_readable(slot.get("types"))), _readable(slot.get("ndevs")))
        except ValueError as why:
            raise ParseError("sysfs", f"{where}: gids/{index}: {why}", raw) from None
        if not gid.is_empty:
            gids.append(gid)
    netdevs = tuple(dict.fromkeys(g.netdev for g in gids if g.netdev))
    return RdmaPort(ca, port, link_layer, state, phys_state, _readable(rate), tuple(gids), netdevs)


def _required(files: Mapping[str, str | Unreadable], name: str, where: str) -> str:
    value = files.get(name)
    if value is None or isinstance(value, Unreadable):
        why = "missing" if value is None else f"unreadable: {value.reason}"
        raise ParseError("sysfs", f"{where}: {name} {why}", str(value or ""))
    return value


def _numbered(value: str, where: str, name: str) -> str:
    match = _SYSFS_NUMBERED.fullmatch(value)
    if not match:
        raise ParseError("sysfs", f"{where}: {name} {quote(value)} is not '<number>: <name>'", value)
    return match[1]


def _readable(value: str | Unreadable | None) -> str | None:
    """EINVAL on types/ndevs means "no such attribute" (unpopulated entry, IB port): no value."""
    return None if value is None or isinstance(value, Unreadable) or not value else value


def _gid_type(word: str | None) -> str | None:
    if word is None or word.strip() in _INVALID_TYPES:
        return None
    word = word.strip()
    if word not in _TYPES:
        raise ValueError(f"unknown GID type {quote(word)}")
    return _TYPES[word]


def _show_gids_row(line: str) -> Gid:
    # Columns are tab-separated, but VER/DEV (and IPv4 for non-IPv4 GIDs) can be empty and some
    # copies turn tabs into spaces: the optional tail is read by shape, not by position.
    fields = line.split()
    if len(fields) < 4 or not fields[1].isdigit() or not fields[2].isdigit():
        raise ValueError("not 'DEV PORT INDEX GID ...'")
    ca, port, index, gid_text, rest = fields[0], int(fields[1]), int(fields[2]), fields[3], fields[4:]
    ipv4 = rest.pop(0) if rest and _DOTTED_QUAD.fullmatch(rest[0]) else None
    type_ = _gid_type(rest.pop(0)) if rest and rest[0] in ("v1", "v2") else None
    if len(rest) > 1:
        raise ValueError(f"unexpected columns {quote(' '.join(rest))}")
    gid = make_gid(ca, port, index, gid_text, type_, rest[0] if rest else None)
    if ipv4 is not None and gid.ipv4 is not None and ipv4 != gid.ipv4:
        raise ValueError(f"IPv4 column {ipv4} is not the GID's {gid.ipv4}")
    return gid


def _rdma_link(match: re.Match, last: bool) -> RdmaLink:
    ca, port = (match[1], match[2]) if match[1] else (match[3], match[4])
    tokens = _RDMA_CAPS.sub("", match[5] or "").split()
    fields = dict(zip(tokens[::2], tokens[1::2]))
    state = _rdma_word(fields, "state", _RDMA_STATES, last)
    phys_state = _rdma_word(fields, "physical_state", _RDMA_PHYS_STATES, last)
    # rdma prints every port's state and physical_state; a key left without its value, or a
    # missing state, is a line cut short, which only the output's last line can be
    cut = len(tokens) % 2 == 1 or state is None or phys_state is None
    if cut and not last:
        raise ValueError("state or physical_state missing")
    if _RDMA_IB_KEYS & fields.keys():
        link_layer: str | None = "InfiniBand"
    else:
        link_layer = None if cut else "Ethernet"
    return RdmaLink(ca, int(port), state, phys_state, fields.get("netdev"), link_layer, truncated=cut)


def _rdma_word(fields: Mapping[str, str], key: str, known: set[str], last: bool) -> str | None:
    value = fields.get(key)
    if value is None or value in known:
        return value
    if last:
        return None  # "LINK_U": the word itself was cut
    raise ValueError(f"unknown {key} {quote(value)}")


def _expect_unique_indices(tool: str, gids: list[Gid], text: str) -> None:
    seen: set[tuple] = set()
    for gid in gids:
        key = (gid.ca, gid.port, gid.index)
        if key in seen:
            raise ParseError(tool, f"{gid.ca}/{gid.port} index {gid.index} appears twice", text)
        seen.add(key)
