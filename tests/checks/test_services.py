"""services: units judged from systemctl show, or from the process list where systemd is not init."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from nodecheck.checks.services import Services, _all_units, _probes, services
from nodecheck.core.model import Status
from tests.helpers import captures, data

HEALTHY = ("loaded", "active", "running", "success", "0")


def show(units: dict[str, tuple[str, str, str, str, str]], want: Services) -> str:
    """`systemctl show --property=...` for every unit the probe asks about, in its order; units not
    given are not installed."""
    blocks = []
    for unit in _all_units(want):
        load, active, sub, result, restarts = units.get(unit, ("not-found", "inactive", "dead", "success", "0"))
        blocks.append(
            f"Id={unit}\nLoadState={load}\nActiveState={active}\nSubState={sub}\nNRestarts={restarts}\n"
            f"Result={result}\nActiveEnterTimestamp=Mon 2025-01-06 10:00:00 UTC\n"
        )
    return "\n".join(blocks)


def output(*, show_text: str | None = None, procs: str = "", nvswitch: str = "", rc: int = 0) -> str:
    text = "@@nodecheck systemd yes\n" if show_text is not None else "@@nodecheck systemd no\n"
    if show_text is not None:
        text += f"@@nodecheck begin show\n{show_text}@@nodecheck end show rc={rc}\n"
    return (
        text
        + f"@@nodecheck begin procs\n{procs}@@nodecheck end procs rc=0\n"
        + (f"@@nodecheck begin nvswitch\n{nvswitch}@@nodecheck end nvswitch rc=0\n")
    )


def judge(text: str, **params):
    want = Services(**params)
    return {v.subject: v for v in services(captures(_probes(want)[0], text), want)}


GOOD = {
    "nvidia-persistenced.service": HEALTHY,
    "slurmd.service": HEALTHY,
    "munge.service": HEALTHY,
    "chrony.service": HEALTHY,
}


def test_healthy_units_pass_and_fabric_manager_is_not_required_without_nvswitches():
    verdicts = judge(output(show_text=show(GOOD, Services())))
    assert verdicts["slurmd"].status is Status.PASS
    assert verdicts["slurmd"].message == "slurmd.service active (running) since Mon 2025-01-06 10:00:00 UTC, 0 restarts"
    time_daemon = verdicts["chronyd|chrony|systemd-timesyncd|ntpd"]
    assert time_daemon.status is Status.PASS and time_daemon.message.startswith("chrony.service active")
    assert verdicts["nvidia-fabricmanager"].message.startswith("nvidia-fabricmanager.service: not required")
    assert verdicts["docker"].message == "docker.service not installed (optional)"


def test_a_failed_fabric_manager_fails_where_nvswitches_exist():
    units = {**GOOD, "nvidia-fabricmanager.service": ("loaded", "failed", "failed", "exit-code", "0")}
    text = output(show_text=show(units, Services()), nvswitch="/dev/nvidia-nvswitch0\n/dev/nvidia-nvswitch1\n")
    v = judge(text)["nvidia-fabricmanager"]
    assert v.status is Status.FAIL
    assert v.message == (
        "nvidia-fabricmanager.service failed (failed, Result=exit-code), expected active (the node has NVSwitches)"
    )


def test_a_missing_unit_and_no_time_daemon_fail_listing_what_was_found():
    units = {k: v for k, v in GOOD.items() if k not in ("munge.service", "chrony.service")}
    verdicts = judge(output(show_text=show(units, Services())))
    assert verdicts["munge"].message == "munge.service not installed (LoadState=not-found), expected active"
    v = verdicts["chronyd|chrony|systemd-timesyncd|ntpd"]
    assert v.status is Status.FAIL and v.message.endswith(
        "ntpd.service not installed (LoadState=not-found), expected one of them active"
    )


def test_restarts_warn_then_fail_as_flapping_and_auto_restart_is_named():
    units = {
        **GOOD,
        "slurmd.service": ("loaded", "active", "running", "success", "1"),
        "munge.service": ("loaded", "active", "running", "success", "7"),
        "nvidia-persistenced.service": ("loaded", "activating", "auto-restart", "exit-code", "2"),
    }
    verdicts = judge(output(show_text=show(units, Services())))
    assert verdicts["slurmd"].status is Status.WARN and "restarted 1 times" in verdicts["slurmd"].message
    assert verdicts["munge"].status is Status.FAIL and verdicts["munge"].message.endswith(
        "restarted 7 times by systemd (NRestarts), expected <= 3: it crashed and came back, flapping"
    )
    assert verdicts["nvidia-persistenced"].message.startswith(
        "nvidia-persistenced.service activating (auto-restart, Result=exit-code): crashed and waiting"
    )


def test_a_forbidden_unit_running_fails():
    want = Services(forbidden=["nvidia-dcgm"])
    units = {**GOOD, "nvidia-dcgm.service": HEALTHY}
    v = judge(output(show_text=show(units, want)), forbidden=["nvidia-dcgm"])["nvidia-dcgm"]
    assert (v.status, v.message) == (
        Status.FAIL,
        "nvidia-dcgm.service active (running), expected not running (forbidden)",
    )


def test_a_real_recording_of_an_old_systemd_without_nrestarts_is_judged_without_it():
    redis = data("systemctl-show/tsuyopon-memo-redis-centos7-failed-exit-code-no-nrestarts.txt")
    apache = data("systemctl-show/server-eyes-apache2-active-running-nrestarts-0.txt")
    text = output(show_text=apache + "\n" + redis)
    verdicts = judge(text, required=["apache2", "redis"], with_nvswitch=[], optional=[])
    assert verdicts["apache2"].status is Status.PASS
    assert verdicts["redis"].message == "redis.service failed (failed, Result=exit-code), expected active"


def test_unreadable_or_short_systemctl_output_is_an_error():
    verdicts = judge(output(show_text="Failed to connect to bus: No such file or directory\n", rc=1))
    assert [v.status for v in verdicts.values()] == [Status.ERROR, Status.PASS]  # + fabric manager not needed
    assert (
        verdicts[""].message == "cannot read systemctl show: not a KEY=VALUE line: "
        "'Failed to connect to bus: No such file or directory'"
    )
    hung = judge(output(show_text="", rc=124))
    assert hung[""].message == "systemctl show timed out after 10 s (systemd not answering)"
    [v] = list(judge("@@nodecheck systemd yes\n").values())
    assert (v.status, v.message) == (Status.ERROR, "the services probe's output was cut off")


# --- no systemd: the simulated cluster's case --------------------------------------------------


SIM = "101\tsame\t0\tnvidia-persiste\n102\tsame\t106\tmunged\n103\tsame\t107\tchronyd\n104\tsame\t0\tslurmd\n"


def test_without_systemd_the_process_list_in_this_mount_namespace_is_judged_and_said():
    verdicts = judge(output(procs=SIM))
    v = verdicts["nvidia-persistenced"]
    assert (v.status, v.message) == (
        Status.PASS,
        "nvidia-persistenced running (pid 101; no systemd: judged by process list)",
    )
    assert verdicts["chronyd|chrony|systemd-timesyncd|ntpd"].status is Status.PASS


def test_a_killed_daemon_fails_naming_the_unit_even_when_other_nodes_run_it():
    procs = SIM.replace("104\tsame\t0\tslurmd\n", "") + "204\tother\t0\tslurmd\n304\tother\t0\tslurmd\n"
    v = judge(output(procs=procs))["slurmd"]
    assert v.status is Status.FAIL
    assert v.message == (
        "slurmd.service not running: no process named slurmd on this node; 2 process(es) of that name run in "
        "other mount namespaces (other nodes' or containers', pid 204, 304), expected running "
        "(no systemd: judged by process list)"
    )


def test_a_users_process_named_like_a_stopped_daemon_does_not_stand_in_for_it():
    # any process may call itself "munged" (prctl PR_SET_NAME): a job's user must not pass the check
    procs = SIM.replace("102\tsame\t106\tmunged", "102\tsame\t4242\tmunged") + "103\tsame\t?\tmunged\n"
    v = judge(output(procs=procs))["munge"]
    assert v.status is Status.FAIL
    assert v.message == (
        "munge.service not running: no process named munged of root or a system account on this node; 2 "
        "process(es) of that name run as a user account (uid 4242, unknown, pid 102, 103), not the daemon, "
        "expected running (no systemd: judged by process list)"
    )


def test_a_forbidden_daemon_counts_whoever_runs_it():
    procs = SIM + "105\tsame\t4242\tnv-hostengine\n"
    v = judge(output(procs=procs), forbidden=["nvidia-dcgm"])["nvidia-dcgm"]
    assert v.status is Status.FAIL and "pid 105" in v.message


def test_a_process_whose_namespace_cannot_be_read_is_an_error_not_a_pass():
    procs = SIM.replace("102\tsame\t106\tmunged", "102\tunknown\t106\tmunged")
    v = judge(output(procs=procs))["munge"]
    assert v.status is Status.ERROR and "could not be read (pid 102; is nodecheck running as root?)" in v.message


@pytest.mark.parametrize("bad", ["slurmd;reboot", "a b", "*", "-x", "chronyd|", "sl$urm"])
def test_unit_names_that_could_reach_a_shell_are_refused(bad):
    with pytest.raises(ValidationError):
        Services(required=[bad])


def test_the_probe_name_differs_per_unit_list():
    assert _probes(Services())[0].name != _probes(Services(forbidden=["nvidia-dcgm"]))[0].name
