"""The repair pass after `nodecheck health` and after `sweep --drain/--resume`: when the gate config
has a `remedy:` section, one pass over the same report (no second run of the checks): the plan
for the nodes it checked, observed (logged) or, with `remedy.act: true`, carried out. No `remedy:`
section: exactly the gate's health run or the sweep's gate step, nothing more.

HealthCheckProgram runs on every node at once, each judging itself: the cluster's budget holds
because each node marks itself "repairing" in its drain reason before acting and steps back when
more nodes than the budget marked themselves at the same moment (nodecheck.remedy.act)."""

from __future__ import annotations

from argparse import Namespace
from collections.abc import Sequence

from nodecheck.core.errors import ConfigError
from nodecheck.core.model import Node
from nodecheck.gate import command as gatecmd
from nodecheck.gate import config as gateconfig
from nodecheck.gate import decide as gate
from nodecheck.remedy.command import load_site_ladders, store_report
from nodecheck.remedy.past import RisesOf
from nodecheck.remedy.repair import carry_out, log_would, make_plan, summary


def health_command(args: Namespace) -> int:
    return gatecmd.gate_command(args, after_health=repair_after_health)


def nothing_to_do(report, statuses, state_dir: str) -> bool:
    """Nothing failed, everything was judged, and no checked node has an incident under way (whose
    return this run would prove): no plan needs Slurm's states or the ladders."""
    from nodecheck.remedy import record
    from nodecheck.remedy.failures import failures, unjudged
    from nodecheck.remedy.plan import incident

    if failures(report, statuses) or unjudged(report, statuses):
        return False
    records, unreadable = record.load_many(state_dir, report.node_names)
    return not unreadable and not any(incident(entries) for entries in records.values())


def repair_after_health(run: gatecmd.HealthRun, rises_of: RisesOf | None = None) -> str:
    """The repair pass after a health run; the phrase for its result line. `rises_of`: the sweep
    history's counter rises (a sweep's pass; a health run on a node has no history)."""
    from nodecheck.app.signals import stop_on_signals
    from nodecheck.app.slurm import SlurmError

    settings, _ = gateconfig.remedy_settings(gateconfig.config_path(run.args.config))
    if settings is None:
        return ""
    acting = settings.act and not run.args.observe
    token = gatecmd.site_token(run.args)
    statuses = gate.drain_statuses(run.drain_on)
    if nothing_to_do(run.report, statuses, settings.state_dir):
        return ""  # the every-few-minutes case: a healthy node with no repair under way costs nothing more
    try:  # (after the gate drained and resumed: an error here must not read as "nothing drained")
        ladders = load_site_ladders(None, settings)
    except ConfigError as e:
        run.log.event("config-error", "-", message=f"repair: {e}")
        return f"repair: CONFIG ERROR, nothing repaired: {e}"
    try:
        planned = make_plan(
            run.report,
            [n.name for n in run.nodes],
            statuses,
            settings=settings,
            ladders=ladders,
            slurm=run.slurm,
            token=token,
            gate_log=run.log.path,
            rises_of=rises_of,
        )
    except SlurmError as e:
        run.log.event("slurm-unreadable", "-", message=f"repair: {e}")
        return "repair: Slurm's node states unreadable, nothing planned"
    for node, why in planned.unreadable.items():
        run.log.event("remedy-not-planned", node, message=f"its action record cannot be read: {why}")
    for why in planned.unremembered:
        run.log.event("memory-unread", "-", message=f"{why}; the memory rules that read it matched nothing")
    if not acting:
        log_would(planned.plan, run.log)
        return summary(planned.plan, None)
    with stop_on_signals() as stop:
        try:
            done = _carry_out(run, planned, settings, token, stop)
        except ConfigError as e:  # an acceptance playbook that does not load: nothing was done
            run.log.event("config-error", "-", message=f"repair: {e}")
            return f"repair: CONFIG ERROR, nothing repaired: {e}"
    return summary(planned.plan, done)


def _carry_out(run: gatecmd.HealthRun, planned, settings, token: str, stop):
    return carry_out(
        planned.plan,
        report=run.report,
        report_dir=run.report_dir or store_report(run.report, run.args, "remedy", run.log),
        nodes={n.name: n for n in run.nodes},
        transport=run.transport,  # type: ignore[arg-type]
        playbook=run.playbook,
        settings=settings,
        slurm=run.slurm,
        log=run.log,
        token=token,
        stop=stop,
        store=lambda report, tag: store_report(report, run.args, tag, run.log),
    )


def repair_after_sweep(
    report,
    playbook,
    args: Namespace,
    report_dir: str | None,
    nodes: Sequence[Node],
    transport,
    rises_of: RisesOf | None = None,
) -> list[str]:
    """`sweep --drain/--resume` with a `remedy:` section: the repair pass over the sweep's report,
    its lines for the sweep's output ("repair: ..."). The re-proof runs the sweep's playbook;
    `rises_of` reads the sweep history for the memory rules' counter rises."""
    from nodecheck.app.signals import stop_on_signals

    settings, _ = gateconfig.remedy_settings(gateconfig.config_path(getattr(args, "config", None)))
    if settings is None:
        return []
    run = gatecmd.HealthRun(
        args,
        report,
        tuple(nodes),
        transport,
        playbook,
        report_dir,
        gatecmd.GateLog(args.log_file or gatecmd.DEFAULT_LOG_FILE, "sweep"),
        gatecmd.slurm_for(args),
        gate.drain_on_for(args.drain_on, playbook.gate, local=bool(getattr(args, "local", False))),
    )
    with stop_on_signals():
        said = repair_after_health(run, rises_of)
    return [said] if said else []
