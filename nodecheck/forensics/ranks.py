"""Who each process of the job is: its global rank, local rank and GPU, from the environment the
launcher gave it (torchrun: RANK, LOCAL_RANK, GROUP_RANK; srun: SLURM_PROCID, SLURM_LOCALID)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ClusterShell.RangeSet import RangeSet

from nodecheck.core.redact import redact_text
from nodecheck.judging.nccl_settings import TRACE_FILE_VARS
from nodecheck.parsers.forensics import JobProcess


@dataclass(frozen=True)
class RankProcess:
    node: str
    pid: int
    rank: int | None  # global rank; None: no rank variable (a launcher, a helper)
    local_rank: int | None
    gpu: str | None  # the GPU it drives, as nvidia-smi numbers it
    world_size: int | None
    node_rank: int | None  # torchrun's GROUP_RANK
    local_world_size: int | None
    args: str  # its command line, secrets masked (redact.redact_text)
    state: str  # ps STAT
    elapsed_s: int | None  # how long it has run (ps etimes)
    dump_prefix: str  # where its flight recorder writes ("" = c10d's default)

    @property
    def place(self) -> str:
        """ "node1 GPU3" (or "node1 pid 4242" when the GPU is unknown)."""
        return f"{self.node} GPU{self.gpu}" if self.gpu is not None else f"{self.node} pid {self.pid}"


def rank_processes(node: str, processes: Sequence[JobProcess]) -> list[RankProcess]:
    """A node's processes with their ranks. Where any process has RANK (torchrun, or a launcher that
    sets it), only RANK counts: under srun the torchrun agent and its workers all inherit the task's
    SLURM_PROCID, which numbers tasks, not ranks. Otherwise srun's SLURM_PROCID is the rank, in a job
    step's tasks only (SLURM_STEP_ID set): the batch script and the srun client carry SLURM_PROCID too."""
    torchrun = any("RANK" in p.env for p in processes)
    return [rank_process(node, p, slurm=not torchrun) for p in processes]


def rank_process(node: str, p: JobProcess, slurm: bool = True) -> RankProcess:
    env = p.env
    task = slurm and "SLURM_STEP_ID" in env
    rank = _int(env, "RANK") if not task else _int(env, "SLURM_PROCID")
    local = _int(env, "LOCAL_RANK") if not task else _int(env, "SLURM_LOCALID")
    prefix = next((env[v] for v in TRACE_FILE_VARS if env.get(v)), "")
    return RankProcess(
        node=node,
        pid=p.pid,
        rank=rank,
        local_rank=local,
        gpu=gpu_of(local, env.get("CUDA_VISIBLE_DEVICES")),
        world_size=_int(env, "WORLD_SIZE") if not task else _int(env, "SLURM_NTASKS"),
        node_rank=_int(env, "GROUP_RANK"),
        local_world_size=_int(env, "LOCAL_WORLD_SIZE"),
        args=redact_text(p.proc.args),
        state=p.proc.state,
        elapsed_s=p.proc.elapsed_s,
        dump_prefix=prefix,
    )


def gpu_of(local_rank: int | None, visible: str | None) -> str | None:
    """The GPU a rank drives: PyTorch jobs use cuda:LOCAL_RANK, which is the LOCAL_RANK-th entry of
    CUDA_VISIBLE_DEVICES when that is set (one entry: Slurm's per-task binding), else GPU LOCAL_RANK."""
    devices = [d.strip() for d in visible.split(",")] if visible else []
    if len(devices) == 1 and devices[0]:
        return devices[0]
    if local_rank is None:
        return None
    if devices:
        return devices[local_rank] if local_rank < len(devices) and devices[local_rank] else None
    return str(local_rank)


def _int(env: Mapping[str, str], *names: str) -> int | None:
    for name in names:
        value = env.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return None


def by_rank(processes: Iterable[RankProcess]) -> dict[int, RankProcess]:
    """rank -> its process; a rank claimed twice (two jobs matched) keeps the first: the caller says so."""
    found: dict[int, RankProcess] = {}
    for p in processes:
        if p.rank is not None:
            found.setdefault(p.rank, p)
    return found


def duplicated(processes: Iterable[RankProcess]) -> dict[int, list[RankProcess]]:
    seen: dict[int, list[RankProcess]] = {}
    for p in processes:
        if p.rank is not None:
            seen.setdefault(p.rank, []).append(p)
    return {r: ps for r, ps in seen.items() if len(ps) > 1}


def expected_world(processes: Sequence[RankProcess]) -> int | None:
    """The job's world size as its ranks say it (the most common WORLD_SIZE)."""
    sizes = [p.world_size for p in processes if p.world_size]
    return max(set(sizes), key=sizes.count) if sizes else None


def missing_ranks(processes: Sequence[RankProcess]) -> tuple[int, ...]:
    """Ranks below the world size that no process claims: dead, or on a node we did not reach."""
    world = expected_world(processes)
    if world is None:
        return ()
    have = by_rank(processes)
    return tuple(r for r in range(world) if r not in have)


def likely_node(rank: int, processes: Sequence[RankProcess]) -> str | None:
    """Where a missing rank ran, when the layout says it: torchrun gives node GROUP_RANK the ranks
    GROUP_RANK x LOCAL_WORLD_SIZE ... + LOCAL_WORLD_SIZE - 1."""
    for p in processes:
        if p.node_rank is not None and p.local_world_size and p.node_rank == rank // p.local_world_size:
            return p.node
    return None


def fold_ranks(ranks: Iterable[int]) -> str:
    """0,1,2,4 -> "0-2,4"."""
    values = sorted(set(ranks))
    return str(RangeSet.fromlist([str(r) for r in values])) if values else ""


def ranks_phrase(ranks: Iterable[int]) -> str:
    """ "rank 3" / "ranks 0-2,4"."""
    values = sorted(set(ranks))
    return f"rank {values[0]}" if len(values) == 1 else f"ranks {fold_ranks(values)}"
