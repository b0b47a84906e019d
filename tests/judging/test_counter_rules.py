"""The counter classification table, delta (ok / saturated / reset / missing) and judge_deltas on
reads parsed from corpus recordings, with the second read edited in the test to say what changed."""

from __future__ import annotations

from dataclasses import replace

import pytest

from nodecheck.judging.counter_rules import (
    CONGESTION,
    COUNTERS,
    DEFAULT_MIN_WINDOW_S,
    DEFAULT_RATE_LIMITS,
    FAIL_ON_INCREASE,
    INFO,
    RATE,
    RESET_FIX,
    CounterDelta,
    RateLimit,
    delta,
    judge_deltas,
    symbol_error_limit_per_hour,
)
from nodecheck.parsers.perfquery import PortCounters, counters_from_sysfs, parse_perfquery
from nodecheck.parsers.sysfs import parse_sysfs_dump
from tests.helpers import data

NONZERO = "perfquery/infiniband_exporter-extended-nonzero-linkdowned-relay-xmitdiscards.txt"
CX4 = "perfquery/cx4-lab-blog-perfquery-C-basic-capmask-0x1600-qp1dropped.txt"
# gpud's saturated port (link_downed 255, xmit_discards 65535), in the sysfs dump ib.counters reads
GPUD_DUMP = "sysfs_ib_counters/derived-gpud-pr943-mlx5_1-port1-as-nodecheck-sysfs-dump.txt"


def _read(path: str) -> PortCounters:
    (block,) = parse_perfquery(data(path), ca="mlx5_0")
    return block


def _saturated_port() -> PortCounters:
    (port,) = counters_from_sysfs(parse_sysfs_dump(data(GPUD_DUMP)))
    return port


def _later(read: PortCounters, **changes: int) -> PortCounters:
    """The same port read again, with the given counters changed."""
    return replace(read, counters={**read.counters, **changes})


def _by_counter(findings):
    return {f.counter: f for f in findings}


# -- the table ------------------------------------------------------------------------------------


def test_classification_table_kinds_and_widths():
    kinds = {
        kind: sorted(n for n, i in COUNTERS.items() if i.kind == kind)
        for kind in (FAIL_ON_INCREASE, RATE, CONGESTION, INFO)
    }
    assert kinds[FAIL_ON_INCREASE] == ["ExcessiveBufferOverrunErrors", "LinkDownedCounter", "LocalLinkIntegrityErrors"]
    assert kinds[RATE] == [
        "LinkErrorRecoveryCounter",
        "PortRcvErrors",
        "PortRcvRemotePhysicalErrors",
        "PortXmitDiscards",
        "SymbolErrorCounter",
    ]
    assert kinds[CONGESTION] == ["PortXmitWait"]
    assert len(kinds[INFO]) == 13 and "PortRcvSwitchRelayErrors" in kinds[INFO]
    assert len(COUNTERS) == 22
    assert all(info.source and info.name == name for name, info in COUNTERS.items())
    link_down, symbol = COUNTERS["LinkDownedCounter"], COUNTERS["SymbolErrorCounter"]
    assert (link_down.sysfs_name, link_down.width) == ("link_downed", 8)
    assert (symbol.sysfs_name, symbol.width) == ("symbol_error", 16)
    assert (COUNTERS["VL15Dropped"].sysfs_name, COUNTERS["QP1Dropped"].sysfs_name) == ("VL15_dropped", None)
    assert (COUNTERS["PortUnicastXmitPkts"].width, COUNTERS["LocalLinkIntegrityErrors"].width) == (64, 4)


def test_default_rate_limits_cover_every_rate_counter_and_the_ber_rule():
    assert set(DEFAULT_RATE_LIMITS) == {n for n, i in COUNTERS.items() if i.kind == RATE}
    assert symbol_error_limit_per_hour(400) == pytest.approx(1440)
    assert symbol_error_limit_per_hour(200) == pytest.approx(720)
    symbol = DEFAULT_RATE_LIMITS["SymbolErrorCounter"]
    assert (symbol.warn_per_hour, symbol.fail_per_hour) == (10, 1440)
    assert "1e-12" in symbol.source
    assert all(limit.source for limit in DEFAULT_RATE_LIMITS.values())
    assert DEFAULT_MIN_WINDOW_S == 300


