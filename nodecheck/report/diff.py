"""What a fleet sweep keeps and what changed since the last one (pure): the sweep's snapshot (results
summarised per node and check, version facts, IB error counters, bandwidth measurements), the diff
of two snapshots, and repeat offenders over the last sweeps.

"Failing" is `not Status.healthy`, the one rule: an unreachable, timed-out or unjudged check is
failing, never passed. A node or check missing from a sweep is "not checked", never "recovered"; so
is one the deadline cut (SKIPPED: planned, never run): it was not judged, so it neither recovers nor
counts as a repeat offence, and a judged failure after it is new.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import NamedTuple, TypeGuard

from nodecheck.core.hostlist import fold
from nodecheck.core.model import Status, worst
from nodecheck.judging import counter_rules as C
from nodecheck.judging import nvlink_rules as N
from nodecheck.report import Report

# The value checks (checks/values.py) whose verdicts carry the node's value as observed[what]: a
# sweep keeps each node's value so that the next one can say what was upgraded where.
FACT_CHECKS = (
    "gpu.driver",
    "cuda.version",
    "nccl.version",
    "nccl.settings",
    "ofed.version",
    "hca.firmware",
    "kernel.version",
    "os.release",
    "container.digest",
)
COUNTER_CHECK = "ib.counters"
NVLINK_COUNTER_CHECK = "nvlink.errors"
# Only error counters are kept: data and congestion counters rise all the time (noise, and rows)
KEPT_COUNTERS = tuple(n for n, info in C.COUNTERS.items() if info.kind in (C.FAIL_ON_INCREASE, C.RATE))
# the checks whose verdicts carry a counter snapshot (observed["snapshot"]["counters"]) and the
# counters of it a sweep keeps; their names never overlap (SymbolErrorCounter, crc_flit), so a
# kept counter's name says which check it came from
COUNTER_CHECKS = {COUNTER_CHECK: KEPT_COUNTERS, NVLINK_COUNTER_CHECK: tuple(N.COUNTERS)}
_RESET_WORDS = {
    COUNTER_CHECK: "counters went down: cleared (perfquery -R) or reset",
    NVLINK_COUNTER_CHECK: "counters went down: reset (GPU reset, nvidia-smi nvlink -r)",
}


def counter_check(counter: str) -> str:
    """The check a kept counter's row comes from."""
    return NVLINK_COUNTER_CHECK if counter in N.COUNTERS else COUNTER_CHECK


BUSBW = "busbw"  # nccl-tests bus bandwidth at the plateau, GB/s
PERF_CHECK = "gpu.perf"  # its figures are measurements (name: the metric, subject: the GPU)
PAIR_BW = "ib_write_bw_best"  # a node's best ib_write_bw per HCA in ib.pairs, Gb/s
NO_RESULT = "-"  # the check name of a node no check produced a result for
SECTION_MAX_LINES = 40  # a change list longer than this points at the report


@dataclass(frozen=True)
class ResultRow:
    """A check's verdict on one node as a sweep keeps it: every non-passing verdict, and one
    summary row for a check that passed everything on the node."""

    node: str
    check: str
    status: Status
    message: str
    subject: str = ""


@dataclass(frozen=True)
class CounterRow:
    node: str
    port: str  # "mlx5_3/1" (the ib.counters verdict's subject), "GPU3" (nvlink.errors': links summed)
    counter: str  # "LinkDownedCounter", "crc_flit"
    value: int
    boot_id: str | None  # the node's boot when read: a reboot resets counters
    source: str = ""  # "perfquery -x", "sysfs counters": widths differ


@dataclass(frozen=True)
class Measurement:
    node: str
    check: str
    name: str  # BUSBW, PAIR_BW
    subject: str  # the test ("all_reduce") or the HCA ("mlx5_0")
    value: float
    unit: str  # "GB/s", "Gb/s"


