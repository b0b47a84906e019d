"""/etc/fstab: every recorded file, and which entries fs.mounts expects mounted at boot."""

from __future__ import annotations

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.fstab import FstabEntry, parse_fstab
from tests.helpers import data, data_files

# per file: the mount points of the entries mounted at boot, in order
AUTO = {
    "fstab/jc-centos-7.7-anaconda.txt": ["/", "/boot"],
    "fstab/jc-ubuntu-18.04-swapfile.txt": ["/"],
    "fstab/host-debian-12-unconfigured.txt": [],
    "fstab/fpt-ai-factory-lustre-o2ib.txt": ["/mnt/hps"],
    "fstab/constructed-gpu-node-nfs-lustre-noauto.txt": [
        "/",
        "/boot/efi",
        "/local/scratch",
        "/dev/shm",
        "/home",
        "/opt/apps",
        "/lustre/scratch",
        "/datasets",
        "/mnt/nvme cache",
    ],
}


def test_every_fstab_file_has_an_expectation():
    assert set(data_files("fstab")) == set(AUTO)


@pytest.mark.parametrize("path", sorted(AUTO))
def test_fstab_recordings(path):
    assert [e.target for e in parse_fstab(data(path)) if e.auto_mounted] == AUTO[path]


def test_entry_fields():
    entries = parse_fstab(data("fstab/constructed-gpu-node-nfs-lustre-noauto.txt"))
    by_target = {e.target: e for e in entries}
    assert by_target["/opt/apps"] == FstabEntry(
        "nfs01.cluster:/export/apps", "/opt/apps", "nfs", ("ro", "hard", "_netdev"), 8
    )
    assert by_target["/opt/apps"].read_only and not by_target["/home"].read_only
    assert by_target["/datasets"].bind
    assert by_target["/mnt/backup copies"].source == "sshfs#backup@bk01:/srv/backup"  # "#" inside a field is data
    assert not by_target["/archive"].auto_mounted  # noauto (an automount)
    lustre = parse_fstab(data("fstab/fpt-ai-factory-lustre-o2ib.txt"))[0]
    assert lustre.source.endswith("100.69.252.8@o2ib:/scratch") and lustre.options == ("flock", "defaults")
    centos = parse_fstab(data("fstab/jc-centos-7.7-anaconda.txt"))
    assert centos[1].line == 10 and centos[1].options == ("defaults",)


def test_missing_options_field_means_defaults():
    assert parse_fstab("/dev/sdb1 /data xfs\n")[0].options == ("defaults",)


@pytest.mark.parametrize("text", ["/dev/sdb1 /data\n", "justonefield\n"])
def test_an_entry_mount_could_not_use_is_a_parse_error(text):
    with pytest.raises(ParseError, match="line 1"):
        parse_fstab(text)
