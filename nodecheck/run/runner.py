"""One run: plan probes per node, fan out, route outcomes to statuses, call judges, build the Report."""

from __future__ import annotations

import dataclasses
import threading
import time
import traceback
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone

from nodecheck import __version__
from nodecheck.config.playbook import PlannedCheck, Playbook
from nodecheck.core.bounded_search import judging_until
from nodecheck.core.errors import ParseError
from nodecheck.core.model import Capture, CheckResult, Cut, Evidence, Node, Outcome, Probe, Status, Verdict, excerpt
from nodecheck.core.progress import NULL_PROGRESS, RunProgress
from nodecheck.report import Report, capture_relpath
from nodecheck.report.json import redacted
from nodecheck.run.active import CommandRunner, run_check
from nodecheck.transport import Transport, signal_name
from nodecheck.transport.fanout import run_probes, why_cut


def plan_probes(checks: Sequence[PlannedCheck], after: bool = False) -> tuple[Probe, ...]:
    """The distinct probes of a playbook: a probe two checks share runs once per node.
    `after`: the probes that run again once the active checks are done (spec.after)."""
    by_name: dict[str, Probe] = {}
    for check in checks:
        for probe in check.after if after else check.probes:
            have = by_name.get(probe.name)
            if have is not None and have.argv != probe.argv:
                raise ValueError(f"probe {probe.name!r} means two commands: {have.argv} vs {probe.argv}")
            if have is None or probe.timeout_s > have.timeout_s:
                by_name[probe.name] = probe
    return tuple(by_name.values())


def run(
    playbook: Playbook,
    nodes: Sequence[Node],
    transport: Transport,
    *,
    fanout: int,
    deadline_s: float | None = None,
    inventory: str | None = None,
    stop: threading.Event | None = None,
    excluded: Sequence[str] = (),
    allow_disruptive: bool = False,
    own_job: str | None = None,
    progress: RunProgress = NULL_PROGRESS,
) -> Report:
    """Three phases: every node's probes; then the active checks in playbook order (they run their
    own commands: pair tests, a port flap); then the probes that snapshot again (IB counters), so the
    window between the snapshots covers the load. `excluded`: inventory nodes the playbook's select
    left out; the report names them. `own_job`: the Slurm job whose allocation this run tests in
    (--slurm-job): the idle guard of a disruptive step does not count that job as busy.
    `progress` hears each phase: "probes", each active check by name, "probes again"."""
    started = datetime.now(timezone.utc)
    deadline_s = deadline_s or playbook.deadline_s
    deadline = time.monotonic() + deadline_s
    stop = stop or threading.Event()
    after = plan_probes(playbook.checks, after=True)
    progress.steps(1 + sum(c.spec.scope == "active" for c in playbook.checks) + bool(after))
    progress.phase("probes", len(nodes))
    out = run_probes(
        transport,
        {n: plan_probes(playbook.checks) for n in nodes},
        fanout=fanout,
        deadline=deadline,
        stop=stop,
        progress=progress,
    )
    captures, incomplete = dict(out.captures), out.incomplete
    names = [n.name for n in nodes]
    results: list[CheckResult] = []
    extras: dict[str, object] = {}
    undone: dict[str, list[str]] = {}
    commands = CommandRunner(transport, deadline, stop, parallel=fanout, own_job=own_job)
    try:
        for check in playbook.checks:
            if check.spec.scope == "active":
                results += run_active(check, nodes, captures, commands, allow_disruptive, extras, undone, progress)
    finally:
        commands.close()
    captures.update({(c.node, c.probe): c for c in commands.captures})
    # an active check that left planned work undone (a round, a flap) says so
    incomplete = (
        incomplete
        or _cut(commands.captures, stop)
        or "; ".join(f"{name}: {'; '.join(why)}" for name, why in undone.items() if why)
    )
    if after:
        again_on = [n for n in nodes if _first_failure(n.name, playbook, captures) is None]
        progress.phase("probes again", len(again_on))
        again = run_probes(
            transport, dict.fromkeys(again_on, after), fanout=fanout, deadline=deadline, stop=stop, progress=progress
        )
        captures.update(again.captures)
        incomplete = incomplete or again.incomplete
        for n in nodes:  # a node whose first read failed is not asked again:
            first = _first_failure(n.name, playbook, captures)  # its result is that failure
            for probe in after:
                if first is not None:
                    captures.setdefault(
                        (n.name, probe.name),
                        Capture(
                            n.name,
                            probe.name,
                            probe.argv,
                            first.outcome,
                            first.exit_code,
                            "",
                            "",
                            0.0,
                            first.detail,
                            first.cut,
                        ),
                    )  # the same words: the node's one problem, not a second
    # a site's own patterns (command.<label>) are searched within what is left of the deadline
    # (core.bounded_search): a pattern that backtracks is "not judged", never a run past its deadline
    with judging_until(deadline):
        results = [
            r
            for check in playbook.checks
            if check.spec.scope == "node"
            for r in _related(check, [r for node in names for r in judge_node(check, node, captures)])
        ] + results
        results += [
            r for check in playbook.checks if check.spec.scope == "fleet" for r in judge_fleet(check, names, captures)
        ]
    # secrets masked once, here: the table, JSON, JUnit, the gate's drain reasons (which every user
    # of the cluster reads in sinfo) and the history all get the same text (report.json.redacted)
    return redacted(
        Report(
            run_id=f"{started:%Y%m%dT%H%M%SZ}_{playbook.name}",
            playbook=playbook.name,
            playbook_path=playbook.path,
            playbook_sha256=playbook.sha256,
            inventory=inventory,
            started=started,
            finished=datetime.now(timezone.utc),
            deadline_s=deadline_s,
            complete=not incomplete,
            nodes=tuple((n.name, n.address) for n in nodes),
            results=tuple(results),
            captures=tuple(captures.values()),
            nodecheck_version=__version__,
            incomplete_reason=incomplete,
            excluded=tuple(excluded),
            playbook_includes=playbook.includes,
            extras=extras,
        )
    )


