"""PCIe: Access Control Services on the bridges above the GPUs and HCAs, and their AER error counters."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from nodecheck.core.errors import ParseError
from nodecheck.core.model import Status, Verdict, excerpt
from nodecheck.core.registry import Captures, check
from nodecheck.core.thresholds import Action
from nodecheck.parsers.aer import AerFile, parse_aer
from nodecheck.parsers.lspci import PciDevice, PciTree, parse_lspci
from nodecheck.parsers.sections import Sections, split_sections
from nodecheck.probes.pcie import AER_AFTER, AER_BEFORE, LSPCI, lspci_text

AcsFlag = Literal["SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans"]
# The GPUs and RDMA HCAs whose paths are judged: (vendor, class codes), by what they are called.
TARGETS = {
    "GPU": ("10de", ("0300", "0302")),  # NVIDIA: VGA compatible / 3D controller
    "HCA": ("15b3", ("0207", "0200")),  # Mellanox: InfiniBand / Ethernet (RoCE) controller
}
NAME_CHARS = 70  # of a device's lspci name in a message


class PcieAcs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    # NCCL troubleshooting, "PCI Access Control Services (ACS)": on bare metal, ACS redirects all PCI
    # point-to-point traffic to the CPU root complex, which cuts GPU peer-to-peer and GPUDirect RDMA
    # bandwidth or hangs them; "if the output contains SrcValid+, ACS might be enabled"
    # (docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html). A VM with passthrough
    # devices needs it on instead (the IOMMU groups that isolate them).
    expect: Literal["disabled", "enabled"] = Field(
        "disabled", description="disabled (bare-metal GPU servers: P2P, GPUDirect RDMA) or enabled (VM hosts)"
    )
    flags: list[AcsFlag] = Field(
        ["SrcValid", "ReqRedir", "CmpltRedir"],
        min_length=1,
        description="the ACSCtl bits judged: any of them on is 'enabled'; 'enabled' wants each the bridge supports",
    )
    devices: Literal["gpu", "hca", "both"] = Field("both", description="whose upstream bridges are judged")


@check("pcie.acs", probes=[LSPCI], params=PcieAcs)
def acs(out: Captures, want: PcieAcs) -> Iterator[Verdict]:
    """ACS on the PCIe bridges above the GPUs and RDMA HCAs is as the platform expects (off on bare
    metal: ACS sends GPU peer-to-peer and GPUDirect RDMA traffic through the root complex)."""
    devices = parse_lspci(lspci_text(out))
    kinds = {"gpu": ("GPU",), "hca": ("HCA",), "both": ("GPU", "HCA")}[want.devices]
    targets = [(kind, d) for d in devices for kind in kinds if _is(d, kind)]
    if not targets:
        wanted = " or ".join(f"{k} ({TARGETS[k][0]}, class {'/'.join(TARGETS[k][1])})" for k in kinds)
        yield Verdict(
            Status.ERROR,
            f"no {wanted} in lspci: no path to judge (gpu.count and ib.ports say whether they should be there)",
            observed={"devices": len(devices)},
        )
        return
    below: dict[str, list[str]] = {}  # bridge address -> what sits below it
    bridges: dict[str, PciDevice] = {}
    direct = []
    tree = PciTree(devices)
    for kind, device in targets:
        path = tree.above(device, f"{kind} {device.address}")
        if not path:
            direct.append(f"{kind} {device.address}")
        for bridge in path:
            bridges[bridge.address] = bridge
            below.setdefault(bridge.address, []).append(f"{kind} {device.address}")
    denied = [b.address for b in bridges.values() if b.capabilities_denied]
    if denied:
        yield Verdict(
            Status.ERROR,
            f"lspci could not read the capabilities of {len(denied)} bridge(s) above the "
            f"{'/'.join(kinds)}s ('Capabilities: <access denied>'): run nodecheck as root",
            observed={"access_denied": denied},
            excerpt=excerpt(bridges[denied[0]].raw, 1200),
        )
        return
    unread = [_unread(b, below[a]) for a, b in bridges.items() if _ctl_lost(b)]
    bad = [v for a, b in bridges.items() if not _ctl_lost(b) and (v := _judge_bridge(b, below[a], want)) is not None]
    yield from unread
    yield from bad
    if want.expect == "enabled" and direct:
        yield Verdict(
            Status.WARN,
            f"{', '.join(direct)}: no PCIe bridge above (on a root bus): no ACS isolates them",
            observed={"no_bridge_above": direct},
        )
    if not bridges:
        if want.expect == "disabled":  # nothing between the devices and the root complex: not judged, not a pass
            yield Verdict(
                Status.SKIPPED,
                f"no PCIe bridge above {', '.join(direct)} (on a root bus): ACS not judged",
                observed={"no_bridge_above": direct},
            )
        return
    if not bad and not unread:
        judged = len(bridges)
        without = sum(1 for b in bridges.values() if b.acs_ctl is None)
        note = f" ({without} without an ACS capability)" if without else ""
        alone = f"; {len(direct)} with no bridge above" if direct else ""
        counted = ", ".join(f"{n} {kind}(s)" for kind in kinds if (n := sum(1 for k, _ in targets if k == kind)))
        yield Verdict(
            Status.PASS,
            f"ACS {want.expect} on the {judged} bridge(s) above {counted}{note}{alone}",
            observed={"bridges": sorted(bridges), "targets": [f"{k} {d.address}" for k, d in targets]},
            expected={"acs": want.expect, "flags": list(want.flags)},
        )


def _is(device: PciDevice, kind: str) -> bool:
    vendor, classes = TARGETS[kind]
    return device.vendor == vendor and device.class_code in classes


def _where(bridge: PciDevice, below: list[str]) -> str:
    """'0000:00:02.0 (Intel ... Root Port 2) above GPU 0000:04:00.0': the bridge, named, and what it serves."""
    shown = bridge.name if len(bridge.name) <= NAME_CHARS else bridge.name[:NAME_CHARS] + "…"
    under = ", ".join(below[:4]) + (f" and {len(below) - 4} more" if len(below) > 4 else "")
    return f"{bridge.address} ({shown}) above {under}"


def _acs_lines(bridge: PciDevice) -> str:
    """The bridge's header and its ACS lines, for an excerpt."""
    lines = bridge.raw.split("\n")
    return "\n".join(lines[:1] + [ln for ln in lines[1:] if "ACS" in ln or "Access Control" in ln])


