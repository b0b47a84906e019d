"""Parse nvidia-smi's CSV queries, `-q` text, default table, `topo -m` and `nvlink -s/-R` into GPU facts."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from dataclasses import fields as dataclass_fields

from nodecheck.core.errors import ParseError
from nodecheck.core.model import quote
from nodecheck.parsers.gpu import CLOCK_EVENT_REASONS, Gpu, GpuFacts, GpuProcess, NvLink, RemappedRows
from nodecheck.parsers.lines import split_lines

# What the probe asks `nvidia-smi --query-gpu=<these> --format=csv,noheader,nounits` for. Note
# `retired_pages.double_bit.count` has no `_ecc` while the single-bit one has (formats.md §6).
QUERY_GPU_FIELDS: tuple[str, ...] = (
    "index",
    "name",
    "uuid",
    "serial",
    "vbios_version",
    "pci.bus_id",
    "driver_version",
    "persistence_mode",
    "ecc.mode.current",
    "ecc.mode.pending",
    "ecc.errors.uncorrected.volatile.total",
    "ecc.errors.uncorrected.aggregate.total",
    "ecc.errors.corrected.volatile.total",
    "retired_pages.pending",
    "retired_pages.double_bit.count",
    "retired_pages.single_bit_ecc.count",
    "temperature.gpu",
    "power.draw",
    "power.limit",
    "memory.used",
    "memory.total",
    "pcie.link.gen.current",
    "pcie.link.gen.max",
    "pcie.link.width.current",
    "pcie.link.width.max",
)
# `--query-compute-apps=<these> --format=csv,noheader,nounits`
COMPUTE_APPS_FIELDS: tuple[str, ...] = ("gpu_uuid", "pid", "process_name", "used_memory")

# nvidia-smi's words for "no value". Any other fully bracketed value ("[Insufficient Permissions]",
# "[GPU requires reset]", "[Not Found]") is also a status, never a reading, so it reads as None too.
_NOT_A_VALUE = frozenset(
    {
        "N/A",
        "[N/A]",
        "Not Supported",
        "[Not Supported]",
        "Unknown Error",
        "[Unknown Error]",
        "Requested functionality has been deprecated",
        "",
    }
)
# Whole-output failures: nvidia-smi printed this instead of (or in the middle of) what was asked.
_FAILURES = re.compile(
    r"Failed to initialize NVML: .*|NVIDIA-SMI has failed because .*|No devices were found"
    r"|Unable to determine the number of GPUs|Unable to determine the device handle for .*"
    r"|Field \".*\" is not a valid field to query\."
)
# PCI bus id as nvidia-smi prints it: an 8-digit domain ("00000000:9B:00.0"), older tools 4 digits.
_BUS_ID = re.compile(r"([0-9A-Fa-f]{4,8}):([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})\.([0-7])", re.ASCII)
_INT = re.compile(r"\d+", re.ASCII)
# a value read with its unit: "35 C", "745 MiB", "250.00 W", "16x", "95 %" (nvidia-smi puts a space,
# except "16x"); CSV without `nounits` carries the same units
_WITH_UNIT = re.compile(r"(-?\d+(?:\.\d+)?) ?(?:MiB|W|C|%|MHz|x|bank\(s\))?", re.ASCII)


def _na(value: str | None) -> str | None:
    """The printed value, or None for nvidia-smi's "not available" words."""
    if value is None:
        return None
    value = value.strip()
    if value in _NOT_A_VALUE or (value.startswith("[") and value.endswith("]")):
        return None
    return value


def _check_failure(tool: str, text: str) -> None:
    """Raise ParseError on nvidia-smi's own failure lines ("Failed to initialize NVML: ...")."""
    for line in split_lines(text):
        if _FAILURES.fullmatch(line.strip()):
            raise ParseError(tool, line.strip(), text)


def normalise_bus_id(value: str) -> str:
    """ "00000000:9B:00.0" → "0000:9b:00.0": nvidia-smi's 8-digit domain to sysfs's 4 digits, lower case."""
    match = _BUS_ID.fullmatch(value.strip())
    if not match:
        raise ValueError(f"not a PCI bus id: {value!r}")
    domain, bus, device, function = match.groups()
    return f"{domain[-4:]}:{bus}:{device}.{function}".lower()


# == --query-gpu / --query-compute-apps CSV ======================================================

# A header cell: a field name, with "[unit]" when the query was not `nounits`: "fan.speed [%]".
_HEADER_CELL = re.compile(r"([a-z][a-z0-9_]*(?:\.[a-z0-9_]+)*)(?: \[([^\]]+)\])?", re.ASCII)


