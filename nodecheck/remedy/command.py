"""`nodecheck remediate [hosts.yml] [--nodes LIST] [--act]`: what nodecheck does about each unfit node.

It checks the chosen nodes now (the health playbook, over SSH with an inventory, else this node
locally; or reads a stored report with --report), reads every node's Slurm state and the action
records, and prints the plan: per node the next step of its failure's ladder, a hold for a
person, a return to service (re-proven after its last action), or why it waits or is left alone.

Observe is the default (the gate config's `remedy.act: false`, or --observe): nothing changes, and
every step it would take is logged to the gate log as a would-* event. With --act (or `remedy.act:
true`) the executor (nodecheck.remedy.act) carries the plan out and prints what it did.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from argparse import Namespace

from nodecheck.config.gate_settings import GateSettings
from nodecheck.config.playbook import Playbook
from nodecheck.config.remedy import (
    Ladders,
    RemedySettings,
    known_check_names,
    load_ladders,
    require_ladder_file,
)
from nodecheck.core.errors import ConfigError
from nodecheck.core.model import Node, one_line
from nodecheck.remedy.repair import carry_out, log_would, make_plan
from nodecheck.remedy.show import plan_json, plan_table
from nodecheck.report import EXIT_FAIL, EXIT_PASS, EXIT_UNKNOWN, Report
from nodecheck.transport import Transport

EXIT_COULD_NOT_PLAN = EXIT_UNKNOWN
EXIT_ACTION_FAILED = EXIT_FAIL


@dataclasses.dataclass
class _Source:
    report: Report
    checked: list[str]
    gate: GateSettings
    nodes: dict[str, Node]  # how to reach each checked node ({} for a stored report without an inventory)
    transport: Transport | None
    playbook: Playbook


def remediate_command(args: Namespace) -> int:
    from nodecheck.app.signals import stop_on_signals
    from nodecheck.app.slurm import SlurmError
    from nodecheck.gate import command as gatecmd
    from nodecheck.gate import config as gateconfig
    from nodecheck.gate import decide as gate

    path = gateconfig.config_path(args.config)
    options, _ = gateconfig.load(path, "health")
    gateconfig.apply(args, options)
    settings = gateconfig.remedy_settings(path)[0] or RemedySettings()
    acting = bool(args.act or settings.act) and not args.observe
    ladders = load_site_ladders(args.ladders, settings)
    log = gatecmd.GateLog(args.log_file or gatecmd.DEFAULT_LOG_FILE, "remediate")
    token = gatecmd.site_token(args)
    with stop_on_signals() as stop:
        source = _source(args, stop, acting)
        statuses = gate.drain_statuses(
            gate.drain_on_for(args.drain_on, source.gate, local=not (args.inventory or args.report))
        )
        slurm = gatecmd.slurm_for(args)
        try:
            planned = make_plan(
                source.report,
                source.checked,
                statuses,
                settings=settings,
                ladders=ladders,
                slurm=slurm,
                token=token,
                recorded=recorded(settings.state_dir),
                gate_log=log.path,
            )
        except SlurmError as e:
            print(one_line(f"nodecheck remediate: cannot read Slurm's node states ({e}); nothing planned"))
            return EXIT_COULD_NOT_PLAN
        for node, why in planned.unreadable.items():
            print(
                one_line(f"nodecheck remediate: {node}: its action record cannot be read, so nothing is planned: {why}")
            )
        for why in planned.unremembered:
            print(one_line(f"nodecheck remediate: warning: {why}; the memory rules that read it matched nothing"))
        if not acting:
            log_would(planned.plan, log)
            print(plan_json(planned.plan) if args.json else plan_table(planned.plan), end="")
            _metrics(args, settings, planned.plan)
            return EXIT_PASS
        print(plan_table(planned.plan, acting=True), end="")
        if source.transport is None:  # (a stored report without an inventory: refused in _source)
            raise ConfigError("acting needs the nodes: give hosts.yml", file="arguments")
        report_dir = store_report(source.report, args, "remedy", log)
        done = carry_out(
            planned.plan,
            report=source.report,
            report_dir=report_dir,
            nodes=source.nodes,
            transport=source.transport,
            playbook=source.playbook,
            settings=settings,
            slurm=slurm,
            log=log,
            token=token,
            stop=stop,
            store=lambda report, tag: store_report(report, args, tag, log),
        )
    for t in done:
        print(t.line)
    print(f"acted: report {report_dir or 'NOT written'}")
    _metrics(args, settings, planned.plan)
    return EXIT_ACTION_FAILED if any(t.result in ("failed", "still-failing") for t in done) else EXIT_PASS


def store_report(report: Report, args: Namespace, tag: str, log) -> str | None:
    from nodecheck.gate.command import DEFAULT_OUTPUT_DIR
    from nodecheck.report import json as report_json
    from nodecheck.report import table
    from nodecheck.report.store import store

    out = args.output_dir or DEFAULT_OUTPUT_DIR
    named = dataclasses.replace(report, run_id=f"{report.run_id}_{tag}")
    try:
        return str(store(named, table.render(named), out, report_json.dumps(named)))
    except OSError as e:
        log.event("report-not-written", "-", message=f"{out}: {e}")
        return None


def _metrics(args: Namespace, settings: RemedySettings, the_plan) -> None:
    if not args.metrics:
        return
    from nodecheck.remedy import metrics, record
    from nodecheck.report.metrics import write_atomic

    records, _ = record.load_many(settings.state_dir, recorded(settings.state_dir))
    try:
        write_atomic(args.metrics, metrics.render(records, the_plan))
    except OSError as e:
        print(one_line(f"nodecheck remediate: could not write the metrics file {args.metrics}: {e}"))


def load_site_ladders(given: str | None, settings: RemedySettings) -> Ladders:
    """--ladders FILE, else the gate config's remedy.ladders, else the shipped profile."""
    chosen = given or settings.ladders
    if chosen:
        require_ladder_file(chosen)
    return load_ladders(chosen, known_check_names())


