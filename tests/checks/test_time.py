"""time.sync: judged from real chronyc, ntpq and timedatectl recordings inside the probe's sections."""

from __future__ import annotations

from nodecheck.checks.time import TimeSync, sync
from nodecheck.core.model import Status
from nodecheck.probes.time_sync import TIME_SYNC
from tests.helpers import captures, data


def section(name: str, text: str, rc: int = 0) -> str:
    return f"@@nodecheck begin {name}\n{text}@@nodecheck end {name} rc={rc}\n"


def judge(text: str, **params):
    return list(sync(captures(TIME_SYNC, text), TimeSync(**params)))


def chrony(name: str, rc: int = 0) -> str:
    return section("chronyc", data(f"chronyc-tracking/{name}"), rc)


def test_a_synchronised_chrony_passes_offset_and_root_distance():
    offset, distance = judge(chrony("nelisys-ubuntu2004-normal-2ms-fast.txt"))
    assert (offset.status, offset.message) == (
        Status.PASS,
        "clock 0.00198352 s ahead of its reference (chronyd, reference 2D40B9B4 (s180.blued.co.th)), <= 0.01 s",
    )
    assert distance.status is Status.PASS and distance.message.startswith("root distance 0.0262211 s")


def test_a_clock_seconds_behind_fails_though_chrony_calls_it_normal():
    offset, distance = judge(chrony("omnios-build-2576-normal-7.8s-slow.txt"))
    assert offset.status is Status.FAIL
    assert offset.message.startswith("clock 7.81054 s behind its reference") and offset.message.endswith(
        "expected <= 0.1 s"
    )
    assert distance.status is Status.WARN  # 0.19 s: past 0.1, under 1


def test_a_huge_root_dispersion_fails_even_at_zero_offset():
    offset, distance = judge(chrony("meta-balena-1852-normal-root-dispersion-3849s.txt"))
    assert offset.status is Status.PASS
    assert distance.status is Status.FAIL and distance.message.endswith("expected <= 1 s")


def test_not_synchronised_fails():
    [v] = judge(chrony("cn-notes-not-synchronised-refid-00000000.txt"))
    assert (v.status, v.message) == (
        Status.FAIL,
        "clock not synchronised: chronyd says Leap status 'Not synchronised' (reference 00000000 ()), "
        "expected synchronised",
    )
    [v] = judge(chrony("pingcap-docs-not-synchronised-leap-line-only.txt"))
    assert v.status is Status.FAIL and "reference none" in v.message


def test_chronyd_down_falls_back_to_another_daemon_or_fails():
    down = chrony("pingcap-docs-506-cannot-talk-to-daemon.txt", rc=1)
    [v] = judge(down + section("daemons", ""))
    assert (v.status, v.message) == (
        Status.FAIL,
        "no time daemon answers (chronyc: 506 Cannot talk to daemon), expected a synchronised clock",
    )
    [v] = judge(down + section("timedatectl", data("timedatectl/xen-api-6743-synchronized-ntp-active.txt")))
    assert v.status is Status.PASS and v.message.startswith("clock synchronised (timedatectl: System clock")


def test_ntpd_offsets_are_judged_from_the_system_peer():
    [v] = judge(section("ntpq", data("ntpq/pp-puppet-621-apple-system-peer-26ms.txt")))
    assert v.status is Status.WARN
    assert v.message == (
        "clock 0.026064 s ahead of its reference (ntpd, system peer time.euro.apple), expected <= 0.01 s"
    )
    [v] = judge(section("ntpq", data("ntpq/check-linux-by-ssh-16-system-peer-minus-122ms.txt")))
    assert v.status is Status.FAIL
    [v] = judge(section("ntpq", data("ntpq/jc-31-no-system-peer-offset-5602175ms.txt")))
    assert v.status is Status.FAIL and "ntpd has no system peer" in v.message


def test_timedatectl_not_synchronised_fails():
    [v] = judge(section("timedatectl", data("timedatectl/cb2-135-not-synchronized-ntp-active.txt")))
    assert (v.status, v.message) == (
        Status.FAIL,
        "clock not synchronised (timedatectl: System clock synchronized: no, NTP service active), expected yes",
    )


def test_no_time_daemon_at_all_fails_with_the_words_the_issue_asks_for():
    [v] = judge(section("daemons", ""))
    assert v.status is Status.FAIL
    assert v.message.startswith("no time synchronisation (chronyd, ntpd, systemd-timesyncd) found")


def test_unreadable_output_is_an_error_not_a_fallback():
    text = section("chronyc", "Reference ID    : 2D40B9B4\n") + section(
        "timedatectl", data("timedatectl/xen-api-6743-synchronized-ntp-active.txt")
    )
    [v] = judge(text)
    assert (v.status, v.message) == (Status.ERROR, "cannot read chronyc tracking: no 'Leap status' line")


