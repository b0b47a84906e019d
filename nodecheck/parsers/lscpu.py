"""Read `lscpu` (util-linux) in the C locale: the CPU counts and the topology.

Layouts differ by version: util-linux <= 2.36 prints flat `Key:   value` lines; 2.37 and later
indent the keys under CPU(s), Vendor ID and Model name, and wrap the Flags line onto indented
continuation lines without a key. Both are read the same way: a line is `Key: value` (indentation
ignored), anything else (a Flags continuation) is skipped. The first occurrence of a key wins:
a hybrid CPU (big.LITTLE) lists a Model name block per core type, and its first block is what
Thread(s) per core and Core(s) per socket describe; CPU(s) counts them all.

A container or some ARM firmware prints `Socket(s): -` and `Core(s) per cluster:` instead of
per socket: sockets and cores per socket are then None (not known), never 0. A translated lscpu
("Prozessoren:") has no `CPU(s):` line and raises ParseError: the probe runs it with LC_ALL=C.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.parsers.lines import split_lines

TOOL = "lscpu"
_KEY = re.compile(r"^\s*([A-Za-z][A-Za-z0-9 ()/_.,-]*?):\s*(.*?)\s*$")
_CPU_LIST = re.compile(r"^\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*$", re.ASCII)
MAX_CPU_INDEX = 1 << 20  # no kernel has more (NR_CPUS <= 8192); a bigger number is not a CPU list


@dataclass(frozen=True)
class Lscpu:
    cpus: int  # CPU(s): every logical CPU the kernel knows, online or not
    online: frozenset[int] | None  # On-line CPU(s) list
    offline: frozenset[int]  # Off-line CPU(s) list (lscpu prints the line only when some are offline)
    sockets: int | None
    cores_per_socket: int | None
    threads_per_core: int | None
    model_name: str | None
    fields: Mapping[str, str]  # every key's first value, as printed


def parse_cpu_list(text: str, tool: str = TOOL) -> frozenset[int]:
    """The kernel's CPU list format ("0-5,7,9-11"; "" = none) as a set of CPU numbers."""
    text = text.strip()
    if not text:
        return frozenset()
    if not _CPU_LIST.match(text):
        raise ParseError(tool, f"{text!r} is not a CPU list like 0-55,112-167", text)
    cpus: set[int] = set()
    for part in text.split(","):
        first, _, last = part.partition("-")
        low, high = int(first), int(last or first)
        if high < low or high >= MAX_CPU_INDEX:
            raise ParseError(tool, f"CPU range {part!r} is not a range of CPU numbers", text)
        cpus.update(range(low, high + 1))
    return frozenset(cpus)


def format_cpu_list(cpus: frozenset[int] | set[int]) -> str:
    """The kernel's compact form of a CPU set: {0, 1, 2, 5} -> "0-2,5"."""
    ranges: list[list[int]] = []
    for cpu in sorted(cpus):
        if ranges and cpu == ranges[-1][1] + 1:
            ranges[-1][1] = cpu
        else:
            ranges.append([cpu, cpu])
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in ranges)


def parse_lscpu(text: str) -> Lscpu:
    fields: dict[str, str] = {}
    for line in split_lines(text):
        match = _KEY.match(line)
        if match:
            fields.setdefault(match.group(1).strip(), match.group(2))
    if "CPU(s)" not in fields:
        raise ParseError(TOOL, "no 'CPU(s):' line: not lscpu output, or not in the C locale", text)
    cpus = _number(fields, "CPU(s)", text)
    if cpus is None or cpus <= 0:
        raise ParseError(TOOL, f"CPU(s): {fields['CPU(s)']!r} is not a CPU count", text)
    online = parse_cpu_list(fields["On-line CPU(s) list"]) if "On-line CPU(s) list" in fields else None
    offline = parse_cpu_list(fields.get("Off-line CPU(s) list", ""))
    return Lscpu(
        cpus=cpus,
        online=online,
        offline=offline,
        sockets=_number(fields, "Socket(s)", text),
        cores_per_socket=_number(fields, "Core(s) per socket", text),
        threads_per_core=_number(fields, "Thread(s) per core", text),
        model_name=fields.get("Model name") or None,
        fields=fields,
    )


def _number(fields: Mapping[str, str], key: str, text: str) -> int | None:
    """A count lscpu printed; absent or "-" (not known here) is None."""
    value = fields.get(key)
    if value is None or value in ("-", ""):
        return None
    if not value.isdigit() or not value.isascii():
        raise ParseError(TOOL, f"{key}: {value!r} is not a count", text)
    return int(value)
