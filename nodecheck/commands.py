"""What each subcommand does, between argument parsing (cli.py) and the runner."""
from __future__ import annotations

import socket
import sys
from argparse import Namespace

from nodecheck.errors import ConfigError
from nodecheck.model import Node


def run_command(args: Namespace) -> int:
    from nodecheck import runner
    from nodecheck.inventory import load_inventory, select
    from nodecheck.playbook import load_playbook
    from nodecheck.report import EXIT_UNKNOWN
    from nodecheck.report import json as report_json
    from nodecheck.report import table
    from nodecheck.report.store import store

    playbook = load_playbook(args.playbook)
    if args.local:
        if args.inventory or args.nodes:
            raise ConfigError("--local runs on this machine only: give no inventory and no --nodes",
                              file="arguments")
        nodes, transport = [_this_node()], _local_transport()
    else:
        if not args.inventory:
            raise ConfigError("an inventory (hosts.yml) is required unless --local", file="arguments",
                              hint="nodecheck run hosts.yml")
        nodes = select(load_inventory(args.inventory), args.nodes)
        transport = _ssh_transport(args)
    nodes = [n for n in nodes if playbook.selects(n)]
    if not nodes:
        raise ConfigError(f"no selected node has the labels {sorted(playbook.select_labels)} "
                          f"that playbook {playbook.name} selects", file=playbook.path)
    with _progress(len(nodes), enabled=args.format == "table" and sys.stderr.isatty()) as tick:
        report = runner.run(playbook, nodes, transport, fanout=args.fanout, deadline_s=args.deadline,
                            inventory=args.inventory, on_node_done=tick)
    summary, as_json = table.render(report), report_json.dumps(report)
    try:
        where = str(store(report, summary, args.output_dir, as_json))
    except OSError as e:
        print(f"nodecheck: error: could not write the report under {args.output_dir}: {e}", file=sys.stderr)
        where = None
    if args.format == "json":
        sys.stdout.write(as_json)
        if where:
            print(f"report: {where}", file=sys.stderr)
    else:
        sys.stdout.write(table.render(report, where))
    # a report that could not be kept is not a clean bill of health
    return report.exit_code if where or report.exit_code else EXIT_UNKNOWN


def _this_node() -> Node:
    name = socket.gethostname().split(".")[0]
    return Node(name=name, address="localhost")


def _local_transport():
    from nodecheck.transport.local import LocalTransport
    return LocalTransport()


def _ssh_transport(args: Namespace):
    from nodecheck.transport.ssh import SshTransport
    return SshTransport(accept_new_host_keys=args.accept_new_host_keys,
                        connect_timeout_s=args.connect_timeout)


class _progress:
    """A tqdm bar on a terminal only; a thread-safe tick callback either way."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.total, self.enabled, self.bar = total, enabled, None

    def __enter__(self):
        if self.enabled:
            from tqdm import tqdm
            self.bar = tqdm(total=self.total, unit="node", file=sys.stderr, leave=False)
            return lambda _node: self.bar.update(1)
        return None

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.close()


def list_checks() -> str:
    from nodecheck.registry import all_checks
    lines = []
    for name, spec in sorted(all_checks().items()):
        lines.append(f"{name}  ({spec.scope})  {spec.description}")
        for field, info in spec.params.model_fields.items():
            default = "required" if info.is_required() else f"default {info.default!r}"
            lines.append(f"    {field:<16} {_type_name(info.annotation):<28} {default:<24} "
                         f"{info.description or ''}".rstrip())
        lines.append(f"    {'timeout_s':<16} {'number > 0':<28} {'probe default':<24} "
                     f"per-probe timeout for this check")
        lines.append(f"    {'enabled':<16} {'bool':<28} {'default True':<24} false turns the check off")
    return "\n".join(lines) + "\n"


def _type_name(annotation) -> str:
    text = str(annotation).replace("typing.", "")
    return text.replace("<class '", "").replace("'>", "")
