"""gpu.perf: every GPU of every node measured (GEMM TFLOPS per dtype, HBM copy, host<->device over
PCIe, GPU<->GPU over NVLink) and judged against the same figure of identical GPUs in the same run, with
the profiles' fixed floors as a backstop. docs/gpu-performance.md is the operator's reference.

One slow GPU sets the pace of a whole job, and per-SKU constants are wrong for half the fleet (aznhc
#142/#162, nccl-tests #212/#290): a figure is judged first against its peers' median (the `relative:`
band, robust: median and MAD, a minimum number of peers), then against the fixed floor. A node with a
FAIL is measured once more before the FAIL stands (one slow run is not a drain). The clocks, power,
temperature and throttle reasons recorded during the run explain a slow figure.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

from pydantic import Field, model_validator

from nodecheck.checks.context import ActiveContext
from nodecheck.checks.disruptive import not_started, without_consent
from nodecheck.checks.gpu_bench import Grouped, StepResult, read_step
from nodecheck.checks.gpu_perf_figures import BUILTIN_MODELS, GemmDtype, ModelFigures, model_floor
from nodecheck.core.model import Probe, Status, Verdict
from nodecheck.core.registry import check
from nodecheck.core.thresholds import Floor, Relative
from nodecheck.judging.gpu_perf_rules import PerfFigure, figures, judge_figures, summary
from nodecheck.probes.gpu_bench import BenchTarget, bench_probe

Measure = Literal["gemm", "hbm", "pcie", "nvlink"]
_PROBE_MEASURE = {"gemm": "gemm", "hbm": "hbm", "pcie": "pcie", "nvlink": "p2p"}
FIX_DEADLINE = "raise --deadline or shorten duration_s"
LABEL = "GPU benchmark"
# CUDA start-up on 8 GPUs, cuBLAS heuristics, the copies, a container start: beyond the GEMM loops
OVERHEAD_S = 120


class GpuPerf(BenchTarget):
    """What to measure, for how long, and the bands to judge it by."""

    duration_s: float = Field(
        10,
        ge=0.01,
        le=600,
        description="seconds of sustained GEMM per dtype (long enough to reach thermal steady state: "
        "60+ in acceptance, 10 in a sweep)",
    )
    gemm_size: int = Field(8192, ge=64, le=32768, strict=True, description="m = n = k of the GEMM")
    dtypes: list[GemmDtype] = Field(
        ["bf16"], min_length=1, description="GEMM dtypes: bf16, fp16, fp8 (fp8 where supported)"
    )
    measure: list[Measure] = Field(
        ["gemm", "hbm", "pcie", "nvlink"], min_length=1, description="which figures: gemm, hbm, pcie, nvlink"
    )
    copy_mib: int = Field(1024, ge=1, le=65536, strict=True, description="HBM copy buffer (MiB)")
    pcie_mib: int = Field(256, ge=1, le=65536, strict=True, description="host<->device copy buffer (MiB)")
    p2p_mib: int = Field(256, ge=1, le=65536, strict=True, description="GPU<->GPU copy buffer (MiB)")
    gemm_tflops: dict[GemmDtype, Floor] = Field(
        {}, description="per dtype {fail_below, warn_below, relative} in TFLOPS, for every GPU model (over `models:`)"
    )
    hbm_gbps: Floor | None = Field(None, description="device copy GB/s (read + write counted), every model")
    h2d_gbps: Floor | None = Field(None, description="host to device GB/s per GPU, every model")
    d2h_gbps: Floor | None = Field(None, description="device to host GB/s per GPU, every model")
    nvlink_gbps: Floor | None = Field(None, description="GPU to GPU GB/s per ordered pair within a node, every model")
    models: dict[str, ModelFigures] = Field(
        BUILTIN_MODELS,
        description='fixed floors per GPU model, by the name NVML gives ("NVIDIA H100 80GB HBM3"); '
        "default: the shipped table for A100, H100, H200, B200 (sources in playbooks/PROFILES.md)",
    )
    relative: Relative | None = Field(
        Relative(warn_below_pct=5, fail_below_pct=10),
        description="the band against peers for every figure whose own band has no `relative:` "
        "(null: fixed floors only)",
    )
    group_label: str | None = Field(
        None,
        description="inventory label prefix: peers only within the same group (e.g. 'sku' reads "
        "labels sku=h100-a); GPUs of another model are never peers",
    )
    nvbandwidth: Literal["auto", "never", "required"] = Field(
        "auto", description="NVIDIA's nvbandwidth for the PCIe and NVLink figures where installed (auto)"
    )
    retry: bool = Field(True, description="measure a node with a FAIL once more before the FAIL stands")
    test_timeout_s: int | None = Field(
        None, ge=30, le=14400, strict=True, description="bound on one node's run; unset: 120 s + 2 x duration per dtype"
    )

    @model_validator(mode="after")
    def _bands_measured(self) -> GpuPerf:
        if self.gemm_tflops and "gemm" not in self.measure:
            raise ValueError("gemm_tflops is set but measure leaves out gemm")
        extra = set(self.gemm_tflops) - set(self.dtypes)
        if extra:
            raise ValueError(f"gemm_tflops names {sorted(extra)}, which dtypes does not measure")
        return self

    @property
    def bound_s(self) -> int:
        gemm = self.duration_s * len(self.dtypes) if "gemm" in self.measure else 0
        return self.test_timeout_s or int(OVERHEAD_S + 2 * gemm)

    @cached_property
    def every_model(self) -> ModelFigures:
        """The floors set at the top level: they apply to every GPU model."""
        return ModelFigures(
            gemm_tflops=self.gemm_tflops,
            hbm_gbps=self.hbm_gbps,
            h2d_gbps=self.h2d_gbps,
            d2h_gbps=self.d2h_gbps,
            nvlink_gbps=self.nvlink_gbps,
        )

    def floor(self, figure: PerfFigure) -> Floor | None:
        """The fixed floor of a figure: set here for every model, else its model's in `models:`."""
        return model_floor(self.models, self.every_model, figure)

    @property
    def nvbandwidth_use(self) -> str:
        """nvbandwidth measures only the copies: not asked where neither pcie nor nvlink is measured."""
        return self.nvbandwidth if {"pcie", "nvlink"} & set(self.measure) else "never"

    def probe_args(self) -> tuple[str, ...]:
        return (
            "--mode", "perf", "--backend", self.backend,
            "--measure", ",".join(_PROBE_MEASURE[m] for m in self.measure),
            "--duration-s", f"{self.duration_s:g}", "--gemm-size", str(self.gemm_size),
            "--dtypes", ",".join(self.dtypes), "--copy-mib", str(self.copy_mib),
            "--pcie-mib", str(self.pcie_mib), "--p2p-mib", str(self.p2p_mib),
        )  # fmt: skip


