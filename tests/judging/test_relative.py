"""nodecheck.judging.relative: values against their peers' median on generated fleets (one slow GPU
among identical ones, two SKUs, a noisy group, too few peers, NaN), the node's own history, worse()."""

from __future__ import annotations

import math
import random
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodecheck.core.model import Status, Verdict
from nodecheck.core.thresholds import Relative
from nodecheck.judging.relative import MAD_SCALE, Sample, _Group, judge_history, judge_relative, robust, worse

H100 = "NVIDIA H100 80GB HBM3"
BAND = Relative(warn_below_pct=5, fail_below_pct=10)


def fleet(values: list[float], group: str = H100) -> list[Sample]:
    """GPU i of node gpu(i // 8 + 1): 8 GPUs a node."""
    return [Sample((f"gpu{i // 8 + 1:03d}",), f"GPU{i % 8}", group, v) for i, v in enumerate(values)]


def identical(n: int, value: float = 705.0, seed: int = 1, jitter: float = 1.0) -> list[float]:
    """n healthy GPUs: the value +- a small measurement jitter (deterministic)."""
    rng = random.Random(seed)
    return [round(value + rng.uniform(-jitter, jitter), 1) for _ in range(n)]


def flagged(verdicts: list[Verdict | None]) -> dict[int, Verdict]:
    return {i: v for i, v in enumerate(verdicts) if v is not None}


def test_one_gpu_15_percent_slow_among_64_fails_naming_it_the_value_and_the_median():
    values = identical(64)
    values[19] = 598.0
    samples = fleet(values)
    got = flagged(judge_relative(samples, BAND, what="gemm_bf16", unit="TFLOPS"))
    assert list(got) == [19]
    v = got[19]
    median, mad = robust(values[:19] + values[20:])
    assert v.status is Status.FAIL and v.subject == "GPU3"
    below = (median - 598) / median * 100
    assert 14.5 < below < 15.5
    assert v.message == (
        f"GPU3: gemm_bf16 598 TFLOPS, {below:.1f}% below its peers' median {median:g} TFLOPS "
        f"(MAD {float(f'{mad:.4g}'):g} TFLOPS, 63 peers, {H100})"
    )
    assert v.observed == {
        "gemm_bf16": 598.0,
        "peers_median": median,
        "peers_mad": mad,
        "peers": 63,
        "below_median_pct": round(below, 2),
        "group": H100,
    }
    assert v.expected == {"min": median * 0.9, "peers_median": median}


def test_a_gpu_7_percent_slow_warns_between_warn_5_and_fail_10():
    values = identical(64, seed=2)
    values[40] = round(statistics.median(values) * 0.93, 1)
    got = flagged(judge_relative(fleet(values), BAND, what="gemm_bf16", unit="TFLOPS"))
    assert list(got) == [40]
    assert got[40].status is Status.WARN
    assert "7.0% below its peers' median" in got[40].message
    median = statistics.median(values[:40] + values[41:])
    assert got[40].observed["peers_median"] == median
    assert got[40].expected["min"] == pytest.approx(median * 0.95)


def test_two_skus_grouped_apart_single_out_nobody():
    h100, a100 = identical(32, 705.0, seed=3), identical(32, 290.0, seed=4)
    samples = fleet(h100, H100) + fleet(a100, "NVIDIA A100-SXM4-80GB")
    assert flagged(judge_relative(samples, BAND, what="gemm_bf16", unit="TFLOPS")) == {}


def test_two_skus_in_one_group_single_out_the_lower_mode_when_it_is_the_minority():
    # the same two SKUs thrown into ONE group: the median and the MAD are those of the majority, so
    # MAD does NOT call a bimodal group noisy (the MAD lies inside one mode): 31 slow among 33 fast
    # all fail, 59 % below. Grouping by SKU (the check's job) is what keeps them apart
    values = identical(33, 705.0, seed=3) + identical(31, 290.0, seed=4)
    got = flagged(judge_relative(fleet(values, "mixed"), BAND, what="gemm_bf16", unit="TFLOPS"))
    assert sorted(got) == list(range(33, 64)) and {v.status for v in got.values()} == {Status.FAIL}
    assert all(float(str(v.observed["peers_mad"])) < 2 for v in got.values())
    # the slow SKU the majority: the median is a slow one, nobody is below it
    values = identical(31, 705.0, seed=3) + identical(33, 290.0, seed=4)
    assert flagged(judge_relative(fleet(values, "mixed"), BAND, what="gemm_bf16", unit="TFLOPS")) == {}


def test_a_noisy_group_cannot_single_out_a_value_it_cannot_tell_apart():
    # 64 values spread evenly over 600..800 (median 700, MAD ~50): 640 is 8.6 % below and 590 is
    # 15.7 % below, yet both lie within 3 x 1.4826 x MAD of the median: mad_k says too noisy
    values = [600 + 200 * i / 63 for i in range(64)]
    values[10], values[11] = 640.0, 590.0
    samples = fleet(values, "noisy")
    assert flagged(judge_relative(samples, BAND, what="gemm_bf16", unit="TFLOPS")) == {}
    median, mad = robust(values[:11] + values[12:])
    assert median - 590 <= 3 * MAD_SCALE * mad
    # the same group without the noise test: every value more than 10 % below the median fails
    got = flagged(judge_relative(samples, Relative(warn_below_pct=5, fail_below_pct=10, mad_k=0), what="x", unit=""))
    assert got[11].status is Status.FAIL and got[10].status is Status.WARN
    # a value far outside the noise is singled out even so
    values[12] = 300.0
    got = flagged(judge_relative(fleet(values, "noisy"), BAND, what="gemm_bf16", unit="TFLOPS"))
    assert list(got) == [12] and got[12].status is Status.FAIL


