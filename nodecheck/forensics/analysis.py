"""From what was gathered to the findings: the flight-recorder dumps parsed and compared, every rank's
stack parsed and grouped, each node's events of the job's lifetime, and the diagnosis. Pure: gathered
facts in, a Forensics value out."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from nodecheck.core.errors import ParseError
from nodecheck.forensics.collect import DumpRead, Gathered, targets
from nodecheck.forensics.collectives import GroupFinding, analyze
from nodecheck.forensics.ranks import RankProcess, duplicated
from nodecheck.forensics.stacks import ProcessStack, StackGroup, group_stacks
from nodecheck.forensics.verdict import Diagnosis, NodeEvents, diagnose
from nodecheck.parsers.flight_recorder import DUMP_TIME_LIMIT_S, FRDump, parse_dump
from nodecheck.parsers.forensics import StackResult
from nodecheck.parsers.pyspy import parse_pyspy_dump, pyspy_failure

TIMED_OUT = (124, 137)  # timeout(1): the bound fired; 137 after its -k grace
EVENT_MARGIN_S = 600.0  # kernel events this long before the job's oldest process count
NO_START_WINDOW_S = 86_400.0  # when the job's start is unknown: the last day
MAX_EVENTS = 5  # per node and kind, newest kept
# One budget for all the dumps of a run, besides each dump's own bounds: 512 ranks' dumps, each
# allowed 30 s, could hold the run for hours, and every parsed dump is kept for the comparison. A
# dump past either budget is not read, and says why (the others still are compared).
DUMPS_BUDGET_S = 120.0  # a 2,000-entry dump reads in 0.1 s: 512 such take ~50 s
DUMPS_BUDGET_BYTES = 1 << 30  # dump bytes parsed in all (a 2,000-entry dump is ~1 MB)


@dataclass(frozen=True)
class ReadDump:
    read: DumpRead
    dump: FRDump | None
    error: str = ""  # why it could not be used ("" when dump is set)


@dataclass(frozen=True)
class Forensics:
    gathered: Gathered | None
    dumps: tuple[ReadDump, ...]
    findings: tuple[GroupFinding, ...]
    stacks: tuple[ProcessStack, ...]
    groups: tuple[StackGroup, ...]
    events: dict
    diagnosis: Diagnosis
    notes: tuple[str, ...]  # what limits the evidence (no py-spy, unreadable dumps, ...)


def examine(
    gathered: Gathered | None,
    dump_reads: Sequence[DumpRead],
    stack_timeout_s: float,
    *,
    dumps_budget_s: float = DUMPS_BUDGET_S,
    dumps_budget_bytes: int = DUMPS_BUDGET_BYTES,
) -> Forensics:
    reads = _parse_all(dump_reads, dumps_budget_s, dumps_budget_bytes)
    usable = _latest_per_rank([r.dump for r in reads if r.dump is not None])
    findings = analyze(usable) if usable else ()
    processes = gathered.processes if gathered else []
    stacks = tuple(_stack(gathered, p, stack_timeout_s) for p in targets(processes)) if gathered else ()
    groups = group_stacks(stacks)
    events = _events(gathered) if gathered else {}
    nodes = gathered.nodes if gathered else sorted({d.node for d in dump_reads if d.node})
    unreached = sorted(gathered.failures) if gathered else []
    diagnosis = diagnose(findings, stacks, processes, events, nodes, unreached)
    return Forensics(gathered, reads, findings, stacks, groups, events, diagnosis, _notes(gathered, reads, processes))


def _now() -> float:
    return time.monotonic()


def _parse_all(dump_reads: Sequence[DumpRead], budget_s: float, budget_bytes: int) -> tuple[ReadDump, ...]:
    """Every dump parsed, each within what is left of the run's time and bytes for dumps."""
    started, used, parsed, out = _now(), 0, 0, []
    for d in dump_reads:
        if d.data is None:
            out.append(ReadDump(d, None, d.note))
            continue
        left = budget_s - (_now() - started)
        if left <= 0:
            why = f"not read: the run's {budget_s:g} s for reading dumps was spent on the {parsed} read before it"
            out.append(ReadDump(d, None, why))
            continue
        if used + len(d.data) > budget_bytes:
            why = (
                f"not read: the run's dumps are past {budget_bytes:,} bytes read "
                f"({used:,} bytes in the {parsed} read before it, {len(d.data):,} in this one)"
            )
            out.append(ReadDump(d, None, why))
            continue
        used, parsed = used + len(d.data), parsed + 1
        out.append(_parse(d, min(DUMP_TIME_LIMIT_S, left)))
    return tuple(out)


