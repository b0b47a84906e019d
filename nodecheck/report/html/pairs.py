"""The pair-bandwidth data of the run page, from the report's extras["ib.pairs"]: per node pair the
slower direction's Gb/s (the matrix ib.pairs keeps is already the symmetric min), the worst status
of its tests, its rails; the floor judged against, the blamed nodes and links, the rounds. Pure."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from nodecheck.core.model import Status, worst
from nodecheck.report.diff import natural

AGGREGATE_ABOVE = 64  # nodes: above this the heatmap is group x group, a click shows a block's detail
BLOCK = 32  # nodes per group when no rack label says
ROUND_ROWS_MAX = 400  # rail tests listed in the rounds table (the failures always are, up to this)

_EXPECTED = re.compile(r"(?:expected\s*)?>=\s*([0-9]+(?:\.[0-9]+)?)\s*Gb/s")


@dataclass(frozen=True)
class Rail:
    device: str
    gbps: float | None
    status: str
    round: int
    direction: str  # "client->server"


@dataclass(frozen=True)
class Pair:
    a: str  # earlier in the page's node order
    b: str
    gbps: float | None  # the slowest test of the pair (both directions, every rail); None: no number
    status: str  # "pass" | "fail" | "untested" (every test skipped/cut)
    worst: str  # the worst Status value of its tests ("warn" shows as pass, marked)
    rails: tuple[Rail, ...]
    bad_link: bool


@dataclass(frozen=True)
class RoundRow:
    round: int
    server: str
    client: str
    device: str
    gbps: float | None
    status: str
    message: str


@dataclass(frozen=True)
class RoundSummary:
    round: int
    pairs: int
    tests: int
    failed: int
    min_gbps: float | None
    # "planned", or "localization" (after the plan's rounds: the pairs that tell a bad node from a
    # bad link); "" where the report does not say (written before planned_rounds was kept)
    kind: str = ""


@dataclass(frozen=True)
class PairView:
    nodes: tuple[str, ...]  # page order: by group label, then natural
    groups: Mapping[str, str]  # node -> rack label ({} when the check had no group_label)
    group_label: str
    pairs: tuple[Pair, ...]
    floor: float | None  # fail below, Gb/s
    warn: float | None  # warn below, Gb/s (None: not known)
    top: float  # the best Gb/s seen, the colour scale's end
    bad_nodes: tuple[str, ...]
    bad_links: tuple[tuple[str, str], ...]
    unresolved: tuple[str, ...]
    evidence: Mapping[str, str]
    devices: tuple[str, ...]
    pairing: str
    rounds: tuple[RoundSummary, ...]
    round_rows: tuple[RoundRow, ...]  # failures first, bounded
    round_rows_left_out: int
    pairs_tested: int
    all_pairs_would_be: int
    incomplete: tuple[str, ...]

    @property
    def aggregated(self) -> bool:
        return len(self.nodes) > AGGREGATE_ABOVE

    def block_of(self) -> list[tuple[str, list[str]]]:
        """The groups of the aggregated view, in page order: (label, nodes)."""
        if self.groups:
            out: dict[str, list[str]] = defaultdict(list)
            for n in self.nodes:
                out[self.groups.get(n, "(no label)")].append(n)
            return list(out.items())
        nodes = list(self.nodes)
        return [
            (f"{nodes[i]}…{nodes[min(i + BLOCK, len(nodes)) - 1]}", nodes[i : i + BLOCK])
            for i in range(0, len(nodes), BLOCK)
        ]


def pair_view(extras: Mapping, report_nodes: Sequence[str], floors: Sequence[float] = ()) -> PairView | None:
    """None when the run has no pair test. report_nodes: the report's nodes, to keep a node the
    pair test named in the page order; floors: the fail floors the check's verdicts name."""
    data = extras.get("ib.pairs")
    if not isinstance(data, Mapping):
        return None
    # extras are the nodes' and tools' data, read back from a file: any shape is survived
    matrix = {
        str(a): {str(b): v for b, v in row.items()}
        for a, row in _mapping(data.get("matrix_gbps")).items()
        if isinstance(row, Mapping)
    }
    results = [r for r in _list(data.get("results")) if isinstance(r, Mapping)]
    groups = {str(k): str(v) for k, v in _mapping(data.get("groups")).items()}
    named = [*matrix, *(r.get("server") for r in results), *(r.get("client") for r in results)]
    present: set[str] = {str(n) for n in named if n}
    for row in matrix.values():
        present |= {str(n) for n in row}
    known = [n for n in report_nodes if n in present] + sorted(present - set(report_nodes), key=natural)
    nodes = tuple(sorted(known, key=lambda n: (groups.get(n) is None, natural(groups.get(n, "")), natural(n))))
    index = {n: i for i, n in enumerate(nodes)}

    def key(x: str, y: str) -> tuple[str, str]:
        return (x, y) if index[x] <= index[y] else (y, x)

    rails: dict[tuple[str, str], list[Rail]] = defaultdict(list)
    fail_floors: list[float] = list(floors)
    warn_floors: list[float] = []
    pass_bounds: list[float] = []
    for r in results:
        server, client = str(r.get("server", "")), str(r.get("client", ""))
        if server not in index or client not in index or server == client:
            continue
        status = str(r.get("status", "error"))
        gbps = _float(r.get("gbps"))
        rails[key(server, client)].append(
            Rail(str(r.get("device", "")), gbps, status, _int(r.get("round")), f"{client}->{server}")
        )
        bound = _float(r.get("floor"))  # the fail floor it was judged against, where the JSON has it
        if bound is not None:
            fail_floors.append(bound)
        said = _EXPECTED.search(str(r.get("message", "")))
        if said:  # core.thresholds.Floor's words: FAIL and WARN name their own bound, PASS the higher one
            {"fail": fail_floors, "warn": warn_floors, "pass": pass_bounds}.get(status, []).append(float(said.group(1)))
    bad_links = tuple(tuple(p) for p in _list(data.get("bad_links")) if isinstance(p, (list, tuple)) and len(p) == 2)
    bad_set = {frozenset(p) for p in bad_links}
    pairs = []
    cells: set[tuple[str, str]] = set(rails)
    for a, row in matrix.items():
        for b in row:
            if a in index and b in index and a != b:
                cells.add(key(str(a), str(b)))
    for a, b in sorted(cells, key=lambda p: (index[p[0]], index[p[1]])):
        tests = rails.get((a, b), [])
        value = _float((matrix.get(a) or {}).get(b))
        if value is None:
            value = _float((matrix.get(b) or {}).get(a))
        numbers = [t.gbps for t in tests if t.gbps is not None]
        if value is None and numbers:
            value = min(numbers)
        judged = [t.status for t in tests if t.status != Status.SKIPPED.value]
        worst_status = worst(Status(s) for s in judged).value if judged else Status.SKIPPED.value
        if not judged and value is None:
            status = "untested"
        elif worst_status in (Status.PASS.value, Status.WARN.value):
            status = "pass"
        else:
            status = "fail"
        pairs.append(
            Pair(
                a,
                b,
                value,
                status,
                worst_status,
                tuple(sorted(tests, key=lambda t: (t.device, t.direction))),
                frozenset((a, b)) in bad_set,
            )
        )
    floor = min(fail_floors) if fail_floors else None
    warn = min(warn_floors) if warn_floors else None
    if warn is None and pass_bounds and (floor is None or min(pass_bounds) > floor):
        if floor is None and not warn_floors:
            floor = min(pass_bounds)  # nothing failed or warned: the bound passes name is the floor
        else:
            warn = min(pass_bounds)
    tops = [p.gbps for p in pairs if p.gbps is not None] + [floor or 0.0, warn or 0.0]
    summaries, rows, left_out = _rounds(results, _int(data.get("planned_rounds")))
    return PairView(
        nodes=nodes,
        groups=groups,
        group_label=str(data.get("group_label") or ""),
        pairs=tuple(pairs),
        floor=floor,
        warn=warn,
        top=max(tops) or 1.0,
        bad_nodes=tuple(str(n) for n in _list(data.get("bad_nodes"))),
        bad_links=tuple((str(a), str(b)) for a, b in bad_links),
        unresolved=tuple(str(n) for n in _list(data.get("unresolved"))),
        evidence={str(k): str(v) for k, v in _mapping(data.get("evidence")).items()},
        devices=tuple(sorted({r.device for t in rails.values() for r in t}, key=natural)),
        pairing=str(data.get("pairing", "")),
        rounds=summaries,
        round_rows=rows,
        round_rows_left_out=left_out,
        pairs_tested=_int(data.get("pairs_tested")),
        all_pairs_would_be=_int(data.get("all_pairs_would_be")),
        incomplete=tuple(str(x) for x in _list(data.get("incomplete"))),
    )


