"""The NVIDIA driver stack: the user-space driver libraries CUDA and NCCL load are there, whole, and
of the loaded kernel module's version (docs/driver-stack.md)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from nodecheck.core.model import Status, Verdict
from nodecheck.core.registry import Captures, check
from nodecheck.parsers.nvidia_driver import KernelDriver
from nodecheck.parsers.nvidia_libraries import LIBRARY_NAME, Chain, LibraryFacts, file_version, parse_libraries_probe
from nodecheck.probes.nvidia_libraries import LIBRARY_DIRS, libraries_probe


def _library_name(name: str) -> str:
    if not LIBRARY_NAME.fullmatch(name):
        raise ValueError(f"{name!r} is not a shared library name like libnvidia-ml.so.1")
    return name


LibraryName = Annotated[str, AfterValidator(_library_name)]

# What each library does for a job, for the messages (the driver's README "Installed Components";
# NVIDIA Container Toolkit's "compute" and "utility" driver capabilities list the same files).
WHY = {
    "libcuda.so.1": "the CUDA driver API: no CUDA program starts",
    "libnvidia-ml.so.1": "NVML: nvidia-smi, DCGM and NCCL's topology detection fail",
    "libnvidia-ptxjitcompiler.so.1": "the PTX JIT: kernels shipped as PTX (for a newer GPU) fail to load",
    "libnvidia-nvvm.so.4": "NVVM: JIT link-time optimisation (cuLink with LTO-IR, numba/cupy JIT) fails",
    "libcudadebugger.so.1": "cuda-gdb cannot attach",
}


class NvidiaLibraries(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # libcuda and libnvidia-ml: every CUDA process and NCCL (which dlopens libnvidia-ml.so.1); the PTX JIT
    # is libcuda's own dependency for PTX-only kernels (jetpack-nixos #184: ERROR_JIT_COMPILER_NOT_FOUND)
    required: list[LibraryName] = Field(
        default_factory=lambda: ["libcuda.so.1", "libnvidia-ml.so.1", "libnvidia-ptxjitcompiler.so.1"],
        description="driver libraries (by the name the loader asks for) that must resolve to a non-empty "
        "file of the kernel module's version",
    )
    # libnvidia-nvvm ships with the driver since R515 and only JIT-LTO users need it
    recommended: list[LibraryName] = Field(
        default_factory=lambda: ["libnvidia-nvvm.so.4"],
        description="driver libraries whose absence only warns (a present one is judged like a required one)",
    )

    def names(self) -> list[str]:
        return sorted({*self.required, *self.recommended})


def probes(want: NvidiaLibraries):
    return [libraries_probe(want.names())]


@check("nvidia.libraries", probes=probes, params=NvidiaLibraries)
def libraries(out: Captures, want: NvidiaLibraries) -> Iterator[Verdict]:
    """The NVIDIA user-space driver libraries CUDA and NCCL load (libcuda, libnvidia-ml, the PTX JIT)
    are where the dynamic loader looks, are non-empty regular files, and are of the loaded kernel
    module's version: a 0-byte library left by a failed driver upgrade (Soperator #2684) or a
    user-space/kernel mismatch (nvidia-smi exit 18) fails every job on the node.

    Reads names and sizes only (ldconfig -p, the symbolic links, stat), never a library's content."""
    facts = parse_libraries_probe(out[probes(want)[0].name].stdout)
    kernel = facts.kernel
    if kernel is None:
        # FAIL, not ERROR: the check runs because the node is meant to have GPUs, and an ERROR never drains
        yield Verdict(
            Status.FAIL,
            "no NVIDIA kernel module loaded (/proc/driver/nvidia/version and /sys/module/nvidia/version "
            "absent): the libraries' version cannot match a driver",
            "nvidia",
            {"kernel_module": None},
            {"kernel_module": "loaded"},
        )
    else:
        flavor = f", {kernel.flavor} kernel module" if kernel.flavor else ""
        yield Verdict(
            Status.PASS,
            f"NVIDIA kernel module {kernel.version} loaded ({kernel.source}{flavor})",
            "nvidia",
            {"kernel_module": kernel.version, "flavor": kernel.flavor},
        )
    if facts.ldconfig_rc not in (0, 127):
        yield Verdict(
            Status.WARN,
            f"ldconfig -p exited {facts.ldconfig_rc} (no usable loader cache): libraries looked up in "
            f"{', '.join(LIBRARY_DIRS)} instead",
            "ldconfig",
            {"ldconfig_rc": facts.ldconfig_rc},
            {"ldconfig_rc": 0},
        )
    for name in want.required:
        yield from _library(name, facts, kernel, Status.FAIL)
    for name in want.recommended:
        if name not in want.required:
            yield from _library(name, facts, kernel, Status.WARN)


def _where(facts: LibraryFacts) -> str:
    if facts.ldconfig_rc == 0:
        return f"not in the loader's cache (ldconfig -p) nor in {', '.join(LIBRARY_DIRS)}"
    return f"not in {', '.join(LIBRARY_DIRS)} (no loader cache: ldconfig " + (
        "not installed)" if facts.ldconfig_rc == 127 else f"exited {facts.ldconfig_rc})"
    )


