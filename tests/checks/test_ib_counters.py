"""ib.counters: two reads of each port, judged on the increase between them."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from nodecheck.checks.ib_counters import COUNTERS_AFTER, COUNTERS_BEFORE, IbCounters
from nodecheck.checks.ib_counters import counters as error_counters
from nodecheck.core.model import Status
from tests.helpers import captures, data

BEFORE = data("perfquery/infiniband_exporter-extended-2ports-capmask2.txt")
AFTER_BAD = data("scenarios/derived-perfquery-x-2ports-linkdowned-plus1-symbol-42.txt")


def sysfs(**values: str) -> dict:
    """Every judged counter's sysfs file at 0, and the given ones (sysfs names)."""
    from nodecheck.checks.ib_counters import JUDGED
    from nodecheck.judging.counter_rules import COUNTERS

    return {**{COUNTERS[n].sysfs_name: "0" for n in JUDGED}, **values}


def read(clock: float, perfquery: str, *, ports=((1, "InfiniBand"),), sysfs: dict | None = None) -> str:
    """What the counters probe prints: the clock, then per port the perfquery -x and sysfs sections."""
    out = [f"@@nodecheck clock {clock}"]
    for port, layer in ports:
        out.append(f"@@nodecheck port mlx5_0 {port} {layer}")
        if perfquery is not None:
            out += [
                f"@@nodecheck begin x:mlx5_0:{port}",
                perfquery.rstrip("\n"),
                f"@@nodecheck end x:mlx5_0:{port} rc=0",
            ]
        out.append(f"@@nodecheck begin sysfs:mlx5_0:{port}")
        for name, value in (sysfs or {}).items():
            out.append(f"/sys/class/infiniband/mlx5_0/ports/{port}/counters/{name}\t{value}")
        out.append(f"@@nodecheck end sysfs:mlx5_0:{port} rc=0")
    return "\n".join(out) + "\n"


def judge(before: str, after: str, **params) -> list:
    out = {**captures(COUNTERS_BEFORE, before), **captures(COUNTERS_AFTER, after)}
    return list(error_counters(out, IbCounters(**params)))


def test_unchanged_counters_pass_per_port_and_keep_the_snapshot():
    [v] = judge(read(100.0, BEFORE), read(130.5, BEFORE))
    assert v.status is Status.PASS and v.subject == "mlx5_0/1"
    assert v.message.startswith("mlx5_0/1: no error counter rose in 30.5 s (perfquery -x)")
    assert v.observed["snapshot"]["counters"]["PortXmitData"] == 36298026860928
    assert v.observed["snapshot"]["clock"] == "130.5"


def test_a_link_down_fails_and_symbol_errors_in_a_short_window_warn():
    verdicts = judge(read(100.0, BEFORE), read(160.0, AFTER_BAD))
    by_counter = {v.observed["counter"]: v for v in verdicts}
    assert by_counter["LinkDownedCounter"].status is Status.FAIL
    assert "LinkDownedCounter +1 in 60 s, expected no increase" in by_counter["LinkDownedCounter"].message
    symbol = by_counter["SymbolErrorCounter"]
    assert symbol.status is Status.WARN and "window too short to rate" in symbol.message
    assert {v.status for v in verdicts} == {Status.FAIL, Status.WARN}


def test_symbol_errors_over_a_long_window_are_rated_against_the_playbook():
    verdicts = judge(
        read(0.0, BEFORE),
        read(3600.0, AFTER_BAD),
        min_window_s=60,
        rates={"SymbolErrorCounter": {"warn_per_hour": 10, "fail_per_hour": 40}},
    )
    symbol = next(v for v in verdicts if v.observed["counter"] == "SymbolErrorCounter")
    assert symbol.status is Status.FAIL and "expected <= 40/h" in symbol.message


def test_port_two_of_the_same_output_is_read_on_its_own():
    [v] = judge(read(0.0, BEFORE, ports=((2, "InfiniBand"),)), read(10.0, AFTER_BAD, ports=((2, "InfiniBand"),)))
    assert v.status is Status.PASS and v.subject == "mlx5_0/2"  # only port 1 changed


def test_without_perfquery_the_sysfs_counters_are_used_and_saturation_is_reported():
    three = sysfs(link_downed="3", port_xmit_wait="10")
    stuck = sysfs(link_downed="255", port_xmit_wait="10")
    # 3 -> 255 (8 bits): the link went down at least 252 times, and the counter stopped there
    [v] = [v for v in judge(read(0.0, None, sysfs=three), read(20.0, None, sysfs=stuck)) if v.status is not Status.PASS]
    assert v.status is Status.FAIL and "LinkDownedCounter +252 or more in 20 s (saturated at 255" in v.message
    assert "perfquery -R" in v.message
    # stuck at 255 in both reads: nothing can be said about the window
    [w] = [v for v in judge(read(0.0, None, sysfs=stuck), read(20.0, None, sysfs=stuck)) if v.status is not Status.PASS]
    assert w.status is Status.WARN and "LinkDownedCounter saturated at 255: increase unknown" in w.message


def test_a_counter_that_went_down_is_a_reset_counted_from_zero():
    verdicts = judge(read(0.0, None, sysfs=sysfs(link_downed="7")), read(20.0, None, sysfs=sysfs(link_downed="1")))
    [v, reset] = verdicts
    assert v.status is Status.FAIL and "reset" in v.message
    assert reset.status is Status.WARN and "counters were reset during the 20.0 s window" in reset.message


