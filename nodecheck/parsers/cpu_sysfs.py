"""The CPU facts the cpu probe reads from /sys/devices/system/cpu (a sysfs_dump listing):
online/offline lists, SMT state, each CPU's cpufreq governor and thermal-throttle counters.

Files the kernel does not provide are absent, not zero: no cpufreq directory on a VM or with
firmware-controlled frequency, no thermal_throttle on AMD or in a VM, no smt/ before Linux 4.19.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.core.model import quote
from nodecheck.parsers.counts import TOO_BIG, u64
from nodecheck.parsers.lscpu import parse_cpu_list
from nodecheck.parsers.sysfs import Unreadable, parse_sysfs_dump

TOOL = "/sys/devices/system/cpu"
ROOT = "/sys/devices/system/cpu/"
# CPU numbers of at most 7 digits (the CPU lists' bound): int() of thousands of digits raises
_PER_CPU = re.compile(
    r"^cpu(\d{1,7})/(cpufreq/scaling_governor|thermal_throttle/(?:core|package)_throttle_count)$", re.ASCII
)
_CPU_DIR = re.compile(r"^cpu\d+/", re.ASCII)


@dataclass(frozen=True)
class Throttle:
    cpu: int
    core: int | None
    package: int | None


@dataclass(frozen=True)
class CpuSysfs:
    online: frozenset[int] | None
    offline: frozenset[int] | None
    smt_active: bool | None
    smt_control: str | None  # on, off, forceoff, notsupported, notimplemented
    governors: Mapping[int, str]  # cpu -> scaling_governor
    throttle: tuple[Throttle, ...]
    unreadable: tuple[tuple[str, str], ...]

    def governor_counts(self) -> Counter[str]:
        return Counter(self.governors.values())


def parse_cpu_sysfs(text: str) -> CpuSysfs:
    values = parse_sysfs_dump(text, TOOL)
    plain: dict[str, str] = {}
    unreadable: list[tuple[str, str]] = []
    for path, value in values.items():
        if not path.startswith(ROOT):
            raise ParseError(TOOL, f"{path!r} is not under {ROOT}", text)
        if isinstance(value, Unreadable):
            unreadable.append((path, value.reason))
        else:
            plain[path[len(ROOT) :]] = value.strip()
    governors: dict[int, str] = {}
    counts: dict[int, dict[str, int]] = {}
    for name, value in plain.items():
        match = _PER_CPU.match(name)
        if match is None:
            if _CPU_DIR.match(name) and name.endswith(("scaling_governor", "_throttle_count")):
                raise ParseError(TOOL, f"{quote(name)} names no CPU a kernel has", text)
            continue
        cpu, what = int(match.group(1)), match.group(2)
        if what == "cpufreq/scaling_governor":
            governors[cpu] = value
        else:
            count = u64(value)
            if count is None:
                raise ParseError(TOOL, f"cpu{cpu}/{what}: {quote(value)} is not a count ({TOO_BIG})", text)
            counts.setdefault(cpu, {})[what.split("/")[1].split("_")[0]] = count
    active = plain.get("smt/active")
    if active not in (None, "0", "1"):
        raise ParseError(TOOL, f"smt/active: {active!r} is not 0 or 1", text)
    return CpuSysfs(
        online=_cpu_list(plain, "online"),
        offline=_cpu_list(plain, "offline"),
        smt_active=None if active is None else active == "1",
        smt_control=plain.get("smt/control"),
        governors=dict(sorted(governors.items())),
        throttle=tuple(Throttle(cpu, c.get("core"), c.get("package")) for cpu, c in sorted(counts.items())),
        unreadable=tuple(unreadable),
    )


def _cpu_list(plain: Mapping[str, str], name: str) -> frozenset[int] | None:
    return parse_cpu_list(plain[name], TOOL) if name in plain else None