def _ctl_lost(bridge: PciDevice) -> bool:
    """The ACS capability is listed but its ACSCtl line is not: -vv prints both, so a line was lost."""
    return bridge.acs_listed and bridge.acs_ctl is None


def _unread(bridge: PciDevice, below: list[str]) -> Verdict:
    """A bridge that lists the ACS capability without its ACSCtl bits: its state is unknown, not 'no ACS'."""
    return Verdict(
        Status.ERROR,
        f"{_where(bridge, below)}: lists Access Control Services but no ACSCtl line, so its ACS state is "
        "unknown (`lspci -vv` prints ACSCap and ACSCtl under the capability: a line was lost)",
        bridge.address,
        {"bridge": bridge.address, "acs_listed": True, "acsctl": None},
        excerpt=excerpt(_acs_lines(bridge), 1200),
    )


def _judge_bridge(bridge: PciDevice, below: list[str], want: PcieAcs) -> Verdict | None:
    """The bridge's verdict when it is not as expected, else None."""
    where = _where(bridge, below)
    ctl = dict(bridge.acs_ctl or ())
    seen = " ".join(f"{f}{'+' if on else '-'}" for f, on in (bridge.acs_ctl or ()))
    observed = {"bridge": bridge.address, "name": bridge.name, "below": below, "acsctl": seen or None}
    snippet = _acs_lines(bridge)
    if want.expect == "disabled":
        on = [f for f in want.flags if ctl.get(f)]
        if not on:
            return None
        return Verdict(
            Status.FAIL,
            f"{where}: ACSCtl {' '.join(f + '+' for f in on)}, expected ACS disabled "
            "(peer-to-peer and GPUDirect RDMA traffic goes through the root complex)",
            bridge.address,
            observed,
            {"acs": "disabled", "off": list(want.flags)},
            excerpt(snippet, 1200),
        )
    if bridge.acs_ctl is None:
        return Verdict(
            Status.WARN,
            f"{where}: no ACS capability, expected ACS enabled (devices below are not isolated)",
            bridge.address,
            observed,
            {"acs": "enabled"},
            excerpt(snippet, 1200),
        )
    capable = dict(bridge.acs_cap or ())
    off = [f for f in want.flags if capable.get(f, True) and not ctl.get(f)]
    if not off:
        return None
    return Verdict(
        Status.FAIL,
        f"{where}: ACSCtl {' '.join(f + '-' for f in off)}, expected ACS enabled",
        bridge.address,
        observed,
        {"acs": "enabled", "on": list(want.flags)},
        excerpt(snippet, 1200),
    )


