"""NVLink counter rules, after DCGM's NVLink health watch."""

from __future__ import annotations

import pytest

from nodecheck.judging import nvlink_rules as R

ZERO = {"replay": 0, "recovery": 0, "crc_flit": 0, "crc_data": 0}


def judge(after, before=ZERO, window=600.0, reset=False, min_window_s=R.DEFAULT_MIN_WINDOW_S):
    found = R.judge_link(before, after, window, reset=reset, limits=R.DEFAULT_RATE_LIMITS, min_window_s=min_window_s)
    return {f.counter: f for f in found}


def test_steady_counters_pass():
    found = judge(
        {"replay": 5, "recovery": 1, "crc_flit": 10, "crc_data": 0},
        before={"replay": 5, "recovery": 1, "crc_flit": 10, "crc_data": 0},
    )
    assert {f.status for f in found.values()} == {"pass"}


def test_any_replay_or_recovery_fails():
    found = judge({**ZERO, "replay": 1, "recovery": 2})
    assert found["replay"].status == "fail" and found["recovery"].status == "fail"
    assert found["recovery"].message == "recovery +2 in 600 s, expected no increase"


def test_crc_warns_on_any_and_fails_at_100_per_second():
    assert judge({**ZERO, "crc_flit": 5})["crc_flit"].status == "warn"
    fail = judge({**ZERO, "crc_data": 60_000}, window=600.0)["crc_data"]
    assert fail.status == "fail" and fail.message == "crc_data +60000 in 600 s = 100/s, expected < 100/s"


def test_a_short_window_warns_instead_of_failing_a_rate():
    found = judge({**ZERO, "crc_flit": 10_000}, window=10.0)["crc_flit"]
    assert found.status == "warn" and "not rated" in found.message


def test_after_a_reset_the_second_value_is_the_increase():
    found = judge({**ZERO, "replay": 2}, before={**ZERO, "replay": 50}, reset=True)["replay"]
    assert found.status == "fail" and found.increase == 2 and "reset" in found.message


def test_a_counter_in_one_read_only_is_not_judged_and_a_bad_window_is_refused():
    assert "ecc_data" not in judge({**ZERO, "ecc_data": 3})
    with pytest.raises(ValueError):
        judge(ZERO, window=0)
