"""nvidia.libraries judged on the real probe's output over fake node trees built from recorded
`ls -l` listings and /proc, /sys version recordings: each verdict with its exact message."""

from __future__ import annotations

import os

import pytest
from pydantic import ValidationError

from nodecheck.checks.nvidia import NvidiaLibraries, libraries, probes
from nodecheck.core.model import Status
from tests.helpers import captures
from tests.probes.nvidia_tree import LIBDIR, cache_line, fake_ldconfig, kernel_version, run_probe, tree_from_ls

PASS, WARN, FAIL, ERROR = Status.PASS, Status.WARN, Status.FAIL, Status.ERROR
SYS_550 = "sys-module-nvidia-version/constructed-550.90.07.txt"
PROC_565 = "proc-driver-nvidia-version/nixgl-186-open-565.57.01-ubuntu2404.txt"
NAMES = ["libcuda.so.1", "libnvidia-ml.so.1", "libnvidia-ptxjitcompiler.so.1", "libnvidia-nvvm.so.4"]
ML_WHY = "NVML: nvidia-smi, DCGM and NCCL's topology detection fail"


def node(tmp_path, *, kernel=SYS_550, cache=None, rc=0, drop=(), want=None):
    """A 550.90.07 driver install (the recorded gpud #415 listings plus the PTX JIT and NVVM files laid
    out the same way), judged; `drop` removes files first, `cache` replaces the loader cache's lines."""
    root, bindir = tmp_path / "root", tmp_path / "bin"
    tree_from_ls(root, "ls-l-driver-libs/gpud-415-550.90.07-libnvidia-ml.txt")
    tree_from_ls(root, "ls-l-driver-libs/gpud-415-550.90.07-grep-cuda.txt")
    lib = root / LIBDIR.lstrip("/")
    for base, size in (("libnvidia-ptxjitcompiler", 25_000_000), ("libnvidia-nvvm", 60_000_000)):
        with open(lib / f"{base}.so.550.90.07", "wb") as f:
            f.truncate(size)
        os.symlink(f"{base}.so.550.90.07", lib / f"{base}.so.{4 if 'nvvm' in base else 1}")
    for name in drop:
        os.unlink(lib / name)
    where = "sys/module/nvidia/version" if kernel and kernel.startswith("sys") else "proc/driver/nvidia/version"
    kernel_version(root, kernel, where)
    present = [n for n in NAMES if n not in drop]
    fake_ldconfig(bindir, cache if cache is not None else [cache_line(n, f"{LIBDIR}/{n}") for n in present], rc)
    want = want or NvidiaLibraries()
    text = run_probe(root, want.names(), bindir)
    return [(v.status, v.subject, v.message) for v in libraries(captures(probes(want)[0], text), want)], root


def test_a_healthy_550_node_passes_naming_the_version(tmp_path):
    got, _ = node(tmp_path)
    assert got == [
        (PASS, "nvidia", "NVIDIA kernel module 550.90.07 loaded (/sys/module/nvidia/version)"),
        (PASS, "libcuda.so.1", "libcuda.so.1 -> libcuda.so.550.90.07 (550.90.07, 28581024 bytes)"),
        (PASS, "libnvidia-ml.so.1", "libnvidia-ml.so.1 -> libnvidia-ml.so.550.90.07 (550.90.07, 2078360 bytes)"),
        (
            PASS,
            "libnvidia-ptxjitcompiler.so.1",
            "libnvidia-ptxjitcompiler.so.1 -> libnvidia-ptxjitcompiler.so.550.90.07 (550.90.07, 25000000 bytes)",
        ),
        (PASS, "libnvidia-nvvm.so.4", "libnvidia-nvvm.so.4 -> libnvidia-nvvm.so.550.90.07 (550.90.07, 60000000 bytes)"),
    ]


