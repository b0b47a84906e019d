"""The node's processes: stuck in the kernel, not reaped, too many runnable, or left behind by users."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator, Sequence

from pydantic import BaseModel, ConfigDict, Field, model_validator

from nodecheck.core.model import Status, Verdict, excerpt
from nodecheck.core.registry import Captures, check
from nodecheck.core.thresholds import Action, Ceiling, fmt
from nodecheck.parsers.ps import Process
from nodecheck.probes.processes import ProcessFacts, processes_probe, read_processes

# A Slurm job's cgroup: cgroup v1 ".../slurm/uid_1001/job_4242/step_0/task_0", cgroup v2
# "0::/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0" (Slurm's cgroup.conf docs)
SLURM_JOB_CGROUP = re.compile(r"slurm.*/job_(\d+)(?:/|$)")
LISTED = 5  # processes a message names; the observed dict holds them all (bounded below)
OBSERVED_MAX = 50


class ProcHealth(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    d_state_s: int = Field(
        300,
        ge=0,
        description="a process in D state (uninterruptible sleep) in both samples that has run longer than this "
        "many seconds is stuck: a hung NFS/Lustre mount or GPU driver, and it cannot be killed (the kernel "
        "does not show how long a process has been in D state; both samples and its age stand for it)",
    )
    d_state: Action = Field("fail", description="what a stuck D-state process means: fail, warn or off")
    sample_gap_s: int = Field(
        2,
        ge=0,
        le=30,
        description="seconds between the two ps samples (0: one sample; a short I/O wait then counts); the "
        "second is taken only when the first has a process in D state (it could not change the verdict otherwise)",
    )
    ps_timeout_s: int = Field(10, ge=1, le=120, description="seconds each ps may take before it is killed")
    zombie_age_s: int = Field(
        60, ge=0, description="zombies older than this many seconds count (younger ones are being reaped)"
    )
    zombies: Ceiling | None = Field(
        Ceiling(fail_above=100, warn_above=0),
        description="band on the number of zombies older than zombie_age_s (a parent that does not reap "
        "them: often a job's process that is itself stuck); null: not judged",
    )
    load_warn_per_cpu: float | None = Field(
        2.0, gt=0, description="5-minute load average per online CPU above which the load warns; null: not judged"
    )
    load_fail_per_cpu: float | None = Field(
        None, gt=0, description="5-minute load average per online CPU above which the load fails; null: never fails"
    )
    leftovers: Action = Field(
        "warn",
        description="processes of users (uid_min <= uid <= uid_max) outside any Slurm job's cgroup, not allowed below: "
        "fail, warn or off",
    )
    uid_min: int = Field(1000, ge=1, description="the first uid of a person (UID_MIN of /etc/login.defs)")
    # above it: nobody (65534) and systemd's DynamicUser= range (61184-65519), daemons, not people
    uid_max: int = Field(60000, ge=1, description="the last uid of a person (UID_MAX of /etc/login.defs)")
    allow_users: list[str] = Field(default_factory=list, description="users whose processes may run outside jobs")
    allow_commands: list[str] = Field(
        default_factory=list, description="process names (ps comm) that may run outside jobs, whoever runs them"
    )

    @model_validator(mode="after")
    def _ordered(self) -> ProcHealth:
        warn, fail = self.load_warn_per_cpu, self.load_fail_per_cpu
        if warn is not None and fail is not None and warn > fail:
            raise ValueError(f"load_warn_per_cpu ({fmt(warn)}) must be <= load_fail_per_cpu ({fmt(fail)})")
        if self.uid_max < self.uid_min:
            raise ValueError(f"uid_max ({self.uid_max}) must be >= uid_min ({self.uid_min})")
        return self


def probes(want: ProcHealth):
    return [processes_probe(want.sample_gap_s, want.ps_timeout_s, want.uid_min)]


@check("proc.health", probes=probes, params=ProcHealth)
def health(out: Captures, want: ProcHealth) -> Iterator[Verdict]:
    """Processes stuck in D state, zombies piling up, a load far above the CPU count, and leftover
    processes of users outside any Slurm job (ps, and again sample_gap_s later when the first
    listing has a process in D state; never reading a process's command line, which can hang on a
    stuck process).

    D state: a process in uninterruptible sleep in both samples that has run longer than d_state_s (a
    hung NFS/Lustre client or GPU driver: it cannot be killed, and the next job blocks the same way).
    Leftovers: processes of uid_min <= uid <= uid_max whose cgroup is no Slurm job's (a job's processes live in
    .../slurm*/job_<id>/...), not in allow_users/allow_commands; the message names user, process and
    cgroup."""
    [probe] = probes(want)
    facts = read_processes(out, probe)
    yield from _load(facts, want)
    sample = facts.first
    if sample.table is None:
        yield Verdict(Status.TIMEOUT if sample.timed_out else Status.ERROR, sample.why, "processes")
        return
    table = sample.table
    if want.d_state != "off":
        yield _d_state(facts, want)
    if want.zombies is not None:
        yield _zombies(table.processes, want)
    if want.leftovers != "off":
        yield from _leftovers(facts, want)


def _load(facts: ProcessFacts, want: ProcHealth) -> Iterator[Verdict]:
    if want.load_warn_per_cpu is None and want.load_fail_per_cpu is None:
        return
    if facts.load is None or facts.cpus is None:
        missing = "/proc/loadavg" if facts.load is None else "the online CPU count (getconf _NPROCESSORS_ONLN)"
        yield Verdict(Status.ERROR, f"cannot read {missing}: load not judged", "load")
        return
    one, five, fifteen = facts.load
    per_cpu = five / facts.cpus
    seen = f"load average {fmt(one)} {fmt(five)} {fmt(fifteen)} on {facts.cpus} CPUs ({per_cpu:.2f} per CPU over 5 min)"
    observed = {"load1": one, "load5": five, "load15": fifteen, "cpus": facts.cpus, "load5_per_cpu": round(per_cpu, 3)}
    fail, warn = want.load_fail_per_cpu, want.load_warn_per_cpu
    if fail is not None and per_cpu > fail:
        yield Verdict(Status.FAIL, f"{seen}, expected <= {fmt(fail)} per CPU", "load", observed, {"max_per_cpu": fail})
    elif warn is not None and per_cpu > warn:
        yield Verdict(Status.WARN, f"{seen}, expected <= {fmt(warn)} per CPU", "load", observed, {"max_per_cpu": warn})
    else:
        limit = warn if warn is not None else fail
        yield Verdict(Status.PASS, f"{seen} (<= {fmt(limit)} per CPU)", "load", observed, {"max_per_cpu": limit})


def _d_state(facts: ProcessFacts, want: ProcHealth) -> Verdict:
    first = [p for p in facts.first.table.processes if p.code == "D"] if facts.first.table else []
    how = "in one sample"
    if facts.second is None and first and want.sample_gap_s > 0:
        # the probe takes the second sample whenever the first has a process in D state: one missing
        # was cut on the way or never taken, and one sample must not stand for two (it would drain
        # a node for a short I/O wait)
        return Verdict(
            Status.ERROR,
            f"the first sample has {_processes(len(first))} in D state but no second sample came back "
            "(it is taken whenever the first has one): not judged on one sample",
            "D state",
        )
    if facts.second is not None:
        if facts.second.table is None:
            return Verdict(
                Status.TIMEOUT if facts.second.timed_out else Status.ERROR,
                f"second sample: {facts.second.why}",
                "D state",
            )
        again = {(p.pid, p.command): p for p in facts.second.table.processes if p.code == "D"}
        first = [again[(p.pid, p.command)] for p in first if (p.pid, p.command) in again]
        how = f"in both samples {want.sample_gap_s} s apart"
    stuck = [p for p in first if p.elapsed_s is None or p.elapsed_s >= want.d_state_s]
    young = len(first) - len(stuck)
    expected = {"stuck_d_state": 0, "d_state_s": want.d_state_s}
    if not stuck:
        note = f" ({young} in D state {how}, running less than {want.d_state_s} s)" if young else ""
        return Verdict(Status.PASS, f"no process stuck in D state{note}", "D state", {"stuck_d_state": 0}, expected)
    status = Status.FAIL if want.d_state == "fail" else Status.WARN
    named = ", ".join(_named(p) for p in stuck[:LISTED]) + (
        f" and {len(stuck) - LISTED} more" if len(stuck) > LISTED else ""
    )
    count = _processes(len(stuck))
    return Verdict(
        status,
        f"{count} in D state (uninterruptible) {how}, running longer than {want.d_state_s} s: {named}; "
        "expected none (a hung mount or driver; such a process cannot be killed)",
        "D state",
        {"stuck_d_state": len(stuck), "processes": [_row(p) for p in stuck[:OBSERVED_MAX]]},
        expected,
        excerpt("\n".join(p.raw for p in stuck)),
    )


def _zombies(processes: Sequence[Process], want: ProcHealth) -> Verdict:
    band = want.zombies
    assert band is not None
    zombies = [p for p in processes if p.code == "Z" and (p.elapsed_s is None or p.elapsed_s >= want.zombie_age_s)]
    seen = f"{len(zombies)} zombies older than {want.zombie_age_s} s"
    observed: dict[str, object] = {"zombies": len(zombies)}
    if not zombies:
        return Verdict(Status.PASS, seen, "zombies", observed, {"max": band.fail_above})
    if len(zombies) > band.fail_above:
        status, limit = Status.FAIL, band.fail_above
    elif band.warn_above is not None and len(zombies) > band.warn_above:
        status, limit = Status.WARN, band.warn_above
    else:
        status, limit = Status.PASS, band.fail_above if band.warn_above is None else band.warn_above
    parents = sorted({p.ppid for p in zombies if p.ppid is not None})
    named = ", ".join(_named(p) for p in zombies[:LISTED])
    who = f"; parents {', '.join(map(str, parents[:LISTED]))}" if parents else ""
    bound = f", expected <= {fmt(limit)}" if status is not Status.PASS else f" (<= {fmt(limit)})"
    observed["processes"] = [_row(p) for p in zombies[:OBSERVED_MAX]]
    return Verdict(
        status,
        f"{seen}{bound}: {named}{who} (a parent that does not reap its children)",
        "zombies",
        observed,
        {"max": limit},
        excerpt("\n".join(p.raw for p in zombies)),
    )


def _leftovers(facts: ProcessFacts, want: ProcHealth) -> Iterator[Verdict]:
    table = facts.first.table
    assert table is not None
    if not table.has("uid"):
        yield Verdict(Status.ERROR, "ps printed no UID column: leftover processes not judged", "leftovers")
        return
    by_user: dict[str, list[tuple[Process, str]]] = defaultdict(list)
    for p in table.processes:
        if p.uid is None or not want.uid_min <= p.uid <= want.uid_max or p.code == "Z":
            continue
        if (
            p.command in want.allow_commands
            or (p.user or str(p.uid)) in want.allow_users
            or str(p.uid) in want.allow_users
        ):
            continue
        lines = facts.cgroups.get(p.pid)
        if lines is None:
            continue  # gone between ps and the cgroup read: no process to judge
        if any(SLURM_JOB_CGROUP.search(line) for line in lines):
            continue
        by_user[p.user or f"uid {p.uid}"].append((p, _cgroup(lines)))
    if not by_user:
        yield Verdict(
            Status.PASS,
            f"no process of a user (uid {want.uid_min}-{want.uid_max}) outside a Slurm job",
            "leftovers",
            {"leftovers": 0},
            {"leftovers": 0},
        )
        return
    status = Status.FAIL if want.leftovers == "fail" else Status.WARN
    for user, found in by_user.items():
        uid = found[0][0].uid
        named = ", ".join(f"{_named(p)} in {cgroup}" for p, cgroup in found[:LISTED])
        more = f" and {len(found) - LISTED} more" if len(found) > LISTED else ""
        count = "1 process" if len(found) == 1 else f"{len(found)} processes"
        yield Verdict(
            status,
            f"{user} (uid {uid}): {count} outside any Slurm job: {named}{more}; expected none "
            "(a leftover of an earlier job, or a login outside a job; allow it with allow_users/allow_commands)",
            user,
            {"leftovers": len(found), "processes": [{**_row(p), "cgroup": c} for p, c in found[:OBSERVED_MAX]]},
            {"leftovers": 0},
            excerpt("\n".join(p.raw for p, _ in found)),
        )


def _cgroup(lines: Sequence[str]) -> str:
    """The line that says most: the v2 unified line, else the first named hierarchy's path."""
    for line in lines:
        if line.startswith("0::"):
            return line[3:] or "/"
    return lines[0] if lines else "an unknown cgroup"


def _named(p: Process) -> str:
    who = p.user or (f"uid {p.uid}" if p.uid is not None else "")
    age = f"running {age_text(p.elapsed_s)}" if p.elapsed_s is not None else ""
    details = ", ".join(x for x in (who, age) if x)
    return f"{p.command or '?'} (pid {p.pid}{', ' + details if details else ''})"


def _row(p: Process) -> dict[str, object]:
    return {
        "pid": p.pid,
        "command": p.command,
        "user": p.user,
        "uid": p.uid,
        "state": p.state,
        "elapsed_s": p.elapsed_s,
    }


def _processes(n: int) -> str:
    return "1 process" if n == 1 else f"{n} processes"


def age_text(seconds: int) -> str:
    """4482351 -> "51d 21h", 3600 -> "1h 0m", 300 -> "5m 0s", 42 -> "42 s"."""
    if seconds < 60:
        return f"{seconds} s"
    minutes, s = divmod(seconds, 60)
    hours, m = divmod(minutes, 60)
    days, h = divmod(hours, 24)
    if days:
        return f"{days}d {h}h"
    if hours:
        return f"{hours}h {m}m"
    return f"{minutes}m {s}s"
