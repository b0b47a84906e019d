"""The pair planner and the blame rules at fleet scale (issue 22): simulated rounds, no processes.

A fake fabric answers every planned pair test instantly: a pair fails iff it holds a planted bad
node or is the planted bad link. nodecheck.judging.pair_plan.localize drives the rounds exactly as
ib.pairs does (CommandRunner.pair_rounds: ring plan, then up to DEFAULT_MAX_ROUNDS localization
rounds). "right" means blame() names exactly the planted node(s)/link, leaves nothing unresolved and
calls every other node good. The planner's CPU time is the whole localize() (the fake fabric's share
is a list comprehension); peak memory is tracemalloc's peak during it (Python objects the planner
allocates), beside the process's peak RSS.

    .venv/bin/python benchmarks/bench_pair_plan.py [--sizes 256 1024 2048] [--cases 5] [--seed 1]
"""

from __future__ import annotations

import argparse
import random
import resource
import statistics
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass

from tabulate import tabulate

from nodecheck.judging.pair_plan import DEFAULT_MAX_ROUNDS, Pair, PairResult, Round, blame, localize


@dataclass(frozen=True)
class Case:
    bad_nodes: frozenset[str]
    bad_link: Pair | None = None


def fabric(case: Case) -> Callable[[Round], list[PairResult]]:
    def run_round(r: Round) -> list[PairResult]:
        return [PairResult(p, r.index, not ({p.a, p.b} & case.bad_nodes) and p != case.bad_link) for p in r.pairs]

    return run_round


def right(nodes: list[str], results: list[PairResult], case: Case) -> bool:
    verdict = blame(nodes, results)
    links = {case.bad_link} if case.bad_link else set()
    ends = {n for p in links for n in (p.a, p.b)}
    return (
        set(verdict.bad_nodes) == case.bad_nodes
        and set(verdict.bad_links) == links
        and not verdict.unresolved
        and verdict.good == set(nodes) - case.bad_nodes - ends
    )


def scenarios(nodes: list[str], rng: random.Random, k: int) -> list[tuple[str, list[Case]]]:
    n = len(nodes)
    neighbours = [rng.randrange(n) for _ in range(k)]
    # a leaf switch down: 16 consecutive nodes (inventory order is rack order on most sites)
    leaf = [rng.randrange(n - 16) for _ in range(k)]
    return [
        ("healthy", [Case(frozenset())]),
        ("1 bad node", [Case(frozenset({x})) for x in rng.sample(nodes, k)]),
        ("1 bad link (ring neighbours)", [Case(frozenset(), Pair(nodes[i], nodes[(i + 1) % n])) for i in neighbours]),
        ("2 bad nodes", [Case(frozenset(rng.sample(nodes, 2))) for _ in range(k)]),
        ("16 bad nodes in a row (a leaf)", [Case(frozenset(nodes[i : i + 16])) for i in leaf]),
        ("5% bad nodes, random", [Case(frozenset(rng.sample(nodes, n // 20))) for _ in range(k)]),
    ]


def spread(values: list[float], fmt: str = "{:g}") -> str:
    low, mid, high = min(values), statistics.median(values), max(values)
    return fmt.format(mid) if low == high else f"{fmt.format(mid)} ({fmt.format(low)}-{fmt.format(high)})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[256, 1024, 2048])
    ap.add_argument("--cases", type=int, default=5, help="random placements per scenario")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rows = []
    for n in args.sizes:
        nodes = [f"gpu{i:05d}" for i in range(n)]
        for title, cases in scenarios(nodes, random.Random(args.seed), args.cases):
            rounds, tests, cpu, peak, ok = [], [], [], [], 0
            for case in cases:
                tracemalloc.start()
                started = time.process_time()
                results, _ = localize(nodes, fabric(case))
                cpu.append(time.process_time() - started)
                peak.append(tracemalloc.get_traced_memory()[1] / 2**20)
                tracemalloc.stop()
                rounds.append(len({r.round_index for r in results}))
                tests.append(len(results))
                ok += right(nodes, results, case)
            rows.append(
                [
                    n,
                    title,
                    f"{ok}/{len(cases)}",
                    spread(rounds),
                    spread(tests),
                    spread(cpu, "{:.2f}"),
                    spread(peak, "{:.1f}"),
                ]
            )
    print(
        f"simulated rounds (no processes), ring + up to {DEFAULT_MAX_ROUNDS} localization rounds; "
        f"median (min-max) over the cases\n"
    )
    print(
        tabulate(
            rows,
            headers=["nodes", "fabric", "right verdict", "rounds", "pair tests", "planner CPU s", "planner peak MiB"],
            tablefmt="github",
        )
    )
    print(f"\nprocess peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
