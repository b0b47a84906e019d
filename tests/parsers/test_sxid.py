"""parse_sxids on every copied NVSwitch SXid recording with exact events, plus the cut and garbled lines."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from nodecheck.parsers.sxid import SxidEvent, parse_sxids
from tests.helpers import data, data_files

UTC = timezone.utc
NOW = datetime(2025, 2, 1, tzinfo=UTC)
UPTIME_S = 100000.0  # boot 2025-01-30T20:13:20Z
BOOT = NOW - timedelta(seconds=UPTIME_S)


def after_boot(seconds: float) -> datetime:
    return BOOT + timedelta(seconds=seconds)


def brief(e: SxidEvent) -> tuple:
    return (e.code, e.pci, e.switch, e.fatal, e.link, e.message, e.severity, e.time)


DLREQ = "Minion Link DLREQ interrupt"
EXPECTED = {
    "dmesg-sxid/gpud-pr338-decode-iso-12028-data-line-only.txt": (
        # a lone Data line: the error happened, its Fatal/Non-fatal word is not in the excerpt
        [(12028, "0000:84:00.0", "nvswitch1", None, None, "", None, datetime(2025, 1, 25, 10, 34, 54, 859532, UTC))],
        [],
    ),
    "dmesg-sxid/nvsentinel-sxid-handler-test-lines-fatal-24007-soe-severity-cut.txt": (
        [
            # "[123]" has no fraction: not a dmesg stamp, so no time
            (28006, "0000:c1:00.0", "nvswitch3", False, 46, "MC TS crumbstore MCTO (First)", None, None),
            (20009, "0000:06:00.0", "nvswitch0", False, 4, "RX Short Error Rate", None, after_boot(73309.599396)),
            (
                24007,
                "0000:c3:00.0",
                "nvswitch0",
                True,
                28,
                "sourcetrack timeout error (First)",
                None,
                after_boot(1108.858286),
            ),
            (26008, "0004:00:00.0", "nvswitch0", None, None, "SOE Watchdog error", None, None),
            (26006, "0004:00:00.0", "nvswitch0", None, None, "SOE HALTED", None, None),
            (26007, "0004:00:00.0", "nvswitch0", None, None, "SOE EXTERR", None, None),
            (26006, "0004:00:00.0", "nvswitch0", None, None, "SOE HALT data[0] = 0x               0", None, None),
            # a Severity line with no headline for 0000:c3:00.0 / 12033 in the log
            (12033, "0000:c3:00.0", "nvswitch0", None, None, "", 1, after_boot(38889.018130)),
        ],
        ["20009, Non-fatal, Li", "20009, Non-fatal, Link"],
    ),
    "dmesg-sxid/nvtrust-124-h100-ppcie-22013-nonfatal-data-severity-uptime.txt": (
        [
            # Data lines belong to their headline; the Severity line after each headline is its severity
            (22013, "0000:04:00.0", "nvswitch3", False, 44, DLREQ, 0, after_boot(38.178720)),
            (22013, "0000:04:00.0", "nvswitch3", False, 45, DLREQ, 0, after_boot(38.187830)),
            (22013, "0000:04:00.0", "nvswitch3", False, 46, DLREQ, None, after_boot(38.194959)),
        ],
        [],
    ),
}


def test_every_recording_has_expectations():
    assert sorted(EXPECTED) == data_files("dmesg-sxid")


@pytest.mark.parametrize("path", data_files("dmesg-sxid"))
def test_recording(path):
    log = parse_sxids(data(path), now=NOW, uptime_s=UPTIME_S)
    events, cut = EXPECTED[path]
    assert [brief(e) for e in log.events] == events
    assert [u.raw.split("): ", 1)[1] for u in log.unreadable] == cut
    assert all(u.kind == "sxid" and "cut short" in u.reason for u in log.unreadable)


def test_headline_raw_carries_its_severity_line():
    log = parse_sxids(data("dmesg-sxid/nvtrust-124-h100-ppcie-22013-nonfatal-data-severity-uptime.txt"))
    assert log.events[0].raw.splitlines() == [
        "[   38.178720] nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Non-fatal, Link 44 " + DLREQ,
        "[   38.180708] nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Severity 0 Engine instance 44 "
        "Sub-engine instance 00",
    ]
    assert log.events[0].time is None  # no clock given: uptime stamps cannot be placed


def test_journal_and_syslog_prefixes_and_local_time():
    text = (
        "2025-01-25T10:34:54+0000 node7 kernel: nvidia-nvswitch2: SXid (PCI:0000:0b:00.0): 12028, Fatal, "
        "Link 32 egress non-posted PRIV error (First)\n"
        "Jan 25 11:40:00 node7 kernel: [  518.050606] nvidia-nvswitch2: SXid (PCI:0000:0B:00.0): 20034, Fatal, "
        "Link 30 LTSSM Fault Up\n"
    )
    log = parse_sxids(text, now=NOW, utc_offset_s=3600)
    assert [brief(e) for e in log.events] == [
        (
            12028,
            "0000:0b:00.0",
            "nvswitch2",
            True,
            32,
            "egress non-posted PRIV error (First)",
            None,
            datetime(2025, 1, 25, 10, 34, 54, tzinfo=UTC),
        ),
        (
            20034,
            "0000:0b:00.0",
            "nvswitch2",
            True,
            30,
            "LTSSM Fault Up",
            None,
            datetime(2025, 1, 25, 10, 40, tzinfo=UTC),
        ),
    ]


def test_fatal_without_a_link():
    [event] = parse_sxids("nvidia-nvswitch0: SXid (PCI:0000:00:00.0): 11001, Fatal, ingress invalid command\n").events
    assert (event.fatal, event.link, event.message) == (True, None, "ingress invalid command")


@pytest.mark.parametrize(
    "line, reason",
    [
        ("nvidia-nvswitch3: SXid (PCI:0000:c1:00.0): garbled, Fatal", "without a readable PCI address and code"),
        ("nvidia-nvswitch3: SXid (PCI:0000:c1:00): 12028, Fatal, Link 1 x", "without a readable PCI address and code"),
        ("[ 5.000000] nvidia-nvswitch3: SXid (PCI:0000:c1:00.0): 2202", "ends at its code (cut short?)"),
        ("nvidia-nvswitch3: SXid (PCI:0000:c1:00.0): 22013, Fatal,", "ends before its link and message"),
        # issue 32: int() of 5000 digits raised ValueError; 400 digits were read as a code, link, severity
        ("nvidia-nvswitch3: SXid (PCI:0000:c1:00.0): " + "9" * 5000 + ", Fatal, x", "SXid code is not a count"),
        (
            "nvidia-nvswitch3: SXid (PCI:0000:c1:00.0): 22013, Fatal, Link " + "9" * 400 + " x",
            "SXid link is not a count",
        ),
        (
            "nvidia-nvswitch3: SXid (PCI:0000:c1:00.0): 22013, Severity " + "9" * 400 + " Engine",
            "SXid severity is not a count",
        ),
    ],
)
def test_unreadable_sxid_lines_are_kept_not_dropped(line, reason):
    log = parse_sxids(line + "\n")
    assert log.events == ()
    [bad] = log.unreadable
    assert (bad.raw, bad.kind) == (line, "sxid")
    assert reason in bad.reason


def test_text_without_sxids_has_no_events():
    log = parse_sxids(data("dmesg-xid/gpud-xid119-gsp-rpc-timeout-dmesg-T-xe9680.txt"))
    assert (log.events, log.unreadable) == ((), ())


def test_now_must_be_timezone_aware():
    with pytest.raises(ValueError, match="timezone-aware"):
        parse_sxids("", now=datetime(2025, 1, 1))
