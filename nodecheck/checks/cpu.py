"""The node's CPUs: online count, topology, SMT, frequency governor and thermal throttling.

Where each fact comes from: when lscpu answered, the counts, the online/offline lists, the
topology and SMT (threads per core > 1) come from lscpu, which reads the same sysfs and /proc
files the kernel exports; sysfs is read directly for what lscpu does not print (each CPU's cpufreq
governor, the thermal-throttle counters) and for online/offline/SMT only when lscpu is missing
or prints no threads per core. Using one source for the counts keeps them consistent (a node's
lscpu and its own sysfs agree; a container's may not, and lscpu is what a site's tooling reads).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from nodecheck.checks.mem import yaml_on_off
from nodecheck.core.model import Status, Verdict, excerpt
from nodecheck.core.registry import Captures, check
from nodecheck.core.thresholds import Ceiling, Exact, fmt
from nodecheck.parsers.cpu_sysfs import TOOL as SYSFS_TOOL
from nodecheck.parsers.cpu_sysfs import CpuSysfs, parse_cpu_sysfs
from nodecheck.parsers.lscpu import Lscpu, count_problem, format_cpu_list, parse_lscpu, topology_problem
from nodecheck.parsers.uptime import parse_uptime
from nodecheck.probes.cpu import CPU, cpu_sections
from nodecheck.probes.versions import ok_text

SMT_OFF_CONTROLS = ("off", "forceoff")  # /sys/devices/system/cpu/smt/control: siblings offline on purpose


class CpuParams(BaseModel):
    """What cpu expects of a node's CPUs; every unset expectation is reported, not judged."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cpus: int | None = Field(
        None,
        ge=1,
        strict=True,
        description="online CPUs (logical) the node must have (224 on a DGX H100); unset: any offline CPU fails",
    )
    sockets: int | None = Field(None, ge=1, strict=True, description="CPU sockets (lscpu Socket(s))")
    cores_per_socket: int | None = Field(None, ge=1, strict=True, description="lscpu Core(s) per socket")
    threads_per_core: int | None = Field(None, ge=1, strict=True, description="lscpu Thread(s) per core")
    smt: Annotated[Literal["on", "off", "any"], BeforeValidator(yaml_on_off)] = Field(
        "any", description="simultaneous multithreading (Hyper-Threading) on, off, or any"
    )
    governor: str | None = Field(
        None,
        pattern=r"^[a-z][a-z0-9_]*$",
        max_length=32,
        description="cpufreq scaling_governor every CPU must run (performance for GPU nodes); unset: reported",
    )
    # counts are events since boot; the kernel checks and logs throttling at most every 5 minutes
    # (CHECK_INTERVAL 300 s, arch/x86/kernel/cpu/mce/therm_throt.c): 12 an hour is throttling in every
    # window, sustained; more than one an hour means the cooling does not keep up under load
    throttle_per_hour: Ceiling = Field(
        Ceiling(fail_above=12, warn_above=1),
        description="thermal-throttle events (core or package) per hour since boot on the worst CPU; "
        "an uptime under an hour counts as an hour",
    )


@check("cpu", probes=[CPU], params=CpuParams)
def cpu(out: Captures, want: CpuParams) -> Iterator[Verdict]:
    """CPUs: the online count (none offline), sockets / cores / threads and SMT as expected, every
    CPU on the expected cpufreq governor, and no CPU thermally throttling (counters per hour since
    boot); counts from lscpu, governor and throttle counters from sysfs."""
    sections = cpu_sections(out)
    sysfs = parse_cpu_sysfs(ok_text(sections, "cpu-sysfs", SYSFS_TOOL))
    lscpu = None if sections.facts.get("lscpu") == "missing" else parse_lscpu(ok_text(sections, "lscpu", "lscpu"))
    if (cut := sections.facts.get("cpu-sysfs-truncated")) is not None:
        yield Verdict(Status.ERROR, f"CPU sysfs walk stopped early ({cut}): the rest was not read", "sysfs")
    if sysfs.unreadable:
        paths = ", ".join(f"{p} ({why})" for p, why in sysfs.unreadable[:5])
        yield Verdict(Status.ERROR, f"CPU sysfs files not read: {paths}", "sysfs")
    yield from _online(lscpu, sysfs, want)
    yield from _topology(lscpu, sysfs, want)
    yield from _governor(sysfs, want)
    yield from _throttle(sysfs, parse_uptime(ok_text(sections, "uptime", "/proc/uptime")), want)


