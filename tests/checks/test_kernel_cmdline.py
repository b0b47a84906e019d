"""kernel.cmdline through its fleet judge: the command lines compared without the per-node
parameters (BOOT_IMAGE, initrd, root, resume), a drifting node named, a pin."""

from __future__ import annotations

from nodecheck.checks import all_checks
from nodecheck.core.model import Status
from nodecheck.probes.kernel_state import CMDLINE
from tests.helpers import captures, data

UBUNTU = data("proc-cmdline/procfs-fixture-ubuntu-5.11-quiet-splash.txt")
NODES = ("node1", "node2", "node3")


def out(text):
    return f"@@nodecheck begin cmdline\n{text}@@nodecheck end cmdline rc=0\n"


def fleet(texts, **params):
    spec = all_checks()["kernel.cmdline"]
    by_node = {n: captures(CMDLINE, out(t), node=n) for n, t in zip(NODES, texts)}
    return [(nodes, v.status, v.message) for nodes, v in spec.judge(by_node, spec.params.model_validate(params))]


def test_other_disks_and_kernel_files_are_not_drift():
    other_disk = UBUNTU.replace("456a0345-450d-4f7b-b7c9-43e3241d99ad", "0d7c5e55-0000-4000-8000-00000000beef")
    other_kernel = UBUNTU.replace("vmlinuz-5.11.0-22", "vmlinuz-5.11.0-25")
    assert fleet([UBUNTU, other_disk, other_kernel]) == [
        (NODES, Status.PASS, "kernel command line ro quiet splash vt.handoff=7 (all 3 nodes agree)")
    ]


def test_a_node_booted_without_an_option_is_named():
    drifted = UBUNTU.replace(" quiet", "")
    assert fleet([UBUNTU, drifted, UBUNTU]) == [
        (("node1", "node3"), Status.PASS, "kernel command line ro quiet splash vt.handoff=7 (majority: 2 of 3 nodes)"),
        (
            ("node2",),
            Status.FAIL,
            "kernel command line ro splash vt.handoff=7 on node2, expected ro quiet splash vt.handoff=7 (2 nodes)",
        ),
    ]


def test_quotes_init_arguments_ignore_and_pin():
    text = data("proc-cmdline/constructed-quoted-values-and-init-args.txt")
    got = fleet([text, text, text], ignore=["BOOT_IMAGE", "root", "acpi-osi"], expect=None)
    assert got == [
        (
            NODES,
            Status.PASS,
            'kernel command line ro dyndbg="file drivers/pci/* +p" nouveau-modeset=0 iommu=pt -- single '
            "init=/sbin/init (all 3 nodes agree)",
        )
    ]
    pinned = fleet([UBUNTU] * 3, expect="ro quiet splash vt.handoff=7 iommu=pt")
    assert pinned[0][1] is Status.FAIL
