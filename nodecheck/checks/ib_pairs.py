"""ib.pairs: pairwise ib_write_bw in rounds of disjoint pairs, then localization of the bad node or link.

A slow pair says something is wrong between two nodes, not which side. The planner
(nodecheck/judging/pair_plan.py) tests each node with two partners (ring) or every pair (all), then re-pairs
each suspect with nodes that passed until one of three answers holds: the node fails with two good
partners (bad node), the pair fails while both ends pass elsewhere (bad link), or it cannot tell
(the failure stays on both ends). This module plans each pair's steps and judges each test; the
executor (nodecheck/run/active.py) runs the rounds.
"""

from __future__ import annotations

import math
import re
import secrets
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from nodecheck.checks.context import AFTER_RESERVE_S, ActiveContext
from nodecheck.checks.ib import IBSTAT
from nodecheck.checks.params import DeviceName, is_device_name
from nodecheck.core.errors import ParseError
from nodecheck.core.model import Capture, Cut, Outcome, Status, Verdict, excerpt, worst
from nodecheck.core.registry import check
from nodecheck.core.thresholds import Floor, Relative, RelativeRepr, fmt
from nodecheck.judging import pair_plan as planner
from nodecheck.judging.relative import Sample, judge_relative
from nodecheck.parsers.ibstat import parse_ibstat
from nodecheck.parsers.pairtest import made_directory, ready_servers, start_state
from nodecheck.parsers.perftest import parse_perftest
from nodecheck.parsers.sections import Section, split_sections
from nodecheck.probes import pairtest

Verdicts = Iterator[tuple[tuple[str, ...], Verdict]]


class FractionFloor(RelativeRepr):
    """Thresholds as a share of the port's rate from ibstat (0.8 = 80 % of 400 Gb/s = 320)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    fail_below: float = Field(gt=0, le=1)
    warn_below: float | None = Field(None, gt=0, le=1)
    # the relative band does not depend on how the fixed floor is written: a playbook that keeps
    # the default fraction_of_rate can still ask for it
    relative: Relative | None = Field(
        None,
        description="{warn_below_pct, fail_below_pct, min_peers, mad_k}: each node's best bandwidth per HCA "
        "against the other nodes' on that HCA at the same port rate",
    )

    @model_validator(mode="after")
    def _ordered(self) -> FractionFloor:
        if self.warn_below is not None and self.warn_below < self.fail_below:
            raise ValueError("warn_below must be >= fail_below")
        return self


class IbPairs(BaseModel):
    """Which HCAs the pair tests use, how nodes are paired, and how fast a test must be."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    devices: list[DeviceName] | None = Field(
        None,
        min_length=1,
        description="HCAs to test, each paired with the same HCA on the partner "
        "(mlx5_0 with mlx5_0); unset: every Active port of link_layer both nodes have (from ibstat)",
    )
    link_layer: Literal["InfiniBand", "Ethernet", "any"] = Field(
        "InfiniBand", description="with devices unset, which ports are tested (Ethernet = RoCE)"
    )
    pairing: Literal["ring", "all"] = Field(
        "ring",
        description="ring: each node with two partners (2-3 rounds), then localization; "
        "all: every pair once (N-1 rounds)",
    )
    bw_gbps: Floor | None = Field(
        None,
        description="{fail_below, warn_below} in Gb/s for each test's average bandwidth; relative: "
        "{warn_below_pct, fail_below_pct, min_peers, mad_k} also judges each node's best bandwidth per HCA "
        "against the other nodes' best on that HCA at the same port rate (and group_label group)",
    )
    fraction_of_rate: FractionFloor = Field(
        FractionFloor(fail_below=0.8, warn_below=0.9),
        description="used when bw_gbps is unset: thresholds as a share of the HCA's port rate "
        "(the most common one across the nodes, from ibstat) (default fail below 0.8, warn below 0.9)",
    )
    gid_index: int | None = Field(
        None, ge=0, le=255, strict=True, description="RoCE GID index (ib_write_bw -x); unset: perftest picks"
    )
    duration_s: int = Field(5, ge=1, le=600, strict=True, description="ib_write_bw -D per test")
    size: int = Field(65536, ge=2, le=1 << 30, strict=True, description="message size in bytes (-s)")
    qps: int = Field(1, ge=1, le=64, strict=True, description="queue pairs per test (-q)")
    test_timeout_s: float = Field(
        60,
        gt=0,
        le=3600,
        allow_inf_nan=False,
        description="per test: a client still running after this is hung (timeout)",
    )
    max_rounds: int = Field(
        planner.DEFAULT_MAX_ROUNDS,
        ge=0,
        le=256,
        strict=True,
        description="localization rounds at most, after the planned ones",
    )
    tcp_port: int = Field(
        18515,
        ge=1024,
        le=65535 - pairtest.RAIL_PORTS - pairtest.PORT_MOVES * 1000,
        strict=True,
        description="first TCP port for the handshake (perftest's default 18515)",
    )
    group_label: str | None = Field(
        None,
        description="inventory label prefix naming a node's rack or leaf: 'rack' reads labels "
        "like rack=r12; steers pairing with `steer`",
    )
    steer: Literal["any", "intra-group", "inter-group"] = Field(
        "any", description="with group_label: pair within racks (intra-group) or across them (inter-group)"
    )

    @model_validator(mode="after")
    def _valid(self) -> IbPairs:
        if self.test_timeout_s < self.duration_s + 3:
            raise ValueError(
                f"test_timeout_s ({fmt(self.test_timeout_s)}) must be at least duration_s + 3 "
                f"({self.duration_s + 3}): a test that runs its full duration and sets up its "
                "connection is not hung"
            )
        if self.steer != "any" and not self.group_label:
            raise ValueError("steer needs group_label (the inventory label that names a node's rack)")
        return self


