"""Compare the ranks' flight-recorder dumps per process group: where they diverge, who is missing, who is ahead.

Pure: parsed FRDumps in, one GroupFinding per process group out. Sequence numbers are compared per
process group (the entries' pg name) and over collectives only: p2p entries count their own
p2p_seq_id (and NCCL stamps them with the *current* collective_seq_id, so mixing them in would
make a pending send look like a pending collective); they are reported beside the finding.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nodecheck.forensics.ranks import fold_ranks
from nodecheck.parsers.flight_recorder import FRDump, FREntry

# worst first: a mismatch explains every wait behind it, a rank that never joined explains the rest
KINDS = ("mismatched", "missing", "same_collective", "ahead", "never_started", "p2p_only", "completed")
_SMALL = 4  # at most this many ranks in a group: name their places


@dataclass(frozen=True)
class RankAt:  # what some ranks are doing at the divergence point
    ranks: tuple[int, ...]  # ranks doing the same thing
    collective: str | None  # None: has no entry at that seq (missing)
    sizes: str  # rendered input sizes: "[2048x4096]", "[1]", "" when none
    state: str  # "started", "scheduled", "completed", "" (missing)


@dataclass(frozen=True)
class GroupFinding:
    pg: str  # as the dump names it ("0", "default_pg")
    desc: str
    members: tuple[int, ...]  # ranks of the group (pg_config), else the ranks that have dumps for it
    kind: str  # one of KINDS
    seq: int | None  # the collective_seq_id where it happens (the first not completed by every rank)
    last_completed: Mapping[int, int | None]  # rank -> last completed collective seq id
    at_seq: tuple[RankAt, ...]  # who is in what at seq (majority first)
    missing: tuple[int, ...]  # members with a dump but no entry at seq (never joined)
    no_dump: tuple[int, ...]  # members whose dump was not there / not readable
    ahead: tuple[int, ...]  # members with entries past seq
    p2p_pending: Mapping[int, tuple[str, ...]] = field(default_factory=dict)  # rank -> "send 0->1 [8x16] (started)"


@dataclass(frozen=True)
class _RankView:  # one rank's collectives on one group
    by_seq: Mapping[int, tuple[FREntry, ...]]  # coalesced ops share a seq: one launch, several entries
    done: int  # highest seq known completed (0: none)
    enqueued: int  # highest seq known enqueued


def analyze(dumps: Sequence[FRDump]) -> tuple[GroupFinding, ...]:
    """One finding per process group, worst first."""
    by_rank = {d.rank: d for d in dumps if d.rank is not None}
    names = _group_names(by_rank.values())
    index = _index(by_rank)
    findings = [_group(pg, desc, by_rank, index.get(pg, {})) for pg, desc in names.items()]
    return tuple(sorted(findings, key=lambda f: (KINDS.index(f.kind), f.pg)))


def _index(by_rank: Mapping[int, FRDump]) -> dict[str, dict[int, list[FREntry]]]:
    """pg name -> rank -> its entries on that group, in one pass: a job with tens of groups and a
    thousand ranks' buffers is not scanned once per group."""
    index: dict[str, dict[int, list[FREntry]]] = {}
    for r, d in by_rank.items():
        for e in d.entries:
            index.setdefault(e.pg_name, {}).setdefault(r, []).append(e)
    return index


def _group_names(dumps) -> dict[str, str]:
    """pg name -> desc, from the entries; pg_config only when no dump holds any entry."""
    names: dict[str, str] = {}
    for d in dumps:
        for e in d.entries:
            names.setdefault(e.pg_name, e.pg_desc)
    if not names:
        for d in dumps:
            for key, g in d.groups.items():
                names.setdefault(key, g.desc)
    return names or {"": ""}


def _group(pg: str, desc: str, by_rank: Mapping[int, FRDump], entries: Mapping[int, list[FREntry]]) -> GroupFinding:
    members = _members(pg, by_rank, entries)
    views = {r: _view(pg, by_rank[r], entries.get(r, ())) for r in members if r in by_rank}
    no_dump = tuple(r for r in members if r not in by_rank)
    p2p = _p2p_pending(entries, members)
    done = {r: (v.done or None) for r, v in views.items()}
    base: dict[str, Any] = dict(
        pg=pg, desc=desc, members=members, last_completed=done, no_dump=no_dump, p2p_pending=p2p
    )
    if not any(v.by_seq or v.done for v in views.values()):
        kind = "p2p_only" if any(e.is_p2p for es in entries.values() for e in es) else "never_started"
        return GroupFinding(kind=kind, seq=None, at_seq=(), missing=(), ahead=(), **base)
    seq = min(v.done for v in views.values()) + 1 if views else 1
    if seq > max(v.enqueued for v in views.values()) and not no_dump:
        return GroupFinding(kind="completed", seq=None, at_seq=(), missing=(), ahead=(), **base)
    at, missing, ahead = _at_seq(seq, views)
    return GroupFinding(
        kind=_kind(at, missing, no_dump, ahead), seq=seq, at_seq=at, missing=missing, ahead=ahead, **base
    )


