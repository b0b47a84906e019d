"""parse_gpu_bench: the GPU benchmark probe's schema-1 JSON (hand-written outputs in tests/data/gpu_bench/)
-> exact facts; a faulty figure -> that Figure's error; a schema fault or an over-bound output -> ParseError."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.gpu_bench import (
    Backend,
    Figure,
    GpuBenchUnavailable,
    Sdc,
    Stat,
    Telemetry,
    parse_gpu_bench,
    unavailable_reason,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "gpu_bench"


def text(name: str) -> str:
    """A hand-written output (tests/data/gpu_bench/constructed-<name>)."""
    return (DATA / f"constructed-{name}").read_text()


def doc(name: str) -> dict:
    return json.loads(text(name))


def test_h100_perf_run_exact_facts() -> None:
    run = parse_gpu_bench(text("h100-8x-perf.json"))
    assert run.schema == 1 and run.mode == "perf" and run.errors == ()
    assert run.backend == Backend("torch", "2.5.1+cu124", "cuBLAS 12.4.5.8", "12.4", "550.90.07", 12040)
    assert run.software_key == "torch 2.5.1+cu124 | cuBLAS 12.4.5.8 | 12.4 | 550.90.07"
    assert [g.index for g in run.gpus] == list(range(8))
    gpu0, gpu4 = run.gpus[0], run.gpus[4]
    assert gpu0.name == "NVIDIA H100 80GB HBM3"
    assert gpu0.uuid == "GPU-6b1f0c2e-4d3a-4e8b-9c1d-2f7a8e9b0c00"
    assert gpu0.pci_bus_id == "00000000:18:00.0"
    assert gpu0.memory_bytes == 85520809984 and gpu0.cc == "9.0"
    assert dict(gpu0.gemm) == {
        "bf16": Figure(712.3, size=8192, iterations=140, seconds=10.02),
        "fp16": Figure(715.4, size=8192, iterations=141, seconds=10.01),
        "fp8": Figure(1296.4, size=8192, iterations=256, seconds=10.0),
    }
    assert gpu4.gemm["bf16"] == Figure(598.4, size=8192, iterations=118, seconds=10.05)
    assert gpu0.hbm == Figure(2980.1, size=1073741824, seconds=0.72)
    assert gpu0.h2d == Figure(54.1, size=268435456, seconds=0.05)
    assert gpu0.d2h == Figure(55.3, size=268435456, seconds=0.05)
    assert sorted(gpu0.p2p) == [1, 2, 3, 4, 5, 6, 7]
    assert gpu0.p2p[1] == Figure(390.2, size=268435456, seconds=0.02)
    assert gpu0.p2p[4].value == 371.5
    assert 4 not in gpu4.p2p and len(gpu4.p2p) == 7
    assert gpu0.sdc is None
    assert gpu0.telemetry == Telemetry(
        source="pynvml",
        samples=21,
        sm_clock_mhz=Stat(1755.0, 1980.0, 1902.5),
        mem_clock_mhz=Stat(2619.0, 2619.0, 2619.0),
        power_w=Stat(212.4, 699.8, 655.1),
        temp_c=Stat(38.0, 71.0, 64.3),
        throttle_reasons=("sw_power_cap",),
    )
    assert gpu4.telemetry is not None
    assert gpu4.telemetry.throttle_reasons == ("sw_power_cap", "hw_slowdown", "hw_thermal_slowdown")
    assert gpu4.telemetry.sm_clock_mhz == Stat(1410.0, 1980.0, 1587.0)
    assert gpu0.errors == ()


def test_a100_fp8_unsupported_is_an_error_figure() -> None:
    run = parse_gpu_bench(text("a100-4x-perf-fp8-error.json"))
    assert run.software_key == "torch 2.4.0+cu121 | cuBLAS 12.1.3.1 | 12.1 | 535.183.01"
    assert len(run.gpus) == 4
    for gpu in run.gpus:
        assert gpu.cc == "8.0"
        assert gpu.gemm["fp8"] == Figure(None, error="fp8 needs compute capability >= 8.9 (this GPU: 8.0)")
        assert gpu.telemetry is not None and gpu.telemetry.throttle_reasons == ()
    assert [g.gemm["bf16"].value for g in run.gpus] == [271.4, 272.4, 273.4, 274.4]
    assert run.gpus[2].pci_bus_id == "00000000:47:00.0"
    assert sorted(run.gpus[2].p2p) == [0, 1, 3]


def test_sdc_run_keeps_checksums_and_the_repeat_mismatch() -> None:
    run = parse_gpu_bench(text("h100-8x-sdc.json"))
    assert run.mode == "sdc"
    raw = doc("h100-8x-sdc.json")["gpus"]
    good = raw[0]["sdc"]["checksum"]
    for gpu in run.gpus:
        assert gpu.gemm == {} and gpu.hbm is None and gpu.h2d is None and gpu.p2p == {} and gpu.telemetry is None
    assert run.gpus[0].sdc == Sdc(good, "fp32", 2048, 8, 20261202, repeat_equal=True, finite=True)
    assert run.gpus[5].sdc == Sdc(raw[5]["sdc"]["checksum"], "fp32", 2048, 8, 20261202, repeat_equal=False, finite=True)
    assert raw[5]["sdc"]["checksum"] != good
    assert [g.index for g in run.gpus if g.sdc and g.sdc.checksum == good] == [0, 1, 2, 3, 4, 6, 7]


def test_failed_phase_no_peer_access_and_telemetry_error() -> None:
    run = parse_gpu_bench(text("l40s-2x-cupy-failed-phase-no-telemetry.json"))
    assert run.backend == Backend("cupy", "13.3.0", None, "12.6", None, 12060)
    assert run.software_key == "cupy 13.3.0 | ? | 12.6 | 12060"
    assert run.errors == ("pynvml not importable: No module named 'pynvml'",)
    gpu0, gpu1 = run.gpus
    assert gpu0.uuid is None
    assert gpu0.gemm["fp8"] == Figure(None, error="fp8 GEMM is not supported by the cupy backend")
    assert dict(gpu0.p2p) == {1: Figure(None, error="no peer access")}
    assert dict(gpu1.p2p) == {0: Figure(None, error="no peer access")}
    assert gpu0.hbm == Figure(781.4, size=1073741824, seconds=2.75)
    assert gpu1.hbm == Figure(
        None,
        error="OutOfMemoryError: Out of memory allocating 1,073,741,824 bytes"
        " (allocated so far: 47,244,640,256 bytes).",
    )
    assert gpu1.errors == ("hbm: OutOfMemoryError: Out of memory allocating 1,073,741,824 bytes",)
    assert gpu0.telemetry == Telemetry(None, 0, None, None, None, None, (), error="pynvml not importable")


def test_unavailable_line() -> None:
    assert unavailable_reason(text("unavailable.txt")) == "neither torch nor cupy with CUDA is importable"
    assert unavailable_reason(text("h100-8x-sdc.json")) is None
    assert unavailable_reason("") is None
    assert unavailable_reason("nodecheck-gpubench-unavailable:\n") == "no reason given"
    with pytest.raises(GpuBenchUnavailable) as info:
        parse_gpu_bench(text("unavailable.txt"))
    assert info.value.reason == "neither torch nor cupy with CUDA is importable"


def test_nan_and_negative_figures_become_figure_errors() -> None:
    run = parse_gpu_bench(text("hostile-nan-negative-figures.json"))
    gpu0, gpu1 = run.gpus
    assert gpu0.gemm["bf16"] == Figure(None, error="tflops: not a finite number >= 0 (nan)", size=8192, iterations=140)
    assert gpu0.gemm["fp16"].value == 715.4  # the other figures of the GPU are still judged
    assert gpu0.hbm == Figure(None, error="gbps: not a finite number >= 0 (-3.5)", size=1073741824)
    assert gpu1.gemm["fp16"] == Figure(None, error="seconds: not a finite number >= 0 (inf)", size=8192, iterations=141)
    assert gpu1.telemetry is not None
    assert gpu1.telemetry.power_w is None
    assert gpu1.telemetry.error == "power_w: not a finite number"
    assert gpu1.telemetry.sm_clock_mhz == Stat(1755.0, 1980.0, 1902.5)


def test_huge_strings_are_cut() -> None:
    run = parse_gpu_bench(text("hostile-huge-strings.json"))
    gpu = run.gpus[0]
    assert gpu.name == "N" * 300 + "…"
    assert gpu.errors == ("E" * 300 + "…",)
    assert gpu.sdc == Sdc(None, "", 0, 0, 0, repeat_equal=False, finite=False, error="Z" * 300 + "…")
    assert run.backend.version == "v" * 300 + "…"
    assert len(run.errors) == 65
    assert run.errors[0] == "x" * 300 + "…"
    assert run.errors[-1] == "… 36 more error(s)"


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("hostile-10000-gpus.json", "$.gpus: 10000 GPUs (at most 64)"),
        ("hostile-wrong-schema.json", "unknown schema version 2 (this nodecheck reads 1)"),
        (
            "hostile-truncated.json",
            "not JSON: Expecting property name enclosed in double quotes: line 1 column 5528 (char 5527)",
        ),
    ],
)
def test_hostile_files_are_parse_errors(name: str, reason: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_gpu_bench(text(name))
    assert info.value.reason == reason
    assert info.value.tool == "gpu bench probe"


def perf() -> dict:
    return copy.deepcopy(doc("h100-8x-perf.json"))


def reason_of(value: object) -> str:
    with pytest.raises(ParseError) as info:
        parse_gpu_bench(value if isinstance(value, str) else json.dumps(value))
    return info.value.reason


def test_schema_faults_name_the_field() -> None:
    d = perf()
    d["gpus"][0]["gemm"]["bf16"]["tflops"] = "712.3"
    assert reason_of(d) == "$.gpus[0].gemm.bf16.tflops: expected a number, got a string '712.3'"
    d = perf()
    d["gpus"][0]["memory_bytes"] = True
    assert reason_of(d) == "$.gpus[0].memory_bytes: expected an integer, got a boolean True"
    d = copy.deepcopy(doc("h100-8x-sdc.json"))
    d["gpus"][1]["index"] = 0
    assert reason_of(d) == "$.gpus: duplicate GPU index in [0, 0, 2, 3, 4, 5, 6, 7]"
    d = perf()
    d["gpus"][0]["sdc"] = {"error": "x"}
    assert reason_of(d) == "$.gpus[0]: perf mode output has ['sdc']"
    d = perf()
    d["mode"] = "burn"
    assert reason_of(d) == "$.mode: 'burn' is not one of ('perf', 'sdc')"
    d = perf()
    d["backend"]["name"] = "jax"
    assert reason_of(d) == "$.backend.name: 'jax' is not one of ('torch', 'cupy')"
    d = perf()
    d["gpus"][0]["p2p"]["0"] = {"gbps": 1.0}
    assert reason_of(d) == "$.gpus[0].p2p: not a peer GPU index: '0'"
    d = perf()
    d["gpus"][0]["p2p"] = {str(i): {"gbps": 1.0} for i in range(1, 70)}
    assert reason_of(d) == "$.gpus[0].p2p: 69 peers (at most 64)"
    d = perf()
    d["gpus"][0]["hbm"]["gbs"] = 1.0
    assert reason_of(d) == "$.gpus[0].hbm: unknown key(s) ['gbs']"
    d = perf()
    d["gpus"][0]["telemetry"]["throttle_reasons"] = ["power_brake"]
    assert reason_of(d) == "$.gpus[0].telemetry.throttle_reasons: unknown reason(s) ['power_brake']"
    d = perf()
    del d["gpus"][0]["name"]
    assert reason_of(d) == "$.gpus[0].name: missing"
    d = perf()
    d["schema"] = True
    assert reason_of(d) == "unknown schema version True (this nodecheck reads 1)"
    assert reason_of("[1, 2]") == "not a JSON object but an array"
    assert reason_of("") == "empty output"
    assert reason_of('{"schema": 1, "n": ' + "9" * 40 + "}") == "not JSON: integer of 40 digits"
    assert reason_of("[" * 100000 + "]" * 100000) == "JSON nested too deeply"
    assert (
        reason_of(" " * (4 * 1024 * 1024 + 1)) == f"output of {4 * 1024 * 1024 + 1} characters (at most 4194304 read)"
    )


def test_bad_checksum_is_an_sdc_error_not_a_value() -> None:
    d = copy.deepcopy(doc("h100-8x-sdc.json"))
    d["gpus"][0]["sdc"]["checksum"] = "ABCDEF" + "0" * 58
    d["gpus"][1]["sdc"]["checksum"] = "0" * 63
    d["gpus"][3]["sdc"]["seconds"] = float("nan")  # the time is not the verdict: the checksum stands
    run = parse_gpu_bench(json.dumps(d))
    assert run.gpus[3].sdc is not None
    assert (run.gpus[3].sdc.checksum, run.gpus[3].sdc.error) == (d["gpus"][3]["sdc"]["checksum"], "")
    assert run.gpus[0].sdc is not None and run.gpus[0].sdc.checksum is None
    assert run.gpus[0].sdc.error == "checksum is not 64 lowercase hex digits: 'ABCDEF" + "0" * 58 + "'"
    assert run.gpus[1].sdc is not None and run.gpus[1].sdc.checksum is None
    assert run.gpus[1].sdc.error.startswith("checksum is not 64 lowercase hex digits")
    assert run.gpus[2].sdc is not None and run.gpus[2].sdc.error == ""


def test_software_key_falls_back_to_cuda_driver_then_question_mark() -> None:
    d = perf()
    d["backend"].update(driver=None, cuda_driver=None, blas=None, cuda_runtime=None)
    assert parse_gpu_bench(json.dumps(d)).software_key == "torch 2.5.1+cu124 | ? | ? | ?"
