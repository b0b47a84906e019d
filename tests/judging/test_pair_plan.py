"""nodecheck.judging.pair_plan: round planning (ring, all, steering), blame rules and localization, on exact small
examples and on hypothesis-drawn fleets of 2..64 nodes with planted bad nodes and links."""

from __future__ import annotations

from collections import Counter
from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodecheck.judging.pair_plan import (
    DEFAULT_MAX_PARTNERS,
    Blame,
    Pair,
    PairEvidence,
    PairResult,
    Round,
    blame,
    localize,
    next_round,
    plan,
)


def names(n: int) -> list[str]:
    return [f"gpu{i:02d}" for i in range(n)]


def shown(rounds: list[Round]) -> list[list[str]]:
    return [[str(p) for p in r.pairs] for r in rounds]


def simulated(bad_nodes=(), bad_link: Pair | None = None):
    """A run_round where a pair fails iff it holds a planted bad node or is the planted bad link."""
    bad = set(bad_nodes)

    def run_round(r: Round) -> list[PairResult]:
        return [PairResult(p, r.index, not ({p.a, p.b} & bad) and p != bad_link) for p in r.pairs]

    return run_round


def partners(rounds: list[Round]) -> dict[str, list[str]]:
    met: dict[str, list[str]] = {}
    for r in rounds:
        for p in r.pairs:
            met.setdefault(p.a, []).append(p.b)
            met.setdefault(p.b, []).append(p.a)
    return met


def assert_disjoint(rounds: list[Round]) -> None:
    for r in rounds:
        nodes = [n for p in r.pairs for n in (p.a, p.b)]
        assert len(nodes) == len(set(nodes)) and r.pairs


def assert_exact(verdict: Blame, nodes: list[str], bad: set[str], link: Pair | None = None) -> None:
    links = {link} if link else set()
    assert set(verdict.bad_nodes) == bad
    assert set(verdict.bad_links) == links
    assert verdict.unresolved == {}
    ends = {n for p in links for n in (p.a, p.b)}
    assert verdict.good == set(nodes) - bad - ends
    assert verdict.untested == frozenset()


# ---------------------------------------------------------------- exact small plans


def test_ring_of_four_is_two_rounds_of_two_pairs():
    assert shown(plan(["a", "b", "c", "d"])) == [["a<->b", "c<->d"], ["b<->c", "a<->d"]]
    assert [r.index for r in plan(["a", "b", "c", "d"])] == [0, 1]


def test_ring_of_five_needs_a_third_round_for_the_closing_pair():
    assert shown(plan(["a", "b", "c", "d", "e"])) == [["a<->b", "c<->d"], ["b<->c", "d<->e"], ["a<->e"]]


def test_ring_of_three_is_the_triangle():
    assert shown(plan(["a", "b", "c"])) == [["a<->b"], ["b<->c"], ["a<->c"]]


def test_all_pairs_of_four_and_five_by_the_circle_method():
    assert shown(plan(["a", "b", "c", "d"], "all")) == [["a<->d", "b<->c"], ["a<->c", "b<->d"], ["a<->b", "c<->d"]]
    assert shown(plan(["a", "b", "c", "d", "e"], "all")) == [
        ["b<->e", "c<->d"],
        ["a<->e", "b<->c"],
        ["a<->d", "c<->e"],
        ["a<->c", "b<->d"],
        ["a<->b", "d<->e"],
    ]


@pytest.mark.parametrize("pairing", ["ring", "all"])
def test_two_nodes_one_pair_and_fewer_none(pairing):
    assert shown(plan(["a", "b"], pairing)) == [["a<->b"]]
    assert plan(["a"], pairing) == []
    assert plan([], pairing) == []


def test_pair_is_unordered_and_rejects_a_node_with_itself():
    assert Pair("gpu10", "gpu02") == Pair("gpu02", "gpu10")
    assert (Pair("y", "x").a, Pair("y", "x").b) == ("x", "y")
    assert Pair("x", "y").other("x") == "y"
    with pytest.raises(ValueError, match="two different nodes"):
        Pair("x", "x")
    with pytest.raises(ValueError, match="'z' is not in x<->y"):
        Pair("x", "y").other("z")