def _parse(d: DumpRead, time_limit_s: float = DUMP_TIME_LIMIT_S) -> ReadDump:
    if d.data is None:
        return ReadDump(d, None, d.note)
    try:
        return ReadDump(d, parse_dump(d.data, source=d.path, time_limit_s=time_limit_s))
    except ParseError as e:
        return ReadDump(d, None, f"unreadable: {e.reason}")
    except Exception as e:  # noqa: BLE001 - one hostile dump is that dump's error, never the run's
        return ReadDump(d, None, f"unreadable: {type(e).__name__} while reading it")


def _latest_per_rank(dumps: Sequence[FRDump]) -> list[FRDump]:
    """One dump per rank: a rank that dumped twice (two prefixes, an older run's file) counts once,
    by the dump that holds the newest entry."""
    best: dict[object, FRDump] = {}
    for d in dumps:
        key = d.rank if d.rank is not None else d.source
        newest = max((e.time_created_ns or 0 for e in d.entries), default=0)
        have = best.get(key)
        if have is None or newest > max((e.time_created_ns or 0 for e in have.entries), default=0):
            best[key] = d
    return list(best.values())


def _stack(g: Gathered, p: RankProcess, timeout_s: float) -> ProcessStack:
    result = g.stack_results.get((p.node, p.pid))
    if result is None:
        why = g.stack_failures.get(p.node) or "no stack was taken (the run's deadline came first)"
        return ProcessStack(p, None, why)
    raw = result.stdout + (f"\n--- stderr ---\n{result.stderr}" if result.stderr.strip() else "")
    if result.unpaused:
        raw += f"\n--- py-spy dump --nonblocking (exit {result.unpaused_rc}) ---\n{result.unpaused}"
    if result.rc in TIMED_OUT:
        return ProcessStack(p, None, _no_answer(result, timeout_s), raw, _unpaused(result))
    if result.rc != 0:
        return ProcessStack(
            p, None, f"py-spy failed: {pyspy_failure(result.stdout, result.stderr, result.rc)}", raw, _unpaused(result)
        )
    try:
        return ProcessStack(p, parse_pyspy_dump(result.stdout), "", raw)
    except ParseError as e:
        return ProcessStack(p, None, f"unreadable py-spy output: {e.reason}", raw)


def _unpaused(r: StackResult):
    """The stack read without stopping the process, when that worked."""
    if r.unpaused_rc != 0 or not r.unpaused:
        return None
    try:
        return parse_pyspy_dump(r.unpaused)
    except ParseError:
        return None


def _no_answer(r: StackResult, timeout_s: float) -> str:
    state = f"; process state {r.state}" if r.state else ""
    wchan = f", waiting in the kernel at {r.wchan}" if r.wchan else ""
    hint = " (stuck below Python: the kernel or the driver)" if r.state.startswith("D") else ""
    return f"py-spy got no answer within {timeout_s:g} s{state}{wchan}{hint}"


