"""systemctl show: every recording read to its units' states; the services probe's process list."""

from __future__ import annotations

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.systemctl import Process, parse_process_list, parse_systemctl_show
from tests.helpers import data, data_files

# file -> [(Id, LoadState, ActiveState, SubState, Result, NRestarts, ActiveEnterTimestamp)]
EXPECTED = {
    "insights-core-four-targets-no-trailing-newline.txt": [
        ("network.target", "loaded", "active", "active", None, None, "Tue 2020-02-25 10:39:46 GMT"),
        ("swap.target", "loaded", "active", "active", None, None, "Tue 2020-02-25 10:39:35 GMT"),
        ("paths.target", "loaded", "active", "active", None, None, "Tue 2020-02-25 10:39:38 GMT"),
        ("sockets.target", "loaded", "active", "active", None, None, "Tue 2020-02-25 10:39:38 GMT"),
    ],
    "server-eyes-apache2-active-running-nrestarts-0.txt": [
        ("apache2.service", "loaded", "active", "running", "success", 0, "Wed 2022-03-09 11:53:44 UTC")
    ],
    "tsuyopon-memo-redis-centos7-failed-exit-code-no-nrestarts.txt": [
        ("redis.service", "loaded", "failed", "failed", "exit-code", None, "Wed 2019-12-04 08:39:56 JST")
    ],
}


@pytest.mark.parametrize("path", data_files("systemctl-show"))
def test_every_recording_reads_to_its_units(path):
    units = parse_systemctl_show(data(path))
    assert [
        (u.id, u.load_state, u.active_state, u.sub_state, u.result, u.n_restarts, u.active_enter) for u in units
    ] == EXPECTED[path.split("/", 1)[1]]


def test_the_state_words_a_message_uses():
    [redis] = parse_systemctl_show(data("systemctl-show/tsuyopon-memo-redis-centos7-failed-exit-code-no-nrestarts.txt"))
    assert (redis.state, redis.active, redis.installed) == ("failed (failed, Result=exit-code)", False, True)


def test_the_probes_restricted_output_with_a_missing_unit():
    text = (
        "Id=slurmd.service\nLoadState=loaded\nActiveState=active\nSubState=running\nNRestarts=2\nResult=success\n"
        "ActiveEnterTimestamp=Mon 2025-01-06 10:00:00 UTC\n\n"
        "Id=nvidia-fabricmanager.service\nLoadState=not-found\nActiveState=inactive\nSubState=dead\n"
        "NRestarts=0\nResult=success\nActiveEnterTimestamp=\n"
    )
    slurmd, fm = parse_systemctl_show(text)
    assert (slurmd.n_restarts, slurmd.active) == (2, True)
    assert (fm.installed, fm.active_enter) == (False, None)


@pytest.mark.parametrize(
    "text, reason",
    [
        ("", "no unit"),
        ("System has not been booted with systemd as init system (PID 1). Can't operate.\n", "not a KEY=VALUE"),
        ("Failed to get properties: Access denied\n", "not a KEY=VALUE"),
        ("Id=slurmd.service\nLoadState=loaded\n", "no ActiveState, SubState"),
        ("Id=slurmd.service\nLoadState=loaded\nActiveState=active\nSubState=running\nNRestarts=x\n", "NRestarts"),
    ],
)
def test_garbage_and_truncated_output_raise(text, reason):
    with pytest.raises(ParseError) as e:
        parse_systemctl_show(text)
    assert reason in e.value.reason


def test_process_lines_that_do_not_read_are_skipped_not_fatal():
    text = (
        "42\tsame\t0\tslurmd\n43\tother\t0\tslurmd\nevil\tname\n44\tunknown\t?\tmunged\n45\tsame\t0\t\n"
        "46\tsame\tslurmd\n47\tsame\t-1\tmunged\n"  # no uid (the old form), a uid that is no number
    )
    assert parse_process_list(text) == [
        Process(42, "same", 0, "slurmd"),
        Process(43, "other", 0, "slurmd"),
        Process(44, "unknown", None, "munged"),
    ]


@pytest.mark.parametrize("restarts", ["²", "9" * 5000, "9" * 400, "\u0661\u0662"], ids=["²", "5000", "400", "١٢"])
def test_a_restart_count_no_systemd_prints_is_a_parse_error(restarts):
    # "²" and 5000 digits raised ValueError (str.isdigit() then int()); "١٢" read as 12
    text = f"Id=slurmd.service\nLoadState=loaded\nActiveState=active\nSubState=running\nNRestarts={restarts}\n"
    with pytest.raises(ParseError, match=r"NRestarts=.* is not a count"):
        parse_systemctl_show(text)


@pytest.mark.parametrize("pid", ["²", "9" * 5000, "9" * 21], ids=["²", "5000", "21 digits"])
def test_a_process_line_with_a_pid_no_kernel_prints_is_skipped(pid):
    # "²" and 5000 digits raised ValueError: a process could not plant such a line, but the probe's
    # output could arrive garbled; either way it is not a process to count
    assert parse_process_list(f"{pid}\tsame\t0\tslurmd\n42\tsame\t0\tslurmd\n") == [Process(42, "same", 0, "slurmd")]
