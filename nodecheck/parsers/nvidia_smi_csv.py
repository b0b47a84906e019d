"""nvidia-smi's `--query-gpu` and `--query-compute-apps` CSV: raw rows by field name, typed GPUs, compute processes."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from nodecheck.core.errors import ParseError
from nodecheck.core.model import quote
from nodecheck.parsers.gpu import CLOCK_EVENT_REASONS, Gpu, GpuProcess, RemappedRows
from nodecheck.parsers.lines import split_lines
from nodecheck.parsers.nvidia_smi_values import (
    INTEGER,
    available,
    check_failure,
    expect_unique_indexes,
    normalise_bus_id,
    read_count,
    read_flag,
    read_float,
)

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


# A header cell: a field name, with "[unit]" when the query was not `nounits`: "fan.speed [%]".
_HEADER_CELL = re.compile(r"([a-z][a-z0-9_]*(?:\.[a-z0-9_]+)*)(?: \[([^\]]+)\])?", re.ASCII)


def _csv_rows(
    text: str, tool: str, fields_: Sequence[str] | None, joinable: str | None = None
) -> tuple[dict[str, str | None], ...]:
    """Rows by field name. A first line of field names is a header (its units are stripped from
    values); otherwise `fields_` names the columns. `joinable` names the one column that may hold
    commas (a process name): surplus cells are joined back into it."""
    check_failure(tool, text)
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
            row[name] = available(cell)
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
    expect_unique_indexes("nvidia-smi --query-gpu", gpus, text)
    return gpus


def _csv_value(row: Mapping[str, str | None], name: str, convert: Callable[[str], object], text: str):
    value = row.get(name)
    if value is None:
        return None
    try:
        return convert(value)
    except ValueError:
        raise ParseError("nvidia-smi --query-gpu", f"{name} {quote(value)} is not readable", text) from None


def _gpu_from_row(position: int, row: Mapping[str, str | None], text: str) -> Gpu:
    def get(name: str, convert: Callable[[str], object] = str):
        return _csv_value(row, name, convert, text)

    index = get("index", read_count)
    remapped = None
    if any(
        row.get(f"remapped_rows.{key}") is not None for key in ("correctable", "uncorrectable", "pending", "failure")
    ):
        # not in QUERY_GPU_FIELDS (older drivers may refuse it), read when a caller asks for it
        remapped = RemappedRows(
            get("remapped_rows.correctable", read_count),
            get("remapped_rows.uncorrectable", read_count),
            get("remapped_rows.pending", read_flag),
            get("remapped_rows.failure", read_flag),
        )
    reasons = None
    # drivers before 535 name these clocks_throttle_reasons.* (formats.md §6); same values
    for prefix in ("clocks_event_reasons.", "clocks_throttle_reasons."):
        active = {name: get(prefix + name, read_flag) for name in CLOCK_EVENT_REASONS}
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
        persistence_mode=get("persistence_mode", read_flag),
        ecc_enabled=get("ecc.mode.current", read_flag),
        ecc_pending_enabled=get("ecc.mode.pending", read_flag),
        ecc_uncorrectable_volatile=get("ecc.errors.uncorrected.volatile.total", read_count),
        ecc_uncorrectable_aggregate=get("ecc.errors.uncorrected.aggregate.total", read_count),
        ecc_correctable_volatile=get("ecc.errors.corrected.volatile.total", read_count),
        retired_pages_pending=get("retired_pages.pending", read_flag),
        retired_pages_dbe=get("retired_pages.double_bit.count", read_count),
        retired_pages_sbe=get("retired_pages.single_bit_ecc.count", read_count),
        remapped_rows=remapped,
        clock_event_reasons=reasons,
        temperature_c=get("temperature.gpu", read_float),
        power_draw_w=get("power.draw", read_float),
        power_limit_w=get("power.limit", read_float),
        memory_used_mib=get("memory.used", read_float),
        memory_total_mib=get("memory.total", read_float),
        pcie_gen_current=get("pcie.link.gen.current", read_count),
        pcie_gen_max=get("pcie.link.gen.max", read_count),
        pcie_width_current=get("pcie.link.width.current", read_count),
        pcie_width_max=get("pcie.link.width.max", read_count),
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
        if pid is None or not INTEGER.fullmatch(pid):
            raise ParseError(tool, f"pid {quote(str(pid))} is not a number", text)
        # `used_memory` is the query name; the CSV header calls the same column `used_gpu_memory`
        memory = row.get("used_memory", row.get("used_gpu_memory"))
        try:
            used = None if memory is None else read_float(memory)
        except ValueError:
            assert memory is not None  # None is not parsed, so it never raises
            raise ParseError(tool, f"used memory {quote(memory)} is not readable", text) from None
        # a process name nvidia-smi cannot see (a container's) is printed as "[Not Found]": None
        # here, "" in the fact, since GpuProcess.name is a plain string
        apps.append((row.get("gpu_uuid") or "", GpuProcess(int(pid), row.get("process_name") or "", used)))
    return tuple(apps)