def _rounds(results: list[Mapping], planned: int = 0) -> tuple[tuple[RoundSummary, ...], tuple[RoundRow, ...], int]:
    """Per round its pairs, tests, failures and slowest test (a round after the `planned` ones is
    localization; 0: not known, a report written before the count was kept); the tests, failures
    first, at most ROUND_ROWS_MAX of them, and how many were left out."""
    by_round: dict[int, list[Mapping]] = defaultdict(list)
    for r in results:
        by_round[_int(r.get("round"))].append(r)
    summaries = []
    for rnd in sorted(by_round):
        tests = by_round[rnd]
        numbers = [g for g in (_float(t.get("gbps")) for t in tests) if g is not None]
        summaries.append(
            RoundSummary(
                rnd,
                len({frozenset((str(t.get("server")), str(t.get("client")))) for t in tests}),
                len(tests),
                sum(1 for t in tests if t.get("status") not in ("pass", "warn")),
                min(numbers) if numbers else None,
                kind="" if planned <= 0 else ("localization" if rnd > planned else "planned"),
            )
        )
    ranked = sorted(
        results,
        key=lambda t: (
            t.get("status") in ("pass", "warn"),
            _int(t.get("round")),
            natural(str(t.get("server"))),
            str(t.get("device")),
        ),
    )
    rows = tuple(
        RoundRow(
            _int(t.get("round")),
            str(t.get("server", "")),
            str(t.get("client", "")),
            str(t.get("device", "")),
            _float(t.get("gbps")),
            str(t.get("status", "")),
            str(t.get("message", "")),
        )
        for t in ranked[:ROUND_ROWS_MAX]
    )
    return tuple(summaries), rows, max(0, len(ranked) - ROUND_ROWS_MAX)


def _mapping(v) -> Mapping:
    return v if isinstance(v, Mapping) else {}


def _list(v) -> list:
    return v if isinstance(v, list) else []


def _float(v) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if v == v and v not in (float("inf"), float("-inf")) else None


def _int(v) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0
