"""The real NVML probe script, run as nodes run it (`python3 -`, script on stdin) against the fake
nvidia-ml-py in tests/fakes, parsed with parse_nvml_probe; and in-process through collect()."""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

from nodecheck.parsers.gpu import Gpu, GpuFabric, GpuFacts, GpuProcess, NvLink, RemappedRows
from nodecheck.parsers.nvml import NvmlUnavailable, parse_nvml_probe

ROOT = Path(__file__).resolve().parents[2]
PROBE = ROOT / "nodecheck" / "probes" / "nvml_probe.py"
FAKES = ROOT / "tests" / "fakes"
STATES = FAKES / "nvml_states"
HEALTHY, REMAP, LEFTOVER = (
    STATES / f"h100x8-{name}.json" for name in ("healthy", "row-remap-pending", "leftover-process")
)
SYSTEM_PYTHON = "/usr/bin/python3"
UNAVAILABLE = "nodecheck-nvml-unavailable: "

pytestmark = pytest.mark.skipif(not os.access(SYSTEM_PYTHON, os.X_OK), reason=f"no {SYSTEM_PYTHON}")


def run_probe(
    state: Path | None, pythonpath: str | None = str(FAKES), cwd: Path | str = "/"
) -> subprocess.CompletedProcess:
    """The probe as nodecheck runs it on a node: the script is stdin of `python3 -`, in a clean env."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"}
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    if state is not None:
        env["NODECHECK_FAKE_NVML_STATE"] = str(state)
    return subprocess.run(
        [SYSTEM_PYTHON, "-"], input=PROBE.read_text(), capture_output=True, text=True, env=env, cwd=str(cwd), timeout=60
    )


def timeless(facts: GpuFacts) -> GpuFacts:
    """The facts without the read's clock, uptime and boot id (checked here: they vary run to run)."""
    assert isinstance(facts.clock, float) and abs(facts.clock - time.time()) < 120
    assert facts.uptime_s is None or facts.uptime_s > 0
    assert facts.boot_id is None or len(facts.boot_id) == 36
    return dataclasses.replace(facts, clock=None, uptime_s=None, boot_id=None)


def without_clock(doc: dict) -> dict:
    """The probe's JSON object less the keys that differ between two reads."""
    return {key: value for key, value in doc.items() if key not in ("clock", "uptime_s")}


def probe_facts(state: Path) -> GpuFacts:
    result = run_probe(state)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr == ""
    return timeless(parse_nvml_probe(result.stdout))


def write_state(tmp_path: Path, change) -> Path:
    """A copy of the healthy state with `change(state)` applied."""
    state = json.loads(HEALTHY.read_text())
    change(state)
    path = tmp_path / "nvml_state.json"
    path.write_text(json.dumps(state))
    return path


# --- what the healthy H100 x8 state must read as ------------------------------------------------
BUS = ("18", "2a", "3a", "5d", "9a", "ab", "ba", "db")
TEMPERATURES = (31, 33, 30, 32, 34, 31, 33, 30)
POWER_W = (69.342, 71.12, 68.415, 70.233, 72.018, 69.874, 70.561, 68.99)
STATE_GPUS = json.loads(HEALTHY.read_text())["gpus"]  # uuid and serial are passed through as is
# the counters H100 reports (crc_data/ecc_data are NotSupported in the state), in NVLINK_ERROR_COUNTERS order
H100_LINK_ERRORS = (("replay", 0), ("recovery", 0), ("crc_flit", 0))
# HGX H100: Fabric Manager registered the GPU; NVML's ClusterUUID is all zeros there; health mask 0
HGX_FABRIC = GpuFabric("completed", "success", "00000000-0000-0000-0000-000000000000", 0, ())


def healthy_gpu(i: int) -> Gpu:
    return Gpu(
        index=i,
        name="NVIDIA H100 80GB HBM3",
        uuid=STATE_GPUS[i]["uuid"],
        serial=STATE_GPUS[i]["serial"],
        vbios="96.00.99.00.01",
        pci_bus_id=f"0000:{BUS[i]}:00.0",
        persistence_mode=True,
        ecc_enabled=True,
        ecc_pending_enabled=True,
        ecc_uncorrectable_volatile=0,
        ecc_uncorrectable_aggregate=0,
        ecc_correctable_volatile=0,
        retired_pages_pending=None,
        retired_pages_dbe=None,
        retired_pages_sbe=None,  # NotSupported
        remapped_rows=RemappedRows(0, 0, False, False),
        clock_event_reasons=frozenset({"gpu_idle"}),
        temperature_c=float(TEMPERATURES[i]),
        power_draw_w=POWER_W[i],
        power_limit_w=700.0,
        memory_used_mib=0.0,
        memory_total_mib=81559.0,
        pcie_gen_current=5,
        pcie_gen_max=5,
        pcie_width_current=16,
        pcie_width_max=16,
        nvlinks=tuple(NvLink(link, True, errors=H100_LINK_ERRORS) for link in range(18)),
        fabric=HGX_FABRIC,
        gsp_firmware="550.90.07",
        processes=(),
    )


