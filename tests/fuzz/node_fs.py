"""Fuzz targets of the node-level parsers (issue 32, section 3): fs.

Seeds are the recordings under tests/data (tests/data/SOURCES.md): every findmnt form and mountinfo,
and the nodecheck build host's `stat -f -c STATFS_FORMAT` lines, findmnt pairs and default stat -f of
the same mounts. The probes' own framing (@@nodecheck path.N / took.N / statfs.N / hung.N, the mounts
section) is built around those lines as tests/checks/test_fs.py builds it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nodecheck.parsers import findmnt, statfs
from nodecheck.parsers.sections import split_sections
from tests.fuzz.targets import Target
from tests.helpers import data

C_FORMAT = "stat-f/host-coreutils-9.1-c-format-tmpfs-full-proc-ext4.txt"
HOST_PAIRS = "findmnt/host-util-linux-2.38.1-pairs-space-ro-bind.txt"


def _statfs_lines() -> tuple[str, ...]:
    """Each line of the c-format recording on its own: the parser reads one path's line."""
    return tuple(line + "\n" for line in data(C_FORMAT).splitlines())


def _probe_outputs() -> tuple[str, ...]:
    from tests.parsers.test_statfs import PROBE_OUT

    return (PROBE_OUT, _mounts_output(), _free_output())


def _read_statfs_results(text: str):
    return statfs.read_statfs_results(split_sections(text))


# --- hollowed passing outputs (tests/fuzz/test_hollow_not_pass.py) ------------------------------------


def _mounts_want():
    from nodecheck.checks.fs import FsMounts

    return FsMounts(
        from_fstab=False,
        mounts=[
            {"path": "/tmp/ncrec/shm", "fstype": "tmpfs", "options": ["rw", "nosuid"], "source": "shm"},
            {"path": "/tmp/ncrec/my dir", "fstype": "tmpfs"},
        ],
    )


def _mounts_output() -> str:
    """The fs.mounts probe's stdout on the build host: the statfs lines and findmnt -P of the same mounts."""
    from tests.checks.test_fs import mounts_out

    full_shm, small_tmpfs, _, _ = data(C_FORMAT).splitlines()
    results = {"/tmp/ncrec/shm": full_shm, "/tmp/ncrec/my dir": small_tmpfs}
    return mounts_out(results, data(HOST_PAIRS), source="findmnt")


def _judge_mounts(text: str):
    from nodecheck.checks.fs import mounts, mounts_probes
    from tests.helpers import captures

    want = _mounts_want()
    return list(mounts(captures(mounts_probes(want)[0], text), want))


def _free_want():
    from nodecheck.checks.fs import FsFree

    return FsFree.model_validate(
        {
            "shm": None,
            "tmp": None,
            "paths": {
                "/": {"free_gib": 1, "free_pct": {"fail_below": 1, "warn_below": 5}, "inodes_free_pct": 1},
                "/tmp/ncrec/my dir": {"free_pct": 50, "inodes_free_pct": 1},
            },
        }
    )


def _free_output() -> str:
    """The fs.free probe's stdout on the build host: the ext4 / and the 1 MiB tmpfs, then findmnt -P."""
    from tests.checks.test_fs import mounts_out

    _, small_tmpfs, _, ext4_root = data(C_FORMAT).splitlines()
    return mounts_out({"/": ext4_root, "/tmp/ncrec/my dir": small_tmpfs}, data(HOST_PAIRS), source="findmnt")


def _judge_free(text: str):
    from nodecheck.checks.fs import free, free_probes
    from tests.helpers import captures

    want = _free_want()
    return list(free(captures(free_probes(want)[0], text), want))


TARGETS: tuple[Target, ...] = (
    Target("findmnt.parse_findmnt", findmnt.parse_findmnt, ("findmnt/*",), "fs"),
    Target("findmnt.parse_mountinfo", findmnt.parse_mountinfo, ("mountinfo/*",), "fs"),
    Target("statfs.parse_statfs_line", statfs.parse_statfs_line, ("stat-f/*",), "fs", _statfs_lines),
    Target("statfs.read_statfs_results", _read_statfs_results, (), "fs", _probe_outputs),
)

# check -> (judge of one output as the runner routes it, a real output it passes)
HOLLOW: dict[str, tuple[Callable[[str], Any], str]] = {
    "fs.mounts": (_judge_mounts, _mounts_output()),
    "fs.free": (_judge_free, _free_output()),
}