def _first_failure(node: str, playbook: Playbook, captures: Mapping[tuple[str, str], Capture]) -> Capture | None:
    """The first read (a probe that `after` repeats) that did not come back from the node, if any."""
    return next(
        (
            c
            for check in playbook.checks
            if check.after
            for p in check.probes
            if (c := captures[(node, p.name)]).outcome is not Outcome.EXITED
        ),
        None,
    )


def _cut(captures: Sequence[Capture], stop: threading.Event) -> str:
    """Why the active checks' steps were skipped or cut short by the deadline; "" if none were."""
    if any(c.outcome is Outcome.SKIPPED or c.cut is Cut.DEADLINE for c in captures):
        return why_cut(Cut.SIGNAL if stop.is_set() else Cut.DEADLINE)
    return ""


def _related(check: PlannedCheck, results: list[CheckResult]) -> list[CheckResult]:
    """A node-scope check's results, judged against each other where the check relates them
    (CheckSpec.relate: fleet-relative bands); the results otherwise as they are."""
    relate = check.spec.relate
    if relate is None:
        return results
    mine = [r for r in results if len(r.nodes) == 1]
    by_node: dict[str, list] = {}
    for r in mine:
        by_node.setdefault(r.nodes[0], []).append(r.verdict)
    related = relate(by_node, check.params)
    seen: dict[str, int] = {}
    out = []
    for r in results:
        if len(r.nodes) != 1:
            out.append(r)
            continue
        node = r.nodes[0]
        k = seen.get(node, 0)
        seen[node] = k + 1
        out.append(dataclasses.replace(r, verdict=related[node][k]))
    return out