def _csv_rows(
    text: str, tool: str, fields_: Sequence[str] | None, joinable: str | None = None
) -> tuple[dict[str, str | None], ...]:
    """Rows by field name. A first line of field names is a header (its units are stripped from
    values); otherwise `fields_` names the columns. `joinable` names the one column that may hold
    commas (a process name): surplus cells are joined back into it."""
    _check_failure(tool, text)
    lines = [line.strip() for line in split_lines(text) if line.strip()]
    if not lines:
        raise ParseError(tool, "empty output", text)
    first = [cell.strip() for cell in lines[0].split(",")]
    header = [_HEADER_CELL.fullmatch(cell) for cell in first]
    if all(header):
        names = [match[1] for match in header if match]  # (every cell matched)
        units = [match[2] for match in header if match]
        lines = lines[1:]
    elif fields_ is not None:
        names, units = list(fields_), [None] * len(fields_)
    else:
        raise ParseError(tool, f"no header line and no field names given; first line {quote(lines[0])}", text)
    rows = []
    for line in lines:
        cells = [cell.strip() for cell in line.split(",")]
        if joinable in names and len(cells) > len(names):
            at, surplus = names.index(joinable), len(cells) - len(names)
            cells[at : at + surplus + 1] = [", ".join(cells[at : at + surplus + 1])]
        if len(cells) != len(names):
            raise ParseError(tool, f"row has {len(cells)} values, expected {len(names)}: {quote(line)}", text)
        row = {}
        for name, unit, cell in zip(names, units, cells):
            if unit and cell.endswith(f" {unit}"):
                cell = cell[: -len(unit) - 1]
            row[name] = _na(cell)
        rows.append(row)
    return tuple(rows)


def parse_query_gpu(text: str, fields: Sequence[str] | None = None) -> tuple[dict[str, str | None], ...]:
    """Raw `--query-gpu` rows by field name; "[N/A]" and the like are None; wrong shapes raise ParseError."""
    return _csv_rows(text, "nvidia-smi --query-gpu", fields)


def gpus_from_query_gpu(text: str, fields: Sequence[str] = QUERY_GPU_FIELDS) -> tuple[Gpu, ...]:
    """Typed GPUs from `--query-gpu` CSV; a field not queried stays None; a GPU without an index
    column takes its row number (nvidia-smi prints GPUs in index order)."""
    rows = parse_query_gpu(text, fields)
    gpus = tuple(_gpu_from_row(position, row, text) for position, row in enumerate(rows))
    _expect_unique_indexes("nvidia-smi --query-gpu", gpus, text)
    return gpus


def _expect_unique_indexes(tool: str, gpus: Sequence[Gpu], text: str) -> None:
    # one run never prints a GPU twice; two outputs run together would be judged twice
    _expect_unique(tool, (f"GPU{gpu.index}" for gpu in gpus), text)


def _expect_unique(tool: str, names: Iterable[str], text: str) -> None:
    """ParseError naming the first name seen twice (a set: a count() per name is quadratic)."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ParseError(tool, f"{name} appears twice", text)
        seen.add(name)


def _csv_value(row: Mapping[str, str | None], name: str, convert: Callable[[str], object], text: str):
    value = row.get(name)
    if value is None:
        return None
    try:
        return convert(value)
    except ValueError:
        raise ParseError("nvidia-smi --query-gpu", f"{name} {quote(value)} is not readable", text) from None


def _flag(value: str) -> bool:
    """nvidia-smi's two-valued words: Enabled/Disabled (modes), Yes/No (pending), Active/Not Active."""
    if value in ("Enabled", "Yes", "Active"):
        return True
    if value in ("Disabled", "No", "Not Active"):
        return False
    raise ValueError(value)


def _float(value: str) -> float:
    match = _WITH_UNIT.fullmatch(value.strip())
    if not match:
        raise ValueError(value)
    return float(match[1])


def _count(value: str) -> int:
    match = _WITH_UNIT.fullmatch(value.strip())
    if not match or not _INT.fullmatch(match[1]):
        raise ValueError(value)
    return int(match[1])


def _gpu_from_row(position: int, row: Mapping[str, str | None], text: str) -> Gpu:
    def get(name: str, convert: Callable[[str], object] = str):
        return _csv_value(row, name, convert, text)

    index = get("index", _count)
    remapped = None
    if any(
        row.get(f"remapped_rows.{key}") is not None for key in ("correctable", "uncorrectable", "pending", "failure")
    ):
        # not in QUERY_GPU_FIELDS (older drivers may refuse it), read when a caller asks for it
        remapped = RemappedRows(
            get("remapped_rows.correctable", _count),
            get("remapped_rows.uncorrectable", _count),
            get("remapped_rows.pending", _flag),
            get("remapped_rows.failure", _flag),
        )
    reasons = None
    # drivers before 535 name these clocks_throttle_reasons.* (formats.md §6); same values
    for prefix in ("clocks_event_reasons.", "clocks_throttle_reasons."):
        active = {name: get(prefix + name, _flag) for name in CLOCK_EVENT_REASONS}
        if any(value is not None for value in active.values()):
            reasons = frozenset(name for name, on in active.items() if on)
    bus_id = get("pci.bus_id", normalise_bus_id)
    return Gpu(
        index=position if index is None else index,
        name=get("name"),
        uuid=get("uuid"),
        serial=get("serial"),
        vbios=get("vbios_version"),
        pci_bus_id=bus_id,
        persistence_mode=get("persistence_mode", _flag),
        ecc_enabled=get("ecc.mode.current", _flag),
        ecc_pending_enabled=get("ecc.mode.pending", _flag),
        ecc_uncorrectable_volatile=get("ecc.errors.uncorrected.volatile.total", _count),
        ecc_uncorrectable_aggregate=get("ecc.errors.uncorrected.aggregate.total", _count),
        ecc_correctable_volatile=get("ecc.errors.corrected.volatile.total", _count),
        retired_pages_pending=get("retired_pages.pending", _flag),
        retired_pages_dbe=get("retired_pages.double_bit.count", _count),
        retired_pages_sbe=get("retired_pages.single_bit_ecc.count", _count),
        remapped_rows=remapped,
        clock_event_reasons=reasons,
        temperature_c=get("temperature.gpu", _float),
        power_draw_w=get("power.draw", _float),
        power_limit_w=get("power.limit", _float),
        memory_used_mib=get("memory.used", _float),
        memory_total_mib=get("memory.total", _float),
        pcie_gen_current=get("pcie.link.gen.current", _count),
        pcie_gen_max=get("pcie.link.gen.max", _count),
        pcie_width_current=get("pcie.link.width.current", _count),
        pcie_width_max=get("pcie.link.width.max", _count),
    )


