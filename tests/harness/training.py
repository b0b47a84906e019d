"""Training scenarios for the simulated cluster: {node: scenario} for SimCluster.start_training_all().

Every builder takes the job's nodes (in rank order: node k's first global rank is k x gpus) and
gives them one start time and time-compressed phases (0.1 s steps by default), e.g.

    cluster.start_training_all(training.deadlock(["node1", "node2"], at=0.5, odd_node="node2", odd_gpu=3))

The scenario schema (what tests/fakes/trainer.py and tests/fakes/gpu_telemetry.py read) is in
tests/fakes/README.md, "trainer.py". Times ("at", "length", "duration") are seconds after start.
Common keyword arguments of every builder:

    start          epoch seconds (default: now)
    gpus           GPUs per node (8)
    step_s         seconds per training step (0.1)
    throughput     tokens/s the step lines report (5400.0)
    limit_w        power.limit of every GPU (700.0)
    train_power_w  board power while training (default 0.85 x limit_w)
    idle_w         board power of an idle GPU (70.0)
    log            the log's path on each node ("/root/train.log", the node's own /root)
    procs          processes per node (1; e.g. 8 = one per GPU, each writing its own ranks' lines)
"""

from __future__ import annotations

import time
from collections.abc import Sequence


def _common(
    nodes: Sequence[str],
    start: float | None = None,
    gpus: int = 8,
    step_s: float = 0.1,
    throughput: float = 5400.0,
    limit_w: float = 700.0,
    train_power_w: float | None = None,
    idle_w: float = 70.0,
    log: str = "/root/train.log",
    procs: int = 1,
) -> tuple[dict, dict, dict]:
    """(scenario base per node, the train phase, the rest) shared by every builder."""
    if not nodes:
        raise ValueError("a training job needs at least one node")
    if len(set(nodes)) != len(nodes):
        raise ValueError(f"nodes repeat: {list(nodes)}")
    base = {
        "start": time.time() if start is None else float(start),
        "gpus": int(gpus),
        "power_limit_w": float(limit_w),
        "idle_power_w": float(idle_w),
        "log": log,
        "procs": int(procs),
    }
    train = {
        "mode": "train",
        "step_s": float(step_s),
        "throughput": float(throughput),
        "util": 100,
        "power": round(0.85 * float(limit_w), 2) if train_power_w is None else float(train_power_w),
    }
    return base, train, {"gpus": int(gpus), "limit_w": float(limit_w)}


def _job(nodes: Sequence[str], base: dict, phases_of) -> dict[str, dict]:
    """{node: scenario}: phases_of(node) gives the node's phases; first_rank = position x gpus."""
    return {node: dict(base, first_rank=k * base["gpus"], phases=phases_of(node)) for k, node in enumerate(nodes)}


def _check_node(nodes: Sequence[str], node: str, what: str) -> None:
    if node not in nodes:
        raise ValueError(f"{what} {node!r} is not one of the job's nodes {list(nodes)}")


def healthy(nodes: Sequence[str], duration: float | None = None, **common) -> dict[str, dict]:
    """Steady training; with a duration, the job then completes ("training complete", exit 0)."""
    base, train, _ = _common(nodes, **common)
    if duration is None:
        return _job(nodes, base, lambda n: [dict(train, until=None)])
    return _job(nodes, base, lambda n: [dict(train, until=float(duration)), {"mode": "complete"}])


def completes(nodes: Sequence[str], at: float, **common) -> dict[str, dict]:
    """Training until `at`, then "training complete" and exit 0 on every node (healthy with a duration)."""
    return healthy(nodes, duration=at, **common)


def checkpoint(
    nodes: Sequence[str], at: float, length: float, power_w: float | None = None, **common
) -> dict[str, dict]:
    """A normal checkpoint: from `at` for `length` s no step; "saving checkpoint at step N" first. The
    writer (GPU 0 of the first node, rank 0) reads 0 %, every other GPU 100 %, all at low power
    (power_w, default 0.2 x limit_w); then training resumes for ever."""
    base, train, c = _common(nodes, **common)
    low = round(0.2 * c["limit_w"], 2) if power_w is None else float(power_w)
    return _job(
        nodes,
        base,
        lambda n: [
            dict(train, until=float(at)),
            {
                "mode": "checkpoint",
                "until": float(at) + float(length),
                "util": 100,
                "power": low,
                "writer_gpu": 0 if n == nodes[0] else None,
            },
            dict(train, until=None),
        ],
    )


