"""The default `nvidia-smi` table (the 79-column 450 layout through the 595 layout): GPUs, their processes, versions."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from nodecheck.core.errors import ParseError
from nodecheck.core.model import quote
from nodecheck.parsers.gpu import Gpu, GpuProcess
from nodecheck.parsers.lines import split_lines
from nodecheck.parsers.nvidia_smi_values import (
    INTEGER,
    available,
    check_failure,
    expect_unique_indexes,
    grouped,
    normalise_bus_id,
)


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
    if len(head) != 2 or not INTEGER.fullmatch(head[0]):
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
    check_failure(tool, text)
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
            driver, cuda = (available(m[1]) if m else None for m in found)
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
    expect_unique_indexes(tool, gpus, text)
    if process_state is None:
        gaps.append("output ends before the Processes table")
    elif process_state != "closed":
        gaps.append("the Processes table is cut off")
    else:
        known = {gpu.index for gpu in gpus}
        for gpu_index, _ in processes:
            if gpu_index not in known:
                gaps.append(f"a process on GPU{gpu_index}, which the GPU table does not show")
        by_gpu = grouped(processes)
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
        elif INTEGER.fullmatch(ecc):
            # the table prints a count only while ECC is on ("Off" when off, "N/A" when unsupported)
            ecc_enabled, ecc_count = True, int(ecc)
        elif available(ecc) is not None:
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
    if available(token) is not None:  # "ERR!": the driver could not read it; say so
        gaps.append(f"{label} {what}: {quote(token)}")
    return None