@dataclass(frozen=True)
class RailResult:
    """One ib_write_bw test between two nodes on one HCA."""

    round: int
    server: str
    client: str
    device: str
    status: Status
    gbps: float | None
    message: str
    excerpt: str = ""
    floor: float | None = None  # the fail_below it was judged against, Gb/s
    not_run: str = ""  # SKIPPED: why it was not run to the end (deadline, stop)

    def as_dict(self) -> dict:
        return {
            "round": self.round,
            "server": self.server,
            "client": self.client,
            "device": self.device,
            "status": self.status.value,
            "gbps": self.gbps,
            "message": self.message,
            **({"floor": self.floor} if self.floor is not None else {}),
        }


@dataclass(frozen=True)
class PairsReport:
    """The JSON report's ib.pairs block: every test, the node x node matrix, rounds and blame."""

    pairing: str
    rounds: int
    results: tuple[RailResult, ...]
    pairs_tested: int
    all_pairs_would_be: int
    matrix_gbps: Mapping[str, Mapping[str, float | None]]
    bad_nodes: tuple[str, ...]
    bad_links: tuple[tuple[str, str], ...]
    unresolved: tuple[str, ...]
    evidence: Mapping[str, str]  # bad node, "a-b" link or unresolved node -> why
    # node -> its group_label value (the rack), so the report page can sort and aggregate by rack
    groups: Mapping[str, str] | None = None
    group_label: str | None = None
    planned_rounds: int = 0  # the plan's rounds; rounds after them are localization

    def as_json(self, incomplete: Sequence[str]) -> dict:
        return {
            "pairing": self.pairing,
            "rounds": self.rounds,
            "planned_rounds": self.planned_rounds,
            "tests": len(self.results),
            "pairs_tested": self.pairs_tested,
            "all_pairs_would_be": self.all_pairs_would_be,
            "results": [t.as_dict() for t in self.results],
            "matrix_gbps": {a: dict(row) for a, row in self.matrix_gbps.items()},
            "bad_nodes": list(self.bad_nodes),
            "bad_links": [list(p) for p in self.bad_links],
            "unresolved": list(self.unresolved),
            "evidence": dict(self.evidence),
            **({"groups": dict(self.groups or {}), "group_label": self.group_label} if self.group_label else {}),
            **({"incomplete": list(incomplete)} if incomplete else {}),
        }


