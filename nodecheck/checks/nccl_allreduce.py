"""nccl-tests against bus-bandwidth thresholds: on each node alone (nccl.allreduce_single) and across
the run's nodes through mpirun or srun (nccl.allreduce_multi), which localizes a failure with 2-node
tests (the pair planner of ib.pairs) and names the node that drags every pair down.

If nccl-tests pass at the job's scale the job's own code is the suspect; if they fail, the fabric or
a node is. A hang is a finding too: every run is bounded on the node by `timeout`, and what it printed
before it was killed says where it stuck (never started / NCCL init / mid-sweep at size X).

Here: the parameters, the checks and the tests' orchestration. The commands are built by
nodecheck/probes/nccl_tests.py, the output is read by nodecheck/parsers/nccl_tests.py, and a run's
judging and the verdicts of a localization are nodecheck/judging/nccl_runs.py.
"""

from __future__ import annotations

import dataclasses
import re
import secrets
from collections.abc import Iterator, Mapping, Sequence
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from nodecheck.checks.context import AFTER_RESERVE_S, ActiveContext
from nodecheck.core.hostlist import fold
from nodecheck.core.model import Capture, Outcome, Probe, Status, Verdict, excerpt, worst
from nodecheck.core.progress import single
from nodecheck.core.redact import redact_text
from nodecheck.core.registry import Captures, check
from nodecheck.core.thresholds import Floor, Relative
from nodecheck.judging import pair_plan as planner
from nodecheck.judging.nccl_runs import (
    Localization,
    MultiReport,
    MultiTest,
    PairTest,
    RunVerdict,
    first_line,
    human,
    judge_localization,
    judge_output,
)
from nodecheck.judging.relative import Sample, judge_relative
from nodecheck.parsers.tools import missing_tools
from nodecheck.probes import nccl_tests as nccltest
from nodecheck.probes.env_policy import LOADS_OR_WRITES, EnvName, EnvValue

Verdicts = Iterator[Verdict]
Grouped = tuple[tuple[str, ...], Verdict]

_SIZE = re.compile(r"^\s*(\d+)\s*([KMGT]?)(i?B)?\s*$", re.IGNORECASE)
_UNIT = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def _bytes(value: object) -> object:
    """8, "8", "1G", "1GiB", "512M" -> bytes (nccl-tests' own K/M/G suffixes are powers of 1024)."""
    if isinstance(value, bool):
        raise ValueError("a size in bytes, not true/false")
    if isinstance(value, str):
        m = _SIZE.match(value)
        if not m:
            raise ValueError(f"{value!r} is not a size: use bytes (1073741824) or K/M/G/T (1G)")
        return int(m.group(1)) * _UNIT[m.group(2).upper()]
    return value


ByteSize = Annotated[int, BeforeValidator(_bytes), Field(ge=0, le=1 << 44)]
Collective = Literal["all_reduce", "all_gather", "reduce_scatter", "alltoall"]
Variant = Literal["default", "network_only", "nvlink_only"]
_PATH = r"^/[A-Za-z0-9_./+-]*$"


