"""One run: plan probes per node, fan out, route outcomes to statuses, call judges, build the Report."""
from __future__ import annotations

import threading
import time
import traceback
from datetime import datetime, timezone
from typing import Callable, Mapping, Sequence

from nodecheck import __version__
from nodecheck.errors import ParseError
from nodecheck.model import (Capture, CheckResult, Evidence, Node, Outcome, Probe, Status, Verdict,
                             excerpt)
from nodecheck.playbook import PlannedCheck, Playbook
from nodecheck.report import Report, capture_relpath
from nodecheck.transport import Transport
from nodecheck.transport.fanout import run_probes


def plan_probes(checks: Sequence[PlannedCheck]) -> tuple[Probe, ...]:
    """The distinct probes of a playbook: a probe two checks share runs once per node."""
    by_name: dict[str, Probe] = {}
    for check in checks:
        for probe in check.probes:
            have = by_name.get(probe.name)
            if have is not None and have.argv != probe.argv:
                raise ValueError(f"probe {probe.name!r} means two commands: {have.argv} vs {probe.argv}")
            if have is None or probe.timeout_s > have.timeout_s:
                by_name[probe.name] = probe
    return tuple(by_name.values())


def run(playbook: Playbook, nodes: Sequence[Node], transport: Transport, *, fanout: int,
        deadline_s: float | None = None, inventory: str | None = None,
        on_node_done: Callable[[str], None] | None = None, stop: threading.Event | None = None,
        excluded: Sequence[str] = ()) -> Report:
    """`excluded`: inventory nodes the playbook's select left out; the report names them."""
    started = datetime.now(timezone.utc)
    deadline_s = deadline_s or playbook.deadline_s
    probes = plan_probes(playbook.checks)
    out = run_probes(transport, {n: probes for n in nodes}, fanout=fanout,
                     deadline=time.monotonic() + deadline_s, on_node_done=on_node_done, stop=stop)
    names = [n.name for n in nodes]
    results = [r for node in names for check in playbook.checks if check.spec.scope == "node"
               for r in judge_node(check, node, out.captures)]
    results += [r for check in playbook.checks if check.spec.scope == "fleet"
                for r in judge_fleet(check, names, out.captures)]
    return Report(run_id=f"{started:%Y%m%dT%H%M%SZ}_{playbook.name}", playbook=playbook.name,
                  playbook_path=playbook.path, playbook_sha256=playbook.sha256, inventory=inventory,
                  started=started, finished=datetime.now(timezone.utc), deadline_s=deadline_s,
                  complete=not out.incomplete, nodes=tuple((n.name, n.address) for n in nodes),
                  results=tuple(results), captures=tuple(out.captures.values()),
                  nodecheck_version=__version__, incomplete_reason=out.incomplete,
                  excluded=tuple(excluded), playbook_includes=playbook.includes)


def judge_node(check: PlannedCheck, node: str,
               captures: Mapping[tuple[str, str], Capture]) -> list[CheckResult]:
    """A check's results on one node; only output that ran to completion reaches the judge."""
    mine = {p.name: captures[(node, p.name)] for p in check.probes}
    evidence = tuple(Evidence(node, c.probe, c.argv, c.exit_code, capture_relpath(node, c.probe))
                     for c in mine.values())
    verdicts = [blocked] if (blocked := _blocked(check, mine)) else _judge(check, mine)
    return [CheckResult(check.spec.name, (node,), v, evidence) for v in verdicts]


