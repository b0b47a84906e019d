"""chronyc tracking: every recording read to its leap status, offset (signed) and root distance."""

from __future__ import annotations

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.chrony import ChronyTracking, DaemonDown, parse_chronyc_tracking
from tests.helpers import data, data_files

# file -> (synchronised, System time in seconds (+ fast), root delay, root dispersion, reference)
EXPECTED = {
    "ag6qr-stratum1-pps-normal-72ns-fast.txt": (True, 7.2e-08, 1e-09, 1.1804e-05, "50505300 (PPS)"),
    "cn-notes-not-synchronised-refid-00000000.txt": (False, 0.0, 1.0, 1.0, "00000000 ()"),
    "meta-balena-1852-normal-root-dispersion-3849s.txt": (
        True,
        -0.0,
        0.046598878,
        3849.691650391,
        "ADF921CF (unifi.it-risch.de)",
    ),
    "nelisys-ubuntu2004-normal-2ms-fast.txt": (
        True,
        0.001983523,
        0.006364488,
        0.023038883,
        "2D40B9B4 (s180.blued.co.th)",
    ),
    "omnios-build-2576-normal-7.8s-slow.txt": (
        True,
        -7.810536861,
        0.016745072,
        0.182286546,
        "D9723B42 (ns0.luns.net.uk)",
    ),
    "pingcap-docs-normal-22us-slow.txt": (True, -2.2151e-05, 0.012706812, 0.000430042, "5EC69F0A (ntp1.time.nl)"),
    "pingcap-docs-not-synchronised-leap-line-only.txt": (False, None, None, None, None),
    "scale-network-pr121-server2-normal-260us-fast.txt": (
        True,
        0.000260112,
        0.031140074,
        0.018798923,
        "B280042C (ntp1.bytestacker.com)",
    ),
}


@pytest.mark.parametrize("path", data_files("chronyc-tracking"))
def test_every_recording_reads_to_its_facts(path):
    parsed = parse_chronyc_tracking(data(path))
    name = path.split("/", 1)[1]
    if name == "pingcap-docs-506-cannot-talk-to-daemon.txt":
        assert parsed == DaemonDown("chronyc", "506 Cannot talk to daemon")
        return
    assert isinstance(parsed, ChronyTracking)
    synced, offset, delay, dispersion, reference = EXPECTED[name]
    assert (parsed.synchronised, parsed.system_offset_s, parsed.root_delay_s) == (synced, offset, delay)
    assert (parsed.root_dispersion_s, parsed.reference) == (dispersion, reference)


def test_root_distance_is_half_the_delay_plus_the_dispersion():
    t = parse_chronyc_tracking(data("chronyc-tracking/nelisys-ubuntu2004-normal-2ms-fast.txt"))
    assert isinstance(t, ChronyTracking)
    assert t.root_distance_s == pytest.approx(0.006364488 / 2 + 0.023038883)
    assert t.stratum == 3 and t.last_offset_s == 0.003852981


@pytest.mark.parametrize(
    "text, reason",
    [
        ("", "no 'Leap status' line"),
        ("Reference ID    : 2D40B9B4 (s180.blued.co.th)\nStratum         : 3\n", "no 'Leap status' line"),
        ("Fatal error: no socket\n\x00garbage\n", "not a 'Name : value' line"),
        ("System time     : 0.1 seconds sideways of NTP time\nLeap status     : Normal\n", "System time"),
        ("Root delay      : lots\nLeap status     : Normal\n", "Root delay"),
    ],
)
def test_garbage_and_truncated_output_raise(text, reason):
    with pytest.raises(ParseError) as e:
        parse_chronyc_tracking(text)
    assert reason in e.value.reason