def _source(args: Namespace, stop: threading.Event, acting: bool) -> _Source:
    """The report the plan is made from: a stored one (judged with the default gate settings, as
    `sweep --drain` judges one), or a run of the health playbook now; and how to reach the nodes."""
    from nodecheck.gate import command as gatecmd

    nodes, transport, fanout = _targets(args) if (args.inventory or not args.report) else ([], None, 1)
    playbook = gatecmd.load_playbook_for(args, "health")
    if args.report:
        from nodecheck.report import json as report_json
        from nodecheck.report.stored import read_document

        report = report_json.from_dict(read_document(args.report))
        wanted = set(args.nodes or report.node_names)
        checked = [n for n in report.node_names if n in wanted]
        if acting and not args.inventory:
            raise ConfigError(
                "acting on a stored report needs the nodes: give hosts.yml too",
                file="arguments",
                hint="nodecheck remediate hosts.yml --report DIR --act",
            )
        return _Source(report, checked, GateSettings(), {n.name: n for n in nodes}, transport, playbook)
    report = gatecmd.run_gated(
        playbook,
        nodes,
        transport,
        fanout=fanout,
        deadline_s=args.deadline,
        stop=stop,
        inventory=args.inventory,
        retries=args.retries,
        drain_on=args.drain_on,
    )
    return _Source(report, [n.name for n in nodes], playbook.gate, {n.name: n for n in nodes}, transport, playbook)


def _targets(args: Namespace):
    from nodecheck.app.defaults import DEFAULT_FANOUT
    from nodecheck.app.transports import local_transport, ssh_transport
    from nodecheck.config.inventory import load_inventory, select
    from nodecheck.gate import command as gatecmd

    if args.inventory:
        nodes = select(load_inventory(args.inventory), args.nodes)
        args.connect_timeout = args.connect_timeout or 10.0
        return nodes, ssh_transport(args), args.fanout or DEFAULT_FANOUT
    if args.nodes:
        raise ConfigError(
            "--nodes needs an inventory (or --report)",
            file="arguments",
            hint="nodecheck remediate hosts.yml --nodes ...",
        )
    return [Node(name=gatecmd.this_node_name(), address="localhost")], local_transport(), 1


def recorded(state_dir: str) -> list[str]:
    """Every node with a record (the cluster budget counts them all)."""
    names: list[str] = []
    try:
        with os.scandir(state_dir) as entries:
            for e in entries:
                if e.name.endswith(".jsonl") and e.is_file(follow_symlinks=False):
                    names.append(e.name[: -len(".jsonl")])
    except FileNotFoundError:
        pass
    except OSError as e:
        raise ConfigError(f"cannot list the action records in {state_dir}: {e}", file="remedy.state_dir") from None
    return list(dict.fromkeys(names))
