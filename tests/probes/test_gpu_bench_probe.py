"""The real GPU benchmark probe script, run as nodes run it (`python3 - ARGS`, script on stdin) against
the fake CuPy and nvidia-ml-py in tests/fakes: NumPy does the arithmetic (the SDC checksums are real
sums), the fake models device time, so every figure here is exact (tests/fakes/README.md, "cupy/")."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBE = ROOT / "nodecheck" / "probes" / "gpu_bench_probe.py"
FAKES = ROOT / "tests" / "fakes"
HEALTHY = FAKES / "nvml_states" / "h100x8-healthy.json"
SYSTEM_PYTHON = "/usr/bin/python3"
UNAVAILABLE = "nodecheck-gpubench-unavailable: "
# small enough for NumPy on two CPU cores; the modeled clock makes the figures exact at any size
SMALL = ["--backend", "cupy", "--gemm-size", "64", "--duration-s", "0.05", "--copy-mib", "4", "--pcie-mib", "2",
         "--p2p-mib", "1", "--sdc-size", "64", "--telemetry-interval-s", "0.02"]  # fmt: skip
# the fake's built-in H100 figures (tests/fakes/cupy/_state.py BUILTIN_FIGURES)
H100 = {"fp16": 720.0, "fp32": 51.0, "hbm": 2950.0, "h2d": 53.0, "d2h": 52.0, "p2p": 380.0}
PERF_KEYS = {"index", "name", "uuid", "pci_bus_id", "memory_bytes", "cc", "gemm", "hbm", "h2d", "d2h", "p2p",
             "telemetry", "errors"}  # fmt: skip
SDC_KEYS = {"index", "name", "uuid", "pci_bus_id", "memory_bytes", "cc", "sdc", "errors"}

pytestmark = pytest.mark.skipif(
    not os.access(SYSTEM_PYTHON, os.X_OK)
    or subprocess.run([SYSTEM_PYTHON, "-c", "import numpy"], capture_output=True).returncode != 0,
    reason=f"no {SYSTEM_PYTHON} with numpy (Debian: python3-numpy)",
)


def nvml_state(tmp_path: Path, change=None) -> Path:
    """The healthy H100 x8 NVML state, with clocks (and `change(state)`) added."""
    state = json.loads(HEALTHY.read_text())
    for i, gpu in enumerate(state["gpus"]):
        gpu["clocks_mhz"] = {"sm": 1980 - i, "mem": 2619}
    if change is not None:
        change(state)
    path = tmp_path / "nvml_state.json"
    path.write_text(json.dumps(state))
    return path


def run_probe(
    tmp_path: Path,
    args: list[str],
    bench: dict[str, Any] | None = None,
    nvml: Path | None = None,
    pythonpath: str | None = None,
    cwd: Path | str = "/",
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """The probe as nodecheck runs it on a node: the script is stdin of `python3 -`, in a clean env."""
    bench_path = tmp_path / "gpu_bench_state.json"
    bench_path.write_text(json.dumps(bench or {}))
    full = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LC_ALL": "C",
        "PYTHONPATH": str(FAKES) if pythonpath is None else pythonpath,
        "NODECHECK_FAKE_NVML_STATE": str(nvml or nvml_state(tmp_path)),
        "NODECHECK_FAKE_GPU_BENCH_STATE": str(bench_path),
        "OPENBLAS_NUM_THREADS": "1",  # 8 fake GPUs in 8 threads already fill the cores
    }
    full.update(env or {})
    return subprocess.run(
        [SYSTEM_PYTHON, "-", *args],
        input=PROBE.read_text(),
        capture_output=True,
        text=True,
        env=full,
        cwd=str(cwd),
        timeout=60,
    )


def probe_json(tmp_path: Path, args: list[str], **options: Any) -> dict[str, Any]:
    result = run_probe(tmp_path, args, **options)
    assert (result.returncode, result.stderr) == (0, ""), result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 1
    doc: dict[str, Any] = json.loads(lines[0])
    return doc


def close(value: float, expected: float, rel: float = 1e-9) -> bool:
    return abs(value - expected) <= rel * abs(expected)


# --- perf mode ---------------------------------------------------------------------------------------
def test_perf_reports_every_figure_of_every_gpu(tmp_path: Path) -> None:
    def reasons(state: dict[str, Any]) -> None:
        state["gpus"][2]["clock_event_reasons"] = 0x1 | 0x4 | 0x40  # idle, SW power cap, HW thermal

    doc = probe_json(tmp_path, [*SMALL, "--dtypes", "bf16,fp16,fp8,fp32"], nvml=nvml_state(tmp_path, reasons))
    assert (doc["schema"], doc["mode"], doc["errors"]) == (1, "perf", [])
    assert doc["backend"] == {
        "name": "cupy",
        "version": "13.3.0+nodecheck.fake",
        "blas": "cuBLAS 12.4.5",
        "cuda_runtime": "12.4",
        "driver": "550.90.07",
        "cuda_driver": 12040,
    }
    nvml_gpus = json.loads(HEALTHY.read_text())["gpus"]
    assert [gpu["index"] for gpu in doc["gpus"]] == list(range(8))
    for gpu, nv in zip(doc["gpus"], nvml_gpus):
        i = gpu["index"]
        assert set(gpu) == PERF_KEYS
        assert (gpu["name"], gpu["uuid"], gpu["pci_bus_id"]) == (nv["name"], nv["uuid"], nv["pci_bus_id"])
        assert (gpu["memory_bytes"], gpu["cc"], gpu["errors"]) == (85520809984, "9.0", [])
        gemm = gpu["gemm"]
        assert gemm["bf16"] == {
            "unsupported": "bf16 is not supported by cupy 13.3.0+nodecheck.fake (data type 'bfloat16' not understood)"
        }
        fp8 = "fp8 is not supported by cupy 13.3.0+nodecheck.fake (data type 'float8_e4m3fn' not understood)"
        assert gemm["fp8"] == {"unsupported": fp8}
        for dtype in ("fp16", "fp32"):
            figure = gemm[dtype]
            assert set(figure) == {"tflops", "size", "iterations", "seconds"}
            assert figure["size"] == 64 and figure["iterations"] >= 3
            assert close(figure["tflops"], H100[dtype])
            # TFLOPS from the JSON's own fields: 2 n^3 per GEMM
            assert close(2 * 64**3 * figure["iterations"] / figure["seconds"] / 1e12, figure["tflops"])
        assert close(gpu["hbm"]["gbps"], H100["hbm"])
        assert (gpu["hbm"]["bytes"], gpu["hbm"]["iterations"]) == (4 << 20, 10)
        # read + write: 2 x bytes per copy
        assert close(2 * (4 << 20) * 10 / gpu["hbm"]["seconds"] / 1e9, gpu["hbm"]["gbps"])
        for key, mib in (("h2d", 2), ("d2h", 2)):
            assert close(gpu[key]["gbps"], H100[key])
            assert (gpu[key]["bytes"], gpu[key]["iterations"]) == (mib << 20, 5)
            assert close((mib << 20) * 5 / gpu[key]["seconds"] / 1e9, gpu[key]["gbps"])
        assert sorted(gpu["p2p"], key=int) == [str(j) for j in range(8) if j != i]
        for figure in gpu["p2p"].values():
            assert close(figure["gbps"], H100["p2p"])
            assert (figure["bytes"], figure["iterations"]) == (1 << 20, 5)
        telemetry = gpu["telemetry"]
        assert telemetry["source"] == "pynvml" and telemetry["samples"] >= 2
        assert telemetry["sm_clock_mhz"] == {"min": 1980.0 - i, "max": 1980.0 - i, "mean": 1980.0 - i}
        assert telemetry["mem_clock_mhz"] == {"min": 2619.0, "max": 2619.0, "mean": 2619.0}
        assert telemetry["temp_c"]["min"] == float(nv["temperature_c"])
        assert close(telemetry["power_w"]["mean"], nv["power_usage_mw"] / 1000.0, 1e-6)
        assert telemetry["throttle_reasons"] == (["sw_power_cap", "hw_thermal_slowdown"] if i == 2 else [])


def test_a_slow_gpu_measures_exactly_its_speed_below_the_others(tmp_path: Path) -> None:
    doc = probe_json(tmp_path, [*SMALL, "--dtypes", "fp16,fp32"], bench={"speed": {"3": 0.85}})
    gpus = doc["gpus"]
    for gpu in gpus:
        factor = 0.85 if gpu["index"] == 3 else 1.0
        for dtype in ("fp16", "fp32"):
            assert gpu["gemm"][dtype]["tflops"] / gpus[0]["gemm"][dtype]["tflops"] == pytest.approx(factor, rel=0.01)
        for key in ("hbm", "h2d", "d2h"):
            assert gpu[key]["gbps"] / H100[key] == pytest.approx(factor, rel=0.01)
        for peer, figure in gpu["p2p"].items():
            # a copy runs at the slower of its two ends
            expected = 0.85 if 3 in (gpu["index"], int(peer)) else 1.0
            assert figure["gbps"] / H100["p2p"] == pytest.approx(expected, rel=0.01)


def test_without_peer_access_every_p2p_figure_is_an_error(tmp_path: Path) -> None:
    doc = probe_json(tmp_path, [*SMALL, "--measure", "p2p"], bench={"peer_access": False})
    for gpu in doc["gpus"]:
        assert set(gpu) == {"index", "name", "uuid", "pci_bus_id", "memory_bytes", "cc", "p2p", "telemetry", "errors"}
        assert gpu["p2p"] == {str(j): {"error": "no peer access"} for j in range(8) if j != gpu["index"]}


def test_selected_gpus_only_and_a_missing_one_is_reported(tmp_path: Path) -> None:
    doc = probe_json(tmp_path, [*SMALL, "--gpus", "0,2,9", "--measure", "hbm,p2p"])
    assert doc["errors"] == ["GPU 9 not present (8 CUDA devices)"]
    assert [gpu["index"] for gpu in doc["gpus"]] == [0, 2]
    assert set(doc["gpus"][0]["p2p"]) == {"2"} and set(doc["gpus"][1]["p2p"]) == {"0"}
    assert "gemm" not in doc["gpus"][0] and "h2d" not in doc["gpus"][0]


def test_telemetry_matches_gpus_by_pci_bus_id_not_by_index(tmp_path: Path) -> None:
    # CUDA sees NVML's GPUs 5 and 2 as its devices 0 and 1: the telemetry must follow the bus ids
    doc = probe_json(tmp_path, [*SMALL, "--measure", "hbm"], env={"CUDA_VISIBLE_DEVICES": "5,2"})
    nvml_gpus = json.loads(HEALTHY.read_text())["gpus"]
    assert [(g["index"], g["pci_bus_id"]) for g in doc["gpus"]] == [
        (0, nvml_gpus[5]["pci_bus_id"]),
        (1, nvml_gpus[2]["pci_bus_id"]),
    ]
    assert [g["telemetry"]["sm_clock_mhz"]["max"] for g in doc["gpus"]] == [1975.0, 1978.0]
    assert [g["telemetry"]["temp_c"]["max"] for g in doc["gpus"]] == [
        float(nvml_gpus[5]["temperature_c"]),
        float(nvml_gpus[2]["temperature_c"]),
    ]


def test_telemetry_falls_back_to_the_throttle_reasons_call_before_driver_535(tmp_path: Path) -> None:
    def old_driver(state: dict[str, Any]) -> None:
        state["missing_functions"] = ["nvmlDeviceGetCurrentClocksEventReasons"]
        state["gpus"][1]["clock_event_reasons"] = 0x8  # HW slowdown

    doc = probe_json(tmp_path, [*SMALL, "--measure", "hbm", "--gpus", "0,1"], nvml=nvml_state(tmp_path, old_driver))
    assert [g["telemetry"]["throttle_reasons"] for g in doc["gpus"]] == [[], ["hw_slowdown"]]


def test_without_pynvml_telemetry_is_an_error_and_the_figures_stay(tmp_path: Path) -> None:
    only_cupy = tmp_path / "site"
    only_cupy.mkdir()
    for package in ("cupy", "cupyx"):
        (only_cupy / package).symlink_to(FAKES / package)
    doc = probe_json(tmp_path, [*SMALL, "--measure", "hbm", "--gpus", "0"], pythonpath=str(only_cupy))
    gpu = doc["gpus"][0]
    assert gpu["telemetry"] == {"source": None, "error": "pynvml not importable"}
    assert close(gpu["hbm"]["gbps"], H100["hbm"])
    assert (doc["backend"]["driver"], doc["backend"]["cuda_driver"]) == (None, 12040)


# --- sdc mode ----------------------------------------------------------------------------------------
def sdc(tmp_path: Path, bench: dict[str, Any] | None = None, extra: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    doc = probe_json(tmp_path, [*SMALL, "--mode", "sdc", *extra], bench=bench)
    assert (doc["mode"], doc["errors"]) == ("sdc", [])
    for gpu in doc["gpus"]:
        assert set(gpu) == SDC_KEYS
    return [gpu["sdc"] for gpu in doc["gpus"]]


def reference_checksum(size: int, steps: int, seed: int) -> str:
    """The SDC chain in plain NumPy, as the fake's RandomState (PCG64) draws it: X <- tanh(X @ W_k)."""
    code = (
        "import hashlib, math, numpy as np\n"
        f"n, steps, seed = {size}, {steps}, {seed}\n"
        "rng = np.random.Generator(np.random.PCG64(seed))\n"
        "x = rng.standard_normal((n, n), dtype=np.float32)\n"
        "for _ in range(steps):\n"
        "    w = (rng.standard_normal((n, n), dtype=np.float32) * (1.0 / math.sqrt(n))).astype(np.float32)\n"
        "    x = np.tanh(np.matmul(x, w))\n"
        "print(hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest())\n"
    )
    out = subprocess.run(
        [SYSTEM_PYTHON, "-c", code], capture_output=True, text=True, env={"OPENBLAS_NUM_THREADS": "1"}, check=True
    )
    return out.stdout.strip()