def parse_compute_apps(text: str, fields: Sequence[str] | None = None) -> tuple[tuple[str, GpuProcess], ...]:
    """(gpu_uuid, process) per `--query-compute-apps` row; gpu_uuid is "" when it was not queried."""
    tool = "nvidia-smi --query-compute-apps"
    stripped = text.strip()
    if not stripped or stripped == "No running processes found":
        return ()
    rows = _csv_rows(text, tool, COMPUTE_APPS_FIELDS if fields is None else fields, joinable="process_name")
    apps = []
    for row in rows:
        pid = row.get("pid")
        if pid is None or not _INT.fullmatch(pid):
            raise ParseError(tool, f"pid {quote(str(pid))} is not a number", text)
        # `used_memory` is the query name; the CSV header calls the same column `used_gpu_memory`
        memory = row.get("used_memory", row.get("used_gpu_memory"))
        try:
            used = None if memory is None else _float(memory)
        except ValueError:
            assert memory is not None  # None is not parsed, so it never raises
            raise ParseError(tool, f"used memory {quote(memory)} is not readable", text) from None
        # a process name nvidia-smi cannot see (a container's) is printed as "[Not Found]": None
        # here, "" in the fact, since GpuProcess.name is a plain string
        apps.append((row.get("gpu_uuid") or "", GpuProcess(int(pid), row.get("process_name") or "", used)))
    return tuple(apps)


# == nvidia-smi -q ===============================================================================


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


@dataclass(frozen=True)
class _Entry:
    path: tuple[str, ...]  # lower-cased keys from the GPU section down
    value: str | None  # None: a section name without a value


def parse_q(text: str) -> QFacts:
    """Facts from `nvidia-smi -q` text: top-level versions and one Gpu per "GPU <bus id>" section.
    Excerpts are read for what they show; cut-off parts are named in `gaps`, never filled in."""
    tool = "nvidia-smi -q"
    _check_failure(tool, text)
    lines = [line.expandtabs(4).rstrip() for line in split_lines(text)]
    gaps: list[str] = []
    cut = bool(lines) and not text.endswith("\n")
    if cut:
        # nvidia-smi ends its output with a newline: a last line without one may be cut mid-value
        # ("Memory Max Operati", "Bus : 0x0A" for 0x0A1...), so it is not read
        last = lines.pop()
        if last.strip():
            gaps.append(f"output ends mid-line: {quote(last.strip())}")
    lines = [line for line in lines if line.strip() and not _Q_BANNER.fullmatch(line.strip())]
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
    attached = _na(top.get(("attached gpus",)))
    if attached is not None and _INT.fullmatch(attached) and int(attached) > len(sections):
        gaps.append(f"Attached GPUs says {attached}, output shows {len(sections)}")
    return QFacts(_na(top.get(("driver version",))), _na(top.get(("cuda version",))), tuple(gpus), tuple(gaps))


def _expect_unique_bus_ids(tool: str, gpus: Sequence[Gpu], text: str) -> None:
    _expect_unique(tool, (f"GPU {gpu.pci_bus_id}" for gpu in gpus if gpu.pci_bus_id is not None), text)


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
        return _na(self.values.get(path))

    def read(self, convert: Callable[[str], object], *paths: tuple[str, ...]):
        """The first of `paths` present, converted; None when absent, N/A or unreadable."""
        for path in paths:
            if path in self.values:
                value = _na(self.values[path])
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
        return {p[-1]: _na(v) for p, v in self.values.items() if len(p) > len(path) and p[: len(path)] == path}

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
        persistence_mode=q.read(_flag, ("persistence mode",)),
        ecc_enabled=q.read(_flag, ("ecc mode", "current")),
        ecc_pending_enabled=q.read(_flag, ("ecc mode", "pending")),
        ecc_uncorrectable_volatile=_q_ecc(q, "volatile", _Q_UNCORRECTABLE, "double bit"),
        ecc_uncorrectable_aggregate=_q_ecc(q, "aggregate", _Q_UNCORRECTABLE, "double bit"),
        ecc_correctable_volatile=_q_ecc(q, "volatile", _Q_CORRECTABLE, "single bit"),
        retired_pages_pending=q.read(
            _flag,
            ("retired pages", "pending page blacklist"),
            ("retired pages", "pending page retirement"),
            ("retired pages", "pending"),
        ),
        retired_pages_dbe=q.read(_count, ("retired pages", "double bit ecc")),
        retired_pages_sbe=q.read(_count, ("retired pages", "single bit ecc")),
        remapped_rows=_q_remapped_rows(q),
        clock_event_reasons=_q_clock_reasons(q),
        temperature_c=q.read(_float, ("temperature", "gpu current temp")),
        power_draw_w=q.read(_float, *draw),
        power_limit_w=q.read(_float, *limit),
        memory_used_mib=q.read(_float, ("fb memory usage", "used")),
        memory_total_mib=q.read(_float, ("fb memory usage", "total")),
        pcie_gen_current=q.read(
            _count, link + ("pcie generation", "current"), link + ("pcie generation", "device current")
        ),
        pcie_gen_max=_q_link_max(q, link + ("pcie generation",)),
        pcie_width_current=q.read(_count, link + ("link width", "current")),
        pcie_width_max=_q_link_max(q, link + ("link width",)),
        processes=_q_processes(q, cut=cut),
    )


