"""Threshold bands: boundaries, messages with units, and validation at construction."""

import pytest
from pydantic import ValidationError

from nodecheck.core.model import Status
from nodecheck.core.thresholds import Ceiling, Exact, Floor, OneOf


@pytest.mark.parametrize(
    "value, status, message",
    [
        (299.9, Status.FAIL, "rate 299.9 Gb/s, expected >= 300 Gb/s"),
        (300, Status.WARN, "rate 300 Gb/s, expected >= 360 Gb/s"),
        (360, Status.PASS, "rate 360 Gb/s (>= 360 Gb/s)"),
    ],
)
def test_floor_boundaries(value, status, message):
    v = Floor(fail_below=300, warn_below=360).judge(value, what="rate", unit="Gb/s", subject="mlx5_0/1")
    assert (v.status, v.message, v.subject) == (status, message, "mlx5_0/1")


@pytest.mark.parametrize("value, status", [(0, Status.PASS), (1, Status.WARN), (100, Status.WARN), (101, Status.FAIL)])
def test_ceiling_boundaries(value, status):
    v = Ceiling(fail_above=100, warn_above=0).judge(value, what="SymbolErrorCounter", unit="errors")
    assert v.status is status


def test_bands_in_the_wrong_order_are_rejected_when_loaded():
    with pytest.raises(ValidationError, match=r"warn_below .* must be >= fail_below"):
        Floor(fail_below=300, warn_below=200)
    with pytest.raises(ValidationError, match=r"warn_above .* must be <= fail_above"):
        Ceiling(fail_above=1, warn_above=5)
    with pytest.raises(ValidationError):
        Floor(fail_below="fast")


def test_exact_and_one_of():
    assert Exact(value="550.90.07").judge("550.90.07", what="driver").status is Status.PASS
    v = Exact(value="550.90.07").judge("550.54.15", what="driver")
    assert (v.status, v.message) == (Status.FAIL, "driver 550.54.15, expected 550.90.07")
    v = OneOf(values=("2.21.5", "2.23.4")).judge("2.18.1", what="NCCL")
    assert (v.status, v.message) == (Status.FAIL, "NCCL 2.18.1, expected one of 2.21.5, 2.23.4")


# --- issue 17: non-finite numbers -----------------------------------------------------------------
# NaN compares false with everything, so `value > nan` never fails and a band of .nan passed 95 °C


@pytest.mark.parametrize(
    "band, bound",
    [
        (Ceiling, {"fail_above": float("nan")}),
        (Ceiling, {"fail_above": 85, "warn_above": float("nan")}),
        (Ceiling, {"fail_above": float("inf")}),
        (Floor, {"fail_below": float("nan")}),
        (Floor, {"fail_below": float("-inf")}),
        (Floor, {"fail_below": 300, "warn_below": float("inf")}),
        (Ceiling, {"fail_above": "nan"}),
        (Floor, {"fail_below": "-Infinity"}),
    ],
)
def test_a_non_finite_bound_is_refused_when_loaded(band, bound):
    with pytest.raises(ValidationError, match="finite number"):
        band(**bound)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_a_non_finite_observed_value_is_an_error_never_a_pass_or_fail(value):
    for band, what in (
        (Ceiling(fail_above=85, warn_above=80), "temperature"),
        (Floor(fail_below=300, warn_below=360), "busbw"),
    ):
        v = band.judge(value, what=what, unit="x", subject="GPU0")
        assert (v.status, v.subject) == (Status.ERROR, "GPU0")
        assert v.message == f"{what} {value} x: not a finite number, cannot be judged"
    assert Exact(value=8).judge(value, what="gpus").status is Status.ERROR
    assert OneOf(values=(1, 2)).judge(value, what="width").status is Status.ERROR


def test_exact_and_one_of_refuse_a_non_finite_pin():
    with pytest.raises(ValidationError, match="finite number"):
        Exact(value=float("nan"))
    with pytest.raises(ValidationError, match="finite numbers, got inf"):
        OneOf(values=(1, float("inf")))