def test_sdc_checksums_agree_across_gpus_and_runs(tmp_path: Path) -> None:
    first = sdc(tmp_path)
    second = sdc(tmp_path)
    assert first[0]["checksum"] == reference_checksum(64, 8, 20261202)
    for entry in first:
        assert set(entry) == {"checksum", "dtype", "size", "steps", "seed", "repeat_equal", "finite", "seconds"}
        assert (entry["dtype"], entry["size"], entry["steps"], entry["seed"]) == ("fp32", 64, 8, 20261202)
        assert (entry["repeat_equal"], entry["finite"]) == (True, True)
        assert entry["checksum"] == first[0]["checksum"]
        assert entry["seconds"] > 0
    assert [e["checksum"] for e in second] == [e["checksum"] for e in first]
    # another seed is another computation
    other = sdc(tmp_path, extra=("--sdc-seed", "7", "--gpus", "0"))
    assert other[0]["checksum"] != first[0]["checksum"]
    assert other[0]["checksum"] == reference_checksum(64, 8, 7)


def test_a_persistent_bitflip_changes_only_that_gpus_checksum(tmp_path: Path) -> None:
    healthy = sdc(tmp_path)[0]["checksum"]
    entries = sdc(tmp_path, bench={"bitflip": {"1": "persistent"}})
    assert [e["checksum"] == healthy for e in entries] == [i != 1 for i in range(8)]
    assert all(e["repeat_equal"] and e["finite"] for e in entries)  # wrong the same way every time


