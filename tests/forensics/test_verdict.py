"""forensics/verdict.py: diagnose() on every class of hang, from the recorded and built flight-recorder
dumps (tests/data/flight-recorder) and the recorded py-spy stacks (tests/data/py-spy): the class, the
culprit ranks and nodes, the evidence lines, what it rests on and the next step."""

from __future__ import annotations

from nodecheck.forensics.collectives import analyze
from nodecheck.forensics.ranks import RankProcess, rank_process
from nodecheck.forensics.stacks import ProcessStack
from nodecheck.forensics.verdict import (
    CLASSES,
    MISMATCHED,
    MISSING,
    NEVER,
    SAME,
    UNDETERMINED,
    Diagnosis,
    NodeEvents,
    diagnose,
)
from nodecheck.parsers.flight_recorder import parse_dump
from nodecheck.parsers.forensics import JobProcess
from nodecheck.parsers.pyspy import PyStacks, parse_pyspy_dump
from nodecheck.parsers.watch_sample import Proc
from tests.helpers import DATA

FR = DATA / "flight-recorder"
NODES = ["node1", "node2"]


def findings(scenario: str, skip: tuple[int, ...] = ()):
    files = sorted((FR / scenario).glob("nccl_trace_rank_*"), key=lambda p: int(p.name.rsplit("_", 1)[1]))
    return analyze(
        [parse_dump(p.read_bytes(), source=p.name) for p in files if int(p.name.rsplit("_", 1)[1]) not in skip]
    )


def recording(name: str) -> PyStacks:
    return parse_pyspy_dump((DATA / "py-spy" / name).read_text())


ALL_REDUCE = recording("recorded-hung-rank-all_reduce.txt")
ALL_GATHER = recording("recorded-hung-rank-all_gather.txt")
REDUCE_SCATTER = recording("recorded-hung-rank-reduce_scatter.txt")
NONE = recording("recorded-hung-rank-none.txt")


