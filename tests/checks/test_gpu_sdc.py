"""gpu.sdc: checksums compared within groups of identical GPUs and software, a suspect run again on that
GPU only, the verdicts that follow."""

from __future__ import annotations

import json

from nodecheck.checks.gpu_sdc import GpuSdc, sdc
from nodecheck.core.model import Status
from tests.checks.test_gpu_perf import Ctx, step_output

GOOD, BAD = "a" * 64, "b" * 64
BACKEND = {"name": "torch", "version": "2.5.1", "blas": None, "cuda_runtime": "12.4", "driver": "550.90.07"}


def sdc_json(sums: list[str] | dict[int, str], *, model="NVIDIA H100 80GB HBM3", repeat=True, version="2.5.1") -> str:
    items = sums.items() if isinstance(sums, dict) else enumerate(sums)
    gpus = [
        {
            "index": i, "name": model, "uuid": None, "pci_bus_id": None, "memory_bytes": 85899345920, "cc": "9.0",
            "sdc": {"checksum": s, "dtype": "fp32", "size": 4096, "steps": 16, "seed": 20261202,
                    "repeat_equal": repeat, "finite": True, "seconds": 0.5},
            "errors": [],
        }
        for i, s in items
    ]  # fmt: skip
    backend = {**BACKEND, "version": version, "cuda_driver": 12040}
    return step_output({"schema": 1, "mode": "sdc", "backend": backend, "gpus": gpus, "errors": []})


def judge(outputs, **params):
    ctx = Ctx(outputs)
    found: dict[str, list] = {}
    for nodes, v in sdc(ctx, GpuSdc(**params)):
        for n in nodes:
            found.setdefault(n, []).append(v)
    return found, ctx


def test_the_gpu_that_disagrees_is_run_again_alone_and_fails_when_it_disagrees_again():
    outputs = {f"n{i}": [sdc_json([GOOD] * 8)] for i in range(1, 5)}
    outputs["n2"] = [sdc_json([GOOD] * 3 + [BAD] + [GOOD] * 4), sdc_json({3: BAD})]
    found, ctx = judge(outputs)
    [v] = found["n2"]
    assert (v.status, v.subject) == (Status.FAIL, "GPU3")
    assert "silent data corruption suspect" in v.message and "persistent" in v.message
    assert BAD[:16] in v.message and GOOD[:16] in v.message and "its 31 peers'" in v.message
    rerun = [p for n, p in ctx.calls if n == "n2"][1]
    assert rerun.argv[rerun.argv.index("--gpus") + 1] == "3"  # that GPU only
    assert [vs[0].status for n, vs in found.items() if n != "n2"] == [Status.PASS] * 3
    assert found["n1"][0].message == f"8 GPUs: checksum {GOOD[:16]} agrees with 32 GPUs of the same model and software"
    assert ctx.data.groups and next(iter(ctx.data.groups.values()))["expected"] == GOOD


def test_a_mismatch_that_does_not_repeat_is_a_transient_warn():
    outputs = {f"n{i}": [sdc_json([GOOD] * 4)] for i in range(1, 4)}
    outputs["n1"] = [sdc_json([BAD] + [GOOD] * 3), sdc_json({0: GOOD})]
    found, _ = judge(outputs)
    [v] = found["n1"]
    assert v.status is Status.WARN and "transient mismatch" in v.message


def test_another_library_version_is_another_group_never_a_suspect():
    outputs = {f"n{i}": [sdc_json([GOOD] * 4)] for i in range(1, 4)}
    outputs["n4"] = [sdc_json([BAD] * 4, version="2.6.0")]
    found, ctx = judge(outputs)
    assert {n: vs[0].status for n, vs in found.items()} == dict.fromkeys(outputs, Status.PASS)
    assert len(ctx.calls) == 4  # nobody run again


def test_a_lone_gpu_without_a_reference_is_not_compared_and_with_one_it_is():
    found, _ = judge({"n1": [sdc_json([GOOD])]})
    [v] = found["n1"]
    assert v.status is Status.SKIPPED and "not compared" in v.message
    group = v.observed["group"]
    found, _ = judge({"n1": [sdc_json([GOOD])]}, reference={group: GOOD})
    assert found["n1"][0].status is Status.PASS and "pinned reference" in found["n1"][0].message
    found, _ = judge({"n1": [sdc_json([GOOD]), sdc_json([GOOD])]}, reference={group: BAD})
    assert found["n1"][0].status is Status.FAIL and "pinned reference" in found["n1"][0].message


def test_a_suspect_whose_second_run_fails_to_complete_fails():
    outputs = {f"n{i}": [sdc_json([GOOD] * 4)] for i in range(1, 4)}
    outputs["n1"] = [sdc_json([BAD] + [GOOD] * 3), "@@nodecheck refuse GPU processes are running: 99 python\n"]
    found, _ = judge(outputs)
    [v] = found["n1"]
    assert v.status is Status.FAIL and "re-run did not complete" in v.message and "busy" in v.message


def test_a_gpu_without_a_checksum_is_an_error():
    doc = json.loads(sdc_json([GOOD] * 2).split("\n")[1])
    doc["gpus"][1]["sdc"] = {"error": "CUDA error: an illegal memory access was encountered"}
    found, _ = judge({"n1": [step_output(doc)]})
    assert [(v.status, v.subject) for v in found["n1"]] == [(Status.ERROR, "GPU1"), (Status.SKIPPED, "GPU0")]
    assert "illegal memory access" in found["n1"][0].message


def test_a_bad_reference_is_refused():
    import pytest

    with pytest.raises(ValueError, match="not a sha256 checksum"):
        GpuSdc(reference={"x": "abc"})