class NcclSweep(BaseModel):
    """What every nccl-tests check shares: the sweep, the thresholds and the environment."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    collectives: list[Collective] = Field(
        ["all_reduce"], min_length=1, description="which *_perf tests run, each its own verdict"
    )
    variants: list[Variant] = Field(
        ["default"],
        min_length=1,
        description=(
            "default; network_only (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1: every byte through the NIC); "
            "nvlink_only (NCCL_P2P_LEVEL=NVL, no SHM/IB fallback): each its own verdict, so a slow "
            "result says whether NVLink or the network is slow"
        ),
    )
    min_bytes: ByteSize = Field(8, description="-b: first message size (bytes or 1K/1M/1G)")
    max_bytes: ByteSize = Field(8 << 30, description="-e: last message size")
    step_factor: int = Field(2, ge=2, le=1024, strict=True, description="-f: size multiplier per step")
    iters: int = Field(20, ge=1, le=100000, strict=True, description="-n")
    warmup_iters: int = Field(5, ge=0, le=100000, strict=True, description="-w")
    check: bool = Field(True, description="-c 1: validate results (#wrong); off, corruption goes unseen")
    datatype: Literal["int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16"] = (
        "float"
    )
    op: Literal["sum", "prod", "max", "min", "avg", "all"] = "sum"
    plateau_min_bytes: ByteSize = Field(
        1 << 30,
        description=(
            "rows at or above this size are the plateau, judged against busbw_gbps (smaller sizes are latency-bound)"
        ),
    )
    busbw_gbps: Floor | None = Field(
        None,
        description=(
            "{fail_below, warn_below} in GB/s (nccl-tests' busbw, 1e9 bytes/s) for the slowest plateau "
            "row; unset: only correctness and completion are judged. relative: {warn_below_pct, "
            "fail_below_pct, min_peers, mad_k}: also against the other nodes' busbw in the same test "
            "(single: each node's; multi: each 2-node localization test's)"
        ),
    )
    variant_busbw_gbps: dict[Variant, Floor] = Field(
        {},
        description="thresholds per variant, e.g. {network_only: {fail_below: 40}}: a network-only "
        "run moves a node's own GPU traffic through its NICs and is slower by design (default busbw_gbps)",
    )
    env: dict[EnvName, EnvValue] = Field(
        {},
        description="environment of the test (the job's: NCCL_SOCKET_IFNAME, NCCL_IB_HCA, ...); "
        "--job-env FILE overrides it (except what names a library, plugin or file); NCCL_DEBUG defaults to VERSION",
    )
    job_env: dict[EnvName, EnvValue] = Field(
        {},
        description="set by nodecheck from --job-env FILE, not written in a playbook: the job's variables, "
        "over `env`; one that names a library, plugin, program or file stays behind (env_policy.job_refuses): the "
        "test runs as root",
    )
    test_timeout_s: float = Field(
        600,
        gt=0,
        le=86400,
        allow_inf_nan=False,
        description=(
            "each test is killed after this (timeout on the node); a killed test is a hang, classified "
            "by how far its output got"
        ),
    )
    binary_dir: Annotated[str, Field(pattern=_PATH)] | None = Field(
        None, description="where the *_perf binaries are (e.g. /opt/nccl-tests/build); unset: PATH"
    )
    json_report: Literal["auto", "on", "off"] = Field(
        "auto", description="read nccl-tests' JSON report (-J) when the binary has it (auto), always, or never"
    )

    @model_validator(mode="after")
    def _sizes(self):
        if self.max_bytes < self.min_bytes:
            raise ValueError(f"max_bytes ({self.max_bytes}) must be >= min_bytes ({self.min_bytes})")
        if (self.busbw_gbps is not None or self.variant_busbw_gbps) and self.plateau_min_bytes > self.max_bytes:
            raise ValueError(
                f"plateau_min_bytes ({human(self.plateau_min_bytes)}) is above max_bytes "
                f"({human(self.max_bytes)}): no row would be judged"
            )
        return self

    def floor(self, variant: Variant) -> Floor | None:
        return self.variant_busbw_gbps.get(variant, self.busbw_gbps)

    def test_env(self, variant: str) -> dict[str, str]:
        """The environment the test runs with: `env`, the job's over it as far as each travels."""
        return nccltest.job_env(self.env, variant, self.job_env)

    def ran_without(self, verdict: Verdict) -> Verdict:
        """`verdict` with what of the environment the test ran without: every name left behind and why
        in observed["env_not_passed"] (names only), and, where the job's library, plugin or file
        variables were refused, a note in the message, so no one takes the job's plugin as tested."""
        left = nccltest.left_behind(self.env, self.job_env)
        if not left:
            return verdict
        loading = [name for name, why in left.items() if why == LOADS_OR_WRITES]
        note = (
            f"; the test ran without the job's {', '.join(loading)}: each {LOADS_OR_WRITES} (a playbook's "
            "env: may set it)"
            if loading
            else ""
        )
        return dataclasses.replace(
            verdict, message=verdict.message + note, observed={**verdict.observed, "env_not_passed": left}
        )

    def sweep(self, collective: str) -> nccltest.Sweep:
        return nccltest.Sweep(
            collective,
            self.min_bytes,
            self.max_bytes,
            self.step_factor,
            self.iters,
            self.warmup_iters,
            self.check,
            self.datatype,
            self.op,
        )


