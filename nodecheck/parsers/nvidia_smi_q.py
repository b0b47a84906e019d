"""`nvidia-smi -q` text: the top-level versions and one Gpu per "GPU <bus id>" section."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.core.model import quote
from nodecheck.parsers.gpu import Gpu, GpuFabric, GpuProcess, RemappedRows
from nodecheck.parsers.lines import split_lines
from nodecheck.parsers.nvidia_smi_values import (
    INTEGER,
    WITH_UNIT,
    available,
    check_failure,
    expect_unique,
    normalise_bus_id,
    read_count,
    read_flag,
    read_float,
)


@dataclass(frozen=True)
class QFacts:
    driver_version: str | None
    cuda_version: str | None
    gpus: tuple[Gpu, ...]
    gaps: tuple[str, ...] = ()


_Q_GPU_HEADER = re.compile(r"GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])", re.ASCII)
_Q_BANNER = re.compile(r"=+\s*NVSMI LOG\s*=+")
_Q_LINE = re.compile(r"([^:]*?\S)\s*(?::\s*(.*))?")  # "Key   : value" or a section name "Key"
_Q_CLOCK_REASONS = {
    "idle": "gpu_idle",
    "applications clocks setting": "applications_clocks_setting",
    "sw power cap": "sw_power_cap",
    "hw slowdown": "hw_slowdown",
    "sync boost": "sync_boost",
    "sw thermal slowdown": "sw_thermal_slowdown",
    "hw thermal slowdown": "hw_thermal_slowdown",
    "hw power brake slowdown": "hw_power_brake_slowdown",
    "display clock setting": "display_clock_setting",
}
# ECC counters in the layout of drivers since about 450: "SRAM Uncorrectable" (550+: split into
# "SRAM Uncorrectable Parity" and "SRAM Uncorrectable SEC-DED"), "DRAM Uncorrectable", and the
# "Correctable" pair. Older drivers print "Single Bit"/"Double Bit" sub-sections with a "Total".
_Q_UNCORRECTABLE = re.compile(r"(sram|dram) uncorrectable(?: .*)?")
_Q_CORRECTABLE = re.compile(r"(sram|dram) correctable")
# "Fabric" / "State" (driver 535+; NVML_GPU_FABRIC_STATE_*), by the names GpuFabric.state uses
_Q_FABRIC_STATES = {
    "Completed": "completed",
    "In Progress": "in_progress",
    "Not Started": "not_started",
    "Not Supported": "not_supported",
}
_Q_UUID = re.compile(r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}", re.ASCII)


@dataclass(frozen=True)
class _Entry:
    path: tuple[str, ...]  # lower-cased keys from the GPU section down
    value: str | None  # None: a section name without a value


def parse_q(text: str) -> QFacts:
    """Facts from `nvidia-smi -q` text: top-level versions and one Gpu per "GPU <bus id>" section.
    Excerpts are read for what they show; cut-off parts are named in `gaps`, never filled in."""
    tool = "nvidia-smi -q"
    check_failure(tool, text)
    lines = [line.expandtabs(4).rstrip() for line in split_lines(text)]
    gaps: list[str] = []
    cut = bool(lines) and not text.endswith("\n")
    if cut:
        # nvidia-smi ends its output with a newline: a last line without one may be cut mid-value
        # ("Memory Max Operati", "Bus : 0x0A" for 0x0A1...), so it is not read
        last = lines.pop()
        if last.strip():
            gaps.append(f"output ends mid-line: {quote(last.strip())}")
    if any(line.strip() == "--" for line in lines):
        # `nvidia-smi -q | grep -C N ...` separates its groups with "--": not output, and what lay
        # between two groups is unknown (the sections' ends are judged as cut where they meet one)
        gaps.append("grep group separator '--': lines between the groups not shown")
    lines = [line for line in lines if line.strip() not in ("", "--") and not _Q_BANNER.fullmatch(line.strip())]
    if not lines:
        raise ParseError(tool, "empty output", text)
    headers = {i: match for i, line in enumerate(lines) if (match := _Q_GPU_HEADER.fullmatch(line.strip()))}
    starts = list(headers)
    sections: list[tuple[str | None, list[str]]]
    if starts:
        preamble = _q_entries(lines[: starts[0]], gaps)
        sections = [
            (normalise_bus_id(headers[at][1]), lines[at + 1 : end])
            for at, end in zip(starts, starts[1:] + [len(lines)])
        ]
    else:
        preamble, sections = [], [(None, lines)]
        gaps.append("no GPU header")
    gpus = []
    for index, (bus_id, section) in enumerate(sections):
        entries = _q_entries(section, gaps)
        if bus_id is None and not any(_known_q_key(entry.path) for entry in entries):
            raise ParseError(tool, f"not nvidia-smi -q output: first line {quote(lines[0].strip())}", text)
        gpus.append(_q_gpu(index, bus_id, entries, gaps, cut=cut and index == len(sections) - 1))
    _expect_unique_bus_ids(tool, gpus, text)
    top = {entry.path: entry.value for entry in preamble}
    attached = available(top.get(("attached gpus",)))
    if attached is not None and INTEGER.fullmatch(attached) and int(attached) > len(sections):
        gaps.append(f"Attached GPUs says {attached}, output shows {len(sections)}")
    return QFacts(
        available(top.get(("driver version",))), available(top.get(("cuda version",))), tuple(gpus), tuple(gaps)
    )


def _expect_unique_bus_ids(tool: str, gpus: Sequence[Gpu], text: str) -> None:
    expect_unique(tool, (f"GPU {gpu.pci_bus_id}" for gpu in gpus if gpu.pci_bus_id is not None), text)


_Q_KNOWN_SECTIONS = (
    "product name",
    "gpu uuid",
    "serial number",
    "vbios version",
    "persistence mode",
    "ecc mode",
    "ecc errors",
    "retired pages",
    "remapped rows",
    "clocks event reasons",
    "clocks throttle reasons",
    "temperature",
    "power readings",
    "gpu power readings",
    "fb memory usage",
    "pci",
    "processes",
    "driver version",
    "minor number",
    "fabric",
    "gsp firmware version",
)


def _known_q_key(path: tuple[str, ...]) -> bool:
    return bool(path) and path[0] in _Q_KNOWN_SECTIONS


def _q_entries(lines: Sequence[str], gaps: list[str]) -> list[_Entry]:
    """Key paths by indentation. An excerpt may start inside a section: lines indented deeper than
    the excerpt's top level with no parent shown cannot be placed, so they are left out (named in
    a gap) rather than guessed into a section."""
    if not lines:
        return []
    base = min(len(line) - len(line.lstrip()) for line in lines)
    stack: list[tuple[int, str, bool]] = []  # (indent, key, orphan)
    entries, orphans, first_placed = [], 0, None
    for line in lines:
        indent = len(line) - len(line.lstrip())
        match = _Q_LINE.fullmatch(line.strip())
        if match is None:  # ": value" with no key: nothing says where it belongs
            gaps.append(f"unreadable line {quote(line.strip())} (no key before ':')")
            continue
        key, value = match[1].strip().lower(), match[2]
        while stack and stack[-1][0] >= indent:
            stack.pop()
        orphan = stack[-1][2] if stack else indent > base
        stack.append((indent, key, orphan))
        if orphan:
            orphans += 1
            continue
        if first_placed is None:
            first_placed = match[1]  # the first placed line's key, as printed
        entries.append(_Entry(tuple(k for _, k, _ in stack), None if value is None else value.strip()))
    if orphans:
        where = f"before {quote(first_placed)}" if first_placed else "in all"
        gaps.append(f"output starts inside a section: {orphans} line(s) {where} not read")
    return entries


class _QSection:
    """One GPU section's entries, read with values converted and unreadable ones named in gaps."""

    def __init__(self, label: str, entries: Sequence[_Entry], gaps: list[str]) -> None:
        self.label, self.entries, self.gaps = label, entries, gaps
        self.values: dict[tuple[str, ...], str | None] = {}
        for entry in entries:
            self.values.setdefault(entry.path, entry.value)  # first wins: processes repeat keys

    def has(self, *path: str) -> bool:
        return path in self.values

    def text(self, *path: str) -> str | None:
        return available(self.values.get(path))

    def read(self, convert: Callable[[str], object], *paths: tuple[str, ...]):
        """The first of `paths` present, converted; None when absent, N/A or unreadable."""
        for path in paths:
            if path in self.values:
                value = available(self.values[path])
                if value is None:
                    return None
                try:
                    return convert(value)
                except ValueError:
                    self.gaps.append(f"{self.label} {' / '.join(path)}: unreadable {quote(value)}")
                    return None
        return None

    def children(self, *path: str) -> dict[str, str | None]:
        """Every key under `path`, nested ones too ("HW Thermal Slowdown" sits under "HW Slowdown")."""
        return {p[-1]: available(v) for p, v in self.values.items() if len(p) > len(path) and p[: len(path)] == path}

    def closed(self, *path: str) -> bool:
        """Whether the output goes on past the section: one that runs to the end may be cut short."""
        inside = False
        for entry in self.entries:
            if entry.path[: len(path)] == path:
                inside = True
            elif inside:
                return True
        return False


