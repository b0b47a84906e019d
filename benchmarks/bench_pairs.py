"""Pair-test localization cost: rounds and ib_write_bw tests until the verdict is right, ring +
localization versus all-pairs, for every position of one bad node and for one bad link.

Pure simulation: no SSH, no ib_write_bw, no cluster. A simulated round runner says a pair fails iff
it holds a planted bad node or is the planted bad link; nodecheck.judging.pair_plan.localize drives the rounds
exactly as ib.pairs does. "Right" means blame() names exactly the planted node(s)/link, leaves
nothing unresolved and calls every other node good. "right after" is the first round after which
blame() on the results so far is right, over the right cases only (all-pairs keeps running to
its end regardless). Ring tests only ring neighbours, so a bad link between two nodes that are not
neighbours is missed by design: the "random pair" row shows how often.

    .venv/bin/python benchmarks/bench_pairs.py [--nodes 32] [--seed 1]
"""

from __future__ import annotations

import argparse
import random
import statistics
from collections.abc import Callable
from dataclasses import dataclass

from tabulate import tabulate

from nodecheck.judging.pair_plan import Pair, PairResult, Round, blame, localize

TARGET_ROUNDS_ONE_BAD_NODE = 3  # 2 ring rounds for even N, 3 for odd (an odd cycle)


@dataclass(frozen=True)
class Case:
    bad_nodes: frozenset[str]
    bad_link: Pair | None = None


@dataclass(frozen=True)
class Outcome:
    rounds: int
    tests: int
    right: bool
    right_after: int | None  # rounds run when the verdict first became right


def simulated(case: Case) -> Callable[[Round], list[PairResult]]:
    def run_round(r: Round) -> list[PairResult]:
        return [PairResult(p, r.index, not ({p.a, p.b} & case.bad_nodes) and p != case.bad_link) for p in r.pairs]

    return run_round


def is_right(nodes: list[str], results: list[PairResult], case: Case) -> bool:
    verdict = blame(nodes, results)
    links = {case.bad_link} if case.bad_link else set()
    ends = {n for p in links for n in (p.a, p.b)}
    return (
        set(verdict.bad_nodes) == case.bad_nodes
        and set(verdict.bad_links) == links
        and not verdict.unresolved
        and verdict.good == set(nodes) - case.bad_nodes - ends
    )


def run(nodes: list[str], case: Case, pairing: str) -> Outcome:
    results, _ = localize(nodes, simulated(case), pairing=pairing)
    rounds = sorted({r.round_index for r in results})
    right_after = next(
        (
            k + 1
            for k, last in enumerate(rounds)
            if is_right(nodes, [r for r in results if r.round_index <= last], case)
        ),
        None,
    )
    return Outcome(len(rounds), len(results), is_right(nodes, results, case), right_after)


def spread(values: list[int]) -> str:
    if not values:
        return "-"
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{mid:g}" if low == high else f"{mid:g} ({low}-{high})"


def scenarios(nodes: list[str], rng: random.Random) -> list[tuple[str, list[Case]]]:
    n = len(nodes)
    random_links = [Pair(*rng.sample(nodes, 2)) for _ in range(n)]
    return [
        ("1 bad node, each position", [Case(frozenset({x})) for x in nodes]),
        (
            "1 bad link, ring neighbours, each",
            [Case(frozenset(), Pair(nodes[i], nodes[(i + 1) % n])) for i in range(n)],
        ),
        ("1 bad link, random pair", [Case(frozenset(), link) for link in random_links]),
        ("2 bad nodes, random", [Case(frozenset(rng.sample(nodes, 2))) for _ in range(n)]),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=32)
    ap.add_argument("--seed", type=int, default=1, help="for the random links and node pairs")
    args = ap.parse_args()
    nodes = [f"gpu{i:03d}" for i in range(args.nodes)]
    rows = []
    one_bad_rounds: list[int] = []
    for title, cases in scenarios(nodes, random.Random(args.seed)):
        for label, pairing in (("ring + localization", "ring"), ("all-pairs", "all")):
            outcomes = [run(nodes, case, pairing) for case in cases]
            if title.startswith("1 bad node") and pairing == "ring":
                one_bad_rounds = [o.rounds if o.right else 10**6 for o in outcomes]
            rows.append(
                [
                    title,
                    label,
                    f"{sum(o.right for o in outcomes)}/{len(outcomes)}",
                    spread([o.rounds for o in outcomes]),
                    spread([o.tests for o in outcomes]),
                    spread([o.right_after for o in outcomes if o.right_after is not None]),
                ]
            )
    print(f"{args.nodes} nodes, simulated (no SSH); median (min-max) over the cases\n")
    print(
        tabulate(
            rows,
            headers=["scenario", "pairing", "right verdict", "rounds run", "tests run", "right after round"],
            tablefmt="github",
        )
    )
    worst = max(one_bad_rounds, default=0)
    print(
        f"\ntarget <= {TARGET_ROUNDS_ONE_BAD_NODE} rounds to the right verdict for one bad node (ring): "
        f"{'met' if worst <= TARGET_ROUNDS_ONE_BAD_NODE else 'MISSED'} (worst {worst})"
    )


if __name__ == "__main__":
    main()