class NcclSingle(NcclSweep):
    """nccl.allreduce_single: every node at once, one process driving all its GPUs."""

    gpus: int = Field(8, ge=1, le=64, strict=True, description="-g: GPUs per node the test drives")

    @property
    def related(self) -> bool:
        """Some variant's band judges a node against the others (`relative:`): a node alone says nothing."""
        return any((f := self.floor(v)) is not None and f.relative is not None for v in self.variants)


class NcclMulti(NcclSweep):
    """nccl.allreduce_multi: one test across the selected nodes through a launcher."""

    launcher: Literal["mpirun", "srun"] = Field(
        "mpirun", description="mpirun (Open MPI / HPC-X, -H host list) or srun (inside an allocation)"
    )
    launcher_args: list[Annotated[str, Field(pattern=nccltest.WORD.pattern)]] = Field(
        [], description="extra launcher arguments, e.g. [--allow-run-as-root] or [--mca, pml, ucx]"
    )
    launch_node: str | None = Field(
        None, description="where the launcher runs (rank 0's node); unset: the first node of the run"
    )
    ranks_per_node: int = Field(1, ge=1, le=64, strict=True, description="processes per node")
    gpus_per_rank: int = Field(8, ge=1, le=64, strict=True, description="-g per process")
    localize: bool = Field(
        True,
        description="when the test fails: 2-node tests (ring, then suspects "
        "re-paired with good partners) to name the node or link",
    )
    pairing: Literal["ring", "all"] = "ring"
    max_rounds: int = Field(planner.DEFAULT_MAX_ROUNDS, ge=0, le=64, strict=True)
    pair_busbw_gbps: Floor | None = Field(
        None,
        description="thresholds for the 2-node tests (default: busbw_gbps); a variant listed in "
        "variant_busbw_gbps judges its 2-node tests by that",
    )
    pair_max_bytes: ByteSize | None = Field(None, description="-e of the 2-node tests (default max_bytes)")
    pair_timeout_s: float | None = Field(
        None, gt=0, le=86400, allow_inf_nan=False, description="per 2-node test (default test_timeout_s)"
    )

    @model_validator(mode="after")
    def _multi(self):
        if "nvlink_only" in self.variants:
            raise ValueError("nvlink_only is a single-node variant (nccl.allreduce_single)")
        if self.pair_max_bytes is not None and self.pair_max_bytes < self.min_bytes:
            raise ValueError(f"pair_max_bytes ({self.pair_max_bytes}) must be >= min_bytes ({self.min_bytes})")
        judged = self.busbw_gbps is not None or self.pair_busbw_gbps is not None or self.variant_busbw_gbps
        if self.pair_max_bytes is not None and judged and self.pair_max_bytes < self.plateau_min_bytes:
            raise ValueError(
                f"pair_max_bytes ({human(self.pair_max_bytes)}) is below plateau_min_bytes "
                f"({human(self.plateau_min_bytes)}): no pair row would be judged"
            )
        return self

    def pair_floor(self, variant: Variant) -> Floor | None:
        """A variant's own floor first (a network-only pair is slow by design), then the pairs', then
        busbw_gbps."""
        return self.variant_busbw_gbps.get(variant) or self.pair_busbw_gbps or self.busbw_gbps


# ---------------------------------------------------------------- naming a test


def subject(collective: str, variant: str) -> str:
    words = nccltest.VARIANT_WORDS[variant]
    return f"{collective} ({words})" if words else collective


# ---------------------------------------------------------------- nccl.allreduce_single


def _single_name(collective: str, variant: str) -> str:
    return f"nccl_{collective}" + ("" if variant == "default" else f"_{variant}")


