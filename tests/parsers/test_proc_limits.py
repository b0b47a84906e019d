"""Resource limits: every /proc/PID/limits and `ulimit -a` (bash, dash) recording under
tests/data/proc-limits, in the kernel's units; output that is neither."""

from __future__ import annotations

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.proc_limits import Limit, parse_limits
from tests.growth import assert_linear
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
            "Max locked memory: '64k' is not a number or unlimited (at most 2^64-1)",
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


# -- issue 32, 3.2 and 3.3: bounded numbers; rows read in linear time -------------------------------

HEADER = "Limit                     Soft Limit           Hard Limit           Units     \n"


@pytest.mark.parametrize("digits", [21, 400, 5000])
def test_a_limit_longer_than_64_bits_is_a_parse_error(digits):
    text = HEADER + f"Max locked memory         {'9' * digits}                unlimited            bytes     \n"
    with pytest.raises(ParseError, match=r"Max locked memory: .* is not a number or unlimited \(at most 2\^64-1\)"):
        parse_limits(text, "/proc/4242/limits")
    bash = f"max locked memory           (kbytes, -l) {'9' * digits}\n"
    with pytest.raises(ParseError, match=r"is not a number or unlimited \(at most 2\^64-1\)"):
        parse_limits(bash)


def test_a_soft_limit_above_its_hard_limit_is_a_parse_error():
    # the kernel refuses setrlimit with soft > hard: such a row is garbled (a hard value cut short)
    text = HEADER + "Max open files            20000                20                   files     \n"
    with pytest.raises(ParseError, match="Max open files: soft limit 20000 above its hard limit 20"):
        parse_limits(text)
    unlimited_soft = HEADER + "Max open files            unlimited            4096                 files     \n"
    with pytest.raises(ParseError, match="soft limit unlimited above its hard limit 4096"):
        parse_limits(unlimited_soft)


def _one_long_row(make_row):
    return lambda n: HEADER + make_row(n) + "\n"


# the inputs that took quadratic time or worse (per long row): 24.5 s for 40 KB of the first
PATHOLOGICAL = {
    "proc name then spaces": _one_long_row(lambda n: "Max a" + " " * n + "x"),
    "proc words": _one_long_row(lambda n: "Max " + "a " * (n // 2)),
    "bash spaces before the value": lambda n: "a" + " " * n + "x\n",
    "dash name then spaces": lambda n: "locked memory" + " " * n + "\n",
    "bash unit then spaces": lambda n: "max locked memory (kbytes" + " " * n + ", -l) 64\n",
}


QUARTER_MB = (1 << 20) // 4


@pytest.mark.growth
@pytest.mark.parametrize("name", PATHOLOGICAL)
def test_rows_are_read_in_linear_time_up_to_1_mb(name):
    # growth from 256 KB to the 1 MB (4n), not seconds: 0.01 s at 1 MB here, where the
    # regexes did not finish in 100 s
    make = PATHOLOGICAL[name]
    assert len(make(4 * QUARTER_MB)) >= 1 << 20
    assert_linear(parse_limits, make, QUARTER_MB, ignore=ParseError)