def test_a_transient_bitflip_fails_the_repeat(tmp_path: Path) -> None:
    healthy = sdc(tmp_path)[0]["checksum"]
    entries = sdc(tmp_path, bench={"bitflip": {"1": "transient"}})
    assert [e["repeat_equal"] for e in entries] == [i != 1 for i in range(8)]
    assert [e["checksum"] == healthy for e in entries] == [i != 1 for i in range(8)]  # the first run's checksum


def test_sdc_fp16_and_bf16_through_cupy(tmp_path: Path) -> None:
    fp16 = sdc(tmp_path, extra=("--sdc-dtype", "fp16", "--gpus", "0,1"))
    assert [(e["dtype"], e["repeat_equal"], e["finite"]) for e in fp16] == [("fp16", True, True)] * 2
    fp32 = sdc(tmp_path, extra=("--gpus", "0"))
    assert fp16[0]["checksum"] == fp16[1]["checksum"] != fp32[0]["checksum"]
    bf16 = sdc(tmp_path, extra=("--sdc-dtype", "bf16", "--gpus", "0"))
    assert bf16 == [
        {"unsupported": "bf16 is not supported by cupy 13.3.0+nodecheck.fake (data type 'bfloat16' not understood)"}
    ]


# --- unavailable, arguments, sys.path ------------------------------------------------------------------
def test_no_cuda_device_is_the_unavailable_line(tmp_path: Path) -> None:
    result = run_probe(
        tmp_path,
        SMALL,
        bench={
            "unavailable": "cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version"
        },
    )
    assert (result.returncode, result.stderr) == (3, "")
    assert result.stdout == (
        UNAVAILABLE + "cupy 13.3.0+nodecheck.fake: CUDARuntimeError: cudaErrorInsufficientDriver: CUDA driver "
        "version is insufficient for CUDA runtime version\n"
    )
    result = run_probe(tmp_path, SMALL, nvml=nvml_state(tmp_path, lambda s: s.update(gpus=[])))
    assert (result.returncode, result.stdout) == (
        3,
        UNAVAILABLE
        + "cupy 13.3.0+nodecheck.fake: CUDARuntimeError: cudaErrorNoDevice: no CUDA-capable device is detected\n",
    )