def perf_probe(want: GpuPerf) -> Probe:
    return bench_probe("gpu_perf", want, want.probe_args(), want.bound_s, nvbandwidth=want.nvbandwidth_use)


@dataclass
class PerfReport:
    """The JSON report's gpu.perf block: each node's status, library, GPUs and figures (the sweep
    history keeps the figures: report.diff.gpu_figures)."""

    nodes: dict[str, dict] = field(default_factory=dict)

    def as_json(self, incomplete: Sequence[str]) -> dict:
        return {"nodes": self.nodes, "incomplete": list(incomplete)}


@check("gpu.perf", probes=[], params=GpuPerf, scope="active")
def perf(ctx: ActiveContext, want: GpuPerf) -> Iterator[Grouped]:
    """GPU performance: GEMM TFLOPS, HBM, PCIe and NVLink bandwidth of every GPU, judged against its
    peers in the same run (identical GPUs; median and MAD) and the profile's fixed floors.

    Disruptive (it loads every GPU for the duration): only with `--allow-disruptive`, on nodes with no
    Slurm job and no GPU process (others are SKIPPED as busy). A figure more than `relative:` below its
    peers' median fails, naming the GPU, its value, the median and the spread, with the clocks, power
    and throttle reasons of the run; a failing node is measured once more before the FAIL stands."""
    if not ctx.allow_disruptive:
        yield from without_consent(ctx, f"{LABEL} loads every GPU for ~{max(1, round(want.bound_s / 60))} min")
        return
    nodes = list(ctx.nodes)
    steps = dict(zip(nodes, ctx.each(nodes, lambda node: _step(ctx, want, node))))
    verdicts, figs = _judge(ctx, want, steps)
    retried: dict[str, list[Verdict]] = {}
    if want.retry:
        failing = [n for n in nodes if any(v.status is Status.FAIL for v in verdicts[n])]
        again = dict(zip(failing, ctx.each(failing, lambda node: _step(ctx, want, node))))
        usable = {n: s for n, s in again.items() if s.run is not None}
        if usable:
            second, figs = _judge(ctx, want, {**steps, **usable})
            retried = {n: _after_retry(verdicts[n], second[n]) for n in usable}
        for n, s in again.items():
            if s.run is None and s.problem is not None:
                retried[n] = [*verdicts[n], _retry_problem(s.problem)]
    report = PerfReport()
    for node in nodes:
        final = retried.get(node, verdicts[node])
        report.nodes[node] = _node_json(steps[node], figs.get(node, []), final, node in retried)
        for v in final:
            yield (node,), v
    ctx.report(report)