def test_round_rejects_a_node_in_two_pairs():
    with pytest.raises(ValueError, match="round 3: b<->c shares a node"):
        Round(3, (Pair("a", "b"), Pair("b", "c")))


def test_bad_arguments_are_errors_not_guesses():
    with pytest.raises(ValueError, match="listed twice"):
        plan(["a", "b", "a"])
    with pytest.raises(ValueError, match="pairing must be"):
        plan(["a", "b"], "quick")
    with pytest.raises(ValueError, match="steer must be"):
        plan(["a", "b"], groups={}, steer="cross")
    with pytest.raises(ValueError, match="needs groups"):
        plan(["a", "b"], steer="inter-group")
    with pytest.raises(ValueError, match="steer must be"):
        plan(["a", "b"], "all", groups={}, steer="cross")
    with pytest.raises(ValueError, match="'zz', which is not in the nodes"):
        blame(["a", "b"], [PairResult(Pair("a", "zz"), 0, True)])


# ---------------------------------------------------------------- planner properties

sizes = st.integers(min_value=2, max_value=64)


@given(sizes)
def test_all_covers_every_pair_exactly_once_in_minimum_rounds(n):
    nodes = names(n)
    rounds = plan(nodes, "all")
    assert len(rounds) == (n - 1 if n % 2 == 0 else n)
    assert_disjoint(rounds)
    tested = Counter(p for r in rounds for p in r.pairs)
    assert set(tested) == {Pair(a, b) for a, b in combinations(nodes, 2)}
    assert set(tested.values()) == {1}
    assert all(len(r.pairs) == n // 2 for r in rounds)
    assert [r.index for r in rounds] == list(range(len(rounds)))


@given(sizes)
def test_ring_gives_every_node_two_partners_in_two_or_three_rounds(n):
    nodes = names(n)
    rounds = plan(nodes)
    assert_disjoint(rounds)
    met = partners(rounds)
    if n == 2:
        assert shown(rounds) == [["gpu00<->gpu01"]]
        return
    assert len(rounds) == (2 if n % 2 == 0 else 3)
    assert set(met) == set(nodes)
    assert all(len(set(p)) == 2 == len(p) for p in met.values())
    ring_edges = {Pair(nodes[i], nodes[(i + 1) % n]) for i in range(n)}
    assert {p for r in rounds for p in r.pairs} == ring_edges


# ---------------------------------------------------------------- steering


def test_inter_group_ring_crosses_racks_exactly():
    racks = {"r1a": "r1", "r1b": "r1", "r2a": "r2", "r2b": "r2", "r3a": "r3", "r3b": "r3"}
    rounds = plan(list(racks), groups=racks, steer="inter-group")
    assert shown(rounds) == [["r1a<->r2b", "r1b<->r3a", "r2a<->r3b"], ["r1b<->r2b", "r2a<->r3a", "r1a<->r3b"]]
    assert all(racks[p.a] != racks[p.b] for r in rounds for p in r.pairs)


def test_inter_group_with_one_rack_over_half_keeps_the_surplus_together():
    # 4 of 6 nodes in r1: r1's surplus faces itself, each r2 node still faces r1 on both sides
    racks = {"a1": "r1", "a2": "r1", "a3": "r1", "a4": "r1", "b1": "r2", "b2": "r2"}
    rounds = plan(list(racks), groups=racks, steer="inter-group")
    assert shown(rounds) == [["a1<->a4", "a2<->b1", "a3<->b2"], ["a2<->a4", "a3<->b1", "a1<->b2"]]
    pairs = [p for r in rounds for p in r.pairs]
    assert sum(racks[p.a] != racks[p.b] for p in pairs) == 4


def test_intra_group_rings_run_side_by_side_and_a_loner_joins_the_smallest_rack():
    racks = {"a1": "A", "a2": "A", "a3": "A", "a4": "A", "b1": "B", "b2": "B", "b3": "B", "c1": "C"}
    rounds = plan(list(racks), groups=racks, steer="intra-group")
    assert shown(rounds) == [["a1<->a2", "a3<->a4", "b1<->b2", "b3<->c1"], ["a2<->a3", "a1<->a4", "b2<->b3", "b1<->c1"]]


def test_all_pairs_ignores_steering_every_pair_runs_anyway():
    racks = {"a": "r1", "b": "r1", "c": "r2", "d": "r2"}
    assert plan(list(racks), "all", groups=racks, steer="intra-group") == plan(list(racks), "all")


def test_intra_group_loners_form_their_own_ring_and_pairs_of_two_stay_together():
    # x, y, z have no label (each its own group); the rack of two keeps its one link
    racks = {"p1": "P", "p2": "P"}
    rounds = plan(["p1", "x", "p2", "y", "z"], groups=racks, steer="intra-group")
    assert shown(rounds) == [["p1<->p2", "x<->y"], ["y<->z"], ["x<->z"]]


labels = st.lists(st.one_of(st.none(), st.sampled_from("ABCDEFGH")), min_size=2, max_size=64)


def labelled(drawn: list[str | None]) -> tuple[list[str], dict[str, str], dict[str, str]]:
    nodes = names(len(drawn))
    groups = {n: g for n, g in zip(nodes, drawn) if g is not None}
    group_of = {n: groups.get(n, "alone:" + n) for n in nodes}
    return nodes, groups, group_of


@given(labels)
def test_inter_group_steering_is_cross_group_whenever_possible(drawn):
    nodes, groups, group_of = labelled(drawn)
    rounds = plan(nodes, groups=groups, steer="inter-group")
    assert_disjoint(rounds)
    pairs = [p for r in rounds for p in r.pairs]
    cross = sum(group_of[p.a] != group_of[p.b] for p in pairs)
    largest = max(Counter(group_of.values()).values())
    n = len(nodes)
    if n == 2:
        assert len(pairs) == 1
        return
    assert len(rounds) == (2 if n % 2 == 0 else 3)
    assert all(len(set(p)) == 2 for p in partners(rounds).values())
    # a cycle of n holds at most 2 x (nodes outside the largest group) cross pairs; reach that bound
    assert cross == (n if largest <= n // 2 else 2 * (n - largest))


@given(labels)
def test_intra_group_steering_keeps_racks_together(drawn):
    nodes, groups, group_of = labelled(drawn)
    size = Counter(group_of.values())
    rounds = plan(nodes, groups=groups, steer="intra-group")
    assert_disjoint(rounds)
    assert 1 <= len(rounds) <= 3
    met = partners(rounds)
    assert set(met) == set(nodes)  # everyone is tested
    for r in rounds:
        for p in r.pairs:
            if size[group_of[p.a]] >= 2 and size[group_of[p.b]] >= 2:
                assert group_of[p.a] == group_of[p.b], p
    for node in nodes:  # a rack of >= 3 is a ring of its own
        if size[group_of[node]] >= 3:
            assert len(set(met[node])) == 2


# ---------------------------------------------------------------- blame on exact results


def test_bad_node_after_two_ring_rounds_with_its_evidence():
    nodes = names(6)
    results, verdict = localize(nodes, simulated({"gpu03"}))
    assert [r.round_index for r in results] == [0, 0, 0, 1, 1, 1]
    assert verdict.bad_nodes == {
        "gpu03": PairEvidence(
            (Pair("gpu02", "gpu03"), Pair("gpu03", "gpu04")),
            ("gpu02", "gpu04"),
            "2/2 pairs failed; partners pass with others: gpu02 (with gpu01), gpu04 (with gpu05)",
        )
    }
    assert_exact(verdict, nodes, {"gpu03"})


def test_bad_link_after_two_ring_rounds_with_its_evidence():
    nodes = names(6)
    link = Pair("gpu02", "gpu03")
    results, verdict = localize(nodes, simulated(bad_link=link))
    assert len(results) == 6
    assert verdict.bad_links == {
        link: PairEvidence(
            (link,),
            ("gpu01", "gpu04"),
            "gpu02<->gpu03 failed; both ends pass with others: gpu02 (with gpu01), gpu03 (with gpu04)",
        )
    }
    assert_exact(verdict, nodes, set(), link)


def test_two_nodes_failing_stay_unresolved_on_both_ends():
    results, verdict = localize(["a", "b"], simulated({"a"}))
    assert len(results) == 1
    assert verdict.bad_nodes == {} and verdict.good == frozenset()
    assert (
        verdict.unresolved["a"].message
        == "1/1 pairs failed (with b); side unknown: 0 of its failing partners pass with others, 2 needed to blame a"
    )
    assert set(verdict.unresolved) == {"a", "b"}
    assert next_round(["a", "b"], results) is None


def test_one_good_partner_is_not_enough_to_blame_a_node():
    nodes = ["a", "b", "c"]
    results = [PairResult(Pair("b", "c"), 0, True), PairResult(Pair("a", "b"), 1, False)]
    verdict = blame(nodes, results)
    assert verdict.bad_nodes == {} and verdict.bad_links == {}
    assert verdict.unresolved == {
        "a": PairEvidence(
            (Pair("a", "b"),),
            ("b",),
            "1/1 pairs failed (with b); side unknown: "
            "1 of its failing partners passes with others, 2 needed to blame a",
        ),
        "b": PairEvidence((Pair("a", "b"),), (), "1/2 pairs failed (with a); side unknown: a passes with no one yet"),
    }
    assert verdict.good == {"c"}
    # c is the only other witness: one more test, then nothing, if a may not meet a second partner
    assert next_round(nodes, results) == Round(2, (Pair("a", "c"),))
    assert next_round(nodes, results, max_partners=1) is None


def test_partner_of_a_bad_node_is_not_blamed_and_gets_its_own_test():
    # gpu02 and gpu04 are bad; gpu03 sits between them and passed with nobody in the ring
    nodes = names(8)
    run = simulated({"gpu02", "gpu04"})
    ring = [PairResult(p, r.index, ok) for r in plan(nodes) for p, ok in ((res.pair, res.ok) for res in run(r))]
    before = blame(nodes, ring)
    assert set(before.unresolved) == {"gpu01", "gpu02", "gpu03", "gpu04", "gpu05"}
    assert before.bad_nodes == {}
    extra = next_round(nodes, ring)
    assert extra == Round(2, (Pair("gpu00", "gpu02"), Pair("gpu03", "gpu06"), Pair("gpu04", "gpu07")))
    after = blame(nodes, ring + run(extra))
    assert_exact(after, nodes, {"gpu02", "gpu04"})
    assert (
        after.bad_nodes["gpu02"].message
        == "3/3 pairs failed; partners pass with others: gpu00 (with gpu01), gpu01 (with gpu00), gpu03 (with gpu06)"
    )


def test_a_node_failing_only_with_bad_nodes_has_no_verdict_yet():
    nodes = ["a", "b", "c", "d", "x"]
    results = [
        PairResult(Pair("a", "b"), 0, True),
        PairResult(Pair("c", "d"), 0, True),
        PairResult(Pair("x", "a"), 1, False),
        PairResult(Pair("x", "c"), 2, False),
        PairResult(Pair("x", "b"), 3, False),
    ]
    # x is bad (3 witnesses); pretend y failed only with x: no verdict on y
    verdict = blame([*nodes, "y"], [*results, PairResult(Pair("x", "y"), 4, False)])
    assert set(verdict.bad_nodes) == {"x"}
    assert verdict.unresolved == {
        "y": PairEvidence((Pair("x", "y"),), (), "failed only with bad node(s) x; not yet tested with a good partner")
    }
    assert verdict.good == {"a", "b", "c", "d"}
    assert next_round([*nodes, "y"], [*results, PairResult(Pair("x", "y"), 4, False)]) == Round(5, (Pair("a", "y"),))


def test_a_node_passing_once_is_never_a_bad_node_its_failures_are_links():
    nodes = ["a", "b", "c", "d", "e"]
    results = [
        PairResult(Pair("b", "c"), 0, True),
        PairResult(Pair("d", "e"), 0, True),
        PairResult(Pair("a", "b"), 1, True),
        PairResult(Pair("a", "c"), 2, False),
        PairResult(Pair("a", "d"), 3, False),
    ]
    verdict = blame(nodes, results)
    assert verdict.bad_nodes == {}
    assert list(verdict.bad_links) == [Pair("a", "c"), Pair("a", "d")]
    assert verdict.good == {"b", "e"} and verdict.unresolved == {}


def test_a_pair_failing_in_any_of_its_tests_counts_as_failed():
    nodes = ["a", "b", "c", "d"]
    results = [
        PairResult(Pair("a", "b"), 0, True),
        PairResult(Pair("c", "d"), 0, True),
        PairResult(Pair("b", "c"), 1, True),
        PairResult(Pair("b", "c"), 2, False),
    ]
    assert list(blame(nodes, results).bad_links) == [Pair("b", "c")]


def test_untested_nodes_are_neither_good_nor_blamed_and_get_tested_first():
    nodes = ["a", "b", "c"]
    results = [PairResult(Pair("a", "b"), 0, True)]
    verdict = blame(nodes, results)
    assert verdict.untested == {"c"} and verdict.good == {"a", "b"}
    assert next_round(nodes, results) == Round(1, (Pair("a", "c"),))
    assert blame(nodes, []).untested == {"a", "b", "c"}


def test_next_round_serves_every_suspect_where_first_fit_would_serve_one():
    # s1 could take g1 (proven good) or g2; s2 can only take g1: first-fit gives s1 g1 and s2 nothing
    nodes = ["s1", "s2", "g1", "g2"]
    results = [
        PairResult(Pair("s1", "s2"), 0, False),
        PairResult(Pair("g1", "g2"), 0, True),
        PairResult(Pair("s2", "g2"), 1, False),
    ]
    assert next_round(nodes, results) == Round(2, (Pair("g2", "s1"), Pair("g1", "s2")))


def test_localize_rejects_a_result_the_round_did_not_plan():
    def wrong(r: Round) -> list[PairResult]:
        return [PairResult(Pair("a", "c"), r.index, True)]

    with pytest.raises(ValueError, match="round 0 returned a result for a<->c"):
        localize(["a", "b", "c", "d"], wrong)


def test_localize_checks_each_result_against_its_own_round():
    # every planned pair, named either way round, is accepted; a planned pair with another
    # round's index is refused (the check looks pairs up in a set, not by scanning the round)
    nodes = names(8)
    seen: list[int] = []

    def reversed_names(r: Round) -> list[PairResult]:
        seen.append(len(r.pairs))
        return [PairResult(Pair(p.b, p.a), r.index, True) for p in r.pairs]

    results, verdict = localize(nodes, reversed_names)
    assert seen == [4, 4] and len(results) == 8 and verdict.good == set(nodes)

    def late(r: Round) -> list[PairResult]:
        return [PairResult(p, r.index + 1, True) for p in r.pairs]

    with pytest.raises(ValueError, match=r"round 0 returned a result for gpu00<->gpu01 in round 1"):
        localize(nodes, late)


# ---------------------------------------------------------------- localization properties


@settings(deadline=None)
@given(st.integers(min_value=3, max_value=64), st.data())
def test_ring_finds_one_bad_node_in_two_rounds_even_three_odd(n, data):
    nodes = names(n)
    bad = data.draw(st.sampled_from(nodes))
    results, verdict = localize(nodes, simulated({bad}))
    assert_exact(verdict, nodes, {bad})
    assert len({r.round_index for r in results}) == (2 if n % 2 == 0 else 3)
    assert len(results) == n


@settings(deadline=None)
@given(st.integers(min_value=3, max_value=64), st.data())
def test_all_pairs_finds_one_bad_node(n, data):
    nodes = names(n)
    bad = data.draw(st.sampled_from(nodes))
    results, verdict = localize(nodes, simulated({bad}), pairing="all")
    assert_exact(verdict, nodes, {bad})
    assert len(results) == n * (n - 1) // 2


@settings(deadline=None)
@given(st.integers(min_value=8, max_value=64), st.data())
def test_ring_finds_two_random_bad_nodes_within_two_extra_rounds(n, data):
    nodes = names(n)
    bad = set(data.draw(st.lists(st.sampled_from(nodes), min_size=2, max_size=2, unique=True)))
    results, verdict = localize(nodes, simulated(bad))
    assert_exact(verdict, nodes, bad)
    assert len({r.round_index for r in results}) <= (2 if n % 2 == 0 else 3) + 2
    assert len(results) == len({r.pair for r in results})


@settings(deadline=None)
@given(st.integers(min_value=3, max_value=64), st.data())
def test_ring_finds_a_bad_link_between_ring_neighbours(n, data):
    nodes = names(n)
    i = data.draw(st.integers(min_value=0, max_value=n - 1))
    link = Pair(nodes[i], nodes[(i + 1) % n])
    results, verdict = localize(nodes, simulated(bad_link=link))
    # n == 3: each end's other partner is the third node, which passes with both: still a link
    assert_exact(verdict, nodes, set(), link)
    assert len(results) == n


@settings(deadline=None)
@given(st.integers(min_value=3, max_value=64), st.data())
def test_all_pairs_finds_any_bad_link(n, data):
    nodes = names(n)
    a, b = data.draw(st.lists(st.sampled_from(nodes), min_size=2, max_size=2, unique=True))
    _, verdict = localize(nodes, simulated(bad_link=Pair(a, b)), pairing="all")
    assert_exact(verdict, nodes, set(), Pair(a, b))


@settings(deadline=None)
@given(labels, st.data())
def test_localization_never_blames_a_good_node(drawn, data):
    nodes, groups, _ = labelled(drawn)
    bad = set(data.draw(st.lists(st.sampled_from(nodes), max_size=len(nodes), unique=True)))
    link = None
    if data.draw(st.booleans()):
        a, b = data.draw(st.lists(st.sampled_from(nodes), min_size=2, max_size=2, unique=True))
        link = Pair(a, b)
    pairing = data.draw(st.sampled_from(["ring", "all"]))
    steer = data.draw(st.sampled_from(["any", "inter-group", "intra-group"]))
    results, verdict = localize(nodes, simulated(bad, link), pairing=pairing, groups=groups, steer=steer)
    assert set(verdict.bad_nodes) <= bad
    assert set(verdict.bad_links) <= ({link} - {None})
    assert not (verdict.good & bad)
    assert len(results) == len({r.pair for r in results})  # never re-tested
    ends = {n for p in verdict.bad_links for n in (p.a, p.b)}
    # every node has an answer: good, bad, a bad link's end, or unresolved (never silently healthy)
    assert set(nodes) == verdict.good | set(verdict.bad_nodes) | ends | set(verdict.unresolved)


# ---------------------------------------------------------------- next_round is a maximum matching


def best_matching(suspects: list[str], options: dict[str, list[str]]) -> int:
    def best(i: int, used: frozenset[str]) -> int:
        if i == len(suspects):
            return 0
        return max([best(i + 1, used)] + [1 + best(i + 1, used | {g}) for g in options[suspects[i]] if g not in used])

    return best(0, frozenset())


small_results = st.lists(st.tuples(st.sampled_from(list(combinations(names(8), 2))), st.booleans()), max_size=14)


@settings(deadline=None, max_examples=300)
@given(small_results)
def test_next_round_serves_as_many_suspects_as_a_brute_force_matching(drawn):
    nodes = names(8)
    results = [PairResult(Pair(a, b), i, ok) for i, ((a, b), ok) in enumerate(drawn)]
    status: dict[Pair, bool] = {}
    for r in results:
        status[r.pair] = status.get(r.pair, True) and r.ok
    passed = {n: {p.other(n) for p, ok in status.items() if ok and n in (p.a, p.b)} for n in nodes}
    failed = {n: {p.other(n) for p, ok in status.items() if not ok and n in (p.a, p.b)} for n in nodes}
    witnesses = [n for n in nodes if passed[n]]
    bad = {n for n in nodes if not passed[n] and sum(bool(passed[p]) for p in failed[n]) >= 2}
    suspects = [n for n in nodes if not passed[n] and n not in bad and len(failed[n]) < DEFAULT_MAX_PARTNERS]
    options = {s: [g for g in witnesses if Pair(s, g) not in status] for s in suspects}
    want = best_matching(suspects, options)
    got = next_round(nodes, results)
    if want == 0:
        assert got is None
        return
    assert got is not None and len(got.pairs) == want
    assert got.index == len(results)
    for p in got.pairs:
        assert p not in status
        assert (p.a in suspects and p.b in witnesses) or (p.b in suspects and p.a in witnesses)
