"""The kernel command line split as the kernel splits it: every recording under tests/data/proc-cmdline."""

from __future__ import annotations

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.cmdline import Param, parse_cmdline
from tests.helpers import data, data_files

EXPECTED = {
    "proc-cmdline/constructed-quoted-values-and-init-args.txt": (
        [
            ("BOOT_IMAGE", "/vmlinuz-6.8.0-45-generic"),
            ("root", "UUID=1b2c3d4e-0000-4000-8000-000000000001"),
            ("ro", None),
            ("dyndbg", "file drivers/pci/* +p"),
            ("acpi_osi", "Windows 2020"),
            ("nouveau-modeset", "0"),
            ("iommu", "pt"),
        ],
        ("single", "init=/sbin/init"),
    ),
    "proc-cmdline/derived-negativo17-nvidia-driver-73-fedora29-rd-driver-blacklist-nouveau.txt": (
        [
            ("BOOT_IMAGE", "/vmlinuz-4.20.6-200.fc29.x86_64"),
            ("root", "UUID=8c7955f0-077d-403e-9ea7-c14b48f660d7"),
            ("ro", None),
            ("rootflags", "subvol=root"),
            ("rd.driver.blacklist", "nouveau"),
        ],
        (),
    ),
    "proc-cmdline/derived-pve-intel-vgpu-3-proxmox-initrd-backslashes-iommu-pt.txt": (
        [
            ("initrd", "\\EFI\\proxmox\\6.8.12-1-pve\\initrd.img-6.8.12-1-pve"),
            ("root", "ZFS=rpool/ROOT/pve-1"),
            ("boot", "zfs"),
            ("quiet", None),
            ("intel_iommu", "on"),
            ("iommu", "pt"),
            ("i915.enable_guc", "3"),
            ("i915.max_vfs", "7"),
        ],
        (),
    ),
    "proc-cmdline/procfs-fixture-ubuntu-5.11-quiet-splash.txt": (
        [
            ("BOOT_IMAGE", "/vmlinuz-5.11.0-22-generic"),
            ("root", "UUID=456a0345-450d-4f7b-b7c9-43e3241d99ad"),
            ("ro", None),
            ("quiet", None),
            ("splash", None),
            ("vt.handoff", "7"),
        ],
        (),
    ),
}


def test_every_recording_has_expectations():
    assert sorted(EXPECTED) == data_files("proc-cmdline")


@pytest.mark.parametrize("path", data_files("proc-cmdline"))
def test_recordings(path):
    params, init_args = EXPECTED[path]
    parsed = parse_cmdline(data(path))
    assert [(p.name, p.value) for p in parsed.params] == params
    assert parsed.init_args == init_args


def test_names_compare_with_dash_and_underscore_alike_and_the_last_counts():
    parsed = parse_cmdline('iommu=off nouveau_modeset=1 iommu=pt "quoted flag" empty=\n')
    assert parsed.last("nouveau-modeset") == Param("nouveau_modeset", "1")
    assert parsed.last("iommu") == Param("iommu", "pt")
    assert parsed.last("quoted flag") == Param("quoted flag", None)
    assert parsed.last("empty") == Param("empty", "")
    assert parsed.last("missing") is None
    assert Param("acpi_osi", "Windows 2020").text() == 'acpi_osi="Windows 2020"'


@pytest.mark.parametrize("text", ["a\0b", "x" * 70000])
def test_not_a_command_line(text):
    with pytest.raises(ParseError):
        parse_cmdline(text)
