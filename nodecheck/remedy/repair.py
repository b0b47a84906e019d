"""One repair pass over a report, the same for `nodecheck remediate`, `nodecheck health` and the
sweeps: plan from the report's failures, Slurm's states and the action records; then observe (log
what would be done) or act (the executor)."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone

from nodecheck.config.playbook import Playbook, load_playbook
from nodecheck.config.remedy import Ladders, RemedySettings
from nodecheck.core.model import Node, Status
from nodecheck.gate.command import GateLog, run_gated
from nodecheck.remedy import record
from nodecheck.remedy.act import Executor, Taken
from nodecheck.remedy.failures import failures, unjudged
from nodecheck.remedy.model import Plan
from nodecheck.remedy.past import RisesOf, read_past
from nodecheck.remedy.plan import plan
from nodecheck.remedy.reproof import Reproof
from nodecheck.report import Report
from nodecheck.transport import Transport


@dataclasses.dataclass(frozen=True)
class Planned:
    plan: Plan
    unreadable: Mapping[str, str]  # node -> why its record could not be read (nothing planned for it)
    unremembered: tuple[str, ...] = ()  # a memory source that could not be read: its rules matched nothing


def make_plan(
    report: Report,
    checked: Sequence[str],
    statuses: frozenset[Status],
    *,
    settings: RemedySettings,
    ladders: Ladders,
    slurm,
    token: str,
    recorded: Sequence[str] = (),
    gate_log: str | None = None,
    rises_of: RisesOf | None = None,
) -> Planned:
    """The plan for the checked nodes. SlurmError when Slurm's node states cannot be read (nothing
    can be planned without them). `recorded`: other nodes with a record (the cluster's budget).
    The memory rules read `gate_log` (nodecheck's drains) and `rises_of` (the sweep history's counter
    rises, from a sweep) for the failing nodes."""
    states = slurm.nodes()
    records, unreadable = record.load_many(settings.state_dir, list(dict.fromkeys([*checked, *recorded])))
    now = datetime.now(timezone.utc)
    failing = failures(report, statuses)
    memory = read_past(list(failing), ladders.memory, now, gate_log=gate_log, rises_of=rises_of)
    the_plan = plan(
        failing,
        [n for n in checked if n not in unreadable],
        states,
        records,
        ladders,
        settings,
        now=now,
        token=token,
        cluster_size=len(states),
        unjudged=unjudged(report, statuses),
        past=memory.past,
    )
    return Planned(the_plan, unreadable, memory.problems)


def log_would(the_plan: Plan, log: GateLog) -> None:
    """Observe: each step that would be taken, in the gate log."""
    for p in the_plan.nodes:
        if p.verb == "act":
            log.event("would-remedy", p.node, step=p.action, ladder=p.ladder, message=p.why)
        elif p.verb == "hold" and not p.why.startswith("already held"):
            log.event("would-hold", p.node, message=p.why)
        elif p.verb == "return":
            log.event("would-resume", p.node, message=p.why)


def carry_out(
    the_plan: Plan,
    *,
    report: Report,
    report_dir: str | None,
    nodes: Mapping[str, Node],
    transport: Transport,
    playbook: Playbook,
    settings: RemedySettings,
    slurm,
    log: GateLog,
    token: str,
    stop: threading.Event,
    store: Callable[[Report, str], str | None],
) -> list[Taken]:
    """Act on the plan (nodecheck.remedy.act), each action re-proven with `playbook` and the
    action's acceptance playbook; `store(report, tag)` keeps each re-proof's report."""
    reproof = Reproof(
        playbook=playbook,
        acceptance={action: load_playbook(book) for action, book in settings.acceptance.items()},
        transport=transport,
        run_gated=run_gated,
        store=lambda rep, node: store(rep, f"{node}_reproof"),
        reproof_s=settings.reproof_s,
        stop=stop,
    )
    executor = Executor(
        slurm=slurm,
        transport=transport,
        nodes=nodes,
        state_dir=settings.state_dir,
        log=log,
        report=report,
        report_dir=report_dir,
        reprove=reproof,
        bug_report_s=settings.bug_report_s,
        token=token,
        settings=settings,
    )
    return executor.carry_out(the_plan)


def summary(the_plan: Plan, done: Sequence[Taken] | None) -> str:
    """One phrase for a result line: what was done (acting) or would be (observe)."""
    if done is not None:
        parts = [f"{t.node} {t.what} {t.result}" for t in done]
        return "repair: " + ("; ".join(parts) if parts else "nothing to do")
    words = [f"would {p.action} on {p.node}" for p in the_plan.nodes if p.verb == "act"]
    returned = [p.node for p in the_plan.nodes if p.verb == "return"]
    held = [p.node for p in the_plan.nodes if p.verb == "hold" and not p.why.startswith("already held")]
    words += [f"would resume {', '.join(returned)} (re-proven)"] if returned else []
    words += [f"would hold {', '.join(held)}"] if held else []
    return "repair (observe): " + ("; ".join(words) if words else "nothing to do")