@check("ib.pairs", probes=[IBSTAT], params=IbPairs, scope="active")
def pairs(ctx: ActiveContext, want: IbPairs) -> Verdicts:
    """Pairwise ib_write_bw between nodes in rounds of disjoint pairs; names the bad node or link.

    Each node is tested with two partners (ring) or all (all); a node that fails with two partners
    that pass elsewhere is the bad node, a pair that fails while both pass elsewhere a bad link."""
    ports: dict[str, dict[str, tuple[int, float]]] = {}
    for node in ctx.nodes:
        try:
            ports[node] = _ports(ctx.captures[node][IBSTAT.name], want)
        except ParseError as e:  # not "no port": the output could not be read
            ports[node] = {}
            yield (node,), Verdict(Status.ERROR, f"cannot read ibstat output: {e.reason}", excerpt=e.excerpt)
            continue
        if not ports[node]:
            yield (
                (node,),
                Verdict(
                    Status.ERROR,
                    "no HCA port to test: "
                    + (
                        f"none of {', '.join(want.devices)} is in ibstat"
                        if want.devices
                        else f"no Active {want.link_layer} port in ibstat"
                    ),
                    observed={"ports": []},
                ),
            )
    usable = [n for n in ctx.order if n in ctx.nodes and ports[n]]
    if len(usable) < 2:
        for node in usable:
            yield (
                (node,),
                Verdict(
                    Status.ERROR,
                    f"no partner: pair tests need at least 2 reachable nodes with a port to test, found {len(usable)}",
                ),
            )
        return
    tests: list[RailResult] = []
    rates = _fleet_rates({n: ports[n] for n in usable})
    tag = secrets.token_hex(4)  # names this run's test directories on the nodes
    cut: dict[int, str] = {}
    groups = _groups(ctx, usable, want.group_label) if want.group_label else None
    # the tests the pairing promised (not localization's extra ones, which judge their suspect):
    # a node one of them never ran for is not PASS on the others, skipped is not healthy
    planned = set(planner.plan(usable, want.pairing, groups, want.steer))
    unrun: dict[str, dict[str, str]] = {}  # node -> partner -> why their planned test did not run

    def round_not_run(rnd: planner.Round, left: float, needs: float) -> None:
        why = cut.setdefault(
            rnd.index,
            f"round {rnd.index + 1} not run: "
            + (
                "stopped by a signal"
                if ctx.stopped()
                else f"{left:.0f} s left before the deadline, it needs {needs:.0f} s"
            ),
        )
        if rnd in planned:
            for pair in rnd.pairs:
                _not_run(unrun, pair.a, pair.b, why)

    def test_pair(rnd: int, pair: planner.Pair) -> list[RailResult]:
        return _run_pair(ctx, want, rnd, pair, ports, rates, tag)

    def judge_pair(rnd: planner.Round, pair: planner.Pair, rails: list[RailResult]) -> bool | None:
        tests.extend(rails)
        if any(r.status is Status.SKIPPED for r in rails):
            if rnd in planned:
                why = next(r.not_run or r.message for r in rails if r.status is Status.SKIPPED)
                _not_run(unrun, pair.a, pair.b, why)
            return None  # never ran or cut (deadline, stop): no evidence either way
        return all(r.status is Status.PASS for r in rails)

    # a pair runs both directions at once, 2 SSH steps at a time; more pairs than that run in waves
    results, blame = ctx.pair_rounds(
        usable,
        test_pair,
        judge_pair,
        wave_s=_wave_s(want),
        not_run=round_not_run,
        pairing=want.pairing,
        groups=groups,
        steer=want.steer,
        max_rounds=want.max_rounds,
    )
    ctx.report(_report_data(usable, tests, results, blame, want, groups, len(planned)))
    for why in cut.values():
        ctx.incomplete(why)
    yield from _verdicts(usable, tests, blame, list(cut.values()), unrun)
    yield from _untested(usable, ports, tests, want)
    band = want.bw_gbps.relative if want.bw_gbps is not None else want.fraction_of_rate.relative
    if band is not None:
        yield from _relative(usable, ports, tests, band, groups, want.group_label)


def _relative(
    nodes: list[str],
    ports: Mapping[str, Mapping[str, tuple[int, float]]],
    tests: list[RailResult],
    band: Relative,
    groups: Mapping[str, str] | None,
    label: str | None,
) -> Verdicts:
    """Each node's best bandwidth per HCA (over every test it sent or received in, as the sweep
    history's measurements() takes it) against the other nodes' best on the same HCA at the same
    port rate, within its group_label group when set. The best, not the worst: a slow partner drags
    a test down, and a node's own fault shows in every test it is in. The pair blame above stands;
    this adds a verdict for a node that passes the fixed floor but lags its peers."""
    best: dict[str, dict[str, float]] = {}
    for t in tests:
        if t.gbps is None or t.status is Status.SKIPPED:
            continue
        for node in (t.server, t.client):
            mine = best.setdefault(node, {})
            mine[t.device] = max(mine.get(t.device, t.gbps), t.gbps)
    samples = []
    for node in nodes:
        where = f", {label}={groups.get(node, 'unset')}" if groups is not None and label else ""
        for device, gbps in sorted(best.get(node, {}).items()):
            group = f"{device} at {fmt(ports[node][device][1])} Gb/s{where}"
            samples.append(Sample((node,), device, group, gbps))
    for s, v in zip(samples, judge_relative(samples, band, what="best bw", unit="Gb/s"), strict=True):
        if v is not None:
            yield s.nodes, Verdict(v.status, f"{s.nodes[0]} {v.message}", v.subject, v.observed, v.expected)