# -- delta ----------------------------------------------------------------------------------------


def test_delta_of_two_extended_reads():
    before = _read(NONZERO)
    after = _later(
        before, SymbolErrorCounter=120, LinkDownedCounter=2, PortXmitDiscards=20056, PortXmitWait=41864608 + 3600
    )
    deltas = {d.name: d for d in delta(before, after, 300.0)}
    assert len(deltas) == 22
    symbol = deltas["SymbolErrorCounter"]
    assert (symbol.before, symbol.after, symbol.increase, symbol.state) == (0, 120, 120, "ok")
    assert (symbol.per_second, symbol.per_hour) == (pytest.approx(0.4), pytest.approx(1440))
    assert (deltas["LinkDownedCounter"].increase, deltas["PortXmitDiscards"].increase) == (1, 10)
    assert deltas["PortXmitWait"].per_hour == pytest.approx(43200)
    assert deltas["PortRcvSwitchRelayErrors"] == CounterDelta("PortRcvSwitchRelayErrors", 7, 7, 0, 300.0, "ok")


def test_saturated_values_give_no_increase_and_no_rate():
    port = _saturated_port()
    deltas = {d.name: d for d in delta(port, port, 600.0)}
    saturated = sorted(n for n, d in deltas.items() if d.state == "saturated")
    assert saturated == ["ExcessiveBufferOverrunErrors", "LinkDownedCounter", "PortXmitDiscards", "PortXmitWait"]
    link_down = deltas["LinkDownedCounter"]
    assert (link_down.before, link_down.after, link_down.increase) == (255, 255, None)
    assert (link_down.per_second, link_down.per_hour) == (None, None)
    assert deltas["SymbolErrorCounter"].state == "ok"
    # reaching the maximum during the window is saturated too: the increase is at least the difference
    before = replace(port, counters={**port.counters, "PortXmitDiscards": 65530})
    d = {d.name: d for d in delta(before, port, 600.0)}["PortXmitDiscards"]
    assert (d.state, d.increase) == ("saturated", 5)


def test_a_decrease_is_a_reset_counted_from_zero():
    before = _read(NONZERO)
    after = _later(before, PortXmitDiscards=5, LinkDownedCounter=0)
    deltas = {d.name: d for d in delta(before, after, 300.0)}
    assert (deltas["PortXmitDiscards"].state, deltas["PortXmitDiscards"].increase) == ("reset", 5)
    assert deltas["PortXmitDiscards"].per_hour == pytest.approx(60)
    assert (deltas["LinkDownedCounter"].state, deltas["LinkDownedCounter"].increase) == ("reset", 0)
    # a saturated counter that was cleared and counts again is a reset, not saturated
    port = _saturated_port()
    cleared = replace(port, counters={**port.counters, "LinkDownedCounter": 1})
    link_down = {d.name: d for d in delta(port, cleared, 300.0)}["LinkDownedCounter"]
    assert (link_down.state, link_down.increase) == ("reset", 1)


def test_a_counter_in_one_read_only_is_missing():
    before = _read(NONZERO)
    after = replace(before, counters={k: v for k, v in before.counters.items() if k != "PortRcvErrors"})
    deltas = delta(before, after, 300.0)
    assert len(deltas) == 22
    assert deltas[-1] == CounterDelta("PortRcvErrors", 0, None, None, 300.0, "missing")


def test_delta_across_basic_and_extended_widths():
    basic = replace(_read(CX4), counters={**_read(CX4).counters, "SymbolErrorCounter": 65535})
    extended = replace(_read(NONZERO), counters={**_read(NONZERO).counters, "SymbolErrorCounter": 70000})
    symbol = {d.name: d for d in delta(basic, extended, 300.0)}["SymbolErrorCounter"]
    assert (symbol.state, symbol.increase) == ("saturated", None)  # the 16-bit read had stopped
    unicast = {d.name: d for d in delta(basic, extended, 300.0)}["PortUnicastXmitPkts"]
    assert (unicast.state, unicast.before, unicast.after) == ("missing", None, 387471005571)


