"""The nccl_env probe's output: what a node offers a job's NCCL (interfaces, addresses, RDMA ports,
the conf files NCCL reads), the NCCL_*/TORCH_*/MASTER_* variables its session sees, ulimit -l,
python3 and which flight-recorder dump directories are writable.

Sections and facts of nodecheck's `@@nodecheck` framing (parsers/sections.py); the script that prints
them is in checks/nccl_env.py.
"""

from __future__ import annotations

import re
import reprlib
from collections.abc import Mapping
from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.core.model import excerpt
from nodecheck.parsers.escapes import unescape
from nodecheck.parsers.lines import split_lines
from nodecheck.parsers.sections import Section, Sections, split_sections
from nodecheck.parsers.sysfs import parse_sysfs_dump
from nodecheck.parsers.versions import parse_nccl_conf

PROBE_NAME = "nccl_env"
ETC_CONF = "/etc/nccl.conf"


@dataclass(frozen=True)
class Address:
    family: str  # "inet" or "inet6"
    cidr: str  # "10.0.0.1/24"


@dataclass(frozen=True)
class RdmaPortState:
    ca: str
    port: int
    state: str  # "4: ACTIVE"
    link_layer: str

    @property
    def active(self) -> bool:
        return self.state.endswith("ACTIVE")

    @property
    def where(self) -> str:
        return f"{self.ca}/{self.port}"

    @property
    def state_name(self) -> str:
        return self.state.partition(": ")[2] or self.state  # "4: ACTIVE" -> "ACTIVE"


@dataclass(frozen=True)
class NcclConf:
    """A file NCCL reads its variables from (NCCL_CONF_FILE or ~/.nccl.conf, then /etc/nccl.conf)."""

    path: str
    settings: Mapping[str, str]
    error: str = ""  # why its lines could not be read ("" = read)


@dataclass(frozen=True)
class NodeFacts:
    node_env: Mapping[str, str]
    links: Mapping[str, str]  # interface -> operstate ("up", "down", "unknown", ...)
    addresses: Mapping[str, tuple[Address, ...]] | None  # None: `ip -o addr show` failed
    addresses_error: str  # why addresses is None
    hcas: tuple[str, ...]
    rdma_ports: Mapping[tuple[str, int], RdmaPortState]
    memlock: str  # `ulimit -l`: "unlimited" or KiB
    python3: str  # its path, "" when there is none
    writable: Mapping[str, str]  # "default" / "job:NAME" / "node:NAME" -> "ok" or the reason
    raw_links: str = ""
    conf: tuple[NcclConf, ...] = ()  # the files NCCL reads, in its order (the first value wins)

    @property
    def interfaces(self) -> list[str]:
        return sorted(set(self.links) | set(self.addresses or {}))


_IP_LINE = re.compile(r"^\d+:\s+(\S+)\s+(\S+)\s+(\S+)")
_SYSFS_PORT = re.compile(r"^/sys/class/infiniband/([^/]+)/ports/(\d+)/(state|link_layer)$")


def parse_probe(text: str) -> NodeFacts:
    sections = split_sections(text, PROBE_NAME)
    required = {
        name: sections.require(name, PROBE_NAME) for name in ("node_env", "links", "addrs", "hcas", "ib", "writable")
    }
    for fact in ("memlock", "python3"):
        if fact not in sections.facts:
            raise ParseError(PROBE_NAME, f"probe output has no {fact!r} line", excerpt(text))
    conf = read_confs(sections, PROBE_NAME, text)
    addrs = required["addrs"]
    addresses, why = (
        (_addresses(addrs.text), "")
        if addrs.rc == 0
        else (
            None,
            f"`ip -o addr show` exited {addrs.rc}"
            + (f": {first_line(addrs.text)}" if addrs.text.strip() else "")
            + (" (iproute2 not installed)" if addrs.rc == 127 else ""),
        )
    )
    return NodeFacts(
        read_node_env(sections, PROBE_NAME, text),
        _links(required["links"].text),
        addresses,
        why,
        tuple(ln.strip() for ln in split_lines(required["hcas"].text) if ln.strip()),
        _rdma_ports(required["ib"].text),
        sections.facts["memlock"].strip(),
        sections.facts["python3"].strip(),
        key_values(required["writable"].text, "\t", PROBE_NAME),
        required["links"].text,
        conf,
    )


