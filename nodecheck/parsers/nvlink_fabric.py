"""The NVLink fabric probe's output (nodecheck/probes/nvlink_fabric.py) as typed facts: the Fabric
Manager and IMEX units or processes, the NVSwitches the host sees, the IMEX channel devices.

NVSwitches on the PCI bus are NVIDIA "Bridge" devices (class 0680) in `lspci` output, with or
without -nn/-D (NVIDIA Fabric Manager User Guide, "GPU Baseboard Topologies": HGX-2, HGX A100 and
HGX H100 show their NVSwitches so; HGX B200/B300 do not, their switches sit behind a ConnectX-7
bridge). A Grace CPU's root ports are NVIDIA "PCI bridge" (0604) devices: not switches.
"""

from __future__ import annotations

from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.parsers.lines import split_lines
from nodecheck.parsers.lspci import PciDevice, parse_lspci
from nodecheck.parsers.sections import split_sections
from nodecheck.parsers.systemctl import Process, UnitState, parse_process_list, parse_systemctl_show

TOOL = "nvlink_fabric probe"
NVIDIA_VENDOR = "10de"
NVSWITCH_CLASS = "0680"  # PCI class "Bridge" (other bridge device)
UNITS = ("nvidia-fabricmanager.service", "nvidia-imex.service")


@dataclass(frozen=True)
class FabricNode:
    """What the probe saw on one node. None: not read (and the *_note says why)."""

    systemd: bool  # systemd is the init system: units judge the services, else the process list
    units: tuple[UnitState, ...] | None  # one per name in UNITS, in that order; None: not read
    units_note: str  # why units is None: "systemctl show exited 1: ...", "" when read or no systemd
    processes: tuple[Process, ...]  # nv-fabricmanager and nvidia-imex processes (any namespace, uid)
    nvswitch_devices: tuple[str, ...]  # /dev/nvidia-nvswitchN device nodes
    nvswitch_driver: tuple[str, ...]  # PCI addresses under /proc/driver/nvidia-nvswitch/devices
    nvswitch_pci: tuple[PciDevice, ...] | None  # NVSwitches lspci lists; None: lspci not read
    lspci_note: str  # why nvswitch_pci is None
    imex_channels: tuple[str, ...]  # /dev/nvidia-caps-imex-channels/channelN present

    def unit(self, name: str) -> UnitState | None:
        if self.units is None:
            return None
        return dict(zip(UNITS, self.units)).get(name)


def nvswitches_from_lspci(text: str) -> tuple[PciDevice, ...]:
    """The NVSwitches in an `lspci` listing (any of -D, -nn, -v): NVIDIA devices of class Bridge.
    An empty listing (lspci -d 10de: on a node without NVIDIA devices) has none."""
    if not text.strip():
        return ()
    return tuple(d for d in parse_lspci(text) if is_nvswitch(d))


def is_nvswitch(device: PciDevice) -> bool:
    bridge = device.class_code == NVSWITCH_CLASS or (device.class_code is None and device.class_name == "Bridge")
    return bridge and device.vendor == NVIDIA_VENDOR


def parse_nvlink_fabric(text: str) -> FabricNode:
    """The probe's sections; ParseError when the output was cut before its last section."""
    sections = split_sections(text, TOOL)
    systemd = sections.facts.get("systemd")
    imex = sections.get("imex")
    if systemd not in ("yes", "no") or imex is None or imex.rc is None:
        raise ParseError(TOOL, "the probe's output was cut off (no complete imex section)", text)
    units: tuple[UnitState, ...] | None = None
    units_note = ""
    if systemd == "yes":
        units, units_note = _units(sections.facts.get("no_systemctl"), sections.get("show"))
    procs = sections.require("procs", TOOL)
    switches = sections.require("nvswitch", TOOL)
    paths = [ln.strip() for ln in split_lines(switches.text) if ln.strip()]
    lspci = sections.get("lspci")
    pci: tuple[PciDevice, ...] | None = None
    if "no_lspci" in sections.facts:
        lspci_note = sections.facts["no_lspci"]
    elif lspci is None or lspci.rc is None:
        lspci_note = "lspci did not finish (cut off)"
    elif lspci.rc != 0:
        said = next((ln.strip() for ln in split_lines(lspci.text) if ln.strip()), "no output")
        lspci_note = f"lspci exited {lspci.rc}" + (" (timed out after 10 s)" if lspci.rc == 124 else "") + f": {said}"
    else:
        try:
            pci, lspci_note = nvswitches_from_lspci(lspci.text), ""
        except ParseError as e:
            lspci_note = f"cannot read lspci output: {e.reason}"
    return FabricNode(
        systemd=systemd == "yes",
        units=units,
        units_note=units_note,
        processes=tuple(parse_process_list(procs.text)),
        nvswitch_devices=tuple(p for p in paths if p.startswith("/dev/")),
        nvswitch_driver=tuple(p.rsplit("/", 1)[-1].lower() for p in paths if p.startswith("/proc/")),
        nvswitch_pci=pci,
        lspci_note=lspci_note,
        imex_channels=tuple(ln.strip() for ln in split_lines(imex.text) if ln.strip()),
    )


def _units(no_systemctl: str | None, show) -> tuple[tuple[UnitState, ...] | None, str]:
    if no_systemctl is not None:
        return None, no_systemctl
    if show is None or show.rc is None:
        return None, "systemctl show did not finish (cut off)"
    if show.rc == 124:  # timeout(1)'s exit: systemd did not answer
        return None, "systemctl show timed out after 10 s (systemd not answering)"
    try:
        states = parse_systemctl_show(show.text)
    except ParseError as e:
        return None, f"cannot read systemctl show: {e.reason}"
    if show.rc != 0:
        return None, f"systemctl show exited {show.rc}"
    if len(states) != len(UNITS):
        return None, f"systemctl show printed {len(states)} units for {len(UNITS)} asked"
    return tuple(states), ""
