"""node.oom judged on the kernel-log probe's output (tests/checks/kernel_log_output.py): OOM kills
per process within the window. Exact statuses, subjects and messages throughout."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from nodecheck.checks.node import OomParams
from tests.checks.kernel_log_output import (
    AFTER_OOM,
    ERROR,
    FAIL,
    OOM_EL7,
    OOM_SYSLOG,
    PASS,
    WARN,
    XID13,
    oom,
    probe_out,
    rows,
    xid,
)
from tests.helpers import data

# -- node.oom -----------------------------------------------------------------------------------------


def test_oom_since_boot_warns_per_process_with_counts():
    verdicts = oom(probe_out(data(OOM_SYSLOG), now=AFTER_OOM), since="boot")
    assert rows(verdicts) == [
        (
            WARN,
            "python3",
            "OOM killed python3 2x since boot (last 2025-05-15 23:09:30Z, pid 15783, global), expected none",
        ),
        (
            WARN,
            "(resolved)",
            "OOM killed (resolved) 2x since boot (last 2025-05-15 23:09:30Z, pid 15934, global), expected none",
        ),
    ]
    assert (verdicts[0].observed, verdicts[0].expected) == (
        {"oom_kills": 2, "process": "python3", "pid": 15783},
        {"oom_kills": 0},
    )


def test_oom_default_window_is_24h():
    assert [v.message for v in oom(probe_out(data(OOM_SYSLOG), now=AFTER_OOM))] == [
        "OOM killed python3 2x in the last 24h (last 2025-05-15 23:09:30Z, pid 15783, global), expected none",
        "OOM killed (resolved) 2x in the last 24h (last 2025-05-15 23:09:30Z, pid 15934, global), expected none",
    ]
    assert rows(oom(probe_out(data(OOM_SYSLOG), now=AFTER_OOM + 7 * 86400))) == [
        (PASS, "", "no OOM kills in the last 24h (dmesg, 9 lines)")
    ]


def test_oom_status_fail_and_cgroup_scope():
    assert rows(oom(probe_out(data(OOM_EL7)), since="boot", status="fail")) == [
        (FAIL, "java", "OOM killed java 1x since boot (last 2017-12-07 00:05:15Z, pid 28438, cgroup), expected none")
    ]


def test_oom_none_passes():
    assert rows(oom(probe_out(data(XID13)))) == [(PASS, "", "no OOM kills in the last 24h (dmesg, 17 lines)")]


@pytest.mark.parametrize("params", [{"status": "error"}, {"status": "off"}, {"since": "yesterday"}])
def test_oom_params_are_validated(params):
    with pytest.raises(ValidationError):
        OomParams.model_validate(params)


def test_an_unreadable_oom_line_is_an_oom_error_not_an_xid_error():
    line = "May 15 23:09:30 host kernel: [  518.050606] Out of memory: Killed process 1235 (python3)\n"
    out = probe_out(data(OOM_SYSLOG).split("\n")[0] + "\n" + line, now=AFTER_OOM, uptime="600.00")
    assert [(v.status, v.message.split(":")[0]) for v in oom(out, since="boot")] == [
        (ERROR, "unreadable OOM kill line"),
        (WARN, "OOM killed python3 1x since boot (last 2025-05-15 23"),
    ]
    assert [v.status for v in xid(out)] == [PASS]