def _not_run(unrun: dict[str, dict[str, str]], a: str, b: str, why: str) -> None:
    unrun.setdefault(a, {}).setdefault(b, why)
    unrun.setdefault(b, {}).setdefault(a, why)


def _wave_s(want: IbPairs) -> float:
    """Seconds a wave of pair tests takes at worst: start the servers, run the clients, collect."""
    return pairtest.READY_WAIT_S + 10 + math.ceil(want.test_timeout_s) + 10


def _round_needs(want: IbPairs, waves: int = 1) -> float:
    """Seconds a round takes at worst (the executor's reckoning: waves, then the reserve)."""
    return waves * _wave_s(want) + AFTER_RESERVE_S


def _fleet_rates(ports: Mapping[str, Mapping[str, tuple[int, float]]]) -> dict[str, float]:
    """Each HCA's most common rate across the nodes: the rate a test is judged against, so a link
    that trained down (400 -> 100 Gb/s) is not excused by its own low rate."""
    by_device: dict[str, Counter] = {}
    for mine in ports.values():
        for device, (_, rate) in mine.items():
            by_device.setdefault(device, Counter())[rate] += 1
    return {d: max(c.items(), key=lambda kv: (kv[1], kv[0]))[0] for d, c in by_device.items()}


def _untested(
    nodes: list[str], ports: Mapping[str, Mapping[str, tuple[int, float]]], tests: list[RailResult], want: IbPairs
) -> Verdicts:
    """An HCA a node should have tested but did not (not Active there, or no partner had it) is
    named, not passed over: the listed devices, else those most nodes have."""
    counts = Counter(d for n in nodes for d in ports[n])
    expected = set(want.devices) if want.devices is not None else {d for d, c in counts.items() if c * 2 > len(nodes)}
    tested: dict[str, set[str]] = {n: set() for n in nodes}
    for t in tests:
        if t.status is not Status.SKIPPED:
            tested[t.server].add(t.device)
            tested[t.client].add(t.device)
    for node in nodes:
        if not tested[node]:
            continue  # its own verdict says it was not tested at all
        absent = sorted(expected - set(ports[node]))
        alone = sorted((expected & set(ports[node])) - tested[node])
        parts = ([f"{', '.join(absent)} not an Active {want.link_layer} port here"] if absent else []) + (
            [f"{', '.join(alone)}: no partner had it"] if alone else []
        )
        if parts:
            yield (
                (node,),
                Verdict(
                    Status.WARN,
                    f"not tested: {'; '.join(parts)}",
                    observed={"untested": absent + alone, "tested": sorted(tested[node])},
                    expected={"devices": sorted(expected)},
                ),
            )


def _ports(ibstat: Capture, want: IbPairs) -> dict[str, tuple[int, float]]:
    """{device: (port number, rate Gb/s)} this node tests; listed devices that are absent are left
    out (ib.ports names them)."""
    facts = parse_ibstat(ibstat.stdout)  # a ParseError is the caller's ERROR for this node
    found: dict[str, tuple[int, float]] = {}
    for p in facts.ports:
        if not is_device_name(p.ca) or p.ca in found:
            continue
        if want.devices is not None:
            if p.ca in want.devices:
                found[p.ca] = (p.number, p.rate_gbps)
        elif want.link_layer in ("any", p.link_layer) and p.state == "Active":
            found[p.ca] = (p.number, p.rate_gbps)
    return found


def _groups(ctx: ActiveContext, nodes: list[str], label: str) -> dict[str, str]:
    groups = {}
    for n in nodes:
        for lab in sorted(ctx.nodes[n].labels):
            for sep in ("=", ":"):
                if lab.startswith(label + sep):
                    groups[n] = lab[len(label) + 1 :]
    return groups