def _library(name: str, facts: LibraryFacts, kernel: KernelDriver | None, missing: Status) -> Iterator[Verdict]:
    why = f": {WHY[name]}" if name in WHY else ""
    expected: dict[str, object] = {"type": "regular file", "size": "> 0"}
    if kernel is not None:
        expected["version"] = kernel.version
    locations = facts.locations(name)
    if not locations:
        foreign = facts.foreign_only(name)
        seen = f" (only a 32-bit copy: {', '.join(foreign)})" if foreign else ""
        yield Verdict(missing, f"{name} {_where(facts)}{seen}{why}", name, {"path": None}, expected)
        return
    chain = facts.chains.get(locations[0])
    if chain is None:
        yield Verdict(Status.ERROR, f"{name}: the probe reported no file for {locations[0]}", name, {}, expected)
        return
    observed: dict[str, object] = {
        "path": chain.start,
        "resolves_to": chain.end,
        "size": chain.size,
        "version": chain.version,
    }
    verdict = _chain_verdict(name, chain, kernel, why, observed, expected)
    if facts.ldconfig_rc == 0 and name in facts.found and verdict.status is Status.PASS:
        verdict = Verdict(
            Status.WARN,
            f"{name} not in the loader's cache (ldconfig -p) but at {chain.start}: the loader finds it only "
            f"if that is one of its default directories; run ldconfig",
            name,
            observed,
            expected,
        )
    yield verdict
    if verdict.status is Status.PASS or verdict.status is Status.WARN:
        yield from _shadows(name, locations, facts, chain)


def _chain_verdict(
    name: str,
    chain: Chain,
    kernel: KernelDriver | None,
    why: str,
    observed: dict[str, object],
    expected: dict[str, object],
) -> Verdict:
    shown = chain.shown()
    if chain.kind == "stopped":
        return Verdict(
            Status.ERROR,
            f"{shown}: not followed ({chain.stopped}), so its file cannot be judged",
            name,
            observed,
            expected,
        )
    if chain.kind == "missing":
        return Verdict(
            Status.FAIL, f"{shown}: dangling link ({chain.end} does not exist){why}", name, observed, expected
        )
    if chain.kind == "empty":
        return Verdict(
            Status.FAIL,
            f"{shown} is empty (0 bytes): a failed driver upgrade (Soperator #2684){why}",
            name,
            observed,
            expected,
        )
    if chain.kind != "regular":
        return Verdict(Status.FAIL, f"{shown} is a {chain.kind}, not a regular file{why}", name, observed, expected)
    version = chain.version
    if version is None:
        return Verdict(
            Status.ERROR,
            f"{shown}: its file name carries no driver version, so it cannot be matched to the kernel module",
            name,
            observed,
            expected,
        )
    if kernel is None:
        return Verdict(
            Status.PASS,
            f"{shown} ({chain.size} bytes); version {version} not compared: no kernel module loaded",
            name,
            observed,
            expected,
        )
    if version != kernel.version:
        return Verdict(
            Status.FAIL,
            f"{shown} is driver {version}, the loaded kernel module is {kernel.version}: user space and kernel "
            "driver differ (nvidia-smi: 'Failed to initialize NVML: Driver/library version mismatch', exit 18); "
            "reboot, or reload the nvidia modules, after a driver upgrade",
            name,
            observed,
            expected,
        )
    return Verdict(Status.PASS, f"{shown} ({version}, {chain.size} bytes)", name, observed, expected)


def _shadows(name: str, locations: tuple[str, ...], facts: LibraryFacts, used: Chain) -> Iterator[Verdict]:
    """Other copies of the library: later cache entries, and stale versioned files beside the used one."""
    others = []
    for path in locations[1:]:
        chain = facts.chains.get(path)
        if chain is not None and (chain.version != used.version or chain.kind != "regular"):
            state = chain.version or chain.kind
            others.append(f"{path} -> {chain.end or chain.stopped} ({state})")
    if others:
        # WARN, not FAIL: the loader takes the first entry (judged above); a job whose LD_LIBRARY_PATH or
        # ld.so.conf order differs gets the other one
        yield Verdict(
            Status.WARN,
            f"{name}: the loader's cache also lists {'; '.join(others)}, beside {used.start} ({used.version}): "
            "a job with another LD_LIBRARY_PATH or ld.so.conf order loads a different driver library",
            name,
            {"other_entries": others},
            {"other_entries": []},
        )
    stale = [
        f"{path.rsplit('/', 1)[-1]} ({'0 bytes' if size == 0 else f'{size} bytes'})"
        for path, size in facts.siblings.get(used.end or "", ())
        if file_version(path) != used.version
    ]
    if stale:
        # ldconfig points the soname link at the newest file with that soname, so a stale newer
        # file takes over at the next ldconfig run (an empty one is skipped: "is empty, not checked")
        yield Verdict(
            Status.WARN,
            f"{name}: other driver versions beside {used.end}: {', '.join(stale)}: leftovers of another "
            "driver install (the next ldconfig run may re-point the link to a newer one)",
            name,
            {"stale_files": stale},
            {"stale_files": []},
        )
