"""hosts.yml → [Node]: hostlists expanded with ClusterShell, every error placed at file:line."""

from __future__ import annotations

import ipaddress
from pathlib import Path

from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet, NodeSetException
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from nodecheck.config.yaml_source import Located, load_file, pydantic_error, shown
from nodecheck.core.errors import ConfigError
from nodecheck.core.hostlist import MAX_NODES, nodeset, size_bound
from nodecheck.core.model import Node

DEFAULT_SSH_PORT = 22


class NodeSettings(BaseModel):
    """Keys allowed under `defaults:` and under each node entry."""

    model_config = ConfigDict(extra="forbid")
    user: str | None = None
    port: int | None = Field(None, ge=1, le=65535, strict=True)  # strict: `port: true` is not 1
    identity_file: str | None = None
    known_hosts: str | None = None
    ssh_config: str | None = None
    labels: list[str] = []


class NodeEntry(NodeSettings):
    address: str | None = None  # a hostlist expanding to as many addresses as names


class InventoryFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    defaults: NodeSettings = NodeSettings()
    nodes: dict[str, NodeEntry | None]


def load_inventory(path: str | Path) -> list[Node]:
    """Every node of the inventory, in hostlist order; raises ConfigError naming file:line."""
    src = load_file(path)
    if src.data is None:
        raise src.error(
            (), "empty file: an inventory is a mapping with a 'nodes:' key", hint="see README, 'hosts.yml reference'"
        )
    if not isinstance(src.data, dict):
        raise src.error((), "an inventory is a mapping with a 'nodes:' key", hint="see README, 'hosts.yml reference'")
    try:
        inv = InventoryFile.model_validate(src.data)
    except ValidationError as e:
        raise pydantic_error(src, (), e, model=InventoryFile) from None
    if not inv.nodes:
        raise src.error(("nodes",), "no nodes in the inventory", hint="add at least one node under 'nodes:'")
    _check_files(src, ("defaults",), inv.defaults)
    for pattern, entry in inv.nodes.items():
        _check_files(src, ("nodes", pattern), entry or NodeEntry())
    nodes: list[Node] = []
    seen: dict[str, int | None] = {}
    machines: dict[tuple, Node] = {}  # (address, port) -> the node that dials it
    for pattern, entry in inv.nodes.items():
        line = src.line(("nodes", pattern))
        size = size_bound(str(pattern))
        if size <= MAX_NODES < len(nodes) + size:  # an entry too big alone is told so as it expands
            raise src.error(
                ("nodes", pattern),
                f"the inventory names more than {MAX_NODES:,} nodes",
                hint="check the hostlist ranges for a typo, or split the inventory",
            )
        for node in _expand(src, pattern, entry or NodeEntry(), inv.defaults):
            if node.name in seen:
                raise src.error(
                    ("nodes", pattern),
                    f"duplicate node {shown(node.name)} (already defined at line {seen[node.name]})",
                    hint="each node may appear in one entry only",
                )
            _check_machine(src, pattern, node, machines, seen)
            seen[node.name] = line
            nodes.append(node)
    return nodes


def _check_machine(src: Located, pattern: str, node: Node, machines: dict, lines: dict) -> None:
    """Two names for one (address, port) would check one machine twice and report it twice."""
    key = (_canonical(node.address), node.port)
    other = machines.setdefault(key, node)
    if other is not node:
        raise src.error(
            ("nodes", pattern),
            f"node {shown(node.name)} dials {node.address}:{node.port}, as node {shown(other.name)} "
            f"(line {lines[other.name]}) does",
            hint="one machine, one entry: remove one of them or fix its address or port",
        )


def _canonical(address: str) -> str:
    """fd00::1 and FD00:0::1 are one IP address; host names compare without case."""
    try:
        return str(ipaddress.ip_address(address))
    except ValueError:
        return address.lower()


