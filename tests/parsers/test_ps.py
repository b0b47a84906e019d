"""ps listings read by their header: every recording under tests/data/ps, elapsed-time forms, and
output that is no ps listing."""

from __future__ import annotations

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.ps import parse_elapsed, parse_ps
from tests.helpers import data, data_files

# per file: (process count, header words, first process (pid, state, ppid, uid, user, elapsed_s, command),
#            the processes in D state as (pid, state, command))
EXPECTED = {
    "ps/centreon-plugins-1438-ps-elapsed-ddhhmmss-comm-args-truncated.txt": (
        22,
        ("ELAPSED", "PID", "PPID", "S", "COMMAND", "COMMAND"),
        (1, "S", 0, None, None, 51 * 86400 + 21 * 3600 + 5 * 60 + 51, "systemd"),
        [],
    ),
    "ps/derived-azure-local-csi-153-h100-lvm-D-probe-columns.txt": (
        9,
        ("PID", "PPID", "UID", "USER", "STAT", "ELAPSED", "COMMAND"),
        (1, "Ss", 0, 0, "root", 86400, "systemd"),
        [
            (12405, "Dsl", "auoms"),
            (105408, "D", "jbd2/dm-8-8"),
            (1233013, "D", "lvm"),
            (1233429, "D", "lvm"),
            (1233747, "D", "lvm"),
            (1234598, "D", "lvm"),
        ],
    ),
    "ps/derived-nvidia-docker-377-ps-aux-nvidia-smi-D-with-header.txt": (
        3,
        ("USER", "PID", "%CPU", "%MEM", "VSZ", "RSS", "TTY", "STAT", "START", "TIME", "COMMAND"),
        (935, "D", None, None, "root", None, "/usr/bin/nvidia-smi"),
        [
            (935, "D", "/usr/bin/nvidia-smi"),
            (953, "Ds", "/usr/bin/nvidia-persistenced --user nvidia-persistenced"),
            (1368, "Dsl", "/usr/bin/nvidia-docker-plugin -s /var/lib/nvidia-docker"),
        ],
    ),
    "ps/devbox-procps-4.0.2-probe-columns-pid-namespace.txt": (
        5,
        ("PID", "PPID", "UID", "USER", "STAT", "ELAPSED", "COMMAND"),
        (1, "S", 0, 0, "root", 1, "sh"),
        [],
    ),
    "ps/raspberrypi-linux-1777-ps-ax-init-Ds-truncated.txt": (
        33,
        ("PID", "TTY", "STAT", "TIME", "COMMAND"),
        (1, "Ds", None, None, None, None, "/sbin/init nofsck noswap"),
        [(1, "Ds", "/sbin/init nofsck noswap")],
    ),
}


def test_every_recording_has_expectations():
    assert sorted(EXPECTED) == data_files("ps")


@pytest.mark.parametrize("path", data_files("ps"))
def test_recordings(path):
    count, columns, first, d_state = EXPECTED[path]
    table = parse_ps(data(path))
    assert len(table.processes) == count
    assert table.columns == columns
    p = table.processes[0]
    assert (p.pid, p.state, p.ppid, p.uid, p.user, p.elapsed_s, p.command) == first
    assert [(p.pid, p.state, p.command) for p in table.processes if p.code == "D"] == d_state


def test_two_command_columns_take_comm_and_keep_the_line():
    table = parse_ps(data("ps/centreon-plugins-1438-ps-elapsed-ddhhmmss-comm-args-truncated.txt"))
    rcu = table.processes[6]
    assert (rcu.pid, rcu.code, rcu.command) == (9, "R", "rcu_sched")
    assert rcu.raw.endswith("[rcu_sched]")
    assert table.has("elapsed") and table.has("ppid") and not table.has("uid")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("4711", 4711), ("05:09", 309), ("02:03:04", 7384), ("51-21:05:51", 4482351), ("1-00:00:00", 86400)],
)
def test_elapsed_forms(text, seconds):
    assert parse_elapsed(text) == seconds


@pytest.mark.parametrize("text", ["5:61", "1-2", "abc", "-3", ""])
def test_elapsed_garbage(text):
    with pytest.raises(ValueError):
        parse_elapsed(text)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty output: no header, no process"),
        ("root 935 D nvidia-smi\n", "the first line is not a ps header naming PID: 'root 935 D nvidia-smi'"),
        ("  PID TTY TIME CMD\n    1 ?   0:01 init\n", "no process state column (STAT or S) in the header"),
        ("    PID S ELAPSED COMMAND\n      1 S 5\n", "line 2 has 3 of 4 columns (cut off?)"),
        ("    PID S COMMAND\n      x S init\n", "line 2: PID 'x' is not a number"),
        ("    PID S COMMAND\n      1 Q init\n", "line 2: not a process state: 'Q'"),
        ("    PID S ELAPSED COMMAND\n      1 S 1:99 init\n", "line 2: not an elapsed time: '1:99'"),
    ],
)
def test_not_a_listing(text, reason):
    with pytest.raises(ParseError) as caught:
        parse_ps(text)
    assert (caught.value.tool, caught.value.reason) == ("ps", reason)


@pytest.mark.parametrize("column", ["PID", "ELAPSED"])
def test_a_number_no_process_has_is_a_parse_error(column):
    # issue 32, 3.2: no PID, uid or age has 400 digits; int() of 5000 raised ValueError
    for digits in (400, 5000):
        big = "9" * digits
        row = f"{big} S 5 init\n" if column == "PID" else f"1 S {big} init\n"
        with pytest.raises(ParseError, match="line 2: "):
            parse_ps("    PID S ELAPSED COMMAND\n" + row)
