"""Relative bands (Floor.relative): validation messages an operator reads as a playbook error, and
Floor.judge unchanged by them."""

import pytest
from pydantic import ValidationError

from nodecheck.core.model import Status
from nodecheck.core.thresholds import Floor, Relative


def test_a_relative_band_loads_with_its_defaults():
    f = Floor.model_validate({"fail_below": 300, "relative": {"warn_below_pct": 5, "fail_below_pct": 10}})
    assert f.relative == Relative(warn_below_pct=5, fail_below_pct=10, min_peers=4, mad_k=3.0)
    assert f.relative.history_warn_below_pct is None


def test_floor_judge_ignores_relative_fixed_floors_only():
    f = Floor(fail_below=300, relative=Relative(fail_below_pct=1))
    v = f.judge(310.0, what="bw", unit="Gb/s")
    assert (v.status, v.message) == (Status.PASS, "bw 310 Gb/s (>= 300 Gb/s)")
    assert Floor(fail_below=300).relative is None


@pytest.mark.parametrize(
    "relative, words",
    [
        ({}, "relative needs at least one of warn_below_pct, fail_below_pct, history_warn_below_pct"),
        ({"min_peers": 8}, "relative needs at least one of"),
        ({"warn_below_pct": 10, "fail_below_pct": 5}, r"warn_below_pct \(10\) must be <= fail_below_pct \(5\)"),
        ({"fail_below_pct": 0}, "fail_below_pct\n  Input should be greater than 0"),
        ({"fail_below_pct": 100}, "fail_below_pct\n  Input should be less than 100"),
        ({"warn_below_pct": -5}, "warn_below_pct\n  Input should be greater than 0"),
        ({"history_warn_below_pct": 150}, "history_warn_below_pct\n  Input should be less than 100"),
        ({"fail_below_pct": 10, "min_peers": 1}, "min_peers\n  Input should be greater than or equal to 2"),
        ({"fail_below_pct": 10, "min_peers": 4.5}, "min_peers\n  Input should be a valid integer"),
        ({"fail_below_pct": 10, "mad_k": -1}, "mad_k\n  Input should be greater than or equal to 0"),
        ({"fail_below_pct": float("nan")}, "fail_below_pct\n  Input should be a finite number"),
        ({"fail_below_pct": 10, "median": True}, "median\n  Extra inputs are not permitted"),
    ],
)
def test_bad_relative_bands_say_what_is_wrong(relative, words):
    with pytest.raises(ValidationError, match=words):
        Floor.model_validate({"fail_below": 300, "relative": relative})


def test_history_alone_is_a_valid_band():
    assert Relative(history_warn_below_pct=10).fail_below_pct is None