@dataclass(frozen=True)
class SweepSnapshot:
    run_id: str
    playbook: str
    started: datetime
    finished: datetime
    complete: bool
    nodes: tuple[str, ...]  # the nodes this sweep covered
    results: tuple[ResultRow, ...]
    facts: tuple[tuple[str, str, str], ...] = ()  # (node, key, value)
    counters: tuple[CounterRow, ...] = ()
    measurements: tuple[Measurement, ...] = ()
    incomplete_reason: str = ""
    # History.baseline: how many (node, check) results, counters and versions this sweep did not
    # judge or read were taken from older sweeps (their run ids), for the diff
    filled: int = 0
    filled_from: tuple[str, ...] = ()

    @property
    def node_statuses(self) -> dict[str, Status]:
        """As Report.node_status: a node with no result is ERROR, never PASS."""
        by_node: dict[str, list[Status]] = defaultdict(list)
        for r in self.results:
            by_node[r.node].append(r.status)
        return {n: worst(by_node.get(n, ())) for n in self.nodes}

    @property
    def status(self) -> Status:
        return worst(self.node_statuses.values())

    def checks(self) -> dict[tuple[str, str], CheckState]:
        """(node, check) -> its worst status, that verdict's message, and how many of its verdicts
        were not healthy (for "+N more")."""
        grouped: dict[tuple[str, str], list[ResultRow]] = defaultdict(list)
        for r in self.results:
            grouped[(r.node, r.check)].append(r)
        states = {}
        for key, rows in grouped.items():
            status = worst(r.status for r in rows)
            first = next(r for r in rows if r.status is status)
            states[key] = CheckState(status, first.message, sum(1 for r in rows if not r.status.healthy))
        return states


class CheckState(NamedTuple):
    status: Status
    message: str
    unhealthy: int  # verdicts of this check on this node that are not healthy


def snapshot(report: Report) -> SweepSnapshot:
    """What a sweep keeps of its report."""
    return SweepSnapshot(
        run_id=report.run_id,
        playbook=report.playbook,
        started=report.started,
        finished=report.finished,
        complete=report.complete,
        nodes=tuple(report.node_names),
        results=summarise(report),
        facts=facts(report),
        counters=counter_rows(report),
        measurements=measurements(report),
        incomplete_reason=report.incomplete_reason,
    )


def summarise(report: Report) -> tuple[ResultRow, ...]:
    """Every verdict that did not pass, as is; a check that passed everything on a node is one row
    ("8 of 8 pass"): a sweep over 1000 nodes keeps what matters, not 30 000 passes."""
    rows: list[ResultRow] = []
    for node in report.node_names:
        by_check: dict[str, list] = defaultdict(list)
        for r in report.results_for(node):
            by_check[r.check].append(r.verdict)
        if not by_check:  # nothing judged is not healthy (model.worst)
            rows.append(ResultRow(node, NO_RESULT, Status.ERROR, "no check ran on this node"))
        for check, verdicts in by_check.items():
            if all(v.status is Status.PASS for v in verdicts):
                message = verdicts[0].message if len(verdicts) == 1 else f"{len(verdicts)} of {len(verdicts)} pass"
                rows.append(
                    ResultRow(node, check, Status.PASS, message, verdicts[0].subject if len(verdicts) == 1 else "")
                )
            else:
                rows += [
                    ResultRow(node, check, v.status, v.message, v.subject)
                    for v in verdicts
                    if v.status is not Status.PASS
                ]
    return tuple(rows)


def facts(report: Report) -> tuple[tuple[str, str, str], ...]:
    """(node, check, value) from value-check verdicts that name one value (a pass or a drift
    finding); a tie (observed is every group) or an absent thing (None) is no value."""
    found: dict[tuple[str, str], str] = {}
    for r in report.results:
        observed = r.verdict.observed
        if r.check in FACT_CHECKS and len(observed) == 1:
            value = next(iter(observed.values()))
            if isinstance(value, str):
                for node in r.nodes:
                    found.setdefault((node, r.check), value)
    return tuple((node, key, value) for (node, key), value in found.items())


def counter_rows(report: Report) -> tuple[CounterRow, ...]:
    """The error counters of ib.counters' and nvlink.errors' second read (observed["snapshot"]),
    once per port (GPU)."""
    found: dict[tuple[str, str, str], CounterRow] = {}
    for r in report.results:
        kept = COUNTER_CHECKS.get(r.check, ())
        snap = r.verdict.observed.get("snapshot") if kept else None
        if not isinstance(snap, Mapping) or not isinstance(snap.get("counters"), Mapping):
            continue
        for node in r.nodes:
            for name in kept:
                value = snap["counters"].get(name)
                if isinstance(value, int) and not isinstance(value, bool):
                    found.setdefault(
                        (node, r.verdict.subject, name),
                        CounterRow(node, r.verdict.subject, name, value, snap.get("boot_id"), snap.get("source") or ""),
                    )
    return tuple(found.values())


