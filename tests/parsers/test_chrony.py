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


# -- issue 32 section 3: bounded numbers, one leap word list, linear ------------------------------

NELISYS = data("chronyc-tracking/nelisys-ubuntu2004-normal-2ms-fast.txt")


@pytest.mark.parametrize(
    "old, new",
    [
        ("0.001983523 seconds fast", "1" + "0" * 400 + " seconds fast"),  # 400 digits: float() -> inf
        ("0.006364488 seconds", "0." + "6" * 400 + " seconds"),
        ("0.001983523 seconds fast", "1.2.3 seconds fast"),  # float() raised ValueError
        ("0.001983523 seconds fast", "nan seconds fast"),
        ("+0.003852981 seconds", "inf seconds"),
        ("Stratum         : 3", "Stratum         : ²"),  # isdigit() but not int(): ValueError
        ("Stratum         : 3", "Stratum         : " + "9" * 5000),  # int() past 4300 digits: ValueError
        ("Stratum         : 3", "Stratum         : ٣"),  # Arabic-Indic 3: a digit, not chrony's
    ],
)
def test_a_number_chrony_never_prints_is_a_parse_error(old, new):
    assert old in NELISYS
    with pytest.raises(ParseError):
        parse_chronyc_tracking(NELISYS.replace(old, new))


def test_the_leap_word_is_read_from_chronys_own_list():
    words = (("Normal", True), ("Insert second", True), ("Delete second", True), ("Not synchronised", False))
    for leap, synced in words:
        t = parse_chronyc_tracking(NELISYS.replace(": Normal", f": {leap}"))
        assert isinstance(t, ChronyTracking) and (t.leap, t.synchronised) == (leap, synced)
    for cut in ("Not", "Not synchr", "Invalid", ""):
        with pytest.raises(ParseError, match="Leap status"):
            parse_chronyc_tracking(NELISYS.replace(": Normal", f": {cut}"))


def test_root_delay_and_dispersion_are_never_negative():
    with pytest.raises(ParseError, match=r"Root dispersion .*negative"):
        parse_chronyc_tracking(NELISYS.replace(": 0.023038883", ": -0.023038883"))


@pytest.mark.growth
def test_a_long_name_of_spaces_is_read_in_linear_time():
    # `^([A-Za-z][A-Za-z ()]*?)\s*:` tried every split of a run of spaces: 1.4 s at 20 KB, 4 s at 40 KB
    from tests.growth import assert_linear

    assert_linear(parse_chronyc_tracking, lambda n: "a" + " " * n + "\n", 50_000, ignore=ParseError)
