"""Parse `ibstat` output into per-port facts, recording any part cut off."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.core.model import quote
from nodecheck.parsers.lines import split_lines

# re.ASCII where numbers are read: a str pattern's \d also matches other scripts' digits.
_CA_HEADER = re.compile(r"(CA|Switch|Router) '([^']+)'")  # node type word, then the name
_PORT_HEADER = re.compile(r"Port (\d+):", re.ASCII)
_FIELD = re.compile(r"([A-Za-z][A-Za-z _]*?):\s*(.*)")
_IBSTAT_RATE = re.compile(r"(\d+(?:\.\d+)?)(?: \(\w+\))?", re.ASCII)  # "400", "2.5" (1x SDR), "40 (FDR10)"

# libibumad prints "IB" when sysfs has no link_layer file (kernels before RoCE); the rest is sysfs's word.
_LINK_LAYERS = {"InfiniBand": "InfiniBand", "Ethernet": "Ethernet", "IB": "InfiniBand"}
# ibstat prints these four lines for every port, Link layer last: a block without one of them was
# cut off, and judging it would mean guessing.
_IBSTAT_REQUIRED = ("State", "Physical state", "Rate", "Link layer")


@dataclass(frozen=True)
class IbCa:
    name: str  # "mlx5_0"
    node_type: str | None  # "CA", "Switch", "Router"
    ca_type: str | None  # "MT4129"
    firmware: str | None  # "28.39.1002"
    hardware_version: str | None
    node_guid: str | None  # "0x946dae0300cde72c"
    system_guid: str | None
    declared_ports: int | None  # "Number of ports"


@dataclass(frozen=True)
class IbPort:
    ca: str
    ca_type: str | None
    firmware: str | None
    number: int
    state: str  # ibstat's words: Down, Initializing, Armed, Active, ???
    physical_state: str  # LinkUp, Polling, Disabled, ...
    rate_gbps: float  # always read: a port without a rate is incomplete
    link_layer: str  # "InfiniBand" or "Ethernet"
    base_lid: int | None
    sm_lid: int | None
    lmc: int | None
    capability_mask: str | None  # "0xa751e848"
    port_guid: str | None
    raw: str  # the port's lines under its CA header

    @property
    def where(self) -> str:
        """The subject a verdict names: "mlx5_3/1"."""
        return f"{self.ca}/{self.number}"


@dataclass(frozen=True)
class Gap:
    """A part of the output that is cut off or unreadable: its facts are unknown, not defaulted."""

    subject: str  # "mlx5_0", "mlx5_0/1", or "" when no entity is known
    reason: str  # "output ends before any port"
    raw: str  # the lines that were there

    def __str__(self) -> str:
        return f"{self.subject}: {self.reason}" if self.subject else self.reason


@dataclass(frozen=True)
class IbstatFacts:
    cas: tuple[IbCa, ...]  # in output order (ibstat sorts lexically: mlx5_10 < mlx5_2)
    ports: tuple[IbPort, ...]  # complete ports only
    incomplete: tuple[Gap, ...] = ()

    @property
    def ca_names(self) -> tuple[str, ...]:
        return tuple(ca.name for ca in self.cas)

    @property
    def no_devices(self) -> bool:
        """The tool listed no device at all (it printed nothing): a fact about the node, which the
        judge weighs with the exit code, not unreadable output."""
        return not self.cas and not self.incomplete


class _Unreadable(Exception):
    """A field value that cannot be read; the port or CA holding it becomes a Gap."""


@dataclass(frozen=True)
class _Section:
    header: re.Match  # matched on the stripped header line
    lines: tuple[str, ...]  # as printed, indentation kept for excerpts

    @property
    def raw(self) -> str:
        return "\n".join(self.lines)


def parse_ibstat(text: str) -> IbstatFacts:
    """Every CA and port in `ibstat` output; cut-off parts go to `incomplete`; garbage raises ParseError.
    Nothing at all is no device: ibstat prints nothing (and exits 0) where no RDMA device exists."""
    if text == "":
        return IbstatFacts((), (), ())
    lines, cut = _lines(text, "ibstat", (_CA_HEADER, _PORT_HEADER, _FIELD))
    preamble, sections = _split(lines, _CA_HEADER)
    _expect_headers("ibstat", text, preamble, sections, "CA 'name'", cut)
    _expect_unique("ibstat", text, [f"CA '{s.header[2]}'" for s in sections])
    cas, ports, gaps = [], [], []
    for i, section in enumerate(sections):
        ca, ca_ports, ca_gaps = _ibstat_ca(section, last=i == len(sections) - 1)
        cas.append(ca)
        ports += ca_ports
        gaps += ca_gaps
    return IbstatFacts(tuple(cas), tuple(ports), tuple(gaps + _cut_gap(cut)))


def _lines(text: str, tool: str, shapes: Sequence[re.Pattern]) -> tuple[list[str], str | None]:
    """Non-blank lines, less a final line of no known shape (output cut mid-line)."""
    lines = [line.rstrip() for line in split_lines(text) if line.strip()]
    if not lines:  # blank lines are not what the tool prints for "none"
        raise ParseError(tool, "only blank lines", text)
    if not any(shape.fullmatch(lines[-1].strip()) for shape in shapes):
        return lines[:-1], lines[-1]
    return lines, None


def _cut_gap(cut: str | None) -> list[Gap]:
    return [Gap("", f"output ends mid-line: {quote(cut.strip())}", cut)] if cut is not None else []


def _split(lines: Sequence[str], header: re.Pattern) -> tuple[list[str], list[_Section]]:
    """The lines before the first header, and one section per header with the lines under it."""
    preamble: list[str] = []
    groups: list[tuple[re.Match, list[str]]] = []
    for line in lines:
        match = header.fullmatch(line.strip())
        if match:
            groups.append((match, [line]))
        else:
            (groups[-1][1] if groups else preamble).append(line)
    return preamble, [_Section(match, tuple(group)) for match, group in groups]


def _expect_headers(
    tool: str, text: str, preamble: Sequence[str], sections: Sequence[_Section], shape: str, cut: str | None
) -> None:
    # a line ahead of the first header is not ours: "Fatal error:  No devices", a banner, garbage
    if preamble or not sections:
        first = (list(preamble) + [cut or ""])[0].strip()
        raise ParseError(tool, f"expected a header like {shape}, got {quote(first)}", text)


def _expect_unique(tool: str, text: str, names: Sequence[str]) -> None:
    # one run never prints a device twice; two outputs run together would be judged twice
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ParseError(tool, f"{name} appears twice", text)
        seen.add(name)


def _fields(lines: Sequence[str], tool: str, raw: str) -> dict[str, str]:
    fields = {}
    for line in lines:
        match = _FIELD.fullmatch(line.strip())
        if not match:  # mid-output: not a cut but something else
            raise ParseError(tool, f"unexpected line {quote(line.strip())}", raw)
        fields[match[1]] = match[2].strip()
    return fields


def _ibstat_ca(section: _Section, *, last: bool) -> tuple[IbCa, list[IbPort], list[Gap]]:
    name = section.header[2]
    head, port_sections = _split(section.lines[1:], _PORT_HEADER)
    ca, gaps = _ibstat_ca_facts(section, _fields(head, "ibstat", section.raw))
    ports = []
    for port_section in port_sections:
        raw = f"{section.lines[0]}\n{port_section.raw}"  # the CA line names whose port it is
        try:
            ports.append(_ibstat_port(ca, port_section, raw))
        except _Unreadable as why:
            gaps.append(Gap(f"{name}/{port_section.header[1]}", str(why), raw))
    missing = _missing_ports(len(port_sections), ca.declared_ports, last)
    return ca, ports, gaps + ([Gap(name, missing, section.raw)] if missing else [])


def _ibstat_ca_facts(section: _Section, fields: Mapping[str, str]) -> tuple[IbCa, list[Gap]]:
    node_type, name = section.header[1], section.header[2]
    try:
        declared = _optional(fields, "Number of ports", int)
    except _Unreadable as why:
        declared, gaps = None, [Gap(name, str(why), section.raw)]
    else:
        gaps = []
    ca = IbCa(
        name,
        node_type,
        fields.get(f"{node_type} type"),
        fields.get("Firmware version"),
        fields.get("Hardware version"),
        fields.get("Node GUID"),
        fields.get("System image GUID"),
        declared,
    )
    return ca, gaps


def _missing_ports(shown: int, declared: int | None, last: bool) -> str:
    """Why a CA's port list is short, or "" when it is not."""
    if shown == 0:
        return "output ends before any port" if last else "no port block in output"
    if declared is not None and shown < declared:
        ending = "output ends after" if last else "output shows"
        return f"{ending} {shown} of {declared} ports"
    return ""


