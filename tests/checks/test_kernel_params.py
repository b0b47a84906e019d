"""kernel.params judged on /proc/cmdline recordings and /proc/sys values: options present and
absent, sysctl values as text and in bands, a key the kernel does not have."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from nodecheck.checks.kernel_params import KernelParams, params, probes
from nodecheck.core.model import Status
from nodecheck.probes.kernel_state import CMDLINE, sysctl_probe
from tests.helpers import captures, data

PASS, FAIL, ERROR = Status.PASS, Status.FAIL, Status.ERROR
PVE = data("proc-cmdline/derived-pve-intel-vgpu-3-proxmox-initrd-backslashes-iommu-pt.txt")
UBUNTU = data("proc-cmdline/procfs-fixture-ubuntu-5.11-quiet-splash.txt")


def cmdline_out(text, rc=0):
    return captures(CMDLINE, f"@@nodecheck begin cmdline\n{text}@@nodecheck end cmdline rc={rc}\n")


def sysctl_out(want, values, missing=()):
    text = "".join(f"@@nodecheck begin sysctl:{k}\n{v}@@nodecheck end sysctl:{k} rc=0\n" for k, v in values.items())
    text += "".join(f"@@nodecheck missing:{k} 1\n" for k in missing)
    return captures(sysctl_probe(list(want.sysctl)), text)


def judged(out, **kwargs):
    want = KernelParams(**kwargs)
    return [(v.status, v.subject, v.message) for v in params(out, want)]


def test_options_present_and_absent():
    present = ["iommu=pt", "intel_iommu=on", "quiet", "hugepagesz=1G"]
    absent = ["nouveau.modeset=1", "i915.max_vfs"]
    assert judged(cmdline_out(PVE), cmdline_present=present, cmdline_absent=absent) == [
        (PASS, "iommu", "iommu=pt on the kernel command line"),
        (PASS, "intel_iommu", "intel_iommu=on on the kernel command line"),
        (PASS, "quiet", "quiet on the kernel command line"),
        (FAIL, "hugepagesz", "hugepagesz=1G not on the kernel command line, expected it there"),
        (PASS, "nouveau.modeset", "no nouveau.modeset=1 on the kernel command line"),
        (FAIL, "i915.max_vfs", "kernel command line has i915.max_vfs=7, expected no i915.max_vfs"),
    ]


def test_another_value_and_dashes_for_underscores():
    out = cmdline_out("ro iommu=nopt nouveau-modeset=1\n")
    assert judged(out, cmdline_present=["iommu=pt"], cmdline_absent=["nouveau_modeset=1"]) == [
        (FAIL, "iommu", "kernel command line has iommu=nopt, expected iommu=pt"),
        (FAIL, "nouveau_modeset", "kernel command line has nouveau-modeset=1, expected no nouveau_modeset=1"),
    ]
    assert judged(cmdline_out(UBUNTU), cmdline_absent=["nokaslr"]) == [
        (PASS, "nokaslr", "no nokaslr on the kernel command line")
    ]


def test_unreadable_command_line():
    assert judged(cmdline_out("head: cannot open '/proc/cmdline'\n", rc=1), cmdline_present=["iommu=pt"]) == [
        (
            ERROR,
            "cmdline",
            "cannot read the kernel command line: could not be read (exit 1): head: cannot open '/proc/cmdline'",
        )
    ]


def test_sysctl_values_bands_and_a_missing_key():
    want = KernelParams(
        sysctl={
            "vm.max_map_count": {"fail_below": 1048576},
            "net.core.rmem_max": {"fail_below": 4194304},
            "net.ipv4.tcp_rmem": "4096 131072 33554432",
            "kernel.numa_balancing": 0,
            "vm.overcommit_memory": {"values": [0, 1]},
            "net.ipv4.tcp_wmem": {"fail_below": 1},
            "vm.nr_hugepages_typo": 0,
        }
    )
    out = sysctl_out(
        want,
        {
            "vm.max_map_count": "65530\n",
            "net.core.rmem_max": "4194304\n",
            "net.ipv4.tcp_rmem": "4096\t131072\t33554432\n",
            "kernel.numa_balancing": "1\n",
            "vm.overcommit_memory": "0\n",
            "net.ipv4.tcp_wmem": "4096\t16384\t4194304\n",
        },
        missing=["vm.nr_hugepages_typo"],
    )
    assert [(v.status, v.subject, v.message) for v in params(out, want)] == [
        (FAIL, "vm.max_map_count", "vm.max_map_count = 65530, expected >= 1048576"),
        (PASS, "net.core.rmem_max", "net.core.rmem_max = 4194304 (>= 4194304)"),
        (PASS, "net.ipv4.tcp_rmem", "net.ipv4.tcp_rmem = 4096 131072 33554432"),
        (FAIL, "kernel.numa_balancing", "kernel.numa_balancing = 1, expected 0"),
        (PASS, "vm.overcommit_memory", "vm.overcommit_memory = 0 (one of 0, 1)"),
        (
            ERROR,
            "net.ipv4.tcp_wmem",
            "net.ipv4.tcp_wmem = '4096 16384 4194304': not one number, so the band cannot judge it; give the "
            "value as text",
        ),
        (
            ERROR,
            "vm.nr_hugepages_typo",
            "vm.nr_hugepages_typo: cannot read /proc/sys/vm/nr_hugepages_typo: no such key",
        ),
    ]


def test_params_and_probes():
    assert judged(captures(CMDLINE, "")) == [
        (ERROR, "", "nothing to judge: give sysctl:, cmdline_present: or cmdline_absent: in the playbook")
    ]
    assert probes(KernelParams()) == []
    for bad in (
        {"sysctl": {"../etc/shadow": 1}},
        {"sysctl": {"vm": 1}},
        {"cmdline_present": ["a b"]},
        {"cmdline_present": ['x="y"']},
        {"cmdline_absent": ["--"]},
    ):
        with pytest.raises(ValidationError):
            KernelParams(**bad)
    assert [p.name for p in probes(KernelParams(cmdline_present=["iommu=pt"]))] == ["kernel-cmdline"]
    both = probes(KernelParams(sysctl={"vm.max_map_count": 1}, cmdline_absent=["nokaslr"]))
    assert both[0] is CMDLINE and both[1].argv[-1] == "vm.max_map_count"
