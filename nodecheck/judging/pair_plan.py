"""Plan pair tests (ib_write_bw) in rounds of disjoint pairs, and say from their results which node
or which link is bad.

Pure and deterministic: no I/O. The orchestrator runs each `Round` (all its pairs at once, a node in
at most one test per round), turns every test into a `PairResult` (ok False = slow, failed or timed
out: the caller decides), and asks `next_round` for the localization pass and `blame` for verdicts.
`localize` is that loop with the round runner injected, shared by the orchestrator and the benchmark.

How blame works (a "witness" is a node with at least one ok pair: its port works with someone):
- bad node: it passed with nobody and failed with >= 2 distinct witnesses. A node that passes with
  anyone is never a bad node; its failures with witnesses become bad links, so several bad links
  at one node point at that node's port or cable.
- bad link: a failed pair whose two ends are both witnesses.
- anything else is unresolved and stays on both ends until `next_round` tests each end that is not
  a witness with a partner that is one (the second pass of Google's cluster-health-scanner).
A pair tested more than once counts as failed if any of its tests failed (a flaky link is a finding).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import zip_longest
from typing import Literal

Pairing = Literal["ring", "all"]
Steer = Literal["any", "intra-group", "inter-group"]

# ring gives each node 2 partners; two more tests with witnesses settle any node whose partners
# work (either one passes, or both fail and the node is bad), so a fifth partner never helps
DEFAULT_MAX_PARTNERS = 4
# localization rounds after the plan: each round serves every suspect once and a suspect needs at
# most 2; the other 2 leave room for suspects whose only free partners were busy in the same round
DEFAULT_MAX_ROUNDS = 4


@dataclass(frozen=True, order=True)
class Pair:
    """An unordered pair of nodes, stored with a < b (by name) so Pair(x, y) == Pair(y, x)."""

    a: str
    b: str

    def __post_init__(self) -> None:
        if self.a == self.b:
            raise ValueError(f"a pair needs two different nodes, got {self.a!r} twice")
        if self.b < self.a:
            a, b = self.b, self.a
            object.__setattr__(self, "a", a)
            object.__setattr__(self, "b", b)

    def other(self, node: str) -> str:
        if node not in (self.a, self.b):
            raise ValueError(f"{node!r} is not in {self}")
        return self.b if node == self.a else self.a

    def __str__(self) -> str:
        return f"{self.a}<->{self.b}"


@dataclass(frozen=True)
class Round:
    """Pairs that run at the same time: no node is in two of them."""

    index: int
    pairs: tuple[Pair, ...]
    of: int = 0  # a planned round: how many rounds the plan has; 0: a localization round (next_round)

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for pair in self.pairs:
            if pair.a in seen or pair.b in seen:
                raise ValueError(f"round {self.index}: {pair} shares a node with another pair")
            seen.update((pair.a, pair.b))


@dataclass(frozen=True)
class PairResult:
    pair: Pair
    round_index: int
    ok: bool  # False: slow, failed or timed out (the caller decides)


@dataclass(frozen=True)
class PairEvidence:
    """Why a node or link was blamed or left unresolved (not model.Evidence, which points at a capture)."""

    failed: tuple[Pair, ...]  # the failing pairs the verdict is about
    # the nodes whose passing tests vouch for it: a bad node's failing partners that pass with others;
    # the nodes a bad link's two ends pass with; an unresolved node's failing partners that pass
    # with others (fewer than needed)
    good_partners: tuple[str, ...]
    message: str  # "2/2 pairs failed; partners pass with others: ..."


@dataclass(frozen=True)
class Blame:
    bad_nodes: dict[str, PairEvidence]
    bad_links: dict[Pair, PairEvidence]
    unresolved: dict[str, PairEvidence]  # both ends of each pair whose side is unknown
    # passed with someone, and every failure it had is explained by a partner blamed as bad
    good: frozenset[str]
    untested: frozenset[str]  # in no result at all: no verdict, never healthy


# ---------------------------------------------------------------- planning


def plan(
    nodes: Sequence[str], pairing: Pairing = "ring", groups: Mapping[str, str] | None = None, steer: Steer = "any"
) -> list[Round]:
    """Rounds of disjoint pairs.

    "all": every unordered pair exactly once (round-robin, circle method): N-1 rounds for even N,
    N for odd N (one node sits out each round). Steering does not apply: every pair runs anyway.
    "ring": the nodes in a cycle, each tested with its two neighbours: 2 rounds for even N >= 4,
    3 for odd N >= 3 (an odd cycle needs 3 colours; the third round is the one closing pair);
    N == 2 is one round of one pair, N < 2 no rounds.

    groups (a rack/leaf label per node; a node without a label is a group of its own) steer the
    ring. "inter-group" orders it so neighbours are in different groups; when one group holds more
    than half the nodes that is impossible, and its surplus nodes face each other while every node
    of the other groups still faces that group (2 x the nodes outside it cross-group pairs: the most
    any cycle has). "intra-group" builds one ring per group, run side by side (2 or 3 rounds). A
    group of one node has no link of its own to test: such nodes form their own ring when there are
    at least 3 of them, else join the smallest group's ring. A group of two has one link, so its
    nodes get one partner each from the plan (localization adds more if that pair fails).
    """
    order = _checked(nodes)
    if pairing not in ("ring", "all"):
        raise ValueError(f"pairing must be 'ring' or 'all', got {pairing!r}")
    if steer not in ("any", "intra-group", "inter-group"):
        raise ValueError(f"steer must be 'any', 'intra-group' or 'inter-group', got {steer!r}")
    if steer != "any" and groups is None:
        raise ValueError(f"steer={steer!r} needs groups (a label per node)")
    if pairing == "all":
        return _numbered(_round_robin(order))
    rings: Sequence[Sequence[str]]
    if steer == "any" or groups is None:  # (groups is None only with steer "any": refused above)
        rings = [order]
    elif steer == "inter-group":
        rings = [_interleaved(_group_members(order, groups))]
    else:  # "intra-group"
        rings = _group_rings(_group_members(order, groups))
    side_by_side = zip_longest(*(_ring_rounds(ring) for ring in rings), fillvalue=[])
    return _numbered([pair for part in parts for pair in part] for parts in side_by_side)


def _checked(nodes: Iterable[str]) -> tuple[str, ...]:
    order = tuple(nodes)
    seen: set[str] = set()
    for node in order:
        if node in seen:
            raise ValueError(f"node {node!r} is listed twice")
        seen.add(node)
    return order


def _numbered(rounds: Iterable[Iterable[Pair]]) -> list[Round]:
    kept = [p for p in (tuple(pairs) for pairs in rounds) if p]
    return [Round(i, pairs, len(kept)) for i, pairs in enumerate(kept)]


def _round_robin(order: Sequence[str]) -> Iterator[list[Pair]]:
    # circle method: slot 0 stays, the others rotate one step; slot i meets slot m-1-i
    if len(order) < 2:
        return
    slots: list[str | None] = [*order, None] if len(order) % 2 else list(order)
    m = len(slots)
    for _ in range(m - 1):
        yield [
            Pair(x, y) for x, y in zip(slots[: m // 2], reversed(slots[m // 2 :])) if x is not None and y is not None
        ]
        slots = [slots[0], slots[-1], *slots[1:-1]]


def _ring_rounds(ring: Sequence[str]) -> list[list[Pair]]:
    n = len(ring)
    if n < 2:
        return []
    if n == 2:
        return [[Pair(ring[0], ring[1])]]
    edges = [Pair(ring[i], ring[(i + 1) % n]) for i in range(n)]
    if n % 2 == 0:
        return [edges[0::2], edges[1::2]]
    return [edges[0 : n - 1 : 2], edges[1 : n - 1 : 2], [edges[n - 1]]]


def _group_members(order: Sequence[str], groups: Mapping[str, str]) -> list[list[str]]:
    """Nodes by group, groups in order of first appearance; an unlabelled node is its own group."""
    members: dict[tuple[str, str], list[str]] = {}
    for node in order:
        key = ("label", groups[node]) if node in groups else ("alone", node)
        members.setdefault(key, []).append(node)
    return list(members.values())


def _interleaved(members: list[list[str]]) -> list[str]:
    # largest group first (stable), then fill the even places and then the odd ones: a group of at
    # most N/2 nodes never lands on two neighbouring places, the closing pair included
    queue = [node for group in sorted(members, key=len, reverse=True) for node in group]
    ring: list[str] = [""] * len(queue)
    half = (len(queue) + 1) // 2
    ring[0::2], ring[1::2] = queue[:half], queue[half:]
    return ring


def _group_rings(members: list[list[str]]) -> list[list[str]]:
    rings = [group for group in members if len(group) >= 2]
    loners = [group[0] for group in members if len(group) == 1]
    if len(loners) >= 3 or not rings:
        rings.append(loners)  # each loner is its own group: this ring is all cross-group
    elif loners:
        smallest = min(range(len(rings)), key=lambda i: len(rings[i]))
        rings[smallest] = rings[smallest] + loners
    return rings


# ---------------------------------------------------------------- judging


@dataclass(frozen=True)
class _Tally:
    order: tuple[str, ...]
    position: dict[str, int]
    status: dict[Pair, bool]  # pair -> ok (False if any of its tests failed)
    passed: dict[str, list[str]]  # node -> partners it passed with, inventory order
    failed: dict[str, list[str]]  # node -> partners it failed with, inventory order
    bad: frozenset[str]

    def witness(self, node: str) -> bool:
        return bool(self.passed[node])

    def vouched(self, node: str) -> list[str]:
        return [p for p in self.failed[node] if self.witness(p)]

    def explained(self, pair: Pair) -> bool:
        return pair.a in self.bad or pair.b in self.bad

    def is_link(self, pair: Pair) -> bool:
        return self.witness(pair.a) and self.witness(pair.b)


def _tally(order: tuple[str, ...], results: Iterable[PairResult]) -> _Tally:
    position = {node: i for i, node in enumerate(order)}
    status: dict[Pair, bool] = {}
    for result in results:
        for node in (result.pair.a, result.pair.b):
            if node not in position:
                raise ValueError(f"result for {result.pair} names {node!r}, which is not in the nodes")
        status[result.pair] = status.get(result.pair, True) and result.ok
    passed: dict[str, list[str]] = {node: [] for node in order}
    failed: dict[str, list[str]] = {node: [] for node in order}
    for pair, ok in status.items():
        for node in (pair.a, pair.b):
            (passed if ok else failed)[node].append(pair.other(node))
    for partners in (*passed.values(), *failed.values()):
        partners.sort(key=position.__getitem__)
    bad = frozenset(n for n in order if not passed[n] and sum(bool(passed[p]) for p in failed[n]) >= 2)
    return _Tally(order, position, status, passed, failed, bad)


def blame(nodes: Sequence[str], results: Iterable[PairResult]) -> Blame:
    """Bad nodes, bad links, unresolved nodes, good and untested nodes from the results so far."""
    return _blame(_tally(_checked(nodes), results))


def _blame(t: _Tally) -> Blame:
    bad_nodes = {n: _bad_node_evidence(t, n) for n in t.order if n in t.bad}
    failing = sorted(
        (p for p, ok in t.status.items() if not ok), key=lambda p: sorted((t.position[p.a], t.position[p.b]))
    )
    bad_links = {p: _bad_link_evidence(t, p) for p in failing if not t.explained(p) and t.is_link(p)}
    unresolved = {}
    for n in t.order:
        evidence = _unresolved_evidence(t, n)
        if evidence is not None:
            unresolved[n] = evidence
    tested = {n for n in t.order if t.passed[n] or t.failed[n]}
    good = frozenset(n for n in t.order if t.witness(n) and all(p in t.bad for p in t.failed[n]))
    return Blame(bad_nodes, bad_links, unresolved, good, frozenset(set(t.order) - tested))


def _pairs(node: str, partners: Iterable[str]) -> tuple[Pair, ...]:
    return tuple(Pair(node, p) for p in partners)


def _with(t: _Tally, nodes: Iterable[str]) -> str:
    return ", ".join(f"{n} (with {t.passed[n][0]})" for n in nodes)


def _bad_node_evidence(t: _Tally, node: str) -> PairEvidence:
    vouched = t.vouched(node)
    k = len(t.failed[node])
    return PairEvidence(
        _pairs(node, t.failed[node]),
        tuple(vouched),
        f"{k}/{k} pairs failed; partners pass with others: {_with(t, vouched)}",
    )


def _bad_link_evidence(t: _Tally, pair: Pair) -> PairEvidence:
    vouchers = tuple(dict.fromkeys([*t.passed[pair.a], *t.passed[pair.b]]))
    return PairEvidence((pair,), vouchers, f"{pair} failed; both ends pass with others: {_with(t, (pair.a, pair.b))}")


def _unresolved_evidence(t: _Tally, node: str) -> PairEvidence | None:
    if node in t.bad:
        return None
    open_partners = [p for p in t.failed[node] if not t.explained(Pair(node, p)) and not t.is_link(Pair(node, p))]
    total = len(t.passed[node]) + len(t.failed[node])
    if open_partners:
        vouched = [p for p in open_partners if t.witness(p)]
        if t.witness(node):
            strangers = [p for p in open_partners if not t.witness(p)]
            why = f"{', '.join(strangers)} {'passes' if len(strangers) == 1 else 'pass'} with no one yet"
        else:
            k = len(t.vouched(node))
            why = f"{k} of its failing partners {'passes' if k == 1 else 'pass'} with others, 2 needed to blame {node}"
        return PairEvidence(
            _pairs(node, open_partners),
            tuple(vouched),
            f"{len(t.failed[node])}/{total} pairs failed (with {', '.join(open_partners)}); side unknown: {why}",
        )
    if t.failed[node] and not t.witness(node):
        return PairEvidence(
            _pairs(node, t.failed[node]),
            (),
            f"failed only with bad node(s) {', '.join(t.failed[node])}; not yet tested with a good partner",
        )
    return None


# ---------------------------------------------------------------- localization


def next_round(
    nodes: Sequence[str], results: Sequence[PairResult], max_partners: int = DEFAULT_MAX_PARTNERS
) -> Round | None:
    """The next localization round: each suspect (a node that is not bad and has passed with
    nobody, untested nodes included) meets a witness it has not been tested with. Proven-good
    partners are preferred, pairs are disjoint, and as many suspects as possible are served (a
    maximum matching). A suspect already tested with max_partners partners gets no more tests.
    None when no suspect is left or none can be served; a tested pair is never tested again."""
    order = _checked(nodes)
    t = _tally(order, results)
    verdict = _blame(t)
    partners = [n for n in order if n in verdict.good]
    partners += [n for n in order if t.witness(n) and n not in verdict.good]
    suspects = [n for n in order if not t.witness(n) and n not in t.bad and len(t.failed[n]) < max_partners]
    options = {s: [g for g in partners if Pair(s, g) not in t.status] for s in suspects}
    matched = _max_matching(suspects, options)
    if not matched:
        return None
    index = max((r.round_index for r in results), default=-1) + 1
    return Round(index, tuple(Pair(s, matched[s]) for s in suspects if s in matched))


def _max_matching(left: Sequence[str], options: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """Maximum bipartite matching by augmenting paths (Kuhn). Options are tried in preference
    order, so proven partners win whenever that costs no suspect its test. Iterative, because a
    path can be as long as the fleet (no graph library is a dependency of nodecheck)."""
    owner: dict[str, str] = {}  # partner -> suspect
    matched: dict[str, str] = {}  # suspect -> partner
    for suspect in left:  # first fit: most suspects keep their first choice
        free = next((g for g in options[suspect] if g not in owner), None)
        if free is not None:
            owner[free], matched[suspect] = suspect, free
    for root in left:  # then reshuffle only to serve the ones left out
        if root not in matched:
            _augment(root, options, owner, matched)
    return matched


def _augment(root: str, options: Mapping[str, Sequence[str]], owner: dict[str, str], matched: dict[str, str]) -> bool:
    seen: set[str] = set()
    via: dict[str, str] = {}  # partner -> the suspect that reached it
    holders, stack = [root], [iter(options[root])]
    while stack:
        partner = next((g for g in stack[-1] if g not in seen), None)
        if partner is None:
            holders.pop()
            stack.pop()
            continue
        seen.add(partner)
        via[partner] = holders[-1]
        if partner not in owner:  # free: flip the path back to the root
            while True:
                suspect = via[partner]
                previous = matched.get(suspect)
                owner[partner], matched[suspect] = suspect, partner
                if suspect == root:
                    return True
                assert previous is not None  # every suspect on the path but the root holds a partner
                partner = previous
        holders.append(owner[partner])
        stack.append(iter(options[owner[partner]]))
    return False


def localize(
    nodes: Sequence[str],
    run_round: Callable[[Round], list[PairResult]],
    pairing: Pairing = "ring",
    groups: Mapping[str, str] | None = None,
    steer: Steer = "any",
    max_rounds: int = DEFAULT_MAX_ROUNDS,
    max_partners: int = DEFAULT_MAX_PARTNERS,
) -> tuple[list[PairResult], Blame]:
    """Run every planned round, then localization rounds until next_round has nothing useful or
    max_rounds localization rounds (after the plan) have run. Returns every result and the blame."""
    results: list[PairResult] = []
    for planned in plan(nodes, pairing, groups, steer):
        results += _ran(planned, run_round(planned))
    for _ in range(max_rounds):
        extra = next_round(nodes, results, max_partners)
        if extra is None:
            break
        results += _ran(extra, run_round(extra))
    return results, blame(nodes, results)


def _ran(planned: Round, results: list[PairResult]) -> list[PairResult]:
    # a result for a pair the round did not hold is a caller bug, not a finding; a set, because a
    # round of a 2,048-node ring holds 1,024 pairs (a tuple scan per result was quadratic)
    held = set(planned.pairs)
    for result in results:
        if result.pair not in held or result.round_index != planned.index:
            raise ValueError(
                f"round {planned.index} returned a result for {result.pair} "
                f"in round {result.round_index}, which it did not plan"
            )
    return list(results)