def _step(ctx: ActiveContext, want: GpuPerf, node: str) -> StepResult:
    probe = perf_probe(want)
    if (late := not_started(ctx, node, probe, LABEL, FIX_DEADLINE)) is not None:
        return StepResult(problem=late)
    return read_step(ctx.run(node, probe), LABEL, want, nvbandwidth=want.nvbandwidth_use)


def _group(ctx: ActiveContext, want: GpuPerf, node: str) -> str:
    if want.group_label is None:
        return ""
    prefix = want.group_label + "="
    return next(
        (label for label in sorted(ctx.nodes[node].labels) if label.startswith(prefix)), want.group_label + " unset"
    )


def _judge(
    ctx: ActiveContext, want: GpuPerf, steps: dict[str, StepResult]
) -> tuple[dict[str, list[Verdict]], dict[str, list[PerfFigure]]]:
    """Every node's verdicts from every node's figures (peers span the whole run)."""
    out: dict[str, list[Verdict]] = {}
    figs: dict[str, list[PerfFigure]] = {}
    everything: list[PerfFigure] = []
    telemetry = {}
    for node, step in steps.items():
        if step.run is None:
            assert step.problem is not None
            out[node] = [step.problem]
            continue
        found, errors = figures(node, step.run, step.nvbandwidth, _group(ctx, want, node))
        figs[node] = found
        everything += found
        out[node] = [*errors, *step.notes]
        for g in step.run.gpus:
            telemetry[(node, g.index)] = g.telemetry
    judged = judge_figures(everything, want.floor, want.relative, telemetry)
    for i, f in enumerate(everything):
        if i in judged:
            out[f.node].append(judged[i])
    for node, step in steps.items():
        if step.run is not None and not out[node]:
            if not figs[node]:
                out[node] = [Verdict(Status.ERROR, f"{LABEL} measured nothing on {len(step.run.gpus)} GPU(s)")]
            else:
                out[node] = [summary(figs[node], len(step.run.gpus))]
    return out, figs


def _after_retry(first: list[Verdict], second: list[Verdict]) -> list[Verdict]:
    """A FAIL stands only if the second run fails too; one that cleared is a WARN naming the first run."""
    if any(v.status is Status.FAIL for v in second):
        return [
            Verdict(v.status, v.message + " (measured twice)", v.subject, {**v.observed, "retried": True}, v.expected)
            if v.status is Status.FAIL
            else v
            for v in second
        ]
    cleared = [
        Verdict(
            Status.WARN,
            f"slow on the first run, within its bands when measured again: {v.message}",
            v.subject,
            {**v.observed, "retried": True},
            v.expected,
        )
        for v in first
        if v.status is Status.FAIL
    ]
    return cleared + [v for v in second if v.status is not Status.PASS]


def _retry_problem(problem: Verdict) -> Verdict:
    return Verdict(
        problem.status if problem.status is not Status.SKIPPED else Status.ERROR,
        f"the second measurement did not complete: {problem.message}",
        excerpt=problem.excerpt,
        cut=problem.cut,
    )


def _node_json(step: StepResult, figs: list[PerfFigure], verdicts: list[Verdict], retried: bool) -> dict:
    data: dict = {"status": max((v.status for v in verdicts), key=lambda s: s.rank).value, "retried": retried}
    if step.run is not None:
        data["backend"] = f"{step.run.backend.name} {step.run.backend.version}"
        data["gpus"] = {str(g.index): g.name for g in step.run.gpus}
    data["figures"] = [
        {"gpu": f.gpu, "metric": f.metric, "subject": f.subject, "value": f.value, "unit": f.unit, "source": f.source}
        for f in figs
    ]
    return data
