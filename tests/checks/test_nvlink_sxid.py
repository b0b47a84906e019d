"""nvlink.sxid judged on the kernel-log probe's output (the same probe gpu.xid reads) wrapping the
copied SXid recordings of tests/data/dmesg-sxid. Exact statuses, subjects and messages throughout."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from nodecheck.checks.nvlink_sxid import FATAL_ACTION, SxidParams
from nodecheck.checks.nvlink_sxid import sxid as nvlink_sxid
from nodecheck.core.errors import ParseError
from nodecheck.probes.kernel_log import KERNEL_LOG
from tests.checks.kernel_log_output import (
    DMESG_DENIED,
    ERROR,
    FAIL,
    PASS,
    WARN,
    XID119,
    events_only,
    planned,
    probe_out,
    rows,
    section,
)
from tests.helpers import captures, data

NVTRUST = "dmesg-sxid/nvtrust-124-h100-ppcie-22013-nonfatal-data-severity-uptime.txt"
NVSENTINEL = "dmesg-sxid/nvsentinel-sxid-handler-test-lines-fatal-24007-soe-severity-cut.txt"
DATA_ONLY = "dmesg-sxid/gpud-pr338-decode-iso-12028-data-line-only.txt"
NOW = 1738281600  # 2025-01-31 00:00:00Z
UPTIME = "100000.00"  # boot 2025-01-29 20:13:20Z
FATAL_24007 = "0000:c3:00.0"
NOT_MARKED = "no Fatal/Non-fatal word logged for it (see the code in the Fabric Manager guide's SXid tables)"


def judge(body: str, **params) -> list:
    return events_only(nvlink_sxid(probe_out(body, now=NOW, uptime=UPTIME), SxidParams(**params)))


def test_registered_on_the_kernel_log_probe_gpu_xid_reads():
    # the same probe by name: the runner runs it once for gpu.xid, node.oom and nvlink.sxid
    assert planned("nvlink.sxid", since="24h").probes == (KERNEL_LOG,)
    assert planned("gpu.xid").probes == (KERNEL_LOG,)


def test_non_fatal_sxids_warn_once_per_switch_and_code_with_links_and_count():
    verdicts = judge(data(NVTRUST))
    assert rows(verdicts) == [
        (
            WARN,
            "NVSwitch PCI:0000:04:00.0",
            "SXid 22013 (Non-fatal) on nvswitch3 PCI:0000:04:00.0, links 44, 45, 46: Minion Link DLREQ interrupt "
            "(3x, last 2025-01-29 20:13:58Z)",
        )
    ]
    assert verdicts[0].observed == {
        "sxid": 22013,
        "fatal": False,
        "count": 3,
        "pci": "0000:04:00.0",
        "switch": "nvswitch3",
        "links": [44, 45, 46],
        "severity": None,
        "time": "2025-01-29T20:13:58.194959+00:00",
    }


def test_fatal_sxid_fails_naming_switch_code_link_and_nvidias_action():
    verdicts = judge(data(NVSENTINEL))
    fatal = [v for v in verdicts if v.status == FAIL]
    assert rows(fatal) == [
        (
            FAIL,
            f"NVSwitch PCI:{FATAL_24007}",
            f"SXid 24007 (Fatal) on nvswitch0 PCI:{FATAL_24007}, link 28: sourcetrack timeout error (First) "
            f"(1x, last 2025-01-29 20:31:48Z): {FATAL_ACTION}",
        )
    ]
    assert "reset" in FATAL_ACTION and "Fabric Manager" in FATAL_ACTION
    assert fatal[0].excerpt.endswith("24007, Fatal, Link 28 sourcetrack timeout error (First)")


def test_every_verdict_of_the_mixed_recording():
    assert rows(judge(data(NVSENTINEL))) == [
        (
            ERROR,
            "",
            "unreadable SXid line: SXid line ends before its link and message (cut short?): "
            "'nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20009, Non-fatal,'… (63 characters)",
        ),
        (
            ERROR,
            "",
            "unreadable SXid line: SXid line ends before its link and message (cut short?): "
            "'nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20009, Non-fatal,'… (65 characters)",
        ),
        (
            WARN,
            "NVSwitch PCI:0000:06:00.0",
            "SXid 20009 (Non-fatal) on nvswitch0 PCI:0000:06:00.0, link 4: "
            "RX Short Error Rate (1x, last 2025-01-30 16:35:09Z)",
        ),
        (
            WARN,
            "NVSwitch PCI:0000:c1:00.0",
            "SXid 28006 (Non-fatal) on nvswitch3 PCI:0000:c1:00.0, link 46: "
            "MC TS crumbstore MCTO (First) (1x, time unknown)",
        ),
        (
            WARN,
            "NVSwitch PCI:0000:c3:00.0",
            "SXid 12033 (not marked Fatal or Non-fatal) on nvswitch0 "
            f"PCI:0000:c3:00.0 (1x, last 2025-01-30 07:01:29Z): {NOT_MARKED}",
        ),
        (
            FAIL,
            "NVSwitch PCI:0000:c3:00.0",
            "SXid 24007 (Fatal) on nvswitch0 PCI:0000:c3:00.0, link 28: "
            f"sourcetrack timeout error (First) (1x, last 2025-01-29 20:31:48Z): {FATAL_ACTION}",
        ),
        (
            WARN,
            "NVSwitch PCI:0004:00:00.0",
            "SXid 26006 (not marked Fatal or Non-fatal) on nvswitch0 "
            f"PCI:0004:00:00.0: SOE HALT data[0] = 0x               0 (2x, time unknown): {NOT_MARKED}",
        ),
        (
            WARN,
            "NVSwitch PCI:0004:00:00.0",
            "SXid 26007 (not marked Fatal or Non-fatal) on nvswitch0 "
            f"PCI:0004:00:00.0: SOE EXTERR (1x, time unknown): {NOT_MARKED}",
        ),
        (
            WARN,
            "NVSwitch PCI:0004:00:00.0",
            "SXid 26008 (not marked Fatal or Non-fatal) on nvswitch0 "
            f"PCI:0004:00:00.0: SOE Watchdog error (1x, time unknown): {NOT_MARKED}",
        ),
    ]


def test_lone_data_line_warns_with_its_iso_time():
    assert rows(judge(data(DATA_ONLY))) == [
        (
            WARN,
            "NVSwitch PCI:0000:84:00.0",
            "SXid 12028 (not marked Fatal or Non-fatal) on nvswitch1 "
            f"PCI:0000:84:00.0 (1x, last 2025-01-25 10:34:54Z): {NOT_MARKED}",
        ),
    ]


def test_playbook_lists_override_the_drivers_word():
    verdicts = judge(data(NVSENTINEL), fail=[26008, 20009], warn=[24007], ignore=[26006, 26007, 12033, 28006])
    assert [
        (v.status, v.observed.get("sxid"), v.message.endswith("(severity set in the playbook)")) for v in verdicts
    ] == [
        (ERROR, None, False),
        (ERROR, None, False),
        (FAIL, 20009, True),
        (WARN, 24007, True),
        (FAIL, 26008, True),
    ]
    assert FATAL_ACTION not in verdicts[3].message  # a fatal the playbook downgraded does not claim the reset


def test_window_drops_old_events_and_passes_naming_window_and_source():
    # the last SXid of NVTRUST is at 2025-01-29 20:13:58Z, 27 hours before NOW
    assert rows(judge(data(NVTRUST), since="24h")) == [
        (PASS, "", "no NVSwitch SXid events in the last 24h (dmesg, 9 lines)")
    ]


def test_no_sxid_passes_since_boot_and_counts_ignored():
    assert rows(judge(data(XID119))) == [(PASS, "", "no NVSwitch SXid events since boot (dmesg, 43 lines)")]
    assert rows(judge(data(NVTRUST), ignore=[22013])) == [
        (PASS, "", "no NVSwitch SXid events since boot (dmesg, 9 lines) (3 ignored by the playbook)")
    ]


def test_journal_fallback_is_named_in_the_pass():
    out = probe_out(DMESG_DENIED, rc=1, now=NOW, uptime=UPTIME, journal=(data(XID119), 0))
    assert [v.message for v in events_only(nvlink_sxid(out, SxidParams()))] == [
        "no NVSwitch SXid events since boot (journalctl -k, 43 lines)"
    ]


def test_unreadable_log_is_an_error_never_a_pass():
    with pytest.raises(ParseError, match="could not read the kernel log"):
        list(nvlink_sxid(probe_out(DMESG_DENIED, rc=1), SxidParams()))
    with pytest.raises(ParseError, match="the kernel log is empty"):
        list(nvlink_sxid(probe_out(""), SxidParams()))
    [verdict] = nvlink_sxid(probe_out("   \n-- No entries --\n"), SxidParams())
    assert verdict.status == ERROR
    assert verdict.message.startswith("cannot read dmesg output: no line of its 2 carries a kernel timestamp")


def test_node_utc_offset_places_dmesg_T_dates():
    body = (
        "[Sat Jan 25 11:34:54 2025] nvidia-nvswitch1: SXid (PCI:0000:84:00.0): 20034, Fatal, Link 30 LTSSM Fault Up\n"
    )
    out = captures(
        KERNEL_LOG,
        f"@@nodecheck clock now={NOW} uptime={UPTIME} utc_offset=+0100\n" + section("dmesg", body),
    )
    [verdict] = events_only(nvlink_sxid(out, SxidParams()))
    assert verdict.observed["time"] == "2025-01-25T10:34:54+00:00"


def test_params_reject_a_code_in_two_lists_and_a_bad_window():
    with pytest.raises(ValidationError, match="SXid 24007 is listed under both fail and ignore"):
        SxidParams(fail=[24007], ignore=[24007])
    with pytest.raises(ValidationError, match="since must be boot or a positive duration"):
        SxidParams(since="0h")