def _q_gpu(index: int, bus_id: str | None, entries: Sequence[_Entry], gaps: list[str], *, cut: bool) -> Gpu:
    q = _QSection(f"GPU{index}", entries, gaps)
    power = [("power readings",), ("gpu power readings",)]
    draw = [s + (k,) for s in power for k in ("power draw", "average power draw", "instantaneous power draw")]
    limit = [s + (k,) for s in power for k in ("current power limit", "power limit")]
    link = ("pci", "gpu link info")
    if not q.has("processes"):
        gaps.append(f"GPU{index}: output ends before its Processes section")
    return Gpu(
        index=index,
        name=q.text("product name"),
        uuid=q.text("gpu uuid"),
        serial=q.text("serial number"),
        vbios=q.text("vbios version"),
        pci_bus_id=bus_id,
        persistence_mode=q.read(read_flag, ("persistence mode",)),
        ecc_enabled=q.read(read_flag, ("ecc mode", "current")),
        ecc_pending_enabled=q.read(read_flag, ("ecc mode", "pending")),
        ecc_uncorrectable_volatile=_q_ecc(q, "volatile", _Q_UNCORRECTABLE, "double bit"),
        ecc_uncorrectable_aggregate=_q_ecc(q, "aggregate", _Q_UNCORRECTABLE, "double bit"),
        ecc_correctable_volatile=_q_ecc(q, "volatile", _Q_CORRECTABLE, "single bit"),
        retired_pages_pending=q.read(
            read_flag,
            ("retired pages", "pending page blacklist"),
            ("retired pages", "pending page retirement"),
            ("retired pages", "pending"),
        ),
        retired_pages_dbe=q.read(read_count, ("retired pages", "double bit ecc")),
        retired_pages_sbe=q.read(read_count, ("retired pages", "single bit ecc")),
        remapped_rows=_q_remapped_rows(q),
        clock_event_reasons=_q_clock_reasons(q),
        temperature_c=q.read(read_float, ("temperature", "gpu current temp")),
        power_draw_w=q.read(read_float, *draw),
        power_limit_w=q.read(read_float, *limit),
        memory_used_mib=q.read(read_float, ("fb memory usage", "used")),
        memory_total_mib=q.read(read_float, ("fb memory usage", "total")),
        pcie_gen_current=q.read(
            read_count, link + ("pcie generation", "current"), link + ("pcie generation", "device current")
        ),
        pcie_gen_max=_q_link_max(q, link + ("pcie generation",)),
        pcie_width_current=q.read(read_count, link + ("link width", "current")),
        pcie_width_max=_q_link_max(q, link + ("link width",)),
        fabric=_q_fabric(q),
        gsp_firmware=q.text("gsp firmware version"),
        processes=_q_processes(q, cut=cut),
    )