def test_delta_rejects_a_bad_window_and_different_ports():
    read = _read(NONZERO)
    with pytest.raises(ValueError, match="window_s must be > 0"):
        delta(read, read, 0)
    with pytest.raises(ValueError, match="reads of different ports: mlx5_0/1 and mlx5_0/2"):
        delta(read, replace(read, port=2), 300.0)


# -- judge_deltas ---------------------------------------------------------------------------------


def test_unchanged_port_with_old_errors_passes_every_judged_counter():
    read = _read(NONZERO)  # LinkDownedCounter 1, PortXmitDiscards 20046 since boot
    findings = judge_deltas(delta(read, read, 300.0))
    assert len(findings) == 8
    assert {f.status for f in findings} == {"pass"}
    assert [f.counter for f in findings if f.kind == FAIL_ON_INCREASE] == [
        "LinkDownedCounter",
        "LocalLinkIntegrityErrors",
        "ExcessiveBufferOverrunErrors",
    ]
    assert _by_counter(findings)["LinkDownedCounter"].message == "LinkDownedCounter +0 in 300 s, expected no increase"


def test_symbol_errors_above_the_playbook_limit_fail_with_observed_and_expected():
    before = _read(NONZERO)
    after = _later(before, SymbolErrorCounter=120)
    findings = _by_counter(
        judge_deltas(delta(before, after, 300.0), {"SymbolErrorCounter": {"warn_per_hour": 10, "fail_per_hour": 100}})
    )
    symbol = findings["SymbolErrorCounter"]
    assert (symbol.status, symbol.kind) == ("fail", RATE)
    assert symbol.message == "SymbolErrorCounter +120 in 300 s = 1440/h, expected <= 100/h"
    assert (symbol.increase, symbol.window_s, symbol.per_hour, symbol.limit_per_hour, symbol.value) == (
        120,
        300.0,
        pytest.approx(1440),
        100,
        120,
    )
    # with the defaults (fail above 1440/h: BER 1e-12 at 400 Gb/s) the same delta only warns
    default = _by_counter(judge_deltas(delta(before, after, 300.0)))["SymbolErrorCounter"]
    assert (default.status, default.limit_per_hour) == ("warn", 10)
    assert default.message == "SymbolErrorCounter +120 in 300 s = 1440/h, expected <= 10/h"


@pytest.mark.parametrize(
    "increase, limit, status",
    [
        (25, RateLimit(warn_per_hour=300, fail_per_hour=300), "pass"),  # exactly at the limit: not above
        (25, RateLimit(warn_per_hour=299, fail_per_hour=300), "warn"),
        (26, RateLimit(warn_per_hour=299, fail_per_hour=300), "fail"),  # 312/h
        (26, RateLimit(warn_per_hour=None, fail_per_hour=None), "pass"),
        (0, RateLimit(warn_per_hour=0, fail_per_hour=0), "pass"),  # no increase never rates
        (1, RateLimit(warn_per_hour=0, fail_per_hour=None), "warn"),
    ],
)
def test_rate_limit_edges(increase, limit, status):
    before = _read(NONZERO)
    after = _later(before, PortRcvErrors=increase)
    finding = _by_counter(judge_deltas(delta(before, after, 300.0), {"PortRcvErrors": limit}))["PortRcvErrors"]
    assert finding.status == status
    assert finding.increase == increase


def test_pass_messages_name_the_limit_or_its_absence():
    before = _read(NONZERO)
    after = _later(before, PortRcvErrors=1)
    findings = judge_deltas(
        delta(before, after, 300.0), {"PortRcvErrors": {"warn_per_hour": None, "fail_per_hour": None}}
    )
    assert _by_counter(findings)["PortRcvErrors"].message == "PortRcvErrors +1 in 300 s = 12/h (no limit set)"
    findings = judge_deltas(delta(before, after, 300.0), {"PortRcvErrors": RateLimit(20, 100)})
    assert _by_counter(findings)["PortRcvErrors"].message == "PortRcvErrors +1 in 300 s = 12/h (<= 20/h)"


