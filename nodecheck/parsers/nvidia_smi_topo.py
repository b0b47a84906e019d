"""`nvidia-smi topo -m` (and `topo -p2p`): the link matrix between GPUs and NICs, and each row's affinities."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from nodecheck.core.errors import ParseError
from nodecheck.core.model import quote
from nodecheck.parsers.lines import split_lines
from nodecheck.parsers.nvidia_smi_values import available, check_failure


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
    check_failure(tool, text)
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
            if available(value) is not None:
                columns[label][tokens[0]] = value
    gaps += [f"no matrix row for {device}" for device in devices if device not in done]
    return Topo(
        devices, links, columns["CPU Affinity"], columns["NUMA Affinity"], columns["GPU NUMA ID"], nics, tuple(gaps)
    )
