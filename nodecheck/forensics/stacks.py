"""Every rank's stack, grouped: identical Python stacks under one folded rank/node list, the processes
py-spy could not read kept apart with the reason (a process that does not answer is evidence too)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nodecheck.forensics.ranks import RankProcess, ranks_phrase
from nodecheck.parsers.pyspy import PyFrame, PyStacks, main_thread

# what a blocked collective is called in PyTorch's Python API (torch.distributed, c10d) and what a
# job does before its first collective (rendezvous, store, process-group creation)
COLLECTIVES = frozenset(
    {
        "all_reduce",
        "all_reduce_coalesced",
        "reduce_scatter",
        "reduce_scatter_tensor",
        "_reduce_scatter_base",
        "all_gather",
        "all_gather_into_tensor",
        "_all_gather_base",
        "all_gather_object",
        "all_to_all",
        "all_to_all_single",
        "broadcast",
        "broadcast_object_list",
        "reduce",
        "gather",
        "scatter",
        "barrier",
        "monitored_barrier",
        "send",
        "recv",
        "isend",
        "irecv",
        "batch_isend_irecv",
    }
)
INIT = frozenset(
    {
        "init_process_group",
        "new_group",
        "init_device_mesh",
        "rendezvous",
        "next_rendezvous",
        "_create_c10d_store",
        "_store_based_barrier",
        "_rendezvous_helper",
        "_create_tcp_store",
    }
)
# frames of the standard library's waiting primitives: true, but they say nothing about the job, so a
# summary starts at the first frame below them
_WAITING_FILES = frozenset({"threading.py", "queue.py", "selectors.py", "socket.py", "subprocess.py"})
SHOWN_FRAMES = 3  # frames in a group's one-line summary (the report has all)


@dataclass(frozen=True)
class ProcessStack:
    process: RankProcess
    stacks: PyStacks | None  # None: py-spy did not give a stack (failure says why)
    failure: str = ""
    raw: str = ""  # py-spy's own output, for the report
    unpaused: PyStacks | None = None  # with a failure: the stack read without stopping the process


@dataclass(frozen=True)
class StackGroup:
    frames: tuple[PyFrame, ...]  # the main thread's Python frames, innermost first
    failure: str  # "" for a stack; else why there is none
    members: tuple[RankProcess, ...]
    unpaused: tuple[PyFrame, ...] = ()  # with a failure: the frames read without stopping them
    native: str = ""  # the innermost native frame, when every member is in the same one

    @property
    def ranks(self) -> tuple[int, ...]:
        return tuple(sorted(p.rank for p in self.members if p.rank is not None))

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(sorted({p.node for p in self.members}))


def python_frames(stacks: PyStacks) -> tuple[PyFrame, ...]:
    """The main thread's Python frames: native frames carry addresses that differ between processes
    (ASLR), so two ranks stuck in the same place would never group on them."""
    thread = main_thread(stacks)
    return tuple(f for f in thread.frames if not f.native) if thread is not None else ()


def group_stacks(stacks: Sequence[ProcessStack]) -> tuple[StackGroup, ...]:
    """Identical stacks together; the largest group first, groups without a stack last."""
    groups: dict[tuple, list[ProcessStack]] = {}
    for s in stacks:
        key: tuple[tuple[PyFrame, ...], str, tuple[PyFrame, ...]]  # (frames, failure, unpaused frames)
        if s.stacks is not None:
            frames = python_frames(s.stacks)
            key = (frames, "" if frames else "no Python frames in the main thread", ())
        else:
            key = ((), s.failure, python_frames(s.unpaused) if s.unpaused is not None else ())
        groups.setdefault(key, []).append(s)
    ordered = sorted(
        groups.items(), key=lambda kv: (bool(kv[0][1]), -len(kv[1]), _first_rank([m.process for m in kv[1]]))
    )
    return tuple(
        StackGroup(
            frames, failure, tuple(sorted((m.process for m in members), key=_order)), unpaused, _common_native(members)
        )
        for (frames, failure, unpaused), members in ordered
    )


def innermost_native(stacks: PyStacks) -> str:
    """The main thread's innermost native frame with a name ("clock_nanosleep (libc.so.6)"): what the
    process waits in below Python (a driver call, a futex, a sleep); "" without --native frames."""
    thread = main_thread(stacks)
    for f in thread.frames if thread is not None else ():
        if not f.native:
            return ""  # a Python frame first: the innermost frame is Python's
        if not f.function.startswith("0x"):  # a bare address names nothing (and differs between processes)
            return frame_text(f)
    return ""


def _common_native(members: Sequence[ProcessStack]) -> str:
    tops = {innermost_native(m.stacks) for m in members if m.stacks is not None}
    return tops.pop() if len(tops) == 1 else ""


def _order(p: RankProcess) -> tuple:
    return (p.rank is None, p.rank if p.rank is not None else 0, p.node, p.pid)


def _first_rank(members: Sequence[RankProcess]) -> int:
    ranks = [p.rank for p in members if p.rank is not None]
    return min(ranks) if ranks else 1 << 30


def collective_of(frames: Sequence[PyFrame]) -> str | None:
    """The innermost frame that is a collective: where the rank waits."""
    return next((f.function for f in frames if f.function in COLLECTIVES), None)


def in_init(frames: Sequence[PyFrame]) -> bool:
    return any(f.function in INIT for f in frames)


def frame_text(f: PyFrame) -> str:
    """ "all_reduce (distributed_c10d.py:17)", as py-spy prints a frame."""
    return str(f)


def summary_frames(frames: Sequence[PyFrame]) -> tuple[PyFrame, ...]:
    start = 0
    while start < len(frames) - 1 and frames[start].file.rsplit("/", 1)[-1] in _WAITING_FILES:
        start += 1
    return tuple(frames[start : start + SHOWN_FRAMES])


def who(members: Sequence[RankProcess], place_under: int = 4) -> str:
    """ "6 ranks 0-5 (node[1-3])", "rank 3 (node1 GPU3)", "2 processes without a rank (node1 pids 7,8)"."""
    from nodecheck.core.hostlist import fold

    ranks = sorted(p.rank for p in members if p.rank is not None)
    unranked = [p for p in members if p.rank is None]
    parts = []
    if ranks:
        ranked = [p for p in members if p.rank is not None]
        where = (
            ", ".join(p.place for p in ranked) if len(ranked) <= place_under else fold(sorted({p.node for p in ranked}))
        )
        parts.append(
            f"{len(ranks)} {ranks_phrase(ranks)} ({where})" if len(ranks) > 1 else f"{ranks_phrase(ranks)} ({where})"
        )
    if unranked:
        pids = ",".join(str(p.pid) for p in unranked)
        nodes = fold(sorted({p.node for p in unranked}))
        noun = "process" if len(unranked) == 1 else "processes"
        parts.append(f"{len(unranked)} {noun} without a rank ({nodes} pid{'s' if len(unranked) > 1 else ''} {pids})")
    return " and ".join(parts)


def describe_group(g: StackGroup) -> str:
    if g.failure:
        unpaused = f"; read without stopping it: in {chain_text(g.unpaused)}" if g.unpaused else ""
        return f"{who(g.members)}: {g.failure}{unpaused}"
    native = f" [native: {g.native}]" if g.native else ""
    return f"{who(g.members)} in {chain_text(g.frames)}{native}"


def chain_text(frames: Sequence[PyFrame]) -> str:
    """ "broadcast (distributed_c10d.py:1191) \u2190 _aggregate_total_loss (engine.py:540) \u2190 \u2026 (9 frames)"."""
    shown = summary_frames(frames)
    more = f" \u2190 \u2026 ({len(frames)} frames)" if len(frames) > len(shown) else ""
    return " \u2190 ".join(frame_text(f) for f in shown) + more