def measurements(report: Report) -> tuple[Measurement, ...]:
    """nccl-tests' judged busbw (observed busbw_plateau_gbs) per node, and each node's best
    ib_write_bw per HCA from ib.pairs' tests (a node paired with a bad partner still shows its
    good tests; a bad node's best is slow)."""
    found: dict[tuple[str, str, str, str], Measurement] = {}
    for r in report.results:
        busbw = r.verdict.observed.get("busbw_plateau_gbs")
        if _finite(busbw):
            for node in r.nodes:
                found.setdefault(
                    (node, r.check, BUSBW, r.verdict.subject),
                    Measurement(node, r.check, BUSBW, r.verdict.subject, float(busbw), "GB/s"),
                )
    pairs = report.extras.get("ib.pairs")
    best: dict[tuple[str, str], float] = {}
    for test in pairs.get("results", []) if isinstance(pairs, Mapping) else []:
        gbps = test.get("gbps")
        if not _finite(gbps):
            continue
        for node in (test.get("server"), test.get("client")):
            key = (node, test.get("device", ""))
            best[key] = max(best.get(key, 0.0), float(gbps))
    for (node, device), gbps in best.items():
        found[(node, "ib.pairs", PAIR_BW, device)] = Measurement(node, "ib.pairs", PAIR_BW, device, gbps, "Gb/s")
    for m in gpu_figures(report):
        found.setdefault((m.node, m.check, m.name, m.subject), m)
    return tuple(found.values())


def gpu_figures(report: Report) -> tuple[Measurement, ...]:
    """gpu.perf's figures per GPU (its report block): GEMM TFLOPS per dtype, HBM, host copies, and for
    NVLink each GPU's slowest pair (one row a GPU, not one a pair: 8 instead of 56 on a board)."""
    block = report.extras.get(PERF_CHECK)
    nodes = block.get("nodes") if isinstance(block, Mapping) else None
    found: dict[tuple[str, str, str], Measurement] = {}
    for node, data in nodes.items() if isinstance(nodes, Mapping) else ():
        for f in data.get("figures", []) if isinstance(data, Mapping) else ():
            value, metric, gpu = f.get("value"), f.get("metric"), f.get("gpu")
            if not (_finite(value) and isinstance(metric, str) and isinstance(gpu, int)):
                continue
            key = (node, metric, f"GPU{gpu}")
            if key not in found or (metric == "nvlink" and value < found[key].value):
                found[key] = Measurement(node, PERF_CHECK, metric, f"GPU{gpu}", float(value), str(f.get("unit", "")))
    return tuple(found.values())