def _online(lscpu: Lscpu | None, sysfs: CpuSysfs, want: CpuParams) -> Iterator[Verdict]:
    if lscpu is not None:
        # lscpu prints the On-line list, and the Off-line list whenever a present CPU is not online:
        # a list lost on the way must not read as "none offline"
        if lscpu.online is None:
            yield Verdict(Status.ERROR, "lscpu printed no On-line CPU(s) list: online CPUs not known", "CPUs")
            return
        if problem := count_problem(lscpu):
            yield Verdict(Status.ERROR, problem, "CPUs", excerpt=_lscpu_lines(lscpu, "CPU(s)", "list"))
            return
        source = "lscpu"
        online, offline = lscpu.online, lscpu.offline
        count = len(online)
    elif sysfs.online is not None:
        source = "sysfs: no lscpu on the node"
        online, offline = sysfs.online, sysfs.offline or frozenset()
        count = len(online)
    else:
        yield Verdict(Status.ERROR, "online CPUs not known: no lscpu and no /sys/devices/system/cpu/online", "CPUs")
        return
    listed = f"; offline: {format_cpu_list(offline)}" if offline else ""
    observed = {"online": count, "offline": len(offline)}
    if want.cpus is not None:
        expected = {"online": want.cpus}
        if count != want.cpus:
            yield Verdict(
                Status.FAIL, f"{count} CPUs online, expected {want.cpus}{listed} ({source})", "CPUs", observed, expected
            )
        else:
            yield Verdict(Status.PASS, f"{count} CPUs online ({source})", "CPUs", observed, expected)
        return
    if offline and sysfs.smt_control in SMT_OFF_CONTROLS and want.smt != "on":
        yield Verdict(
            Status.PASS,
            f"{count} CPUs online; {len(offline)} offline are SMT siblings (smt/control {sysfs.smt_control}) "
            f"(no expected count: not compared) ({source})",
            "CPUs",
            observed,
        )
    elif offline:
        yield Verdict(
            Status.FAIL,
            f"{_cpus(len(offline))} offline: {format_cpu_list(offline)}, expected none ({count} online, {source})",
            "CPUs",
            observed,
            {"offline": 0},
        )
    else:
        yield Verdict(
            Status.PASS, f"{count} CPUs online, none offline (no expected count) ({source})", "CPUs", observed
        )


def _cpus(n: int) -> str:
    return f"{n} CPU" if n == 1 else f"{n} CPUs"


def _smt(lscpu: Lscpu | None, sysfs: CpuSysfs) -> tuple[bool | None, str]:
    """(SMT on?, where that came from)."""
    if lscpu is not None and lscpu.threads_per_core is not None:
        return lscpu.threads_per_core > 1, f"lscpu: {lscpu.threads_per_core} threads per core"
    if sysfs.smt_control in SMT_OFF_CONTROLS:
        return False, f"smt/control {sysfs.smt_control}"
    if sysfs.smt_active is not None:
        return sysfs.smt_active, f"smt/active {int(sysfs.smt_active)}"
    return None, "neither lscpu's threads per core nor /sys/devices/system/cpu/smt"


def _lscpu_lines(lscpu: Lscpu, *words: str) -> str:
    """lscpu's lines whose key holds one of `words`, for an excerpt."""
    return excerpt("\n".join(f"{k}: {v}" for k, v in lscpu.fields.items() if any(w in k for w in words)))


def _topology(lscpu: Lscpu | None, sysfs: CpuSysfs, want: CpuParams) -> Iterator[Verdict]:
    if lscpu is not None and (problem := topology_problem(lscpu)):
        # a topology line lost or garbled: neither judged against the playbook nor reported
        yield Verdict(Status.ERROR, problem, "topology", excerpt=_lscpu_lines(lscpu, "(s)"))
        return
    asked = (
        ("sockets", "Socket(s)", want.sockets),
        ("cores_per_socket", "Core(s) per socket", want.cores_per_socket),
        ("threads_per_core", "Thread(s) per core", want.threads_per_core),
    )
    for attr, key, expected in asked:
        if expected is None:
            continue
        value = getattr(lscpu, attr) if lscpu is not None else None
        if value is None:
            why = "no lscpu on the node" if lscpu is None else f"lscpu prints {key}: {lscpu.fields.get(key, 'nothing')}"
            yield Verdict(Status.ERROR, f"{key} not known ({why}), expected {expected}", key, {}, {attr: expected})
        else:
            yield Exact(value=expected).judge(value, what=key, subject=key)
    smt, source = _smt(lscpu, sysfs)
    state = "unknown" if smt is None else ("on" if smt else "off")
    if want.smt != "any":
        if smt is None:
            yield Verdict(Status.ERROR, f"SMT state not known ({source}), expected {want.smt}", "SMT")
        elif (want.smt == "on") == smt:
            yield Verdict(Status.PASS, f"SMT {state} ({source})", "SMT", {"smt": state}, {"smt": want.smt})
        else:
            yield Verdict(
                Status.FAIL, f"SMT {state} ({source}), expected {want.smt}", "SMT", {"smt": state}, {"smt": want.smt}
            )
    nothing_asked = all(v is None for v in (want.sockets, want.cores_per_socket, want.threads_per_core))
    if nothing_asked and want.smt == "any" and lscpu is not None:
        shape = " x ".join(
            f"{'?' if v is None else v} {name}"
            for v, name in (
                (lscpu.sockets, "sockets"),
                (lscpu.cores_per_socket, "cores"),
                (lscpu.threads_per_core, "threads"),
            )
        )
        model = f", {lscpu.model_name}" if lscpu.model_name else ""
        yield Verdict(Status.PASS, f"{shape} (SMT {state}){model} (not judged)", "topology")