def deadlock(
    nodes: Sequence[str],
    at: float,
    odd_node: str,
    odd_gpu: int,
    power_w: float = 190.0,
    limit_w: float = 1100.0,
    **common,
) -> dict[str, dict]:
    """The epoch-end power-deadlock signature (B300-like power limit): steps stop at `at` and never
    resume, the processes stay alive; every GPU at power_w (near idle), odd_node's odd_gpu at 0 %,
    every other GPU at 100 %."""
    _check_node(nodes, odd_node, "odd_node")
    base, train, c = _common(nodes, limit_w=limit_w, **common)
    if not 0 <= int(odd_gpu) < c["gpus"]:
        raise ValueError(f"odd_gpu {odd_gpu} is not a GPU of the node (0..{c['gpus'] - 1})")
    return _job(
        nodes,
        base,
        lambda n: [
            dict(train, until=float(at)),
            {
                "mode": "deadlock",
                "until": None,
                "power": float(power_w),
                "odd_gpu": int(odd_gpu) if n == odd_node else None,
            },
        ],
    )


def rank_dies(
    nodes: Sequence[str], at: float, node: str, code: int = 1, stall_power_w: float | None = None, **common
) -> dict[str, dict]:
    """At `at` the trainer on `node` exits with `code` (its last log line is the error); on the other
    nodes the ranks stay alive, blocked in a collective: no step, every GPU 100 % at stall_power_w
    (default 0.4 x limit_w), as until NCCL's timeout."""
    _check_node(nodes, node, "node")
    base, train, c = _common(nodes, **common)
    stall = round(0.4 * c["limit_w"], 2) if stall_power_w is None else float(stall_power_w)
    return _job(
        nodes,
        base,
        lambda n: [
            dict(train, until=float(at)),
            {"mode": "exit", "code": int(code)}
            if n == node
            else {"mode": "deadlock", "until": None, "power": stall, "odd_gpu": None},
        ],
    )


def sagging(nodes: Sequence[str], at: float, factor: float, **common) -> dict[str, dict]:
    """Throughput sags at `at`: from then on every step takes factor x step_s and the step lines
    report throughput / factor (and mfu / factor), on every node, for ever."""
    base, train, _ = _common(nodes, **common)
    slow = dict(
        train, step_s=train["step_s"] * float(factor), throughput=train["throughput"] / float(factor), until=None
    )
    return _job(nodes, base, lambda n: [dict(train, until=float(at)), slow])


def straggler(
    nodes: Sequence[str], slow_node: str, factor: float = 1.3, slow_gpus: Sequence[int] | None = None, **common
) -> dict[str, dict]:
    """Per-rank step times on every node ("rank R step N time S"): slow_node's ranks (slow_gpus, default
    all) take factor x step_s, every other rank step_s. The job's step rate is unchanged, so only the
    per-rank timing shows the straggler."""
    _check_node(nodes, slow_node, "slow_node")
    base, train, c = _common(nodes, **common)
    slow = list(range(c["gpus"])) if slow_gpus is None else [int(g) for g in slow_gpus]
    return _job(
        nodes,
        base,
        lambda n: [
            dict(
                train,
                until=None,
                rank_seconds=(
                    {"slow_gpus": slow, "factor": float(factor)} if n == slow_node else {"slow_gpus": [], "factor": 1.0}
                ),
            )
        ],
    )


def unresponsive(nodes: Sequence[str], **common) -> dict[str, dict]:
    """Healthy training; the fault is SSH, not the job: pair it with SimCluster.hang_ssh(node)."""
    return healthy(nodes, **common)


__all__ = ["checkpoint", "completes", "deadlock", "healthy", "rank_dies", "sagging", "straggler", "unresponsive"]