def _q_ecc(q: _QSection, period: str, counter: re.Pattern, old_kind: str) -> int | None:
    """A total: the old layout prints it ("Double Bit" / "Total"); the newer one prints SRAM and DRAM
    counters only, summed here. The sum is None unless both SRAM and DRAM counters are shown and
    all read as numbers: a partial sum would pass for a clean total."""
    old = ("ecc errors", period, old_kind, "total")
    if q.has(*old):
        return q.read(read_count, old)
    parts = {key: value for key, value in q.children("ecc errors", period).items() if counter.fullmatch(key)}
    if {match[1] for key in parts if (match := counter.fullmatch(key))} != {"sram", "dram"}:
        return None
    if not q.closed("ecc errors", period):
        q.gaps.append(f"{q.label} ECC Errors / {period}: section cut off")
        return None
    if any(value is None or not INTEGER.fullmatch(value) for value in parts.values()):
        return None
    return sum(int(value) for value in parts.values() if value is not None)  # (none is None: checked above)


def _q_fabric(q: _QSection) -> GpuFabric | None:
    """The "Fabric" section (driver 535+: State, Status; 550+: CliqueId, ClusterUUID, Health).
    None where the driver prints no section, where State is N/A (the GPU has no fabric) or where the
    section runs to the end of the output (rows after a cut are unknown, and 535's two-row section
    looks the same as a cut one)."""
    if not q.has("fabric"):
        return None
    if not q.closed("fabric"):
        q.gaps.append(f"{q.label} Fabric: section cut off")
        return None
    state_text = q.text("fabric", "state")
    if state_text is None:
        return None
    state = _Q_FABRIC_STATES.get(state_text)
    if state is None:
        q.gaps.append(f"{q.label} Fabric / State: unknown {quote(state_text)}")
        return None
    status = q.text("fabric", "status")
    cluster = q.text("fabric", "clusteruuid")
    if cluster is not None and not _Q_UUID.fullmatch(cluster):
        q.gaps.append(f"{q.label} Fabric / ClusterUUID: unreadable {quote(cluster)}")
        cluster = None
    health = tuple(
        sorted(
            (_snake(key), _snake(value))
            for key, value in q.children("fabric", "health").items()
            if value is not None  # N/A rows: not reported
        )
    )
    return GpuFabric(
        state=state,
        status="success" if status == "Success" else status,  # else nvidia-smi's words: "Insufficient Resources"
        cluster_uuid=None if cluster is None else cluster.lower(),
        clique_id=q.read(read_count, ("fabric", "cliqueid")),
        health=health,
    )