def _q_ecc(q: _QSection, period: str, counter: re.Pattern, old_kind: str) -> int | None:
    """A total: the old layout prints it ("Double Bit" / "Total"); the newer one prints SRAM and DRAM
    counters only, summed here. The sum is None unless both SRAM and DRAM counters are shown and
    all read as numbers: a partial sum would pass for a clean total."""
    old = ("ecc errors", period, old_kind, "total")
    if q.has(*old):
        return q.read(_count, old)
    parts = {key: value for key, value in q.children("ecc errors", period).items() if counter.fullmatch(key)}
    if {match[1] for key in parts if (match := counter.fullmatch(key))} != {"sram", "dram"}:
        return None
    if not q.closed("ecc errors", period):
        q.gaps.append(f"{q.label} ECC Errors / {period}: section cut off")
        return None
    if any(value is None or not _INT.fullmatch(value) for value in parts.values()):
        return None
    return sum(int(value) for value in parts.values() if value is not None)  # (none is None: checked above)


def _q_remapped_rows(q: _QSection) -> RemappedRows | None:
    section = ("remapped rows",)
    rows = RemappedRows(
        q.read(_count, section + ("correctable error",)),
        q.read(_count, section + ("uncorrectable error",)),
        q.read(_flag, section + ("pending",)),
        q.read(_flag, section + ("remapping failure occurred",)),
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
    device, host = q.read(_count, path + ("device max",)), q.read(_count, path + ("host max",))
    if device is not None and host is not None:
        return min(device, host)
    if q.has(*path, "device max") or q.has(*path, "host max"):
        return None  # one side only (N/A or cut off): "Max" may overstate it
    return q.read(_count, path + ("max",))


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
            found.append({"pid": _na(entry.value)})
        elif found and key in ("type", "name", "process name", "used gpu memory"):
            found[-1][key] = _na(entry.value)
    if found and "used gpu memory" not in found[-1]:
        # each process ends with its memory line: a last one without it was cut off
        q.gaps.append(f"{q.label} Processes: section cut off")
        return None
    processes = []
    for proc in found:
        if proc["pid"] is None or not _INT.fullmatch(proc["pid"]):
            q.gaps.append(f"{q.label} process: unreadable Process ID {quote(str(proc['pid']))}")
            continue
        if (kind := proc.get("type")) is not None and "C" not in kind:
            continue  # a graphics-only client (Xorg) is not a compute process
        memory = proc.get("used gpu memory")
        used = _WITH_UNIT.fullmatch(memory) if memory is not None else None
        processes.append(
            GpuProcess(
                int(proc["pid"]), proc.get("name") or proc.get("process name") or "", float(used[1]) if used else None
            )
        )
    return tuple(processes)


# == default nvidia-smi table ====================================================================


@dataclass(frozen=True)
class TableFacts:
    driver_version: str | None
    cuda_version: str | None
    gpus: tuple[Gpu, ...]  # processes set only where the Processes table was read
    gaps: tuple[str, ...] = ()


_T_ROW1_BUS = re.compile(r"([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s+(On|Off|N/A)", re.ASCII)
# fan temp perf draw / cap; the draw is "20W", "N/A" or "ERR!": no "/" of its own but N/A's, so the
# split before "/" is fixed (a draw of \S+ would retry every "/" of a long token: quadratic)
_T_ROW2 = re.compile(r"(\S+)\s+(\S+)\s+(\S+)\s+(N/A|[^\s/]+)\s*/\s*(\S+)")
_T_MEMORY = re.compile(r"(\d+)MiB\s*/\s*(\d+)MiB", re.ASCII)
_T_TEMP = re.compile(r"(\d+)C", re.ASCII)
_T_WATTS = re.compile(r"(\d+(?:\.\d+)?)W", re.ASCII)
# "  0   N/A  N/A      1234      C   python     500MiB" (450+: GI/CI columns) or "  0   1234  C  python  500MiB":
# the columns around the name, read as tokens; the name is what lies between (it may hold spaces)
_T_PROCESS_HEAD = re.compile(r"(\d+)\s+(?:(?:N/A|\d+)\s+(?:N/A|\d+)\s+)?(\d+)\s+([CGM+]+)\s+", re.ASCII)
_T_PROCESS_MEMORY = re.compile(r"\d+MiB|N/A", re.ASCII)


def _row1_gpu(cell: str) -> tuple[int, str, str] | None:
    """(index, name, persistence) from "0  NVIDIA H100 80GB HBM3  On", split at its outer blanks
    (linear, whatever runs of spaces the cell holds); None when it is not that cell."""
    head = cell.split(None, 1)
    if len(head) != 2 or not _INT.fullmatch(head[0]):
        return None
    tail = head[1].rsplit(None, 1)
    if len(tail) != 2 or tail[1] not in ("On", "Off", "N/A"):
        return None
    return int(head[0]), tail[0], tail[1]


def _process_row(joined: str) -> tuple[int, int, str, str, str] | None:
    """(gpu, pid, type, name, memory) of a Processes row; None when it is not a whole row."""
    head = _T_PROCESS_HEAD.match(joined)
    if head is None:
        return None
    tail = joined[head.end() :].rsplit(None, 1)
    if len(tail) != 2 or not _T_PROCESS_MEMORY.fullmatch(tail[1]):
        return None
    return int(head[1]), int(head[2]), head[3], tail[0], tail[1]


def _cells(line: str) -> list[str]:
    """The cells between '|' bars. A cell not closed by a bar was cut off and is not returned."""
    return line.strip().split("|")[1:-1]


def parse_table(text: str) -> TableFacts:
    """Facts from the default `nvidia-smi` table (79-column 450 layout through the 595 layout).

    A "MIG devices:" fragment without the GPU table raises ParseError: it holds no GPU-level fact
    (no driver, no bus id, no temperature), so there is nothing to give; a cut GPU table gives the
    GPUs and cells that were printed in full plus gaps."""
    tool = "nvidia-smi"
    _check_failure(tool, text)
    lines = split_lines(text)
    gaps: list[str] = []
    if lines and not text.endswith("\n") and lines[-1].strip():
        gaps.append(f"output ends mid-line: {quote(lines[-1].strip())}")
    driver = cuda = None
    header_seen = False
    blocks: list[dict] = []  # per GPU: {"row1": cells, "row2": cells | None}
    processes: list[tuple[int, GpuProcess]] = []
    section, process_state = "gpus", None
    for line in lines:
        stripped = line.strip()
        cells = _cells(line)
        joined = " ".join(cell.strip() for cell in cells)
        if "NVIDIA-SMI" in stripped and stripped.endswith("|"):
            header_seen = True
            found = re.search(r"Driver Version:\s*(\S+)", stripped), re.search(r"CUDA Version:\s*(\S+)", stripped)
            driver, cuda = (_na(m[1]) if m else None for m in found)
            continue
        if joined.startswith("MIG devices:"):
            section = "mig"
            continue
        if joined.startswith("Processes:"):
            section, process_state = "processes", "header"
            continue
        if section == "gpus":
            if len(cells) >= 2 and _row1_gpu(cells[0]) is not None and _T_ROW1_BUS.fullmatch(cells[1].strip()):
                blocks.append({"row1": cells, "row2": None, "next": True})
            elif blocks and blocks[-1]["next"] and cells:
                blocks[-1]["row2"], blocks[-1]["next"] = cells, False
            elif blocks:
                blocks[-1]["next"] = False
        elif section == "processes":
            process_state = _table_process_line(stripped, joined, process_state, processes)
    if not blocks:
        if section == "mig" and not header_seen:
            raise ParseError(tool, "a MIG devices table without the GPU table (output starts inside it)", text)
        if not header_seen:
            first = next((line.strip() for line in lines if line.strip()), "")
            raise ParseError(tool, f"not nvidia-smi table output: first line {quote(first)}", text)
        gaps.append("output ends before any GPU row")
    gpus = [_table_gpu(block, gaps) for block in blocks]
    _expect_unique_indexes(tool, gpus, text)
    if process_state is None:
        gaps.append("output ends before the Processes table")
    elif process_state != "closed":
        gaps.append("the Processes table is cut off")
    else:
        known = {gpu.index for gpu in gpus}
        for gpu_index, _ in processes:
            if gpu_index not in known:
                gaps.append(f"a process on GPU{gpu_index}, which the GPU table does not show")
        by_gpu = _grouped(processes)
        gpus = [replace(gpu, processes=tuple(by_gpu.get(gpu.index, ()))) for gpu in gpus]
    return TableFacts(driver, cuda, tuple(gpus), tuple(gaps))


def _table_process_line(
    stripped: str, joined: str, state: str | None, processes: list[tuple[int, GpuProcess]]
) -> str | None:
    """One line of the Processes table; returns the new state: header, rows, closed, or cut."""
    if state == "header":
        return "rows" if stripped.startswith("|=") else "header"
    if state != "rows":
        return state
    if stripped.startswith("+") and stripped.endswith("+"):
        return "closed"
    if joined == "No running processes found":
        return "rows"
    row = _process_row(joined)
    if row is None or not stripped.endswith("|"):
        return "cut"  # a row that is not whole: the list can't be trusted
    gpu, pid, kind, name, memory = row
    if "C" in kind:  # G-only (Xorg) is not a compute process
        used = None if memory == "N/A" else float(memory[:-3])
        processes.append((gpu, GpuProcess(pid, name, used)))
    return "rows"


def _table_gpu(block: Mapping, gaps: list[str]) -> Gpu:
    row1, row2 = block["row1"], block["row2"]
    head, bus = _row1_gpu(row1[0]), _T_ROW1_BUS.fullmatch(row1[1].strip())
    assert head is not None and bus is not None  # a block starts only at a row that reads as both
    index = head[0]
    label = f"GPU{index}"
    ecc_enabled = ecc_count = None
    if len(row1) < 3:
        gaps.append(f"{label}: output ends before its Volatile Uncorr. ECC cell")
    else:
        ecc = row1[2].strip()
        if ecc == "Off":
            ecc_enabled = False
        elif _INT.fullmatch(ecc):
            # the table prints a count only while ECC is on ("Off" when off, "N/A" when unsupported)
            ecc_enabled, ecc_count = True, int(ecc)
        elif _na(ecc) is not None:
            gaps.append(f"{label} Volatile Uncorr. ECC: unreadable {quote(ecc)}")
    temp = draw = cap = used = total = None
    if row2 is None:
        gaps.append(f"{label}: output ends before its Temp / Pwr / Memory-Usage row")
    else:
        match = _T_ROW2.fullmatch(row2[0].strip())
        if match:
            temp = _table_value(label, "temperature", match[2], _T_TEMP, gaps)
            draw = _table_value(label, "power draw", match[4], _T_WATTS, gaps)
            cap = _table_value(label, "power limit", match[5], _T_WATTS, gaps)
        else:
            gaps.append(f"{label}: unreadable Temp / Pwr cell {quote(row2[0].strip())}")
        memory = _T_MEMORY.fullmatch(row2[1].strip()) if len(row2) >= 2 else None
        if memory:
            used, total = float(memory[1]), float(memory[2])
        elif len(row2) < 2:
            gaps.append(f"{label}: output ends before its Memory-Usage cell")
        else:
            gaps.append(f"{label}: unreadable Memory-Usage cell {quote(row2[1].strip())}")
    persistence = {"On": True, "Off": False}.get(head[2])
    return Gpu(
        index=index,
        name=head[1],
        pci_bus_id=normalise_bus_id(bus[1]),
        persistence_mode=persistence,
        ecc_enabled=ecc_enabled,
        ecc_uncorrectable_volatile=ecc_count,
        temperature_c=temp,
        power_draw_w=draw,
        power_limit_w=cap,
        memory_used_mib=used,
        memory_total_mib=total,
    )


def _table_value(label: str, what: str, token: str, shape: re.Pattern, gaps: list[str]) -> float | None:
    match = shape.fullmatch(token)
    if match:
        return float(match[1])
    if _na(token) is not None:  # "ERR!": the driver could not read it; say so
        gaps.append(f"{label} {what}: {quote(token)}")
    return None


# == nvidia-smi topo -m / topo -p2p ==============================================================


@dataclass(frozen=True)
class Topo:
    devices: tuple[str, ...]  # column order: "GPU0", "GPU1", "NIC0", "mlx5_0", ...
    links: dict[tuple[str, str], str]  # (row, column) → as printed: "X", "PIX", "NV18", "NS"
    cpu_affinity: dict[str, str]  # device → "24-47,72-95"; N/A and NIC rows absent
    numa_affinity: dict[str, str]  # device → "1"
    gpu_numa_id: dict[str, str] = field(default_factory=dict)  # "GPU NUMA ID" column (550+), if not N/A
    nics: dict[str, str] = field(default_factory=dict)  # "NIC Legend": "NIC0" → "mlx5_0"
    gaps: tuple[str, ...] = ()


_TOPO_LABELS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_TOPO_LINK = re.compile(r"[A-Za-z0-9#]+")
_TOPO_NIC = re.compile(r"(NIC\d+):\s*(\S+)", re.ASCII)


def _topo_header(line: str) -> tuple[tuple[str, ...], list[str]]:
    """(device names, affinity labels) of the header line: the labels are peeled off its end by
    words, so no pattern backtracks over a long run of blanks."""
    words = line.split()
    labels: list[str] = []
    peeled = True
    while peeled:
        peeled = False
        for label in _TOPO_LABELS:
            parts = label.split()
            if len(words) >= len(parts) and words[-len(parts) :] == parts:
                labels.insert(0, label)
                del words[-len(parts) :]
                peeled = True
    return tuple(words), labels


def parse_topo(text: str) -> Topo:
    """The link matrix of `nvidia-smi topo -m` (or a `topo -p2p` matrix) and each row's affinities.
    Cells are read by whitespace: no link word or affinity value holds a space."""
    tool = "nvidia-smi topo"
    _check_failure(tool, text)
    lines = split_lines(text)
    gaps: list[str] = []
    if lines and not text.endswith("\n") and lines[-1].strip():
        gaps.append(f"output ends mid-line: {quote(lines[-1].strip())}")
        lines = lines[:-1]
    body = [line for line in lines if line.strip()]
    if not body:
        raise ParseError(tool, "empty output", text)
    devices, labels = _topo_header(body[0])
    known = set(devices)
    if not devices or not all(re.fullmatch(r"[A-Za-z][\w.-]*\d", d, re.ASCII) for d in devices):
        raise ParseError(tool, f"expected a header of device names (GPU0 GPU1 ...), got {quote(body[0].strip())}", text)
    links: dict[tuple[str, str], str] = {}
    columns: dict[str, dict[str, str]] = {label: {} for label in _TOPO_LABELS}
    nics: dict[str, str] = {}
    rows: list[str] = []
    done: set[str] = set()
    in_legend = False
    for line in body[1:]:
        stripped = line.strip()
        if stripped.endswith("Legend:"):  # "Legend:" and "NIC Legend:" close the matrix
            in_legend = True
            continue
        if in_legend:
            nic = _TOPO_NIC.fullmatch(stripped)
            if nic:
                nics[nic[1]] = nic[2]
            continue
        tokens = stripped.split()
        if tokens[0] not in known or tokens[0] in done:
            raise ParseError(tool, f"unexpected matrix row {quote(stripped)}", text)
        values, extra = tokens[1 : 1 + len(devices)], tokens[1 + len(devices) :]
        if (
            len(values) < len(devices)
            or len(extra) > len(labels)
            or not all(_TOPO_LINK.fullmatch(value) for value in values)
        ):
            raise ParseError(tool, f"matrix row does not fit the header: {quote(stripped)}", text)
        rows.append(tokens[0])
        done.add(tokens[0])
        for column, value in zip(devices, values):
            links[(tokens[0], column)] = value
        for label, value in zip(labels, extra):
            if _na(value) is not None:
                columns[label][tokens[0]] = value
    gaps += [f"no matrix row for {device}" for device in devices if device not in done]
    return Topo(
        devices, links, columns["CPU Affinity"], columns["NUMA Affinity"], columns["GPU NUMA ID"], nics, tuple(gaps)
    )


# == nvidia-smi nvlink -s / -R ===================================================================


@dataclass(frozen=True)
class NvLinkRemote:
    link: int
    remote_pci_bus_id: str  # normalised "0000:d5:00.0"
    remote_link: int


# indentation varies (a tab, 9 spaces, markdown adds more): lines are read stripped
_NV_GPU = re.compile(r"GPU (\d+): (.+) \(UUID: (GPU-[0-9A-Fa-f-]+)\)", re.ASCII)
_NV_SPEED = re.compile(r"Link (\d+): (?:(\d+(?:\.\d+)?) GB/s|(<inactive>))", re.ASCII)
_NV_REMOTE = re.compile(r"Link (\d+): Remote Device ([0-9A-Fa-f:.]+): Link (\d+)", re.ASCII)


def _nvlink_blocks(text: str, tool: str, line_shape: re.Pattern) -> dict[int, list[re.Match]]:
    _check_failure(tool, text)
    blocks: dict[int, list[re.Match]] = {}
    current = None
    for line in split_lines(text):
        stripped = line.strip()
        if not stripped:
            continue
        gpu = _NV_GPU.fullmatch(stripped)
        if gpu:
            current = int(gpu[1])
            if current in blocks:
                raise ParseError(tool, f"GPU {current} appears twice", text)
            blocks[current] = []
            continue
        match = line_shape.fullmatch(stripped)
        # a cut line ("Link 3: 26.5", "GPU 1: NVIDIA H1") fits no shape and lands here too
        if not match or current is None:
            raise ParseError(tool, f"unexpected line {quote(stripped)}", text)
        blocks[current].append(match)
    if not blocks:
        raise ParseError(tool, "empty output", text)
    return blocks


def parse_nvlink_status(text: str) -> dict[int, tuple[NvLink, ...]]:
    """Links per GPU index from `nvidia-smi nvlink -s`; a GPU listed without links has ()."""
    blocks = _nvlink_blocks(text, "nvidia-smi nvlink -s", _NV_SPEED)
    # nvidia-smi prints GB/s (bytes); NvLink.speed_gbps is in gigabits, so the printed number × 8
    return {
        gpu: tuple(NvLink(int(m[1]), m[3] is None, float(m[2]) * 8 if m[2] else None) for m in links)
        for gpu, links in blocks.items()
    }


def parse_nvlink_remote(text: str) -> dict[int, tuple[NvLinkRemote, ...]]:
    """Per GPU index, each listed link's far end from `nvidia-smi nvlink -R` (inactive links are not listed)."""
    tool = "nvidia-smi nvlink -R"
    blocks = _nvlink_blocks(text, tool, _NV_REMOTE)
    result = {}
    for gpu, links in blocks.items():
        try:
            result[gpu] = tuple(NvLinkRemote(int(m[1]), normalise_bus_id(m[2]), int(m[3])) for m in links)
        except ValueError as why:
            raise ParseError(tool, str(why), text) from None
    return result


# == merge =======================================================================================


def gpu_facts_from_nvidia_smi(
    *, query_gpu: str | None, compute_apps: str | None, q: str | None, nvlink: str | None, note: str = ""
) -> GpuFacts:
    """GpuFacts from nvidia-smi's outputs: the CSV's GPUs, filled in from `-q` (matched by PCI bus id,
    else by index), with processes from the compute-apps CSV and links from `nvlink -s`."""
    if query_gpu is None and q is None:
        raise ParseError("nvidia-smi", "neither --query-gpu nor -q output to read")
    gaps: list[str] = []
    driver = cuda = None
    csv_had_driver = False
    # real stdout ends with a newline; a capture without one was cut, and its last CSV value may be
    # a cut number ("1" of "16") that no column count can catch
    for name, text in (("--query-gpu", query_gpu), ("--query-compute-apps", compute_apps), ("nvlink -s", nvlink)):
        if text and text.strip() and not text.endswith("\n"):
            last = split_lines(text)[-1].strip()
            raise ParseError(f"nvidia-smi {name}", f"output ends mid-line: {quote(last)}", text)
    if query_gpu is not None:
        rows = parse_query_gpu(query_gpu, QUERY_GPU_FIELDS)
        gpus = list(gpus_from_query_gpu(query_gpu))
        drivers = sorted({version for row in rows if (version := row.get("driver_version"))})
        csv_had_driver = bool(drivers)
        if len(drivers) > 1:
            gaps.append(f"GPUs report different driver versions: {', '.join(drivers)}")
        driver = drivers[0] if len(drivers) == 1 else None
    q_facts = parse_q(q) if q is not None else None
    if q_facts is not None:
        gaps += [f"nvidia-smi -q: {gap}" for gap in q_facts.gaps]
        cuda = q_facts.cuda_version
        if not csv_had_driver:  # GPUs that disagree stay unknown, not -q's pick
            driver = q_facts.driver_version
        gpus = list(q_facts.gpus) if query_gpu is None else _merge_q(gpus, q_facts.gpus, gaps)
    if compute_apps is not None:
        gpus = _attach_processes(gpus, parse_compute_apps(compute_apps), gaps)
    if nvlink is not None:
        links = parse_nvlink_status(nvlink)
        for gpu_index in sorted(set(links) - {gpu.index for gpu in gpus}):
            gaps.append(f"nvlink -s lists GPU{gpu_index}, which the GPU query does not")
        gaps += [f"{gpu.label} nvlinks: not listed by nvlink -s" for gpu in gpus if gpu.index not in links]
        gpus = [replace(gpu, nvlinks=links.get(gpu.index)) for gpu in gpus]
    for gpu in gpus:
        if gpu.remapped_rows is None:
            gaps.append(f"{gpu.label} remapped rows: {'not reported' if q is not None else 'no -q output'}")
        if gpu.ecc_uncorrectable_volatile is None:
            gaps.append(f"{gpu.label} volatile uncorrectable ECC: not reported")
    return GpuFacts("nvidia-smi", driver, cuda, tuple(gpus), note, tuple(gaps))


def _grouped(pairs: Iterable[tuple]) -> dict:
    """{key: [values in order]} from (key, value) pairs: one pass, not one scan per key."""
    groups: dict = {}
    for key, value in pairs:
        groups.setdefault(key, []).append(value)
    return groups


def _merge_q(gpus: Sequence[Gpu], q_gpus: Sequence[Gpu], gaps: list[str]) -> list[Gpu]:
    by_bus = {g.pci_bus_id: g for g in q_gpus if g.pci_bus_id is not None}
    by_index = _grouped((g.index, g) for g in q_gpus)
    used: set[int] = set()
    merged = []
    for gpu in gpus:
        match = by_bus.get(gpu.pci_bus_id) if gpu.pci_bus_id is not None else None
        if match is None:
            # by index only where a bus id cannot decide: one side lacks it (a headless -q excerpt)
            match = next(
                (g for g in by_index.get(gpu.index, ()) if g.pci_bus_id is None or gpu.pci_bus_id is None), None
            )
        if match is None:
            merged.append(gpu)
            continue
        used.add(id(match))
        merged.append(_fill(gpu, match))
    for g in q_gpus:
        if id(g) not in used:
            gaps.append(f"nvidia-smi -q shows GPU {g.pci_bus_id or g.index}, which --query-gpu does not")
    return merged


def _fill(base: Gpu, extra: Gpu) -> Gpu:
    """`base` with each fact it lacks taken from `extra`; a fact both have keeps base's value."""
    changes = {
        f.name: getattr(extra, f.name)
        for f in dataclass_fields(Gpu)
        if f.name != "index" and getattr(base, f.name) is None and getattr(extra, f.name) is not None
    }
    return replace(base, **changes)


def _attach_processes(gpus: Iterable[Gpu], apps: Sequence[tuple[str, GpuProcess]], gaps: list[str]) -> list[Gpu]:
    gpus = list(gpus)
    if any(uuid == "" for uuid, _ in apps):
        gaps.append("compute apps without gpu_uuid: processes not attributed to GPUs")
        return [replace(gpu, processes=None) for gpu in gpus]
    known = {gpu.uuid for gpu in gpus if gpu.uuid}
    for uuid, process in apps:
        if uuid not in known:
            gaps.append(f"compute app pid {process.pid} on {uuid}, which the GPU query does not show")
    by_uuid = _grouped(apps)
    result = []
    for gpu in gpus:
        if gpu.uuid is None:
            gaps.append(f"{gpu.label} processes: no uuid to match compute apps by")
            result.append(replace(gpu, processes=None))
        else:
            result.append(replace(gpu, processes=tuple(by_uuid.get(gpu.uuid, ()))))
    return result
