"""Read `lscpu` (util-linux) in the C locale: the CPU counts and the topology.

Layouts differ by version: util-linux <= 2.36 prints flat `Key:   value` lines; 2.37 and later
indent the keys under CPU(s), Vendor ID and Model name, and wrap the Flags line onto indented
continuation lines without a key. Both are read the same way: a line is `Key: value` (indentation
ignored), anything else (a Flags continuation) is skipped. The first occurrence of a key wins in
`fields` and the top-level counts: a hybrid CPU (big.LITTLE) lists a Model name block per core
type, and its first block is what Thread(s) per core and Core(s) per socket describe; CPU(s) counts
them all. `types` keeps every block, so that the blocks together can be held against CPU(s).

A container or some ARM firmware prints `Socket(s): -` and `Core(s) per cluster:` instead of
per socket: sockets and cores per socket are then None (not known), never 0; so is a 0, which
lscpu prints where the kernel exports no topology. A translated lscpu ("Prozessoren:") has no
`CPU(s):` line and raises ParseError: the probe runs it with LC_ALL=C.

`count_problem` and `topology_problem` say when lscpu's own numbers do not add up (a line lost
or garbled on the way): lscpu computes them from one sysfs walk, so on a real node they always do.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.core.model import quote
from nodecheck.parsers.counts import TOO_BIG, u64
from nodecheck.parsers.lines import split_lines

TOOL = "lscpu"
# the value is taken whole and stripped: a lazy value group before `\s*$` backtracked over spaces
_KEY = re.compile(r"^\s*([A-Za-z][A-Za-z0-9 ()/_.,-]*?):(.*)$", re.DOTALL)
# CPU numbers of at most 7 digits (MAX_CPU_INDEX below): int() of thousands of digits raises
_CPU_LIST = re.compile(r"^\d{1,7}(?:-\d{1,7})?(?:,\d{1,7}(?:-\d{1,7})?)*$", re.ASCII)
MAX_CPU_INDEX = 1 << 20  # no kernel has more (NR_CPUS <= 8192); a bigger number is not a CPU list

# the topology lines of one CPU type (lscpu's print_summary_cputype), by what they count
THREADS = "Thread(s) per core"
CORES = ("Core(s) per socket", "Core(s) per cluster")
SOCKETS = ("Socket(s)", "Socket(s) per book")  # per book: s390, where books and drawers hold sockets
CLUSTERS = "Cluster(s)"
_GROUP = {THREADS: THREADS, **dict.fromkeys(CORES, "cores"), **dict.fromkeys(SOCKETS, "sockets"), CLUSTERS: CLUSTERS}


@dataclass(frozen=True)
class CpuType:
    """One block of lscpu's topology: a CPU type (util-linux >= 2.37 prints one per Model name; a
    hybrid has several) or, in older layouts, the whole machine."""

    model_name: str | None
    threads_per_core: int | None  # None: not known ("-", or 0 where sysfs has no topology)
    cores: int | None  # per socket, or per cluster (`per`)
    sockets: int | None  # sockets, or clusters where cores are counted per cluster; None: not known, or s390 books
    per: str  # "socket" or "cluster"
    missing: tuple[str, ...]  # the topology lines this block lacks ("Socket(s)", ...)

    @property
    def shape(self) -> str:
        return f"{self.sockets} {self.per}s x {self.cores} cores x {self.threads_per_core} threads"


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
    types: tuple[CpuType, ...] = ()  # every topology block, in order


def parse_cpu_list(text: str, tool: str = TOOL) -> frozenset[int]:
    """The kernel's CPU list format ("0-5,7,9-11"; "" = none) as a set of CPU numbers."""
    text = text.strip()
    if not text:
        return frozenset()
    if not _CPU_LIST.match(text):
        raise ParseError(tool, f"{quote(text)} is not a CPU list like 0-55,112-167", text)
    cpus: set[int] = set()
    above = -1
    for part in text.split(","):
        first, _, last = part.partition("-")
        low, high = int(first), int(last or first)
        # the kernel prints ascending, disjoint ranges: anything else is garbled, and overlapping
        # ranges would make a 1 MB line cost a million set insertions per range
        if low <= above or high < low or high >= MAX_CPU_INDEX:
            raise ParseError(tool, f"CPU range {quote(part)} is not a range of CPU numbers in order", text)
        cpus.update(range(low, high + 1))
        above = high
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
    keyed: list[tuple[str, str]] = []
    for line in split_lines(text):
        match = _KEY.match(line)
        if match:
            key, value = match.group(1).strip(), match.group(2).strip()
            fields.setdefault(key, value)
            keyed.append((key, value))
    if "CPU(s)" not in fields:
        raise ParseError(TOOL, "no 'CPU(s):' line: not lscpu output, or not in the C locale", text)
    cpus = _number(fields, "CPU(s)", text)
    if cpus is None:
        raise ParseError(TOOL, f"CPU(s): {quote(fields['CPU(s)'])} is not a CPU count", text)
    online = parse_cpu_list(fields["On-line CPU(s) list"]) if "On-line CPU(s) list" in fields else None
    offline = parse_cpu_list(fields.get("Off-line CPU(s) list", ""))
    return Lscpu(
        cpus=cpus,
        online=online,
        offline=offline,
        sockets=_number(fields, "Socket(s)", text),
        cores_per_socket=_number(fields, "Core(s) per socket", text),
        threads_per_core=_number(fields, "Thread(s) per core", text),
        model_name=_name(fields.get("Model name", "")),
        fields=fields,
        types=_types(keyed, text),
    )