def _run_pair(
    ctx: ActiveContext,
    want: IbPairs,
    rnd: int,
    pair: planner.Pair,
    ports: Mapping[str, Mapping[str, tuple[int, float]]],
    rates: Mapping[str, float],
    tag: str,
) -> list[RailResult]:
    """Both directions at once, every shared HCA: ib_write_bw moves data from client to server
    only, so each node sends and receives (a transmit-only fault shows from either side)."""
    a, b = pair.a, pair.b
    devices = [d for d in ports[a] if d in ports[b]]
    if not devices:
        return [
            RailResult(
                rnd,
                a,
                b,
                "-",
                Status.ERROR,
                None,
                f"{a} and {b} have no HCA in common to test ({', '.join(ports[a])} vs {', '.join(ports[b])})",
            )
        ]
    ways = ctx.each(
        [(a, b), (b, a)],
        lambda w: _one_way(ctx, want, rnd, w[0], w[1], devices, ports, rates, tag),
        workers=2,
    )
    return [r for way in ways for r in way]


def _one_way(
    ctx: ActiveContext,
    want: IbPairs,
    rnd: int,
    server: str,
    client: str,
    devices: list[str],
    ports: Mapping[str, Mapping[str, tuple[int, float]]],
    rates: Mapping[str, float],
    tag: str,
) -> list[RailResult]:
    """Servers on `server`, clients on `client`; the servers are always collected (killed), even
    when the start or the client step failed or timed out."""
    shape = pairtest.TestShape(want.duration_s, want.size, want.qps, want.test_timeout_s)
    rails = [
        pairtest.Rail(
            d,
            ports[server][d][0],
            ports[client][d][0],
            want.tcp_port + i,
            want.gid_index,
        )
        for i, d in enumerate(devices)
    ]
    directory = f"{tag}.r{rnd}.{re.sub(r'[^A-Za-z0-9_.-]', '_', server)}"
    address = ctx.nodes[server].address
    try:
        pairtest.check_arguments(address, directory, *devices)
    except ValueError as e:  # a name or address a node's shell must not get
        return [RailResult(rnd, server, client, r.device, Status.ERROR, None, f"cannot test: {e}") for r in rails]
    start = ctx.run(server, pairtest.start_servers(f"ib_write_bw.r{rnd}.server-start", directory, rails, shape))
    ready = ready_servers(start.stdout)
    clients = None
    listening = [(r, ready[r.device]) for r in rails if r.device in ready]
    try:
        if listening:
            clients = ctx.run(client, pairtest.run_clients(f"ib_write_bw.r{rnd}.client", listening, address, shape))
    finally:
        # a server whose client finished ends by itself; one whose client failed would wait forever
        sections = split_sections(clients.stdout).sections if clients is not None else {}
        finished = (
            clients is not None
            and clients.outcome is Outcome.EXITED
            and clients.exit_code == 0
            and all(
                sections.get(f"client:{r.device}") is not None and sections[f"client:{r.device}"].rc == 0
                for r, _ in listening
            )
        )
        # the private directory start made, from its output (collect finds it by its prefix, and
        # checks it is ours, when start printed none)
        collected = ctx.run(
            server,
            pairtest.collect_servers(
                f"ib_write_bw.r{rnd}.server",
                directory,
                made_directory(start.stdout),
                pairtest.COLLECT_WAIT_S if finished else 0,
            ),
            cleanup=True,
        )
    servers = split_sections(collected.stdout).sections if collected.outcome is Outcome.EXITED else {}
    return [_judge_rail(rnd, server, client, r, start, ready, clients, sections, servers, rates, want) for r in rails]


def _one_line(text: str, limit: int = 200) -> str:
    line = "; ".join(part.strip() for part in text.strip().splitlines() if part.strip())
    return line if len(line) <= limit else line[:limit] + "…"


