"""The gate's decisions, pure: from a Report (and the nodes' Slurm states) to which nodes to drain,
which to resume, and when to trust nothing (the mass-drain breaker). Nothing here runs a command:
nodecheck.app.slurm changes node states, nodecheck.gate.command runs the checks and applies a Decision.

The rules every mode shares (prolog, prolog --controller, health, sweep --drain/--resume):
* a node is drained only for a status in `drain_on`. Default, on the node itself (node Prolog, local
  health: the local transport): fail and timeout, since there a tool that hangs past its own
  timeout is the node's fault (NVIDIA treats a hung nvidia-smi as a GPU in a bad state) and a
  hung mount already FAILs; over SSH (prolog --controller, health with an inventory, sweep
  --drain): fail only, since an unreachable or timed-out node is incomplete, not unhealthy. A
  TIMEOUT cut short by nodecheck's own side (its run deadline, a stop signal) never drains.
  ERROR (a config problem, an unparsable output, a nodecheck bug) and SKIPPED never drain;
* if one check fails on more than `breaker_share` of the nodes of a run with at least
  `breaker_min_nodes` nodes, the check or its thresholds are suspect (aznhc #142): drain nothing;
* only nodes drained by nodecheck (a reason it marked: "nodecheck[<mark>]: ...", see
  parsers.slurm.reason_owner) are resumed, and only once the check named in the reason ran again
  and everything on the node is healthy; never one remediation held for a person ("<check> needs a
  person: ..."); an unmarked "nodecheck: ..." reason (earlier versions, or
  a person) is held, with how to resume it by hand;
* flaky-prone checks (bandwidth tests) are retried: a failure stands only if every attempt failed.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from nodecheck.config.gate_settings import GateSettings
from nodecheck.core.model import Capture, CheckResult, Status, Verdict, excerpt
from nodecheck.parsers.slurm import NodeState, held_for_a_person, reason_body
from nodecheck.report import Report

DRAIN_STATUS = {"fail": Status.FAIL, "timeout": Status.TIMEOUT, "unreachable": Status.UNREACHABLE}
LOCAL_DRAIN_ON = ("fail", "timeout")  # on the node itself: a tool that hangs there is the node's fault
REMOTE_DRAIN_ON = ("fail",)  # over SSH: unreachable or timed out is incomplete, not unhealthy


def drain_on_for(chosen: Sequence[str] | None, settings: GateSettings, *, local: bool) -> tuple[str, ...]:
    """The statuses that drain: the command line's, else the playbook's gate.drain_on, else the
    default for where the checks ran (LOCAL_DRAIN_ON on the node itself, REMOTE_DRAIN_ON over SSH)."""
    if chosen:
        return tuple(chosen)
    if settings.drain_on:
        return tuple(settings.drain_on)
    return LOCAL_DRAIN_ON if local else REMOTE_DRAIN_ON


@dataclass(frozen=True)
class Blame:
    """Why a node would be drained (or why it could not be judged)."""

    node: str
    check: str
    status: Status
    message: str  # the verdict's message, with its subject
    capture: str = ""  # where the evidence is, inside the report dir

    def reason(self, max_chars: int, token: str = "") -> str:
        """The Slurm drain reason: 'nodecheck[<mark>]: <check> <message>', one line, bounded."""
        from nodecheck.app.slurm import drain_reason

        return drain_reason(self.check, self.message, max_chars, token)


@dataclass(frozen=True)
class Decision:
    drain: tuple[Blame, ...] = ()  # to drain now (empty when the breaker tripped)
    resume: tuple[str, ...] = ()  # drained by nodecheck and now passing
    held: tuple[tuple[str, str], ...] = ()  # (node, why it stays drained) for nodecheck's own drains
    unjudged: tuple[Blame, ...] = ()  # could not be judged: not drained, not resumed
    breaker: str = ""  # why nothing is drained, loudly; "" = not tripped
    blamed: tuple[Blame, ...] = ()  # every failure that would drain, breaker or not

    @property
    def tripped(self) -> bool:
        return bool(self.breaker)


def drain_statuses(drain_on: Iterable[str]) -> frozenset[Status]:
    """The statuses that drain. Only the DRAIN_STATUS words: a caller that got past validation
    with "error" or a typo must not end up with a set that drains on something else (or on nothing)."""
    words = list(drain_on)
    unknown = [w for w in words if w not in DRAIN_STATUS]
    if unknown or not words:
        raise ValueError(
            f"drain_on {words!r}: each must be one of {', '.join(DRAIN_STATUS)} (error and skipped never drain)"
        )
    return frozenset(DRAIN_STATUS[s] for s in words)


def _more_than(count: int, total: int, share: float) -> bool:
    """count/total > share, by division: count > share * total is wrong in floats at the edge
    (0.29 * 100 is 28.999999999999996, so 29 of 100 nodes would count as more than 29%)."""
    return count / total > share


def _percent(share: float) -> str:
    return f"{share * 100:.4g}%"  # 12.5%, not the 12% that :.0% rounds to


def _subject_message(v: Verdict) -> str:
    if v.subject and not v.message.startswith(v.subject):
        return f"{v.subject}: {v.message}"
    return v.message


def draining(r: CheckResult, statuses: frozenset[Status]) -> bool:
    """Does this result drain its node? Its status is one that drains, and a TIMEOUT is the node's
    (its tool ran past the probe's own timeout), not nodecheck's side cutting it short (the run
    deadline, a stop signal, a kept connection already lost)."""
    if r.verdict.status not in statuses:
        return False
    return not (r.verdict.status is Status.TIMEOUT and r.verdict.cut is not None)


def blames(report: Report, statuses: frozenset[Status], order: Sequence[str] = ()) -> dict[str, Blame]:
    """Per node, its first result whose status is in `statuses` (most severe first, then in playbook
    `order`): the one named in the drain reason."""
    rank = {name: i for i, name in enumerate(order)}
    out: dict[str, Blame] = {}
    for node in report.node_names:
        bad = [r for r in report.results_for(node) if draining(r, statuses)]
        if not bad:
            continue
        first = min(bad, key=lambda r: (-r.verdict.status.rank, rank.get(r.check, len(rank))))
        capture = next((e.capture_path for e in first.evidence if e.node == node), "")
        out[node] = Blame(node, first.check, first.verdict.status, _subject_message(first.verdict), capture)
    return out


def unjudged(report: Report, statuses: frozenset[Status]) -> dict[str, Blame]:
    """Nodes with no draining result but some result that is not healthy (error, timeout, skipped...)."""
    out: dict[str, Blame] = {}
    for node in report.node_names:
        results = report.results_for(node)
        if not results:
            out[node] = Blame(node, "-", Status.ERROR, "no result: the node was not checked")
            continue
        if any(draining(r, statuses) for r in results):
            continue
        worst = max(
            (r for r in results if not r.verdict.status.healthy), key=lambda r: r.verdict.status.rank, default=None
        )
        if worst is not None:
            out[node] = Blame(node, worst.check, worst.verdict.status, _subject_message(worst.verdict))
    return out


def run_breaker(report: Report, statuses: frozenset[Status], settings: GateSettings) -> str:
    """'' or why one run's failures look like a bad check or config, not bad nodes."""
    total = len(report.node_names)
    if total < settings.breaker_min_nodes:
        return ""
    names = set(report.node_names)
    by_check: dict[str, set[str]] = {}
    for r in report.results:
        if draining(r, statuses):
            # a drift or pair result names several nodes: each counts once per check, and only
            # nodes of this run count (the denominator is the run's nodes)
            by_check.setdefault(r.check, set()).update(n for n in r.nodes if n in names)
    tripped = {c: n for c, n in by_check.items() if _more_than(len(n), total, settings.breaker_share)}
    if not tripped:
        return ""
    worst_check, nodes = max(sorted(tripped.items()), key=lambda kv: len(kv[1]))
    return (
        f"mass-drain breaker: {worst_check} fails on {len(nodes)} of {total} nodes "
        f"(more than {_percent(settings.breaker_share)}): suspect the check, its thresholds or the "
        f"config, not the nodes; nothing was drained"
        + (f" (also tripped: {', '.join(sorted(c for c in tripped if c != worst_check))})" if len(tripped) > 1 else "")
    )


def cluster_breaker(
    check: str, states: Mapping[str, NodeState], settings: GateSettings, since: datetime | None = None, token: str = ""
) -> str:
    """The node Prolog sees one node per run, so its breaker counts the cluster: '' or why. `states`:
    every node's state (after this node drained itself and the settle wait).

    `since`: count only drains whose reason was set at or after it (NodeState.reason_time, Slurm's
    local time). Without it every standing nodecheck drain for the check counts, old ones too: on
    10 nodes one node drained last week for a real fault and this one make 2 > 10%, so every
    later failure of that check would trip the breaker and never drain. A drain whose time cannot
    be read counts (the breaker errs towards draining nothing)."""
    total = len(states)
    if total < settings.breaker_min_nodes:
        return ""
    cutoff = _local_naive(since) if since is not None else None
    mine = [
        n
        for n, s in states.items()
        if s.drained
        and s.owner(token) == "ours"
        and reason_check(s.reason) == check
        and (cutoff is None or not _set_before(s.reason_time, cutoff))
    ]
    if not _more_than(len(mine), total, settings.breaker_share):
        return ""
    return (
        f"mass-drain breaker: {len(mine)} of {total} nodes are drained by nodecheck for {check} "
        f"(more than {_percent(settings.breaker_share)}): suspect the check, its thresholds or the config; "
        "this node is not drained"
    )


def _local_naive(t: datetime) -> datetime:
    return t.astimezone().replace(tzinfo=None) if t.tzinfo is not None else t


def _set_before(reason_time: str, cutoff: datetime) -> bool:
    """True only when the reason's time is readable and earlier than cutoff."""
    try:
        return _local_naive(datetime.fromisoformat(reason_time)) < cutoff
    except (TypeError, ValueError):
        return False


_REASON_CHECK = re.compile(r"([A-Za-z0-9_.\-]+)")


def reason_check(reason: str) -> str | None:
    """The check a nodecheck drain reason names: 'nodecheck[1a2b3c4d]: gpu.health GPU3 ...' (or the
    old 'nodecheck: gpu.health ...') -> 'gpu.health'. Whose the reason is, is reason_owner's to say."""
    m = _REASON_CHECK.match(reason_body(reason or ""))
    return m.group(1) if m else None


OLD_FORMAT_HELD = (
    "drained with an unmarked nodecheck-style reason ({reason!r}): nodecheck before the "
    'ownership mark wrote these, and so can a person ("held for RMA"), so it is never resumed '
    "automatically; once fixed, resume it by hand: scontrol update nodename={node} state=resume"
)


HELD_FOR_A_PERSON = (
    "held for a person by nodecheck's remediation ({body}); once fixed, resume it by hand: "
    "scontrol update nodename={node} state=resume"
)


def decide(
    report: Report,
    settings: GateSettings,
    *,
    drain_on: Sequence[str] | None = None,
    states: Mapping[str, NodeState] | None = None,
    order: Sequence[str] = (),
    resume: bool = True,
    token: str = "",
) -> Decision:
    """What to do after a run. `states`: the report's nodes' current Slurm states (needed to
    resume; a node missing from it is not resumed). `order`: the playbook's check names. `token`:
    the site's drain token (gate config `drain_token`), whose mark makes a reason nodecheck's."""
    statuses = drain_statuses(drain_on_for(drain_on, settings, local=False))
    blamed = blames(report, statuses, order)
    breaker = run_breaker(report, statuses, settings)
    resumes: list[str] = []
    held: list[tuple[str, str]] = []
    for node in report.node_names if resume else ():
        state = (states or {}).get(node)
        if state is None or not state.drained:
            continue
        owner = state.owner(token)
        if owner == "old" and node not in blamed:
            held.append((node, OLD_FORMAT_HELD.format(reason=excerpt(state.reason, 200), node=node)))
        if owner != "ours":
            continue
        if held_for_a_person(state.reason):
            held.append((node, HELD_FOR_A_PERSON.format(body=excerpt(reason_body(state.reason), 200), node=node)))
            continue
        check = reason_check(state.reason)
        status = report.node_status(node)
        if node in blamed:
            continue  # still failing: stays drained (drain_politely keeps or updates it)
        # the check must have run on this node: that it ran on others says nothing about this one
        ran = {r.check for r in report.results_for(node)}
        if check is None or check not in ran:
            held.append(
                (
                    node,
                    f"drained for {check or 'an unnamed check'}, which this run did not check; "
                    f"resume it by hand once fixed: scontrol update nodename={node} state=resume",
                )
            )
        elif not status.healthy:
            held.append((node, f"not resumed: it could not be judged ({status.value})"))
        else:
            resumes.append(node)
    return Decision(
        drain=() if breaker else tuple(blamed.values()),
        resume=tuple(resumes),
        held=tuple(held),
        unjudged=tuple(unjudged(report, statuses).values()),
        breaker=breaker,
        blamed=tuple(blamed.values()),
    )


# ---- retries of flaky-prone checks -----------------------------------------------------------

FLAKY_DEFAULT = ("ib.pairs", "nccl.allreduce_single", "nccl.allreduce_multi")


def flaky_checks(settings: GateSettings, present: Iterable[str]) -> set[str]:
    wanted = set(settings.flaky if settings.flaky is not None else FLAKY_DEFAULT)
    return wanted & set(present)


def failing(report: Report, checks: set[str], statuses: frozenset[Status]) -> dict[str, set[str]]:
    """{check: nodes with a draining result of that check}, for the checks asked about."""
    out: dict[str, set[str]] = {}
    for r in report.results:
        if r.check in checks and draining(r, statuses):
            out.setdefault(r.check, set()).update(r.nodes)
    return out


def healthy_in(report: Report, check: str) -> set[str]:
    """Nodes whose every result of `check` in this report is healthy (a node with none is not)."""
    seen: dict[str, bool] = {}
    for r in report.results:
        if r.check == check:
            for n in r.nodes:
                # a pass with no test of its own (ib.pairs: "only tests with blamed partners") proves nothing
                proven = r.verdict.status.healthy and r.verdict.observed.get("tests") != 0
                seen[n] = seen.get(n, True) and proven
    return {n for n, ok in seen.items() if ok}


def merge_attempts(
    first: Report, retries: Sequence[Report], checks: set[str], statuses: frozenset[Status], notes: Sequence[str] = ()
) -> Report:
    """The first report with each retried check's failures settled: a node whose failure did not
    repeat in a later attempt gets WARN ("flaky: failed on attempt 1 ..., passed on attempt k"); a
    node that failed every attempt keeps its FAIL, marked with the count. The retries' captures are
    kept beside the first ones (probe "<probe>@retryK").

    A result about several nodes (a pair, a drift group) is split: the nodes that cleared and the
    ones whose failure stands get a result each, and those that stand are grouped by how many
    attempts ran and failed, so every count printed is true of every node it is about. A retry
    that ran but could not judge the node (error, skipped) neither clears nor repeats the failure:
    the FAIL stands and says so. Results of the retries themselves are not added: the first
    report's results are the ones settled. With no retry run, `notes` say why on each failure."""
    if not retries and not notes:
        return first  # nothing was retried, and nothing to say why
    attempts = 1 + len(retries)
    passed_on: dict[tuple[str, str], int] = {}
    for k, again in enumerate(retries, start=2):
        for check in checks:
            for node in healthy_in(again, check):
                passed_on.setdefault((check, node), k)
    results: list[CheckResult] = []
    cleared_now: set[tuple[str, str]] = set()
    for r in first.results:
        v = r.verdict
        if r.check not in checks or not draining(r, statuses) or not r.nodes:
            results.append(r)  # (a result about no node has nothing to settle: kept)
            continue
        stands: dict[tuple[int, int], list[str]] = {}
        cleared: dict[int, list[str]] = {}
        for n in r.nodes:
            if (r.check, n) in passed_on:
                cleared.setdefault(passed_on[(r.check, n)], []).append(n)
                cleared_now.add((r.check, n))
            else:
                stands.setdefault(_tally(retries, r.check, n, statuses), []).append(n)
        for (tried, failed), nodes in stands.items():
            if tried == 1:
                note = f" [retry not run{': ' + notes[0] if notes else ''}]"
            elif failed == tried:
                note = f" [failed on {failed} of {tried} attempts]"
            else:
                note = f" [failed on {failed} of {tried} attempts; the others could not judge it]"
            results.append(
                dataclasses.replace(
                    r,
                    nodes=tuple(nodes),
                    verdict=dataclasses.replace(
                        v,
                        message=v.message + note,
                        observed={**v.observed, "attempts": tried, "failed_attempts": failed},
                    ),
                )
            )
        for k, nodes in sorted(cleared.items()):
            results.append(
                dataclasses.replace(
                    r,
                    nodes=tuple(nodes),
                    verdict=dataclasses.replace(
                        v,
                        status=Status.WARN,
                        message=f"flaky: {v.message} on attempt 1; passed on attempt {k}",
                        observed={**v.observed, "attempts": attempts, "flaky": True},
                    ),
                )
            )
    captures: list[Capture] = list(first.captures)
    for k, again in enumerate(retries, start=1):
        captures += [dataclasses.replace(c, probe=f"{c.probe}@retry{k}") for c in again.captures]
    extras = dict(first.extras)
    extras["gate"] = {
        "attempts": attempts,
        "retried": sorted(checks) if retries else [],
        "cleared": sorted(f"{n} {c}" for (c, n) in cleared_now),
        "notes": list(notes),
    }
    return dataclasses.replace(
        first,
        results=tuple(results),
        captures=tuple(captures),
        finished=retries[-1].finished if retries else first.finished,
        extras=extras,
        complete=first.complete and all(a.complete for a in retries),
        incomplete_reason=first.incomplete_reason
        or next((a.incomplete_reason for a in retries if a.incomplete_reason), ""),
    )


def _tally(retries: Sequence[Report], check: str, node: str, statuses: frozenset[Status]) -> tuple[int, int]:
    """(attempts in which `check` has a result for `node`, attempts in which it failed), the
    first attempt (a failure) included."""
    tried = failed = 1
    for again in retries:
        mine = [x for x in again.results_for(node) if x.check == check]
        tried += bool(mine)
        failed += any(draining(x, statuses) for x in mine)
    return tried, failed
