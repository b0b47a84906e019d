"""What each subcommand does, between argument parsing (cli.py) and the runner."""
from __future__ import annotations

import signal
import socket
import sys
import threading
from argparse import Namespace
from contextlib import contextmanager

from nodecheck.errors import ConfigError
from nodecheck.model import Node


def run_command(args: Namespace) -> int:
    """`nodecheck run`: validate everything, run, then report; returns the exit code."""
    from nodecheck import runner
    from nodecheck.playbook import load_playbook

    playbook = load_playbook(args.playbook)
    nodes, excluded, transport = _targets(args, playbook)
    if not args.local:
        _ensure_open_files(min(args.fanout, len(nodes)))
    with _progress(len(nodes), enabled=args.format == "table" and sys.stderr.isatty()) as tick, \
            _stop_on_signals() as stop:
        report = runner.run(playbook, nodes, transport, fanout=args.fanout, deadline_s=args.deadline,
                            inventory=args.inventory, on_node_done=tick, stop=stop,
                            excluded=[n.name for n in excluded])
    for warning in getattr(transport, "warnings", lambda: [])():
        print(f"nodecheck: warning: {warning}", file=sys.stderr)
    return _publish(report, args)


def _targets(args: Namespace, playbook) -> tuple[list[Node], list[Node], object]:
    """The nodes to run on, those the playbook leaves out, and the transport that reaches them."""
    from nodecheck.inventory import load_inventory, select
    from nodecheck.playbook import split_selected
    from nodecheck.report.table import fold

    if args.local:
        if args.inventory or args.nodes:
            raise ConfigError("--local runs on this machine only: give no inventory and no --nodes",
                              file="arguments")
        nodes, transport = [_this_node()], _local_transport()
    else:
        if not args.inventory:
            raise ConfigError("an inventory (hosts.yml) is required unless --local", file="arguments",
                              hint="nodecheck run hosts.yml")
        nodes, transport = select(load_inventory(args.inventory), args.nodes), _ssh_transport(args)
    nodes, excluded = split_selected(playbook, nodes)
    if args.nodes and excluded:                # asked for by name: leaving them out would hide them
        raise ConfigError(f"{fold(n.name for n in excluded)} lack the labels {sorted(playbook.select_labels)} "
                          f"that playbook {playbook.name} selects", file="--nodes",
                          hint="drop them from --nodes, or use a playbook that selects them")
    if not nodes:
        raise ConfigError(f"no selected node has the labels {sorted(playbook.select_labels)} "
                          f"that playbook {playbook.name} selects", file=playbook.path)
    return nodes, excluded, transport


def _publish(report, args: Namespace) -> int:
    """Store the report, print it in the asked format; the exit code follows the report."""
    from nodecheck.report import EXIT_UNKNOWN
    from nodecheck.report import json as report_json
    from nodecheck.report import table
    from nodecheck.report.store import store

    summary, as_json = table.render(report), report_json.dumps(report)
    try:
        where = str(store(report, summary, args.output_dir, as_json))
    except OSError as e:
        print(f"nodecheck: error: could not write the report under {args.output_dir}: {e}", file=sys.stderr)
        where = None
    # a report that could not be kept is not a clean bill of health
    code = report.exit_code if where or report.exit_code else EXIT_UNKNOWN
    if args.format == "json":
        sys.stdout.write(as_json)
        if where:
            print(f"report: {where}", file=sys.stderr)
    else:
        sys.stdout.write(summary + (f"report: {where}\n" if where else
                                    f"report: NOT WRITTEN (see the error above); exit {code}\n"))
    return code


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


@contextmanager
def _stop_on_signals():
    """SIGTERM (Slurm, systemd, timeout(1)) or a first Ctrl-C ends the run early and the partial
    report is still written; a second signal acts as usual."""
    stop = threading.Event()
    signals = (signal.SIGTERM, signal.SIGINT)

    def handler(signum, frame):
        stop.set()
        for s in signals:
            signal.signal(s, previous[s])
    previous = {s: signal.signal(s, handler) for s in signals}
    try:
        yield stop
    finally:
        for s in signals:
            signal.signal(s, previous[s])


# Per node in flight: the TCP socket, paramiko's wake-up pipe pair for the channel, and headroom.
FDS_PER_CONNECTION = 4
FDS_RESERVED = 64                              # stdio, report files, libraries


def _ensure_open_files(fanout: int) -> None:
    """Running out of file descriptors would turn healthy nodes UNREACHABLE; raise the soft
    limit if we may, else refuse the fan-out before anything runs."""
    import resource
    need = fanout * FDS_PER_CONNECTION + FDS_RESERVED
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= need:
        return
    if hard != resource.RLIM_INFINITY and hard < need:
        raise ConfigError(f"--fanout {fanout} needs about {need} open files, but the hard limit is {hard}",
                          file="arguments", hint=f"lower --fanout to {max(1, (hard - FDS_RESERVED) // FDS_PER_CONNECTION)} "
                                                 "or raise `ulimit -Hn`")
    resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))


def list_checks() -> str:
    from nodecheck.registry import all_checks
    lines = []
    for name, spec in sorted(all_checks().items()):
        lines.append(f"{name}  ({spec.scope})  {spec.description}")
        for field, info in spec.params.model_fields.items():
            default = "required" if info.is_required() else f"default {info.default!r}"
            lines.append(f"    {field:<16} {_type_name(info.annotation):<28} {default:<24} "
                         f"{info.description or ''}".rstrip())
        lines.append(f"    {'timeout_s':<16} {'number':<28} {'probe default':<24} "
                     f"per-probe timeout for this check, seconds (0 < timeout_s <= 86400)")
        lines.append(f"    {'enabled':<16} {'true|false':<28} {'default True':<24} false turns the check off")
    return "\n".join(lines) + "\n"


def _type_name(annotation) -> str:
    """A parameter's type as an operator reads it: "InfiniBand|Ethernet|any", "number", "list of text"."""
    import typing
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return "|".join(str(a) for a in args)
    if origin is typing.Union:                 # Optional[X]: the default says it may be unset
        return " or ".join(_type_name(a) for a in args if a is not type(None))
    if origin is list:
        return f"list of {_type_name(args[0])}" if args else "list"
    names = {float: "number", int: "integer", str: "text", bool: "true|false"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))