def _expand(src: Located, pattern: str, entry: NodeEntry, defaults: NodeSettings) -> list[Node]:
    names = _hostlist(src, ("nodes", pattern), str(pattern), "node name")
    addresses = names
    if entry.address is not None:  # `address: ""` is an error, not "dial the name"
        addresses = _hostlist(src, ("nodes", pattern, "address"), entry.address, "address")
        if len(addresses) != len(names):
            raise src.error(
                ("nodes", pattern, "address"),
                f"{shown(pattern)} names {len(names)} nodes but address {shown(entry.address)} "
                f"expands to {len(addresses)}",
                hint="give an address hostlist of the same length, e.g. 10.0.0.[1-8]",
            )
    base = Path(src.file).parent
    return [
        Node(
            name=name,
            address=address,
            port=entry.port or defaults.port or DEFAULT_SSH_PORT,
            user=entry.user or defaults.user,
            identity_file=_path(base, entry.identity_file or defaults.identity_file),
            known_hosts=_path(base, entry.known_hosts or defaults.known_hosts),
            ssh_config=_path(base, entry.ssh_config or defaults.ssh_config),
            labels=frozenset(defaults.labels) | frozenset(entry.labels),
        )
        for name, address in zip(names, addresses)
    ]


def _check_files(src: Located, loc: tuple, settings: NodeSettings) -> None:
    """Files every connection needs must exist; known_hosts may not yet (trust-on-first-use)."""
    base = Path(src.file).parent
    for key in ("identity_file", "ssh_config"):
        value = getattr(settings, key)
        resolved = _path(base, value)  # None when not set
        if resolved is not None and not Path(resolved).is_file():
            raise src.error(
                loc + (key,),
                f"{key} {shown(value)} does not exist (resolved to {_cut(resolved)})",
                hint="fix the path; relative paths are relative to the inventory file",
            )


def _hostlist(src: Located, loc: tuple, text: str, what: str) -> list[str]:
    if ":" in text and "[" not in text:  # an IPv6 literal is one address, not a hostlist
        return [text]
    size = size_bound(text)
    if size > MAX_NODES:
        raise src.error(
            loc,
            f"{what} hostlist {shown(text)} names {size:,} nodes, more than {MAX_NODES:,}",
            hint="check the range for a typo, e.g. gpu[001-128]",
        )
    try:
        expanded = list(nodeset(text))
    except (NodeSetException, ValueError) as e:
        raise src.error(
            loc,
            f"bad hostlist {shown(text)} for {what}: {_cut(str(e))}",
            hint="use Slurm hostlist syntax, e.g. gpu[001-008,010]",
        ) from None
    if not expanded:
        raise src.error(loc, f"empty hostlist {shown(text)}", hint="name at least one node")
    return expanded


def _path(base: Path, value: str | None) -> str | None:
    """~ expands; a relative path is relative to the inventory file, not the caller's cwd."""
    if not value:
        return None
    p = Path(value).expanduser()
    return str(p if p.is_absolute() else base / p)


def select(nodes: list[Node], hostlist: str | None, source: str = "--nodes") -> list[Node]:
    """The inventory nodes named by a hostlist (e.g. --nodes 'gpu[001-004]'), in inventory order."""
    if not hostlist:
        return nodes
    size = size_bound(hostlist)
    if size > MAX_NODES:
        raise ConfigError(
            f"hostlist {shown(hostlist)} names {size:,} nodes, more than {MAX_NODES:,}",
            file=source,
            hint="check the range for a typo, e.g. gpu[001-004]",
        )
    try:
        wanted = nodeset(hostlist)
    except (NodeSetException, ValueError) as e:
        raise ConfigError(
            f"bad hostlist {shown(hostlist)}: {_cut(str(e))}",
            file=source,
            hint="use Slurm hostlist syntax, e.g. gpu[001-004]",
        ) from None
    known = NodeSet.fromlist((n.name for n in nodes), resolver=RESOLVER_NOGROUP)
    missing = wanted - known
    if missing:
        raise ConfigError(
            f"{_cut(str(missing))} not in the inventory", file=source, hint=f"the inventory has {_cut(str(known))}"
        )
    return [n for n in nodes if n.name in wanted]


def _cut(text: str, limit: int = 300) -> str:
    """A folded hostlist or a path for a message, bounded like every quoted input."""
    return text if len(text) <= limit else text[:limit] + "…"
