"""kernel.cmdline: the whole kernel command line is the same on every node (or the pinned one)."""

from __future__ import annotations

from pydantic import Field

from nodecheck.checks.values import value_check
from nodecheck.core.registry import Captures
from nodecheck.judging.drift import PinOrDrift
from nodecheck.probes.kernel_state import CMDLINE, read_cmdline

# Parameters that differ between identical nodes by design: BOOT_IMAGE and initrd name the files of
# the booted kernel (its version is kernel.version's to compare; paths differ with the boot
# loader's layout), root and resume name the node's own disk (root=UUID=... is each disk's own).
PER_NODE = ["BOOT_IMAGE", "initrd", "root", "resume"]


class CmdlineDrift(PinOrDrift):
    ignore: list[str] = Field(
        default_factory=lambda: list(PER_NODE),
        description="parameter names left out of the comparison (default: BOOT_IMAGE, initrd, root, resume: "
        "the kernel file and the node's own disk); add per-node ones such as ip= on diskless nodes",
    )


@value_check(
    "kernel.cmdline",
    what="kernel command line",
    probes=[CMDLINE],
    params=CmdlineDrift,
    doc="The kernel command line (/proc/cmdline) is the same on every node and/or the pinned one: a node "
    "booted with other options (iommu, hugepages, isolcpus, a forgotten debug flag) behaves differently. "
    "Compared: the parameters as the kernel splits them (quotes removed, one space apart, in order, the "
    "init arguments after --), without the ignore: list (by default BOOT_IMAGE, initrd, root, resume: the "
    "kernel's files, which kernel.version compares, and each node's own disk).",
)
def cmdline(out: Captures, want: CmdlineDrift) -> str:
    parsed = read_cmdline(out)
    ignored = {name.replace("-", "_") for name in want.ignore}
    kept = [p.text() for p in parsed.params if p.key not in ignored]
    if parsed.init_args:
        kept += ["--", *parsed.init_args]
    return " ".join(kept) if kept else "(empty)"
