"""`nodecheck remediate [hosts.yml] [--nodes LIST]`: what nodecheck would do about each unfit node.

It checks the chosen nodes now (the health playbook, over SSH with an inventory, else this node
locally; or reads a stored report with --report), reads every node's Slurm state and the action
records, and prints the plan: per node the next step of its failure's ladder, a hold for a
person, or why it waits or is left alone. It changes nothing: no Slurm state, no GPU, no service;
every step it would take is logged to the gate log as a would-* event.
"""

from __future__ import annotations

import os
from argparse import Namespace
from datetime import datetime, timezone

from nodecheck.config.gate_settings import GateSettings
from nodecheck.config.remedy import (
    Ladders,
    RemedySettings,
    known_check_names,
    load_ladders,
    require_ladder_file,
)
from nodecheck.core.errors import ConfigError
from nodecheck.core.model import Node, one_line
from nodecheck.remedy import record
from nodecheck.remedy.failures import failures
from nodecheck.remedy.model import Plan
from nodecheck.remedy.plan import plan
from nodecheck.remedy.show import plan_json, plan_table
from nodecheck.report import EXIT_PASS, EXIT_UNKNOWN, Report

EXIT_COULD_NOT_PLAN = EXIT_UNKNOWN


def remediate_command(args: Namespace) -> int:
    from nodecheck.app.slurm import SlurmError
    from nodecheck.gate import command as gatecmd
    from nodecheck.gate import config as gateconfig
    from nodecheck.gate import decide as gate

    path = gateconfig.config_path(args.config)
    options, _ = gateconfig.load(path, "health")
    gateconfig.apply(args, options)
    settings, _ = gateconfig.remedy_settings(path)
    ladders = _ladders(args, settings)
    log = gatecmd.GateLog(args.log_file or gatecmd.DEFAULT_LOG_FILE, "remediate")
    token = gatecmd.site_token(args)
    report, checked, playbook_gate = _failures_source(args)
    statuses = gate.drain_statuses(
        gate.drain_on_for(args.drain_on, playbook_gate, local=not (args.inventory or args.report))
    )
    slurm = gatecmd.slurm_for(args)
    try:
        states = slurm.nodes()
    except SlurmError as e:
        print(one_line(f"nodecheck remediate: cannot read Slurm's node states ({e}); nothing planned"))
        return EXIT_COULD_NOT_PLAN
    records, unreadable = record.load_many(settings.state_dir, _recorded(settings.state_dir, checked))
    the_plan = plan(
        failures(report, statuses),
        [n for n in checked if n not in unreadable],
        states,
        records,
        ladders,
        settings,
        now=datetime.now(timezone.utc),
        token=token,
        cluster_size=len(states),
    )
    for node, why in unreadable.items():
        print(
            one_line(
                f"nodecheck remediate: {node}: its action record cannot be read, so nothing is planned for it: {why}"
            )
        )
    _log(the_plan, log, report)
    print(plan_json(the_plan) if args.json else plan_table(the_plan), end="")
    return EXIT_PASS


def _ladders(args: Namespace, settings: RemedySettings) -> Ladders:
    chosen = args.ladders or settings.ladders
    if chosen:
        require_ladder_file(chosen)
    return load_ladders(chosen, known_check_names())


def _failures_source(args: Namespace) -> tuple[Report, list[str], GateSettings]:
    """(the report the plan is made from, the nodes it checked, the playbook's gate settings): a
    stored report (judged with the default gate settings, as `sweep --drain` judges one), or a run
    of the health playbook now."""
    if args.report:
        from nodecheck.report import json as report_json
        from nodecheck.report.stored import read_document

        report = report_json.from_dict(read_document(args.report))
        wanted = set(args.nodes or report.node_names)
        return report, [n for n in report.node_names if n in wanted], GateSettings()
    nodes, transport, fanout = _targets(args)
    from nodecheck.gate import command as gatecmd

    playbook = gatecmd.load_playbook_for(args, "health")
    from nodecheck.app.signals import stop_on_signals

    with stop_on_signals() as stop:
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
    return report, [n.name for n in nodes], playbook.gate


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


def _recorded(state_dir: str, checked: list[str]) -> list[str]:
    """The checked nodes, and every other node with a record (the cluster budget counts them all)."""
    names = list(checked)
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


def _log(the_plan: Plan, log, report: Report) -> None:
    for p in the_plan.nodes:
        if p.verb == "act":
            log.event("would-remedy", p.node, step=p.action, ladder=p.ladder, message=p.why)
        elif p.verb == "hold":
            log.event("would-hold", p.node, message=p.why)
