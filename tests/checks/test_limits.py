"""limits judged on the limits probe's output (LIMITS_SCRIPT's facts and sections) with recorded
/proc/PID/limits files: slurmd's limits or the probe's own, PropagateResourceLimits, the minimums."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from nodecheck.checks.limits import LimitsParams, limits, shown
from nodecheck.core.errors import ParseError
from nodecheck.core.model import Status
from nodecheck.probes.limits import LIMITS, read_limits
from tests.helpers import captures, data

PASS, WARN, FAIL = Status.PASS, Status.WARN, Status.FAIL
MEMLOCK_64K = data("proc-limits/procfs-fixture-26232-memlock-65536-nofile-1024.txt")
DEVBOX = data("proc-limits/devbox-kernel-trailing-spaces-memlock-8mib.txt")  # memlock 8 MiB, nofile 20000


def probe_out(limits_text, *, source="slurmd pid=4242 via=exe", config=None, config_rc=0):
    text = f"@@nodecheck source {source}\n@@nodecheck begin limits\n{limits_text}@@nodecheck end limits rc=0\n"
    if config is not None:  # config_rc None: the section was cut off (no end line)
        text += f"@@nodecheck begin slurm-config\n{config}"
        text += "" if config_rc is None else f"@@nodecheck end slurm-config rc={config_rc}\n"
    return captures(LIMITS, text)


def judged(out, **params):
    return [(v.status, v.subject, v.message) for v in limits(out, LimitsParams(**params))]


def test_slurmd_with_the_64k_default_fails_memlock_and_nofile():
    assert judged(probe_out(MEMLOCK_64K)) == [
        (
            FAIL,
            "memlock",
            "memlock 64 KiB (slurmd's limits), expected unlimited (RDMA memory registration fails); "
            "PropagateResourceLimits not known (no slurm.conf readable on the node): the soft limit judged",
        ),
        (
            FAIL,
            "nofile",
            "nofile 1024 (slurmd's limits), expected >= 51200; PropagateResourceLimits not known (no slurm.conf "
            "readable on the node): the soft limit judged",
        ),
        (
            PASS,
            "nproc",
            "nproc 29436 (slurmd's limits) (>= 4096); PropagateResourceLimits not known (no slurm.conf readable on "
            "the node): the soft limit judged",
        ),
        (
            PASS,
            "stack",
            "stack 8 MiB (slurmd's limits) (>= 8 MiB); PropagateResourceLimits not known (no slurm.conf readable on "
            "the node): the soft limit judged",
        ),
    ]


def test_a_propagated_limit_is_judged_by_slurmds_hard_limit():
    # nofile soft 1024, hard 4096: with ALL propagated, a job can get up to 4096 from its shell
    out = probe_out(MEMLOCK_64K, config="PropagateResourceLimits = ALL\nPropagateResourceLimitsExcept = (null)\n")
    nofile = judged(out, nofile=4096)[1]
    assert nofile == (
        PASS,
        "nofile",
        "nofile 4096 (slurmd's limits) (>= 4096); PropagateResourceLimits=ALL: a job gets its submitting "
        "shell's soft limit, up to this hard limit",
    )
    out = probe_out(MEMLOCK_64K, config="PropagateResourceLimits = NONE\n")
    assert judged(out, nofile=4096)[1][:2] == (FAIL, "nofile")


def test_a_propagated_memlock_warns_even_when_slurmd_may_lock_enough():
    out = probe_out(DEVBOX, config="PropagateResourceLimits = ALL\n")
    assert judged(out, memlock=1 << 20)[0] == (
        WARN,
        "memlock",
        "memlock 8 MiB (slurmd's limits) (>= 1 MiB), but PropagateResourceLimits=ALL gives a job its submitting "
        "shell's soft memlock limit (login nodes often have 64 KiB), which this node cannot see: set "
        "PropagateResourceLimitsExcept=MEMLOCK in slurm.conf so jobs get slurmd's",
    )
    out = probe_out(DEVBOX, config="PropagateResourceLimits = ALL\nPropagateResourceLimitsExcept = MEMLOCK\n")
    assert judged(out, memlock=1 << 20)[0][0] is PASS


def test_a_slurm_conf_cut_off_is_said():
    out = probe_out(DEVBOX, config="PropagateResourceLimitsExcept=MEMLOCK\n", config_rc=None)
    memlock = judged(out, memlock=8 << 20)[0]
    assert memlock == (
        PASS,
        "memlock",
        "memlock 8 MiB (slurmd's limits) (>= 8 MiB); PropagateResourceLimits not known (slurm.conf could not "
        "be read to its end): the soft limit judged",
    )


def test_a_slurm_conf_without_the_settings_means_slurms_default_all():
    out = probe_out(DEVBOX, config="")
    memlock = judged(out, memlock=1 << 20)[0]
    assert memlock[0] is WARN
    assert "PropagateResourceLimits=ALL" in memlock[2]


def test_without_slurmd_the_login_limits_are_judged_and_said():
    got = judged(probe_out(DEVBOX, source="self"), nproc=None, stack=None)
    assert got == [
        (
            FAIL,
            "memlock",
            "memlock 8 MiB (the probe's own login limits, set by PAM), expected unlimited (RDMA memory "
            "registration fails); no slurmd on this node",
        ),
        (
            FAIL,
            "nofile",
            "nofile 20000 (the probe's own login limits, set by PAM), expected >= 51200; no slurmd on this node",
        ),
    ]


def test_unreadable_limits_are_parse_errors():
    with pytest.raises(ParseError, match="no source line"):
        list(limits(captures(LIMITS, ""), LimitsParams()))
    bad = "@@nodecheck source slurmd pid=9 via=exe\n@@nodecheck begin limits\nhead: cannot open '/proc/9/limits'\n"
    bad += "@@nodecheck end limits rc=1\n"
    with pytest.raises(ParseError) as caught:
        list(limits(captures(LIMITS, bad), LimitsParams()))
    assert caught.value.tool == "/proc/9/limits"


def test_params_and_sizes():
    assert LimitsParams(memlock=None, nofile="unlimited").nofile == "unlimited"
    with pytest.raises(ValidationError):
        LimitsParams(memlock=True)
    with pytest.raises(ValidationError):
        LimitsParams(nofile=-1)
    with pytest.raises(ValidationError):
        LimitsParams(memlock="64k")
    assert [shown("memlock", v) for v in (None, 1000, 65536, 1536 << 10, 18446744073708503040)] == [
        "unlimited",
        "1000 bytes",
        "64 KiB",
        "1.5 MiB",
        "16777216 TiB",
    ]
    assert shown("nofile", 1024) == "1024"


# --- which process is slurmd (issue 32, 1.3) --------------------------------------------------------------


def test_several_processes_that_could_be_slurmd_are_an_error_naming_them():
    text = "@@nodecheck source ambiguous pids=10,11\n@@nodecheck pid_file /run/slurmd.pid\n"
    with pytest.raises(ParseError) as e:
        list(limits(captures(LIMITS, text), LimitsParams()))
    assert e.value.reason.startswith(
        "2 processes could be slurmd: pids 10, 11 (each root's, running a root-owned slurmd binary, none a fork "
        "of another; neither systemd's MainPID nor a root-owned pid file (/run/slurmd.pid) names one)"
    )


def test_a_source_line_of_another_form_is_not_taken():
    # the form before issue 32 (count=2: the first of two was judged) is not read as a slurmd
    with pytest.raises(ParseError, match="source line not understood: 'slurmd pid=10 count=2'"):
        list(limits(probe_out(MEMLOCK_64K, source="slurmd pid=10 count=2"), LimitsParams()))


def test_how_slurmd_was_told_is_kept():
    systemd = read_limits(probe_out(MEMLOCK_64K, source="slurmd pid=7 via=systemd"))
    assert (systemd.slurmd_pid, systemd.found_by) == (7, "systemd's MainPID of slurmd.service")
    text = (
        "@@nodecheck pid_file /run/slurmd.pid\n"
        + probe_out(MEMLOCK_64K, source="slurmd pid=8 via=pidfile")[LIMITS.name].stdout
    )
    assert read_limits(captures(LIMITS, text)).found_by == "the pid file /run/slurmd.pid"


def test_processes_named_slurmd_that_are_not_are_said_beside_the_probes_own_limits():
    text = (
        "@@nodecheck not_slurmd count=9 pids=1,2,3,4,5,6,7,8\n" + probe_out(DEVBOX, source="self")[LIMITS.name].stdout
    )
    facts = read_limits(captures(LIMITS, text))
    assert (facts.slurmd_pid, facts.not_slurmd, facts.not_slurmd_count) == (None, (1, 2, 3, 4, 5, 6, 7, 8), 9)
    [memlock] = [v for v in limits(captures(LIMITS, text), LimitsParams(memlock=0)) if v.subject == "memlock"]
    assert memlock.message.endswith(
        "; no slurmd on this node (9 processes named slurmd, pid 1, 2, 3, 4, 5, 6, 7, 8 and more, are not root "
        "running a root-owned slurmd binary: not judged)"
    )


def test_a_400_digit_limit_is_a_parse_error_not_an_overflow():
    # issue 32, 3.2: shown() divided the number as a float: OverflowError, an "internal error"
    huge = DEVBOX.replace(
        "Max locked memory         8388608              8388608", "Max locked memory  " + "9" * 400 + "  unlimited"
    )
    with pytest.raises(ParseError, match=r"Max locked memory: .* is not a number or unlimited \(at most 2\^64-1\)"):
        list(limits(probe_out(huge), LimitsParams()))


@pytest.mark.parametrize("source", ["slurmd pid=" + "9" * 5000 + " via=exe", "ambiguous pids=1," + "9" * 5000])
def test_a_pid_no_process_has_is_a_parse_error(source):
    with pytest.raises(ParseError, match="source line not understood"):
        read_limits(probe_out(DEVBOX, source=source))