def _finite(value: object) -> TypeGuard[float]:
    """A number that is a measurement: a NaN or infinite bandwidth is none (SQLite would store
    NaN as NULL and refuse the whole sweep; a NaN gauge never crosses an alert threshold)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# ---------------------------------------------------------------- the diff


class Finding(NamedTuple):
    node: str
    check: str
    status: Status  # newly failing: the status now; recovered: what it was
    message: str  # newly failing: the finding now; recovered: the old one


class StatusChange(NamedTuple):
    """Not healthy in both sweeps, but not the same way: a failing node that is now unreachable."""

    node: str
    check: str
    was: Status
    status: Status
    message: str  # the finding now


class VersionChange(NamedTuple):
    node: str
    key: str  # the check: "nccl.version"
    old: str
    new: str


class CounterRise(NamedTuple):
    node: str
    port: str
    counter: str
    old: int
    new: int


class CounterReset(NamedTuple):
    node: str
    port: str  # "" when the whole node rebooted
    reason: str
    check: str = COUNTER_CHECK  # whose counters: ib.counters, nvlink.errors (a reboot: the first seen)


@dataclass(frozen=True)
class Changes:
    previous_run: str | None  # None: the first sweep, nothing to compare
    previous_started: datetime | None = None
    newly_failing: tuple[Finding, ...] = ()
    recovered: tuple[Finding, ...] = ()
    still_failing: int = 0  # (node, check) pairs failing the same way in both sweeps
    status_changed: tuple[StatusChange, ...] = ()  # failing in both sweeps, not the same way
    not_checked: tuple[Finding, ...] = ()  # failing before, not judged now (check left out, cut)
    versions_changed: tuple[VersionChange, ...] = ()
    counters_risen: tuple[CounterRise, ...] = ()
    counters_reset: tuple[CounterReset, ...] = ()
    new_nodes: tuple[str, ...] = ()
    missing_nodes: tuple[str, ...] = ()  # in the last sweep, not in this one: not checked
    previous_incomplete: str = ""  # why the last sweep was cut short ("" if it was not)
    filled: int = 0  # comparisons made with an older sweep (History.baseline)
    filled_from: tuple[str, ...] = ()
    unread: str = ""  # why the history could not be read: nothing compared

    @property
    def first(self) -> bool:
        return self.previous_run is None and not self.unread


def diff(previous: SweepSnapshot | None, current: SweepSnapshot) -> Changes:
    """What changed per (node, check). Only a judgment is compared with a judgment: a check the
    deadline cut (SKIPPED) last time did not fail then, so a failure now is new and a pass now is no
    recovery; one failing last time and cut now is "not checked", never "still failing"."""
    if previous is None:
        return Changes(previous_run=None)
    before, now = previous.checks(), current.checks()
    newly, recovered, changed, not_checked, still = [], [], [], [], 0
    for (node, check), state in now.items():
        old = before.get((node, check))
        was_failing = old is not None and not old.status.healthy and old.status is not Status.SKIPPED
        if state.status.healthy:
            if was_failing:
                assert old is not None  # (was_failing says so)
                recovered.append(Finding(node, check, old.status, _more(old)))
        elif state.status is Status.SKIPPED and was_failing:
            assert old is not None
            not_checked.append(Finding(node, check, old.status, _more(old)))
        elif old is None or old.status.healthy or (old.status is Status.SKIPPED and state.status is not Status.SKIPPED):
            newly.append(Finding(node, check, state.status, _more(state)))
        elif old.status is state.status:
            still += 1
        else:
            changed.append(StatusChange(node, check, old.status, state.status, _more(state)))
    present, known = set(current.nodes), set(previous.nodes)
    for (node, check), old in before.items():
        if (node, check) not in now and node in present and not old.status.healthy and old.status is not Status.SKIPPED:
            not_checked.append(Finding(node, check, old.status, _more(old)))
    risen, reset = counter_changes(previous.counters, current.counters)
    return Changes(
        previous_run=previous.run_id,
        previous_started=previous.started,
        newly_failing=tuple(sorted(newly, key=_order)),
        recovered=tuple(sorted(recovered, key=_order)),
        still_failing=still,
        status_changed=tuple(sorted(changed, key=lambda c: (natural(c.node), c.check))),
        not_checked=tuple(sorted(not_checked, key=_order)),
        versions_changed=_versions(previous.facts, current.facts),
        counters_risen=risen,
        counters_reset=reset,
        new_nodes=tuple(n for n in current.nodes if n not in known),
        missing_nodes=tuple(n for n in previous.nodes if n not in present),
        previous_incomplete="" if previous.complete else previous.incomplete_reason or "no reason recorded",
        filled=previous.filled,
        filled_from=previous.filled_from,
    )


def _more(state: CheckState) -> str:
    return state.message + (f" (+{state.unhealthy - 1} more)" if state.unhealthy > 1 else "")


def _versions(before: Iterable[tuple[str, str, str]], now: Iterable[tuple[str, str, str]]) -> tuple[VersionChange, ...]:
    old = {(node, key): value for node, key, value in before}
    changed = [
        VersionChange(node, key, old[(node, key)], value)
        for node, key, value in now
        if (node, key) in old and old[(node, key)] != value
    ]
    return tuple(sorted(changed, key=lambda c: (c.key, natural(c.node))))


def counter_changes(
    before: Sequence[CounterRow], now: Sequence[CounterRow]
) -> tuple[tuple[CounterRise, ...], tuple[CounterReset, ...]]:
    """A rise within one boot is a rise; a new boot id is a reboot (counters restart at zero) and a
    value that went down within one boot was cleared (perfquery -R) or reset: said as such, never
    as a rise. A port read from another source (perfquery vs sysfs: other widths) is not compared."""
    old = {(c.node, c.port, c.counter): c for c in before}
    risen: list[CounterRise] = []
    reset: dict[tuple[str, str], str] = {}
    checks: dict[tuple[str, str], str] = {}
    for c in now:
        was = old.get((c.node, c.port, c.counter))
        if was is None or was.source != c.source:
            continue
        if was.boot_id and c.boot_id and was.boot_id != c.boot_id:
            checks.setdefault((c.node, ""), counter_check(c.counter))
            reset[(c.node, "")] = "rebooted since the last sweep (new boot id): counters restart at zero"
        elif c.value > was.value:
            risen.append(CounterRise(c.node, c.port, c.counter, was.value, c.value))
        elif c.value < was.value:
            checks.setdefault((c.node, c.port), counter_check(c.counter))
            reset.setdefault((c.node, c.port), _RESET_WORDS[counter_check(c.counter)])
    for node, port in [k for k in reset if k[1]]:
        if (node, "") in reset:  # the reboot says it for every port
            del reset[(node, port)]
    rises = tuple(sorted(risen, key=lambda r: (natural(r.node), natural(r.port), r.counter)))
    resets = [
        CounterReset(node, port, why, checks.get((node, port), COUNTER_CHECK)) for (node, port), why in reset.items()
    ]
    return rises, tuple(sorted(resets, key=lambda r: (natural(r.node), natural(r.port))))


def natural(name: str) -> tuple:
    """node2 before node10, mlx5_2 before mlx5_10."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