def test_auto_tries_torch_then_cupy_and_says_why_neither_works(tmp_path: Path) -> None:
    no_torch = tmp_path / "no-torch"
    (no_torch / "torch").mkdir(parents=True)
    (no_torch / "torch" / "__init__.py").write_text(
        "raise ImportError('libtorch_cuda.so: cannot open shared object file')\n"
    )
    args = [a for a in SMALL if a not in ("--backend", "cupy")] + ["--measure", "hbm", "--gpus", "0"]
    doc = probe_json(tmp_path, args, pythonpath=f"{no_torch}:{FAKES}")
    assert doc["backend"]["name"] == "cupy"
    result = run_probe(
        tmp_path, args, bench={"import_error": "CuPy failed to load libcudart.so.12"}, pythonpath=f"{no_torch}:{FAKES}"
    )
    assert (result.returncode, result.stdout) == (
        3,
        UNAVAILABLE + "cannot import torch: ImportError: libtorch_cuda.so: cannot open shared object file; "
        "cannot import cupy: ImportError: CuPy failed to load libcudart.so.12\n",
    )


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (["--bogus"], "unrecognized arguments: --bogus"),
        (["--gemm-size", "65537"], "argument --gemm-size: 65537 is outside 1..65536"),
        (["--copy-mib", "0"], "argument --copy-mib: 0 is outside 1..65536"),
        (["--sdc-steps", "1001"], "argument --sdc-steps: 1001 is outside 1..1000"),
        (["--gpus", "0,64"], "argument --gpus: '0,64': 1 to 64 indices in 0..63"),
        (["--dtypes", "bf16,int4"], "argument --dtypes: 'bf16,int4': choose from bf16,fp16,fp8,fp32"),
        (["--duration-s", "nan"], "argument --duration-s: nan is outside 0..3600"),
        (["--mode", "burn"], "argument --mode: invalid choice: 'burn'"),
    ],
)
def test_a_bad_argument_is_usage_and_exit_2(tmp_path: Path, args: list[str], complaint: str) -> None:
    result = run_probe(tmp_path, args)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith("usage: gpu_bench_probe ")
    assert complaint in result.stderr