def test_a_short_window_warns_instead_of_rating():
    before = _read(NONZERO)
    after = _later(before, SymbolErrorCounter=5000, LinkDownedCounter=2)
    findings = _by_counter(judge_deltas(delta(before, after, 60.0)))
    assert findings["SymbolErrorCounter"].status == "warn"
    assert (
        findings["SymbolErrorCounter"].message
        == "SymbolErrorCounter +5000 in 60 s: window too short to rate, expected >= 300 s"
    )
    assert findings["LinkDownedCounter"].status == "fail"  # an increase fails at any window
    exact = _by_counter(judge_deltas(delta(before, after, 300.0), min_window_s=300.0))
    assert exact["SymbolErrorCounter"].status == "fail"  # 60000/h at the minimum window
    shorter = _by_counter(judge_deltas(delta(before, after, 60.0), min_window_s=30.0))
    assert shorter["SymbolErrorCounter"].message == "SymbolErrorCounter +5000 in 60 s = 300000/h, expected <= 1440/h"


def test_any_increase_of_a_fail_on_increase_counter_fails():
    before = _read(NONZERO)
    after = _later(before, LinkDownedCounter=2, LocalLinkIntegrityErrors=1)
    findings = _by_counter(judge_deltas(delta(before, after, 3600.0)))
    assert findings["LinkDownedCounter"].message == "LinkDownedCounter +1 in 3600 s, expected no increase"
    assert (findings["LinkDownedCounter"].status, findings["LinkDownedCounter"].limit_per_hour) == ("fail", 0)
    assert findings["LocalLinkIntegrityErrors"].status == "fail"
    assert findings["ExcessiveBufferOverrunErrors"].status == "pass"


def test_saturated_counters_warn_with_the_fix_and_congestion_is_only_reported():
    port = _saturated_port()
    findings = judge_deltas(delta(port, port, 600.0))
    by = _by_counter(findings)
    assert len(findings) == 9
    warned = sorted(f.counter for f in findings if f.status == "warn")
    assert warned == ["ExcessiveBufferOverrunErrors", "LinkDownedCounter", "PortXmitDiscards"]
    assert by["LinkDownedCounter"].message == f"LinkDownedCounter saturated at 255: increase unknown; {RESET_FIX}"
    assert "perfquery -x -R" in RESET_FIX
    wait = by["PortXmitWait"]
    assert (wait.status, wait.kind, wait.value) == ("pass", CONGESTION, 4294967295)
    assert wait.message.startswith("PortXmitWait saturated at 4294967295 (congestion, not judged)")
    assert "fail" not in {f.status for f in findings}


def test_congestion_moves_are_reported_never_judged_and_info_counters_stay_silent():
    before = _read(NONZERO)
    after = _later(
        before,
        PortXmitWait=41864608 + 10**9,
        PortRcvSwitchRelayErrors=9,
        PortXmitData=before.counters["PortXmitData"] + 10**12,
    )
    findings = _by_counter(judge_deltas(delta(before, after, 300.0)))
    wait = findings["PortXmitWait"]
    assert (wait.status, wait.increase) == ("pass", 10**9)
    assert wait.message == "PortXmitWait +1000000000 in 300 s = 12000000000/h (congestion: reported, not judged)"
    assert "PortRcvSwitchRelayErrors" not in findings and "PortXmitData" not in findings
    assert len(findings) == 9


def test_a_reset_during_the_window_is_judged_on_what_counted_since():
    before = _later(_read(NONZERO), LinkDownedCounter=3)
    after = _later(before, PortXmitDiscards=100, LinkDownedCounter=1)  # from 20046 and 3: cleared
    findings = _by_counter(judge_deltas(delta(before, after, 300.0)))
    assert findings["PortXmitDiscards"].status == "fail"  # >= 1200/h, above 1000/h
    assert findings["PortXmitDiscards"].message == (
        "PortXmitDiscards +100 in 300 s (counters reset in between; at least 100 since) = at least 1200/h, "
        "expected <= 1000/h"
    )
    assert findings["LinkDownedCounter"].status == "fail"  # the link went down again since


