"""RoCE GID tables and RDMA port → netdev maps, from a sysfs dump of /sys/class/infiniband.

A RoCE job names its GID by index (NCCL_IB_GID_INDEX=3), but the kernel hands out indices first-free
and can renumber them after a port flap (/work/shared/context/formats.md §1). So each entry is
read into a `Gid`, keyed by (ca, port, index), with the GID normalized to the sysfs `%pI6` full form
so tables from different snapshots compare as strings.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.core.model import quote
from nodecheck.parsers.sysfs import Unreadable

_ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"

# Type words: sysfs gid_attrs/types prints the kernel's (cache.c gid_type_str: "IB/RoCE v1", "RoCE
# v2"); the short forms other tools print (libibverbs "RoCE v1", show_gids "v1"/"v2") read alike.
_TYPES = {"IB/RoCE v1": "v1", "RoCE v1": "v1", "RoCE v2": "v2", "v1": "v1", "v2": "v2"}
# The kernel's and libibverbs's word for a type they cannot name: a fact ("unknown"), not garbage.
_INVALID_TYPES = ("Invalid GID type", "Invalid gid type")

_SYSFS_PORT_FILE = re.compile(
    r"/sys/class/infiniband/([^/]+)/ports/(\d+)/"
    r"(?:(link_layer|state|phys_state|rate)|gids/(\d+)|gid_attrs/(types|ndevs)/(\d+))",
    re.ASCII,
)
_SYSFS_NUMBERED = re.compile(r"\d+: (\S.*)", re.ASCII)  # state "4: ACTIVE", "5: LinkUp"


@dataclass(frozen=True)
class Gid:
    ca: str | None
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


def make_gid(
    ca: str | None, port: int | None, index: int, text: str, type_: str | None = None, netdev: str | None = None
) -> Gid:
    """A Gid from any printed form: sysfs full form, or a compressed `::ffff:10.0.0.1`."""
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