def test_a_stray_json_or_cupy_in_the_current_directory_is_ignored(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    for name in ("json", "cupy", "cupyx", "pynvml", "hashlib", "argparse", "threading"):
        (home / f"{name}.py").write_text(f"raise RuntimeError('stray {name}.py imported')\n")
    for pythonpath in (str(FAKES), f"{home}/.:{FAKES}"):  # the cwd by another spelling is dropped too
        doc = probe_json(tmp_path, [*SMALL, "--mode", "sdc", "--gpus", "0"], cwd=home, pythonpath=pythonpath)
        assert doc["gpus"][0]["sdc"]["checksum"] == reference_checksum(64, 8, 20261202)


def test_eight_gpus_at_the_small_sizes_take_well_under_ten_seconds(tmp_path: Path) -> None:
    import time

    start = time.monotonic()
    probe_json(tmp_path, [*SMALL, "--dtypes", "fp16,fp32"])
    assert time.monotonic() - start < 10


def test_helpers_in_process() -> None:
    from nodecheck.probes import gpu_bench_probe as probe

    assert (
        probe._uuid_text(bytes.fromhex("4f2a9c1e7b3d4e8a9c510d6e2f8a1b01"))
        == "GPU-4f2a9c1e-7b3d-4e8a-9c51-0d6e2f8a1b01"
    )
    assert probe._uuid_text(b"\0" * 16) is None
    assert probe._uuid_text("4f2a9c1e-7b3d-4e8a-9c51-0d6e2f8a1b01") == "GPU-4f2a9c1e-7b3d-4e8a-9c51-0d6e2f8a1b01"
    assert probe._normal_bus_id("00000000:18:00.0") == probe._normal_bus_id("0000:18:00.0") == "0:18:00.0"
    assert probe._bus_id(0, 0x18, 0) == "00000000:18:00.0"
    assert probe._version_from_int(12040) == "12.4"
    assert probe._message(RuntimeError("x" * 1000)) == ("RuntimeError: " + "x" * 1000)[:300]


def test_a_cuda_error_in_one_phase_is_that_figures_error_only(tmp_path: Path) -> None:
    illegal = "cudaErrorIllegalAddress: an illegal memory access was encountered"
    long = "cudaErrorLaunchFailure: " + "unspecified launch failure " * 20
    bench = {"errors": {"2": {"matmul": illegal, "d2h": long}, "5": {"memcpy": illegal}}}
    doc = probe_json(tmp_path, [*SMALL, "--dtypes", "fp16"], bench=bench)
    gpus = doc["gpus"]
    assert gpus[2]["gemm"] == {"fp16": {"error": "CUDARuntimeError: " + illegal}}
    assert gpus[2]["d2h"] == {"error": ("CUDARuntimeError: " + " ".join(long.split()))[:300]}
    assert len(gpus[2]["d2h"]["error"]) == 300
    assert close(gpus[2]["hbm"]["gbps"], H100["hbm"]) and close(gpus[2]["h2d"]["gbps"], H100["h2d"])
    # GPU5's device-to-device copies fail: its HBM figure and its sends, not what the others send it
    assert gpus[5]["hbm"] == {"error": "CUDARuntimeError: " + illegal}
    assert gpus[5]["p2p"] == {str(j): {"error": "CUDARuntimeError: " + illegal} for j in range(8) if j != 5}
    assert close(gpus[0]["p2p"]["5"]["gbps"], H100["p2p"])
    for gpu in gpus:
        assert gpu["errors"] == []
        if gpu["index"] not in (2, 5):
            assert close(gpu["gemm"]["fp16"]["tflops"], H100["fp16"]) and close(gpu["d2h"]["gbps"], H100["d2h"])


def test_its_copies_of_the_nvml_probes_helpers_cannot_drift():
    """The probe travels alone on stdin, so it carries its own copy of the NVML probe's sys.path
    clean-up and throttle-reason table: they must stay the same as the originals."""
    import ast
    import inspect

    from nodecheck.probes import gpu_bench_probe, nvml_probe

    def code(module, name: str) -> str:  # the function without its docstring (each names its own modules)
        [fn] = ast.parse(inspect.getsource(getattr(module, name))).body
        assert isinstance(fn, ast.FunctionDef)
        return ast.dump(ast.Module([*fn.body[1:]], []))

    assert gpu_bench_probe._CLOCK_EVENT_REASONS == nvml_probe._CLOCK_EVENT_REASONS
    assert gpu_bench_probe._CLOCK_EVENT_REASONS_FUNCTIONS == nvml_probe._CLOCK_EVENT_REASONS_FUNCTIONS
    for name in ("_builtin_os", "_drop_cwd_from_sys_path"):
        assert code(gpu_bench_probe, name) == code(nvml_probe, name)