def healthy(**gpu_changes: dict) -> GpuFacts:
    """The healthy facts, with {"GPU3": {field: value}} changes."""
    gpus = []
    for i in range(8):
        gpu = healthy_gpu(i)
        gpus.append(dataclasses.replace(gpu, **gpu_changes.get(f"GPU{i}", {})))
    return GpuFacts(source="nvml", driver_version="550.90.07", cuda_driver_version="12.4", gpus=tuple(gpus))


def expected_process_name(pid: int, fallback: str) -> str:
    """The probe reads /proc/<pid>/comm first (the binary's basename, /proc/<pid>/exe, where that
    extends a 15-character comm); pid 48213 does not exist on a default test machine."""
    try:
        with open(f"/proc/{pid}/comm") as f:
            comm = f.read().strip()
    except OSError:
        return fallback
    if len(comm) == 15:
        try:
            argv0 = os.readlink(f"/proc/{pid}/exe").removesuffix(" (deleted)").rstrip("/").rsplit("/", 1)[-1]
        except OSError:
            argv0 = ""
        if len(argv0) > 15 and argv0.startswith(comm):
            return argv0
    return comm or fallback


# --- the three shipped states, through the real script ------------------------------------------
def test_healthy_h100x8() -> None:
    facts = probe_facts(HEALTHY)
    assert facts == healthy()
    assert len(facts.gpus) == 8 and all(len(g.nvlinks) == 18 for g in facts.gpus)


def test_row_remap_pending_on_gpu3() -> None:
    facts = probe_facts(REMAP)
    assert facts == healthy(
        GPU3={"remapped_rows": RemappedRows(correctable=0, uncorrectable=4, pending=True, failure=False)}
    )


def test_leftover_process_on_gpu5() -> None:
    facts = probe_facts(LEFTOVER)
    process = GpuProcess(pid=48213, name=expected_process_name(48213, "python3"), used_memory_mib=40960.0)
    assert facts == healthy(GPU5={"processes": (process,), "memory_used_mib": 40960.0})


def test_output_is_one_json_line_with_the_schema() -> None:
    result = run_probe(HEALTHY)
    assert result.stdout.count("\n") == 1
    doc = json.loads(result.stdout)
    assert (doc["schema"], doc["source"], doc["cuda_driver_version"], doc["errors"]) == (2, "nvml", "12.4", [])
    assert doc["nvml_version"] == "12.550.90.07"


# --- NVML unavailable: exit 3 and the one line ---------------------------------------------------
def _system_python_has_pynvml() -> bool:
    return (
        subprocess.run(
            [SYSTEM_PYTHON, "-c", "import pynvml"], capture_output=True, env={"PATH": "/usr/bin:/bin"}
        ).returncode
        == 0
    )


@pytest.mark.skipif(_system_python_has_pynvml(), reason="this machine's python3 has a real pynvml")
def test_no_pynvml_on_the_node_exits_3() -> None:
    result = run_probe(None, pythonpath=None)
    assert result.returncode == 3
    assert result.stdout == (
        f"{UNAVAILABLE}cannot import pynvml (nvidia-ml-py): ModuleNotFoundError: No module named 'pynvml'\n"
    )
    with pytest.raises(NvmlUnavailable, match="No module named 'pynvml'"):
        parse_nvml_probe(result.stdout)


def test_a_broken_pynvml_install_exits_3(tmp_path: Path) -> None:
    (tmp_path / "pynvml.py").write_text("raise ImportError('libnvidia-ml.so.1: cannot open shared object file')\n")
    result = run_probe(None, pythonpath=str(tmp_path))
    assert result.returncode == 3
    assert result.stdout == (
        f"{UNAVAILABLE}cannot import pynvml (nvidia-ml-py): ImportError: "
        "libnvidia-ml.so.1: cannot open shared object file\n"
    )


@pytest.mark.parametrize(
    "init_error, text",
    [
        ("DriverNotLoaded", "Driver Not Loaded"),
        ("LibraryNotFound", "NVML Shared Library Not Found"),
        ("LibRmVersionMismatch", "RM has detected an NVML/RM version mismatch."),
    ],
)
def test_nvml_init_failure_exits_3(tmp_path: Path, init_error: str, text: str) -> None:
    state = write_state(tmp_path, lambda s: s.update(init_error=init_error))
    result = run_probe(state)
    assert (result.returncode, result.stdout, result.stderr) == (3, f"{UNAVAILABLE}nvmlInit failed: {text}\n", "")
    with pytest.raises(NvmlUnavailable) as info:
        parse_nvml_probe(result.stdout)
    assert info.value.reason == f"nvmlInit failed: {text}"