def _order(f: Finding) -> tuple:
    return (natural(f.node), f.check)


# ---------------------------------------------------------------- repeat offenders


class NodeSweep(NamedTuple):
    """A node's outcome in one sweep, as history keeps it."""

    sweep: int  # larger is later (the history's sweep id)
    node: str
    status: Status
    failing: tuple[str, ...] = ()  # the checks that were not healthy


class Offender(NamedTuple):
    node: str
    failed_in: int
    of_last: int  # sweeps looked at: n, or fewer if history is shorter
    checks: tuple[str, ...]  # every check that failed in those sweeps


def offenders(rows: Iterable[NodeSweep], k: int, n: int) -> list[Offender]:
    """Nodes that were not healthy in at least k of the last n sweeps (a node not checked in a
    sweep did not fail in it, nor did one whose checks the deadline cut: SKIPPED is the sweep's
    clock, not the node). Most failures first."""
    rows = list(rows)
    window = set(sorted({r.sweep for r in rows}, reverse=True)[:n])
    failed: dict[str, int] = defaultdict(int)
    checks: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        if r.sweep in window and _offence(r.status):
            failed[r.node] += 1
            checks[r.node].update(r.failing)
    found = [
        Offender(node, count, len(window), tuple(sorted(checks[node]))) for node, count in failed.items() if count >= k
    ]
    return sorted(found, key=lambda o: (-o.failed_in, natural(o.node)))


def _offence(status: Status) -> bool:
    return not status.healthy and status is not Status.SKIPPED


def node_sweeps(snap: SweepSnapshot, sweep: int) -> list[NodeSweep]:
    """This sweep's rows for offenders(), before it is in the history."""
    failing: dict[str, set[str]] = defaultdict(set)
    for r in snap.results:
        if _offence(r.status):
            failing[r.node].add(r.check)
    return [NodeSweep(sweep, node, status, tuple(sorted(failing[node]))) for node, status in snap.node_statuses.items()]


# ---------------------------------------------------------------- the human text


