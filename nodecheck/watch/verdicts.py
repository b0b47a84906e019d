"""What one tick of the watcher takes in (Observation, Tick) and gives out (Assessment), the
verdicts it can reach (classify.py says when each applies) and the Slurm job states that decide some."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from nodecheck.parsers.watch_sample import NodeSample, ProgressReading

VERDICTS = (
    "starting",
    "progressing",
    "checkpointing",
    "slow",
    "straggler",
    "unresponsive",
    "hung",
    "crashed",
    "completed",
)
QUIET = frozenset({"starting", "progressing", "checkpointing"})
ALARM = frozenset({"slow", "straggler", "unresponsive", "hung", "crashed"})

# Slurm JobState values that end a job badly (squeue(1) JOB STATE CODES); COMPLETED is the good end
FAILED_STATES = frozenset(
    {
        "FAILED",
        "CANCELLED",
        "NODE_FAIL",
        "TIMEOUT",
        "OUT_OF_MEMORY",
        "BOOT_FAIL",
        "DEADLINE",
        "PREEMPTED",
        "REVOKED",
        "SPECIAL_EXIT",
    }
)
# the job has no processes yet (or again, after a requeue): its run starts over
WAITING_STATES = frozenset(
    {
        "PENDING",
        "REQUEUED",
        "REQUEUE_FED",
        "REQUEUE_HOLD",
        "RESV_DEL_HOLD",
        "CONFIGURING",
        "SUSPENDED",
        "STOPPED",
        "RESIZING",
    }
)


@dataclass(frozen=True)
class Observation:
    node: str
    sample: NodeSample | None  # None: the sample failed (timeout, unreachable, unreadable)
    failure: str = ""  # why it failed: "timed out after 20 s", a ParseError, ...
    progress: ProgressReading | None = None  # read_progress of the sample's log tail (None: no log)


@dataclass(frozen=True)
class Tick:
    at: float  # epoch seconds, the watcher's clock
    nodes: tuple[Observation, ...]
    job_state: str | None = None  # Slurm JobState ("RUNNING", ...); None: inventory mode
    job_reason: str = ""  # Slurm's Reason, for messages


@dataclass(frozen=True)
class Assessment:
    verdict: str
    message: str  # starts with the verdict: "hung: ..."
    nodes: tuple[str, ...] = ()  # the nodes the verdict is about (odd rank's, gone, silent)
    ranks: tuple[int, ...] = ()
    since: float = 0.0  # when this verdict began (Tick.at)
    facts: Mapping[str, object] = field(default_factory=dict)  # JSON-able evidence


def exit_code(verdict: str) -> int:
    """As `run`: 0 fine (completed too), 1 a warning, 2 hung or crashed."""
    if verdict in ("hung", "crashed"):
        return 2
    if verdict in ("slow", "straggler", "unresponsive"):
        return 1
    if verdict not in VERDICTS:
        raise ValueError(f"unknown verdict {verdict!r}")
    return 0