def _judge_rail(
    rnd: int,
    server: str,
    client: str,
    rail: pairtest.Rail,
    start: Capture,
    ready: Mapping[str, int],
    clients: Capture | None,
    client_sections: Mapping[str, Section],
    server_sections: Mapping[str, Section],
    rates: Mapping[str, float],
    want: IbPairs,
) -> RailResult:
    """One rail's verdict from its pair's captures, each parsed once by the caller."""

    def result(
        status: Status, gbps: float | None, message: str, raw: str = "", floor: float | None = None
    ) -> RailResult:
        return RailResult(rnd, server, client, rail.device, status, gbps, message, excerpt(raw, 1500), floor)

    where = f"{rail.device} {client}->{server}"
    cut = [c for c in (start, clients) if c is not None and (c.outcome is Outcome.SKIPPED or c.cut is Cut.DEADLINE)]
    if cut:  # the deadline or a stop, not the pair: no evidence
        return RailResult(
            rnd,
            server,
            client,
            rail.device,
            Status.SKIPPED,
            None,
            f"{where}: not run to the end: {cut[0].detail}",
            not_run=cut[0].detail,
        )
    if rail.device not in ready and (start.outcome is not Outcome.EXITED or start.exit_code != 0):
        status = Status.TIMEOUT if start.outcome is Outcome.TIMEOUT else Status.ERROR
        return result(status, None, f"{where}: server start on {server} {_how(start)}", start.stderr + start.stdout)
    if rail.device not in ready:
        state, text = start_state(start.stdout, rail.device)
        if state == "notready":
            return result(
                Status.TIMEOUT,
                None,
                f"{where}: ib_write_bw server on {server} did not listen within {pairtest.READY_WAIT_S} s",
                start.stdout,
            )
        run = _parse(text, None)
        why = _one_line(run.error.message) if run is not None and run.error else (_one_line(text) or "no output")
        return result(Status.FAIL, None, f"{where}: server on {server} exited: {why}", text)
    if clients is None or clients.outcome is not Outcome.EXITED:
        status = Status.TIMEOUT if clients is not None and clients.outcome is Outcome.TIMEOUT else Status.ERROR
        return result(
            status,
            None,
            f"{where}: client on {client} {_how(clients)}",
            (clients.stderr + clients.stdout) if clients else "",
        )
    section = client_sections.get(f"client:{rail.device}")
    if section is None:
        return result(
            Status.ERROR, None, f"{where}: client on {client} {_how(clients)}", clients.stdout + clients.stderr
        )
    if section.rc in (124, 137):
        return result(
            Status.TIMEOUT,
            None,
            f"{where}: test hung, killed after {fmt(want.test_timeout_s)} s",
            section.text + _server_text(server_sections, rail.device),
        )
    run = _parse(section.text, section.rc)
    if run is None:
        return result(Status.ERROR, None, f"{where}: cannot read ib_write_bw output (exit {section.rc})", section.text)
    if run.error is not None:
        return result(
            Status.FAIL,
            None,
            f"{where}: {_one_line(run.error.message)}",
            section.text + _server_text(server_sections, rail.device),
        )
    gbps = run.best_average_gbps
    if gbps is None or section.rc != 0:
        return result(Status.ERROR, None, f"{where}: ib_write_bw exited {section.rc} without a result", section.text)
    floor = _floor(want, rates[rail.device])
    v = floor.judge(round(gbps, 2), what=where, unit="Gb/s")
    limit = floor.fail_below if v.status is not Status.WARN else floor.warn_below
    return result(v.status, round(gbps, 2), v.message, section.text if v.status is not Status.PASS else "", limit)


def _floor(want: IbPairs, rate: float) -> Floor:
    if want.bw_gbps is not None:
        return want.bw_gbps
    f = want.fraction_of_rate
    return Floor(
        fail_below=round(rate * f.fail_below, 1),
        warn_below=None if f.warn_below is None else round(rate * f.warn_below, 1),
    )


def _parse(text: str, rc: int | None):
    try:
        return parse_perftest(text, rc)
    except ParseError:
        return None


def _server_text(server_sections: Mapping[str, Section], device: str) -> str:
    section = server_sections.get(f"server:{device}")
    return f"\n--- server ---\n{section.text}" if section else ""


def _how(c: Capture | None) -> str:
    if c is None:
        return "did not run"
    if c.outcome is Outcome.TIMEOUT:
        return f"timed out: {c.detail}"
    if c.outcome is not Outcome.EXITED:
        return f"{c.outcome.value}: {c.detail}"
    first = next((ln.strip() for ln in c.stderr.splitlines() if ln.strip()), "")
    return f"exited {c.exit_code}" + (f": {first}" if first else "")


