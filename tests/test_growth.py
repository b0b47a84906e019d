"""The growth helper (tests/growth.py) itself: it passes a linear cost, fails a quadratic one, and
counts CPU time, not the time a busy machine keeps this process waiting."""

from __future__ import annotations

import time

import pytest

from tests.growth import assert_linear, cpu_seconds


def linear(n: int) -> int:
    return sum(range(n))


def quadratic(n: int) -> int:
    return sum(1 for _ in range(n) for _ in range(n))


@pytest.mark.growth
def test_a_linear_cost_passes():
    small, large = assert_linear(linear, lambda n: n, 200_000)
    assert 0 < small < large


@pytest.mark.growth
def test_a_quadratic_cost_fails_and_says_by_how_much():
    with pytest.raises(
        AssertionError,
        match=r"not linear: .* at n=300, .* at 4n: x\d+\.\d \(linear is about x4, quadratic x16; the bound is x8\)",
    ):
        assert_linear(quadratic, lambda n: n, 300)


def test_waiting_is_not_cpu_time():
    assert cpu_seconds(lambda: time.sleep(0.2)) < 0.05


def test_an_ignored_refusal_is_part_of_the_work_and_any_other_error_is_raised():
    def refuse():
        raise ValueError("refused")

    assert cpu_seconds(refuse, ignore=ValueError) >= 0
    with pytest.raises(KeyError):
        cpu_seconds(lambda: {}["x"], ignore=ValueError)