def test_a_missing_judged_counter_warns():
    before = _read(NONZERO)
    after = replace(before, counters={k: v for k, v in before.counters.items() if k != "LinkDownedCounter"})
    finding = _by_counter(judge_deltas(delta(before, after, 300.0)))["LinkDownedCounter"]
    assert (finding.status, finding.message) == (
        "warn",
        "LinkDownedCounter missing from the second read: increase unknown",
    )


def test_max_absolute_fails_only_above_the_ceiling():
    before = _read(NONZERO)
    findings = judge_deltas(
        delta(before, before, 300.0), max_absolute={"PortRcvSwitchRelayErrors": 5, "PortXmitDiscards": 20046}
    )
    absolute = [f for f in findings if "=" in f.message and "+" not in f.message]
    assert [(f.counter, f.status, f.message) for f in absolute] == [
        ("PortRcvSwitchRelayErrors", "fail", "PortRcvSwitchRelayErrors = 7, expected <= 5"),
        ("PortXmitDiscards", "pass", "PortXmitDiscards = 20046, <= 20046"),
    ]
    assert len(findings) == 10


@pytest.mark.parametrize(
    "thresholds, max_absolute, error",
    [
        ({"LinkDownedCounter": {"fail_per_hour": 1}}, None, "LinkDownedCounter is not a rate counter"),
        ({"SymbolErrorCount": {"fail_per_hour": 1}}, None, "SymbolErrorCount is not a rate counter"),
        ({"SymbolErrorCounter": {"fail_above": 1}}, None, "unknown keys \\['fail_above'\\]"),
        (None, {"PortXmitWait": 10}, "PortXmitWait is a congestion counter"),
        (None, {"LinkDowned": 1}, "max_absolute: unknown counter 'LinkDowned'"),
    ],
)
def test_bad_limits_are_rejected_by_name(thresholds, max_absolute, error):
    read = _read(NONZERO)
    with pytest.raises(ValueError, match=error):
        judge_deltas(delta(read, read, 300.0), thresholds, max_absolute=max_absolute)


def test_a_counter_that_rose_into_saturation_fails_on_the_increase_it_shows():
    """4-bit LocalLinkIntegrityErrors 0 -> 15 rose by at least 15: any increase fails; a 16-bit
    symbol counter that hit 65535 in an hour rose at least that much."""
    before = _later(_read(NONZERO), LocalLinkIntegrityErrors=0, SymbolErrorCounter=100)
    narrow = {**before.widths, "SymbolErrorCounter": 16, "LocalLinkIntegrityErrors": 4}  # basic widths
    before = replace(before, widths=narrow)
    after = replace(_later(before, LocalLinkIntegrityErrors=15, SymbolErrorCounter=65535), widths=narrow)
    findings = _by_counter(judge_deltas(delta(before, after, 3600.0)))
    integrity = findings["LocalLinkIntegrityErrors"]
    assert integrity.status == "fail"
    assert integrity.message.startswith("LocalLinkIntegrityErrors +15 or more in 3600 s (saturated at 15; ")
    symbol = findings["SymbolErrorCounter"]
    assert symbol.status == "fail" and "= at least 65435/h, expected <= 1440/h" in symbol.message


def test_one_counter_going_down_means_the_whole_port_was_cleared():
    before = _later(_read(NONZERO), SymbolErrorCounter=5000)  # LinkDownedCounter 1
    after = _later(before, LinkDownedCounter=0, SymbolErrorCounter=6000)  # the clear hid the old 5000
    deltas = {d.name: d for d in delta(before, after, 3600.0)}
    assert (deltas["SymbolErrorCounter"].state, deltas["SymbolErrorCounter"].increase) == ("reset", 6000)
    symbol = _by_counter(judge_deltas(delta(before, after, 3600.0)))["SymbolErrorCounter"]
    assert symbol.status == "fail"  # >= 6000/h, not +1000
    rebooted = {d.name: d for d in delta(before, _later(before, SymbolErrorCounter=5005), 60.0, reset=True)}
    assert (rebooted["SymbolErrorCounter"].state, rebooted["SymbolErrorCounter"].increase) == ("reset", 5005)
