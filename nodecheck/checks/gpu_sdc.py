"""gpu.sdc: silent-data-corruption screening. Every GPU computes the same seeded, deterministic chain of
GEMMs and returns a checksum of the result; GPUs of the same model and software must agree bit for bit
(nodecheck.judging.sdc). A GPU that disagrees with its peers (or with the pinned reference) is run again
once: the same wrong answer is a FAIL "silent data corruption suspect", the right one a WARN (transient).

Llama 3's training saw 6 silent data corruptions in 54 days on 16k H100s; a GPU that computes wrong
results shows no error anywhere, which is why only a comparison can find it, and why nodecheck, which
sees all nodes at once, can.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from nodecheck.checks.context import ActiveContext
from nodecheck.checks.disruptive import not_started, without_consent
from nodecheck.checks.gpu_bench import Grouped, StepResult, read_step
from nodecheck.core.model import Status, Verdict
from nodecheck.core.registry import check
from nodecheck.judging import sdc as agreement
from nodecheck.judging.gpu_perf_rules import gpu_model
from nodecheck.parsers.gpu_bench import BenchRun
from nodecheck.probes.gpu_bench import BenchTarget, bench_probe

FIX_DEADLINE = "raise --deadline or lower test_timeout_s"
LABEL = "SDC screen"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def _sha256(value: str) -> str:
    if not _SHA256.match(value):
        raise ValueError(f"not a sha256 checksum (64 lowercase hex digits): {value[:80]!r}")
    return value


class GpuSdc(BenchTarget):
    """The workload every GPU computes, and pinned references for GPUs without peers."""

    size: int = Field(4096, ge=64, le=16384, strict=True, description="n of the n x n matrices")
    steps: int = Field(16, ge=1, le=1000, strict=True, description="GEMMs in the chain")
    seed: int = Field(20261202, ge=0, le=2**31 - 1, strict=True, description="the inputs' seed")
    dtype: Literal["fp32", "fp16", "bf16"] = Field("fp32", description="the GEMMs' dtype (TF32 off)")
    reference: dict[str, Annotated[str, AfterValidator(_sha256)]] = Field(
        {},
        description="group -> checksum, for GPUs with no peers in a run (a single node, a lone SKU); the "
        "group is the key gpu.sdc's results print (model | software | workload)",
    )
    test_timeout_s: int = Field(300, ge=30, le=14400, strict=True, description="bound on one node's run")

    @property
    def workload(self) -> str:
        return f"{self.dtype} {self.size}x{self.size} x{self.steps} seed {self.seed}"

    def probe_args(self, gpus: Sequence[int] = ()) -> tuple[str, ...]:
        return (
            "--mode", "sdc", "--backend", self.backend, "--gpus", ",".join(map(str, gpus)) if gpus else "all",
            "--sdc-size", str(self.size), "--sdc-steps", str(self.steps), "--sdc-seed", str(self.seed),
            "--sdc-dtype", self.dtype,
        )  # fmt: skip


@dataclass
class SdcReport:
    """The JSON report's gpu.sdc block: each group's expected checksum and how it is known."""

    groups: dict[str, dict] = field(default_factory=dict)
    nodes: dict[str, dict] = field(default_factory=dict)

    def as_json(self, incomplete: Sequence[str]) -> dict:
        return {"groups": self.groups, "nodes": self.nodes, "incomplete": list(incomplete)}


@check("gpu.sdc", probes=[], params=GpuSdc, scope="active")
def sdc(ctx: ActiveContext, want: GpuSdc) -> Iterator[Grouped]:
    """Silent data corruption screen: every GPU computes the same seeded GEMM chain; a GPU whose checksum
    differs from its peers' (same model, driver and libraries) or from the pinned reference fails as a
    suspect, with both checksums.

    A suspect is run once more: the same wrong result is persistent (FAIL), the expected one transient
    (WARN). A GPU with no peers and no reference is not compared (SKIPPED). Disruptive: only with
    `--allow-disruptive`, on idle nodes."""
    if not ctx.allow_disruptive:
        yield from without_consent(ctx, f"{LABEL} loads every GPU for ~{max(1, round(want.test_timeout_s / 120))} min")
        return
    nodes = list(ctx.nodes)
    steps = dict(zip(nodes, ctx.each(nodes, lambda node: _step(ctx, want, node, ()))))
    sums: list[agreement.Checksum] = []
    errors: dict[str, list[Verdict]] = {n: [] for n in nodes}
    for node, step in steps.items():
        if step.run is None:
            assert step.problem is not None
            errors[node].append(step.problem)
            continue
        found, bad = _checksums(node, step.run, want)
        sums += found
        errors[node] += bad
    want_by_group = agreement.expected(sums, want.reference)
    suspects: dict[str, list[agreement.Checksum]] = {}
    for s in sums:
        if agreement.suspect(s, want_by_group[s.group]):
            suspects.setdefault(s.node, []).append(s)
    reruns: dict[tuple[str, int], agreement.Checksum] = {}
    rerun_errors: dict[str, str] = {}
    again = ctx.each(list(suspects), lambda node: _step(ctx, want, node, [s.gpu for s in suspects[node]]))
    for node, step in zip(suspects, again):
        if step.run is None:
            rerun_errors[node] = step.problem.message if step.problem else "no result"
            continue
        for r in _checksums(node, step.run, want)[0]:
            reruns[(node, r.gpu)] = r
    report = SdcReport()
    for group, exp in want_by_group.items():
        report.groups[group] = {
            "expected": exp.checksum,
            "from": exp.how,
            "gpus": exp.members,
            "checksums": dict(exp.counts),
        }
    for node in nodes:
        mine = [s for s in sums if s.node == node]
        judged = [
            agreement.verdict(s, want_by_group[s.group], reruns.get((node, s.gpu)), rerun_errors.get(node, ""))
            for s in mine
        ]
        bad = [v for v in judged if v.status is not Status.PASS]
        final = errors[node] + bad
        if not final:
            final = (
                [_summary(mine, want_by_group)]
                if mine
                else [Verdict(Status.ERROR, f"{LABEL}: no GPU computed a checksum")]
            )
        report.nodes[node] = {
            "status": max((v.status for v in final), key=lambda s: s.rank).value,
            "checksums": {s.subject: s.checksum for s in mine},
        }
        for v in final:
            yield (node,), v
    ctx.report(report)


def _step(ctx: ActiveContext, want: GpuSdc, node: str, gpus: Sequence[int]) -> StepResult:
    probe = bench_probe("gpu_sdc", want, want.probe_args(gpus), want.test_timeout_s)
    if (late := not_started(ctx, node, probe, LABEL, FIX_DEADLINE)) is not None:
        return StepResult(problem=late)
    return read_step(ctx.run(node, probe), LABEL, want)


def _checksums(node: str, run: BenchRun, want: GpuSdc) -> tuple[list[agreement.Checksum], list[Verdict]]:
    found: list[agreement.Checksum] = []
    bad: list[Verdict] = []
    for g in run.gpus:
        subject = f"GPU{g.index}"
        if g.sdc is None or g.sdc.checksum is None:
            why = g.sdc.error if g.sdc is not None else "no checksum in the probe's output"
            bad.append(Verdict(Status.ERROR, f"{subject}: {LABEL} not computed: {why}", subject, {"error": why}))
            continue
        group = f"{gpu_model(g)} | {run.software_key} | {want.workload}"
        found.append(agreement.Checksum(node, g.index, group, g.sdc.checksum, g.sdc.repeat_equal, g.sdc.finite))
    return found, bad


def _summary(mine: list[agreement.Checksum], want_by_group: dict[str, agreement.Expected]) -> Verdict:
    groups = {s.group for s in mine}
    peers = sum(want_by_group[g].members for g in groups)
    how = {want_by_group[g].how for g in groups}
    source = "the pinned reference" if how == {"reference"} else f"{peers} GPUs of the same model and software"
    first = mine[0]
    one = first.checksum if len({s.checksum for s in mine}) == 1 else None  # GPUs of two models differ
    return Verdict(
        Status.PASS,
        f"{len(mine)} GPU{'s' if len(mine) != 1 else ''}: checksum {agreement.short(first.checksum)} "
        f"agrees with {source}",
        "",
        {"checksum": one, "groups": sorted(groups)},
        {},
    )
