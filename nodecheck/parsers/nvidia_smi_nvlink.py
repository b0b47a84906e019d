"""`nvidia-smi nvlink -s` (each link's state and speed) and `nvlink -e` (each link's error counters), per
GPU index."""

from __future__ import annotations

import re

from nodecheck.core.errors import ParseError
from nodecheck.core.model import quote
from nodecheck.parsers.counts import TOO_BIG, u64
from nodecheck.parsers.gpu import NVLINK_ERROR_COUNTERS, NvLink
from nodecheck.parsers.lines import split_lines
from nodecheck.parsers.nvidia_smi_values import check_failure

# indentation varies (a tab, 9 spaces, markdown adds more): lines are read stripped
_NV_GPU = re.compile(r"GPU (\d+): (.+) \(UUID: (GPU-[0-9A-Fa-f-]+)\)", re.ASCII)
_NV_SPEED = re.compile(r"Link (\d+): (?:(\d+(?:\.\d+)?) GB/s|(<inactive>))", re.ASCII)
# `nvlink -e`: "GPU 0: NVIDIA GB300" (a paste may drop the UUID) and "Link 0: Replay Errors: 0"
_NV_ERRORS_GPU = re.compile(r"GPU (\d+): (.+?)(?: \(UUID: (GPU-[0-9A-Fa-f-]+)\))?", re.ASCII)
_NV_ERROR_ROW = re.compile(r"Link (\d+): ([A-Za-z][A-Za-z ]*?): (\d+|N/A)", re.ASCII)
# nvidia-smi's row names → NVLINK_ERROR_COUNTERS. "CRC Errors" (Hopper and Blackwell drivers print only
# this CRC row) is the data-link flit CRC counter, NVML_NVLINK_ERROR_DL_CRC_FLIT, which nvidia-smi reads.
_NV_ERROR_ROWS = {
    "Replay Errors": "replay",
    "Recovery Errors": "recovery",
    "CRC Errors": "crc_flit",
    "CRC Flit Errors": "crc_flit",
    "CRC Data Errors": "crc_data",
    "ECC Errors": "ecc_data",
}
# rows some drivers add that nodecheck does not judge: throughput is traffic, not errors
_NV_ERROR_ROWS_NOT_READ = frozenset({"Data Tx Errors", "Data Rx Errors", "Tx Throughput", "Rx Throughput"})


def _nvlink_blocks(text: str, tool: str, line_shape: re.Pattern) -> dict[int, list[re.Match]]:
    check_failure(tool, text)
    blocks: dict[int, list[re.Match]] = {}
    current = None
    for line in split_lines(text):
        stripped = line.strip()
        if not stripped:
            continue
        gpu = _NV_GPU.fullmatch(stripped)
        if gpu:
            current = _index(gpu[1], "GPU", tool, text)
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
    tool = "nvidia-smi nvlink -s"
    blocks = _nvlink_blocks(text, tool, _NV_SPEED)
    # nvidia-smi prints GB/s (bytes); NvLink.speed_gbps is in gigabits, so the printed number × 8
    return {
        gpu: tuple(
            NvLink(_index(m[1], "link", tool, text), m[3] is None, _speed(m[2], tool, text) * 8 if m[2] else None)
            for m in links
        )
        for gpu, links in blocks.items()
    }


def parse_nvlink_errors(text: str) -> dict[int, dict[int, tuple[tuple[str, int], ...]]]:
    """Per GPU index, per link, the error counters of `nvidia-smi nvlink -e` as (name, value) pairs in
    NVLINK_ERROR_COUNTERS order. A counter printed N/A is left out; a row nodecheck does not know is
    a ParseError (a new driver's row must be looked at, not dropped)."""
    tool = "nvidia-smi nvlink -e"
    check_failure(tool, text)
    if text.strip() and not text.endswith("\n"):
        # a count cut short ("CRC Errors: 1" of 12) would read low: nvidia-smi ends its output with a newline
        raise ParseError(tool, f"output ends mid-line: {quote(split_lines(text)[-1].strip())}", text)
    result: dict[int, dict[int, dict[str, int]]] = {}
    current: dict[int, dict[str, int]] | None = None
    for line in split_lines(text):
        stripped = line.strip()
        if not stripped:
            continue  # drivers print a blank line between links
        row = _NV_ERROR_ROW.fullmatch(stripped)
        if row is None:
            gpu = _NV_ERRORS_GPU.fullmatch(stripped)
            if gpu is None or stripped.startswith("Link "):
                raise ParseError(tool, f"unexpected line {quote(stripped)}", text)
            index = _index(gpu[1], "GPU", tool, text)
            if index in result:
                raise ParseError(tool, f"GPU {index} appears twice", text)
            current = result[index] = {}
            continue
        if current is None:
            raise ParseError(tool, f"unexpected line {quote(stripped)} before any GPU line", text)
        link, name, value = _index(row[1], "link", tool, text), row[2], row[3]
        if name in _NV_ERROR_ROWS_NOT_READ:
            continue
        counter = _NV_ERROR_ROWS.get(name)
        if counter is None:
            raise ParseError(tool, f"unknown counter {quote(name)} in {quote(stripped)}", text)
        counts = current.setdefault(link, {})
        if counter in counts:
            raise ParseError(tool, f"link {link} reports {counter} twice", text)
        if value != "N/A":
            counted = u64(value)  # NVML's counters are 64-bit
            if counted is None:
                raise ParseError(tool, f"{counter} of link {link}: {quote(value)} is not a count ({TOO_BIG})", text)
            counts[counter] = counted
    if not result:
        raise ParseError(tool, "empty output", text)
    return {
        gpu: {
            link: tuple((name, counts[name]) for name in NVLINK_ERROR_COUNTERS if name in counts)
            for link, counts in links.items()
        }
        for gpu, links in result.items()
    }


INDEX_DIGITS = 4  # a GPU's index or a link's number: a node has a few of each


def _index(digits: str, what: str, tool: str, text: str) -> int:
    number = u64(digits) if len(digits) <= INDEX_DIGITS else None
    if number is None:
        raise ParseError(tool, f"{what} number {quote(digits)} is not {INDEX_DIGITS} digits or fewer", text)
    return number


def _speed(number: str, tool: str, text: str) -> float:
    whole = number.split(".")[0]
    if len(whole) > INDEX_DIGITS:  # GB/s per link: two or three digits; 400 digits would read as inf
        raise ParseError(tool, f"link speed {quote(number)} GB/s is out of range", text)
    return float(number)
