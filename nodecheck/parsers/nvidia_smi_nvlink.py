"""`nvidia-smi nvlink -s` (each link's state and speed) and `nvlink -R` (each link's far end), per GPU index."""

from __future__ import annotations

import re
from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.core.model import quote
from nodecheck.parsers.gpu import NvLink
from nodecheck.parsers.lines import split_lines
from nodecheck.parsers.nvidia_smi_values import check_failure, normalise_bus_id


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
    check_failure(tool, text)
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
