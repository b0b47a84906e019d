"""kernel.modules judged on lsmod and /proc/modules recordings: required groups, recommended ones,
forbidden ones, a module that is unloading. Exact statuses and messages."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from nodecheck.checks.kernel_modules import KernelModules, modules, probes
from nodecheck.core.errors import ParseError
from nodecheck.core.model import Status
from tests.helpers import captures, data

PASS, WARN, FAIL = Status.PASS, Status.WARN, Status.FAIL
H100 = "lsmod/gpud-pr39-h100-fm535-lsmod-grep-peermem.txt"
NO_PEERMEM = "lsmod/derived-gpud-pr39-h100-no-nvidia-peermem.txt"
GPU_PROFILE = dict(
    required=["nvidia", "nvidia_uvm", ["nvidia_peermem", "nv_peer_mem"], "ib_core", "mlx5_ib"],
    recommended=["gdrdrv"],
)


def probe_out(want, text, section="lsmod", builtin=()):
    body = f"@@nodecheck begin {section}\n{text}@@nodecheck end {section} rc=0\n"
    body += "".join(f"@@nodecheck builtin:{name} 1\n" for name in builtin)
    return captures(probes(want)[0], body)


def judged(path_or_text, section="lsmod", builtin=(), **params):
    want = KernelModules(**params)
    text = data(path_or_text) if path_or_text.endswith(".txt") else path_or_text
    return [(v.status, v.subject, v.message) for v in modules(probe_out(want, text + "\n", section, builtin), want)]


def test_the_healthy_h100_recording_passes_the_gpu_profile_but_gdrcopy():
    assert judged(H100, **GPU_PROFILE) == [
        (PASS, "nvidia", "nvidia loaded"),
        (PASS, "nvidia_uvm", "nvidia_uvm loaded (seen as a user of another module in lsmod)"),
        (PASS, "nvidia_peermem", "nvidia_peermem loaded"),
        (PASS, "ib_core", "ib_core loaded"),
        (PASS, "mlx5_ib", "mlx5_ib loaded (seen as a user of another module in lsmod)"),
        (
            WARN,
            "gdrdrv",
            "gdrdrv not loaded (lsmod), expected loaded: GDRCopy is unavailable (NCCL and UCX fall back to "
            "slower copies)",
        ),
        (PASS, "nouveau", "nouveau not loaded"),
    ]


def test_without_nvidia_peermem_gpudirect_rdma_is_named():
    got = judged(NO_PEERMEM, **GPU_PROFILE)
    assert got[2] == (
        FAIL,
        "nvidia_peermem",
        "nvidia_peermem or nv_peer_mem not loaded (lsmod), expected loaded: GPUDirect RDMA is off: NCCL stages "
        "through host memory, inter-node bandwidth drops",
    )
    assert [s for s, *_ in got] == [PASS, PASS, FAIL, PASS, PASS, WARN, PASS]


def test_an_ib_only_listing_misses_the_gpu_driver():
    got = judged("lsmod/gpu-operator-2511-8gpu-nvlink-lsmod-sort-grep-mlx5.txt", **GPU_PROFILE)
    assert got[0] == (FAIL, "nvidia", "nvidia not loaded (lsmod), expected loaded: the GPUs have no driver")
    assert got[3:5] == [(PASS, "ib_core", "ib_core loaded"), (PASS, "mlx5_ib", "mlx5_ib loaded")]


def test_an_unloading_module_is_not_loaded():
    got = judged("proc-modules/derived-gpud-pr39-h100-peermem-unloading.txt", section="proc-modules", **GPU_PROFILE)
    assert got[2] == (
        FAIL,
        "nvidia_peermem",
        "nvidia_peermem is Unloading (/proc/modules), expected Live: GPUDirect RDMA is off: NCCL stages through "
        "host memory, inter-node bandwidth drops",
    )


def test_forbidden_nouveau_and_built_in_modules():
    # constructed: the nouveau line as lsmod prints it on a server with the open-source driver bound
    got = judged("Module                  Size  Used by\nnouveau              3694592  0", required=[])
    assert got == [
        (
            FAIL,
            "nouveau",
            "nouveau loaded (lsmod), expected not loaded: the open-source nouveau driver holds the GPUs, so "
            "nvidia cannot",
        )
    ]
    assert judged(H100, required=["ib_core", "8250"], forbidden=[], builtin=["8250"])[1] == (
        PASS,
        "8250",
        "8250 loaded (built into the kernel)",
    )


def test_no_module_list_is_an_error():
    want = KernelModules()
    with pytest.raises(ParseError, match="neither lsmod nor /proc/modules"):
        list(modules(captures(probes(want)[0], "@@nodecheck modules-source none\n"), want))
    cut = captures(probes(want)[0], "@@nodecheck begin lsmod\nnvidia 5 0\n")
    with pytest.raises(ParseError, match="output cut off"):
        list(modules(cut, want))


def test_params():
    want = KernelModules(required=["nvidia-uvm", ["nvidia_peermem", "nv-peer-mem"]], forbidden=["nouveau"])
    assert want.required == ["nvidia_uvm", ["nvidia_peermem", "nv_peer_mem"]]
    assert want.names() == ["nouveau", "nv_peer_mem", "nvidia_peermem", "nvidia_uvm"]
    assert probes(want)[0].argv[-4:] == ("nouveau", "nv_peer_mem", "nvidia_peermem", "nvidia_uvm")
    for bad in ("-r", "a b", "x;rm", "", "a" * 65):
        with pytest.raises(ValidationError):
            KernelModules(required=[bad])