def single_probes(want: NcclSingle) -> list[Probe]:
    return [
        nccltest.single_node(
            _single_name(c, v),
            want.sweep(c),
            want.gpus,
            want.test_env(v),
            want.test_timeout_s,
            want.binary_dir,
            want.json_report,
        )
        for v in want.variants
        for c in want.collectives
    ]


def judge_single(out: Captures, want: NcclSingle) -> Verdicts:
    """One node's verdicts, one per variant and collective (the fixed floors only)."""
    for variant in want.variants:
        for collective in want.collectives:
            capture = out[_single_name(collective, variant)]
            what = subject(collective, variant)
            floor = want.floor(variant)
            t = judge_output(
                capture.stdout, want, what, expected_ranks=want.gpus, floor=floor, env=want.test_env(variant)
            )
            yield want.ran_without(
                t.verdict(what, {"busbw_gbps": floor.model_dump() if floor else None, "gpus": want.gpus})
            )


def relative_single(by_node: Mapping[str, Sequence[Verdict]], want: NcclSingle) -> dict[str, list[Verdict]]:
    """The run's nodes' allreduce_single verdicts with each node's plateau busbw judged against the
    other nodes' in the same test (collective and variant, at the same GPU count), where the
    variant's busbw floor has `relative`. A node below its peers gets the relative finding folded
    into its verdict for that test (status the worse, message and observed both kept: the sweep
    history reads busbw_plateau_gbs from it). Pure: the caller passes every node's verdicts at once.

    A node-scope check sees one node at a time, so this runs after all nodes were judged (the
    runner's relate step); a node judged alone (prolog) has no peers and keeps its fixed floor."""
    variant_of = {subject(c, v): v for v in want.variants for c in want.collectives}
    out = {node: list(verdicts) for node, verdicts in by_node.items()}
    for variant in want.variants:
        floor = want.floor(variant)
        band = floor.relative if floor is not None else None
        if band is None:
            continue
        where: list[tuple[str, int]] = []
        samples: list[Sample] = []
        for node, verdicts in out.items():
            for i, v in enumerate(verdicts):
                busbw = v.observed.get("busbw_plateau_gbs")
                if variant_of.get(v.subject) != variant or not isinstance(busbw, (int, float)):
                    continue
                where.append((node, i))
                samples.append(Sample((node,), v.subject, f"{v.subject}, {want.gpus} GPUs", float(busbw)))
        for (node, i), rel in zip(where, judge_relative(samples, band, what="busbw", unit="GB/s"), strict=True):
            out[node][i] = with_relative(out[node][i], rel)
    return out


def with_relative(verdict: Verdict, relative: Verdict | None) -> Verdict:
    """`verdict` with a relative finding folded in when it is the more severe: its status, both
    messages, the fixed judgment's observed and expected kept beside the relative ones."""
    if relative is None or relative.status.rank <= verdict.status.rank:
        return verdict
    return dataclasses.replace(
        verdict,
        status=relative.status,
        message=f"{verdict.message}; {relative.message}",
        observed={**verdict.observed, "relative": dict(relative.observed)},
        expected={**verdict.expected, "relative": dict(relative.expected)},
    )


@check("nccl.allreduce_single", probes=single_probes, params=NcclSingle, relate=relative_single)
def allreduce_single(out: Captures, want: NcclSingle) -> Verdicts:
    """nccl-tests on every node at once, one process driving all its GPUs (-g): bus bandwidth at
    the plateau sizes against busbw_gbps, data corruption (#wrong), hangs classified by where they stopped.

    Variants network_only / nvlink_only tell a slow NVLink from a slow NIC."""
    return judge_single(out, want)


# ---------------------------------------------------------------- nccl.allreduce_multi


def multi_probes(want: NcclMulti) -> list[Probe]:
    """Before the test: which nodes have the binaries (a node without them is named, not part of the run)."""
    tools = [nccltest.tool_path(c, want.binary_dir) for c in want.collectives] + [want.launcher]
    return [nccltest.tools_probe(tools)]