def _verdicts(
    nodes: list[str], tests: list[RailResult], blame, cut: list[str], unrun: Mapping[str, Mapping[str, str]]
) -> Verdicts:
    skipped = {n for t in tests if t.status is Status.SKIPPED for n in (t.server, t.client)}
    tests = [t for t in tests if t.status is not Status.SKIPPED]
    by_node: dict[str, list[RailResult]] = {n: [] for n in nodes}
    for t in tests:
        by_node[t.server].append(t)
        by_node[t.client].append(t)
    for node, evidence in blame.bad_nodes.items():
        mine = sorted(
            (t for t in by_node[node] if t.status is not Status.PASS),
            key=lambda t: (_partner(t, node), t.round, t.device),
        )
        partners = sorted({_partner(t, node) for t in mine})
        status = _blame_status(mine)
        yield (
            (node,),
            Verdict(
                status,
                f"bad node: fails with {len(partners)}/{len(partners)} partners, "
                f"which pass with others: {_summary(mine, node)}",
                observed={
                    "failed_with": partners,
                    "evidence": evidence.message,
                    "vouching_partners": list(evidence.good_partners),
                    "tests": [t.as_dict() for t in mine],
                },
                excerpt=_first_excerpt(mine),
            ),
        )
    for pair, evidence in blame.bad_links.items():
        mine = [t for t in tests if {t.server, t.client} == {pair.a, pair.b} and t.status is not Status.PASS]
        yield (
            (pair.a, pair.b),
            Verdict(
                _blame_status(mine),
                f"bad link {pair.a}-{pair.b}: both pass with "
                f"other partners, not with each other: {_summary(mine, None)}",
                subject=f"{pair.a}-{pair.b}",
                observed={
                    "evidence": evidence.message,
                    "vouching_partners": list(evidence.good_partners),
                    "tests": [t.as_dict() for t in mine],
                },
                excerpt=_first_excerpt(mine),
            ),
        )
    blamed_links = {frozenset((p.a, p.b)) for p in blame.bad_links}
    for node, evidence in blame.unresolved.items():
        mine = [
            t
            for t in by_node[node]
            if t.status is not Status.PASS
            and _partner(t, node) not in blame.bad_nodes
            and frozenset((t.server, t.client)) not in blamed_links
        ]
        if not mine:  # it failed only with blamed nodes, never passed
            yield (
                (node,),
                Verdict(
                    Status.ERROR,
                    f"not judged: {evidence.message}",
                    observed={"tests": [t.as_dict() for t in by_node[node]]},
                ),
            )
            continue
        partners = sorted({_partner(t, node) for t in mine})
        yield (
            (node,),
            Verdict(
                _blame_status(mine),
                f"failed with {', '.join(partners)}, not enough good "
                f"partners to tell which side: {_summary(mine, node)}",
                observed={"failed_with": partners, "tests": [t.as_dict() for t in mine]},
                excerpt=_first_excerpt(mine),
            ),
        )
    flagged = set(blame.bad_nodes) | set(blame.unresolved) | {n for p in blame.bad_links for n in (p.a, p.b)}
    for node in nodes:
        if node in flagged:
            continue
        mine = by_node[node]
        if not mine:
            if node in skipped or cut:
                why = "; ".join(cut) or "its tests were not started (the run deadline or a stop request)"
                yield (node,), Verdict(Status.SKIPPED, f"not tested: {why}")
            else:
                yield (node,), Verdict(Status.ERROR, "not tested: no round had a partner for it")
            continue
        bad = [t for t in mine if t.status is not Status.PASS and _partner(t, node) not in blame.bad_nodes]
        if bad:  # its failures were blamed elsewhere only in part
            yield (
                (node,),
                Verdict(
                    _blame_status(bad),
                    f"failed with {_summary(bad, node)}",
                    observed={"tests": [t.as_dict() for t in bad]},
                    excerpt=_first_excerpt(bad),
                ),
            )
            continue
        ok = [t for t in mine if t.status is Status.PASS]
        low = min(ok, key=lambda t: t.gbps or 0.0) if ok else None
        partners = sorted({_partner(t, node) for t in ok})
        message = (
            (
                f"{len(ok)} tests with {len(partners)} partner{'' if len(partners) == 1 else 's'} pass; "
                f"slowest {fmt(low.gbps)} Gb/s ({low.device} with {_partner(low, node)})"
            )
            if low
            else "only tests with blamed partners"
        )
        blamed = sorted({_partner(t, node) for t in mine if t.status is not Status.PASS})
        if blamed:
            blamed_on = "that node" if len(blamed) == 1 else "those nodes"
            message += f"; its failures with {', '.join(blamed)} are blamed on {blamed_on}"
        observed = {"partners": partners, "tests": len(ok), "min_gbps": low.gbps if low else None}
        missed = unrun.get(node, {})
        if missed:  # what ran passed, but the plan's other partners never came
            yield (
                (node,),
                Verdict(
                    Status.SKIPPED,
                    f"partly tested: {message}; "
                    + "; ".join(
                        f"{'not all tests with' if p in partners else 'not tested with'} {p}: {why}"
                        for p, why in sorted(missed.items())
                    ),
                    observed={**observed, "untested_partners": sorted(missed)},
                ),
            )
            continue
        yield (node,), Verdict(Status.PASS, message, observed=observed)