# --- one field failing loses nothing else ----------------------------------------------------------
def test_not_supported_fields_read_null_without_a_gap(tmp_path: Path) -> None:
    def change(state: dict) -> None:
        state["gpus"][0]["not_supported"] += [
            "nvmlDeviceGetRemappedRows",
            "nvmlDeviceGetComputeRunningProcesses",
            "nvmlDeviceGetEnforcedPowerLimit",
            "nvmlDeviceGetEccMode",
        ]
        state["gpus"][1]["nvlink_states"] = None  # a GPU without NVLink: NotSupported on link 0

    facts = probe_facts(write_state(tmp_path, change))
    assert facts == healthy(
        GPU0={
            "remapped_rows": None,
            "processes": None,
            "power_limit_w": None,
            "ecc_enabled": None,
            "ecc_pending_enabled": None,
        },
        GPU1={"nvlinks": ()},
    )
    assert facts.gaps == ()


def test_an_nvml_error_on_one_field_becomes_a_gap(tmp_path: Path) -> None:
    def change(state: dict) -> None:
        state["gpus"][3]["errors"] = {"nvmlDeviceGetRemappedRows": "Unknown", "nvmlDeviceGetMemoryInfo": "NoPermission"}
        state["gpus"][6]["errors"] = {"nvmlDeviceGetNvLinkState": "GpuIsLost"}

    facts = probe_facts(write_state(tmp_path, change))
    assert facts == dataclasses.replace(
        healthy(
            GPU3={"remapped_rows": None, "memory_used_mib": None, "memory_total_mib": None}, GPU6={"nvlinks": None}
        ),
        gaps=(
            "GPU3 remapped_rows: Unknown Error",
            "GPU3 memory_used_mib: Insufficient Permissions",
            "GPU3 memory_total_mib: Insufficient Permissions",
            "GPU6 nvlinks: GPU is lost",
        ),
    )


def test_a_gpu_without_a_handle_is_listed_with_nothing_known(tmp_path: Path) -> None:
    state = write_state(tmp_path, lambda s: s["gpus"][7].update(errors={"nvmlDeviceGetHandleByIndex": "GpuIsLost"}))
    facts = probe_facts(state)
    assert facts.gpus[:7] == healthy().gpus[:7]
    assert facts.gpus[7] == Gpu(index=7)
    assert facts.gaps == ("GPU7 handle: GPU is lost",)


def test_nvlinks_stop_after_the_last_link(tmp_path: Path) -> None:
    # an A100-like GPU: 12 links, NVML_NVLINK_MAX_LINKS 18; link 12 answers InvalidArgument
    state = write_state(tmp_path, lambda s: s["gpus"][2].update(nvlink_states=[1] * 11 + [0]))
    facts = probe_facts(state)
    active = tuple(NvLink(n, True, errors=H100_LINK_ERRORS) for n in range(11))
    assert facts.gpus[2].nvlinks == active + (NvLink(11, False),)  # an inactive link's counters are not read
    assert facts.gaps == ()


def test_process_without_memory_figure_and_unknown_name(tmp_path: Path) -> None:
    # pid 1's /proc/1/comm is always readable, so name it from there; usedGpuMemory None → unknown
    state = write_state(
        tmp_path, lambda s: s["gpus"][0].update(processes=[{"pid": 1, "name": "ignored", "usedGpuMemory": None}])
    )
    facts = probe_facts(state)
    assert facts.gpus[0].processes == (GpuProcess(1, expected_process_name(1, "ignored"), None),)


def test_clock_reason_bits_map_to_names(tmp_path: Path) -> None:
    state = write_state(tmp_path, lambda s: s["gpus"][4].update(clock_event_reasons=0x1FF | 0x1000))
    facts = probe_facts(state)
    assert facts.gpus[4].clock_event_reasons == frozenset(
        {
            "gpu_idle",
            "applications_clocks_setting",
            "sw_power_cap",
            "hw_slowdown",
            "sync_boost",
            "sw_thermal_slowdown",
            "hw_thermal_slowdown",
            "hw_power_brake_slowdown",
            "display_clock_setting",
        }
    )


# --- in-process (--local): collect() is the same object ----------------------------------------------
@pytest.mark.parametrize("state", [HEALTHY, REMAP, LEFTOVER], ids=lambda p: p.stem)
def test_collect_in_process_equals_the_script_output(
    fake_pynvml: ModuleType, monkeypatch: pytest.MonkeyPatch, state: Path
) -> None:
    from nodecheck.probes import nvml_probe

    monkeypatch.setenv("NODECHECK_FAKE_NVML_STATE", str(state))
    result = run_probe(state)
    assert without_clock(nvml_probe.collect()) == without_clock(json.loads(result.stdout))
    assert fake_pynvml._init_count == 0  # nvmlShutdown ran


