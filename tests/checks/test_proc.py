"""proc.health judged on the processes probe's output (PROCESSES_SCRIPT's sections): D state over
two samples, zombies, load per CPU, and users' processes outside Slurm jobs. Exact statuses and
messages."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from nodecheck.checks.proc import ProcHealth, age_text, health, probes
from nodecheck.core.errors import ParseError
from nodecheck.core.model import Status
from tests.helpers import captures, data

PASS, WARN, FAIL, ERROR = Status.PASS, Status.WARN, Status.FAIL, Status.ERROR
FAULT = data("ps/derived-azure-local-csi-153-h100-lvm-D-probe-columns.txt")
HEADER = "    PID    PPID   UID USER                             STAT ELAPSED COMMAND\n"
# procfs testdata/fixtures.ttar proc/loadavg (prometheus/procfs)
LOADAVG = "0.02 0.04 0.05 1/497 11947\n"


def row(pid, ppid, uid, user, stat, elapsed, comm):
    return f"{pid:>7} {ppid:>7} {uid:>5} {user:<32} {stat:<4} {elapsed:>7} {comm}\n"


def section(name, body, rc=0):
    return f"@@nodecheck begin {name}\n{body}@@nodecheck end {name} rc={rc}\n"


def printed(name, listing):
    """The line the probe prints after a sample: how many lines ps printed."""
    return f"@@nodecheck lines:{name} {len(listing.split(chr(10))) - 1}\n"


def probe_out(ps1, ps2=None, *, cpus="2", loadavg=LOADAVG, cgroups="", rc1=0, lines1=None, **params):
    want = ProcHealth(**params)
    text = f"@@nodecheck cpus {cpus}\n" + section("loadavg", loadavg) + section("ps1", ps1, rc1)
    text += printed("ps1", ps1) if lines1 is None else lines1
    text += section("cgroups", cgroups)
    if ps2 is not None:
        text += section("ps2", ps2) + printed("ps2", ps2)
    [probe] = probes(want)
    return captures(probe, text), want


def judged(ps1, ps2=None, **kwargs):
    out, want = probe_out(ps1, ps2, **kwargs)
    return [(v.status, v.subject, v.message) for v in health(out, want)]


def test_processes_stuck_in_d_state_in_both_samples_fail():
    got = judged(FAULT, FAULT)
    assert got[0] == (
        PASS,
        "load",
        "load average 0.02 0.04 0.05 on 2 CPUs (0.02 per CPU over 5 min) (<= 2 per CPU)",
    )
    assert got[1] == (
        FAIL,
        "D state",
        "6 processes in D state (uninterruptible) in both samples 2 s apart, running longer than 300 s: "
        "auoms (pid 12405, root, running 2h 0m), jbd2/dm-8-8 (pid 105408, root, running 23h 58m), "
        "lvm (pid 1233013, root, running 1h 0m), lvm (pid 1233429, root, running 59m 0s), "
        "lvm (pid 1233747, root, running 58m 0s) and 1 more; expected none (a hung mount or driver; "
        "such a process cannot be killed)",
    )
    assert got[2:] == [
        (PASS, "zombies", "0 zombies older than 60 s"),
        (PASS, "leftovers", "no process of a user (uid 1000-60000) outside a Slurm job"),
    ]


def test_d_state_in_one_sample_only_is_a_passing_io_wait():
    # the second sample: auoms and the first lvm are running again
    ps2 = "".join(
        line.replace(" Dsl ", " Ssl ").replace(" D   ", " S   ") if line.split()[0] in ("12405", "1233013") else line
        for line in FAULT.splitlines(keepends=True)
    )
    got = judged(FAULT, ps2)
    assert got[1][:2] == (FAIL, "D state")
    assert got[1][2].startswith(
        "4 processes in D state (uninterruptible) in both samples 2 s apart, running longer than 300 s: "
        "jbd2/dm-8-8 (pid 105408"
    )
    calm = FAULT.replace(" D ", " S ").replace(" Dsl ", " Ssl ")
    assert judged(FAULT, calm)[1] == (PASS, "D state", "no process stuck in D state")


def test_young_d_state_processes_are_named_but_pass():
    ps = HEADER + row(4242, 1, 0, "root", "D", 30, "dd")
    assert judged(ps, ps)[1] == (
        PASS,
        "D state",
        "no process stuck in D state (1 in D state in both samples 2 s apart, running less than 300 s)",
    )


def test_d_state_in_the_first_sample_and_no_second_is_an_error_not_a_pass_or_a_fail():
    # the probe takes the second sample whenever the first has a process in D state (issue 34, 7):
    # a capture without it was cut or forged, and one sample must not stand for two
    got = judged(FAULT, None, sample_gap_s=1)
    assert got[1] == (
        ERROR,
        "D state",
        "the first sample has 6 processes in D state but no second sample came back (it is taken whenever "
        "the first has one): not judged on one sample",
    )
    calm = FAULT.replace(" D ", " S ").replace(" Dsl ", " Ssl ")
    assert judged(calm, None, sample_gap_s=1)[1] == (PASS, "D state", "no process stuck in D state")


def test_one_sample_and_warn_only():
    got = judged(FAULT, None, sample_gap_s=0, d_state="warn", d_state_s=7200)
    assert got[1] == (
        WARN,
        "D state",
        "2 processes in D state (uninterruptible) in one sample, running longer than 7200 s: "
        "auoms (pid 12405, root, running 2h 0m), jbd2/dm-8-8 (pid 105408, root, running 23h 58m); "
        "expected none (a hung mount or driver; such a process cannot be killed)",
    )


def test_a_recording_without_elapsed_counts_every_persistent_d_state():
    ps = data("ps/derived-nvidia-docker-377-ps-aux-nvidia-smi-D-with-header.txt")
    got = judged(ps, ps)
    assert got[1][2].startswith(
        "3 processes in D state (uninterruptible) in both samples 2 s apart, running longer than 300 s: "
        "/usr/bin/nvidia-smi (pid 935, root), /usr/bin/nvidia-persistenced --user nvidia-persistenced "
        "(pid 953, nvidia-+)"
    )
    # ps aux has no UID column: users' processes cannot be judged, and that is said
    assert got[-1] == (ERROR, "leftovers", "ps printed no UID column: leftover processes not judged")


def test_zombies_older_than_the_bound_warn_then_fail():
    ps = HEADER + row(10, 1, 1001, "alice", "Z", 600, "python") + row(11, 1, 0, "root", "Z", 5, "sh")
    got = judged(ps, ps, leftovers="off")
    assert got[2] == (
        WARN,
        "zombies",
        "1 zombies older than 60 s, expected <= 0: python (pid 10, alice, running 10m 0s); parents 1 "
        "(a parent that does not reap its children)",
    )
    many = HEADER + "".join(row(100 + i, 7, 0, "root", "Z", 900, "defunct") for i in range(3))
    assert judged(many, many, zombies={"fail_above": 2, "warn_above": 0}, leftovers="off")[2][:2] == (FAIL, "zombies")


def test_load_per_cpu():
    ps = HEADER + row(1, 0, 0, "root", "Ss", 100, "systemd")
    assert judged(ps, ps, loadavg="9.00 8.50 4.00 3/900 123\n")[0] == (
        WARN,
        "load",
        "load average 9 8.5 4 on 2 CPUs (4.25 per CPU over 5 min), expected <= 2 per CPU",
    )
    assert judged(ps, ps, loadavg="9.00 8.50 4.00 3/900 123\n", load_fail_per_cpu=4)[0][0] is FAIL
    assert judged(ps, ps, cpus="")[0] == (
        ERROR,
        "load",
        "cannot read the online CPU count (getconf _NPROCESSORS_ONLN): load not judged",
    )
    assert judged(ps, ps, loadavg="")[0] == (ERROR, "load", "cannot read /proc/loadavg: load not judged")
    # load not judged: the D-state verdict comes first
    assert judged(ps, ps, load_warn_per_cpu=None)[0][1] == "D state"


def test_users_processes_outside_slurm_jobs_are_named_with_their_cgroup():
    ps = (
        HEADER
        + row(2001, 1, 1001, "alice", "Sl", 18000, "python")
        + row(2002, 2001, 1001, "alice", "Sl", 18000, "pt_main_thread")
        + row(3001, 1, 1002, "bob", "Sl", 600, "python")  # in a job (cgroup v2)
        + row(3002, 1, 1003, "carol", "S", 600, "srun")  # in a job (cgroup v1)
        + row(4001, 1, 1004, "dave", "S", 60, "tmux: server")  # allowed by name
        + row(5001, 1, 1005, "erin", "S", 60, "sleep")  # exited before its cgroup was read
        + row(6001, 1, 65534, "nobody", "S", 60, "dnsmasq")  # a daemon's uid, above UID_MAX
    )
    cgroups = (
        "2001 0::/user.slice/user-1001.slice/session-3.scope\n"
        "2002 0::/user.slice/user-1001.slice/session-3.scope\n"
        "3001 0::/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0\n"
        "3002 12:memory:/slurm/uid_1003/job_77/step_batch\n"
        "3002 0::/\n"
        "4001 0::/user.slice/user-1004.slice/session-9.scope\n"
        "6001 0::/system.slice/dnsmasq.service\n"
    )
    got = judged(ps, ps, cgroups=cgroups, allow_commands=["tmux: server"])
    assert got[3:] == [
        (
            WARN,
            "alice",
            "alice (uid 1001): 2 processes outside any Slurm job: python (pid 2001, alice, running 5h 0m) in "
            "/user.slice/user-1001.slice/session-3.scope, pt_main_thread (pid 2002, alice, running 5h 0m) in "
            "/user.slice/user-1001.slice/session-3.scope; expected none (a leftover of an earlier job, or a "
            "login outside a job; allow it with allow_users/allow_commands)",
        )
    ]
    assert judged(ps, ps, cgroups=cgroups, allow_users=["alice", "1004"], leftovers="fail")[3][:2] == (
        PASS,
        "leftovers",
    )
    assert judged(ps, ps, cgroups=cgroups, leftovers="fail")[3][:2] == (FAIL, "alice")


def test_ps_that_failed_or_cannot_be_read():
    assert judged("sh: 1: ps: not found\n", rc1=127)[1:] == [
        (ERROR, "processes", "ps exited 127: sh: 1: ps: not found")
    ]
    assert judged("", rc1=124, ps_timeout_s=5)[1:] == [
        (
            Status.TIMEOUT,
            "processes",
            "ps did not finish within 5 s (reading /proc hangs: a process stuck in the kernel?)",
        )
    ]
    out, want = probe_out("garbage\n", "garbage\n")
    with pytest.raises(ParseError, match="the first line is not a ps header naming PID"):
        list(health(out, want))


def test_params():
    with pytest.raises(ValidationError, match="load_warn_per_cpu"):
        ProcHealth(load_warn_per_cpu=5, load_fail_per_cpu=2)
    with pytest.raises(ValidationError):
        ProcHealth(sample_gap_s=60)
    with pytest.raises(ValidationError, match="uid_max"):
        ProcHealth(uid_min=5000, uid_max=1000)
    assert probes(ProcHealth())[0].argv[-3:] == ("2", "10", "1000")
    assert probes(ProcHealth())[0].name != probes(ProcHealth(uid_min=500))[0].name


@pytest.mark.parametrize(("seconds", "text"), [(42, "42 s"), (300, "5m 0s"), (3600, "1h 0m"), (4482351, "51d 21h")])
def test_age_text(seconds, text):
    assert age_text(seconds) == text


# -- issue 32, 3.1: a listing that is not whole is an ERROR, never a PASS --------------------------


def test_a_listing_cut_after_its_first_row_is_an_error_not_a_pass():
    # the D-state fault cut after systemd's row: the probe saw ps print 10 lines, 2 arrived
    cut = "".join(FAULT.splitlines(keepends=True)[:2])
    assert judged(cut, cut, lines1=printed("ps1", FAULT))[1:] == [
        (ERROR, "processes", "ps printed 10 lines, 2 arrived: the listing is not whole")
    ]
    assert judged(cut, cut, lines1="")[1:] == [
        (ERROR, "processes", "no count of the lines ps printed: the listing is not known to be whole")
    ]


def test_a_listing_of_no_process_is_an_error():
    # ps lists itself: a header alone is no listing of this node's processes
    assert judged(HEADER, HEADER)[1:] == [(ERROR, "processes", "ps listed no process (not even itself)")]


def test_numbers_no_node_has_are_not_carried_into_the_load_verdict():
    # issue 32, 3.2: 400 digits of CPUs made the load's division an OverflowError ("internal error")
    ps = HEADER + row(1, 0, 0, "root", "Ss", 100, "systemd")
    assert judged(ps, ps, cpus="9" * 400)[0] == (
        ERROR,
        "load",
        "cannot read the online CPU count (getconf _NPROCESSORS_ONLN): load not judged",
    )
    assert judged(ps, ps, cpus="9" * 5000)[0][0] is ERROR
    huge_load = "9" * 400 + ".00 8.50 4.00 3/900 123\n"
    assert judged(ps, ps, loadavg=huge_load)[0] == (ERROR, "load", "cannot read /proc/loadavg: load not judged")
    # a cgroup line of a pid no process has is not read (int() of 5000 digits raised ValueError)
    assert judged(ps, ps, cgroups="9" * 5000 + " 0::/\n")[1][0] is PASS