def test_a_zero_byte_libnvidia_ml_fails_naming_the_file(tmp_path):
    root, bindir = tmp_path / "root", tmp_path / "bin"
    got, root = node(tmp_path)
    (root / LIBDIR.lstrip("/") / "libnvidia-ml.so.550.90.07").write_bytes(b"")
    want = NvidiaLibraries()
    verdicts = list(libraries(captures(probes(want)[0], run_probe(root, want.names(), bindir)), want))
    assert [v.status for v in verdicts] == [PASS, PASS, FAIL, PASS, PASS]
    assert verdicts[2].message == (
        f"libnvidia-ml.so.1 -> libnvidia-ml.so.550.90.07 is empty (0 bytes): a failed driver upgrade "
        f"(Soperator #2684): {ML_WHY}"
    )
    assert verdicts[2].observed == {
        "path": f"{LIBDIR}/libnvidia-ml.so.1",
        "resolves_to": f"{LIBDIR}/libnvidia-ml.so.550.90.07",
        "size": 0,
        "version": "550.90.07",
    }


def test_libraries_of_another_driver_than_the_loaded_module_fail_naming_both(tmp_path):
    got, _ = node(tmp_path, kernel=PROC_565)
    assert got[0] == (
        PASS,
        "nvidia",
        "NVIDIA kernel module 565.57.01 loaded (/proc/driver/nvidia/version, open kernel module)",
    )
    assert [s for s, *_ in got] == [PASS, FAIL, FAIL, FAIL, FAIL]
    assert got[2][2] == (
        "libnvidia-ml.so.1 -> libnvidia-ml.so.550.90.07 is driver 550.90.07, the loaded kernel module is "
        "565.57.01: user space and kernel driver differ (nvidia-smi: 'Failed to initialize NVML: Driver/library "
        "version mismatch', exit 18); reboot, or reload the nvidia modules, after a driver upgrade"
    )


def test_a_missing_required_library_fails_and_a_missing_recommended_one_warns(tmp_path):
    got, _ = node(
        tmp_path,
        drop=("libnvidia-ptxjitcompiler.so.1", "libnvidia-ptxjitcompiler.so.550.90.07", "libnvidia-nvvm.so.4"),
    )
    assert got[3] == (
        FAIL,
        "libnvidia-ptxjitcompiler.so.1",
        "libnvidia-ptxjitcompiler.so.1 not in the loader's cache (ldconfig -p) nor in /usr/lib/x86_64-linux-gnu, "
        "/lib/x86_64-linux-gnu, /usr/lib/aarch64-linux-gnu, /lib/aarch64-linux-gnu, /usr/lib64, /lib64, /usr/lib, "
        "/lib: the PTX JIT: kernels shipped as PTX (for a newer GPU) fail to load",
    )
    assert got[4][0] is WARN and got[4][2].startswith("libnvidia-nvvm.so.4 not in the loader's cache")


def test_a_dangling_link_fails(tmp_path):
    got, _ = node(tmp_path, drop=("libcuda.so.550.90.07",))
    assert got[1] == (
        FAIL,
        "libcuda.so.1",
        f"libcuda.so.1 -> libcuda.so.550.90.07: dangling link ({LIBDIR}/libcuda.so.550.90.07 does not exist): "
        "the CUDA driver API: no CUDA program starts",
    )


def test_no_kernel_module_fails_and_the_libraries_are_still_judged(tmp_path):
    got, _ = node(tmp_path, kernel=None)
    assert got[0] == (
        FAIL,
        "nvidia",
        "no NVIDIA kernel module loaded (/proc/driver/nvidia/version and /sys/module/nvidia/version absent): "
        "the libraries' version cannot match a driver",
    )
    assert got[2] == (
        PASS,
        "libnvidia-ml.so.1",
        "libnvidia-ml.so.1 -> libnvidia-ml.so.550.90.07 (2078360 bytes); version 550.90.07 not compared: "
        "no kernel module loaded",
    )


def test_another_version_later_in_the_loader_cache_warns(tmp_path):
    compat = tmp_path / "root" / "usr/local/cuda/compat"
    compat.mkdir(parents=True)
    (compat / "libcuda.so.535.104.05").write_bytes(b"x")
    os.symlink("libcuda.so.535.104.05", compat / "libcuda.so.1")
    cache = [cache_line(n, f"{LIBDIR}/{n}") for n in NAMES]
    cache.insert(1, cache_line("libcuda.so.1", "/usr/local/cuda/compat/libcuda.so.1"))
    got, _ = node(tmp_path, cache=cache)
    assert got[1][0] is PASS
    assert got[2] == (
        WARN,
        "libcuda.so.1",
        "libcuda.so.1: the loader's cache also lists /usr/local/cuda/compat/libcuda.so.1 -> "
        f"/usr/local/cuda/compat/libcuda.so.535.104.05 (535.104.05), beside {LIBDIR}/libcuda.so.1 (550.90.07): "
        "a job with another LD_LIBRARY_PATH or ld.so.conf order loads a different driver library",
    )


