"""The shared filesystem's server (tests/fakes/hangfs.py) speaks the kernel's FUSE protocol itself: its
replies must have exactly the sizes include/uapi/linux/fuse.h gives the structures, or the kernel refuses
them (EINVAL) and every stat of /mnt/shared on every node fails. No mount is made here."""

from __future__ import annotations

import errno
import importlib.util
import struct
from pathlib import Path

import pytest

SPEC = importlib.util.spec_from_file_location("hangfs", Path(__file__).resolve().parents[1] / "fakes" / "hangfs.py")
hangfs = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(hangfs)


def test_init_answers_protocol_7_with_the_kernels_minor_capped_and_no_feature():
    err, out = hangfs.reply(hangfs.INIT, struct.pack("<IIII", 7, 41, 131072, 0xFFFFFFFF), 0)
    assert (err, len(out)) == (0, 64)  # sizeof(struct fuse_init_out)
    major, minor, readahead, flags = struct.unpack_from("<IIII", out)
    assert (major, minor, readahead, flags) == (7, 31, 131072, 0)


def test_getattr_is_an_uncached_empty_root_directory():
    err, out = hangfs.reply(hangfs.GETATTR, bytes(16), 1700000000)
    assert (err, len(out)) == (0, 104)  # fuse_attr_out: 16 + sizeof(struct fuse_attr) 88
    attr_valid, _, _, ino, size = struct.unpack_from("<QIIQQ", out)
    mode, nlink = struct.unpack_from("<II", out, 16 + 60)
    assert (attr_valid, ino, size, oct(mode), nlink) == (0, 1, 4096, "0o40755", 2)


def test_statfs_says_100_tib_40_percent_free():
    err, out = hangfs.reply(hangfs.STATFS, b"", 0)
    assert (err, len(out)) == (0, 80)  # sizeof(struct fuse_kstatfs)
    blocks, bfree, bavail, _files, _ffree, bsize = struct.unpack_from("<QQQQQI", out)
    assert (blocks * bsize, bavail * 5, bfree) == (100 << 40, blocks * 2, bavail)


def test_readdir_lists_dot_and_dotdot_once():
    err, first = hangfs.reply(hangfs.READDIR, struct.pack("<QQI", 1, 0, 4096), 0)
    assert err == 0 and len(first) == 2 * 32 and first[24:25] == b"." and first[56:58] == b".."
    assert hangfs.reply(hangfs.READDIR, struct.pack("<QQI", 1, 2, 4096), 0) == (0, b"")


@pytest.mark.parametrize(
    ("op", "error"), [(hangfs.LOOKUP, -errno.ENOENT), (hangfs.ACCESS, -errno.ENOSYS), (99, -errno.ENOSYS)]
)
def test_anything_else_is_absent_or_not_implemented(op, error):
    assert hangfs.reply(op, b"", 0) == (error, b"")