def _snake(text: str) -> str:
    """ "Route Recovery in progress" → "route_recovery_in_progress" (the NVML probe's names)."""
    return "_".join(text.lower().split())


def _q_remapped_rows(q: _QSection) -> RemappedRows | None:
    section = ("remapped rows",)
    rows = RemappedRows(
        q.read(read_count, section + ("correctable error",)),
        q.read(read_count, section + ("uncorrectable error",)),
        q.read(read_flag, section + ("pending",)),
        q.read(read_flag, section + ("remapping failure occurred",)),
    )
    # "Remapped Rows : N/A" (pre-Ampere, MIG) and an absent section both leave all four unknown
    return None if rows == RemappedRows(None, None, None, None) else rows


def _q_clock_reasons(q: _QSection) -> frozenset[str] | None:
    for section in ("clocks event reasons", "clocks throttle reasons"):  # the name before driver 535
        states = {
            _Q_CLOCK_REASONS[key]: value
            for key, value in q.children(section).items()
            if key in _Q_CLOCK_REASONS and value in ("Active", "Not Active")
        }
        if states and not q.closed(section):
            # the reasons not shown might be the active ones: an empty set would read as "none"
            q.gaps.append(f"{q.label} {section}: section cut off")
            return None
        if states:
            return frozenset(name for name, value in states.items() if value == "Active")
    return None


def _q_link_max(q: _QSection, path: tuple[str, ...]) -> int | None:
    # newer drivers print what the GPU and the slot each support; the link can train to the lower.
    # A section that runs to the end of the output may have lost those lines, and "Max" alone overstates
    if not q.closed(*path):
        if q.has(*path):
            q.gaps.append(f"{q.label} {' / '.join(path[-1:])}: section cut off")
        return None
    device, host = q.read(read_count, path + ("device max",)), q.read(read_count, path + ("host max",))
    if device is not None and host is not None:
        return min(device, host)
    if q.has(*path, "device max") or q.has(*path, "host max"):
        return None  # one side only (N/A or cut off): "Max" may overstate it
    return q.read(read_count, path + ("max",))


def _q_processes(q: _QSection, *, cut: bool) -> tuple[GpuProcess, ...] | None:
    """Compute processes ("Type" C or C+G); "Processes : None" is a checked empty list."""
    if not q.has("processes"):
        return None
    if cut and not q.closed("processes"):
        q.gaps.append(f"{q.label} Processes: section cut off")  # entries after the cut are unknown
        return None
    if q.values[("processes",)] is not None:
        return () if q.values[("processes",)] in ("None", "No running processes found") else None
    found: list[dict[str, str | None]] = []
    for entry in q.entries:
        if entry.path[:1] != ("processes",) or len(entry.path) < 2:
            continue
        key = entry.path[-1]
        if key == "process id":
            found.append({"pid": available(entry.value)})
        elif found and key in ("type", "name", "process name", "used gpu memory"):
            found[-1][key] = available(entry.value)
    if found and "used gpu memory" not in found[-1]:
        # each process ends with its memory line: a last one without it was cut off
        q.gaps.append(f"{q.label} Processes: section cut off")
        return None
    processes = []
    for proc in found:
        if proc["pid"] is None or not INTEGER.fullmatch(proc["pid"]):
            q.gaps.append(f"{q.label} process: unreadable Process ID {quote(str(proc['pid']))}")
            continue
        if (kind := proc.get("type")) is not None and "C" not in kind:
            continue  # a graphics-only client (Xorg) is not a compute process
        memory = proc.get("used gpu memory")
        used = WITH_UNIT.fullmatch(memory) if memory is not None else None
        processes.append(
            GpuProcess(
                int(proc["pid"]), proc.get("name") or proc.get("process name") or "", float(used[1]) if used else None
            )
        )
    return tuple(processes)