def test_a_stale_version_beside_the_used_file_warns(tmp_path):
    lib = tmp_path / "root" / LIBDIR.lstrip("/")
    lib.mkdir(parents=True)
    (lib / "libnvidia-ml.so.560.35.03").write_bytes(b"")
    got, _ = node(tmp_path)
    assert got[2][0] is PASS
    assert got[3] == (
        WARN,
        "libnvidia-ml.so.1",
        f"libnvidia-ml.so.1: other driver versions beside {LIBDIR}/libnvidia-ml.so.550.90.07: "
        "libnvidia-ml.so.560.35.03 (0 bytes): leftovers of another driver install (the next ldconfig run may "
        "re-point the link to a newer one)",
    )


def test_without_a_loader_cache_the_standard_directories_answer_with_a_warning(tmp_path):
    got, _ = node(tmp_path, cache=[], rc=1)
    assert got[1] == (
        WARN,
        "ldconfig",
        "ldconfig -p exited 1 (no usable loader cache): libraries looked up in /usr/lib/x86_64-linux-gnu, "
        "/lib/x86_64-linux-gnu, /usr/lib/aarch64-linux-gnu, /lib/aarch64-linux-gnu, /usr/lib64, /lib64, "
        "/usr/lib, /lib instead",
    )
    assert [s for s, *_ in got[2:]] == [PASS, PASS, PASS, PASS]


def test_a_library_missing_from_the_cache_but_in_a_directory_warns(tmp_path):
    cache = [cache_line(n, f"{LIBDIR}/{n}") for n in NAMES if n != "libcuda.so.1"]
    got, _ = node(tmp_path, cache=cache)
    assert got[1] == (
        WARN,
        "libcuda.so.1",
        f"libcuda.so.1 not in the loader's cache (ldconfig -p) but at {LIBDIR}/libcuda.so.1: the loader finds it "
        "only if that is one of its default directories; run ldconfig",
    )


def test_only_a_32_bit_copy_is_missing(tmp_path):
    cache = [cache_line(n, f"{LIBDIR}/{n}") for n in NAMES if n != "libcuda.so.1"]
    cache.append(cache_line("libcuda.so.1", "/usr/lib/i386-linux-gnu/libcuda.so.1", "libc6"))
    got, root = node(tmp_path, cache=cache, drop=("libcuda.so.1",))
    assert got[1][0] is FAIL
    assert "(only a 32-bit copy: /usr/lib/i386-linux-gnu/libcuda.so.1)" in got[1][2]


def test_a_link_out_of_the_library_directories_is_an_error_not_a_pass(tmp_path):
    lib = tmp_path / "root" / LIBDIR.lstrip("/")
    lib.mkdir(parents=True)
    os.symlink("/home/alice/libcuda.so.550.90.07", lib / "libcuda.so.1")
    got, _ = node(tmp_path, drop=())
    assert got[1] == (
        ERROR,
        "libcuda.so.1",
        "libcuda.so.1 -> /home/alice/libcuda.so.550.90.07: not followed (link target outside the library "
        "directories), so its file cannot be judged",
    )


def test_params_take_library_names_only():
    assert NvidiaLibraries().names() == [
        "libcuda.so.1",
        "libnvidia-ml.so.1",
        "libnvidia-nvvm.so.4",
        "libnvidia-ptxjitcompiler.so.1",
    ]
    assert NvidiaLibraries(required=["libcuda.so.1"], recommended=[]).names() == ["libcuda.so.1"]
    for bad in ("../../etc/shadow", "libcuda.so.1; rm -rf /", "libcuda", "-lcuda.so", "libcuda.so.1\n"):
        with pytest.raises(ValidationError):
            NvidiaLibraries(required=[bad])
    with pytest.raises(ValidationError):
        NvidiaLibraries.model_validate({"dirs": ["/tmp"]})
