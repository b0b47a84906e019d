"""The fixed backstop floors gpu.perf applies per GPU model (the model's name as NVML gives it), below
the fleet-relative band. Sources and how each figure was chosen: playbooks/PROFILES.md, "GPU
performance". Rule: fail at ~70% and warn at ~85% of the typical measured figure of a healthy GPU, so
only a grossly slow GPU fails here; the relative band catches the subtle ones. A playbook's `models:`
replaces this table; figures set at the top level of the check apply to every model.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from nodecheck.core.thresholds import Floor
from nodecheck.judging.gpu_perf_rules import PerfFigure

GemmDtype = Literal["bf16", "fp16", "fp8"]


class ModelFigures(BaseModel):
    """One GPU model's floors, each {fail_below, warn_below, relative}."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    gemm_tflops: dict[GemmDtype, Floor] = Field({}, description="per dtype (bf16, fp16, fp8), TFLOPS")
    hbm_gbps: Floor | None = Field(None, description="device copy GB/s (read + write counted)")
    h2d_gbps: Floor | None = Field(None, description="host to device GB/s per GPU")
    d2h_gbps: Floor | None = Field(None, description="device to host GB/s per GPU")
    nvlink_gbps: Floor | None = Field(None, description="GPU to GPU GB/s per ordered pair")

    def floor(self, metric: str) -> Floor | None:
        if metric.startswith("gemm_"):
            return next((f for d, f in self.gemm_tflops.items() if f"gemm_{d}" == metric), None)
        return {"hbm": self.hbm_gbps, "h2d": self.h2d_gbps, "d2h": self.d2h_gbps, "nvlink": self.nvlink_gbps}.get(
            metric
        )


def _f(fail: float, warn: float) -> Floor:
    return Floor(fail_below=fail, warn_below=warn)


_GEN5_HOST = {"h2d_gbps": _f(39, 47), "d2h_gbps": _f(39, 47)}  # nvbandwidth 55.2-55.4 GB/s (PCIe Gen5 x16)
BUILTIN_MODELS: dict[str, ModelFigures] = {
    # gpu-fryer 8192^2 BF16 ~270 TFLOPS; p2pBandwidthLatencyTest diagonal ~1,564, pairs ~274 GB/s;
    # bandwidthTest pinned 25.8 GB/s over PCIe Gen4 x16. No FP8 on Ampere.
    "NVIDIA A100-SXM4-80GB": ModelFigures(
        gemm_tflops={"bf16": _f(190, 230), "fp16": _f(190, 230)},
        hbm_gbps=_f(1100, 1330),
        h2d_gbps=_f(18, 22),
        d2h_gbps=_f(18, 22),
        nvlink_gbps=_f(190, 235),
    ),
    # gpu-fryer BF16 ~730, FP8 ~1,530 (MAMF 1,402.6); DCGM's measured copy ~2,540; nvbandwidth
    # device_to_device_memcpy_read_ce ~395 GB/s per pair
    "NVIDIA H100 80GB HBM3": ModelFigures(
        gemm_tflops={"bf16": _f(510, 620), "fp16": _f(510, 620), "fp8": _f(980, 1190)},
        hbm_gbps=_f(1750, 2125),
        nvlink_gbps=_f(275, 335),
        **_GEN5_HOST,
    ),
    # the H100's compute (MAMF: "H200 is the same"), FP8 MAMF 1,453.4; DCGM's measured copy 3,110;
    # nvbandwidth 396.4 GB/s per pair
    "NVIDIA H200": ModelFigures(
        gemm_tflops={"bf16": _f(510, 620), "fp16": _f(510, 620), "fp8": _f(1000, 1230)},
        hbm_gbps=_f(2180, 2640),
        nvlink_gbps=_f(275, 335),
        **_GEN5_HOST,
    ),
    # BF16 derived from gpu-fryer's GB200 (~1,550 x 2250/2500), FP8 MAMF 3,432.5; DCGM's measured copy
    # ~5,810; NVLink 5 from a GB200 NVL4 board (~746 GB/s per pair)
    "NVIDIA B200": ModelFigures(
        gemm_tflops={"bf16": _f(975, 1185), "fp16": _f(975, 1185), "fp8": _f(2400, 2920)},
        hbm_gbps=_f(4070, 4940),
        nvlink_gbps=_f(520, 635),
        **_GEN5_HOST,
    ),
}


def model_floor(models: dict[str, ModelFigures], overall: ModelFigures, figure: PerfFigure) -> Floor | None:
    """The fixed floor for a figure: the check's own top-level band, else its GPU model's."""
    own = overall.floor(figure.metric)
    if own is not None:
        return own
    model = models.get(figure.model)
    return model.floor(figure.metric) if model is not None else None