@check("nccl.allreduce_multi", probes=multi_probes, params=NcclMulti, scope="active")
def allreduce_multi(ctx: ActiveContext, want: NcclMulti) -> Iterator[Grouped]:
    """One nccl-tests run across the run's nodes through mpirun or srun, judged like the
    single-node test; when it fails, hangs or is slow, 2-node tests name the node that drags every
    pair down (or the link).

    The report maps every rank to its host and GPU."""
    usable = []
    for node in [n for n in ctx.order if n in ctx.nodes]:
        gone = missing_tools(ctx.captures[node][nccltest.TOOLS_PROBE].stdout)
        if gone:
            yield (
                (node,),
                Verdict(
                    Status.ERROR,
                    f"not in the test: {', '.join(gone)} not found on this node",
                    observed={"missing": gone},
                ),
            )
        elif not nccltest.HOST.match(node):
            yield (
                (node,),
                Verdict(
                    Status.ERROR,
                    f"not in the test: the node name {node!r} cannot be passed to {want.launcher} as a host name",
                ),
            )
        else:
            usable.append(node)
    launch = want.launch_node
    if launch is not None:
        if launch not in usable:
            for node in usable:
                yield (
                    (node,),
                    Verdict(
                        Status.ERROR, f"launch_node {launch} is not among the usable nodes ({fold(usable) or 'none'})"
                    ),
                )
            return
        usable.remove(launch)
        usable.insert(0, launch)
    if len(usable) < 2:
        for node in usable:
            yield (
                (node,),
                Verdict(Status.ERROR, f"a multi-node test needs at least 2 usable nodes, found {len(usable)}"),
            )
        return
    # names only: what the test ran without, and why not its values
    report = MultiReport(nccltest.left_behind(want.env, want.job_env))
    ctx.report(report)
    for variant in want.variants:
        for collective in want.collectives:
            for group, verdict in _one_collective(ctx, want, usable, collective, variant, report.tests):
                yield group, want.ran_without(verdict)


def _one_collective(
    ctx: ActiveContext, want: NcclMulti, nodes: list[str], collective: str, variant: Variant, runs: list[MultiTest]
) -> Iterator[Grouped]:
    what = subject(collective, variant)
    env = want.test_env(variant)
    limit = want.test_timeout_s
    ranks = len(nodes) * want.ranks_per_node * want.gpus_per_rank
    needs = nccltest.probe_timeout_s(limit, want.json_report) + AFTER_RESERVE_S
    if ctx.left() < needs:
        why = f"not run: {ctx.left():.0f} s left before the deadline, the test may take {needs:.0f} s"
        ctx.incomplete(f"{what}: {why}")
        yield tuple(nodes), Verdict(Status.SKIPPED, f"{what}: {why}", what)
        return
    probe = nccltest.multi_node(
        f"nccl_{collective}_{variant}_{len(nodes)}nodes",
        want.launcher,
        nodes,
        want.ranks_per_node,
        want.gpus_per_rank,
        want.sweep(collective),
        env,
        limit,
        want.binary_dir,
        want.launcher_args,
        want.json_report,
    )
    with single(ctx.progress, f"{what}: multi-node test", fold(nodes)):
        capture = ctx.run(nodes[0], probe)
    full = _judge_capture(capture, want, what, ranks, want.floor(variant), env, hosts=len(nodes))
    runs.append(MultiTest(what, fold(nodes), ranks, full.status, full.busbw, redact_text(full.message), full.hang))
    scale = f"{len(nodes)} nodes ({fold(nodes)}), {ranks} ranks"
    if full.status in (Status.PASS, Status.WARN):
        yield (
            tuple(nodes),
            Verdict(
                full.status,
                f"{full.message.replace(what + ': ', what + ' across ' + scale + ': ', 1)}",
                what,
                full.observed,
            ),
        )
        return
    if full.status is not Status.FAIL or not want.localize or len(nodes) < 3:
        why = (
            ""
            if full.status is not Status.FAIL
            else ("; localize is off" if not want.localize else "; 2 nodes: a pair test cannot tell which")
        )
        yield (
            tuple(nodes),
            Verdict(
                full.status, f"{full.message} ({scale}){why}", what, full.observed, excerpt=full.excerpt, cut=full.cut
            ),
        )
        return
    yield from _localize(ctx, want, nodes, collective, variant, what, env, full, runs[-1])