def test_tighter_bounds_from_the_playbook():
    offset, _ = judge(chrony("nelisys-ubuntu2004-normal-2ms-fast.txt"), offset_s={"fail_above": 0.001})
    assert offset.status is Status.FAIL and offset.message.endswith("expected <= 0.001 s")


# -- issue 32 section 3: lost evidence is ERROR, never PASS ---------------------------------------

NELISYS = "chronyc-tracking/nelisys-ubuntu2004-normal-2ms-fast.txt"


def without(name: str, *labels: str) -> str:
    """A real recording with the lines starting with `labels` dropped."""
    return "".join(ln for ln in data(name).splitlines(keepends=True) if not ln.startswith(labels))


def test_a_synchronised_report_without_root_delay_or_dispersion_is_an_error_not_a_pass():
    for cut in (("Root delay",), ("Root dispersion",), ("Root delay", "Root dispersion")):
        [v] = judge(section("chronyc", without(NELISYS, *cut)))
        assert v.status is Status.ERROR, (cut, v)
        assert v.message.startswith(f"cannot read chronyc tracking: no '{cut[0]}' line"), v.message


def test_a_negative_root_dispersion_or_delay_is_refused_not_passed():
    text = data("chronyc-tracking/meta-balena-1852-normal-root-dispersion-3849s.txt")
    for bad in (text.replace("3849.691650391", "-3849.691650391"), text.replace(": 0.046598878", ": -0.046598878")):
        [v] = judge(section("chronyc", bad))
        assert v.status is Status.ERROR and "negative" in v.message, v


def test_only_a_known_synchronised_leap_status_counts_as_synchronised():
    # a cut "Not synchronised", chrony's own "Invalid" and any other word: not read as synchronised
    for leap in ("Not", "Not synch", "Invalid", "Unknown", "", "normal-ish"):
        text = data(NELISYS).replace("Leap status     : Normal", f"Leap status     : {leap}")
        [v] = judge(section("chronyc", text))
        assert v.status is Status.ERROR and "Leap status" in v.message, (leap, v)
    for leap in ("Insert second", "Delete second"):  # a leap second announced: synchronised
        text = data(NELISYS).replace("Leap status     : Normal", f"Leap status     : {leap}")
        assert [v.status for v in judge(section("chronyc", text))] == [Status.PASS, Status.PASS], leap


def test_a_field_printed_twice_is_refused():
    # two reports run together: the later "Normal" must not hide the earlier "Not synchronised"
    text = data("chronyc-tracking/cn-notes-not-synchronised-refid-00000000.txt") + data(NELISYS)
    [v] = judge(section("chronyc", text))
    assert v.status is Status.ERROR and "twice" in v.message, v


def test_a_section_cut_off_or_failed_is_an_error_not_a_pass():
    body = data(NELISYS)
    [v] = judge(f"@@nodecheck begin chronyc\n{body}")  # the end marker never came
    assert v.status is Status.ERROR and "cut off" in v.message, v
    [v] = judge(section("chronyc", body, rc=124))  # `timeout 5` killed it: what it printed is not all
    assert v.status is Status.ERROR and "exited 124" in v.message, v
    ok = data("timedatectl/xen-api-6743-synchronized-ntp-active.txt")
    [v] = judge(f"@@nodecheck begin timedatectl\n{ok}")
    assert v.status is Status.ERROR and "cut off" in v.message, v
    peers = data("ntpq/perfsonar-toolkit-259-zg1-system-peer.txt")
    [v] = judge(section("ntpq", peers, rc=1))
    assert v.status is Status.ERROR and "exited 1" in v.message, v


def test_ntpq_with_its_header_and_no_peer_line_is_cut_not_unsynchronised():
    header = "".join(data("ntpq/perfsonar-toolkit-259-zg1-system-peer.txt").splitlines(keepends=True)[:2])
    [v] = judge(section("ntpq", header))
    assert v.status is Status.ERROR and "no peer line" in v.message, v


def test_ntpq_with_two_system_peers_is_refused():
    text = data("ntpq/perfsonar-toolkit-259-zg1-system-peer.txt").replace("+zg2", "*zg2")
    [v] = judge(section("ntpq", text))
    assert v.status is Status.ERROR and "system peer" in v.message, v


def test_timedatectl_saying_yes_and_no_is_refused():
    text = data("timedatectl/xen-api-6743-synchronized-ntp-active.txt") + "System clock synchronized: no\n"
    [v] = judge(section("timedatectl", text))
    assert v.status is Status.ERROR and "twice" in v.message, v