def _ibstat_port(ca: IbCa, section: _Section, raw: str) -> IbPort:
    fields = _fields(section.lines[1:], "ibstat", raw)
    _require(fields, _IBSTAT_REQUIRED)
    return IbPort(
        ca=ca.name,
        ca_type=ca.ca_type,
        firmware=ca.firmware,
        number=int(section.header[1]),
        state=fields["State"],
        physical_state=fields["Physical state"],
        rate_gbps=_rate(fields["Rate"], _IBSTAT_RATE),
        link_layer=_link_layer(fields["Link layer"]),
        base_lid=_optional(fields, "Base lid", int),
        sm_lid=_optional(fields, "SM lid", int),
        lmc=_optional(fields, "LMC", int),
        capability_mask=fields.get("Capability mask"),
        port_guid=fields.get("Port GUID"),
        raw=raw,
    )


def _require(fields: Mapping[str, str], keys: Sequence[str]) -> None:
    missing = [key for key in keys if key not in fields]
    if missing:
        raise _Unreadable(f"port block has no {', '.join(missing)} line")


def _optional(fields: Mapping[str, str], key: str, convert: Callable[[str], int]) -> int | None:
    """None when the line is absent; an unreadable value is not absent."""
    if key not in fields:
        return None
    try:
        return convert(fields[key])
    except ValueError:
        raise _Unreadable(f"{key} {quote(fields[key])} is not a number") from None


def _rate(value: str, shape: re.Pattern) -> float:
    match = shape.fullmatch(value)
    if not match:
        raise _Unreadable(f"Rate {quote(value)} is not a rate")
    return float(match[1])


def _link_layer(value: str) -> str:
    if value not in _LINK_LAYERS:  # also catches a value cut short: "Infini"
        raise _Unreadable(f"Link layer {quote(value)} is not InfiniBand or Ethernet")
    return _LINK_LAYERS[value]
