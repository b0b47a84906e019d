"""Judging GPU benchmark figures: fixed floors (the profiles' backstops) and the fleet-relative band
(each figure against the same figure of identical GPUs in the same run), with the clocks, power and
throttle reasons recorded during the run to explain a slow one. Pure: figures in, verdicts out.

A figure is one number about one GPU (GEMM TFLOPS per dtype, HBM copy GB/s, host<->device GB/s) or one
ordered GPU pair within a node (NVLink GB/s). Peers are the figures of the same metric from GPUs of the
same model (name, memory, compute capability) and, with group_label, the same inventory group: two SKUs
in one fleet are never each other's peers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from nodecheck.core.model import Status, Verdict
from nodecheck.core.thresholds import Floor, Relative, fmt
from nodecheck.judging.relative import Sample, judge_relative, worse
from nodecheck.parsers.gpu_bench import BenchGpu, BenchRun, Figure, Telemetry
from nodecheck.parsers.nvbandwidth import NvbandwidthRun, device_to_device, device_to_host, host_to_device

TFLOPS, GBPS = "TFLOPS", "GB/s"
# what the metric names mean, for the docs and the report
METRICS = {
    "gemm_bf16": "dense BF16 GEMM throughput (TFLOPS), sustained",
    "gemm_fp16": "dense FP16 GEMM throughput (TFLOPS), sustained",
    "gemm_fp8": "dense FP8 GEMM throughput (TFLOPS), sustained",
    "hbm": "device memory copy bandwidth (GB/s, read + write)",
    "h2d": "host to device copy bandwidth over PCIe (GB/s)",
    "d2h": "device to host copy bandwidth over PCIe (GB/s)",
    "nvlink": "GPU to GPU copy bandwidth within the node, per ordered pair (GB/s)",
}


@dataclass(frozen=True)
class PerfFigure:
    """One judged number: its node, GPU, metric and peer group."""

    node: str
    gpu: int
    model: str  # the GPU's name as NVML gives it: what the fixed floors are looked up by
    metric: str  # "gemm_bf16", "hbm", "nvlink"
    subject: str  # "GPU3", "GPU3->GPU5"
    value: float
    group: str  # the peers' key: GPU model (and the group label's value)
    source: str = "probe"  # "probe" or "nvbandwidth"

    @property
    def unit(self) -> str:
        return TFLOPS if self.metric.startswith("gemm_") else GBPS


def gpu_model(gpu: BenchGpu) -> str:
    """Identical hardware: the name, the memory size (an 80 GB and a 94 GB H100 differ) and the
    compute capability."""
    mem = f" {round(gpu.memory_bytes / 2**30)} GiB" if gpu.memory_bytes else ""
    cc = f" cc {gpu.cc}" if gpu.cc else ""
    return f"{gpu.name}{mem}{cc}"


def figures(
    node: str, run: BenchRun, nvb: NvbandwidthRun | None = None, group: str = ""
) -> tuple[list[PerfFigure], list[Verdict]]:
    """A node's figures, and an ERROR per figure the probe could not measure. nvbandwidth's host and
    NVLink figures (NVIDIA's own tool) replace the probe's own copies where it ran."""
    found: list[PerfFigure] = []
    errors: list[Verdict] = []
    nvb_h2d = host_to_device(nvb) if nvb else {}
    nvb_d2h = device_to_host(nvb) if nvb else {}
    nvb_d2d = device_to_device(nvb) if nvb else {}
    indexes = {g.index for g in run.gpus}
    for g in run.gpus:
        key = gpu_model(g) + (f" | {group}" if group else "")
        subject = f"GPU{g.index}"
        # (metric, subject, the probe's figure, nvbandwidth's value or None)
        # a dtype this GPU or library has none of (FP8 on an A100, BF16 in CuPy) is no figure and no
        # fault, as long as one dtype was measured: the summary says which ran
        gemm = {d: f for d, f in g.gemm.items() if not f.unsupported and (f.value is not None or supports(g, d))}
        if g.gemm and not gemm:
            why = "; ".join(f"{d}: {f.error}" for d, f in g.gemm.items())
            errors.append(Verdict(Status.ERROR, f"{subject}: no GEMM dtype could be measured ({why})", subject))
        wanted: list[tuple[str, str, Figure | None, float | None]] = [
            (f"gemm_{dtype}", subject, fig, None) for dtype, fig in gemm.items()
        ]
        wanted += [("hbm", subject, g.hbm, None)]
        wanted += [("h2d", subject, g.h2d, nvb_h2d.get(g.index)), ("d2h", subject, g.d2h, nvb_d2h.get(g.index))]
        peers = sorted(set(g.p2p) | {dst for src, dst in nvb_d2d if src == g.index})
        wanted += [
            ("nvlink", f"GPU{g.index}->GPU{p}", g.p2p.get(p), nvb_d2d.get((g.index, p)))
            for p in peers
            if p in indexes or (g.index, p) in nvb_d2d
        ]
        for metric, subj, fig, tool in wanted:
            if tool is not None:
                found.append(PerfFigure(node, g.index, g.name, metric, subj, tool, key, "nvbandwidth"))
            elif fig is None:
                continue
            elif fig.value is None:
                errors.append(
                    Verdict(
                        Status.ERROR,
                        f"{subj}: {metric} not measured: {fig.error}",
                        subj,
                        {metric: None, "error": fig.error},
                    )
                )
            else:
                found.append(PerfFigure(node, g.index, g.name, metric, subj, fig.value, key))
        errors += [Verdict(Status.ERROR, f"{subject}: {err}", subject, {"error": err}) for err in g.errors]
    return found, errors


# the compute capability each GEMM dtype needs (FP8 tensor cores: Ada and Hopper, cc 8.9)
MIN_CC = {"fp8": (8, 9), "bf16": (8, 0)}


def supports(gpu: BenchGpu, dtype: str) -> bool:
    """Whether the GPU can run the dtype at all; True when its compute capability is unknown."""
    need = MIN_CC.get(dtype)
    if need is None or not gpu.cc:
        return True
    major, _, minor = gpu.cc.partition(".")
    if not (major.isdigit() and minor.isdigit()):
        return True
    return (int(major), int(minor)) >= need


def explain(t: Telemetry | None) -> str:
    """What the GPU did while it was measured, for a slow figure: clocks, power, temperature and the
    throttle reasons NVML reported (a power brake, thermal slowdown, clocks locked low)."""
    if t is None or t.samples == 0:
        return ""
    parts = []
    if t.sm_clock_mhz:
        parts.append(f"SM clock {fmt(round(t.sm_clock_mhz.mean))} MHz (min {fmt(round(t.sm_clock_mhz.min))})")
    if t.power_w:
        parts.append(f"{fmt(round(t.power_w.mean))} W")
    if t.temp_c:
        parts.append(f"{fmt(round(t.temp_c.max))} °C max")
    said = ", ".join(parts)
    if t.throttle_reasons:
        said += ("; " if said else "") + "throttled: " + ", ".join(t.throttle_reasons)
    return f" (during the run: {said})" if said else ""


Band = Callable[[PerfFigure], Floor | None]


def judge_figures(
    all_figures: Sequence[PerfFigure],
    band: Band,
    default_relative: Relative | None,
    telemetry: Mapping[tuple[str, int], Telemetry | None] | None = None,
) -> dict[int, Verdict]:
    """The WARN/FAIL verdicts, keyed by the figure's position in all_figures: the fixed floor (band(),
    by the figure's model and metric) and the relative band (the floor's own `relative:`, else
    default_relative), the worse of the two; a figure within both has no entry."""
    telemetry = telemetry or {}
    out: dict[int, Verdict] = {}
    floors = [band(f) for f in all_figures]
    # figures judged together: one metric under one relative band (peers are split by group inside)
    batches: dict[tuple[str, Relative], list[int]] = {}
    for i, f in enumerate(all_figures):
        floor = floors[i]
        relative = floor.relative if floor is not None and floor.relative is not None else default_relative
        if relative is not None:
            batches.setdefault((f.metric, relative), []).append(i)
    rel: dict[int, Verdict] = {}
    for (metric, relative), idx in batches.items():
        judged = judge_relative(
            [
                Sample((all_figures[i].node,), all_figures[i].subject, all_figures[i].group, all_figures[i].value)
                for i in idx
            ],
            relative,
            what=metric,
            unit=all_figures[idx[0]].unit,
        )
        rel.update({i: v for i, v in zip(idx, judged) if v is not None})
    for i, f in enumerate(all_figures):
        floor = floors[i]
        fixed = floor.judge(f.value, what=f.metric, unit=f.unit, subject=f.subject) if floor is not None else None
        if fixed is not None and fixed.status is Status.PASS:
            fixed = None
        if fixed is not None:
            fixed = Verdict(fixed.status, f"{f.subject}: {fixed.message}", f.subject, fixed.observed, fixed.expected)
        v = worse(fixed, rel.get(i)) if fixed is not None else rel.get(i)
        if v is None:
            continue
        why = explain(telemetry.get((f.node, f.gpu)))
        out[i] = Verdict(v.status, v.message + why, f.subject, {**v.observed, "source": f.source}, v.expected)
    return out


def summary(node_figures: Iterable[PerfFigure], gpus: int) -> Verdict:
    """The PASS for a node whose every figure is within its bands: each metric's range."""
    ranges: dict[str, list[float]] = {}
    unit: dict[str, str] = {}
    for f in node_figures:
        ranges.setdefault(f.metric, []).append(f.value)
        unit[f.metric] = f.unit
    parts = []
    observed: dict[str, object] = {"gpus": gpus}
    for metric, values in ranges.items():
        lo, hi = min(values), max(values)
        shown = fmt(round(lo, 1)) if round(lo, 1) == round(hi, 1) else f"{fmt(round(lo, 1))}-{fmt(round(hi, 1))}"
        parts.append(f"{metric} {shown} {unit[metric]}")
        observed[metric] = {"min": lo, "max": hi, "n": len(values)}
    return Verdict(Status.PASS, f"{gpus} GPU{'s' if gpus != 1 else ''}: " + ", ".join(parts), "", observed)