class PcieAer(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    devices: Literal["gpu", "hca", "both"] = Field("both", description="whose counters (and their bridges') are judged")
    # an uncorrectable error is a transaction the link lost: fatal ones take the device off the bus
    # (pcieaer-howto), non-fatal ones are recovered by the driver; both say the link is not healthy
    fatal: Literal["fail", "warn"] = Field("fail", description="what a fatal AER error count above 0 gives")
    nonfatal: Literal["fail", "warn"] = Field("warn", description="what a non-fatal AER error count above 0 gives")
    correctable_increase: Action = Field(
        "warn", description="what correctable errors that rose during the run give (a marginal link under load)"
    )
    correctable_per_hour: float | None = Field(
        None,
        gt=0,
        allow_inf_nan=False,
        description="warn when correctable errors since boot exceed this rate (default: not judged)",
    )


_PATH = re.compile(r"^@@nodecheck path (GPU|HCA)((?: \S+)+)$", re.M)
KIND_OF = {"gpu": ("GPU",), "hca": ("HCA",), "both": ("GPU", "HCA")}


@check("pcie.aer", probes=[AER_BEFORE], after=[AER_AFTER], params=PcieAer)
def aer(out: Captures, want: PcieAer) -> Iterator[Verdict]:
    """PCIe AER error counters of the GPUs, HCAs and the bridges above them: fatal errors fail,
    non-fatal ones warn, correctable ones that rose during the run warn."""
    first, second = out[AER_BEFORE.name].stdout, out[AER_AFTER.name].stdout
    before, after = split_sections(first, "pcie_aer"), split_sections(second, "pcie_aer")
    roles: dict[str, str] = {}  # device -> "GPU 0000:04:00.0" or "bridge above GPU 0000:04:00.0"
    for kind, chain in _PATH.findall(second):
        if kind not in KIND_OF[want.devices]:
            continue
        target, *bridges = chain.split()
        roles.setdefault(target, f"{kind} {target}")
        for bridge in bridges:
            roles.setdefault(bridge, f"bridge {bridge} above {kind} {target}")
    if not roles:
        wanted = " or ".join(KIND_OF[want.devices])
        yield Verdict(Status.ERROR, f"no {wanted} in /sys/bus/pci/devices: no AER counters to judge")
        return
    boots = before.facts.get("boot_id"), after.facts.get("boot_id")
    rebooted = all(boots) and boots[0] != boots[1]
    uptime = _float(after.facts.get("uptime"))
    unread, judged, bad = [], 0, 0
    for device, role in roles.items():
        try:
            files = {k: _read(after, device, k) for k in ("correctable", "nonfatal", "fatal")}
        except ParseError as e:
            bad += 1
            yield Verdict(Status.ERROR, f"{role}: cannot read AER counters: {e.reason}", device, excerpt=e.excerpt)
            continue
        if all(f is None for f in files.values()):
            unread.append(device)
            continue
        judged += 1
        for verdict in _judge_aer(device, role, files, before, want, rebooted, uptime):
            bad += 1
            yield verdict
    if not bad:
        note = f"; not judged (no AER files): {', '.join(unread)}" if unread else ""
        if judged:
            yield Verdict(
                Status.PASS,
                f"no AER errors on {judged} device(s) (GPUs/HCAs and the bridges above them){note}",
                observed={"devices": judged, "no_aer_files": unread},
            )
        else:
            yield Verdict(
                Status.SKIPPED,
                f"no AER counters on any of {len(unread)} device(s) (no aer_dev_* files: kernel < 4.17 or AER off)",
                observed={"no_aer_files": unread},
            )


def _float(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def _read(sections: Sections, device: str, kind: str) -> AerFile | None:
    section = sections.get(f"aer:{device}:{kind}")
    return None if section is None else parse_aer(section.text, kind)


def _judge_aer(
    device: str,
    role: str,
    files: dict[str, AerFile | None],
    before: Sections,
    want: PcieAer,
    rebooted: bool,
    uptime: float | None,
) -> Iterator[Verdict]:
    for kind, setting in (("fatal", want.fatal), ("nonfatal", want.nonfatal)):
        found = files[kind]
        if found is not None and found.total > 0:
            yield Verdict(
                Status.FAIL if setting == "fail" else Status.WARN,
                f"{role}: {found.total} {kind} AER error(s) since boot ({', '.join(found.nonzero())}), expected 0",
                device,
                {kind: found.total, "counts": dict(found.counts)},
                {kind: 0},
            )
    cor = files["correctable"]
    if cor is None:
        return
    try:
        old = None if rebooted else _read(before, device, "correctable")
    except ParseError:
        old = None
    if old is not None and cor.total > old.total and want.correctable_increase != "off":
        yield Verdict(
            Status.FAIL if want.correctable_increase == "fail" else Status.WARN,
            f"{role}: correctable AER errors rose by {cor.total - old.total} during the run "
            f"({old.total} -> {cor.total}: {', '.join(cor.nonzero())})",
            device,
            {"correctable_before": old.total, "correctable_after": cor.total},
            {"increase": 0},
        )
    if want.correctable_per_hour is not None and uptime:
        rate = cor.total / (uptime / 3600)
        if rate > want.correctable_per_hour:
            yield Verdict(
                Status.WARN,
                f"{role}: {cor.total} correctable AER errors in {uptime / 3600:.1f} h since boot "
                f"({rate:.1f}/h), expected <= {want.correctable_per_hour:g}/h",
                device,
                {"correctable": cor.total, "per_hour": round(rate, 2)},
                {"max_per_hour": want.correctable_per_hour},
            )
