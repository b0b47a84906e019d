"""gpu.xid judged on the kernel-log probe's output: the node's clock line, then a dmesg (or journal)
section wrapping copied corpus text (tests/checks/kernel_log_output.py); and how far back the log
must reach for "no events" to mean something. Exact statuses, subjects and messages throughout."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from nodecheck.checks.gpu_xid import XidParams
from nodecheck.checks.gpu_xid import xid as gpu_xid
from tests.checks.kernel_log_output import (
    ERROR,
    FAIL,
    NVLINK,
    OFF_BUS,
    PASS,
    THREE_DAYS_LATER,
    WARN,
    XID13,
    XID119,
    probe_out,
    rows,
    xid,
)
from tests.helpers import data

# -- gpu.xid ----------------------------------------------------------------------------------------


def test_xid_119_fails_with_code_pci_count_time_and_pid():
    verdicts = xid(probe_out(data(XID119)))
    assert rows(verdicts) == [
        (
            FAIL,
            "PCI:0000:9b:00",
            "Xid 119 on PCI:0000:9b:00: GSP RPC timeout (5x, last 2025-02-23 16:30:13Z, pid 1240590 gpud)",
        )
    ]
    assert verdicts[0].observed == {
        "xid": 119,
        "count": 5,
        "pci": "0000:9b:00",
        "pid": 1240590,
        "process": "gpud",
        "time": "2025-02-23T16:30:13+00:00",
    }
    assert verdicts[0].expected == {"xid": None}
    # the excerpt is the last three events' raw lines
    assert [line[:71] for line in verdicts[0].excerpt.splitlines()] == [
        "[Sun Feb 23 16:24:30 2025] NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380",
        "[Sun Feb 23 16:27:12 2025] NVRM: Xid (PCI:0000:9b:00): 119, pid=1263500",
        "[Sun Feb 23 16:30:13 2025] NVRM: Xid (PCI:0000:9b:00): 119, pid=1240590",
    ]


def test_xid_13_and_43_warn_as_application_faults_with_counts():
    assert rows(xid(probe_out(data(XID13)))) == [
        (
            WARN,
            "PCI:0000:38:00",
            "Xid 13 on PCI:0000:38:00: graphics engine exception (usually an application "
            "fault) (16x, last 2025-01-21 04:41:44Z)",
        ),
        (
            WARN,
            "PCI:0000:38:00",
            "Xid 43 on PCI:0000:38:00: GPU stopped processing: channel reset after an "
            "application fault (1x, last 2025-01-21 04:41:44Z, pid 2924364 pt_main_thread)",
        ),
    ]


def test_xid_the_node_utc_offset_places_dmesg_T_local_times():
    [verdict] = xid(probe_out(data(XID119), offset="+0100"))
    assert verdict.message == (
        "Xid 119 on PCI:0000:9b:00: GSP RPC timeout (5x, last 2025-02-23 15:30:13Z, pid 1240590 gpud)"
    )


def test_xid_lost_gpu_message_is_an_inferred_79():
    # "[ 1843.308145]" seconds since boot, placed from the node's clock: now - uptime + 1843.308145
    assert rows(xid(probe_out(data(OFF_BUS), uptime="5000.00"))) == [
        (
            FAIL,
            "PCI:0000:b3:00",
            "Xid 79 on PCI:0000:b3:00: GPU has fallen off the bus (from the kernel's "
            "message; no Xid line) (1x, last 2025-02-23 15:38:23Z)",
        )
    ]


def test_xid_playbook_overrides_fail_warn_and_ignore():
    assert rows(xid(probe_out(data(XID13)), fail=[13], ignore=[43])) == [
        (
            FAIL,
            "PCI:0000:38:00",
            "Xid 13 on PCI:0000:38:00: graphics engine exception (usually an application "
            "fault) (severity set in the playbook) (16x, last 2025-01-21 04:41:44Z)",
        )
    ]
    assert rows(xid(probe_out(data(XID119)), warn=[119])) == [
        (
            WARN,
            "PCI:0000:9b:00",
            "Xid 119 on PCI:0000:9b:00: GSP RPC timeout (severity set in the playbook) "
            "(5x, last 2025-02-23 16:30:13Z, pid 1240590 gpud)",
        )
    ]


def test_xid_all_events_ignored_pass_and_say_so():
    assert rows(xid(probe_out(data(XID13)), ignore=[13, 43])) == [
        (PASS, "", "no Xid events since boot (dmesg, 17 lines) (17 ignored by the playbook)")
    ]


@pytest.mark.parametrize(
    "params",
    [
        {"fail": [13], "ignore": [13]},
        {"warn": [119], "fail": [119]},
        {"since": "2w"},
        {"since": "24 h"},
        {"fail": ["x"]},
        {"window": "24h"},
    ],
)
def test_xid_params_are_validated(params):
    with pytest.raises(ValidationError):
        XidParams.model_validate(params)


def test_xid_a_code_in_two_lists_names_both():
    with pytest.raises(ValidationError, match="Xid 13 is listed under both fail and ignore"):
        XidParams(fail=[13], ignore=[13])


def test_xid_window_excludes_events_older_than_since():
    assert rows(xid(probe_out(data(XID119), now=THREE_DAYS_LATER), since="24h")) == [
        (PASS, "", "no Xid events in the last 24h (dmesg, 43 lines)")
    ]
    assert [v.status for v in xid(probe_out(data(XID119)), since="24h")] == [FAIL]
    # since boot: the same old events still count
    assert [v.status for v in xid(probe_out(data(XID119), now=THREE_DAYS_LATER))] == [FAIL]


def test_xid_events_with_unknown_time_count_in_any_window():
    verdicts = xid(probe_out(data(XID119) + data(NVLINK), now=THREE_DAYS_LATER), since="24h")
    assert rows(verdicts) == [
        (FAIL, "PCI:0018:01:00", "Xid 145 on PCI:0018:01:00: NVLink RLW error (1x, time unknown)"),
        (FAIL, "PCI:0000:00:00", "Xid 149 on PCI:0000:00:00: NVLink NETIR error (1x, time unknown)"),
        (FAIL, "PCI:0019:01:00", "Xid 149 on PCI:0019:01:00: NVLink NETIR error (1x, time unknown)"),
    ]


def test_xid_without_the_clock_line_every_event_counts():
    verdicts = xid(probe_out(data(XID13), clock=False), since="30m")
    assert [(v.status, v.observed["xid"], v.observed["count"]) for v in verdicts] == [(WARN, 13, 16), (WARN, 43, 1)]


def test_xid_unreadable_line_is_an_error_not_a_pass():
    verdicts = xid(probe_out("[ 12.000000] NVRM: Xid (PCI:0000:9b:00): 11\n"))
    assert rows(verdicts) == [
        (
            ERROR,
            "",
            "unreadable Xid line: Xid line ends before its message (cut short?): 'NVRM: Xid (PCI:0000:9b:00): 11'",
        )
    ]
    assert verdicts[0].excerpt == "[ 12.000000] NVRM: Xid (PCI:0000:9b:00): 11"
    # next to readable events, both are reported
    mixed = xid(probe_out(data(XID13) + "[ 12.000000] NVRM: Xid (PCI:0000:9b:00): 11\n"))
    assert [v.status for v in mixed] == [ERROR, WARN, WARN]


def test_xid_kernel_log_without_xid_passes_with_its_size():
    text = data("scenarios/derived-dmesg-T-nvrm-gpu-at-no-xid.txt")
    [verdict] = xid(probe_out(text))
    assert (verdict.status, verdict.message, verdict.observed) == (
        PASS,
        "no Xid events since boot (dmesg, 2 lines)",
        {"xids": 0, "lines": 2},
    )


# -- how far back the log reaches -----------------------------------------------------------------


def test_a_log_that_starts_long_after_boot_warns_that_older_events_are_unseen():
    # the fallen-off-the-bus excerpt starts 1843 s after boot: a wrapped ring buffer looks like this
    out = probe_out(data(OFF_BUS), uptime="300.00")
    [coverage] = [v for v in gpu_xid(out, XidParams()) if v.subject == "kernel log"]
    assert coverage.status is WARN
    assert coverage.message.startswith(
        "dmesg reaches back only to 2025-02-23 16:56:43Z, but the window "
        "starts 2025-02-23 16:26:00Z (since boot): older events are not seen"
    )


def test_a_log_that_reaches_the_window_start_gives_no_coverage_warning():
    # -T stamps from 16:24:18 with boot at 16:26:00: the log covers the whole boot
    out = probe_out(data(XID119), uptime="300.00")
    assert [v for v in gpu_xid(out, XidParams()) if v.subject == "kernel log"] == []
    # a 5 min window (from 16:26:00) is covered; so is a 1 h one: it reaches back before this boot,
    # and no log of this boot can hold anything from before it
    assert [v for v in gpu_xid(out, XidParams(since="5m")) if v.subject == "kernel log"] == []
    assert [v for v in gpu_xid(out, XidParams(since="1h")) if v.subject == "kernel log"] == []
    # up for 2 h (boot 14:31): a 1 h window starts 15:31, the log only at 16:24
    longer = probe_out(data(XID119), uptime="7200.00")
    [partial] = [v for v in gpu_xid(longer, XidParams(since="1h")) if v.subject == "kernel log"]
    assert partial.status is WARN and "(in the last 1h)" in partial.message
    assert "the ring buffer wrapped" in partial.message


@pytest.mark.parametrize("since", ["0s", "0h", "-1h", "24"])
def test_since_must_be_a_positive_duration(since):
    with pytest.raises(ValidationError, match="positive duration"):
        XidParams(since=since)
