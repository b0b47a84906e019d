"""Resource limits: every /proc/PID/limits and `ulimit -a` (bash, dash) recording under
tests/data/proc-limits, in the kernel's units; output that is neither."""

from __future__ import annotations

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.proc_limits import Limit, parse_limits
from tests.helpers import data, data_files

MIB8 = 8 << 20
# per file: (form, memlock, nofile, nproc, stack, number of limits)
EXPECTED = {
    "proc-limits/devbox-kernel-trailing-spaces-memlock-8mib.txt": (
        "proc",
        Limit(MIB8, MIB8, "bytes"),
        Limit(20000, 20000, "files"),
        Limit(96365, 96365, "processes"),
        Limit(MIB8, None, "bytes"),
        16,
    ),
    "proc-limits/procfs-fixture-26231-memlock-huge-nofile-2048.txt": (
        "proc",
        Limit(18446744073708503040, 18446744073708503040, "bytes"),
        Limit(2048, 4096, "files"),
        Limit(62898, 62898, "processes"),
        Limit(MIB8, None, "bytes"),
        16,
    ),
    "proc-limits/procfs-fixture-26232-memlock-65536-nofile-1024.txt": (
        "proc",
        Limit(65536, 65536, "bytes"),
        Limit(1024, 4096, "files"),
        Limit(29436, 29436, "processes"),
        Limit(MIB8, None, "bytes"),
        16,
    ),
    "proc-limits/vic-7415-photon-memlock-65536-truncated.txt": (
        "proc",
        Limit(65536, 65536, "bytes"),
        Limit(65536, 65536, "files"),
        Limit(7512, 7512, "processes"),
        Limit(MIB8, None, "bytes"),
        9,
    ),
    "proc-limits/ulimit-a-devbox-bash-5.2.15-memlock-8192.txt": (
        "bash",
        Limit(MIB8, None, "bytes"),
        Limit(20000, None, "files"),
        Limit(96365, None, "processes"),
        Limit(MIB8, None, "bytes"),
        16,
    ),
    "proc-limits/ulimit-a-devbox-dash-0.5.12-memlock-8192.txt": (
        "dash",
        Limit(MIB8, None, "bytes"),
        Limit(20000, None, "files"),
        Limit(96365, None, "processes"),
        Limit(MIB8, None, "bytes"),
        12,
    ),
    "proc-limits/ulimit-a-vmtouch-94-bash-memlock-5128731-kbytes.txt": (
        "bash",
        Limit(5128731 * 1024, None, "bytes"),
        Limit(1024, None, "files"),
        Limit(159836, None, "processes"),
        Limit(MIB8, None, "bytes"),
        16,
    ),
}


def test_every_recording_has_expectations():
    assert sorted(EXPECTED) == data_files("proc-limits")


@pytest.mark.parametrize("path", data_files("proc-limits"))
def test_recordings(path):
    form, memlock, nofile, nproc, stack, count = EXPECTED[path]
    limits = parse_limits(data(path))
    assert limits.form == form
    assert limits.has_hard is (form == "proc")
    got = limits.limits
    assert (got["memlock"], got["nofile"], got["nproc"], got["stack"]) == (memlock, nofile, nproc, stack)
    assert len(got) == count


def test_unlimited_reads_as_none_in_both_forms():
    proc = parse_limits(data("proc-limits/procfs-fixture-26232-memlock-65536-nofile-1024.txt"))
    assert proc.limits["cpu"] == Limit(None, None, "seconds")
    assert proc.limits["nice"] == Limit(0, 0, "")  # no Units column for priorities
    dash = parse_limits(data("proc-limits/ulimit-a-devbox-dash-0.5.12-memlock-8192.txt"))
    assert dash.limits["as"] == Limit(None, None, "")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty output"),
        (
            "cat: /proc/4242/limits: No such file or directory\n",
            "neither /proc/PID/limits nor `ulimit -a`: 'cat: /proc/4242/limits: No such file or directory'",
        ),
        ("Limit                     Soft Limit           Hard Limit           Units\n", "a header and no limit"),
        (
            "Limit                     Soft Limit           Hard Limit           Units\n"
            "Max locked memory         64k                  64k                  bytes\n",
            "'64k' is not a number or unlimited",
        ),
        (
            "Limit                     Soft Limit           Hard Limit           Units\nMax locked memo",
            "not a limits row: 'Max locked memo'",
        ),
        ("open files                          (-n) 1024\n", "no max locked memory row in this `ulimit -a` (bash)"),
    ],
)
def test_not_limits(text, reason):
    with pytest.raises(ParseError) as caught:
        parse_limits(text, "/proc/4242/limits")
    assert (caught.value.tool, caught.value.reason) == ("/proc/4242/limits", reason)
