"""The real NVML probe script, run as nodes run it (`python3 -`, script on stdin) against the fake
nvidia-ml-py in tests/fakes, parsed with parse_nvml_probe; and in-process through collect()."""
from __future__ import annotations

import ast
import dataclasses
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from nodecheck.parsers.gpu import Gpu, GpuFacts, GpuProcess, NvLink, RemappedRows
from nodecheck.parsers.nvml import NvmlUnavailable, parse_nvml_probe

ROOT = Path(__file__).resolve().parents[1]
PROBE = ROOT / "nodecheck" / "probes" / "nvml_probe.py"
FAKES = ROOT / "tests" / "fakes"
STATES = FAKES / "nvml_states"
HEALTHY, REMAP, LEFTOVER = (STATES / f"h100x8-{name}.json"
                            for name in ("healthy", "row-remap-pending", "leftover-process"))
SYSTEM_PYTHON = "/usr/bin/python3"
UNAVAILABLE = "nodecheck-nvml-unavailable: "

pytestmark = pytest.mark.skipif(not os.access(SYSTEM_PYTHON, os.X_OK), reason=f"no {SYSTEM_PYTHON}")


def run_probe(state: Path | None, pythonpath: str | None = str(FAKES)) -> subprocess.CompletedProcess:
    """The probe as nodecheck runs it on a node: the script is stdin of `python3 -`, in a clean env."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"}
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    if state is not None:
        env["NODECHECK_FAKE_NVML_STATE"] = str(state)
    return subprocess.run([SYSTEM_PYTHON, "-"], input=PROBE.read_text(), capture_output=True, text=True,
                          env=env, cwd="/", timeout=60)


def probe_facts(state: Path) -> GpuFacts:
    result = run_probe(state)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr == ""
    return parse_nvml_probe(result.stdout)


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
STATE_GPUS = json.loads(HEALTHY.read_text())["gpus"]     # uuid and serial are passed through as is


def healthy_gpu(i: int) -> Gpu:
    return Gpu(index=i, name="NVIDIA H100 80GB HBM3", uuid=STATE_GPUS[i]["uuid"], serial=STATE_GPUS[i]["serial"],
               vbios="96.00.99.00.01", pci_bus_id=f"0000:{BUS[i]}:00.0", persistence_mode=True,
               ecc_enabled=True, ecc_pending_enabled=True, ecc_uncorrectable_volatile=0,
               ecc_uncorrectable_aggregate=0, ecc_correctable_volatile=0,
               retired_pages_pending=None, retired_pages_dbe=None, retired_pages_sbe=None,   # NotSupported
               remapped_rows=RemappedRows(0, 0, False, False), clock_event_reasons=frozenset({"gpu_idle"}),
               temperature_c=float(TEMPERATURES[i]), power_draw_w=POWER_W[i], power_limit_w=700.0,
               memory_used_mib=0.0, memory_total_mib=81559.0, pcie_gen_current=5, pcie_gen_max=5,
               pcie_width_current=16, pcie_width_max=16,
               nvlinks=tuple(NvLink(link, True) for link in range(18)), processes=())


def healthy(**gpu_changes: dict) -> GpuFacts:
    """The healthy facts, with {"GPU3": {field: value}} changes."""
    gpus = []
    for i in range(8):
        gpu = healthy_gpu(i)
        gpus.append(dataclasses.replace(gpu, **gpu_changes.get(f"GPU{i}", {})))
    return GpuFacts(source="nvml", driver_version="550.90.07", cuda_driver_version="12.4", gpus=tuple(gpus))


def expected_process_name(pid: int, fallback: str) -> str:
    """The probe reads /proc/<pid>/comm first; pid 48213 does not exist on a default test machine."""
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip() or fallback
    except OSError:
        return fallback


# --- the three shipped states, through the real script ------------------------------------------
def test_healthy_h100x8() -> None:
    facts = probe_facts(HEALTHY)
    assert facts == healthy()
    assert len(facts.gpus) == 8 and all(len(g.nvlinks) == 18 for g in facts.gpus)


def test_row_remap_pending_on_gpu3() -> None:
    facts = probe_facts(REMAP)
    assert facts == healthy(GPU3={"remapped_rows": RemappedRows(correctable=0, uncorrectable=4,
                                                                pending=True, failure=False)})


def test_leftover_process_on_gpu5() -> None:
    facts = probe_facts(LEFTOVER)
    process = GpuProcess(pid=48213, name=expected_process_name(48213, "python3"), used_memory_mib=40960.0)
    assert facts == healthy(GPU5={"processes": (process,), "memory_used_mib": 40960.0})


def test_output_is_one_json_line_with_the_schema() -> None:
    result = run_probe(HEALTHY)
    assert result.stdout.count("\n") == 1
    doc = json.loads(result.stdout)
    assert (doc["schema"], doc["source"], doc["cuda_driver_version"], doc["errors"]) == (1, "nvml", "12.4", [])
    assert doc["nvml_version"] == "12.550.90.07"


# --- NVML unavailable: exit 3 and the one line ---------------------------------------------------
def _system_python_has_pynvml() -> bool:
    return subprocess.run([SYSTEM_PYTHON, "-c", "import pynvml"], capture_output=True,
                          env={"PATH": "/usr/bin:/bin"}).returncode == 0


@pytest.mark.skipif(_system_python_has_pynvml(), reason="this machine's python3 has a real pynvml")
def test_no_pynvml_on_the_node_exits_3() -> None:
    result = run_probe(None, pythonpath=None)
    assert result.returncode == 3
    assert result.stdout == (f"{UNAVAILABLE}cannot import pynvml (nvidia-ml-py): "
                             "ModuleNotFoundError: No module named 'pynvml'\n")
    with pytest.raises(NvmlUnavailable, match="No module named 'pynvml'"):
        parse_nvml_probe(result.stdout)


def test_a_broken_pynvml_install_exits_3(tmp_path: Path) -> None:
    (tmp_path / "pynvml.py").write_text("raise ImportError('libnvidia-ml.so.1: cannot open shared object file')\n")
    result = run_probe(None, pythonpath=str(tmp_path))
    assert result.returncode == 3
    assert result.stdout == (f"{UNAVAILABLE}cannot import pynvml (nvidia-ml-py): ImportError: "
                             "libnvidia-ml.so.1: cannot open shared object file\n")


@pytest.mark.parametrize("init_error, text", [("DriverNotLoaded", "Driver Not Loaded"),
                                               ("LibraryNotFound", "NVML Shared Library Not Found"),
                                               ("LibRmVersionMismatch",
                                                "RM has detected an NVML/RM version mismatch.")])
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
        state["gpus"][0]["not_supported"] += ["nvmlDeviceGetRemappedRows", "nvmlDeviceGetComputeRunningProcesses",
                                              "nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetEccMode"]
        state["gpus"][1]["nvlink_states"] = None       # a GPU without NVLink: NotSupported on link 0
    facts = probe_facts(write_state(tmp_path, change))
    assert facts == healthy(GPU0={"remapped_rows": None, "processes": None, "power_limit_w": None,
                                  "ecc_enabled": None, "ecc_pending_enabled": None},
                            GPU1={"nvlinks": ()})
    assert facts.gaps == ()


def test_an_nvml_error_on_one_field_becomes_a_gap(tmp_path: Path) -> None:
    def change(state: dict) -> None:
        state["gpus"][3]["errors"] = {"nvmlDeviceGetRemappedRows": "Unknown",
                                      "nvmlDeviceGetMemoryInfo": "NoPermission"}
        state["gpus"][6]["errors"] = {"nvmlDeviceGetNvLinkState": "GpuIsLost"}
    facts = probe_facts(write_state(tmp_path, change))
    assert facts == dataclasses.replace(
        healthy(GPU3={"remapped_rows": None, "memory_used_mib": None, "memory_total_mib": None},
                GPU6={"nvlinks": None}),
        gaps=("GPU3 remapped_rows: Unknown Error",
              "GPU3 memory_used_mib: Insufficient Permissions", "GPU3 memory_total_mib: Insufficient Permissions",
              "GPU6 nvlinks: GPU is lost"))


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
    assert facts.gpus[2].nvlinks == tuple(NvLink(n, True) for n in range(11)) + (NvLink(11, False),)
    assert facts.gaps == ()


def test_process_without_memory_figure_and_unknown_name(tmp_path: Path) -> None:
    # pid 1's /proc/1/comm is always readable, so name it from there; usedGpuMemory None → unknown
    state = write_state(tmp_path, lambda s: s["gpus"][0].update(
        processes=[{"pid": 1, "name": "ignored", "usedGpuMemory": None}]))
    facts = probe_facts(state)
    assert facts.gpus[0].processes == (GpuProcess(1, expected_process_name(1, "ignored"), None),)


def test_clock_reason_bits_map_to_names(tmp_path: Path) -> None:
    state = write_state(tmp_path, lambda s: s["gpus"][4].update(clock_event_reasons=0x1FF | 0x1000))
    facts = probe_facts(state)
    assert facts.gpus[4].clock_event_reasons == frozenset({
        "gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "sync_boost",
        "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "display_clock_setting"})


# --- in-process (--local): collect() is the same object ----------------------------------------------
@pytest.fixture
def fake_pynvml(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """A fresh tests/fakes/pynvml.py imported as `pynvml`."""
    spec = importlib.util.spec_from_file_location("pynvml", FAKES / "pynvml.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setitem(sys.modules, "pynvml", module)
    return module


@pytest.mark.parametrize("state", [HEALTHY, REMAP, LEFTOVER], ids=lambda p: p.stem)
def test_collect_in_process_equals_the_script_output(fake_pynvml: ModuleType, monkeypatch: pytest.MonkeyPatch,
                                                     state: Path) -> None:
    from nodecheck.probes import nvml_probe
    monkeypatch.setenv("NODECHECK_FAKE_NVML_STATE", str(state))
    result = run_probe(state)
    assert nvml_probe.collect() == json.loads(result.stdout)
    assert fake_pynvml._init_count == 0                # nvmlShutdown ran


def test_older_pynvml_throttle_reason_names_read_the_same(fake_pynvml: ModuleType,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from nodecheck.probes import nvml_probe
    monkeypatch.setenv("NODECHECK_FAKE_NVML_STATE", str(HEALTHY))
    expected = nvml_probe.collect()
    monkeypatch.delattr(fake_pynvml, "nvmlDeviceGetCurrentClocksEventReasons")
    monkeypatch.delattr(fake_pynvml, "nvmlSystemGetCudaDriverVersion_v2")
    for name in [n for n in vars(fake_pynvml) if n.startswith("nvmlClocksEventReason")]:
        monkeypatch.delattr(fake_pynvml, name)
    assert nvml_probe.collect() == expected
    for name in [n for n in vars(fake_pynvml) if n.startswith("nvmlClocksThrottleReason")]:
        monkeypatch.delattr(fake_pynvml, name)                # neither name: the nvml.h literals
    assert nvml_probe.collect() == expected


def test_collect_raises_unavailable_and_still_balances_init(fake_pynvml: ModuleType, monkeypatch: pytest.MonkeyPatch,
                                                            tmp_path: Path) -> None:
    from nodecheck.probes import nvml_probe
    monkeypatch.setenv("NODECHECK_FAKE_NVML_STATE", str(write_state(tmp_path, lambda s: s.update(
        init_error="DriverNotLoaded"))))
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
    assert imported == {"json", "sys", "pynvml"}