def _types(keyed: list[tuple[str, str]], text: str) -> tuple[CpuType, ...]:
    """The topology blocks: a block ends where one of its lines comes again (the next CPU type)."""
    blocks: list[dict[str, tuple[str, str]]] = []
    for key, value in keyed:
        group = _GROUP.get(key)
        if group is None:
            continue
        if not blocks or group in blocks[-1]:
            blocks.append({})
        blocks[-1][group] = (key, value)
    names = [_name(value) for key, value in keyed if key == "Model name"]
    if len(names) != len(blocks):  # the old flat layout prints it after the topology, once
        names = (names or [None])[:1] if len(blocks) == 1 else [None] * len(blocks)
    return tuple(_cpu_type(block, name, text) for block, name in zip(blocks, names))


def _name(value: str) -> str | None:
    return None if value in ("", "-") else value  # lscpu prints "-" for a CPU type without a name


def _cpu_type(block: dict[str, tuple[str, str]], name: str | None, text: str) -> CpuType:
    def number(group: str) -> int | None:
        return _count(*block[group], text) if group in block else None

    per_cluster = block.get("cores", ("", ""))[0] == "Core(s) per cluster"
    missing = [
        line for line, group in ((THREADS, THREADS), (CORES[0], "cores"), (SOCKETS[0], "sockets")) if group not in block
    ]
    if per_cluster and CLUSTERS not in block:
        missing.append(CLUSTERS)
    sockets = number(CLUSTERS) if per_cluster else number("sockets")
    if not per_cluster and block.get("sockets", ("", ""))[0] == "Socket(s) per book":
        sockets = None  # s390: not a total (books and drawers multiply it)
    return CpuType(
        model_name=name,
        threads_per_core=number(THREADS),
        cores=number("cores"),
        sockets=sockets,
        per="cluster" if per_cluster else "socket",
        missing=tuple(missing),
    )


def _number(fields: Mapping[str, str], key: str, text: str) -> int | None:
    """A count lscpu printed; absent, "-" or 0 (not known here) is None."""
    value = fields.get(key)
    return None if value is None else _count(key, value, text)


def _count(key: str, value: str, text: str) -> int | None:
    if value == "-":
        return None
    if not value:  # lscpu prints a number or "-": an empty value lost its number
        raise ParseError(TOOL, f"{key}: no value (cut off?)", text)
    number = u64(value)
    if number is None:
        raise ParseError(TOOL, f"{key}: {quote(value)} is not a count ({TOO_BIG})", text)
    return number or None  # 0: the kernel exports no topology here


def count_problem(lscpu: Lscpu) -> str | None:
    """Why CPU(s) is not the online and offline CPUs together (lscpu prints the Off-line list exactly
    when some present CPU is not online), or None when it is."""
    if lscpu.online is None:
        return None
    if both := lscpu.online & lscpu.offline:
        return f"lscpu lists CPU {format_cpu_list(both)} both online and offline: its output is garbled"
    listed = len(lscpu.online) + len(lscpu.offline)
    if listed == lscpu.cpus:
        return None
    detail, how = "", "garbled"
    if listed < lscpu.cpus:
        how = "incomplete"
        neither = frozenset(range(lscpu.cpus)) - lscpu.online - lscpu.offline
        if len(neither) == lscpu.cpus - listed:  # CPUs numbered from 0: name the ones not listed
            detail = f" (CPU {format_cpu_list(neither)} in neither)"
    return (
        f"lscpu says CPU(s) {lscpu.cpus}, but lists {len(lscpu.online)} online and {len(lscpu.offline)} "
        f"offline{detail}: its output is {how}"
    )


def topology_problem(lscpu: Lscpu) -> str | None:
    """Why lscpu's topology lines are not whole or cannot be its online CPUs, or None.

    Bounds, not equality, so that no real output is refused: util-linux >= 2.37 counts cores per
    socket as cores // sockets (an uneven split rounds down) and threads per core as the most of any
    core (an Intel hybrid's E cores have 1 of the P cores' 2), and older versions as online CPUs //
    cores (rounded down). Every core has at least one online CPU, so for each block
    sockets x cores <= its online CPUs < (threads + 1) x (sockets x cores + sockets - 1)."""
    if not lscpu.types:
        return f"lscpu printed no {THREADS}, {CORES[0]} or {SOCKETS[0]} line: the topology is not known"
    for cpu_type in lscpu.types:
        if cpu_type.missing:
            block = cpu_type.model_name or "CPU type"
            return f"lscpu's {block} block has no {' or '.join(cpu_type.missing)} line: the topology is not known"
    counts = [(t.sockets, t.cores, t.threads_per_core) for t in lscpu.types]
    known = [(s, c, t) for s, c, t in counts if s is not None and c is not None and t is not None]
    if lscpu.online is None or len(known) < len(counts):
        return None  # not known ("-", 0, s390 books): nothing to hold against the CPUs
    online = len(lscpu.online)
    fewest = sum(s * c for s, c, _ in known)
    most = sum((t + 1) * (s * c + s - 1) for s, c, t in known)
    if fewest <= online < most:
        return None
    shape = " + ".join(t.shape for t in lscpu.types)
    return f"lscpu's topology, {shape}, cannot hold its {online} online CPUs: its output is garbled"
