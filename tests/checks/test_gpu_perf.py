"""gpu.perf: the node step's capture read, every figure judged against identical GPUs in the run and the
per-model floors, a failing node measured twice, the disruptive semantics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nodecheck.checks.gpu_perf import GpuPerf, perf, perf_probe
from nodecheck.core.model import Capture, Node, Outcome, Probe, Status
from nodecheck.probes.gpu_bench import BENCH_PROBE_SCRIPT
from tests.helpers import SerialActiveContext

H100, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"
FIGURES = {H100: (730.0, 2500.0, 55.0, 395.0, "9.0"), A100: (270.0, 1560.0, 25.0, 274.0, "8.0")}


def probe_json(
    model: str = H100, gpus: int = 8, *, slow: dict[int, float] | None = None, telemetry=None, fp8=False
) -> dict:
    tflops, hbm, host, p2p, cc = FIGURES[model]
    slow = slow or {}
    out = []
    for i in range(gpus):
        f = slow.get(i, 1.0)
        gemm = {"bf16": {"tflops": tflops * f, "size": 8192, "iterations": 100, "seconds": 10.0}}
        if fp8:
            gemm["fp8"] = (
                {"tflops": 1500.0 * f, "size": 8192, "iterations": 100, "seconds": 10.0}
                if cc == "9.0"
                else {"error": "fp8 needs compute capability >= 8.9 (this GPU: 8.0)"}
            )
        out.append(
            {
                "index": i, "name": model, "uuid": f"GPU-{i}", "pci_bus_id": None, "memory_bytes": 85899345920,
                "cc": cc, "gemm": gemm,
                "hbm": {"gbps": hbm * f, "bytes": 1 << 30, "seconds": 1.0},
                "h2d": {"gbps": host, "bytes": 1 << 28, "seconds": 1.0},
                "d2h": {"gbps": host, "bytes": 1 << 28, "seconds": 1.0},
                "p2p": {str(j): {"gbps": p2p, "bytes": 1 << 28, "seconds": 1.0} for j in range(gpus) if j != i},
                "telemetry": telemetry or {"source": "pynvml", "samples": 0},
                "errors": [],
            }
        )  # fmt: skip
    backend = {
        "name": "torch",
        "version": "2.5.1",
        "blas": None,
        "cuda_runtime": "12.4",
        "driver": None,
        "cuda_driver": 12040,
    }
    return {"schema": 1, "mode": "perf", "backend": backend, "gpus": out, "errors": []}


def step_output(doc: dict | str, rc: int = 0, *, extra: str = "", stderr: str = "") -> str:
    body = doc if isinstance(doc, str) else json.dumps(doc)
    return (
        f"{extra}@@nodecheck begin bench\n{body}\n@@nodecheck end bench rc=0\n@@nodecheck bench_rc {rc}\n"
        f"@@nodecheck begin stderr\n{stderr}\n@@nodecheck end stderr rc=0\n@@nodecheck nvbandwidth_missing 1\n"
    )


class Ctx(SerialActiveContext):
    allow_disruptive = True

    def __init__(self, outputs: dict[str, list[str | Capture]]) -> None:
        super().__init__()
        self.outputs = outputs
        self.nodes = {n: Node(n, n) for n in outputs}
        self.order = list(outputs)
        self.captures = {n: {} for n in outputs}
        self.calls: list[tuple[str, Probe]] = []

    def run(self, node, probe, *, fresh=False, cleanup=False):
        self.calls.append((node, probe))
        queue = self.outputs[node]
        out = queue.pop(0) if len(queue) > 1 else queue[0]
        if isinstance(out, Capture):
            return out
        return Capture(node, probe.name, probe.argv, Outcome.EXITED, 0, out, "", 1.0)


def judge(outputs, **params) -> tuple[dict[str, list], Ctx]:
    ctx = Ctx(outputs)
    found: dict[str, list] = {}
    for nodes, v in perf(ctx, GpuPerf(**params)):
        for n in nodes:
            found.setdefault(n, []).append(v)
    return found, ctx


def test_one_gpu_15_percent_slow_among_64_fails_naming_value_and_median_and_is_measured_twice():
    outputs = {f"n{i}": [step_output(probe_json())] for i in range(1, 9)}
    outputs["n3"] = [step_output(probe_json(slow={5: 0.85}))]
    found, ctx = judge(outputs)
    bad = {n: vs for n, vs in found.items() if vs[0].status is not Status.PASS}
    assert sorted(bad) == ["n3"]
    gemm = next(v for v in bad["n3"] if "gemm_bf16" in v.message)
    assert (gemm.status, gemm.subject) == (Status.FAIL, "GPU5")
    assert gemm.message.startswith("GPU5: gemm_bf16 620.5 TFLOPS, 15.0% below its peers' median 730 TFLOPS"), (
        gemm.message
    )
    assert "63 peers" in gemm.message and "(measured twice)" in gemm.message
    assert gemm.observed["retried"] is True and gemm.observed["peers_median"] == 730
    assert [n for n, _ in ctx.calls].count("n3") == 2 and len(ctx.calls) == 9  # only the failing node again
    assert found["n1"][0].message.startswith("8 GPUs: gemm_bf16 730 TFLOPS, hbm 2500 GB/s")


def test_a_slow_first_run_that_is_fine_when_measured_again_is_a_warn():
    outputs = {f"n{i}": [step_output(probe_json())] for i in range(1, 6)}
    outputs["n2"] = [step_output(probe_json(slow={1: 0.8})), step_output(probe_json())]
    found, _ = judge(outputs)
    [first, *_] = found["n2"]
    assert first.status is Status.WARN and first.message.startswith("slow on the first run, within its bands")


def test_two_models_are_never_each_others_peers():
    outputs = {f"h{i}": [step_output(probe_json(H100))] for i in range(4)}
    outputs |= {f"a{i}": [step_output(probe_json(A100))] for i in range(4)}
    found, _ = judge(outputs)
    assert {n: [v.status for v in vs] for n, vs in found.items()} == {n: [Status.PASS] for n in outputs}


def test_a_whole_fleet_below_the_models_floor_fails_by_the_backstop():
    outputs = {f"n{i}": [step_output(probe_json(slow=dict.fromkeys(range(8), 0.6)))] for i in range(4)}
    found, _ = judge(outputs, retry=False)
    gemm = [v for v in found["n0"] if "gemm_bf16" in v.message]
    assert len(gemm) == 8 and all(v.status is Status.FAIL for v in gemm)
    assert gemm[0].message == "GPU0: gemm_bf16 438 TFLOPS, expected >= 510 TFLOPS"


def test_fewer_peers_than_min_peers_leaves_the_fixed_floor_alone():
    outputs = {"n1": [step_output(probe_json(gpus=2, slow={1: 0.88}))]}
    found, _ = judge(outputs)
    assert [v.status for v in found["n1"]] == [
        Status.PASS
    ]  # 642 TFLOPS, 12% slow: within the floor; one peer says nothing


def test_a_slow_figure_is_explained_by_the_clocks_and_throttle_reasons_of_the_run():
    slow_t = {
        "source": "pynvml", "samples": 20,
        "sm_clock_mhz": {"min": 1395, "max": 1425, "mean": 1410}, "mem_clock_mhz": None,
        "power_w": {"min": 690, "max": 700, "mean": 699}, "temp_c": {"min": 80, "max": 84, "mean": 82},
        "throttle_reasons": ["sw_power_cap", "hw_slowdown"],
    }  # fmt: skip
    outputs = {f"n{i}": [step_output(probe_json())] for i in range(4)}
    doc = probe_json(slow={2: 0.85})
    doc["gpus"][2]["telemetry"] = slow_t
    outputs["n0"] = [step_output(doc)]
    found, _ = judge(outputs, retry=False)
    gemm = next(v for v in found["n0"] if "gemm_bf16" in v.message)
    assert gemm.message.endswith(
        "(during the run: SM clock 1410 MHz (min 1395), 699 W, 84 °C max; throttled: sw_power_cap, hw_slowdown)"
    ), gemm.message


def test_fp8_on_a_gpu_without_it_is_not_an_error():
    found, _ = judge({f"a{i}": [step_output(probe_json(A100, fp8=True))] for i in range(2)}, dtypes=["bf16", "fp8"])
    assert [v.status for v in found["a0"]] == [Status.PASS] and "fp8" not in found["a0"][0].message


@pytest.mark.parametrize(
    ("output", "status", "words"),
    [
        (
            step_output("nodecheck-gpubench-unavailable: no module named torch or cupy", 3),
            Status.ERROR,
            "install PyTorch",
        ),
        (
            "@@nodecheck refuse GPU processes are running: 1234, python\n",
            Status.SKIPPED,
            "not run: busy — GPU processes",
        ),
        ("@@nodecheck missing python3\n", Status.ERROR, "the interpreter 'python3' not found"),
        (step_output("", 124), Status.TIMEOUT, "did not finish within its bound"),
        (step_output('{"schema": 1, "mode": "perf"', 0), Status.ERROR, "cannot read GPU benchmark's output"),
        (
            step_output("", 1, stderr="Traceback ...\nRuntimeError: CUDA error: out of memory"),
            Status.ERROR,
            "out of memory",
        ),
    ],
)
def test_a_node_without_figures_says_why(output, status, words):
    found, _ = judge({"n1": [output]})
    [v] = found["n1"]
    assert v.status is status and words in v.message, v.message


def test_an_unreachable_node_is_unreachable():
    cap = Capture("n1", "gpu_perf", (), Outcome.UNREACHABLE, None, "", "", 0.0, "connect timeout")
    found, _ = judge({"n1": [cap]})
    assert found["n1"][0].status is Status.UNREACHABLE


def test_without_allow_disruptive_nothing_runs():
    ctx = Ctx({"n1": [step_output(probe_json())]})
    ctx.allow_disruptive = False
    [(nodes, v)] = list(perf(ctx, GpuPerf()))
    assert v.status is Status.SKIPPED and "--allow-disruptive" in v.message and ctx.calls == []


def test_the_step_runs_the_guard_and_the_probe_with_its_arguments():
    probe = perf_probe(
        GpuPerf(duration_s=30, dtypes=["bf16", "fp8"], container={"image": "reg/train:1", "runtime": "podman"})
    )
    assert probe.stdin == BENCH_PROBE_SCRIPT  # the probe is stdin, never an argument
    args = probe.argv[4:]
    assert args[:6] == ("1", "240", str(4 * 1024 * 1024), "auto", "120", "")  # "": no .sif to guard
    assert args[6:23] == (
        "podman", "run", "--rm", "-i", "--device", "nvidia.com/gpu=all", "--network", "none",
        "--user", "65534:65534", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
        "--entrypoint", "python3", "reg/train:1",
    )  # fmt: skip
    assert "--dtypes" in args and args[args.index("--dtypes") + 1] == "bf16,fp8"
    assert probe.timeout_s == 240 + 120 + 40 + 30  # the probe's bound, nvbandwidth's, the guard, slack


@pytest.mark.parametrize(
    ("params", "words"),
    [
        ({"container": {"image": "reg/x; rm -rf /", "runtime": "docker"}}, "not an image reference"),
        ({"container": {"image": "relative.sif", "runtime": "apptainer"}}, "absolute path"),
        ({"python": "python3 -c evil"}, "not an interpreter"),
        ({"gemm_tflops": {"fp8": {"fail_below": 1}}}, "which dtypes does not measure"),
        ({"relative": {"min_peers": 3}}, "at least one of"),
    ],
)
def test_bad_params_are_refused_with_the_reason(params, words):
    with pytest.raises(ValueError, match=words):
        GpuPerf(**params)


def cupy_json(gpus: int = 8) -> dict:
    """What the probe prints through CuPy, which has no bfloat16: bf16 unsupported, fp16 measured."""
    doc = probe_json(gpus=gpus)
    for g in doc["gpus"]:
        g["gemm"] = {
            "bf16": {"unsupported": "bf16 is not supported by cupy 13.3.0 (data type 'bfloat16' not understood)"},
            "fp16": {"tflops": 700.0, "size": 8192, "iterations": 100, "seconds": 10.0},
        }
    return doc


def test_a_dtype_the_library_lacks_is_no_fault_when_another_was_measured():
    found, _ = judge({f"n{i}": [step_output(cupy_json())] for i in range(2)}, dtypes=["bf16", "fp16"])
    [v] = found["n0"]
    assert v.status is Status.PASS and "gemm_fp16 700 TFLOPS" in v.message and "bf16" not in v.message


def test_no_gemm_dtype_measurable_at_all_is_an_error_saying_why():
    doc = cupy_json(gpus=1)
    del doc["gpus"][0]["gemm"]["fp16"]
    found, _ = judge({"n0": [step_output(doc)]})
    v = found["n0"][0]
    assert (v.status, v.subject) == (Status.ERROR, "GPU0")
    assert v.message.startswith("GPU0: no GEMM dtype could be measured (bf16: bf16 is not supported by cupy")


NVB_H100 = Path(__file__).resolve().parents[1] / "data" / "nvbandwidth" / "h100-80gb-hbm3-x8-v0.10.0-d2d-read-ce.txt"


def with_nvbandwidth(output: str, text: str, rc: int = 0) -> str:
    return output.replace("@@nodecheck nvbandwidth_missing 1\n", "") + (
        f"@@nodecheck begin nvbandwidth\n{text}\n@@nodecheck end nvbandwidth rc=0\n@@nodecheck nvbandwidth_rc {rc}\n"
    )


def test_nvbandwidths_nvlink_figures_replace_the_probes_own():
    out = with_nvbandwidth(step_output(probe_json()), NVB_H100.read_text())
    found, ctx = judge({f"n{i}": [out] for i in range(2)})
    assert [v.status for v in found["n0"]] == [Status.PASS]
    figures = ctx.data.nodes["n0"]["figures"]
    nvlink = [f for f in figures if f["metric"] == "nvlink"]
    assert len(nvlink) == 56 and {f["source"] for f in nvlink} == {"nvbandwidth"}
    assert all(390 < f["value"] < 400 for f in nvlink)  # the recording's read_ce: 395.05-395.25 GB/s


def test_a_failed_nvbandwidth_warns_and_leaves_the_probes_figures_and_a_required_one_missing_is_an_error():
    out = with_nvbandwidth(step_output(probe_json()), "ERROR: cudaErrorNoDevice", rc=1)
    found, ctx = judge({"n0": [out]})
    assert [(v.status, v.message) for v in found["n0"]] == [
        (Status.WARN, "nvbandwidth exited 1: its figures are not used")
    ]
    assert {f["source"] for f in ctx.data.nodes["n0"]["figures"]} == {"probe"}
    found, _ = judge({"n0": [step_output(probe_json())]}, nvbandwidth="required")
    assert (found["n0"][0].status, found["n0"][0].message) == (
        Status.ERROR,
        "nvbandwidth is required but not installed on the node",
    )


def test_a_run_the_deadline_would_cut_never_starts_and_the_run_says_it_is_incomplete():
    ctx = Ctx({"n1": [step_output(probe_json())]})
    ctx.left = lambda: 100.0  # the step may take 120 + 120 + 40 + 30 s, and 30 s are kept for the after-reads
    [(_, v)] = list(perf(ctx, GpuPerf(duration_s=0.5)))
    assert v.status is Status.SKIPPED and ctx.calls == []
    assert v.message == (
        "GPU benchmark not started: 100 s left before the run's deadline, it may take 311 s "
        "(raise --deadline or shorten duration_s)"
    )
    assert ctx.undone == ["n1: GPU benchmark not started (100 s left, it may take 341 s)"]
