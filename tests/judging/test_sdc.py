"""judging/sdc: who disagrees with the checksum its group should have computed, and the verdict after
a suspect's second run."""

from __future__ import annotations

from nodecheck.core.model import Status
from nodecheck.judging.sdc import Checksum, expected, suspect, verdict

GOOD, BAD, OTHER = "a" * 64, "b" * 64, "c" * 64
H100 = "NVIDIA H100 80GB HBM3 80 GiB cc 9.0 | torch 2.5.1 | fp32 2048x2048 x8 seed 1"
A100 = "NVIDIA A100-SXM4-80GB 80 GiB cc 8.0 | torch 2.5.1 | fp32 2048x2048 x8 seed 1"


def node(name: str, sums: list[str], group: str = H100) -> list[Checksum]:
    return [Checksum(name, i, group, s) for i, s in enumerate(sums)]


def test_the_one_gpu_that_differs_from_a_strict_majority_is_the_only_suspect():
    sums = node("node1", [GOOD] * 8) + node("node2", [GOOD, GOOD, BAD] + [GOOD] * 5)
    want = expected(sums, {})
    assert want[H100].checksum == GOOD and want[H100].how == "majority" and want[H100].agreeing == 15
    assert [(s.node, s.gpu) for s in sums if suspect(s, want[H100])] == [("node2", 2)]


def test_two_models_are_grouped_apart_and_each_has_its_own_majority():
    sums = node("node1", [GOOD] * 4) + node("node2", [OTHER] * 4, A100)
    want = expected(sums, {})
    assert (want[H100].checksum, want[A100].checksum) == (GOOD, OTHER)
    assert not any(suspect(s, want[s.group]) for s in sums)


def test_a_persistent_mismatch_fails_naming_both_checksums_and_a_transient_one_warns():
    sums = node("node1", [GOOD] * 7 + [BAD])
    want = expected(sums, {})[H100]
    bad = sums[7]
    persistent = verdict(bad, want, Checksum("node1", 7, H100, BAD))
    assert persistent.status is Status.FAIL and persistent.subject == "GPU7"
    assert "silent data corruption suspect" in persistent.message
    assert "b" * 16 in persistent.message and "a" * 16 in persistent.message and "persistent" in persistent.message
    assert persistent.observed["persistent"] is True
    transient = verdict(bad, want, Checksum("node1", 7, H100, GOOD))
    assert transient.status is Status.WARN and "transient" in transient.message
    assert transient.observed["persistent"] is False


def test_a_suspect_whose_rerun_did_not_complete_fails():
    sums = node("node1", [GOOD] * 3 + [BAD])
    v = verdict(sums[3], expected(sums, {})[H100], None, "timeout")
    assert v.status is Status.FAIL and "re-run did not complete (timeout)" in v.message


def test_a_gpu_whose_own_two_runs_differed_is_a_suspect_even_when_it_matches():
    s = Checksum("node1", 0, H100, GOOD, repeat_equal=False)
    want = expected([s, *node("node2", [GOOD] * 3)], {})[H100]
    assert suspect(s, want)
    again = verdict(s, want, Checksum("node1", 0, H100, GOOD, repeat_equal=False))
    assert again.status is Status.FAIL and "two runs of the same workload on it differed" in again.message


def test_nan_in_the_result_is_a_suspect():
    s = Checksum("node1", 0, H100, GOOD, finite=False)
    want = expected([s, *node("node2", [GOOD] * 3)], {})[H100]
    v = verdict(s, want, Checksum("node1", 0, H100, GOOD, finite=False))
    assert v.status is Status.FAIL and "NaN or Inf" in v.message


def test_no_strict_majority_is_an_error_and_a_lone_gpu_is_not_compared():
    tie = node("node1", [GOOD, BAD])
    want = expected(tie, {})[H100]
    assert want.checksum is None and want.how == "none"
    assert {verdict(s, want, None).status for s in tie} == {Status.ERROR}
    lone = node("node1", [GOOD])
    v = verdict(lone[0], expected(lone, {})[H100], None)
    assert v.status is Status.SKIPPED and "only GPU of its kind" in v.message and "reference" in v.message


def test_a_pinned_reference_is_what_a_group_must_compute():
    lone = node("node1", [GOOD])
    want = expected(lone, {H100: GOOD})[H100]
    assert want.how == "reference"
    assert verdict(lone[0], want, None).status is Status.PASS
    wrong = expected(lone, {H100: OTHER})[H100]
    assert suspect(lone[0], wrong)
    v = verdict(lone[0], wrong, Checksum("node1", 0, H100, GOOD))
    assert v.status is Status.FAIL and "pinned reference" in v.message