def test_a_perfquery_failure_falls_back_to_sysfs_and_no_source_is_an_error():
    failure = data("perfquery/debian-infiniband-diags-44-no-umad-module-exit255.txt")
    [v] = judge(read(0.0, failure, sysfs=sysfs()), read(5.0, failure, sysfs=sysfs()))
    assert v.status is Status.PASS and "(sysfs counters)" in v.message
    [e] = judge(read(0.0, failure), read(5.0, failure))
    assert e.status is Status.ERROR and e.message.startswith("mlx5_0/1: cannot read counters: x:")


def test_no_port_is_an_error_and_ethernet_ports_are_left_to_link_layer():
    [v] = judge(read(0.0, BEFORE, ports=((1, "Ethernet"),)), read(5.0, BEFORE, ports=((1, "Ethernet"),)))
    assert v.status is Status.ERROR and v.message == "no IB port to read counters from"


def test_max_absolute_fails_on_the_value_alone():
    [v] = [
        v
        for v in judge(read(0.0, AFTER_BAD), read(5.0, AFTER_BAD), max_absolute={"LinkDownedCounter": 0})
        if v.status is not Status.PASS
    ]
    assert v.status is Status.FAIL and "LinkDownedCounter = 1, expected <= 0" in v.message


@pytest.mark.parametrize(
    "params, words",
    [
        ({"rates": {"LinkDownedCounter": {"fail_per_hour": 1}}}, "not a rate counter"),
        ({"max_absolute": {"PortXmitWait": 0}}, "congestion"),
        ({"rates": {"SymbolErrorCounter": {"fail_per_hour": -1}}}, "greater than or equal"),
    ],
)
def test_bad_parameters_are_refused(params, words):
    with pytest.raises(ValidationError, match=words):
        IbCounters(**params)


def test_a_port_that_vanished_during_the_run_is_an_error_not_dropped():
    two = ((1, "InfiniBand"), (2, "InfiniBand"))
    verdicts = judge(read(0.0, BEFORE, ports=two), read(10.0, BEFORE, ports=((1, "InfiniBand"),)))
    by_subject = {v.subject: v for v in verdicts}
    assert by_subject["mlx5_0/1"].status is Status.PASS
    assert by_subject["mlx5_0/2"].status is Status.ERROR
    assert by_subject["mlx5_0/2"].message == (
        "mlx5_0/2: present only before the run's load: the port appeared or vanished during the run"
    )


def test_a_listed_device_that_is_not_there_is_an_error():
    verdicts = judge(read(0.0, BEFORE), read(10.0, BEFORE), devices=["mlx5_0", "mlx5_7"])
    [missing] = [v for v in verdicts if v.status is not Status.PASS]
    assert missing.status is Status.ERROR and missing.message.startswith("mlx5_7: no such CA")


def test_the_window_is_taken_from_uptime_when_both_reads_have_it():
    before = read(1000.0, BEFORE).replace("\n", "\n@@nodecheck uptime 50.00\n", 1)
    after = read(4600.0, AFTER_BAD).replace("\n", "\n@@nodecheck uptime 110.00\n", 1)  # the clock stepped
    symbol = next(v for v in judge(before, after, min_window_s=30) if v.observed.get("counter") == "SymbolErrorCounter")
    assert symbol.observed["window_s"] == 60.0 and symbol.status is Status.FAIL  # 42 in 60 s = 2520/h


def test_error_counters_that_were_never_read_are_not_a_pass():
    data_only = {"port_xmit_data": "10", "link_downed": "N/A (no PMA)"}
    [v] = judge(read(0.0, None, sysfs=data_only), read(600.0, None, sysfs=data_only))
    assert v.status is Status.ERROR and v.message.startswith("mlx5_0/1: not read (sysfs counters): LinkDownedCounter, ")
    some = {"link_downed": "0", "symbol_error": "0"}
    verdicts = judge(read(0.0, None, sysfs=some), read(600.0, None, sysfs=some))
    assert [v.status for v in verdicts] == [Status.WARN, Status.PASS]
    assert verdicts[0].message == (
        "mlx5_0/1: not read (sysfs counters): ExcessiveBufferOverrunErrors, "
        "LocalLinkIntegrityErrors, LinkErrorRecoveryCounter, PortRcvErrors, PortXmitDiscards, "
        "PortRcvRemotePhysicalErrors"
    )


def test_a_reboot_between_the_reads_resets_every_counter():
    before = read(1000.0, AFTER_BAD).replace("\n", "\n@@nodecheck uptime 5000.0\n@@nodecheck boot_id a\n", 1)
    after = read(1100.0, AFTER_BAD).replace("\n", "\n@@nodecheck uptime 30.0\n@@nodecheck boot_id b\n", 1)
    verdicts = judge(before, after)
    assert any(v.status is Status.WARN and "the node rebooted" in v.message for v in verdicts)
    link = next(v for v in verdicts if v.observed.get("counter") == "LinkDownedCounter")
    assert link.status is Status.FAIL  # 1 since the reboot, within the window


def test_rate_limits_per_second_are_accepted():
    params = IbCounters(rates={"PortRcvErrors": {"fail_per_second": 0.01}})
    assert params.rates["PortRcvErrors"].per_hour("fail") == 36.0
    with pytest.raises(ValidationError, match="not both"):
        IbCounters(rates={"PortRcvErrors": {"fail_per_second": 0.01, "fail_per_hour": 36}})
