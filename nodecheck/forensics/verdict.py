"""The likely class of a hang, its culprit ranks and nodes, the evidence and the next step, from what
forensics gathered: flight-recorder findings first (they are the job's own record of its collectives),
then the stacks, then the nodes (Xid, OOM kills, NCCL warnings, processes that are gone).

Classes (the issue's): mismatched collectives; a rank missing or dead; all ranks in the same
collective (look below NCCL, at the network); no collective ever ran (rendezvous or init); and
undetermined when nothing gathered tells.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from nodecheck.forensics.collectives import GroupFinding, describe
from nodecheck.forensics.ranks import RankProcess, expected_world, likely_node, missing_ranks, ranks_phrase
from nodecheck.forensics.stacks import ProcessStack, collective_of, frame_text, in_init, python_frames, summary_frames

MISMATCHED = "mismatched collectives"
MISSING = "a rank missing or dead"
SAME = "all ranks in the same collective"
NEVER = "no collective ever ran"
UNDETERMINED = "undetermined"
CLASSES = (MISMATCHED, MISSING, SAME, NEVER, UNDETERMINED)

# which flight-recorder finding means which class (collectives.GroupFinding.kind)
# ("ahead": the others moved past a collective some ranks are still in: those are stuck, the others wait
# for them in the next one)
_FINDING_CLASS = {
    "mismatched": MISMATCHED,
    "missing": MISSING,
    "ahead": MISSING,
    "same_collective": SAME,
    "never_started": NEVER,
}
# a worse class wins when process groups disagree: a mismatch explains a wait elsewhere, a dead rank
# explains the rest waiting
_RANK = {MISMATCHED: 0, MISSING: 1, SAME: 2, NEVER: 3, UNDETERMINED: 4}


@dataclass(frozen=True)
class NodeEvents:
    """What a node's kernel and the job's log said (already chosen as relevant by the caller)."""

    xids: tuple[str, ...] = ()  # one line each: "Xid 79 (GPU has fallen off the bus) at ..."
    ooms: tuple[str, ...] = ()
    nccl_warns: tuple[str, ...] = ()
    kernel_error: str = ""  # the kernel log was not read: no Xid is then not "no Xid"


@dataclass(frozen=True)
class Diagnosis:
    kind: str  # one of CLASSES
    culprit_ranks: tuple[int, ...]
    culprit_nodes: tuple[str, ...]
    evidence: tuple[str, ...]
    next_step: str
    basis: str  # "flight recorder", "flight recorder and the stacks", "stacks", ...

    @property
    def headline(self) -> str:
        who = ""
        if self.culprit_ranks:
            who = f"; culprit {ranks_phrase(self.culprit_ranks)}"
        if self.culprit_nodes:
            who += f" on {', '.join(self.culprit_nodes)}" if who else f"; culprit node {', '.join(self.culprit_nodes)}"
        return f"{self.kind}{who} (from the {self.basis})" if self.basis else f"{self.kind}{who}"


def diagnose(
    findings: Sequence[GroupFinding],
    stacks: Sequence[ProcessStack],
    processes: Sequence[RankProcess],
    events: Mapping[str, NodeEvents],
    nodes: Sequence[str],
    unreached: Sequence[str] = (),
) -> Diagnosis:
    by_rank = {p.rank: p for p in processes if p.rank is not None}

    def place(rank: int) -> str:
        p = by_rank.get(rank)
        return p.place if p is not None else ""

    from_fr = _from_findings(findings, place)
    from_stacks = _from_stacks(stacks, processes)
    gone = missing_ranks(processes)
    if from_fr is not None and from_fr[0] != UNDETERMINED:
        kind, culprits, evidence = from_fr
        basis = "flight recorder"
        if from_stacks is not None and from_stacks[0] == kind:
            basis += " and the stacks"
            evidence += from_stacks[2]
        elif from_stacks is not None:
            evidence += tuple(f"stacks: {line}" for line in from_stacks[2])
    elif from_stacks is not None:
        kind, culprits, evidence = from_stacks
        basis = "stacks"
        evidence += tuple(f"flight recorder: {line}" for line in (from_fr[2] if from_fr else ()))
    else:
        kind, culprits, evidence, basis = UNDETERMINED, (), from_fr[2] if from_fr else (), ""
    if gone and kind in (UNDETERMINED, SAME, MISSING):
        # ranks the world size promises but no process holds: dead (or their node was not reached)
        where = {r: likely_node(r, processes) for r in gone}
        evidence += (
            f"no process holds {ranks_phrase(gone)} of the world size {expected_world(processes)}"
            + "".join(f"; rank {r} ran on {n}" for r, n in where.items() if n)
            + ": dead, or on a node not reached",
        )
        if kind != MISSING:
            kind, basis = MISSING, basis or "processes"
        culprits = tuple(sorted(set(culprits) | set(gone)))
    culprit_nodes = _nodes_of(culprits, by_rank, processes)
    if unreached:
        evidence += (f"not reached: {', '.join(unreached)} (their ranks' stacks and dumps are missing)",)
        if kind == UNDETERMINED:
            culprit_nodes = tuple(unreached)
    evidence += _events(events, culprit_nodes or tuple(nodes))
    return Diagnosis(
        kind, tuple(culprits), culprit_nodes, tuple(evidence), _next_step(kind, culprit_nodes, nodes, unreached), basis
    )


def _from_findings(findings: Sequence[GroupFinding], place) -> tuple[str, tuple[int, ...], tuple[str, ...]] | None:
    if not findings:
        return None
    judged = [f for f in findings if f.kind in _FINDING_CLASS]
    if not judged:
        return UNDETERMINED, (), tuple(describe(f, place) for f in findings)
    worst = min(judged, key=lambda f: _RANK[_FINDING_CLASS[f.kind]])
    kind = _FINDING_CLASS[worst.kind]
    if kind == MISMATCHED:
        culprits = tuple(r for at in worst.at_seq[1:] for r in at.ranks)  # the minority (majority first)
    elif worst.kind == "ahead":
        culprits = tuple(r for r in worst.members if r not in worst.ahead and r not in worst.no_dump)
    elif kind == MISSING:
        culprits = tuple(worst.missing) + tuple(worst.no_dump)
    else:
        culprits = ()
    evidence = tuple(describe(f, place) for f in sorted(judged, key=lambda f: _RANK[_FINDING_CLASS[f.kind]]))
    return kind, tuple(sorted(set(culprits))), evidence


def _from_stacks(stacks: Sequence[ProcessStack], processes: Sequence[RankProcess]):
    """The class as the stacks alone show it: where each rank waits (the innermost collective frame)."""
    ranked = [s for s in stacks if s.process.rank is not None]
    if not ranked:
        return None
    waiting: dict[str, list[int]] = {}
    elsewhere: dict[int, str] = {}
    silent: dict[int, str] = {}
    init: list[int] = []
    for s in ranked:
        rank = s.process.rank
        assert rank is not None  # ranked: only processes with a rank
        if s.stacks is None:
            silent[rank] = s.failure
            continue
        frames = python_frames(s.stacks)
        name = collective_of(frames)
        if name is not None:
            waiting.setdefault(name, []).append(rank)
        elif in_init(frames):
            init.append(rank)
        else:
            elsewhere[rank] = " \u2190 ".join(frame_text(f) for f in summary_frames(frames)) or "no Python frames"
    answered = sum(len(v) for v in waiting.values()) + len(elsewhere) + len(init)
    if not answered:
        return UNDETERMINED, tuple(sorted(silent)), tuple(f"rank {r}: {why}" for r, why in sorted(silent.items()))
    if init and not waiting and not elsewhere:
        return NEVER, (), (f"{ranks_phrase(init)} still in rendezvous / process-group init",)
    order = sorted(waiting.items(), key=lambda kv: (-len(kv[1]), min(kv[1])))
    evidence = [f"{ranks_phrase(rs)} waiting in {name}" for name, rs in order]
    evidence += [f"rank {r} not in any collective: {where}" for r, where in sorted(elsewhere.items())]
    evidence += [f"rank {r} in rendezvous / init" for r in sorted(init)]
    evidence += [f"rank {r}: {why}" for r, why in sorted(silent.items())]
    if len(waiting) > 1:
        minority = tuple(sorted(r for _, rs in order[1:] for r in rs))
        return MISMATCHED, minority, tuple(evidence)
    if waiting and (elsewhere or init or silent):
        # the others wait for these: they never joined (busy elsewhere, or stuck below Python)
        return MISSING, tuple(sorted(set(elsewhere) | set(init) | set(silent))), tuple(evidence)
    if waiting:
        return SAME, (), tuple(evidence)
    return UNDETERMINED, (), tuple(evidence)


def _nodes_of(
    ranks: Sequence[int], by_rank: Mapping[int, RankProcess], processes: Sequence[RankProcess]
) -> tuple[str, ...]:
    nodes = []
    for r in ranks:
        p = by_rank.get(r)
        node = p.node if p is not None else likely_node(r, processes)
        if node and node not in nodes:
            nodes.append(node)
    return tuple(nodes)


def _events(events: Mapping[str, NodeEvents], nodes: Sequence[str]) -> tuple[str, ...]:
    """The kernel's and the job log's words about the nodes that matter (the culprits', else all)."""
    lines = []
    for node in nodes:
        e = events.get(node)
        if e is None:
            continue
        lines += [f"{node}: {x}" for x in e.xids] + [f"{node}: {o}" for o in e.ooms]
        lines += (
            [f"{node}: kernel log not read ({e.kernel_error}): Xid and OOM kills unknown"] if e.kernel_error else []
        )
        lines += [f"{node}: {w}" for w in e.nccl_warns[-3:]]
    return tuple(lines)


def _next_step(kind: str, culprit_nodes: Sequence[str], nodes: Sequence[str], unreached: Sequence[str] = ()) -> str:
    from nodecheck.core.hostlist import fold

    culprits = fold(list(culprit_nodes)) if culprit_nodes else ""
    everyone = fold(list(nodes)) if nodes else "the job's nodes"
    if kind == MISMATCHED:
        return (
            "the ranks took different code paths to the same collective slot: check the data balance "
            "(nodecheck job-check JOB.yml: job.data_balance) and any rank-dependent branch before the "
            "collective the minority is in; restart from the last checkpoint once fixed"
        )
    if kind == MISSING:
        if not culprits:  # (--dumps alone: no process says where a rank ran)
            return (
                "read the missing ranks' own log and the Xid/OOM lines above; find the node they ran on (the "
                "launcher's log, or forensics with --slurm-job / --match) and check it with nodecheck run"
            )
        return (
            f"read the missing ranks' own log and the Xid/OOM lines above; if {culprits} is at fault, drain it "
            f"(scontrol update nodename={culprits} state=drain reason='forensics: hung collective, see the record') "
            f"and check it: "
            f"nodecheck run hosts.yml --nodes '{culprits}'"
        )
    if kind == SAME:
        return (
            f"every rank waits in the same collective: look below NCCL, at the network: nodecheck run "
            f"hosts.yml --playbook fabric --nodes '{everyone}' (ib.ports, ib.counters, ib.pairs) and the "
            f"nccl-tests playbook on these nodes"
        )
    if kind == NEVER:
        return (
            f"rendezvous or init never finished: compare the nodes' NCCL, driver and image versions "
            f"(nodecheck run hosts.yml --nodes '{everyone}'), and check that MASTER_ADDR:MASTER_PORT is "
            f"reachable from every node"
        )
    if unreached:
        down = fold(list(unreached))
        return (
            f"{down} could not be reached and nothing else names a culprit: check {down} first (nodecheck run "
            f"hosts.yml --nodes '{down}'); its ranks' stacks and dumps are what is missing"
        )
    return (
        "nothing gathered names a culprit: enable the flight recorder (TORCH_NCCL_TRACE_BUFFER_SIZE, "
        "TORCH_NCCL_DUMP_ON_TIMEOUT=1) and install py-spy on the nodes, then run forensics again"
    )