def _judge_capture(
    capture: Capture,
    want: NcclMulti,
    what: str,
    ranks: int,
    floor: Floor | None,
    env: Mapping[str, str],
    hosts: int,
) -> RunVerdict:
    if capture.outcome is not Outcome.EXITED:
        status = {
            Outcome.TIMEOUT: Status.TIMEOUT,
            Outcome.UNREACHABLE: Status.UNREACHABLE,
            Outcome.SKIPPED: Status.SKIPPED,
        }.get(capture.outcome, Status.ERROR)
        return RunVerdict(
            status,
            f"{what}: launcher on {capture.node} {capture.outcome.value}: {capture.detail}",
            excerpt=excerpt(capture.stdout + capture.stderr),
            cut=capture.cut,
        )
    if capture.exit_code != 0:  # the wrapper itself failed (a tool missing: 127)
        first = first_line(capture.stderr) or first_line(capture.stdout)
        return RunVerdict(
            Status.ERROR,
            f"{what}: could not start on {capture.node} (exit {capture.exit_code}): {first}",
            {"exit_code": capture.exit_code},
            excerpt(capture.stderr + capture.stdout),
        )
    return judge_output(capture.stdout, want, what, ranks, floor, env, expected_hosts=hosts)


def _localize(
    ctx: ActiveContext,
    want: NcclMulti,
    nodes: list[str],
    collective: str,
    variant: Variant,
    what: str,
    env: Mapping[str, str],
    full: RunVerdict,
    run: MultiTest,
) -> Iterator[Grouped]:
    """2-node tests in rounds of disjoint pairs (the ib.pairs planner): ring, then suspects
    re-paired with nodes that passed."""
    floor = want.pair_floor(variant)
    pair_want = want.model_copy(
        update={
            "test_timeout_s": want.pair_timeout_s or want.test_timeout_s,
            "max_bytes": want.pair_max_bytes or want.max_bytes,
        }
    )
    ranks = 2 * want.ranks_per_node * want.gpus_per_rank
    tests: list[PairTest] = []
    verdict_of: dict[planner.Pair, RunVerdict] = {}
    unjudged: dict[planner.Pair, RunVerdict] = {}  # errored, unreachable, cut: no evidence either way
    cut: list[str] = []
    tag = secrets.token_hex(3)

    def run_pair(rnd: int, pair: planner.Pair) -> RunVerdict:
        hosts = [pair.a, pair.b]
        probe = nccltest.multi_node(
            f"nccl_{collective}_{variant}_pair_r{rnd}_{pair.a}_{pair.b}_{tag}",
            want.launcher,
            hosts,
            want.ranks_per_node,
            want.gpus_per_rank,
            pair_want.sweep(collective),
            env,
            pair_want.test_timeout_s,
            want.binary_dir,
            want.launcher_args,
            want.json_report,
        )
        return _judge_capture(
            ctx.run(pair.a, probe), pair_want, f"{what} {pair.a}+{pair.b}", ranks, floor, env, hosts=2
        )

    def round_not_run(rnd: planner.Round, left: float, needs: float) -> None:
        cut.append(f"{what}: pair round {rnd.index + 1} not run: {left:.0f} s left, it needs {needs:.0f} s")

    def judge_pair(rnd: planner.Round, pair: planner.Pair, t: RunVerdict) -> bool | None:
        tests.append(PairTest(rnd.index + 1, (pair.a, pair.b), t.status, t.busbw, t.hang, t.message))
        if t.status in (Status.SKIPPED, Status.ERROR, Status.UNREACHABLE, Status.TIMEOUT):
            unjudged[pair] = t  # could not test: no evidence either way
            return None
        verdict_of[pair] = t
        return t.status in (Status.PASS, Status.WARN)

    _, blame = ctx.pair_rounds(
        nodes,
        run_pair,
        judge_pair,
        wave_s=nccltest.probe_timeout_s(pair_want.test_timeout_s, want.json_report),
        not_run=round_not_run,
        pairing=want.pairing,
        max_rounds=want.max_rounds,
    )
    run.localization = Localization(
        tests, sorted(blame.bad_nodes), [(p.a, p.b) for p in blame.bad_links], sorted(blame.unresolved)
    )
    for why in cut:
        ctx.incomplete(why)
    yield from judge_localization(
        what, nodes, full, floor, want.floor(variant), blame, verdict_of, unjudged, cut, len(tests)
    )
    if floor is not None and floor.relative is not None:
        yield from _relative_pairs(what, nodes, floor.relative, blame, verdict_of)