def _members(pg: str, by_rank: Mapping[int, FRDump], entries: Mapping[int, list[FREntry]]) -> tuple[int, ...]:
    """pg_config's ranks where a dump names this group with a rank list; else the ranks whose dump
    mentions the group. (gloo's pg_config in torch 2.13 is keyed "" with the last group's ranks, so
    it cannot be trusted to name a group it does not key.)"""
    for d in by_rank.values():
        g = d.groups.get(pg)
        if g is not None and g.ranks:
            return tuple(sorted(set(g.ranks)))
    mention = set(entries)
    pg_ids = {e.pg_id for es in entries.values() for e in es if e.pg_id is not None}
    mention |= {r for r, d in by_rank.items() if any(str(i) in d.status for i in pg_ids)}
    return tuple(sorted(mention or by_rank))


def _view(pg: str, d: FRDump, on_group: Sequence[FREntry]) -> _RankView:
    entries = [e for e in on_group if not e.is_p2p and e.collective_seq_id is not None]
    by_seq: dict[int, list[FREntry]] = defaultdict(list)
    for e in entries:
        if e.collective_seq_id is not None:  # (entries holds only those with one)
            by_seq[e.collective_seq_id].append(e)
    status = _status(pg, d, entries)
    done = max(
        [s for s, es in by_seq.items() if all(_completed(e) for e in es)]
        + [status.last_completed if status and status.last_completed else 0],
        default=0,
    )
    if by_seq and done < min(by_seq) - 1:
        # collectives on one group complete in order: whatever fell off the ring buffer's old end
        # was done before its oldest surviving entry was enqueued
        done = min(by_seq) - 1
    enqueued = max(list(by_seq) + [status.last_enqueued if status and status.last_enqueued else 0, done])
    return _RankView(by_seq={s: tuple(es) for s, es in by_seq.items()}, done=done, enqueued=enqueued)


def _status(pg: str, d: FRDump, entries: Sequence[FREntry]):
    # pg_status is keyed by pg_id; the entries say which pg_id this pg name has on this rank
    ids = {e.pg_id for e in entries if e.pg_id is not None}
    keys = [str(i) for i in ids] or [pg]
    return next((d.status[k] for k in keys if k in d.status), None)


def _completed(e: FREntry) -> bool:
    # NCCL moves state to "completed". Gloo (torch 2.13, recorded) leaves every entry "scheduled"
    # and only flips retired once the work is done; for NCCL a retired-but-not-completed entry is a
    # timeout, so that reading stays gloo's alone
    return e.state == "completed" or (e.backend == "gloo" and bool(e.retired))


def _at_seq(seq: int, views: Mapping[int, _RankView]):
    buckets: dict[tuple, list[int]] = defaultdict(list)
    missing, ahead = [], []
    for r, v in sorted(views.items()):
        if any(s > seq for s in v.by_seq) or v.done > seq:
            ahead.append(r)
        es = v.by_seq.get(seq)
        if es:
            state = "completed" if all(_completed(e) for e in es) else es[0].state
            buckets[(_what(es), _sizes(es), state)].append(r)
        elif v.done < seq and v.enqueued < seq:
            missing.append(r)
    at = [RankAt(tuple(rs), what, sizes, state) for (what, sizes, state), rs in buckets.items()]
    at.sort(key=lambda a: (-len(a.ranks), a.ranks))
    return tuple(at), tuple(missing), tuple(ahead)


def _what(es: Sequence[FREntry]) -> str:
    return "+".join(e.collective for e in es)


def _sizes(es: Sequence[FREntry]) -> str:
    dims = [d for e in es for d in e.input_sizes]
    return f"[{', '.join('x'.join(map(str, d)) for d in dims)}]" if dims else ""


def _kind(at: Sequence[RankAt], missing, no_dump, ahead) -> str:
    if len({(a.collective, a.sizes) for a in at}) > 1:
        return "mismatched"
    if missing or no_dump:
        return "missing"
    if ahead or any(a.state == "completed" for a in at):
        return "ahead"
    return "same_collective"


def _p2p_pending(entries: Mapping[int, list[FREntry]], members) -> dict[int, tuple[str, ...]]:
    out = {}
    for r in members:
        ops = [e for e in entries.get(r, ()) if e.is_p2p and not _completed(e)]
        if ops:
            out[r] = tuple(
                f"{e.profiling_name.partition(':')[2] or e.profiling_name} {_sizes([e])} ({e.state}, "
                f"p2p seq {e.p2p_seq_id})".replace("  ", " ")
                for e in ops
            )
    return out


