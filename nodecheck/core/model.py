"""Core value types shared by every stage: nodes, probes, captures, statuses, verdicts, results."""

from __future__ import annotations

import reprlib
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum


@dataclass(frozen=True)
class Node:
    name: str  # the name Slurm and the operator use: "gpu017"
    address: str  # what SSH dials; defaults to the name
    port: int = 22
    user: str | None = None
    identity_file: str | None = None
    known_hosts: str | None = None
    ssh_config: str | None = None
    labels: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Probe:
    """One command to run on a node. argv is never a shell string: quoting happens once, in transport."""

    name: str  # also the capture file name in the report
    argv: tuple[str, ...]
    timeout_s: float = 30.0
    stdin: str | None = None
    ok_exit_codes: frozenset[int] = frozenset({0})  # exit codes the judge can still read
    # "module:function" the local transport may call in-process instead of spawning argv (the
    # NVML probe in prolog mode); it returns the stdout text or raises RunArgvInstead
    local_call: str | None = None
    # seconds the processes it leaves running (pair-test servers, detached) need after it returns:
    # a transport that ends a command's leftovers with it (srun: a step's processes end with the
    # step under proctrack/cgroup) keeps it alive that long, or until its session closes
    hold_s: float = 0.0
    # a measurement (nccl-tests on the node's GPUs): where a node's probes may overlap (the local
    # transport), it runs once the others are done, with nothing beside it
    alone: bool = False

    def __post_init__(self) -> None:
        if self.timeout_s <= 0:  # there is no "0 = forever"
            raise ValueError(f"probe {self.name}: timeout_s must be > 0")


class Outcome(Enum):
    EXITED = "exited"  # ran to completion, any exit code
    TIMEOUT = "timeout"  # started, killed at its timeout or the run deadline
    UNREACHABLE = "unreachable"  # connect, auth or host-key failure: nothing ran
    SKIPPED = "skipped"  # never started: the run deadline had passed
    FAILED = "failed"  # nodecheck itself failed to run it (an internal error)


class Cut(Enum):
    """Why nodecheck's own side ended a probe early or never started it: not the node's doing. The
    capture's detail says it in words for people; decisions read this."""

    DEADLINE = "deadline"  # the run deadline came before the probe's own timeout
    SIGNAL = "signal"  # a stop request (SIGTERM, Ctrl-C): not started
    CONNECTION_LOST = "connection lost"  # the kept connection was gone before it started: nothing ran


@dataclass(frozen=True)
class Capture:
    node: str
    probe: str
    argv: tuple[str, ...]
    outcome: Outcome
    exit_code: int | None
    stdout: str
    stderr: str
    duration_s: float
    detail: str = ""  # "host key mismatch", "connect timeout after 10 s"
    cut: Cut | None = None  # set when nodecheck, not the node, ended or skipped it


class Status(Enum):
    PASS = "pass"
    WARN = "warn"
    SKIPPED = "skipped"  # planned but not run (deadline, disabled)
    ERROR = "error"  # ran but could not be judged
    TIMEOUT = "timeout"
    UNREACHABLE = "unreachable"
    FAIL = "fail"  # judged and found bad

    @property
    def healthy(self) -> bool:  # the ONLY place that says what counts as healthy
        return self in (Status.PASS, Status.WARN)

    @property
    def rank(self) -> int:
        return SEVERITY.index(self)


SEVERITY = (Status.PASS, Status.WARN, Status.SKIPPED, Status.ERROR, Status.TIMEOUT, Status.UNREACHABLE, Status.FAIL)


def worst(statuses: Iterable[Status]) -> Status:
    """The most severe status; nothing judged is not healthy, so worst([]) is ERROR."""
    ranked = [s.rank for s in statuses]
    return SEVERITY[max(ranked)] if ranked else Status.ERROR


@dataclass(frozen=True)
class Verdict:
    """What a judge returns; it knows nothing about nodes or transport."""

    status: Status
    message: str  # "mlx5_2/1: rate 100 Gb/s, expected >= 400 Gb/s"
    subject: str = ""  # sub-entity: "mlx5_2/1", "GPU3"; "" = the whole node
    observed: Mapping[str, object] = field(default_factory=dict)
    expected: Mapping[str, object] = field(default_factory=dict)
    excerpt: str = ""  # the raw lines that justify it (bounded)
    cut: Cut | None = None  # judged from a capture nodecheck cut (the gate never drains for it)


@dataclass(frozen=True)
class Evidence:
    node: str
    probe: str
    argv: tuple[str, ...]
    exit_code: int | None
    capture_path: str  # path of the full output inside the report dir


@dataclass(frozen=True)
class CheckResult:
    """A verdict with its context, as the runner stores it."""

    check: str  # "ib.ports"
    nodes: tuple[str, ...]  # who it is about: one node, a pair, the drifting nodes
    verdict: Verdict
    evidence: tuple[Evidence, ...] = ()


EXCERPT_MAX_CHARS = 2000  # keeps reports readable when a tool dumps megabytes


def excerpt(text: str, max_chars: int = EXCERPT_MAX_CHARS) -> str:
    """The head of a raw output, bounded, marking what was cut."""
    if len(text) <= max_chars:
        return text
    return text[:max_chars] + f"\n… [{len(text) - max_chars} more characters]"


def quote(value: str, limit: int = 60) -> str:
    """A text value for a message: quoted, and bounded so one garbage line cannot flood a report."""
    return repr(value) if len(value) <= limit else repr(value[:limit]) + f"… ({len(value)} characters)"


class _Shown(reprlib.Repr):
    """repr() cut to a few levels and items, computed without building the whole repr first: a value
    of nested YAML aliases (a few hundred bytes) or a hostile pickle stands for millions of items."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel, self.maxstring, self.maxother, self.maxlong = 3, 80, 80, 40
        self.maxlist = self.maxtuple = self.maxdict = self.maxset = self.maxfrozenset = 4

    def repr_bytes(self, x: bytes, level: int) -> str:
        text = repr(x[: self.maxstring])
        return text + "..." if len(x) > self.maxstring else text

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 128:  # repr() of a 5000-digit int raises ValueError
            return f"<an integer of {x.bit_length()} bits>"
        return super().repr_int(x, level)

    def repr_instance(self, x: object, level: int) -> str:
        if hasattr(type(x), "model_fields"):  # a model's repr would quote all of its fields
            return f"<{type(x).__name__}>"
        return super().repr_instance(x, level)


_SHOWN = _Shown()
SHOWN_MAX_CHARS = 300


def shown(value: object, max_chars: int = SHOWN_MAX_CHARS) -> str:
    """Any value (from an input file, a tool, a dump) for a message: repr-like, a few levels and
    items deep, at most max_chars; never fails (a message must not raise)."""
    try:
        text = _SHOWN.repr(value)
    except Exception:  # noqa: BLE001 - an object whose repr raises
        return f"<a {type(value).__name__}>"
    return text if len(text) <= max_chars else text[:max_chars] + "…"


def one_line(text: str) -> str:
    """Text that must stay one line (a drain reason, a result line Slurm logs): control characters
    (\\n \\r \\t \\x1b ...) and Unicode line/paragraph separators become spaces."""
    return "".join(" " if unicodedata.category(c) in ("Cc", "Zl", "Zp") else c for c in text)