def _relative_pairs(
    what: str,
    nodes: Sequence[str],
    band: Relative,
    blame: planner.Blame,
    verdict_of: Mapping[planner.Pair, RunVerdict],
) -> Iterator[Grouped]:
    """Each 2-node test that passed the fixed floor, its busbw against the other such tests of this
    localization (subject: the pair). A slow pair does not say which side is slow, so the pairs
    found below their peers go through the same blame as failed ones (pair_plan.blame): a node
    slow with two partners that are not slow elsewhere is named, a pair slow while both ends are
    fine elsewhere is a link, the rest stays on both ends. Pairs with a node the fixed floor
    already blamed or left unresolved, or a blamed link, are left out: the blame names them, and
    comparing with them would put a bad node's partners under suspicion."""
    excluded = set(blame.bad_nodes) | set(blame.unresolved)
    pairs = [
        p
        for p, t in sorted(verdict_of.items())
        if t.busbw is not None
        and t.status in (Status.PASS, Status.WARN)
        and p not in blame.bad_links
        and not excluded & {p.a, p.b}
    ]
    samples = [Sample((p.a, p.b), f"{p.a}+{p.b}", f"{what} 2-node tests", verdict_of[p].busbw or 0.0) for p in pairs]
    found = {
        p: rel
        for p, rel in zip(pairs, judge_relative(samples, band, what="busbw", unit="GB/s"), strict=True)
        if rel is not None
    }
    if not found:
        return
    slow = planner.blame(
        [n for n in nodes if any(n in (p.a, p.b) for p in pairs)],
        [planner.PairResult(p, 0, p not in found) for p in pairs],
    )

    def listed(mine: list[Verdict]) -> str:
        return "; ".join(v.message for v in mine[:3]) + (f" (+{len(mine) - 3} more)" if len(mine) > 3 else "")

    for node, evidence in slow.bad_nodes.items():
        mine = [found[p] for p in evidence.failed if p in found]
        yield (
            (node,),
            Verdict(
                worst(v.status for v in mine),
                f"{what}: slow node: below its peers with {len(mine)} partners that are not slow with others: "
                + listed(mine),
                what,
                {"relative": [dict(v.observed) for v in mine], "evidence": evidence.message},
                mine[0].expected,
            ),
        )
    for pair, evidence in slow.bad_links.items():
        v = found[pair]
        yield (
            (pair.a, pair.b),
            Verdict(
                v.status,
                f"{what}: slow pair: both ends are not slow with other partners: {v.message}",
                what,
                {**v.observed, "evidence": evidence.message},
                v.expected,
            ),
        )
    for node in slow.unresolved:
        mine = [
            rel
            for p, rel in found.items()
            if node in (p.a, p.b) and p.other(node) not in slow.bad_nodes and p not in slow.bad_links
        ]
        if mine:
            yield (
                (node,),
                Verdict(
                    worst(v.status for v in mine),
                    f"{what}: below its peers in its 2-node tests, not enough partners to tell which side: "
                    + listed(mine),
                    what,
                    {"relative": [dict(v.observed) for v in mine]},
                    mine[0].expected,
                ),
            )