# --- what the nccl_env and job probes share (probes/shell.py prints it) ------------------------------


def read_confs(sections: Sections, tool: str, text: str) -> tuple[NcclConf, ...]:
    """The files NCCL reads (nccl_confs: conf_path, user.conf, nccl.conf), in NCCL's order."""
    if "conf_path" not in sections.facts:
        raise ParseError(tool, "probe output has no 'conf_path' line", excerpt(text))
    path = unescaped(sections.facts["conf_path"].strip(), tool, text)
    return tuple(
        _conf(where, sections.require(name, tool)) for name, where in (("user.conf", path), ("nccl.conf", ETC_CONF))
    )


def read_node_env(sections: Sections, tool: str, text: str) -> dict[str, str]:
    """The node_env section (env_matching): NAME=VALUE lines, values escaped one per line."""
    section = sections.require("node_env", tool)
    if section.rc != 0:  # no awk: an empty environment would read as "nothing set"
        raise ParseError(
            tool,
            f"reading the node's environment failed (exit {section.rc}): {first_line(section.text) or 'no output'}",
            excerpt(text),
        )
    return {k: unescaped(v, tool, text) for k, v in key_values(section.text, "=", tool).items()}


def unescaped(value: str, tool: str, text: str) -> str:
    """What probes/shell.py's `escaped` printed -> the value; ParseError for anything else."""
    try:
        return unescape(value)
    except ValueError as e:
        raise ParseError(tool, str(e), excerpt(text)) from None


def key_values(text: str, sep: str, tool: str) -> dict[str, str]:
    found = {}
    for line in split_lines(text):
        key, has, value = line.partition(sep)
        if not has or not key:
            raise ParseError(tool, f"expected KEY{sep!r}VALUE, got {reprlib.repr(line)}", text)
        found[key] = value
    return found


def _conf(path: str, section: Section) -> NcclConf:
    if section.rc not in (0, None):  # the probe would not read it (a job's file: shell.job_file)
        return NcclConf(path, {}, first_line(section.text) or f"exit {section.rc}")
    try:
        return NcclConf(path, parse_nccl_conf(section.text))
    except ParseError as e:  # judged as an error of its own; the rest is still judged
        return NcclConf(path, {}, e.reason)


def _links(text: str) -> dict[str, str]:
    links = {}
    for line in split_lines(text):
        name, _, state = line.strip().partition(" ")
        if not name or not state:
            raise ParseError(PROBE_NAME, f"expected 'INTERFACE OPERSTATE', got {reprlib.repr(line)}", text)
        links[name] = state
    return links


def _addresses(text: str) -> dict[str, tuple[Address, ...]]:
    """`ip -o addr show`: one address a line. Addresses the kernel does not use (a tentative or
    duplicate IPv6 address) and ::1 (NCCL skips IPv6 loopback) are left out."""
    found: dict[str, list[Address]] = {}
    for line in split_lines(text):
        if not line.strip():
            continue
        m = _IP_LINE.match(line)
        if m is None:
            raise ParseError("ip", "not `ip -o addr show` output", line)
        name, family, cidr = m.groups()
        found.setdefault(name, [])
        words = line.split()
        if family not in ("inet", "inet6") or "tentative" in words or "dadfailed" in words or cidr.startswith("::1/"):
            continue
        found[name].append(Address(family, cidr))
    return {name: tuple(addrs) for name, addrs in found.items()}


def _rdma_ports(text: str) -> dict[tuple[str, int], RdmaPortState]:
    files: dict[tuple[str, int], dict[str, str]] = {}
    for path, value in parse_sysfs_dump(text, "sysfs").items():
        m = _SYSFS_PORT.match(path)
        if m is None:
            raise ParseError("sysfs", f"unexpected path {path}", text)
        files.setdefault((m.group(1), int(m.group(2))), {})[m.group(3)] = (
            value if isinstance(value, str) else f"unreadable ({value.reason})"
        )
    return {
        key: RdmaPortState(key[0], key[1], f.get("state", "state unknown"), f.get("link_layer", ""))
        for key, f in sorted(files.items())
    }


def first_line(text: str) -> str:
    """The first line that is not blank, stripped ("" when there is none)."""
    return next((ln.strip() for ln in split_lines(text) if ln.strip()), "")
