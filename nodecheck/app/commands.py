"""What each subcommand does, between argument parsing (cli.py) and the runner."""
from __future__ import annotations

import os
import signal
import socket
import sys
import threading
from argparse import Namespace
from contextlib import contextmanager

from nodecheck.core.errors import ConfigError
from nodecheck.core.model import Node


def run_command(args: Namespace) -> int:
    """`nodecheck run`: validate everything, run, then report; returns the exit code."""
    from nodecheck.run import runner as runner
    from nodecheck.config.playbook import load_playbook

    playbook = load_playbook(args.playbook, tuple(args.pins), getattr(args, "job_env", None))
    if getattr(args, "job_env", None):
        playbook = with_job_user(playbook, job_user_of(args.job_env))
    nodes, excluded, transport = _targets(args, playbook)
    if not args.local:
        _ensure_open_files(min(args.fanout, len(nodes)))
    with _progress(len(nodes), enabled=args.format == "table" and sys.stderr.isatty()) as tick, \
            _stop_on_signals() as stop:
        report = runner.run(playbook, nodes, transport, fanout=args.fanout, deadline_s=args.deadline,
                            inventory=args.inventory, on_node_done=tick, stop=stop,
                            excluded=[n.name for n in excluded], allow_disruptive=args.allow_disruptive)
    for warning in getattr(transport, "warnings", lambda: [])():
        print(f"nodecheck: warning: {warning}", file=sys.stderr)
    return _publish(report, args)


# --- whose files a job names are read as -----------------------------------------------------------
# A path in a job's environment (NCCL_CONF_FILE) is read on the node by root, so only as the job's user
# could read it (probes/shell.py job_file): their own file, else root's readable by everyone. The job's
# user is whoever hands nodecheck the environment: the owner of the file it came from (a user running
# nodecheck on their own job owns theirs). Root's copy says nothing about whose job it is (an operator
# copied a user's file): no user.


def job_user_of(path: str) -> str:
    """The uid owning `path` (a --job-env file, a JOB.yml), as text; "" for root or a file that
    cannot be read."""
    try:
        uid = os.stat(path).st_uid
    except OSError:
        return ""
    return "" if uid == 0 else str(uid)


def job_user_for(author_file: str | None, slurm_user: str) -> str:
    """The job's user for job-check and watch: the owner of the file that names the job's files
    (JOB.yml, the watch config) when it is not root (a user's file names only that user's own files,
    whoever's job it checks), else the Slurm job's user (squeue's UserName, which the job cannot
    forge; "" when none); "" for root or none, or a name that is not a user name."""
    from nodecheck.probes.shell import JOB_USER, JOB_USER_MAX
    author = job_user_of(author_file) if author_file else ""
    if author:
        return author
    user = slurm_user or ""
    return user if user not in ("root", "0") and JOB_USER.fullmatch(user) and len(user) <= JOB_USER_MAX else ""


def prolog_job_user() -> str:
    """The job's uid in the node Prolog: slurmd sets SLURM_JOB_UID there (not the job); "" for root's."""
    uid = os.environ.get("SLURM_JOB_UID", "")
    return uid if uid.isascii() and uid.isdigit() and int(uid) != 0 else ""


def with_job_user(playbook, user: str):
    """The playbook with `user` as the job's user of every check that reads the job's files
    (params `job_user`), where the playbook names none itself; the probes are made again, keeping
    their timeouts (a check's `timeout_s`)."""
    import dataclasses
    from nodecheck.probes.shell import JOB_USER, JOB_USER_MAX
    if not user:
        return playbook
    if not JOB_USER.fullmatch(user) or len(user) > JOB_USER_MAX:
        raise ValueError(f"not a uid or a user name: {user[:60]!r}")

    def again(made, old):
        return tuple(dataclasses.replace(p, timeout_s=o.timeout_s) for p, o in zip(made, old, strict=True))
    checks = []
    for c in playbook.checks:
        if "job_user" in type(c.params).model_fields and not c.params.job_user:
            params = c.params.model_copy(update={"job_user": user})
            c = dataclasses.replace(c, params=params, probes=again(c.spec.probes_for(params), c.probes),
                                    after=again(c.spec.after_probes_for(params), c.after))
        checks.append(c)
    return dataclasses.replace(playbook, checks=tuple(checks))


FACTS_DEADLINE_S = 300.0                       # facts/baseline without --deadline


def facts_command(args: Namespace) -> int:
    """`nodecheck facts`: every node's facts, unjudged; exit 3 if some could not be read."""
    import json
    from nodecheck.run import facts as facts

    g = _gather(args)
    data = facts.all_facts(g)
    if args.format == "json":
        sys.stdout.write(json.dumps(data, indent=2, sort_keys=False) + "\n")
    else:
        sys.stdout.write(_facts_table(data, g.value_checks))
    unread = any("error" in (v if isinstance(v, dict) else {}) for node in data["nodes"].values()
                 for v in [node["gpu"], node["hca"], node["kernel_log"], node["nccl"], *node["values"].values()])
    if g.incomplete:
        print(f"nodecheck: warning: incomplete: {g.incomplete}", file=sys.stderr)
    return 3 if unread or g.incomplete else 0