def judge_fleet(check: PlannedCheck, nodes: Sequence[str],
                captures: Mapping[tuple[str, str], Capture]) -> list[CheckResult]:
    """A cross-node check: nodes whose probes did not complete get their own result; the judge
    sees the rest together. Every node ends with at least one result, never silence."""
    name = check.spec.name
    results: list[CheckResult] = []
    ready: dict[str, dict[str, Capture]] = {}
    evidence: dict[str, tuple[Evidence, ...]] = {}
    for node in nodes:
        mine = {p.name: captures[(node, p.name)] for p in check.probes}
        evidence[node] = tuple(Evidence(node, c.probe, c.argv, c.exit_code, capture_relpath(node, c.probe))
                               for c in mine.values())
        if blocked := _blocked(check, mine):
            results.append(CheckResult(name, (node,), blocked, evidence[node]))
        else:
            ready[node] = mine
    if not ready:
        return results
    try:
        grouped = list(check.spec.judge(ready, check.params))
    except Exception as e:                     # a judge bug must not take the report down
        verdict = Verdict(Status.ERROR, f"internal error in {name}: {type(e).__name__}: {e}",
                          excerpt=excerpt(traceback.format_exc()))
        grouped = [(tuple(ready), verdict)]
    judged: set[str] = set()
    for group, verdict in grouped:
        group = tuple(n for n in group if n in ready)
        if not group:                          # about no node we judged: nowhere to list it
            continue
        judged.update(group)
        results.append(CheckResult(name, group, verdict,
                                   tuple(e for n in group for e in evidence[n])))
    forgotten = [n for n in ready if n not in judged]
    if forgotten:
        results.append(CheckResult(name, tuple(forgotten),
                                   Verdict(Status.ERROR, f"{name} produced no verdict for these nodes"),
                                   tuple(e for n in forgotten for e in evidence[n])))
    return results


def _blocked(check: PlannedCheck, captures: Mapping[str, Capture]) -> Verdict | None:
    """The outcome that stops judging, most decisive first: unreachable, skipped, timeout, bad exit."""
    by_outcome = {c.outcome: c for c in captures.values()}
    if c := by_outcome.get(Outcome.FAILED):
        return Verdict(Status.ERROR, f"nodecheck could not run {c.probe}: {c.detail}")
    if c := by_outcome.get(Outcome.UNREACHABLE):
        return Verdict(Status.UNREACHABLE, f"unreachable: {c.detail}")
    if c := by_outcome.get(Outcome.SKIPPED):
        return Verdict(Status.SKIPPED, f"{c.probe} not run: {c.detail}")
    if c := by_outcome.get(Outcome.TIMEOUT):
        return Verdict(Status.TIMEOUT, f"{_command(c)} timed out: {c.detail}",
                       observed={"duration_s": round(c.duration_s, 2)},
                       excerpt=excerpt(c.stdout + c.stderr))
    probes = {p.name: p for p in check.probes}
    for c in captures.values():
        if c.exit_code not in probes[c.probe].ok_exit_codes:
            return _bad_exit(c)
    return None


def _command(c: Capture) -> str:
    """How a message names what ran: the command line, or for a probe script, the probe."""
    if len(c.argv) > 2 and c.argv[1] == "-c" and c.argv[0] in ("sh", "bash"):
        return f"{c.probe} probe"              # the script itself is in the capture, not the message
    return " ".join(c.argv)


def _bad_exit(c: Capture) -> Verdict:
    tool = c.argv[0]
    script = len(c.argv) > 2 and c.argv[1] == "-c"
    if c.exit_code == 127 and not script:
        message = f"{tool} not found on the node (exit 127)"
    elif c.exit_code == 126 and not script:
        message = f"{tool} found but not executable (exit 126)"
    else:                                      # a probe script's own exit: its stderr says why
        first = next((ln.strip() for ln in c.stderr.splitlines() if ln.strip()), "no stderr")
        message = f"{_command(c)} exited {c.exit_code}: {first}"
    return Verdict(Status.ERROR, message, observed={"exit_code": c.exit_code},
                   expected={"exit_code": 0}, excerpt=excerpt(c.stderr + c.stdout))


def _judge(check: PlannedCheck, captures: Mapping[str, Capture]) -> list[Verdict]:
    try:
        verdicts = list(check.spec.judge(captures, check.params))
    except ParseError as e:
        return [Verdict(Status.ERROR, f"cannot read {e.tool} output: {e.reason}", excerpt=e.excerpt)]
    except Exception as e:                     # a judge bug must not take the other nodes' reports down
        return [Verdict(Status.ERROR, f"internal error in {check.spec.name}: {type(e).__name__}: {e}",
                        excerpt=excerpt(traceback.format_exc()))]
    return verdicts or [Verdict(Status.ERROR, f"{check.spec.name} produced no verdict")]
