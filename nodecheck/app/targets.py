"""Which nodes a command runs on, from its arguments (an inventory and --nodes, or --local), and the
transport that reaches them."""

from __future__ import annotations

from argparse import Namespace

from nodecheck.app import transports
from nodecheck.core.errors import ConfigError
from nodecheck.core.hostlist import fold
from nodecheck.core.model import Node
from nodecheck.transport import Transport


def reach(args: Namespace) -> tuple[list[Node], Transport]:
    """The nodes named by the arguments and the transport that reaches them."""
    from nodecheck.config.inventory import load_inventory, select

    if args.local:
        if args.inventory or args.nodes:
            raise ConfigError("--local runs on this machine only: give no inventory and no --nodes", file="arguments")
        return [transports.this_node()], transports.local_transport()
    if not args.inventory:
        raise ConfigError(
            "an inventory (hosts.yml) is required unless --local",
            file="arguments",
            hint=f"nodecheck {args.command} hosts.yml",
        )
    return select(load_inventory(args.inventory), args.nodes), transports.ssh_transport(args)


def select_targets(args: Namespace, playbook) -> tuple[list[Node], list[Node], Transport]:
    """The nodes to run on, those the playbook leaves out, and the transport that reaches them."""
    from nodecheck.config.playbook import split_selected

    nodes, transport = reach(args)
    nodes, excluded = split_selected(playbook, nodes)
    if args.nodes and excluded:  # asked for by name: leaving them out would hide them
        raise ConfigError(
            f"{fold(n.name for n in excluded)} lack the labels {sorted(playbook.select_labels)} "
            f"that playbook {playbook.name} selects",
            file="--nodes",
            hint="drop them from --nodes, or use a playbook that selects them",
        )
    if not nodes:
        raise ConfigError(
            f"no selected node has the labels {sorted(playbook.select_labels)} that playbook {playbook.name} selects",
            file=playbook.path,
        )
    return nodes, excluded, transport