def run_active(
    check: PlannedCheck,
    nodes: Sequence[Node],
    captures: Mapping[tuple[str, str], Capture],
    commands: CommandRunner,
    allow_disruptive: bool,
    extras: dict,
    undone: dict[str, list[str]],
    progress: RunProgress = NULL_PROGRESS,
) -> list[CheckResult]:
    """An active check (run by nodecheck.run.active): nodes whose passive probes did not come back get
    their own result; the check runs its steps on the rest. Every node ends with at least one result."""
    by_name = {n.name: n for n in nodes}
    name = check.spec.name
    results, ready, evidence = _split_ready(check, [n.name for n in nodes], captures)
    progress.phase(name, len(ready))
    if not ready:
        return results
    out = run_check(
        name,
        check.spec.judge,
        check.params,
        {n: by_name[n] for n in ready},
        ready,
        commands,
        allow_disruptive,
        [n.name for n in nodes],
        lambda e: _internal_error(name, e),
        progress.within(),
    )
    if out.extras:
        extras[name] = out.extras
    undone[name] = out.undone
    own: dict[str, list[Evidence]] = {}
    for c in out.captures:
        own.setdefault(c.node, []).append(_evidence(c))
    for node in ready:
        evidence[node] = evidence[node] + tuple(own.get(node, ()))
    return results + _grouped_results(name, out.grouped, ready, evidence)


def _split_ready(check: PlannedCheck, nodes: Sequence[str], captures: Mapping[tuple[str, str], Capture]):
    """(results for blocked nodes, {ready node: its captures}, {node: evidence})."""
    results: list[CheckResult] = []
    ready: dict[str, dict[str, Capture]] = {}
    evidence: dict[str, tuple[Evidence, ...]] = {}
    for node in nodes:
        mine = {p.name: captures[(node, p.name)] for p in check.probes}
        evidence[node] = tuple(_evidence(c) for c in mine.values())
        if blocked := _blocked(check, mine):
            results.append(CheckResult(check.spec.name, (node,), blocked, evidence[node]))
        else:
            ready[node] = mine
    return results, ready, evidence


def _grouped_results(
    name: str, grouped, ready: Mapping[str, object], evidence: Mapping[str, tuple[Evidence, ...]]
) -> list[CheckResult]:
    results: list[CheckResult] = []
    judged: set[str] = set()
    for group, verdict in grouped:
        group = tuple(n for n in group if n in ready)
        if not group:  # about no node we judged: nowhere to list it
            continue
        judged.update(group)
        results.append(CheckResult(name, group, verdict, tuple(e for n in group for e in evidence[n])))
    forgotten = [n for n in ready if n not in judged]
    if forgotten:
        results.append(
            CheckResult(
                name,
                tuple(forgotten),
                Verdict(Status.ERROR, f"{name} produced no verdict for these nodes"),
                tuple(e for n in forgotten for e in evidence[n]),
            )
        )
    return results


def _evidence(c: Capture) -> Evidence:
    return Evidence(c.node, c.probe, c.argv, c.exit_code, capture_relpath(c.node, c.probe))


def _internal_error(name: str, e: Exception) -> Verdict:
    return Verdict(
        Status.ERROR, f"internal error in {name}: {type(e).__name__}: {e}", excerpt=excerpt(traceback.format_exc())
    )


def judge_node(check: PlannedCheck, node: str, captures: Mapping[tuple[str, str], Capture]) -> list[CheckResult]:
    """A check's results on one node; only output that ran to completion reaches the judge."""
    mine = {p.name: captures[(node, p.name)] for p in (*check.probes, *check.after)}
    evidence = tuple(_evidence(c) for c in mine.values())
    verdicts = [blocked] if (blocked := _blocked(check, mine)) else _judge(check, mine)
    return [CheckResult(check.spec.name, (node,), v, evidence) for v in verdicts]


