"""Fuzz targets of the node-level parsers (issue 32, section 3): cpu, mem (and the limits and ps
readers beside them).

Seeds are the recordings under tests/data (tests/data/SOURCES.md): lscpu, the CPU and EDAC sysfs
listings, /proc/meminfo, /proc/PID/limits and `ulimit -a`, ps. The probes' own framing (the
@@nodecheck sections and facts of the limits and processes probes) is built around those
recordings as tests/checks/test_limits.py and tests/checks/test_proc.py build it.

Not a target of its own: ps.parse_elapsed, a value helper whose contract is ValueError; parse_ps
turns that into ParseError, and parse_ps is fuzzed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nodecheck.parsers import cpu_sysfs, edac, lscpu, meminfo, proc_limits, ps
from tests.fuzz.targets import Target
from tests.helpers import DATA, data

SPR = "lscpu/hf-blog-sapphire-rapids-8480plus-2s-56c-smt-224cpu.txt"
VM_SYSFS = "sysfs_cpu/buildhost-kvm-2cpu-no-cpufreq-smt-notsupported.txt"
H100_MEMINFO = "meminfo/sichek-2tib-gpu-node-no-hugepages-no-swap.txt"
THUNDERX2_EDAC = "sysfs_edac/lkml-2019-ghes-edac-thunderx2-nonzero-counters.txt"
DEVBOX_LIMITS = "proc-limits/devbox-kernel-trailing-spaces-memlock-8mib.txt"
DEVBOX_PS = "ps/devbox-procps-4.0.2-probe-columns-pid-namespace.txt"
LOADAVG = "0.02 0.04 0.05 1/497 11947\n"  # prometheus/procfs fixtures proc/loadavg


def _files(tool: str) -> list[str]:
    return [data(f"{tool}/{p.name}") for p in sorted((DATA / tool).iterdir()) if p.is_file()]


def _section(name: str, body: str, rc: int = 0) -> str:
    return f"@@nodecheck begin {name}\n{body}@@nodecheck end {name} rc={rc}\n"


# -- parsers, as the checks call them --------------------------------------------------------------


def _lscpu(text: str):
    """parse_lscpu, then the two questions the cpu check asks of it."""
    got = lscpu.parse_lscpu(text)
    return got, lscpu.count_problem(got), lscpu.topology_problem(got)


def _cpu_lists() -> tuple[str, ...]:
    return ("0-223", "0-111,113-223", "6,7,10,11,14,15", "0,1", "")


def _limits_outputs() -> tuple[str, ...]:
    """The limits probe's stdout around every recording: slurmd's limits, then its slurm.conf lines."""
    config = "PropagateResourceLimitsExcept=MEMLOCK\n"
    return tuple(
        f"@@nodecheck source slurmd pid=4242 via=exe\n{_section('limits', text)}"
        f"@@nodecheck slurm-conf /etc/slurm/slurm.conf\n{_section('slurm-config', config)}"
        for text in _files("proc-limits")
    )


def _read_limits(text: str):
    from nodecheck.probes.limits import _read

    return _read(text)


def _lines(name: str, listing: str) -> str:
    """The processes probe's fact after a sample: how many lines ps printed."""
    return f"@@nodecheck lines:{name} {len(listing.split(chr(10))) - 1}\n"


def _processes_output(listing: str, printed: str | None = None) -> str:
    """The processes probe's stdout with `listing` as both samples; `printed`: what ps printed
    (the line counts), when not `listing` itself."""
    printed = listing if printed is None else printed
    text = "@@nodecheck cpus 2\n" + _section("loadavg", LOADAVG) + _section("ps1", listing) + _lines("ps1", printed)
    text += _section("cgroups", "")
    return text + _section("ps2", listing) + _lines("ps2", printed)


def _processes_outputs() -> tuple[str, ...]:
    return tuple(_processes_output(text) for text in _files("ps"))


def _read_processes(text: str):
    from nodecheck.probes.processes import _read

    return _read(text, 10)


TARGETS: tuple[Target, ...] = (
    Target("lscpu.parse_lscpu", _lscpu, ("lscpu/*",), "cpu_mem"),
    Target("lscpu.parse_cpu_list", lscpu.parse_cpu_list, (), "cpu_mem", _cpu_lists),
    Target("cpu_sysfs.parse_cpu_sysfs", cpu_sysfs.parse_cpu_sysfs, ("sysfs_cpu/*",), "cpu_mem"),
    Target("meminfo.parse_meminfo", meminfo.parse_meminfo, ("meminfo/*",), "cpu_mem"),
    Target("edac.parse_edac", edac.parse_edac, ("sysfs_edac/*",), "cpu_mem"),
    Target("ps.parse_ps", ps.parse_ps, ("ps/*",), "cpu_mem"),
    Target("proc_limits.parse_limits", proc_limits.parse_limits, ("proc-limits/*",), "cpu_mem"),
    Target("limits.read_limits", _read_limits, (), "cpu_mem", _limits_outputs),
    Target("processes.read_processes", _read_processes, (), "cpu_mem", _processes_outputs),
)


# -- hollowed passing outputs (tests/fuzz/test_hollow_not_pass.py) ---------------------------------


def _judge_cpu(text: str):
    """cpu on a node whose lscpu printed `text` (exit 0), beside a VM's real CPU sysfs."""
    from nodecheck.checks.cpu import CpuParams, cpu
    from nodecheck.probes.cpu import CPU
    from tests.helpers import captures

    out = _section("uptime", "7200.00 1.00\n") + _section("lscpu", text) + _section("cpu-sysfs", data(VM_SYSFS))
    return list(cpu(captures(CPU, out), CpuParams()))


def _judge_mem(text: str):
    """mem without dimms: (the issue's case) on a node whose EDAC walk listed the real ThunderX2
    listing's files and `text` arrived; its meminfo is the real 2 TiB GPU node's."""
    from nodecheck.checks.mem import MemParams, mem
    from nodecheck.probes.memory import MEMORY
    from tests.helpers import captures

    walked = f"@@nodecheck edac-walked files={len(data(THUNDERX2_EDAC).splitlines())}\n"
    out = _section("meminfo", data(H100_MEMINFO)) + _section("uptime", "259200.00 1.00\n")
    return list(mem(captures(MEMORY, out + _section("edac", text) + walked), MemParams()))


def _judge_limits(text: str):
    """limits on slurmd's /proc/PID/limits `text`, with minimums the real devbox limits meet."""
    from nodecheck.checks.limits import LimitsParams, limits
    from nodecheck.probes.limits import LIMITS
    from tests.helpers import captures

    out = f"@@nodecheck source slurmd pid=4242 via=exe\n{_section('limits', text)}"
    return list(limits(captures(LIMITS, out), LimitsParams(memlock=1 << 20, nofile=1024)))


def _judge_proc(text: str):
    """proc.health on a node whose ps printed the real devbox listing and `text` arrived."""
    from nodecheck.checks.proc import ProcHealth, health, probes
    from tests.helpers import captures

    want = ProcHealth()
    [probe] = probes(want)
    return list(health(captures(probe, _processes_output(text, printed=data(DEVBOX_PS))), want))


# check -> (judge of one output as the runner routes it, a real output it passes)
HOLLOW: dict[str, tuple[Callable[[str], Any], str]] = {
    "cpu": (_judge_cpu, data(SPR)),
    "mem": (_judge_mem, data(THUNDERX2_EDAC)),
    "limits": (_judge_limits, data(DEVBOX_LIMITS)),
    "proc.health": (_judge_proc, data(DEVBOX_PS)),
}