def _governor(sysfs: CpuSysfs, want: CpuParams) -> Iterator[Verdict]:
    counts = sysfs.governor_counts()
    if not counts:
        message = "no cpufreq scaling_governor in sysfs (frequency set by firmware, or a VM): governor not judged"
        if want.governor is not None:
            yield Verdict(
                Status.WARN, f"{message}, expected {want.governor}", "governor", {}, {"governor": want.governor}
            )
        else:
            yield Verdict(Status.PASS, message, "governor")
        return
    total = sum(counts.values())
    spread = ", ".join(f"{name} on {n}" for name, n in counts.most_common())
    observed = {"governors": dict(counts)}
    if want.governor is None:
        yield Verdict(Status.PASS, f"scaling_governor {spread} of {total} CPUs (not judged)", "governor", observed)
        return
    expected = {"governor": want.governor}
    others = sorted(cpu for cpu, name in sysfs.governors.items() if name != want.governor)
    if others:
        yield Verdict(
            Status.FAIL,
            f"scaling_governor {spread} of {total} CPUs, expected {want.governor} on all "
            f"(not: CPU {format_cpu_list(frozenset(others))})",
            "governor",
            observed,
            expected,
        )
    else:
        yield Verdict(
            Status.PASS, f"scaling_governor {want.governor} on all {total} CPUs", "governor", observed, expected
        )


def _throttle(sysfs: CpuSysfs, uptime_s: float, want: CpuParams) -> Iterator[Verdict]:
    if not sysfs.throttle:
        yield Verdict(
            Status.PASS,
            "no thermal_throttle counters in sysfs (AMD, ARM or a VM): throttling not judged",
            "thermal throttle",
        )
        return
    hours = max(uptime_s / 3600, 1.0)
    worst: list[Verdict] = []
    for kind in ("core", "package"):
        counted = [(t.cpu, getattr(t, kind)) for t in sysfs.throttle if getattr(t, kind) is not None]
        if not counted:
            continue
        cpu, count = max(counted, key=lambda c: c[1])
        rate = round(count / hours, 2)
        verdict = want.throttle_per_hour.judge(rate, what=f"{kind} throttle events", unit="per hour")
        throttled = [c for c, n in counted if n]
        where = f" (CPUs with events: {format_cpu_list(frozenset(throttled))})" if throttled else ""
        worst.append(
            Verdict(
                verdict.status,
                f"CPU{cpu}: {count} {kind} thermal throttle events in {uptime_s / 3600:.1f} h = "
                + verdict.message.removeprefix(f"{kind} throttle events ")
                + where,
                f"CPU{cpu}",
                {f"{kind}_throttle_count": count, "per_hour": rate},
                verdict.expected,
                excerpt("\n".join(f"cpu{c}: {n}" for c, n in counted if n)),
            )
        )
    bad = [v for v in worst if v.status is not Status.PASS]
    if bad:
        yield from bad
        return
    limit = want.throttle_per_hour.warn_above
    limit = want.throttle_per_hour.fail_above if limit is None else limit
    top = ", ".join(v.message.split(" = ")[0] for v in worst)
    yield Verdict(
        Status.PASS,
        f"thermal throttling within {fmt(limit)} per hour on {len(sysfs.throttle)} CPUs (worst {top})",
        "thermal throttle",
        {v.subject: dict(v.observed) for v in worst},
        {"per_hour_max": limit},
    )
