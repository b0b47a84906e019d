"""crossnode: drift against a pin or a strict majority; a tie asks for a pin; per-node problems."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from nodecheck.core.errors import ParseError
from nodecheck.core.model import Status
from nodecheck.judging.drift import Absent, PinOrDrift, gather, group_by_value, judge_values, strict_majority


def fleet(n: int, value: str, **odd: str) -> dict[str, str]:
    values = {f"gpu{i:03d}": value for i in range(1, n + 1)}
    values.update(odd)
    return values


def by_status(results) -> dict[Status, list]:
    out: dict[Status, list] = {}
    for nodes, verdict in results:
        out.setdefault(verdict.status, []).append((nodes, verdict))
    return out


def test_the_stale_container_incident_reads_as_one_line():
    values = fleet(512, "2.23.4", gpu007="2.21.5", gpu112="2.21.5")
    results = by_status(judge_values(values, PinOrDrift(), what="NCCL"))
    [(nodes, fail)] = results[Status.FAIL]
    assert nodes == ("gpu007", "gpu112")
    assert fail.message == "NCCL 2.21.5 on gpu[007,112], expected 2.23.4 (510 nodes)"
    [(passing, ok)] = results[Status.PASS]
    assert len(passing) == 510 and ok.message == "NCCL 2.23.4 (majority: 510 of 512 nodes)"


def test_one_verdict_per_minority_group():
    values = fleet(10, "A", gpu002="B", gpu003="B", gpu004="C")
    fails = by_status(judge_values(values, PinOrDrift(), what="driver"))[Status.FAIL]
    assert sorted(nodes for nodes, _ in fails) == [("gpu002", "gpu003"), ("gpu004",)]


def test_a_tie_is_an_error_that_asks_for_a_pin_never_a_guess():
    values = {"a1": "2.23.4", "a2": "2.23.4", "b1": "2.21.5", "b2": "2.21.5"}
    [(nodes, verdict)] = list(judge_values(values, PinOrDrift(), what="NCCL"))
    assert verdict.status is Status.ERROR and set(nodes) == set(values)
    assert "no majority among 2.23.4 on a[1-2], 2.21.5 on b[1-2]" in verdict.message
    assert "pin the right one with expect:" in verdict.message


def test_half_is_not_a_majority():
    assert strict_majority(group_by_value({"a": "1", "b": "2"})) is None
    assert strict_majority(group_by_value({"a": "1", "b": "1", "c": "2"})) == "1"


def test_pinned_value_is_the_reference_even_when_a_minority_has_it():
    values = fleet(3, "2.21.5", gpu004="2.23.4")
    results = by_status(judge_values(values, PinOrDrift(expect="2.23.4"), what="NCCL"))
    [(nodes, fail)] = results[Status.FAIL]
    assert nodes == ("gpu001", "gpu002", "gpu003")
    assert fail.message == "NCCL 2.21.5 on gpu[001-003], expected 2.23.4 (pinned; 1 node)"
    assert results[Status.PASS][0][0] == ("gpu004",)


def test_pin_nobody_has():
    [(_, fail)] = list(judge_values(fleet(2, "1.0"), PinOrDrift(expect="2.0"), what="x"))
    assert fail.message == "x 1.0 on gpu[001-002], expected 2.0 (pinned; no node has it)"


def test_allowed_list_then_drift_among_the_allowed():
    values = fleet(5, "A", gpu001="B", gpu002="Z")
    results = by_status(judge_values(values, PinOrDrift(expect=["A", "B"], drift="fail"), what="v"))
    messages = sorted(v.message for _, v in results[Status.FAIL])
    assert messages == ["v B on gpu001, expected A (3 nodes)", "v Z on gpu002, expected one of A, B (allowed)"]


def test_an_allowed_list_alone_allows_each_value():
    values = fleet(3, "A", gpu003="B")
    results = by_status(judge_values(values, PinOrDrift(expect=["A", "B"]), what="v"))
    assert set(results) == {Status.PASS}


def test_unreadable_nodes_count_against_the_majority():
    values = fleet(2, "A", gpu003="B")
    [(nodes, v)] = list(judge_values(values, PinOrDrift(), what="v", total=4))
    assert v.status is Status.ERROR and "(1 node could not be read)" in v.message
    # 3 of 5 is still a strict majority with one node unread
    statuses = {n: v.status for n, v in judge_values(fleet(3, "A", gpu004="B"), PinOrDrift(), what="v", total=5)}
    assert statuses == {("gpu001", "gpu002", "gpu003"): Status.PASS, ("gpu004",): Status.FAIL}


def test_a_tie_under_drift_warn_only_warns():
    [(_, v)] = list(judge_values({"a": "1", "b": "2"}, PinOrDrift(drift="warn"), what="v"))
    assert v.status is Status.WARN and "no majority" in v.message


def test_a_tie_message_names_the_largest_groups_and_counts_the_rest():
    values = {f"n{i}": f"v{i}" for i in range(1, 9)}
    [(_, v)] = list(judge_values(values, PinOrDrift(), what="x"))
    assert "v1 on n1, v2 on n2, v3 on n3, v4 on n4, v5 on n5 and 3 more values on 3 nodes" in v.message


def test_drift_warn_and_drift_off():
    values = fleet(3, "A", gpu003="B")
    warns = by_status(judge_values(values, PinOrDrift(drift="warn"), what="v"))
    assert [n for n, _ in warns[Status.WARN]] == [("gpu003",)] and Status.FAIL not in warns
    off = by_status(judge_values(values, PinOrDrift(expect=["A", "B"], drift="off"), what="v"))
    assert set(off) == {Status.PASS}


def test_single_node_passes_with_an_honest_note():
    [(nodes, v)] = list(judge_values({"n1": "A"}, PinOrDrift(), what="v"))
    assert v.status is Status.PASS and "the only node judged" in v.message


def test_nothing_to_judge_is_bad_input():
    with pytest.raises(ValidationError, match="nothing to judge"):
        PinOrDrift(drift="off")


@pytest.mark.parametrize("bad", [2.23, 550, True, [], [1]])
def test_unquoted_or_empty_pins_are_refused(bad):
    with pytest.raises(ValidationError):
        PinOrDrift(expect=bad)


def test_gather_gives_each_unreadable_or_absent_node_its_own_result():
    def read(out):
        if out == "absent":
            raise Absent("no libnccl.so.2 in the loader cache")
        if out == "garbage":
            raise ParseError("ldconfig -p", "unreadable", "xx")
        if out == "bug":
            raise KeyError("oops")
        return out

    values, problems = gather({"a": "2.23.4", "b": "absent", "c": "garbage", "d": "bug"}, read, what="NCCL")
    assert values == {"a": "2.23.4"}
    statuses = {nodes: v.status for nodes, v in problems}
    assert statuses == {("b",): Status.FAIL, ("c",): Status.ERROR, ("d",): Status.ERROR}
    assert "internal error reading NCCL: KeyError" in problems[2][1].message