def rank(r: int, world: int, per_node: int = 4, layout: bool = True) -> RankProcess:
    """Rank r of a torchrun job, per_node ranks on each of node1, node2, ..."""
    env = dict(RANK=str(r), LOCAL_RANK=str(r % per_node), WORLD_SIZE=str(world))
    if layout:
        env.update(GROUP_RANK=str(r // per_node), LOCAL_WORLD_SIZE=str(per_node))
    return rank_process(f"node{1 + r // per_node}", JobProcess(Proc(1000 + r, "Sl", 600, "python train.py", 1), env))


def job(ranks, world: int, **kw) -> list[RankProcess]:
    return [rank(r, world, **kw) for r in ranks]


def stacks_of(processes, where: dict[int, PyStacks], default: PyStacks) -> list[ProcessStack]:
    return [ProcessStack(p, where.get(p.rank, default)) for p in processes]


# ---- flight recorder ------------------------------------------------------------------------


def test_recorded_mismatch_confirmed_by_the_stacks():
    procs = job(range(8), 8)
    d = diagnose(findings("mismatched"), stacks_of(procs, {3: ALL_REDUCE}, ALL_GATHER), procs, {}, NODES)
    assert (d.kind, d.culprit_ranks, d.culprit_nodes) == (MISMATCHED, (3,), ("node1",))
    assert d.basis == "flight recorder and the stacks"
    assert d.evidence == (
        "pg 0 seq 6: ranks 0-2,4-7 in all_gather [64], rank 3 (node1 GPU3) in all_reduce [1] — mismatched "
        "collectives; rank 3 left the loop early",
        "ranks 0-2,4-7 waiting in all_gather",
        "rank 3 waiting in all_reduce",
    )
    assert d.headline == "mismatched collectives; culprit rank 3 on node1 (from the flight recorder and the stacks)"
    assert d.next_step.startswith("the ranks took different code paths to the same collective slot")
    assert "nodecheck job-check JOB.yml: job.data_balance" in d.next_step


def test_built_mismatch_of_sixteen_ranks_from_the_flight_recorder_alone():
    d = diagnose(findings("built-2.4-mismatched"), [], [], {}, NODES)
    assert (d.kind, d.culprit_ranks, d.culprit_nodes, d.basis) == (MISMATCHED, (3,), (), "flight recorder")
    assert d.evidence == (
        "pg 0 seq 3851: ranks 0-2,4-15 in reduce_scatter [2048x4096], rank 3 in all_reduce [1] — "
        "mismatched collectives; rank 3 left the loop early",
    )
    assert d.headline == "mismatched collectives; culprit rank 3 (from the flight recorder)"


def test_built_same_collective_different_sizes_is_a_mismatch():
    d = diagnose(findings("built-2.10-mismatched-sizes"), [], job(range(4), 4), {}, ["node1"])
    assert (d.kind, d.culprit_ranks, d.culprit_nodes) == (MISMATCHED, (1,), ("node1",))
    assert d.evidence[0].endswith("— mismatched collectives: same collective, different sizes")


def test_recorded_missing_rank_confirmed_by_the_stacks():
    procs = job(range(4), 4, per_node=2)  # ranks 2,3 on node2
    stacks = stacks_of(procs, {2: NONE}, ALL_REDUCE)
    d = diagnose(findings("missing-rank"), stacks, procs, {}, NODES)
    assert (d.kind, d.culprit_ranks, d.culprit_nodes) == (MISSING, (2,), ("node2",))
    assert d.basis == "flight recorder and the stacks"
    assert d.evidence == (
        "pg 0 seq 21: ranks 0-1,3 (node1 GPU0, node1 GPU1, node2 GPU1) in all_reduce [1024] (scheduled), rank 2 "
        "(node2 GPU0) never joined (last completed seq 20) — missing rank",
        "ranks 0-1,3 waiting in all_reduce",
        "rank 2 not in any collective: DataLoaderIter._next_data (dataloader.py:15) \u2190 DataLoaderIter.__next__ "
        "(dataloader.py:10) \u2190 train (training.py:13)",
    )
    assert d.next_step == (
        "read the missing ranks' own log and the Xid/OOM lines above; if node2 is at fault, drain it "
        "(scontrol update nodename=node2 state=drain reason='forensics: hung collective, see the record') "
        "and check it: "
        "nodecheck run hosts.yml --nodes 'node2'"
    )


def test_built_2_2_missing_rank_without_processes():
    d = diagnose(findings("built-2.2-missing-rank"), [], [], {}, NODES)
    assert (d.kind, d.culprit_ranks, d.basis) == (MISSING, (2,), "flight recorder")
    assert d.evidence == (
        "pg 0 seq 42: ranks 0-1,3 in all_reduce [1024] (started), rank 2 never joined (last "
        "completed seq 41) — missing rank",
    )


def test_flight_recorder_wins_when_the_stacks_disagree_and_their_lines_are_marked():
    procs = job(range(4), 4)
    d = diagnose(findings("missing-rank"), stacks_of(procs, {}, ALL_REDUCE), procs, {}, ["node1"])
    assert (d.kind, d.culprit_ranks, d.basis) == (MISSING, (2,), "flight recorder")
    assert d.evidence[1:] == ("stacks: ranks 0-3 waiting in all_reduce",)


def test_a_missing_rank_dump_is_a_culprit_too():
    # missing-rank without rank 2's dump: pg_config is gloo's "" key, so rank 2 is simply not a member;
    # rank 3's dump gone from the built 2.2 scenario instead (its pg_config names ranks 0-3)
    d = diagnose(findings("built-2.2-missing-rank", skip=(3,)), [], [], {}, NODES)
    assert (d.kind, d.culprit_ranks) == (MISSING, (2, 3))
    assert "rank 3 left no readable dump" in d.evidence[0]


def test_recorded_same_collective_points_at_the_fabric_of_every_node():
    procs = job(range(8), 8)
    d = diagnose(findings("same-collective"), stacks_of(procs, {}, ALL_REDUCE), procs, {}, NODES)
    assert (d.kind, d.culprit_ranks, d.culprit_nodes) == (SAME, (), ())
    assert d.basis == "flight recorder and the stacks"
    assert d.evidence == (
        "pg 0 seq 4: all 8 ranks in all_reduce [1024] (scheduled), none completed — all ranks in "
        "the same collective: look below NCCL at the network",
        "ranks 0-7 waiting in all_reduce",
    )
    assert d.headline == "all ranks in the same collective (from the flight recorder and the stacks)"
    assert d.next_step == (
        "every rank waits in the same collective: look below NCCL, at the network: nodecheck run "
        "hosts.yml --playbook fabric --nodes 'node[1-2]' (ib.ports, ib.counters, ib.pairs) and the "
        "nccl-tests playbook on these nodes"
    )


def test_recorded_never_started_is_rendezvous_or_init():
    d = diagnose(findings("never-started"), [], job(range(8), 8), {}, NODES)
    assert (d.kind, d.culprit_ranks, d.culprit_nodes, d.basis) == (NEVER, (), (), "flight recorder")
    assert d.evidence == ("pg (unnamed): no collective ever ran on any of 8 ranks — rendezvous or init",)
    assert d.headline == "no collective ever ran (from the flight recorder)"
    assert (
        "compare the nodes' NCCL, driver and image versions (nodecheck run hosts.yml --nodes 'node[1-2]')"
        in d.next_step
    )
    assert d.next_step.endswith("check that MASTER_ADDR:MASTER_PORT is reachable from every node")


def test_built_straggler_behind_the_others_is_a_rank_missing():
    procs = job(range(4), 4)
    d = diagnose(findings("built-2.10-ahead-p2p"), [], procs, {}, ["node1"])
    assert (d.kind, d.culprit_ranks, d.culprit_nodes, d.basis) == (MISSING, (3,), ("node1",), "flight recorder")
    # the completed pp group (only p2p pending) is not a judged finding: one evidence line, pg 0's
    assert d.evidence == (
        "pg 0 seq 10: ranks 0-2 (node1 GPU0, node1 GPU1, node1 GPU2) in all_reduce [4096] "
        "(completed), rank 3 (node1 GPU3) in all_reduce [4096] (started); ranks 0-2 (node1 GPU0, "
        "node1 GPU1, node1 GPU2) moved on past it — rank 3 (node1 GPU3) behind: a straggler",
    )
    assert d.headline == "a rank missing or dead; culprit rank 3 on node1 (from the flight recorder)"


# ---- stacks only ----------------------------------------------------------------------------


def test_stacks_only_two_collectives_the_minority_is_the_culprit():
    procs = job(range(8), 8)
    d = diagnose([], stacks_of(procs, {6: ALL_REDUCE}, REDUCE_SCATTER), procs, {}, NODES)
    assert (d.kind, d.culprit_ranks, d.culprit_nodes, d.basis) == (MISMATCHED, (6,), ("node2",), "stacks")
    assert d.evidence == ("ranks 0-5,7 waiting in reduce_scatter", "rank 6 waiting in all_reduce")
    assert d.headline == "mismatched collectives; culprit rank 6 on node2 (from the stacks)"


def test_stacks_only_one_rank_outside_any_collective_is_missing():
    procs = job(range(8), 8)
    d = diagnose([], stacks_of(procs, {5: NONE}, ALL_REDUCE), procs, {}, NODES)
    assert (d.kind, d.culprit_ranks, d.culprit_nodes, d.basis) == (MISSING, (5,), ("node2",), "stacks")
    assert d.evidence == (
        "ranks 0-4,6-7 waiting in all_reduce",
        "rank 5 not in any collective: DataLoaderIter._next_data (dataloader.py:15) \u2190 "
        "DataLoaderIter.__next__ (dataloader.py:10) \u2190 train (training.py:13)",
    )


def test_stacks_only_a_rank_py_spy_could_not_read_is_missing():
    procs = job(range(4), 4)
    why = "py-spy got no answer within 3 s; process state D (disk sleep)"
    stacks = [ProcessStack(p, ALL_REDUCE) if p.rank != 2 else ProcessStack(p, None, why) for p in procs]
    d = diagnose([], stacks, procs, {}, ["node1"])
    assert (d.kind, d.culprit_ranks, d.culprit_nodes) == (MISSING, (2,), ("node1",))
    assert d.evidence == ("ranks 0-1,3 waiting in all_reduce", f"rank 2: {why}")


def test_stacks_only_every_rank_in_one_collective_but_the_world_is_larger():
    procs = job(range(7), 8)  # rank 7 of 8 has no process
    d = diagnose([], stacks_of(procs, {}, REDUCE_SCATTER), procs, {}, NODES)
    assert (d.kind, d.culprit_ranks, d.culprit_nodes, d.basis) == (MISSING, (7,), ("node2",), "stacks")
    assert d.evidence == (
        "ranks 0-6 waiting in reduce_scatter",
        "no process holds rank 7 of the world size 8; rank 7 ran on node2: dead, or on a node not reached",
    )
    assert d.headline == "a rank missing or dead; culprit rank 7 on node2 (from the stacks)"


def test_stacks_only_all_in_one_collective_is_the_same_collective():
    procs = job(range(4), 4)
    d = diagnose([], stacks_of(procs, {}, ALL_GATHER), procs, {}, ["node1"])
    assert (d.kind, d.culprit_ranks, d.basis, d.evidence) == (SAME, (), "stacks", ("ranks 0-3 waiting in all_gather",))
    assert "--playbook fabric --nodes 'node1'" in d.next_step


def test_a_missing_rank_without_a_layout_names_no_node():
    procs = job(range(3), 4, layout=False)  # no GROUP_RANK / LOCAL_WORLD_SIZE
    d = diagnose([], stacks_of(procs, {}, ALL_REDUCE), procs, {}, ["node1"])
    assert (d.kind, d.culprit_ranks, d.culprit_nodes) == (MISSING, (3,), ())
    assert d.evidence[-1] == "no process holds rank 3 of the world size 4: dead, or on a node not reached"
    assert d.headline == "a rank missing or dead; culprit rank 3 (from the stacks)"


def test_processes_alone_name_the_dead_ranks():
    # no dump, no stack: only the world size says rank 3 is gone, and rank 2's layout where it ran
    d = diagnose([], [], job(range(3), 4, per_node=2), {}, NODES)
    assert (d.kind, d.culprit_ranks, d.culprit_nodes, d.basis) == (MISSING, (3,), ("node2",), "processes")
    assert d.evidence == (
        "no process holds rank 3 of the world size 4; rank 3 ran on node2: dead, or on a node not reached",
    )
    assert d.headline == "a rank missing or dead; culprit rank 3 on node2 (from the processes)"


def test_dead_ranks_of_a_node_with_no_process_left_name_no_node():
    # ranks 2-3 ran on the second node; no process there tells its name
    d = diagnose([], [], job(range(2), 4, per_node=2), {}, NODES)
    assert (d.kind, d.culprit_ranks, d.culprit_nodes) == (MISSING, (2, 3), ())
    assert d.evidence == ("no process holds ranks 2-3 of the world size 4: dead, or on a node not reached",)


# ---- nothing, unreached nodes, node events --------------------------------------------------


def test_nothing_gathered_is_undetermined_and_says_what_to_enable():
    d = diagnose([], [], [], {}, ["node1"])
    assert d.kind == UNDETERMINED == CLASSES[-1]  # the class forensics exits 3 on
    assert (d.culprit_ranks, d.culprit_nodes, d.evidence, d.basis) == ((), (), (), "")
    assert d.headline == "undetermined"
    assert d.next_step == (
        "nothing gathered names a culprit: enable the flight recorder (TORCH_NCCL_TRACE_BUFFER_SIZE, "
        "TORCH_NCCL_DUMP_ON_TIMEOUT=1) and install py-spy on the nodes, then run forensics again"
    )


def test_only_unranked_processes_and_failed_stacks_are_undetermined():
    launcher = rank_process("node1", JobProcess(Proc(77, "Sl", 600, "torchrun train.py", 1), {}))
    d = diagnose([], [ProcessStack(launcher, ALL_REDUCE)], [launcher], {}, ["node1"])
    assert (d.kind, d.basis, d.evidence) == (UNDETERMINED, "", ())


def test_every_stack_failed_names_those_ranks_but_no_class():
    procs = job(range(2), 2)
    stacks = [ProcessStack(p, None, "py-spy failed: permission denied (ptrace)") for p in procs]
    d = diagnose([], stacks, procs, {}, ["node1"])
    assert (d.kind, d.culprit_ranks, d.culprit_nodes, d.basis) == (UNDETERMINED, (0, 1), ("node1",), "stacks")
    assert d.evidence == (
        "rank 0: py-spy failed: permission denied (ptrace)",
        "rank 1: py-spy failed: permission denied (ptrace)",
    )
    assert d.headline == "undetermined; culprit ranks 0-1 on node1 (from the stacks)"


def test_an_unreached_node_is_evidence_and_the_culprit_when_nothing_else_tells():
    d = diagnose([], [], [], {}, ["node1", "node2", "node3"], unreached=["node3"])
    assert (d.kind, d.culprit_ranks, d.culprit_nodes) == (UNDETERMINED, (), ("node3",))
    assert d.evidence == ("not reached: node3 (their ranks' stacks and dumps are missing)",)
    assert d.headline == "undetermined; culprit node node3"
    assert d.next_step.startswith("node3 could not be reached and nothing else names a culprit: check node3 first")


def test_an_unreached_node_beside_a_class_is_evidence_not_the_culprit():
    procs = job(range(8), 8)
    d = diagnose(findings("mismatched"), [], procs, {}, ["node1", "node2", "node3"], unreached=["node3"])
    assert (d.kind, d.culprit_ranks, d.culprit_nodes) == (MISMATCHED, (3,), ("node1",))
    assert d.evidence[-1] == "not reached: node3 (their ranks' stacks and dumps are missing)"


XID = "Xid 79 (GPU has fallen off the bus) on GPU 0000:9b:00 at 2025-02-23 16:24:18Z"
OOM = "OOM kill of python (pid 1006) at 2025-02-23 16:25:00Z"
WARNS = tuple(f"node1:4242:4301 [0] NCCL WARN line {k}" for k in range(5))


def test_events_of_the_culprit_nodes_are_evidence_the_others_are_not():
    procs = job(range(8), 8)
    events = {"node1": NodeEvents(nccl_warns=WARNS), "node2": NodeEvents(xids=(XID,), ooms=(OOM,))}
    d = diagnose([], stacks_of(procs, {6: NONE}, ALL_REDUCE), procs, events, NODES)
    assert (d.culprit_ranks, d.culprit_nodes) == ((6,), ("node2",))
    assert d.evidence[-2:] == (f"node2: {XID}", f"node2: {OOM}")
    assert not any("NCCL WARN" in e for e in d.evidence)


def test_without_culprits_every_nodes_events_count_and_only_the_last_three_warnings():
    procs = job(range(8), 8)
    events = {"node1": NodeEvents(nccl_warns=WARNS), "node2": NodeEvents(xids=(XID,))}
    d = diagnose(findings("same-collective"), [], procs, events, NODES)
    assert d.kind == SAME and d.culprit_nodes == ()
    assert d.evidence[1:] == (
        "node1: node1:4242:4301 [0] NCCL WARN line 2",
        "node1: node1:4242:4301 [0] NCCL WARN line 3",
        "node1: node1:4242:4301 [0] NCCL WARN line 4",
        f"node2: {XID}",
    )


# ---- the headline ---------------------------------------------------------------------------


def test_headline_wording():
    def h(kind, ranks=(), nodes=(), basis=""):
        return Diagnosis(kind, ranks, nodes, (), "", basis).headline

    assert (
        h(MISSING, (2, 3), ("node1", "node2"), "flight recorder")
        == "a rank missing or dead; culprit ranks 2-3 on node1, node2 (from the flight recorder)"
    )
    assert h(MISMATCHED, (3,), (), "stacks") == "mismatched collectives; culprit rank 3 (from the stacks)"
    assert h(UNDETERMINED, (), ("node3",)) == "undetermined; culprit node node3"
    assert (
        h(SAME, basis="flight recorder and the stacks")
        == "all ranks in the same collective (from the flight recorder and the stacks)"
    )
    assert h(NEVER) == "no collective ever ran"


# With the flight recorder alone (forensics --dumps, no process known) a missing rank has no culprit
# node: the next step then names no node and gives no command with a placeholder in it.
def test_missing_rank_without_a_known_node_gives_no_broken_command():
    d = diagnose(findings("missing-rank"), [], [], {}, [])
    assert (d.kind, d.culprit_ranks, d.culprit_nodes) == (MISSING, (2,), ())
    assert "nodename=" not in d.next_step and "--nodes" not in d.next_step
    assert d.next_step.startswith("read the missing ranks' own log") and "find the node they ran on" in d.next_step


def test_a_flight_recorder_that_shows_nothing_pending_keeps_its_word_when_the_stacks_decide():
    """Every collective in the dumps completed (the hang is elsewhere): the stacks decide, and what the
    flight recorder said stays in the evidence."""
    from nodecheck.forensics.collectives import GroupFinding

    done = GroupFinding(
        pg="0",
        desc="default_pg",
        members=(0, 1, 2, 3),
        kind="completed",
        seq=None,
        last_completed=dict.fromkeys(range(4), 7),
        at_seq=(),
        missing=(),
        no_dump=(),
        ahead=(),
    )
    procs = job(range(4), 4)
    d = diagnose([done], stacks_of(procs, {2: ALL_GATHER}, ALL_REDUCE), procs, {}, NODES)
    assert (d.kind, d.culprit_ranks, d.basis) == (MISMATCHED, (2,), "stacks")
    assert d.evidence[-1].startswith("flight recorder: pg 0: all 4 ranks completed every collective they enqueued")