def test_older_pynvml_throttle_reason_names_read_the_same(
    fake_pynvml: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nodecheck.probes import nvml_probe

    monkeypatch.setenv("NODECHECK_FAKE_NVML_STATE", str(HEALTHY))
    expected = without_clock(nvml_probe.collect())
    monkeypatch.delattr(fake_pynvml, "nvmlDeviceGetCurrentClocksEventReasons")
    monkeypatch.delattr(fake_pynvml, "nvmlSystemGetCudaDriverVersion_v2")
    for name in [n for n in vars(fake_pynvml) if n.startswith("nvmlClocksEventReason")]:
        monkeypatch.delattr(fake_pynvml, name)
    assert without_clock(nvml_probe.collect()) == expected
    for name in [n for n in vars(fake_pynvml) if n.startswith("nvmlClocksThrottleReason")]:
        monkeypatch.delattr(fake_pynvml, name)  # neither name: the nvml.h literals
    assert without_clock(nvml_probe.collect()) == expected


def test_collect_raises_unavailable_and_still_balances_init(
    fake_pynvml: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from nodecheck.probes import nvml_probe

    monkeypatch.setenv(
        "NODECHECK_FAKE_NVML_STATE", str(write_state(tmp_path, lambda s: s.update(init_error="DriverNotLoaded")))
    )
    with pytest.raises(nvml_probe.NvmlUnavailable, match="nvmlInit failed: Driver Not Loaded"):
        nvml_probe.collect()
    assert fake_pynvml._init_count == 0


def test_collect_shuts_nvml_down_when_counting_fails(fake_pynvml: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    from nodecheck.probes import nvml_probe

    monkeypatch.setenv("NODECHECK_FAKE_NVML_STATE", str(HEALTHY))

    def count() -> int:
        raise fake_pynvml.NVMLError(fake_pynvml.NVML_ERROR_UNKNOWN)

    monkeypatch.setattr(fake_pynvml, "nvmlDeviceGetCount", count)
    with pytest.raises(nvml_probe.NvmlUnavailable, match="nvmlDeviceGetCount failed: Unknown Error"):
        nvml_probe.collect()
    assert fake_pynvml._init_count == 0


# --- older drivers: a function missing from libnvidia-ml falls back to its older variant ------------------
def test_clock_event_reasons_fall_back_on_a_driver_before_535(tmp_path: Path) -> None:
    state = write_state(tmp_path, lambda s: s.update(missing_functions=["nvmlDeviceGetCurrentClocksEventReasons"]))
    result = run_probe(state)
    assert json.loads(result.stdout)["errors"] == []
    assert timeless(parse_nvml_probe(result.stdout)) == healthy()


def test_versioned_functions_fall_back_to_the_older_symbol(tmp_path: Path) -> None:
    # a driver before 510: no _v3 processes (the unversioned wrapper raises NVMLLibraryMismatchError), no _v2 CUDA
    def change(state: dict) -> None:
        state["missing_functions"] = [
            "nvmlDeviceGetComputeRunningProcesses_v3",
            "nvmlSystemGetCudaDriverVersion_v2",
            "nvmlDeviceGetCurrentClocksEventReasons",
        ]

    result = run_probe(write_state(tmp_path, change))
    assert json.loads(result.stdout)["errors"] == []
    assert timeless(parse_nvml_probe(result.stdout)) == healthy()
    leftover = json.loads(LEFTOVER.read_text())
    leftover["missing_functions"] = ["nvmlDeviceGetComputeRunningProcesses_v3"]
    path = tmp_path / "leftover.json"
    path.write_text(json.dumps(leftover))
    process = GpuProcess(pid=48213, name=expected_process_name(48213, "python3"), used_memory_mib=40960.0)
    assert probe_facts(path) == healthy(GPU5={"processes": (process,), "memory_used_mib": 40960.0})


def test_every_variant_missing_is_a_gap_naming_the_last_tried(tmp_path: Path) -> None:
    state = write_state(
        tmp_path,
        lambda s: s.update(
            missing_functions=[
                "nvmlDeviceGetCurrentClocksEventReasons",
                "nvmlDeviceGetCurrentClocksThrottleReasons",
                "nvmlSystemGetCudaDriverVersion_v2",
                "nvmlSystemGetCudaDriverVersion",
                "nvmlDeviceGetComputeRunningProcesses_v3",
                "nvmlDeviceGetComputeRunningProcesses_v2",
            ]
        ),
    )
    result = run_probe(state)
    assert result.returncode == 0, result.stdout + result.stderr
    doc = json.loads(result.stdout)
    assert doc["cuda_driver_version"] is None
    assert doc["errors"][0] == {
        "gpu": None,
        "field": "cuda_driver_version",
        "error": "nvmlSystemGetCudaDriverVersion: Function Not Found",
    }
    assert [e for e in doc["errors"] if e["gpu"] == 0] == [
        {
            "gpu": 0,
            "field": "clock_event_reasons",
            "error": "nvmlDeviceGetCurrentClocksThrottleReasons: Function Not Found",
        },
        {
            "gpu": 0,
            "field": "processes",
            "error": "nvmlDeviceGetComputeRunningProcesses: NVMLLibraryMismatchError: Unversioned function called "
            "and the pyNVML version does not match the NVML lib version. Either use matching pyNVML and "
            "NVML lib versions or use a versioned function such as nvmlDeviceGetComputeRunningProcesses_v2",
        },
    ]
    facts = parse_nvml_probe(result.stdout)
    assert all(g.clock_event_reasons is None and g.processes is None for g in facts.gpus)
    assert len(facts.gaps) == 1 + 2 * 8


def test_an_old_pynvml_without_the_versioned_wrappers(fake_pynvml: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    from nodecheck.probes import nvml_probe

    monkeypatch.setenv("NODECHECK_FAKE_NVML_STATE", str(LEFTOVER))
    expected = without_clock(nvml_probe.collect())
    # an nvidia-ml-py before 11.5: its unversioned wrapper calls the unversioned symbol (v1 struct)
    monkeypatch.setattr(
        fake_pynvml,
        "nvmlDeviceGetComputeRunningProcesses",
        lambda handle: fake_pynvml._compute_processes(handle, "nvmlDeviceGetComputeRunningProcesses"),
    )
    for name in (
        "nvmlDeviceGetComputeRunningProcesses_v3",
        "nvmlDeviceGetComputeRunningProcesses_v2",
        "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlSystemGetCudaDriverVersion_v2",
        "NVMLLibraryMismatchError",
        "NVMLError_FunctionNotFound",
    ):
        monkeypatch.delattr(fake_pynvml, name)
    assert without_clock(nvml_probe.collect()) == expected
    assert expected["errors"] == [] and expected["gpus"][5]["processes"][0]["pid"] == 48213


def test_an_attribute_error_inside_pynvml_falls_back_too(
    fake_pynvml: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nodecheck.probes import nvml_probe

    monkeypatch.setenv("NODECHECK_FAKE_NVML_STATE", str(HEALTHY))
    expected = without_clock(nvml_probe.collect())

    def broken(handle):
        raise AttributeError("module 'ctypes' has no attribute 'c_nvmlClocksEventReasons'")

    monkeypatch.setattr(fake_pynvml, "nvmlDeviceGetCurrentClocksEventReasons", broken)
    assert without_clock(nvml_probe.collect()) == expected


def test_not_supported_on_the_newer_variant_does_not_fall_back(
    fake_pynvml: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from nodecheck.probes import nvml_probe

    state = write_state(
        tmp_path, lambda s: s["gpus"][0]["not_supported"].append("nvmlDeviceGetCurrentClocksEventReasons")
    )
    monkeypatch.setenv("NODECHECK_FAKE_NVML_STATE", str(state))
    result = nvml_probe.collect()
    assert result["gpus"][0]["clock_event_reasons"] is None and result["errors"] == []
    assert result["gpus"][1]["clock_event_reasons"] == ["gpu_idle"]


# --- sys.path: a stray module in the SSH user's home directory cannot shadow the real one -----------------
def test_a_stray_json_or_pynvml_in_the_current_directory_is_ignored(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "json.py").write_text("raise RuntimeError('stray json.py imported')\n")
    (home / "pynvml.py").write_text("raise RuntimeError('stray pynvml.py imported')\n")
    result = run_probe(HEALTHY, cwd=home)
    assert (result.returncode, result.stderr) == (0, ""), result.stdout + result.stderr
    assert timeless(parse_nvml_probe(result.stdout)) == healthy()
    # the same directory named on PYTHONPATH by another spelling is dropped too (its pynvml would win)
    result = run_probe(HEALTHY, pythonpath=f"{home}/.:{FAKES}", cwd=home)
    assert (result.returncode, result.stderr) == (0, ""), result.stdout + result.stderr
    assert timeless(parse_nvml_probe(result.stdout)) == healthy()


def test_drop_cwd_from_sys_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from nodecheck.probes import nvml_probe

    (tmp_path / "link").symlink_to(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(
        sys, "path", ["", ".", "./", str(tmp_path), str(tmp_path / "link"), str(other), "/nonexistent/dir", "/usr/lib"]
    )
    original = sys.path
    nvml_probe._drop_cwd_from_sys_path()
    assert sys.path is original  # edited in place
    assert sys.path == [str(other), "/nonexistent/dir", "/usr/lib"]


def test_importing_the_probe_leaves_sys_path_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    # --local imports the probe into nodecheck's own process: only `python3 -` cleans sys.path
    monkeypatch.setattr(sys, "path", ["", *sys.path])
    before = list(sys.path)
    spec = importlib.util.spec_from_file_location("nvml_probe_copy", PROBE)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    assert sys.path == before


# --- NVLink: an old pynvml's NVML_NVLINK_MAX_LINKS does not cap the count ------------------------------
@pytest.mark.parametrize("constant", [6, 12, 18, 36, None])
def test_nvlinks_are_counted_past_an_old_pynvml_constant(
    fake_pynvml: ModuleType, monkeypatch: pytest.MonkeyPatch, constant: int | None
) -> None:
    from nodecheck.probes import nvml_probe

    monkeypatch.setenv("NODECHECK_FAKE_NVML_STATE", str(HEALTHY))
    if constant is None:
        monkeypatch.delattr(fake_pynvml, "NVML_NVLINK_MAX_LINKS")
    else:
        monkeypatch.setattr(fake_pynvml, "NVML_NVLINK_MAX_LINKS", constant)
    result = nvml_probe.collect()
    assert result["errors"] == []
    errors = {"replay": 0, "recovery": 0, "crc_flit": 0}
    assert all(
        gpu["nvlinks"] == [{"link": n, "active": True, "errors": errors} for n in range(18)] for gpu in result["gpus"]
    )


# --- process names: comm, argv[0] where comm is cut at 15 characters, NVML's name without /proc ---------
def test_a_pid_without_proc_entry_is_named_by_nvml(tmp_path: Path) -> None:
    # no pid exceeds PID_MAX_LIMIT (2**22): /proc/99999999 never exists
    state = write_state(
        tmp_path,
        lambda s: s["gpus"][0].update(
            processes=[{"pid": 99999999, "name": "a-long-training-job-name", "usedGpuMemory": 2**30}]
        ),
    )
    facts = probe_facts(state)
    assert facts.gpus[0].processes == (GpuProcess(99999999, "a-long-training-job-name", 1024.0),)


def test_a_long_process_name_is_read_from_the_binary(tmp_path: Path) -> None:
    program = tmp_path / "nodecheck-long-sleeper-name"  # comm: "nodecheck-long-"
    shutil.copy("/bin/sleep", program)
    sleeper = subprocess.Popen([str(program), "60"])
    try:
        deadline = time.monotonic() + 10
        while True:  # comm changes at the child's exec
            with open(f"/proc/{sleeper.pid}/comm") as f:
                comm = f.read().strip()
            if comm == "nodecheck-long-" or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        assert comm == "nodecheck-long-"
        state = write_state(
            tmp_path,
            lambda s: s["gpus"][0].update(processes=[{"pid": sleeper.pid, "name": "from-nvml", "usedGpuMemory": None}]),
        )
        facts = probe_facts(state)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert facts.gpus[0].processes == (GpuProcess(sleeper.pid, "nodecheck-long-sleeper-name", None),)


@pytest.mark.parametrize(
    "comm, exe, name",
    [
        ("nodecheck-long-", "/opt/bin/nodecheck-long-sleeper", "nodecheck-long-sleeper"),
        ("nodecheck-long-", "/opt/bin/nodecheck-long-sleeper (deleted)", "nodecheck-long-sleeper"),  # replaced
        ("nodecheck-long-", "/usr/bin/python3", "nodecheck-long-"),  # renamed by prctl: keep comm
        ("nodecheck-long-", None, "nodecheck-long-"),  # kernel thread, zombie, another user's: unreadable
        ("nodecheck-long", "/opt/bin/nodecheck-long-sleeper", "nodecheck-long"),  # 14 characters: not cut
        ("nodecheck-long-", "/opt/bin/nodecheck-long-", "nodecheck-long-"),
    ],
)
def test_process_name_from_comm_and_the_binary(
    fake_pynvml: ModuleType, tmp_path: Path, comm: str, exe: str | None, name: str
) -> None:
    from nodecheck.probes import nvml_probe

    (tmp_path / "4242").mkdir()
    (tmp_path / "4242" / "comm").write_text(comm + "\n")
    (tmp_path / "4242" / "cmdline").write_bytes(b"/opt/bin/argv0-says-anything-it-likes\0")  # never read
    if exe is not None:
        (tmp_path / "4242" / "exe").symlink_to(exe)
    assert nvml_probe._Collector(fake_pynvml, proc=str(tmp_path)).process_name(4242) == name


# --- MIG mode ----------------------------------------------------------------------------------------
def test_mig_mode_is_reported_per_gpu(tmp_path: Path) -> None:
    def change(state: dict) -> None:
        state["gpus"][0]["mig_mode"] = [1, 1]
        state["gpus"][1]["mig_mode"] = [0, 1]  # enabling is pending: current mode is off
        state["gpus"][2]["mig_mode"] = [1, 0]
        state["gpus"][3]["errors"] = {"nvmlDeviceGetMigMode": "NoPermission"}

    result = run_probe(write_state(tmp_path, change))
    doc = json.loads(result.stdout)
    assert [gpu["mig_mode"] for gpu in doc["gpus"]] == [True, False, True, None, None, None, None, None]
    assert doc["errors"] == [{"gpu": 3, "field": "mig_mode", "error": "Insufficient Permissions"}]
    # the parser ignores the key: still the healthy facts, with the one gap
    assert timeless(parse_nvml_probe(result.stdout)) == dataclasses.replace(
        healthy(), gaps=("GPU3 mig_mode: Insufficient Permissions",)
    )


# --- the script stays runnable on old nodes ----------------------------------------------------------
def test_probe_parses_as_python_3_6() -> None:
    ast.parse(PROBE.read_text(), filename=str(PROBE), feature_version=(3, 6))


def test_probe_imports_only_stdlib_and_pynvml() -> None:
    tree = ast.parse(PROBE.read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0 and node.module != "__future__", ast.dump(node)
            imported.add(node.module.split(".")[0])
    # posix/nt: builtin, for the sys.path clean-up; ctypes (fabric structs) and time: imported after it
    assert imported == {"json", "sys", "pynvml", "posix", "nt", "ctypes", "time"}


# --- fabric, GSP firmware and NVLink error counters (schema 2) ----------------------------------------
GB200_CLUSTER = "6a130f54-faaa-4b8f-847f-be44ab70f917"
GB200_HEALTH = (
    ("access_timeout_recovery", "false"),
    ("bandwidth", "full"),
    ("route_recovery_in_progress", "false"),
    ("route_unhealthy", "false"),
)


@pytest.mark.parametrize(
    "state, fabric",
    [
        ("gb200x4-rack-a", GpuFabric("completed", "success", GB200_CLUSTER, 32766, GB200_HEALTH)),
        ("gb200x4-other-clique", GpuFabric("completed", "success", GB200_CLUSTER, 32765, GB200_HEALTH)),
        (
            "gb200x4-clique-zero",
            GpuFabric("completed", "Insufficient Resources", "00000000-0000-0000-0000-000000000000", 0, GB200_HEALTH),
        ),
    ],
)
def test_gb200_trays_report_their_nvlink_domain(state: str, fabric: GpuFabric) -> None:
    facts = probe_facts(STATES / f"{state}.json")
    assert [g.name for g in facts.gpus] == ["NVIDIA GB200"] * 4
    assert [g.pci_bus_id for g in facts.gpus] == ["0008:01:00.0", "0009:01:00.0", "0018:01:00.0", "0019:01:00.0"]
    assert all(g.fabric == fabric and g.gsp_firmware == "580.159.04" for g in facts.gpus)
    assert (facts.driver_version, facts.cuda_driver_version, facts.gaps) == ("580.159.04", "13.0", ())


def test_the_clock_facts_come_from_proc() -> None:
    result = run_probe(HEALTHY)
    facts = parse_nvml_probe(result.stdout)
    with open("/proc/sys/kernel/random/boot_id") as f:
        assert facts.boot_id == f.read().strip()
    with open("/proc/uptime") as f:
        assert facts.uptime_s is not None and 0 <= float(f.read().split()[0]) - facts.uptime_s < 60
    assert facts.clock is not None and 0 <= time.time() - facts.clock < 60


def test_rising_crc_errors_rise_between_two_reads() -> None:
    state = STATES / "h100x8-nvlink-crc-rising.json"
    first = probe_facts(state)
    time.sleep(1.1)
    second = probe_facts(state)

    def counts(facts: GpuFacts, gpu: int, link: int) -> dict[str, int]:
        return dict(facts.gpus[gpu].nvlinks[link].errors or ())

    before, after = counts(first, 2, 5), counts(second, 2, 5)
    assert 50 <= after["crc_flit"] - before["crc_flit"] <= 50 * 30  # 50/s over the seconds between the reads
    assert 2 <= after["replay"] - before["replay"] <= 2 * 30
    assert after["recovery"] == before["recovery"] == 0
    # every other link of every GPU stays at zero
    assert all(
        counts(second, g, n) == {"replay": 0, "recovery": 0, "crc_flit": 0}
        for g in range(8)
        for n in range(18)
        if (g, n) != (2, 5)
    )


def test_fabric_falls_back_to_the_unversioned_function_on_an_older_driver(tmp_path: Path) -> None:
    # a driver without nvmlDeviceGetGpuFabricInfoV (before 550): the v1 struct has no health mask
    state = write_state(tmp_path, lambda s: s.update(missing_functions=["nvmlDeviceGetGpuFabricInfoV"]))
    facts = probe_facts(state)
    assert all(g.fabric == dataclasses.replace(HGX_FABRIC, health=()) for g in facts.gpus)
    assert facts.gaps == ()


def test_a_driver_without_fabric_gsp_or_counters_reports_them_unknown_without_a_gap(tmp_path: Path) -> None:
    missing = [
        "nvmlDeviceGetGpuFabricInfoV",
        "nvmlDeviceGetGpuFabricInfo",
        "nvmlDeviceGetGspFirmwareVersion",
        "nvmlDeviceGetNvLinkErrorCounter",
    ]
    facts = probe_facts(write_state(tmp_path, lambda s: s.update(missing_functions=missing)))
    assert all(g.fabric is None and g.gsp_firmware is None for g in facts.gpus)
    assert all(link.errors is None and link.active for g in facts.gpus for link in g.nvlinks or ())
    assert facts.gaps == ()  # facts a driver predates are unknown, not a failed read


def test_not_supported_fabric_and_gsp_read_null(tmp_path: Path) -> None:
    def change(state: dict) -> None:
        state["gpus"][0]["fabric"] = None  # a GPU without fabric: NotSupported
        state["gpus"][1]["gsp_firmware"] = None
        state["gpus"][2]["not_supported"] += ["nvmlDeviceGetGpuFabricInfoV"]
        state["gpus"][3]["nvlink_errors"]["4"] = {"replay": 0}  # the rest NotSupported on this link

    facts = probe_facts(write_state(tmp_path, change))
    assert (facts.gpus[0].fabric, facts.gpus[1].gsp_firmware, facts.gpus[2].fabric) == (None, None, None)
    assert facts.gpus[3].nvlinks is not None and facts.gpus[3].nvlinks[4].errors == (("replay", 0),)
    assert facts.gaps == ()


def test_fabric_states_before_completion_carry_no_domain(tmp_path: Path) -> None:
    def change(state: dict) -> None:
        state["gpus"][0]["fabric"] = {"state": "in_progress", "status": 0, "clique_id": 7, "health_mask": 0}
        state["gpus"][1]["fabric"] = {"state": "not_started", "health_mask": 1}  # bandwidth degraded

    facts = probe_facts(write_state(tmp_path, change))
    assert facts.gpus[0].fabric == GpuFabric("in_progress", None, None, None, ())
    assert facts.gpus[1].fabric == GpuFabric("not_started", None, None, None, (("bandwidth", "degraded"),))


def test_failed_reads_of_the_new_facts_are_gaps(tmp_path: Path) -> None:
    def change(state: dict) -> None:
        state["gpus"][0]["errors"] = {"nvmlDeviceGetGpuFabricInfoV": "Unknown"}
        state["gpus"][1]["errors"] = {"nvmlDeviceGetGspFirmwareVersion": "GpuIsLost"}
        state["gpus"][2]["errors"] = {"nvmlDeviceGetNvLinkErrorCounter": "Unknown"}

    facts = probe_facts(write_state(tmp_path, change))
    assert facts.gpus[0].fabric is None and facts.gpus[1].gsp_firmware is None
    assert facts.gpus[2].nvlinks is not None and facts.gpus[2].nvlinks[0].errors is None
    link_gaps = [f"GPU2 nvlink_errors: link {n} {c}: Unknown Error" for n in range(18) for c in H100_COUNTER_NAMES]
    assert facts.gaps == ("GPU0 fabric: Unknown Error", "GPU1 gsp_firmware: GPU is lost", *link_gaps)


H100_COUNTER_NAMES = ("replay", "recovery", "crc_flit", "crc_data", "ecc_data")


def test_the_probes_fabric_structs_have_nvml_h_layout(fake_pynvml: ModuleType) -> None:
    # nvml.h: sizeof(nvmlGpuFabricInfo_v2_t) is the low bytes of nvmlGpuFabricInfo_v2 (0x24); the offsets
    # are nvidia-ml-py 13.615's (the fake copies its structures)
    import ctypes

    from nodecheck.probes import nvml_probe

    _, info_v2, info_v1 = nvml_probe._fabric_structs()
    assert ctypes.sizeof(info_v2) == nvml_probe._FABRIC_INFO_V2 & 0xFFFFFF == 0x24
    assert ctypes.sizeof(info_v1) == ctypes.sizeof(fake_pynvml.c_nvmlGpuFabricInfo_t) == 28
    for name in ("clusterUuid", "status", "cliqueId", "state", "healthMask"):
        assert getattr(info_v2, name).offset == getattr(fake_pynvml.c_nvmlGpuFabricInfoV_t, name).offset
    assert fake_pynvml.nvmlGpuFabricInfo_v2 == nvml_probe._FABRIC_INFO_V2


def test_a_gpu_process_whose_command_line_would_block_does_not_hang_the_probe(
    fake_pynvml: ModuleType, tmp_path: Path
) -> None:
    """Issue 32, 1.11: reading /proc/PID/cmdline takes the process's mmap lock, which a rank stuck in
    D state (a page fault on a hung filesystem) holds: the read blocks, and the Prolog's GPU check with
    it. A FIFO with no writer stands in for such a read: the probe must not open it. The longer name
    comes from /proc/PID/exe (the binary, read without that lock), never from the command line."""
    import os
    import threading

    from nodecheck.probes import nvml_probe

    (tmp_path / "4242").mkdir()
    (tmp_path / "4242" / "comm").write_text("nodecheck-long-\n")
    os.mkfifo(tmp_path / "4242" / "cmdline")
    (tmp_path / "4242" / "exe").symlink_to("/opt/bin/nodecheck-long-sleeper")
    got: list[str | None] = []
    reader = threading.Thread(
        target=lambda: got.append(nvml_probe._Collector(fake_pynvml, proc=str(tmp_path)).process_name(4242)),
        daemon=True,
    )
    reader.start()
    reader.join(30)  # a blocked open never returns; a lock-free read is immediate
    if reader.is_alive():  # unblock the stuck open so the thread can end
        with open(tmp_path / "4242" / "cmdline", "wb"):
            pass
        reader.join(5)
    assert got == ["nodecheck-long-sleeper"]