def _events(g: Gathered) -> dict[str, NodeEvents]:
    """Each reached node's Xid events and OOM kills of the job's lifetime, its NCCL WARN lines; a kernel
    log that could not be read says so (no Xid read is not "no Xid")."""
    events = {}
    for node, snap in g.snapshots.items():
        log, now, error = _kernel_log(g.kernel.get(node))
        xids, ooms = [], []
        if log is not None:
            since = _since(now, [p for p in g.processes if p.node == node])
            xids = [_xid_line(x) for x in _within(log.xids, since)]
            ooms = [
                f"OOM kill of {f'{o.process} (pid {o.pid})' if o.process else f'pid {o.pid}'}{_at(o.time)}"
                for o in _within(log.ooms, since)
            ]
        events[node] = NodeEvents(tuple(xids), tuple(ooms), snap.nccl_warns, error)
    return events


def _kernel_log(capture):
    """(parsed log, the node's clock, "") or (None, None, why it was not read)."""
    from nodecheck.core.model import Outcome
    from nodecheck.probes.kernel_log import read_kernel_log

    if capture is None:
        return None, None, "not gathered"
    if capture.outcome is not Outcome.EXITED:
        return None, None, f"{capture.outcome.value}: {capture.detail}".rstrip(": ")
    try:
        log, now, _, _ = read_kernel_log({capture.probe: capture})
    except ParseError as e:
        return None, None, e.reason
    return log, now, ""


def _within(events, since: datetime | None) -> list:
    """The newest MAX_EVENTS events at or after `since` (an event without a time counts: it may be recent)."""
    return [e for e in events if since is None or e.time is None or e.time >= since][-MAX_EVENTS:]


def _xid_line(x) -> str:
    from nodecheck.parsers.xid_codes import classify

    gpu = f" on GPU {x.pci}" if x.pci else ""
    return f"Xid {x.code} ({classify(x.code)[1]}){gpu}{_at(x.time)}"


def _since(now: datetime | None, processes: Sequence[RankProcess]) -> datetime | None:
    """From a little before the job's oldest process started (the node's clock), else the last day."""
    if now is None:
        return None
    ran = [p.elapsed_s for p in processes if p.elapsed_s is not None]
    return now - timedelta(seconds=max(ran) + EVENT_MARGIN_S if ran else NO_START_WINDOW_S)


def _at(t: datetime | None) -> str:
    return f" at {t.astimezone(timezone.utc):%Y-%m-%d %H:%M:%SZ}" if t is not None else ""


def _notes(g: Gathered | None, reads: Sequence[ReadDump], processes: Sequence[RankProcess]) -> tuple[str, ...]:
    notes = []
    if g is not None:
        for node, why in sorted(g.failures.items()):
            notes.append(f"{node}: not read: {why}")
        for node, why in sorted(g.stack_failures.items()):
            notes.append(f"{node}: no stacks: {why}")
        for node, snap in sorted(g.snapshots.items()):
            if snap.procs_error:
                notes.append(f"{node}: the job's processes could not be listed: {snap.procs_error}")
            elif not snap.processes:
                notes.append(f"{node}: no process of the job found")
            for prefix in snap.relative_prefixes:
                notes.append(
                    f"{node}: dump prefix {prefix!r} is relative to the job's directory: not listed "
                    "(pass --dumps with the files)"
                )
        if g.incomplete:
            notes.append(f"incomplete: {g.incomplete}")
        for rank, ps in sorted(duplicated(processes).items()):
            notes.append(
                f"rank {rank} is claimed by {len(ps)} processes ({', '.join(f'{p.node} pid {p.pid}' for p in ps)}): "
                "is the pattern matching two jobs?"
            )
    for r in reads:
        if r.dump is None:
            notes.append(f"dump {r.read.path}{' on ' + r.read.node if r.read.node else ''}: {r.error}")
    if not reads:
        notes.append(
            "no flight-recorder dump found (TORCH_NCCL_DUMP_ON_TIMEOUT=1 writes them when the watchdog "
            "fires; a job still inside its timeout has none yet)"
        )
    return tuple(notes)