def test_fewer_peers_than_min_peers_judges_nobody():
    values = [705.0, 704.0, 706.0, 300.0]  # 3 peers each, min_peers 4
    assert judge_relative(fleet(values), BAND, what="gemm_bf16", unit="TFLOPS") == [None] * 4
    four = Relative(fail_below_pct=10, min_peers=3)
    got = flagged(judge_relative(fleet(values), four, what="gemm_bf16", unit="TFLOPS"))
    assert list(got) == [3] and got[3].status is Status.FAIL


def test_nan_values_get_no_verdict_and_are_nobodys_peer():
    values = identical(5, seed=5) + [math.nan, math.inf, 300.0]
    got = judge_relative(fleet(values), BAND, what="gemm_bf16", unit="TFLOPS")
    assert got[5] is None and got[6] is None
    assert got[7] is not None and got[7].status is Status.FAIL and got[7].observed["peers"] == 5
    # 3 finite peers and 2 NaNs are 3 peers, fewer than min_peers 4
    few = identical(3, seed=6) + [math.nan, math.nan, 300.0]
    assert judge_relative(fleet(few), BAND, what="gemm_bf16", unit="TFLOPS")[-1] is None


def test_identical_values_have_mad_0_and_a_value_below_by_more_than_pct_still_fails():
    values = [705.0] * 16 + [640.0, 690.0]  # 9.2 % below: WARN; 2.1 % below: nothing
    got = flagged(judge_relative(fleet(values), BAND, what="gemm_bf16", unit="TFLOPS"))
    assert list(got) == [16]
    assert got[16].status is Status.WARN and got[16].observed["peers_mad"] == 0
    assert "(MAD 0 TFLOPS, 17 peers" in got[16].message


def test_the_median_leaves_the_sample_itself_out():
    # 4 peers [10, 10, 100, 100] for each 10: median 55; the 10s are 82 % below it. Counted with
    # itself it would be [10, 10, 10, 100, 100]: median 10 and nothing to say
    values = [10.0, 10.0, 10.0, 100.0, 100.0]
    got = judge_relative(fleet(values, "g"), Relative(fail_below_pct=10, mad_k=0), what="x", unit="")
    assert [v.status if v else None for v in got] == [Status.FAIL] * 3 + [None, None]
    assert got[0] is not None and got[0].observed["peers_median"] == 55.0
    assert got[0].message == "GPU0: x 10, 81.8% below its peers' median 55 (MAD 45, 4 peers, g)"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0.5, 1000, allow_nan=False).map(lambda v: round(v, 1)), min_size=2, max_size=40))
def test_the_fast_leave_one_out_equals_robust_of_the_others(values):
    group = _Group(values)
    for i, v in enumerate(values):
        median, mad = robust(values[:i] + values[i + 1 :])
        fast_median, fast_mad = group.without(v)
        assert fast_median == pytest.approx(median, abs=1e-9) and fast_mad == pytest.approx(mad, abs=1e-9)


def test_robust_is_median_and_unscaled_mad():
    assert robust([1.0, 2.0, 3.0, 4.0, 100.0]) == (3.0, 1.0)
    with pytest.raises(ValueError):
        robust([])


HIST = Relative(history_warn_below_pct=10)


def test_history_warns_below_the_nodes_own_median_of_its_recent_sweeps():
    v = judge_history(598.0, [680.0, 679.0, 681.0, 700.0, 650.0], HIST, what="gemm_bf16", unit="TFLOPS", subject="GPU3")
    assert v is not None and v.status is Status.WARN and v.subject == "GPU3"
    assert v.message == "GPU3: gemm_bf16 598 TFLOPS, 12.1% below this node's median of its last 5 sweeps (680 TFLOPS)"
    assert v.observed == {"gemm_bf16": 598.0, "history_median": 680.0, "history": 5, "below_median_pct": 12.06}
    assert v.expected == {"min": pytest.approx(612.0), "history_median": 680.0}


@pytest.mark.parametrize(
    "value, history, band",
    [
        (620.0, [680.0], HIST),  # 8.8 % below: within 10 %
        (598.0, [], HIST),  # no history yet
        (598.0, [math.nan, math.inf], HIST),  # no finite history
        (math.nan, [680.0], HIST),
        (100.0, [680.0], BAND),  # history_warn_below_pct unset
    ],
)
def test_history_says_nothing_within_the_band_or_without_history(value, history, band):
    assert judge_history(value, history, band, what="gemm_bf16", unit="TFLOPS") is None


def test_one_past_sweep_is_enough_and_the_message_says_sweep():
    v = judge_history(500.0, [680.0], HIST, what="busbw", unit="GB/s")
    assert (
        v is not None and v.message == "busbw 500 GB/s, 26.5% below this node's median of its last 1 sweep (680 GB/s)"
    )


def test_worse_takes_the_more_severe_and_the_first_on_a_tie():
    fail, warn, ok = Verdict(Status.FAIL, "f"), Verdict(Status.WARN, "w"), Verdict(Status.PASS, "p")
    assert worse(ok, fail) is fail
    assert worse(fail, warn) is fail
    assert worse(ok, None) is ok
    other = Verdict(Status.WARN, "w2")
    assert worse(warn, other) is warn