# ---- rendering ------------------------------------------------------------------------------


def _who(ranks: Sequence[int], place: Callable[[int], str]) -> str:
    word = "rank" if len(ranks) == 1 else "ranks"
    places = [place(r) for r in ranks] if len(ranks) <= _SMALL else []
    where = f" ({', '.join(places)})" if places and all(places) else ""
    return f"{word} {fold_ranks(ranks)}{where}"


def _doing(a: RankAt, place, show_state: bool) -> str:
    sizes = f" {a.sizes}" if a.sizes else ""
    state = f" ({a.state})" if show_state and a.state else ""
    return f"{_who(a.ranks, place)} in {a.collective}{sizes}{state}"


def _never_joined(f: GroupFinding, place) -> list[str]:
    out = []
    if f.missing:
        last = sorted({f.last_completed.get(r) for r in f.missing}, key=lambda x: (x is None, x))
        told = "/".join("none" if x is None else str(x) for x in last)
        out.append(f"{_who(f.missing, place)} never joined (last completed seq {told})")
    if f.no_dump:
        out.append(f"{_who(f.no_dump, place)} left no readable dump")
    return out


def describe(f: GroupFinding, place: Callable[[int], str] = lambda r: "") -> str:
    """One line for an operator: who is where, and what that means."""
    name = f"pg {f.pg or '(unnamed)'}"
    n = len(f.members)
    if f.kind == "never_started":
        return f"{name}: no collective ever ran on any of {n} ranks — rendezvous or init"
    if f.kind == "p2p_only":
        return f"{name}: only point-to-point ops, no collective to compare{_p2p_tail(f, place)}"
    if f.kind == "completed":
        last = max((x for x in f.last_completed.values() if x is not None), default=None)
        return f"{name}: all {n} ranks completed every collective they enqueued (last seq {last}){_p2p_tail(f, place)}"
    head = f"{name} seq {f.seq}: "
    if f.kind == "mismatched":
        parts = [_doing(a, place, False) for a in f.at_seq] + _never_joined(f, place)
        major = f.at_seq[0].collective
        if any(a.collective != major for a in f.at_seq[1:]):
            odd = sorted(r for a in f.at_seq[1:] if a.collective != major for r in a.ranks)
            tail = f" — mismatched collectives; {_who(odd, lambda r: '')} left the loop early"
        else:
            tail = " — mismatched collectives: same collective, different sizes"
        return head + ", ".join(parts) + tail + _p2p_tail(f, place)
    if f.kind == "missing":
        parts = [_doing(a, place, True) for a in f.at_seq] + _never_joined(f, place)
        plural = "s" if len(f.missing) + len(f.no_dump) > 1 else ""
        return head + ", ".join(parts) + f" — missing rank{plural}" + _p2p_tail(f, place)
    if f.kind == "same_collective":
        a = f.at_seq[0]
        sizes = f" {a.sizes}" if a.sizes else ""
        return (
            head + f"all {len(a.ranks)} ranks in {a.collective}{sizes} ({a.state}), none completed — all ranks "
            f"in the same collective: look below NCCL at the network" + _p2p_tail(f, place)
        )
    behind = sorted(r for a in f.at_seq if a.state != "completed" for r in a.ranks)
    parts = [_doing(a, place, True) for a in f.at_seq]
    return (
        head + ", ".join(parts) + f"; {_who(f.ahead, place)} moved on past it — "
        f"{_who(behind, place)} behind: a straggler" + _p2p_tail(f, place)
    )


def _p2p_tail(f: GroupFinding, place) -> str:
    if not f.p2p_pending:
        return ""
    ops = "; ".join(f"{_who([r], place)} {', '.join(v)}" for r, v in sorted(f.p2p_pending.items()))
    return f"; pending p2p: {ops}"


def last_completed_text(f: GroupFinding) -> str:
    """ "seq 20 on ranks 0-1,3; seq 19 on rank 2; none on rank 5": the last collective each rank completed."""
    by_seq: dict[int | None, list[int]] = {}
    for rank, seq in sorted(f.last_completed.items()):
        by_seq.setdefault(seq, []).append(rank)
    parts = [
        f"{'none' if seq is None else f'seq {seq}'} on {_who(ranks, lambda r: '')}"
        for seq, ranks in sorted(by_seq.items(), key=lambda kv: (kv[0] is None, -(kv[0] or 0)))
    ]
    return "; ".join(parts) or "no rank's dump holds this group"
