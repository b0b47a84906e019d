"""The resource limits a Slurm job's tasks start with: those of the node's slurmd."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from nodecheck.core.model import Status, Verdict
from nodecheck.core.registry import Captures, check
from nodecheck.parsers.proc_limits import Limit
from nodecheck.probes.limits import LIMITS, LimitsFacts, read_limits

Minimum = int | Literal["unlimited"] | None
BYTES = ("memlock", "stack")  # limits counted in bytes; the others are counts


class LimitsParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # NVIDIA's GPUDirect RDMA and NVIDIA/Mellanox OFED docs: RDMA registers (pins) host memory, which
    # RLIMIT_MEMLOCK bounds; ibv_reg_mr fails with ENOMEM under a small limit ("ulimit -l unlimited").
    # SchedMD's own slurmd.service sets LimitMEMLOCK=infinity (etc/slurmd.service.in)
    memlock: Minimum = Field(
        "unlimited", description="lowest max locked memory in bytes, or unlimited; null: not judged"
    )
    # SchedMD's slurmd.service: LimitNOFILE=51200; the distributions' soft default of 1024 breaks
    # PyTorch DataLoader workers, which share tensors through file descriptors ("Too many open files")
    nofile: Minimum = Field(51200, description="lowest max open files; null: not judged")
    # RHEL's /etc/security/limits.d/20-nproc.conf caps users at 4096 processes (threads count): a
    # job with many ranks and threads per rank fails to start threads below that
    nproc: Minimum = Field(4096, description="lowest max user processes (threads count); null: not judged")
    # the kernel's default soft stack limit is 8 MiB (slurmd.service: LimitSTACK=infinity); less
    # breaks deep recursion and OpenMP threads' stacks
    stack: Minimum = Field(8388608, description="lowest max stack size in bytes, or unlimited; null: not judged")

    @field_validator("memlock", "nofile", "nproc", "stack", mode="before")
    @classmethod
    def _number_or_unlimited(cls, value):
        if isinstance(value, bool):
            raise ValueError("expected a number, unlimited, or null")
        if isinstance(value, int) and value < 0:
            raise ValueError("a limit is >= 0")
        return value


@check("limits", probes=[LIMITS], params=LimitsParams)
def limits(out: Captures, want: LimitsParams) -> Iterator[Verdict]:
    """The limits a job's tasks get (memlock, nofile, nproc, stack) are at least the minimums:
    memlock unlimited by default, as RDMA memory registration fails otherwise.

    Read the way Slurm jobs get them: slurmd starts every task (through slurmstepd), so tasks
    inherit the limits of the node's slurmd, read from /proc/<slurmd pid>/limits in the probe's
    own mount namespace. slurmd is the process systemd's MainPID names, else the one process named
    slurmd whose real uid is 0 and whose binary is a root-owned slurmd (or slurmd-wlm) in a
    root-owned directory: a job's user cannot offer one of theirs; two such are told apart by a
    root-owned SlurmdPidFile, else ERROR, never a value judged on a guess.
    With PropagateResourceLimits (slurm.conf, default ALL) slurmd applies the
    submitting shell's soft limits, up to its own hard limits: for a propagated limit the hard limit
    is judged (the most a job can get), else the soft limit (PropagateResourceLimitsExcept=MEMLOCK
    keeps slurmd's); a propagated memlock warns even when slurmd's hard limit is enough, as the job's
    comes from the submitting shell, which the node cannot see. The node's own slurm.conf says which
    are propagated (read locally: no RPC to slurmctld from every node at job start). Without a
    slurmd, the probe's own login limits (set by PAM) are judged, and the message
    says so."""
    facts = read_limits(out)
    for name in ("memlock", "nofile", "nproc", "stack"):
        minimum = getattr(want, name)
        if minimum is None:
            continue
        limit = facts.limits.limits.get(name)
        if limit is None:
            yield Verdict(Status.ERROR, f"{name}: not in the limits read ({facts.source})", name)
            continue
        yield _judge(name, limit, minimum, facts)


def _judge(name: str, limit: Limit, minimum: int | str, facts: LimitsFacts) -> Verdict:
    propagated = facts.slurmd_pid is not None and facts.propagation is not None and facts.propagation.propagated(name)
    value = limit.hard if propagated and facts.limits.has_hard else limit.soft
    which = "hard" if propagated else "soft"
    note = ""
    if facts.slurmd_pid is not None and facts.propagation is not None:
        if propagated:
            note = f"; {facts.propagation.text}: a job gets its submitting shell's soft limit, up to this hard limit"
        else:
            note = f"; {facts.propagation.text}: not propagated, a job gets slurmd's soft limit"
    elif facts.slurmd_pid is not None:
        note = f"; PropagateResourceLimits not known ({facts.why_unknown}): the soft limit judged"
    else:
        note = "; no slurmd on this node" + _not_slurmd(facts)
    seen = f"{name} {shown(name, value)} ({facts.source})"
    observed = {
        name: "unlimited" if value is None else value,
        "limit": which,
        "soft": _raw(limit.soft),
        "hard": _raw(limit.hard),
    }
    expected = {name: minimum}
    if value is None or (minimum != "unlimited" and isinstance(minimum, int) and value >= minimum):
        bound = "unlimited" if minimum == "unlimited" else f">= {shown(name, minimum)}"
        if propagated and name == "memlock":
            # Slurm's FAQ on memlock: the login node's soft limit (often 64 KiB) is propagated to the
            # job unless PropagateResourceLimitsExcept=MEMLOCK; this node cannot see that limit
            return Verdict(
                Status.WARN,
                f"{seen} ({bound}), but {facts.propagation.text if facts.propagation else ''} gives a job its "
                "submitting shell's soft memlock limit (login nodes often have 64 KiB), which this node cannot "
                "see: set PropagateResourceLimitsExcept=MEMLOCK in slurm.conf so jobs get slurmd's",
                name,
                observed,
                expected,
            )
        return Verdict(Status.PASS, f"{seen} ({bound}){note}", name, observed, expected)
    wanted = "unlimited" if minimum == "unlimited" else f">= {shown(name, minimum)}"
    why = " (RDMA memory registration fails)" if name == "memlock" else ""
    return Verdict(Status.FAIL, f"{seen}, expected {wanted}{why}{note}", name, observed, expected)


def _not_slurmd(facts: LimitsFacts) -> str:
    """Processes named slurmd the probe did not take for slurmd (a job's user can name one so)."""
    if not facts.not_slurmd_count:
        return ""
    pids = ", ".join(map(str, facts.not_slurmd)) + (
        " and more" if facts.not_slurmd_count > len(facts.not_slurmd) else ""
    )
    many = facts.not_slurmd_count > 1
    return (
        f" ({facts.not_slurmd_count} process{'es' if many else ''} named slurmd, pid {pids}, "
        f"{'are' if many else 'is'} not root running a root-owned slurmd binary: not judged)"
    )


def _raw(value: int | None) -> int | str:
    return "unlimited" if value is None else value


def shown(name: str, value: int | str | None) -> str:
    """A limit for a message: bytes in KiB/MiB/GiB for memlock and stack, a count otherwise."""
    if value is None or value == "unlimited":
        return "unlimited"
    assert isinstance(value, int)
    if name not in BYTES:
        return str(value)
    for unit, factor in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= factor:
            amount = value / factor
            return f"{amount:.0f} {unit}" if amount == int(amount) or amount >= 100 else f"{amount:.1f} {unit}"
    return f"{value} bytes"
