"""hosts.yml → [Node]: hostlists expanded with ClusterShell, every error placed at file:line."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from ClusterShell.NodeSet import NodeSet, NodeSetException
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from nodecheck.errors import ConfigError
from nodecheck.model import Node
from nodecheck.yamlsrc import Located, load_file, pydantic_error

DEFAULT_SSH_PORT = 22


class NodeSettings(BaseModel):
    """Keys allowed under `defaults:` and under each node entry."""
    model_config = ConfigDict(extra="forbid")
    user: Optional[str] = None
    port: Optional[int] = Field(None, ge=1, le=65535)
    identity_file: Optional[str] = None
    known_hosts: Optional[str] = None
    ssh_config: Optional[str] = None
    labels: list[str] = []


class NodeEntry(NodeSettings):
    address: Optional[str] = None              # a hostlist expanding to as many addresses as names


class InventoryFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    defaults: NodeSettings = NodeSettings()
    nodes: dict[str, Optional[NodeEntry]]


def load_inventory(path: str | Path) -> list[Node]:
    """Every node of the inventory, in hostlist order; raises ConfigError naming file:line."""
    src = load_file(path)
    if not isinstance(src.data, dict):
        raise src.error((), "an inventory is a mapping with a 'nodes:' key",
                        hint="see README, 'hosts.yml reference'")
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
    for pattern, entry in inv.nodes.items():
        for node in _expand(src, pattern, entry or NodeEntry(), inv.defaults):
            if node.name in seen:
                raise src.error(("nodes", pattern), f"duplicate node {node.name!r} "
                                f"(already defined at line {seen[node.name]})",
                                hint="each node may appear in one entry only")
            seen[node.name] = src.line(("nodes", pattern))
            nodes.append(node)
    return nodes


def _expand(src: Located, pattern: str, entry: NodeEntry, defaults: NodeSettings) -> list[Node]:
    names = _hostlist(src, ("nodes", pattern), str(pattern), "node name")
    addresses = names
    if entry.address:
        addresses = _hostlist(src, ("nodes", pattern, "address"), entry.address, "address")
        if len(addresses) != len(names):
            raise src.error(("nodes", pattern, "address"),
                            f"{pattern!r} names {len(names)} nodes but address {entry.address!r} "
                            f"expands to {len(addresses)}",
                            hint="give an address hostlist of the same length, e.g. 10.0.0.[1-8]")
    base = Path(src.file).parent
    return [Node(name=name, address=address,
                 port=entry.port or defaults.port or DEFAULT_SSH_PORT,
                 user=entry.user or defaults.user,
                 identity_file=_path(base, entry.identity_file or defaults.identity_file),
                 known_hosts=_path(base, entry.known_hosts or defaults.known_hosts),
                 ssh_config=_path(base, entry.ssh_config or defaults.ssh_config),
                 labels=frozenset(defaults.labels) | frozenset(entry.labels))
            for name, address in zip(names, addresses)]


def _check_files(src: Located, loc: tuple, settings: NodeSettings) -> None:
    """Files every connection needs must exist; known_hosts may not yet (trust-on-first-use)."""
    base = Path(src.file).parent
    for key in ("identity_file", "ssh_config"):
        value = getattr(settings, key)
        if value and not Path(_path(base, value)).is_file():
            raise src.error(loc + (key,), f"{key} {value!r} does not exist (resolved to {_path(base, value)})",
                            hint="fix the path; relative paths are relative to the inventory file")


def _hostlist(src: Located, loc: tuple, text: str, what: str) -> list[str]:
    if ":" in text and "[" not in text:        # an IPv6 literal is one address, not a hostlist
        return [text]
    try:
        expanded = list(NodeSet(text))
    except (NodeSetException, ValueError) as e:
        raise src.error(loc, f"bad hostlist {text!r} for {what}: {e}",
                        hint="use Slurm hostlist syntax, e.g. gpu[001-008,010]") from None
    if not expanded:
        raise src.error(loc, f"empty hostlist {text!r}", hint="name at least one node")
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
    try:
        wanted = NodeSet(hostlist)
    except (NodeSetException, ValueError) as e:
        raise ConfigError(f"bad hostlist {hostlist!r}: {e}", file=source,
                          hint="use Slurm hostlist syntax, e.g. gpu[001-004]") from None
    known = NodeSet.fromlist(n.name for n in nodes)
    missing = wanted - known
    if missing:
        raise ConfigError(f"{missing} not in the inventory", file=source,
                          hint=f"the inventory has {known}")
    return [n for n in nodes if n.name in wanted]
