"""statfs as stat -f prints it: the probes' one-line -c format, and every recorded default output
(GNU coreutils, busybox, old coreutils with a wrapped line), with the free-space arithmetic."""

from __future__ import annotations

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.sections import split_sections
from nodecheck.parsers.statfs import Answered, Hung, Statfs, parse_stat_f, parse_statfs_line, read_statfs_results
from tests.helpers import data, data_files

C_FORMAT = "stat-f/host-coreutils-9.1-c-format-tmpfs-full-proc-ext4.txt"
# per default-format file: (file, type, block size, total blocks, available blocks, total inodes) per filesystem
DEFAULT = {
    "stat-f/cscs-ritom-nfs-vast.txt": [("/ritom/scratch", "nfs", 1048576, 9723683840, 9587221309, 87003340800)],
    "stat-f/limburger-ext-and-nfs-with-prompts.txt": [
        ("/", "ext2/ext3", 4096, 114304572, 23039439, 29106176),
        ("/tank", "nfs", 1048576, 67172181, 67172181, 137568624823),
    ],
    "stat-f/apple-container-alpine-busybox-tmpfs-512m.txt": [("/tmpfsmount1", "tmpfs", 4096, 131072, 131071, 142352)],
    "stat-f/lkml-arch-5.6-tmp-tmpfs.txt": [("/tmp", "tmpfs", 4096, 2005160, 2005092, 2005160)],
    "stat-f/s905060-sre-handbook-old-coreutils-wrapped.txt": [("/", "ext2/ext3", 4096, 2579457, 1876998, 1310720)],
    "stat-f/host-coreutils-9.1-default-tmpfs-full-proc.txt": [
        ("/tmp/ncrec/shm", "tmpfs", 4096, 65536, 1536, 3085511),
        ("/tmp/ncrec/my dir", "tmpfs", 4096, 256, 256, 3085511),
        ("/tmp/ncrec/ro", "tmpfs", 4096, 16384, 16384, 3085511),
        ("/proc", "proc", 4096, 0, 0, 0),
    ],
}


def test_every_stat_f_file_has_an_expectation():
    assert set(data_files("stat-f")) == {*DEFAULT, C_FORMAT}


@pytest.mark.parametrize("path", sorted(DEFAULT))
def test_default_format_recordings(path):
    got = [(f, s.fstype, s.block_size, s.blocks, s.bavail, s.files) for f, s in parse_stat_f(data(path))]
    assert got == DEFAULT[path]


def test_the_c_format_recording_matches_the_default_one():
    lines = [parse_statfs_line(line) for line in data(C_FORMAT).splitlines()]
    assert [s.fstype for s in lines] == ["tmpfs", "tmpfs", "proc", "ext2/ext3"]
    default = dict(parse_stat_f(data("stat-f/host-coreutils-9.1-default-tmpfs-full-proc.txt")))
    assert lines[0] == default["/tmp/ncrec/shm"]
    assert lines[1] == default["/tmp/ncrec/my dir"]


def test_free_space_arithmetic():
    full_shm, _, proc, root = (parse_statfs_line(line) for line in data(C_FORMAT).splitlines())
    assert full_shm.size_gib == 0.25
    assert round(full_shm.free_gib * 1024) == 6  # 1536 blocks of 4 KiB: 6 MiB of 256 MiB left
    assert full_shm.free_pct == pytest.approx(100 * 1536 / 65536)
    # df's convention: root's reserve (free but not available) is neither free nor in the total
    assert root.free_pct == pytest.approx(100 * 20429914 / (66053021 - 59885207 + 20429914))
    assert proc.free_pct is None and proc.inodes_free_pct is None
    nfs = dict(parse_stat_f(data("stat-f/cscs-ritom-nfs-vast.txt")))["/ritom/scratch"]
    assert round(nfs.size_gib) == 9723683840 // 1024  # 1 MiB blocks


def test_an_unknown_type_name_with_a_space():
    assert parse_statfs_line("10 5 5 4096 100 50 abcdef UNKNOWN (0xabcdef)\n").fstype == "UNKNOWN (0xabcdef)"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "stat: cannot read file system information for '/x': No such file or directory\n",
        "1 2 3\n",
        "10 5 5 0 100 50 ef53 ext2/ext3\n",
        "10 5 5 4096 100 50 ef53 ext4\n10 5 5 4096 100 50 ef53 ext4\n",
    ],
)
def test_c_format_garbage_is_a_parse_error(text):
    with pytest.raises(ParseError):
        parse_statfs_line(text)


@pytest.mark.parametrize("text", ["", '  File: "/x"\n    ID: 0 Namelen: 255 Type: nfs\n'])
def test_default_format_garbage_is_a_parse_error(text):
    with pytest.raises(ParseError):
        parse_stat_f(text)


# --- the probes' per-path results ------------------------------------------------------------------

PROBE_OUT = (
    "@@nodecheck path.0 /\n@@nodecheck took.0 5\n@@nodecheck begin statfs.0\n"
    "66053021 59885207 20429914 4096 16777216 16302665 ef53 ext2/ext3\n@@nodecheck end statfs.0 rc=0\n"
    "@@nodecheck path.1 /mnt/a\\x20b\n@@nodecheck hung.1 4242 D 251\n"
    "@@nodecheck path.3 /old\n@@nodecheck hung.3 777 D 0 earlier\n"
    "@@nodecheck path.2 /nope\n@@nodecheck took.2 1\n@@nodecheck begin statfs.2\n"
    "stat: cannot read file system information for '/nope': No such file or directory\n"
    "@@nodecheck end statfs.2 rc=1\n"
)


def test_probe_results_by_path():
    results = read_statfs_results(split_sections(PROBE_OUT))
    assert results["/"] == Answered("/", 0, "66053021 59885207 20429914 4096 16777216 16302665 ef53 ext2/ext3\n", 0.05)
    assert results["/mnt/a b"] == Hung("/mnt/a b", 4242, "D", 2.51)
    assert results["/mnt/a b"].left_behind and not Hung("/x", 1, "gone", 2.0).left_behind
    assert results["/old"] == Hung("/old", 777, "D", 0.0, earlier=True)
    assert results["/nope"].missing and results["/nope"].error == "No such file or directory"
    assert isinstance(parse_statfs_line(results["/"].text), Statfs)


@pytest.mark.parametrize(
    "text",
    [
        "@@nodecheck path.0 /\n",
        "@@nodecheck path.0 /\n@@nodecheck hung.0 x D 1\n",
        "@@nodecheck path.0 /\n@@nodecheck took.0 5\n@@nodecheck begin statfs.0\n1 2\n",
    ],
)
def test_incomplete_probe_results_are_a_parse_error(text):
    with pytest.raises(ParseError):
        read_statfs_results(split_sections(text))