def baseline_command(args: Namespace) -> int:
    """`nodecheck baseline`: the pins the nodes agree on, as an includable YAML file on stdout."""
    from datetime import datetime, timezone
    from nodecheck.run import facts as facts
    from nodecheck.report.table import fold

    g = _gather(args)
    base = facts.baseline(g)
    when = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    lines = [f"# Written by `nodecheck baseline` at {when} from {fold(g.nodes)}"
             + (f" ({args.inventory})" if args.inventory else "") + ".",
             "# Use it:  nodecheck run hosts.yml --playbook PLAYBOOK --pins THIS-FILE.yml",
             "# or in a playbook:  include: [THIS-FILE.yml]", "version: 1", "checks:"]
    for name, value in base.pins.items():
        extra = ""
        if name == "container.digest" and g.image is not None:
            extra = f"image: {_yaml_str(g.image.image)}, " + \
                (f"runtime: {g.image.runtime}, " if g.image.runtime != "auto" else "")
        lines.append(f"  {name}: {{{extra}expect: {_yaml_str(value)}}}")
    if not base.pins:
        lines[-1] = "checks: {}"
    for name, why in base.disagreements.items():
        lines.append(f"# not pinned, the nodes disagree: {name}: {why}")
        print(f"nodecheck: {name} not pinned: the nodes disagree: {why}", file=sys.stderr)
    for name, why in base.unreadable.items():
        lines.append(f"# not pinned, not read on every node: {name}: {why}")
        print(f"nodecheck: {name} not pinned: {why}", file=sys.stderr)
    sys.stdout.write("\n".join(lines) + "\n")
    return 0 if base.clean and not g.incomplete else 2


def _yaml_str(value: str) -> str:
    import json
    return json.dumps(value, ensure_ascii=False)   # a JSON string is a valid YAML double-quoted scalar


def _gather(args: Namespace):
    from nodecheck.run import facts as facts
    from nodecheck.checks.container import ContainerDigest
    from pydantic import ValidationError

    image = None
    if args.image:
        try:
            image = ContainerDigest(image=args.image, runtime=args.runtime)
        except ValidationError as e:
            raise ConfigError(f"--image: {e.errors()[0]['msg']}", file="arguments") from None
    nodes, transport = _reach(args)
    if not args.local:
        _ensure_open_files(min(args.fanout, len(nodes)))
    with _stop_on_signals() as stop:
        return facts.gather(nodes, transport, fanout=args.fanout,
                            deadline_s=args.deadline or FACTS_DEADLINE_S, image=image, stop=stop)


def _facts_table(data: dict, value_checks) -> str:
    from tabulate import tabulate
    columns = [c for c in value_checks if c not in ("nccl.settings",)]
    rows = []
    for node, facts in data["nodes"].items():
        gpu = facts["gpu"]
        gpus = "error" if "error" in gpu else f"{len(gpu['gpus'])} ({gpu['source']})"
        cells = [v if isinstance(v, str) else "error" for v in (facts["values"][c] for c in columns)]
        rows.append([node, gpus, *cells])
    return tabulate(rows, headers=["node", "gpus", *columns], tablefmt="simple") + "\n"


def _reach(args: Namespace) -> tuple[list[Node], object]:
    """The nodes named by the arguments and the transport that reaches them."""
    from nodecheck.config.inventory import load_inventory, select

    if args.local:
        if args.inventory or args.nodes:
            raise ConfigError("--local runs on this machine only: give no inventory and no --nodes",
                              file="arguments")
        return [_this_node()], _local_transport()
    if not args.inventory:
        raise ConfigError("an inventory (hosts.yml) is required unless --local", file="arguments",
                          hint=f"nodecheck {args.command} hosts.yml")
    return select(load_inventory(args.inventory), args.nodes), _ssh_transport(args)


def _targets(args: Namespace, playbook) -> tuple[list[Node], list[Node], object]:
    """The nodes to run on, those the playbook leaves out, and the transport that reaches them."""
    from nodecheck.config.playbook import split_selected
    from nodecheck.report.table import fold

    nodes, transport = _reach(args)
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
    """Store the report, print it in the asked format; the exit code follows the report. A report
    that could not be written (a full or read-only disk) is said on stderr with the directory and
    the reason; the verdicts are still printed, and the run never exits 0 or 1 for it (3 then;
    2 and 3 are kept): a lost report is not a clean bill of health."""
    from nodecheck.report import EXIT_PASS, EXIT_UNKNOWN, EXIT_WARN
    from nodecheck.report import json as report_json
    from nodecheck.report import table
    from nodecheck.report.store import store, why

    report = report_json.redacted(report)      # (the runner's reports already are: then this is free)
    summary, as_json = table.render(report), report_json.dumps(report)
    try:
        where = str(store(report, summary, args.output_dir, as_json))
    except OSError as e:
        print(f"nodecheck: error: could not write the report under {args.output_dir}: {why(e)}; "
              "nothing was left there", file=sys.stderr)
        where = None
    code = report.exit_code
    if where is None and code in (EXIT_PASS, EXIT_WARN):
        code = EXIT_UNKNOWN
    if args.format in ("json", "junit"):           # stdout is one document; the rest goes to stderr
        if args.format == "junit":
            from nodecheck.report import junit
            sys.stdout.write(junit.render(report))
        else:
            sys.stdout.write(as_json)
        print(f"report: {where}" if where else f"report: NOT WRITTEN (see the error above); exit {code}",
              file=sys.stderr)
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
    from nodecheck.core.registry import all_checks
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