def _partner(t: RailResult, node: str) -> str:
    return t.client if t.server == node else t.server


def _blame_status(tests: list[RailResult]) -> Status:
    statuses = {t.status for t in tests}
    if statuses & {Status.FAIL, Status.TIMEOUT}:
        return Status.FAIL  # slow or hung with good partners: the node is bad
    return worst(statuses) if statuses else Status.ERROR


def _summary(tests: list[RailResult], node: str | None, limit: int = 4) -> str:
    """ "node4: 2 HCAs both ways at 120 Gb/s; node6: mlx5_0 sending 118 Gb/s" (per partner), then
    the bound. "sending"/"receiving" is `node`'s side (ib_write_bw's data goes client -> server)."""
    by_partner: dict[str, list[RailResult]] = {}
    for t in tests:
        by_partner.setdefault(_partner(t, node) if node else "", []).append(t)
    parts = []
    for who, mine in by_partner.items():
        speeds = {t.gbps for t in mine}
        if len(speeds) == 1 and None not in speeds:
            devices = {t.device for t in mine}
            what = (
                next(iter(devices)) if len(devices) == 1 else f"{len(devices)} HCAs"
            ) + f" {_direction(mine, node)} at {fmt(mine[0].gbps)} Gb/s"
        else:
            items = [
                f"{t.device} {_direction([t], node)} {fmt(t.gbps)} Gb/s" if t.gbps is not None else t.message
                for t in mine
            ]
            what = ", ".join(items[:limit]) + (f" (+{len(items) - limit} more)" if len(items) > limit else "")
        parts.append((f"{who}: " if who else "") + what)
    floors = {t.floor for t in tests if t.gbps is not None and t.floor is not None}
    bound = f" (expected >= {fmt(min(floors))} Gb/s)" if floors else ""
    return "; ".join(parts) + bound


def _direction(tests: list[RailResult], node: str | None) -> str:
    ways = {(t.client, t.server) for t in tests}
    if len(ways) > 1:
        return "both ways"
    sender, receiver = next(iter(ways))
    if node is None:
        return f"{sender}->{receiver}"
    return "sending" if sender == node else "receiving"


def _first_excerpt(tests: list[RailResult]) -> str:
    return next((t.excerpt for t in tests if t.excerpt), "")


def _report_data(
    nodes,
    tests: list[RailResult],
    results,
    blame,
    want: IbPairs,
    groups: Mapping[str, str] | None = None,
    planned_rounds: int = 0,
) -> PairsReport:
    """The report's ib.pairs block; a pair tested twice shows its slower test in the matrix."""
    matrix: dict[str, dict[str, float | None]] = {}
    for t in tests:
        for a, b in ((t.server, t.client), (t.client, t.server)):
            row = matrix.setdefault(a, {})
            have = row.get(b)
            row[b] = t.gbps if b not in row else (None if have is None or t.gbps is None else min(have, t.gbps))
    rounds = sorted({r.round_index for r in results})
    return PairsReport(
        want.pairing,
        len(rounds),
        tuple(tests),
        len(results),
        len(nodes) * (len(nodes) - 1) // 2,
        matrix,
        tuple(sorted(blame.bad_nodes)),
        tuple((p.a, p.b) for p in blame.bad_links),
        tuple(sorted(blame.unresolved)),
        {
            **{n: e.message for n, e in blame.bad_nodes.items()},
            **{f"{p.a}-{p.b}": e.message for p, e in blame.bad_links.items()},
            **{n: e.message for n, e in blame.unresolved.items()},
        },
        dict(groups or {}),
        want.group_label,
        planned_rounds,
    )