def render(
    changes: Changes,
    found: Sequence[Offender],
    k: int,
    n: int,
    now: datetime,
    max_lines: int | None = SECTION_MAX_LINES,
) -> str:
    """The "Since the last sweep" section: each line names the node(s) and the check; identical
    findings on several nodes are one line under a folded node list. A section longer than
    max_lines (None: no limit, as the report's summary.txt keeps it) ends with a count."""
    if changes.unread:
        lines = [f"Since the last sweep: not compared: {changes.unread}"]
    elif changes.first:
        lines = ["Since the last sweep: first sweep: nothing to compare."]
    else:
        age = _age(now - changes.previous_started) if changes.previous_started else "unknown age"
        cut = f"; it was cut short: {changes.previous_incomplete}" if changes.previous_incomplete else ""
        lines = [f"Since the last sweep ({changes.previous_run}, {age} ago{cut}):"]
        if changes.filled:
            lines.append(
                f"  ({changes.filled} results, counters or versions it did not judge or read are compared "
                f"with an older sweep: {', '.join(changes.filled_from)})"
            )
        section = partial(_section, max_lines=max_lines)
        lines += section(
            "newly failing", [(f.node, f"{f.check}  {f.status.value}: {f.message}") for f in changes.newly_failing]
        )
        lines += section(
            "recovered", [(f.node, f"{f.check}  (was {f.status.value}: {f.message})") for f in changes.recovered]
        )
        lines += section(
            "still not healthy, another status",
            [
                (c.node, f"{c.check}  {c.status.value}: {c.message}  (was {c.was.value})")
                for c in changes.status_changed
            ],
        )
        lines += section(
            "not checked this time (failing last time)",
            [(f.node, f"{f.check}  (was {f.status.value}: {f.message})") for f in changes.not_checked],
        )
        lines += section(
            "versions changed", [(c.node, f"{c.key}  {c.old} -> {c.new}") for c in changes.versions_changed]
        )
        lines += section(
            "counters risen",
            [
                (c.node, f"{counter_check(c.counter)}  {c.port} {c.counter} {c.old} -> {c.new} (+{c.new - c.old})")
                for c in changes.counters_risen
            ],
        )
        lines += section(
            "counters reset (not counted as a rise)",
            [(c.node, f"{c.check}  " + (f"{c.port}: " if c.port else "") + c.reason) for c in changes.counters_reset],
        )
        if changes.new_nodes:
            lines.append(f"new nodes: {fold(changes.new_nodes)}")
        if changes.missing_nodes:
            lines.append(f"not checked (in the last sweep, not in this one): {fold(changes.missing_nodes)}")
        if len(lines) == 1 + bool(changes.filled):
            lines.append("no change.")
        lines.append(
            f"still failing: {changes.still_failing} (node, check) {'pair' if changes.still_failing == 1 else 'pairs'}."
        )
    if found:
        lines.append(f"repeat offenders (not healthy in at least {k} of the last {n} sweeps):")
        lines += [
            f"  {o.node}  failed in {o.failed_in} of the last {o.of_last}  {', '.join(o.checks) or '-'}" for o in found
        ]
    return "\n".join(lines) + "\n"


def _section(title: str, items: list[tuple[str, str]], max_lines: int | None = SECTION_MAX_LINES) -> list[str]:
    """(node, text) items: identical texts fold their nodes into one line; at most max_lines
    lines, then a count pointing at the report's summary.txt, which has them all."""
    if not items:
        return []
    groups: dict[str, list[str]] = {}
    for node, text in items:
        groups.setdefault(text, []).append(node)
    lines = [f"  {fold(nodes)}  {text}" for text, nodes in groups.items()]
    if max_lines is not None and len(lines) > max_lines:
        lines = lines[:max_lines] + [f"  ... and {len(lines) - max_lines} more (all in the report's summary.txt)"]
    return [f"{title}:"] + lines


def _age(delta) -> str:
    seconds = max(0, int(delta.total_seconds()))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes} min"
    if minutes:
        return f"{minutes} min {seconds} s"
    return f"{seconds} s"


def to_dict(changes: Changes, found: Sequence[Offender], k: int, n: int) -> dict:
    """The JSON form (sweep --format json)."""

    def finding(f: Finding, status: str = "status") -> dict:
        return {"node": f.node, "check": f.check, status: f.status.value, "message": f.message}

    return {
        "previous_run": changes.previous_run,
        "previous_started": changes.previous_started.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        if changes.previous_started
        else None,
        "first": changes.first,
        "unread": changes.unread,
        "newly_failing": [finding(f) for f in changes.newly_failing],
        "recovered": [finding(f, "was") for f in changes.recovered],
        "still_failing": changes.still_failing,
        "status_changed": [
            {"node": c.node, "check": c.check, "was": c.was.value, "status": c.status.value, "message": c.message}
            for c in changes.status_changed
        ],
        "not_checked": [finding(f, "was") for f in changes.not_checked],
        "versions_changed": [c._asdict() for c in changes.versions_changed],
        "counters_risen": [c._asdict() for c in changes.counters_risen],
        "counters_reset": [c._asdict() for c in changes.counters_reset],
        "new_nodes": list(changes.new_nodes),
        "missing_nodes": list(changes.missing_nodes),
        "previous_incomplete": changes.previous_incomplete,
        "compared_with_older": {"count": changes.filled, "runs": list(changes.filled_from)},
        "offenders": {"k": k, "n": n, "nodes": [{**o._asdict(), "checks": list(o.checks)} for o in found]},
    }