def judge_fleet(
    check: PlannedCheck, nodes: Sequence[str], captures: Mapping[tuple[str, str], Capture]
) -> list[CheckResult]:
    """A cross-node check: nodes whose probes did not complete get their own result; the judge
    sees the rest together. Every node ends with at least one result, never silence."""
    results, ready, evidence = _split_ready(check, nodes, captures)
    if not ready:
        return results
    try:
        grouped = list(check.spec.judge(ready, check.params))
    except Exception as e:  # a judge bug must not take the report down
        grouped = [(tuple(ready), _internal_error(check.spec.name, e))]
    return results + _grouped_results(check.spec.name, grouped, ready, evidence)


def _blocked(check: PlannedCheck, captures: Mapping[str, Capture]) -> Verdict | None:
    """The outcome that stops judging, most decisive first: unreachable, skipped, timeout, bad exit."""
    by_outcome = {c.outcome: c for c in captures.values()}
    if c := by_outcome.get(Outcome.FAILED):
        return Verdict(Status.ERROR, f"nodecheck could not run {c.probe}: {c.detail}")
    if c := by_outcome.get(Outcome.UNREACHABLE):
        return Verdict(Status.UNREACHABLE, f"unreachable: {c.detail}")
    if c := by_outcome.get(Outcome.SKIPPED):
        return Verdict(Status.SKIPPED, f"{c.probe} not run: {c.detail}", cut=c.cut)
    if c := by_outcome.get(Outcome.TIMEOUT):
        return Verdict(
            Status.TIMEOUT,
            f"{_command(c)} timed out: {c.detail}",
            observed={"duration_s": round(c.duration_s, 2)},
            excerpt=excerpt(c.stdout + c.stderr),
            cut=c.cut,
        )
    probes = {p.name: p for p in (*check.probes, *check.after)}
    for c in captures.values():
        if c.exit_code not in probes[c.probe].ok_exit_codes:
            return _bad_exit(c)
    return None


def _command(c: Capture) -> str:
    """How a message names what ran: the command line, or for a probe script, the probe."""
    if len(c.argv) > 2 and c.argv[1] == "-c" and c.argv[0] in ("sh", "bash"):
        return f"{c.probe} probe"  # the script itself is in the capture, not the message
    return " ".join(c.argv)


def _bad_exit(c: Capture) -> Verdict:
    tool = c.argv[0]
    script = len(c.argv) > 2 and c.argv[1] == "-c"
    if c.exit_code == 127 and not script:
        message = f"{tool} not found on the node (exit 127)"
    elif c.exit_code == 126 and not script:
        message = f"{tool} found but not executable (exit 126)"
    elif c.exit_code is None or c.exit_code < 0:  # killed by a signal: -N, or None with the name in the detail
        stderr = next((ln.strip() for ln in c.stderr.splitlines() if ln.strip()), "")
        killed = f"killed by {signal_name(c.exit_code)}" if c.exit_code is not None else c.detail or "killed"
        message = f"{_command(c)} {killed}" + (f": {stderr}" if stderr else "")
    else:  # a probe script's own exit: its stderr says why
        first = next((ln.strip() for ln in c.stderr.splitlines() if ln.strip()), "no stderr")
        message = f"{_command(c)} exited {c.exit_code}: {first}"
    return Verdict(
        Status.ERROR,
        message,
        observed={"exit_code": c.exit_code},
        expected={"exit_code": 0},
        excerpt=excerpt(c.stderr + c.stdout),
    )


def _judge(check: PlannedCheck, captures: Mapping[str, Capture]) -> list[Verdict]:
    try:
        verdicts = list(check.spec.judge(captures, check.params))
    except ParseError as e:
        return [Verdict(Status.ERROR, f"cannot read {e.tool} output: {e.reason}", excerpt=e.excerpt)]
    except Exception as e:  # a judge bug must not take the other nodes' reports down
        return [
            Verdict(
                Status.ERROR,
                f"internal error in {check.spec.name}: {type(e).__name__}: {e}",
                excerpt=excerpt(traceback.format_exc()),
            )
        ]
    return verdicts or [Verdict(Status.ERROR, f"{check.spec.name} produced no verdict")]
