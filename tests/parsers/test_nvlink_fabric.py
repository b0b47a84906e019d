"""The NVLink fabric probe's parser: NVSwitches in real lspci listings, the probe's sections."""

from __future__ import annotations

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.nvlink_fabric import UNITS, nvswitches_from_lspci, parse_nvlink_fabric
from tests.helpers import data, data_files

# per recording: the NVSwitches' addresses (NVIDIA Fabric Manager User Guide's baseboard listings)
EXPECTED = {
    "lspci-nvswitch/nvidia-fm-guide-hgx2-v100-6-nvswitches.txt": [
        "0000:61:00.0",
        "0000:62:00.0",
        "0000:63:00.0",
        "0000:65:00.0",
        "0000:66:00.0",
        "0000:67:00.0",
    ],
    "lspci-nvswitch/nvidia-fm-guide-hgx-a100-6-nvswitches.txt": [
        f"0000:{b}:00.0" for b in ("6d", "6e", "6f", "70", "71", "72")
    ],
    "lspci-nvswitch/nvidia-fm-guide-hgx-h100-4-nvswitches.txt": [f"0000:{b}:00.0" for b in ("07", "08", "09", "0a")],
    # fourth-generation switches sit behind a ConnectX-7 bridge: none on the PCI bus
    "lspci-nvswitch/nvidia-fm-guide-hgx-b200-switches-behind-cx7-none-on-pci.txt": [],
}


def test_every_recording_has_its_expectation():
    assert sorted(EXPECTED) == data_files("lspci-nvswitch")


@pytest.mark.parametrize("path", data_files("lspci-nvswitch"))
def test_nvswitches_are_nvidias_bridge_devices_in_each_recording(path):
    switches = nvswitches_from_lspci(data(path))
    assert [d.address for d in switches] == EXPECTED[path]
    assert all(d.vendor == "10de" for d in switches)


def test_nn_codes_tell_a_switch_from_a_grace_root_port():
    text = (
        "0004:00:00.0 Bridge [0680]: NVIDIA Corporation Device [10de:22a3] (rev a1)\n"
        "0000:00:00.0 PCI bridge [0604]: NVIDIA Corporation Device [10de:22b2]\n"
        "0009:01:00.0 3D controller [0302]: NVIDIA Corporation Device [10de:2941] (rev a1)\n"
    )
    assert [d.address for d in nvswitches_from_lspci(text)] == ["0004:00:00.0"]


def test_an_empty_listing_has_no_switch_and_garbage_raises():
    assert nvswitches_from_lspci("") == ()
    with pytest.raises(ParseError):
        nvswitches_from_lspci("lspci: command not found? no: this is not a device line\nfoo bar\n")


def probe_output(*, systemd: bool = True, show: str | None = None, lspci: str = "", procs: str = "", imex: str = ""):
    out = ["@@nodecheck systemd " + ("yes" if systemd else "no")]
    if systemd:
        out += ["@@nodecheck begin show", show if show is not None else SHOW, "@@nodecheck end show rc=0"]
    out += ["@@nodecheck begin procs", procs, "@@nodecheck end procs rc=0"]
    out += ["@@nodecheck begin nvswitch", "/dev/nvidia-nvswitch0", "@@nodecheck end nvswitch rc=0"]
    out += ["@@nodecheck begin lspci", lspci, "@@nodecheck end lspci rc=0"]
    out += ["@@nodecheck begin imex", imex, "@@nodecheck end imex rc=0"]
    return "\n".join(out) + "\n"


SHOW = (
    "Id=nvidia-fabricmanager.service\nLoadState=loaded\nActiveState=failed\nSubState=failed\nResult=exit-code\n"
    "NRestarts=0\nActiveEnterTimestamp=\n\n"
    "Id=nvidia-imex.service\nLoadState=not-found\nActiveState=inactive\nSubState=dead\nResult=success\n"
    "NRestarts=0\nActiveEnterTimestamp=\n"
)


def test_the_probe_sections_read_as_facts():
    node = parse_nvlink_fabric(
        probe_output(
            lspci=data("lspci-nvswitch/nvidia-fm-guide-hgx-h100-4-nvswitches.txt"),
            imex="/dev/nvidia-caps-imex-channels/channel0",
        )
    )
    assert node.systemd
    fm = node.unit(UNITS[0])
    assert fm is not None and fm.active_state == "failed" and fm.result == "exit-code"
    assert node.unit(UNITS[1]).load_state == "not-found"
    assert len(node.nvswitch_pci or ()) == 4
    assert node.nvswitch_devices == ("/dev/nvidia-nvswitch0",)
    assert node.imex_channels == ("/dev/nvidia-caps-imex-channels/channel0",)


def test_without_systemd_the_processes_are_read():
    node = parse_nvlink_fabric(probe_output(systemd=False, procs="412\tsame\t0\tnv-fabricmanage"))
    assert node.units is None and node.units_note == ""
    assert [(p.pid, p.namespace, p.uid, p.comm) for p in node.processes] == [(412, "same", 0, "nv-fabricmanage")]


def test_unreadable_systemctl_and_lspci_are_notes_not_facts():
    node = parse_nvlink_fabric(probe_output(show="Failed to connect to bus: No such file or directory", lspci="x y"))
    assert node.units is None and "cannot read systemctl show" in node.units_note
    assert node.nvswitch_pci is None and "cannot read lspci output" in node.lspci_note


def test_a_cut_off_probe_output_raises():
    text = probe_output()
    with pytest.raises(ParseError):
        parse_nvlink_fabric(text[: text.index("@@nodecheck begin imex")])
