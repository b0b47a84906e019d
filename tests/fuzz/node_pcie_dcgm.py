"""Fuzz targets of the node-level parsers (issue 32, section 3): pcie, dcgm.

Seeds are the recordings under tests/data (tests/data/SOURCES.md): every `lspci -vvv` listing (and the
`lspci | grep` listings of NVSwitch boards nvlink_fabric reads with the same parser), and every
`dcgmi diag` output, JSON and table. The probes' own framing (the lspci section, the diag step's
sections and exit code) is built around them as tests/checks/test_pcie.py and test_gpu_dcgm.py build it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nodecheck.core.model import Capture, Outcome
from nodecheck.parsers import dcgm_diag, lspci
from tests.fuzz.targets import Target
from tests.helpers import DATA, captures, data

LSPCI_HEALTHY = "lspci/cmlgpu-xeon-e5v4-tesla-p100-root-port-acs-disabled.txt"
DCGM_JSON_PASS = "dcgmi-diag/derived-glimmer-v4.5.2-gb10-r2-pass.txt"
DCGM_TABLE_PASS = "dcgmi-diag/derived-dcgm-253-comment-v4.4.1-b200-r2-pass.txt"


def _lspci_probe_output(text: str) -> str:
    from tests.checks.test_pcie import probe_output

    return probe_output(text)


def _framed_listings() -> tuple[str, ...]:
    """The lspci probe's stdout around each recording: what lspci_text reads."""
    return tuple(_lspci_probe_output(path.read_text()) for path in sorted((DATA / "lspci").iterdir()))


def _lspci_text(text: str) -> str:
    from nodecheck.probes.pcie import LSPCI, lspci_text

    return lspci_text(captures(LSPCI, text))


def _paths(text: str) -> list[list[str]]:
    """What pcie.acs reads: the bridges above every GPU and HCA of the listing."""
    from nodecheck.checks.pcie import TARGETS as KINDS

    devices = lspci.parse_lspci(text)
    tree = lspci.PciTree(devices)
    wanted = [d for d in devices if any(d.vendor == v and d.class_code in codes for v, codes in KINDS.values())]
    return [[b.address for b in tree.above(d)] for d in wanted]


TARGETS: tuple[Target, ...] = (
    Target("lspci.parse_lspci", lspci.parse_lspci, ("lspci/*", "lspci-nvswitch/*"), "pcie"),
    Target("lspci.PciTree.above", _paths, ("lspci/*",), "pcie"),
    Target("pcie.lspci_text", _lspci_text, (), "pcie", _framed_listings),
    Target("dcgm_diag.parse_dcgmi_diag", dcgm_diag.parse_dcgmi_diag, ("dcgmi-diag/*",), "dcgm"),
    Target("dcgm_diag.host_engine_error", dcgm_diag.host_engine_error, ("dcgmi-diag/*",), "dcgm"),
)


# --- hollowed passing outputs (tests/fuzz/test_hollow_not_pass.py) ------------------------------------


def _judge_acs(text: str):
    from nodecheck.checks.pcie import PcieAcs, acs
    from nodecheck.probes.pcie import LSPCI

    return list(acs(captures(LSPCI, _lspci_probe_output(text)), PcieAcs()))


def _judge_dcgm(text: str):
    """The level-2 diag step's verdicts on `text` as dcgmi's output, framed as the node script frames it."""
    from nodecheck.checks.gpu_dcgm import DcgmDiag, judge_capture

    stdout = (
        f"@@nodecheck begin diag\n{text}{'' if text.endswith(chr(10)) else chr(10)}@@nodecheck end diag rc=0\n"
        "@@nodecheck diag_rc 0\n@@nodecheck begin stderr\n@@nodecheck end stderr rc=0\n"
    )
    out = Capture("node1", "dcgm_diag:fuzz", ("sh",), Outcome.EXITED, 0, stdout, "", 1.0)
    return judge_capture(out, DcgmDiag(level=2))


# check -> (judge of one output as the runner routes it, a real output it passes)
HOLLOW: dict[str, tuple[Callable[[str], Any], str]] = {
    "pcie.acs": (_judge_acs, data(LSPCI_HEALTHY)),
    "gpu.dcgm_diag": (_judge_dcgm, data(DCGM_JSON_PASS)),
    "gpu.dcgm_diag(table)": (_judge_dcgm, data(DCGM_TABLE_PASS)),
}
