"""gpu.count, gpu.health, gpu.processes (and gpu.driver/cuda.version) judged on what the GPU probe
really prints: the NVML probe script run as nodes run it (`python3 -`, script on stdin) against the
fake nvidia-ml-py in tests/fakes, with states derived from the shipped ones; and the nvidia-smi
fallback sections built from the constructed CSV of tests/parsers/test_nvidia_smi.py.
Exact statuses, subjects and messages throughout."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import ValidationError

from nodecheck.checks import all_checks
from nodecheck.checks.gpu import GPU, GPU_SCRIPT, GpuCount, GpuHealth, GpuProcesses, parse_gpu_probe
from nodecheck.checks.gpu import count as gpu_count
from nodecheck.checks.gpu import health as gpu_health
from nodecheck.checks.gpu import processes as gpu_processes
from nodecheck.config.playbook import PlannedCheck
from nodecheck.core.errors import ParseError
from nodecheck.core.model import Capture, Status, Verdict
from nodecheck.judging.drift import PinOrDrift
from nodecheck.parsers.gpu import GpuFacts, GpuProcess, NvLink
from nodecheck.run.runner import judge_node
from tests.helpers import captures, data

# the constructed 2x H100 PCIe `--query-gpu` CSV (noheader, nounits) and the facts it reads as
from tests.parsers.test_nvidia_smi import H100_CSV, H100_CSV_GPUS

PASS, WARN, FAIL, ERROR = Status.PASS, Status.WARN, Status.FAIL, Status.ERROR
ROOT = Path(__file__).resolve().parents[2]
PROBE_SCRIPT = ROOT / "nodecheck" / "probes" / "nvml_probe.py"
FAKES = ROOT / "tests" / "fakes"
STATES = FAKES / "nvml_states"
HEALTHY = STATES / "h100x8-healthy.json"
LEFTOVER = STATES / "h100x8-leftover-process.json"
SYSTEM_PYTHON = "/usr/bin/python3"
NVLINK_S = "nvidia-smi-nvlink/hpe-dl380a-h100pcie-nvlink-s-inactive-links.txt"
NO_DRIVER = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that "
    "the latest NVIDIA driver is installed and running."
)

# what gpu.health says about a healthy H100 SXM with default thresholds
HEALTHY_PASS = "ECC 0; ECC on; no remap pending; no throttling; persistence on; PCIe gen5 x16; 18 NVLinks active"


# -- the GPU probe's stdout: the real NVML probe against the fake, or the nvidia-smi fallback -------


def nvml_stdout(state: Path) -> str:
    """What the GPU probe prints where NVML answers: the probe script, run as a node runs it."""
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        pytest.skip(f"no {SYSTEM_PYTHON} to run the NVML probe")
    env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C", "PYTHONPATH": str(FAKES), "NODECHECK_FAKE_NVML_STATE": str(state)}
    result = subprocess.run(
        [SYSTEM_PYTHON, "-"],
        input=PROBE_SCRIPT.read_text(),
        capture_output=True,
        text=True,
        env=env,
        cwd="/",
        timeout=60,
    )
    assert (result.returncode, result.stderr) == (0, ""), result.stdout + result.stderr
    return result.stdout


def write_state(tmp_path: Path, change: Callable[[dict], object] | None = None, base: Path = HEALTHY) -> Path:
    """A copy of a shipped fake NVML state with `change(state)` applied."""
    state = json.loads(base.read_text())
    if change is not None:
        change(state)
    path = tmp_path / "nvml_state.json"
    path.write_text(json.dumps(state))
    return path


def gpu(index: int, **changes) -> Callable[[dict], None]:
    """A state change: GPU<index>'s NVML values (NVML units: bitmasks, bytes, mW, 1/0)."""
    return lambda state: state["gpus"][index].update(changes)


def nvml_out(tmp_path: Path, change=None, base: Path = HEALTHY) -> dict[str, Capture]:
    return captures(GPU, nvml_stdout(write_state(tmp_path, change, base)))


def fallback_stdout(
    why: str = "python3 not found",
    query_gpu: str = H100_CSV,
    query_rc: int = 0,
    compute_apps: str = "",
    q: tuple[str, int] = ("", 2),
    nvlink: tuple[str, int] | None = None,
) -> str:
    """The probe's output where NVML cannot answer: the unavailable line, then GPU_SCRIPT's sections."""
    nvlink = nvlink if nvlink is not None else (data(NVLINK_S), 0)

    def section(name: str, text: str, rc: int) -> str:
        return f"@@nodecheck begin {name}\n{text}@@nodecheck end {name} rc={rc}\n"

    return (
        f"nodecheck-nvml-unavailable: {why}\n"
        + section("query-gpu", query_gpu, query_rc)
        + section("compute-apps", compute_apps, 0)
        + section("q", *q)
        + section("nvlink", *nvlink)
    )


def process_name(pid: int, fallback: str) -> str:
    """The probe names a process from /proc/<pid>/comm first (pid 48213 is absent on a test machine)."""
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip() or fallback
    except OSError:
        return fallback


def health(out, **params) -> list[Verdict]:
    return list(gpu_health(out, GpuHealth(**params)))


def only_one(verdicts: list[Verdict], index: int, status: Status, message: str, healthy: str = HEALTHY_PASS) -> Verdict:
    """GPU<index> has exactly one verdict, non-pass, with `message`; every other GPU one PASS."""
    assert [(v.subject, v.status) for v in verdicts] == [(f"GPU{i}", status if i == index else PASS) for i in range(8)]
    assert [v.message for v in verdicts] == [message if i == index else f"GPU{i}: {healthy}" for i in range(8)]
    return verdicts[index]


# -- gpu.count -------------------------------------------------------------------------------------

BUS = ("18", "2a", "3a", "5d", "9a", "ab", "ba", "db")


def test_count_eight_h100_pass(tmp_path):
    [verdict] = gpu_count(nvml_out(tmp_path), GpuCount(expect=8, name="NVIDIA H100 80GB HBM3"))
    assert (verdict.status, verdict.subject, verdict.message) == (PASS, "", "8 GPUs (NVML)")
    assert verdict.observed == {"gpus": 8, "pci": [f"0000:{b}:00.0" for b in BUS], "source": "nvml"}
    assert verdict.expected == {"gpus": 8}


def test_count_seven_fails_listing_the_pci_ids_seen(tmp_path):
    [verdict] = gpu_count(nvml_out(tmp_path, lambda s: s["gpus"].pop(3)), GpuCount(expect=8))
    seen = [f"0000:{b}:00.0" for b in BUS if b != "5d"]
    assert (verdict.status, verdict.subject) == (FAIL, "")
    assert verdict.message == f"7 GPUs visible to NVML, expected 8 (seen: {', '.join(seen)})"
    assert verdict.observed == {"gpus": 7, "pci": seen, "source": "nvml"}


def test_count_zero_fails_with_none_seen(tmp_path):
    [verdict] = gpu_count(nvml_out(tmp_path, lambda s: s.update(gpus=[])), GpuCount(expect=8))
    assert (verdict.status, verdict.message) == (FAIL, "no GPU found (NVML lists none), expected 8")
    assert (verdict.observed, verdict.expected) == ({"gpus": 0, "pci": [], "source": "nvml"}, {"gpus": 8})


def test_count_name_mismatch_fails_that_gpu(tmp_path):
    out = nvml_out(tmp_path, gpu(3, name="NVIDIA H100 PCIe"))
    verdicts = list(gpu_count(out, GpuCount(expect=8, name="NVIDIA H100 80GB HBM3")))
    assert [(v.status, v.subject, v.message) for v in verdicts] == [
        (PASS, "", "8 GPUs (NVML)"),
        (FAIL, "GPU3", "GPU3: NVIDIA H100 PCIe, expected NVIDIA H100 80GB HBM3"),
    ]
    assert (verdicts[1].observed, verdicts[1].expected) == (
        {"name": "NVIDIA H100 PCIe"},
        {"name": "NVIDIA H100 80GB HBM3"},
    )


def test_count_from_the_nvidia_smi_fallback_names_its_source():
    out = captures(GPU, fallback_stdout())
    [ok] = gpu_count(out, GpuCount(expect=2, name="NVIDIA H100 PCIe"))
    assert (ok.status, ok.message, ok.observed["source"]) == (PASS, "2 GPUs (nvidia-smi)", "nvidia-smi")
    [bad] = gpu_count(out, GpuCount(expect=8))
    assert (bad.status, bad.message) == (
        FAIL,
        "2 GPUs visible to nvidia-smi, expected 8 (seen: 0000:c2:00.0, 0000:d5:00.0)",
    )


@pytest.mark.parametrize("bad", [{}, {"expect": -1}, {"expect": "8"}, {"expect": 8.0}, {"expect": 8, "count": 8}])
def test_count_params_are_validated(bad):
    with pytest.raises(ValidationError):
        GpuCount.model_validate(bad)


# -- gpu.health: a healthy node, then one aspect at a time -------------------------------------------


def test_health_healthy_node_one_pass_per_gpu_listing_what_was_judged(tmp_path):
    verdicts = health(nvml_out(tmp_path))
    assert [(v.status, v.subject, v.message) for v in verdicts] == [
        (PASS, f"GPU{i}", f"GPU{i}: {HEALTHY_PASS}") for i in range(8)
    ]


def _retired_pending(state: dict) -> None:
    state["gpus"][7]["not_supported"].remove("nvmlDeviceGetRetiredPagesPendingStatus")
    state["gpus"][7]["retired_pages_pending"] = 1


def _nvlink_down(state: dict) -> None:
    state["gpus"][2]["nvlink_states"][5] = 0


ASPECTS = {
    "nvlink-5-down": (
        _nvlink_down,
        {},
        2,
        FAIL,
        "GPU2: NVLink 5 down (17 of 18 active; set expected_nvlinks if not all are wired)",
    ),
    "hw-slowdown": (
        gpu(1, clock_event_reasons=0x8),
        {},
        1,
        FAIL,
        "GPU1: clocks held down by hw_slowdown, expected none of hw_slowdown, hw_thermal_slowdown, "
        "hw_power_brake_slowdown",
    ),
    "sw-thermal-warns": (
        gpu(1, clock_event_reasons=0x20 | 0x1),
        {},
        1,
        WARN,
        "GPU1: clocks held down by sw_thermal_slowdown, expected none of sw_thermal_slowdown",
    ),
    "ecc-volatile-2": (
        lambda s: s["gpus"][3]["ecc_errors"].update(uncorrected_volatile=2),
        {},
        3,
        FAIL,
        "GPU3: volatile uncorrectable ECC 2 errors, expected <= 0 errors",
    ),
    "ecc-disabled": (gpu(5, ecc_mode=[0, 0]), {}, 5, WARN, "GPU5: ECC disabled, expected enabled"),
    "persistence-off": (gpu(4, persistence_mode=0), {}, 4, WARN, "GPU4: persistence mode off, expected on"),
    "pcie-width-idle": (
        gpu(1, pcie_width_current=8),
        {},
        1,
        WARN,
        "GPU1: PCIe link x8, expected x16 while idle; re-check under load",
    ),
    "pcie-width-busy": (
        gpu(1, pcie_width_current=8, clock_event_reasons=0),
        {},
        1,
        FAIL,
        "GPU1: PCIe link x8, expected x16",
    ),
    "pcie-width-busy-warn": (
        gpu(1, pcie_width_current=8, clock_event_reasons=0),
        {"pcie": "warn"},
        1,
        WARN,
        "GPU1: PCIe link x8, expected x16",
    ),
    "pcie-gen-busy": (
        gpu(6, pcie_gen_current=4, clock_event_reasons=0),
        {},
        6,
        FAIL,
        "GPU6: PCIe gen 4, expected gen 5 (GPU not idle)",
    ),
    "remap-failure": (
        gpu(0, remapped_rows=[0, 3, 0, 1]),
        {},
        0,
        FAIL,
        "GPU0: row remapping failed (correctable 0, uncorrectable 3); replace the GPU",
    ),
    "remap-pending": (
        gpu(0, remapped_rows=[1, 4, 1, 0]),
        {},
        0,
        FAIL,
        "GPU0: row remap pending (correctable 1, uncorrectable 4); reset the GPU before the next job",
    ),
    "remap-pending-warn": (
        gpu(0, remapped_rows=[1, 4, 1, 0]),
        {"remap_pending": "warn"},
        0,
        WARN,
        "GPU0: row remap pending (correctable 1, uncorrectable 4); reset the GPU before the next job",
    ),
    "retired-pages-pending": (_retired_pending, {}, 7, FAIL, "GPU7: page retirement pending (reset the GPU)"),
    "nvlink-down-warn": (
        _nvlink_down,
        {"nvlink": "warn"},
        2,
        WARN,
        "GPU2: NVLink 5 down (17 of 18 active; set expected_nvlinks if not all are wired)",
    ),
}


@pytest.mark.parametrize("name", ASPECTS)
def test_health_each_aspect_gives_exactly_one_verdict_on_its_gpu(tmp_path, name):
    change, params, index, status, message = ASPECTS[name]
    bad = only_one(health(nvml_out(tmp_path, change), **params), index, status, message)
    assert bad.expected  # every finding says what was expected


def test_health_pcie_gen_below_max_while_idle_passes_with_a_note(tmp_path):
    verdicts = health(nvml_out(tmp_path, gpu(6, pcie_gen_current=4)))
    only_one(
        verdicts,
        6,
        PASS,
        "GPU6: ECC 0; ECC on; no remap pending; no throttling; persistence on; "
        "PCIe gen4 x16 (max gen5; idle: gen not judged); 18 NVLinks active",
    )


def test_health_observed_and_expected_of_a_finding(tmp_path):
    bad = only_one(
        health(nvml_out(tmp_path, gpu(1, pcie_width_current=8, clock_event_reasons=0))),
        1,
        FAIL,
        "GPU1: PCIe link x8, expected x16",
    )
    assert bad.observed == {"pcie_gen": 5, "pcie_gen_max": 5, "pcie_width": 8, "pcie_width_max": 16, "idle": False}
    assert bad.expected == {"pcie_gen": 5, "pcie_width": 16}


def test_health_two_problems_on_one_gpu_are_two_verdicts(tmp_path):
    def change(state):
        state["gpus"][0].update(remapped_rows=[0, 3, 1, 1], clock_event_reasons=0x8 | 0x20)

    verdicts = health(nvml_out(tmp_path, change))
    assert [(v.subject, v.status, v.message) for v in verdicts[:4]] == [
        ("GPU0", FAIL, "GPU0: row remapping failed (correctable 0, uncorrectable 3); replace the GPU"),
        ("GPU0", FAIL, "GPU0: row remap pending (correctable 0, uncorrectable 3); reset the GPU before the next job"),
        (
            "GPU0",
            FAIL,
            "GPU0: clocks held down by hw_slowdown, expected none of hw_slowdown, hw_thermal_slowdown, "
            "hw_power_brake_slowdown",
        ),
        ("GPU0", WARN, "GPU0: clocks held down by sw_thermal_slowdown, expected none of sw_thermal_slowdown"),
    ]
    assert [(v.subject, v.status) for v in verdicts[4:]] == [(f"GPU{i}", PASS) for i in range(1, 8)]


THRESHOLDS = {"temperature_c": {"fail_above": 85, "warn_above": 80}, "power_limit_w": {"fail_below": 700}}
TEMPERATURES = (31, 33, 30, 32, 34, 31, 33, 30)


def _with_thresholds(i: int) -> str:
    return f"{HEALTHY_PASS}; {TEMPERATURES[i]} °C; power limit 700 W"


@pytest.mark.parametrize(
    "change, status, message",
    [
        (gpu(5, temperature_c=88), FAIL, "GPU5: temperature 88 °C, expected <= 85 °C"),
        (gpu(5, temperature_c=82), WARN, "GPU5: temperature 82 °C, expected <= 80 °C"),
        (gpu(5, enforced_power_limit_mw=500000), FAIL, "GPU5: power limit 500 W, expected >= 700 W"),
    ],
    ids=["temperature-fail", "temperature-warn", "power-capped"],
)
def test_health_temperature_and_power_thresholds(tmp_path, change, status, message):
    verdicts = health(nvml_out(tmp_path, change), **THRESHOLDS)
    assert [(v.subject, v.status) for v in verdicts] == [(f"GPU{i}", status if i == 5 else PASS) for i in range(8)]
    assert verdicts[5].message == message
    assert [v.message for i, v in enumerate(verdicts) if i != 5] == [
        f"GPU{i}: {_with_thresholds(i)}" for i in range(8) if i != 5
    ]


def test_health_lifetime_ecc_is_judged_only_when_asked(tmp_path):
    out = nvml_out(tmp_path, lambda s: s["gpus"][3]["ecc_errors"].update(uncorrected_aggregate=5))
    assert [v.status for v in health(out)] == [PASS] * 8
    verdicts = health(out, ecc_uncorrectable_aggregate={"fail_above": 0})
    assert [(v.subject, v.status) for v in verdicts] == [(f"GPU{i}", FAIL if i == 3 else PASS) for i in range(8)]
    assert verdicts[3].message == "GPU3: lifetime uncorrectable ECC 5 errors, expected <= 0 errors"
    assert verdicts[0].message == (
        "GPU0: ECC 0; lifetime ECC 0; ECC on; no remap pending; no throttling; "
        "persistence on; PCIe gen5 x16; 18 NVLinks active"
    )


@pytest.mark.parametrize("off", ["off", False], ids=["off", "yaml-false"])
@pytest.mark.parametrize(
    "aspect, change, index, healthy",
    [
        (
            "persistence",
            gpu(4, persistence_mode=0),
            4,
            "ECC 0; ECC on; no remap pending; no throttling; PCIe gen5 x16; 18 NVLinks active",
        ),
        ("nvlink", _nvlink_down, 2, "ECC 0; ECC on; no remap pending; no throttling; persistence on; PCIe gen5 x16"),
        (
            "pcie",
            gpu(1, pcie_width_current=8, clock_event_reasons=0),
            1,
            "ECC 0; ECC on; no remap pending; no throttling; persistence on; 18 NVLinks active",
        ),
        (
            "ecc_mode",
            gpu(5, ecc_mode=[0, 0]),
            5,
            "ECC 0; no remap pending; no throttling; persistence on; PCIe gen5 x16; 18 NVLinks active",
        ),
        (
            "remap_pending",
            gpu(0, remapped_rows=[1, 4, 1, 0]),
            0,
            "ECC 0; ECC on; no throttling; persistence on; PCIe gen5 x16; 18 NVLinks active",
        ),
    ],
)
def test_health_an_aspect_turned_off_is_not_judged(tmp_path, off, aspect, change, index, healthy):
    verdicts = health(nvml_out(tmp_path, change), **{aspect: off})
    assert GpuHealth(**{aspect: off}).model_dump()[aspect] == "off"
    assert [(v.subject, v.status) for v in verdicts] == [(f"GPU{i}", PASS) for i in range(8)]
    assert verdicts[index].message == f"GPU{index}: {healthy}"


def test_health_a_gap_in_the_facts_is_an_error_naming_the_gpu(tmp_path):
    out = nvml_out(tmp_path, gpu(3, errors={"nvmlDeviceGetRemappedRows": "Unknown"}))
    verdicts = health(out)
    assert [(v.status, v.subject, v.message) for v in verdicts[:1]] == [
        (ERROR, "GPU3", "not read: GPU3 remapped_rows: Unknown Error")
    ]
    assert [(v.subject, v.status) for v in verdicts[1:]] == [(f"GPU{i}", PASS) for i in range(8)]
    # GPU3's pass no longer claims anything about row remapping
    assert verdicts[4].message == (
        "GPU3: ECC 0; ECC on; no throttling; persistence on; PCIe gen5 x16; 18 NVLinks active"
    )


def test_health_a_lost_gpu_is_an_error_never_a_pass(tmp_path):
    verdicts = health(nvml_out(tmp_path, gpu(7, errors={"nvmlDeviceGetHandleByIndex": "GpuIsLost"})))
    assert [(v.status, v.subject, v.message) for v in verdicts if v.status is not PASS] == [
        (ERROR, "GPU7", "not read: GPU7 handle: GPU is lost"),
        (
            ERROR,
            "GPU7",
            "GPU7: volatile ECC error count, clock-event reasons not reported by NVML; the "
            "playbook requires them to judge the GPU",
        ),
    ]
    assert [v.subject for v in verdicts if v.status is PASS] == [f"GPU{i}" for i in range(7)]


def test_health_zero_gpus_fails(tmp_path):
    # issue 17: the health playbook runs gpu.health without gpu.count; an ERROR would never drain a
    # node that lost every GPU
    verdicts = health(nvml_out(tmp_path, lambda s: s.update(gpus=[])))
    assert [(v.status, v.subject, v.message) for v in verdicts] == [
        (FAIL, "", "no GPU found (NVML lists none); gpu.health expects GPUs on this node")
    ]


def test_health_expected_nvlinks_with_the_link_state_unknown_is_an_error(tmp_path):
    out = nvml_out(tmp_path, gpu(6, errors={"nvmlDeviceGetNvLinkState": "GpuIsLost"}))
    verdicts = health(out, expected_nvlinks=18)
    assert [(v.status, v.subject, v.message) for v in verdicts if v.status is not PASS] == [
        (ERROR, "GPU6", "not read: GPU6 nvlinks: GPU is lost"),
        (ERROR, "GPU6", "GPU6: NVLink state not reported, expected 18 active links"),
    ]
    assert [v.subject for v in verdicts if v.status is PASS] == [f"GPU{i}" for i in range(8) if i != 6]


def test_health_expected_nvlinks_counts_active_links(tmp_path):
    assert [v.status for v in health(nvml_out(tmp_path), expected_nvlinks=18)] == [PASS] * 8
    # an A100-like GPU2 with 12 links; a GPU1 without NVLink at all
    out = nvml_out(
        tmp_path, lambda s: (s["gpus"][2].update(nvlink_states=[1] * 12), s["gpus"][1].update(nvlink_states=None))
    )
    verdicts = health(out, expected_nvlinks=18)
    assert [(v.status, v.subject, v.message) for v in verdicts if v.status is not PASS] == [
        (FAIL, "GPU1", "GPU1: 0 NVLinks active, expected 18"),
        (FAIL, "GPU2", "GPU2: 12 NVLinks active, expected 18"),
    ]
    # without a count to meet, a GPU without NVLink has nothing to judge there
    plain = health(out)
    assert [v.status for v in plain] == [PASS] * 8
    assert plain[1].message == "GPU1: ECC 0; ECC on; no remap pending; no throttling; persistence on; PCIe gen5 x16"
    assert plain[2].message == "GPU2: " + HEALTHY_PASS.replace("18 NVLinks", "12 NVLinks")


@pytest.mark.parametrize(
    "bad",
    [
        {"throttle_fail": ["hw_slowdown", "too_hot"]},
        {"persistence": "maybe"},
        {"expected_nvlinks": "18"},
        {"expected_nvlinks": -1},
        {"temperature_c": {"fail_above": 80, "warn_above": 85}},
        {"nvlinks": 18},
    ],
)
def test_health_params_are_validated(bad):
    with pytest.raises(ValidationError):
        GpuHealth.model_validate(bad)


def test_health_on_the_nvidia_smi_fallback():
    verdicts = health(captures(GPU, fallback_stdout()))
    assert [(v.status, v.subject, v.message) for v in verdicts] == [
        (ERROR, "GPU0", "not read: GPU0 remapped rows: no -q output"),
        (ERROR, "GPU1", "not read: GPU1 remapped rows: no -q output"),
        (
            FAIL,
            "GPU0",
            "GPU0: NVLink 4, 5, 10, 11, 16, 17 down (12 of 18 active; set expected_nvlinks if not all are wired)",
        ),
        # without -q nvidia-smi says nothing about throttling: that GPU is not passed on faith
        (
            ERROR,
            "GPU0",
            "GPU0: clock-event reasons not reported by nvidia-smi; the playbook requires it to judge the GPU",
        ),
        (FAIL, "GPU1", "GPU1: volatile uncorrectable ECC 2 errors, expected <= 0 errors"),
        (
            FAIL,
            "GPU1",
            "GPU1: NVLink 4, 5, 10, 11, 16, 17 down (12 of 18 active; set expected_nvlinks if not all are wired)",
        ),
        (
            ERROR,
            "GPU1",
            "GPU1: clock-event reasons not reported by nvidia-smi; the playbook requires it to judge the GPU",
        ),
    ]


# -- gpu.processes ----------------------------------------------------------------------------------


def _processes(out, **params) -> list[Verdict]:
    return list(gpu_processes(out, GpuProcesses(**params)))


def test_processes_none_left_pass_per_gpu(tmp_path):
    assert [(v.status, v.subject, v.message) for v in _processes(nvml_out(tmp_path))] == [
        (PASS, f"GPU{i}", f"GPU{i}: no compute process, 0 MiB used") for i in range(8)
    ]


def test_processes_a_leftover_process_fails_its_gpu(tmp_path):
    name = process_name(48213, "python3")
    verdicts = _processes(captures(GPU, nvml_stdout(LEFTOVER)))
    assert [(v.subject, v.status) for v in verdicts] == [(f"GPU{i}", FAIL if i == 5 else PASS) for i in range(8)]
    assert verdicts[5].message == f"GPU5: leftover process pid 48213 {name} using 40960 MiB, expected none"
    assert verdicts[5].observed == {"pid": 48213, "process": name, "used_memory_mib": 40960.0}
    assert verdicts[5].expected == {"processes": []}


def test_processes_memory_held_with_no_process_fails(tmp_path):
    verdicts = _processes(nvml_out(tmp_path, gpu(2, memory_used_bytes=30000 * 2**20)))
    assert [(v.subject, v.status) for v in verdicts] == [(f"GPU{i}", FAIL if i == 2 else PASS) for i in range(8)]
    assert verdicts[2].message == "GPU2: 30000 MiB GPU memory in use with no process visible, expected <= 1024 MiB"
    assert (verdicts[2].observed, verdicts[2].expected) == ({"memory_used_mib": 30000.0}, {"max_memory_used_mib": 1024})
    # under the bar: a driver's own allocation, not a leak
    small = _processes(nvml_out(tmp_path, gpu(2, memory_used_bytes=512 * 2**20)))
    assert (small[2].status, small[2].message) == (PASS, "GPU2: no compute process, 512 MiB used")
    raised = _processes(nvml_out(tmp_path, gpu(2, memory_used_bytes=30000 * 2**20)), max_memory_used_mib=32768)
    assert (raised[2].status, raised[2].message) == (PASS, "GPU2: no compute process, 30000 MiB used")


def test_processes_an_ignored_process_and_its_memory_pass(tmp_path):
    name = process_name(48213, "python3")
    verdicts = _processes(captures(GPU, nvml_stdout(LEFTOVER)), ignore=[name])
    assert [v.status for v in verdicts] == [PASS] * 8
    assert verdicts[5].message == f"GPU5: no compute process (ignored: {name}), 40960 MiB used"


def test_processes_memory_beyond_what_the_ignored_process_holds_still_fails(tmp_path):
    name = process_name(48213, "python3")
    out = nvml_out(tmp_path, gpu(5, memory_used_bytes=(40960 + 2048) * 2**20), base=LEFTOVER)
    verdicts = _processes(out, ignore=[name])
    assert [(v.subject, v.status) for v in verdicts] == [(f"GPU{i}", FAIL if i == 5 else PASS) for i in range(8)]
    assert verdicts[5].message == (
        f"GPU5: 2048 MiB GPU memory in use with no process visible besides the ignored {name}, expected <= 1024 MiB"
    )


def test_processes_a_process_with_unknown_memory_still_fails(tmp_path):
    out = nvml_out(tmp_path, gpu(0, processes=[{"pid": 1, "name": "agent", "usedGpuMemory": None}]))
    verdicts = _processes(out)
    assert (verdicts[0].status, verdicts[0].subject, verdicts[0].message) == (
        FAIL,
        "GPU0",
        f"GPU0: leftover process pid 1 {process_name(1, 'agent')} using memory unknown, expected none",
    )


def test_processes_not_reported_is_an_error(tmp_path):
    out = nvml_out(tmp_path, lambda s: s["gpus"][0]["not_supported"].append("nvmlDeviceGetComputeRunningProcesses"))
    verdicts = _processes(out)
    assert [(v.subject, v.status) for v in verdicts] == [(f"GPU{i}", ERROR if i == 0 else PASS) for i in range(8)]
    assert verdicts[0].message == "GPU0: compute processes not reported by NVML"


def test_processes_zero_gpus_fails(tmp_path):
    assert [(v.status, v.message) for v in _processes(nvml_out(tmp_path, lambda s: s.update(gpus=[])))] == [
        (FAIL, "no GPU found (NVML lists none); gpu.processes expects GPUs on this node")
    ]


def test_processes_from_the_fallback_attribute_compute_apps_by_uuid():
    apps = "GPU-9b1446e2-8a89-4cf6-b68c-a98d99e958d3, 3051, python3, 1010\n"
    verdicts = _processes(captures(GPU, fallback_stdout(compute_apps=apps)))
    assert [(v.status, v.subject, v.message) for v in verdicts] == [
        (PASS, "GPU0", "GPU0: no compute process, 0 MiB used"),
        (FAIL, "GPU1", "GPU1: leftover process pid 3051 python3 using 1010 MiB, expected none"),
    ]


# -- parse_gpu_probe: NVML JSON, the nvidia-smi fallback, and what cannot be read --------------------


def test_parse_nvml_json(tmp_path):
    facts = parse_gpu_probe(nvml_stdout(HEALTHY))
    assert (facts.source, facts.driver_version, facts.cuda_driver_version, facts.source_note, facts.gaps) == (
        "nvml",
        "550.90.07",
        "12.4",
        "",
        (),
    )
    assert [g.pci_bus_id for g in facts.gpus] == [f"0000:{b}:00.0" for b in BUS]


def test_parse_the_nvidia_smi_fallback_sections():
    facts = parse_gpu_probe(
        fallback_stdout(why="cannot import pynvml (nvidia-ml-py): ModuleNotFoundError: No module named 'pynvml'")
    )
    links = tuple(
        NvLink(n, n not in {4, 5, 10, 11, 16, 17}, None if n in {4, 5, 10, 11, 16, 17} else 26.562 * 8)
        for n in range(18)
    )
    assert facts == GpuFacts(
        source="nvidia-smi",
        driver_version="535.104.05",
        cuda_driver_version=None,
        gpus=tuple(dataclasses.replace(g, processes=(), nvlinks=links) for g in H100_CSV_GPUS),
        source_note=(
            "NVML unavailable (cannot import pynvml (nvidia-ml-py): ModuleNotFoundError: "
            "No module named 'pynvml'); read from nvidia-smi"
        ),
        gaps=("GPU0 remapped rows: no -q output", "GPU1 remapped rows: no -q output"),
    )


def test_parse_fallback_with_failed_optional_sections_leaves_them_unknown():
    facts = parse_gpu_probe(fallback_stdout(nvlink=("NVML: Unable to find NVLink\n", 3)))
    assert [(g.nvlinks, g.processes) for g in facts.gpus] == [(None, ()), (None, ())]


def test_parse_fallback_when_nvidia_smi_cannot_reach_the_driver_carries_its_line():
    text = fallback_stdout(query_gpu=NO_DRIVER + "\n\n", query_rc=9, nvlink=(NO_DRIVER + "\n\n", 9))
    with pytest.raises(ParseError) as caught:
        parse_gpu_probe(text)
    assert (caught.value.tool, caught.value.reason) == ("nvidia-smi", f"exit 9: {NO_DRIVER}")
    assert caught.value.excerpt == NO_DRIVER + "\n\n"


@pytest.mark.parametrize(
    "text, tool, reason",
    [
        ("Segmentation fault\n", "gpu probe", "neither NVML JSON nor the nvidia-smi fallback"),
        ("", "gpu probe", "neither NVML JSON nor the nvidia-smi fallback"),
        ('{"schema": 1, "gpus": [', "nvml probe", None),
        (
            "nodecheck-nvml-unavailable: python3 not found\n",
            "nvidia-smi --query-gpu",
            "probe output has no 'query-gpu' section",
        ),
        (
            fallback_stdout(query_gpu="sh: 1: nvidia-smi: not found\n", query_rc=127),
            "nvidia-smi",
            "exit 127: sh: 1: nvidia-smi: not found",
        ),
    ],
    ids=["garbage", "empty", "cut-json", "no-sections", "no-nvidia-smi"],
)
def test_parse_unreadable_output_raises(text, tool, reason):
    with pytest.raises(ParseError) as caught:
        parse_gpu_probe(text)
    assert caught.value.tool == tool
    if reason is not None:
        assert caught.value.reason == reason
    else:
        assert caught.value.reason.startswith("not JSON: ")


def _planned(name: str, **params) -> PlannedCheck:
    spec = all_checks()[name]
    model = spec.params.model_validate(params)
    return PlannedCheck(spec, model, spec.probes_for(model))


@pytest.mark.parametrize("name, params", [("gpu.count", {"expect": 8}), ("gpu.health", {}), ("gpu.processes", {})])
def test_runner_turns_nvidia_smis_failure_into_an_error_with_its_words(name, params):
    text = fallback_stdout(query_gpu=NO_DRIVER + "\n\n", query_rc=9)
    [result] = judge_node(_planned(name, **params), "node001", {("node001", "gpu"): captures(GPU, text)["gpu"]})
    assert (result.check, result.nodes, result.verdict.status) == (name, ("node001",), ERROR)
    assert result.verdict.message == f"cannot read nvidia-smi output: exit 9: {NO_DRIVER}"
    assert result.verdict.excerpt == NO_DRIVER + "\n\n"
    assert [(e.probe, e.exit_code, e.capture_path) for e in result.evidence] == [("gpu", 0, "captures/node001/gpu.txt")]


def test_runner_turns_garbage_into_an_error():
    [result] = judge_node(
        _planned("gpu.health"), "node001", {("node001", "gpu"): captures(GPU, "Segmentation fault\n")["gpu"]}
    )
    assert (result.verdict.status, result.verdict.message, result.verdict.excerpt) == (
        ERROR,
        "cannot read gpu probe output: neither NVML JSON nor the nvidia-smi fallback",
        "Segmentation fault\n",
    )


# -- gpu.driver / cuda.version across nodes ---------------------------------------------------------


def test_driver_and_cuda_versions_compared_across_nodes(tmp_path):
    nvml = nvml_stdout(HEALTHY)
    by_node = {n: captures(GPU, nvml, node=n) for n in ("node1", "node2")}
    by_node["node3"] = captures(GPU, fallback_stdout(), node="node3")
    driver = list(all_checks()["gpu.driver"].judge(by_node, PinOrDrift()))
    assert [(nodes, v.status, v.message) for nodes, v in driver] == [
        (("node1", "node2"), PASS, "NVIDIA driver 550.90.07 (majority: 2 of 3 nodes)"),
        (("node3",), FAIL, "NVIDIA driver 535.104.05 on node3, expected 550.90.07 (2 nodes)"),
    ]
    cuda = list(all_checks()["cuda.version"].judge(by_node, PinOrDrift(expect="12.4")))
    assert [(nodes, v.status, v.message) for nodes, v in cuda] == [
        (("node3",), ERROR, "cannot read gpu probe output: nvidia-smi did not report the CUDA driver version"),
        (("node1", "node2"), PASS, "CUDA driver API 12.4 (pinned; 2 nodes)"),
    ]


# -- the probe itself ---------------------------------------------------------------------------------


def test_gpu_probe_sends_the_nvml_script_on_stdin_and_falls_back_in_its_argv():
    assert GPU.argv == ("sh", "-c", GPU_SCRIPT, "nodecheck-gpu")
    assert GPU.stdin == PROBE_SCRIPT.read_text()
    assert GPU.local_call == "nodecheck.probes.local:nvml"
    assert "python3 -" in GPU_SCRIPT and 'echo "nodecheck-nvml-unavailable: python3 not found"' in GPU_SCRIPT
    for name, params in (
        ("gpu.count", {"expect": 8}),
        ("gpu.health", {}),
        ("gpu.processes", {}),
        ("gpu.driver", {}),
        ("cuda.version", {}),
    ):
        assert _planned(name, **params).probes == (GPU,)


def test_process_fixture_is_what_the_facts_say(tmp_path):
    facts = parse_gpu_probe(nvml_stdout(LEFTOVER))
    assert facts.gpus[5].processes == (GpuProcess(48213, process_name(48213, "python3"), 40960.0),)


def test_health_one_link_down_with_expected_nvlinks_is_one_verdict_not_two(tmp_path):
    out = nvml_out(tmp_path, _nvlink_down)
    verdicts = [v for v in gpu_health(out, GpuHealth(expected_nvlinks=18)) if v.status is not PASS]
    assert [(v.subject, v.message) for v in verdicts] == [("GPU2", "GPU2: 17 NVLinks active, expected 18 (down: 5)")]


def test_health_links_missing_entirely_fail_on_the_count(tmp_path):
    def fewer(state):
        state["gpus"][4]["nvlink_states"] = [1] * 12

    out = nvml_out(tmp_path, fewer)
    verdicts = [v for v in gpu_health(out, GpuHealth(expected_nvlinks=18)) if v.status is not PASS]
    assert [(v.status, v.message) for v in verdicts] == [(FAIL, "GPU4: 12 NVLinks active, expected 18")]


def test_pcie_with_the_idle_state_unknown_judges_neither_gen_nor_width_as_a_fault():
    from nodecheck.checks.gpu import _pcie
    from nodecheck.parsers.gpu import Gpu

    low_gen = Gpu(index=2, pcie_gen_current=1, pcie_gen_max=5, pcie_width_current=16, pcie_width_max=16)
    assert [(v.status, v.message) for v in _pcie(low_gen, GpuHealth())] == [
        (PASS, "PCIe gen1 x16 (max gen5; idle state unknown: gen not judged)")
    ]
    narrow = Gpu(index=2, pcie_gen_current=5, pcie_gen_max=5, pcie_width_current=8, pcie_width_max=16)
    assert [(v.status, v.message) for v in _pcie(narrow, GpuHealth())] == [
        (WARN, "GPU2: PCIe link x8, expected x16 (idle state unknown); re-check under load")
    ]


@pytest.mark.parametrize(
    "name, ignored",
    [
        ("/usr/bin/dcgm-exporter", True),
        ("dcgm-exporter", True),
        ("nv-hostengine-x", False),
        ("nodecheck-long-s", False),
        ("nodecheck-long-", True),
        ("python3", False),
    ],
)
def test_processes_ignore_matches_paths_and_truncated_comm_names(name, ignored):
    from nodecheck.checks.gpu import _ignored

    assert _ignored(name, ["dcgm-exporter", "nodecheck-long-sleeper"]) is ignored


def test_nvlink_on_pcie_bridges_is_judged_by_the_expected_count():
    # the HPE DL380a H100 PCIe recording: 18 links listed, 12 wired (4, 5, 10, 11, 16, 17 inactive)
    from nodecheck.checks.gpu import _nvlink
    from nodecheck.parsers.gpu import Gpu
    from nodecheck.parsers.nvidia_smi_nvlink import parse_nvlink_status

    links = parse_nvlink_status(data(NVLINK_S))
    gpu0 = Gpu(index=0, nvlinks=links[0])
    assert [(v.status, v.message) for v in _nvlink(gpu0, GpuHealth(expected_nvlinks=12))] == [
        (PASS, "12 NVLinks active")
    ]
    assert [(v.status, v.message) for v in _nvlink(gpu0, GpuHealth(expected_nvlinks=18))] == [
        (FAIL, "GPU0: 12 NVLinks active, expected 18 (down: 4, 5, 10, 11, 16, 17)")
    ]


def test_require_is_met_only_by_facts_complete_enough_to_judge():
    from nodecheck.checks.gpu import _reported
    from nodecheck.parsers.gpu import Gpu, NvLink, RemappedRows

    assert not _reported(Gpu(index=0, remapped_rows=RemappedRows(0, 0, None, False)), "remapped_rows")
    assert _reported(Gpu(index=0, remapped_rows=RemappedRows(0, 0, False, False)), "remapped_rows")
    assert not _reported(Gpu(index=0, pcie_width_current=16, pcie_gen_current=5, pcie_gen_max=5), "pcie_width_current")
    assert not _reported(Gpu(index=0, nvlinks=(NvLink(0, True), NvLink(1, None))), "nvlinks")
    # with ECC off there are no counts to report; ecc_mode judges that, not require
    assert _reported(Gpu(index=0, ecc_enabled=False), "ecc_uncorrectable_volatile")
    assert not _reported(Gpu(index=0, ecc_enabled=None), "ecc_uncorrectable_volatile")


def test_ecc_disabled_is_judged_by_ecc_mode_not_an_error(tmp_path):
    def ecc_off(state):
        state["gpus"][5]["ecc_mode"] = [0, 0]
        state["gpus"][5].setdefault("not_supported", []).append("nvmlDeviceGetTotalEccErrors")

    verdicts = [v for v in health(nvml_out(tmp_path, ecc_off)) if v.status is not PASS]
    assert [(v.status, v.message) for v in verdicts] == [(WARN, "GPU5: ECC disabled, expected enabled")]
    assert [v.status for v in health(nvml_out(tmp_path, ecc_off), ecc_mode="off") if v.subject == "GPU5"] == [PASS]


# -- issue 17: nvidia-smi's "No devices were found"; -q lines holding a splitlines break ----------------

NO_DEVICES = "No devices were found\n"


@pytest.mark.parametrize("rc", [6, 0], ids=["exit-6", "exit-0"])
def test_nvidia_smi_no_devices_fails_count_naming_what_is_missing(rc):
    # nvidia-smi exits 6 (NVML_ERROR_NOT_FOUND) with this line where the driver sees no GPU
    out = captures(GPU, fallback_stdout(query_gpu=NO_DEVICES, query_rc=rc, q=(NO_DEVICES, rc), nvlink=(NO_DEVICES, rc)))
    [verdict] = gpu_count(out, GpuCount(expect=8))
    assert (verdict.status, verdict.message) == (FAIL, "no GPU found (nvidia-smi: No devices were found), expected 8")
    assert verdict.expected == {"gpus": 8}
    [verdict] = gpu_count(out, GpuCount(expect=0))
    assert (verdict.status, verdict.message) == (PASS, "no GPU found (nvidia-smi: No devices were found), expected 0")
    assert [(v.status, v.message) for v in health(out)] == [
        (FAIL, "no GPU found (nvidia-smi: No devices were found); gpu.health expects GPUs on this node")
    ]


def test_nvidia_smi_other_failures_stay_errors():
    # not "no GPU": the driver could not be asked; that is unreadable, not a fact about the GPUs
    text = fallback_stdout(query_gpu=NO_DRIVER + "\n", query_rc=9)
    with pytest.raises(ParseError):
        gpu_count(captures(GPU, text), GpuCount(expect=8)).__next__()
    with pytest.raises(ParseError):
        parse_gpu_probe(fallback_stdout(query_gpu=NO_DEVICES, query_rc=9))


@pytest.mark.parametrize("breaker", ["\x0c", "\x1c", "\x85", "\u2028"], ids=ascii)
def test_health_in_fallback_mode_reads_a_q_line_holding_a_splitlines_break(breaker):
    # a form feed (or \x1c, \x85, U+2028) before the ":" of a -q line: str.splitlines cut it into a
    # line starting with ":", and parse_q raised TypeError from gpu.health
    from tests.parsers.test_nvidia_smi import Q_H100

    q = Q_H100.replace(
        "    Product Name                          : NVIDIA H100 PCIe",
        f"    Product Name{breaker}: NVIDIA H100 PCIe",
        1,
    )
    facts = parse_gpu_probe(fallback_stdout(q=(q, 0)))
    assert [g.name for g in facts.gpus] == ["NVIDIA H100 PCIe", "NVIDIA H100 PCIe"]
    # judged exactly as the same output without the break (and judged at all: not an empty list)
    judged = [(v.status, v.subject, v.message) for v in health(captures(GPU, fallback_stdout(q=(q, 0))))]
    unbroken = [(v.status, v.subject, v.message) for v in health(captures(GPU, fallback_stdout(q=(Q_H100, 0))))]
    assert judged and judged == unbroken


# -- the fallback's NVLink error counters and clock; gpu.vbios / gpu.gsp_firmware -------------------

NVLINK_E = "nvidia-smi-nvlink/derived-ml-engineering-h100-nvlink-e-links-0-1-17.txt"


def test_gpu_script_fallback_runs_and_reads_counters_and_clock(tmp_path):
    """GPU_SCRIPT itself under sh: python3 says NVML is unavailable, a stand-in nvidia-smi prints
    recordings; the sections it writes read as counters on the links, and the node's clock."""
    if not os.access("/bin/sh", os.X_OK):
        pytest.skip("no /bin/sh")
    (tmp_path / "python3").write_text(
        "#!/bin/sh\ncat >/dev/null\necho 'nodecheck-nvml-unavailable: no pynvml'\nexit 3\n"
    )
    outputs = {"--query-gpu": H100_CSV, "-q": "", "-s": data(NVLINK_S)}
    errors = data(NVLINK_E)
    outputs["-e"] = errors + errors.replace("GPU 0:", "GPU 1:").replace(
        "Link 17: CRC Errors: 0", "Link 17: CRC Errors: 9"
    )
    for flag, text in outputs.items():
        (tmp_path / f"out{flag}").write_text(text)
    (tmp_path / "nvidia-smi").write_text(
        "#!/bin/sh\n"
        f'd="{tmp_path}"\n'
        'case "$*" in\n'
        '  --query-gpu=*) cat "$d/out--query-gpu" ;;\n'
        "  --query-compute-apps=*) : ;;\n"
        "  -q) exit 2 ;;\n"
        '  "nvlink -s") cat "$d/out-s" ;;\n'
        '  "nvlink -e") cat "$d/out-e" ;;\n'
        "  *) exit 9 ;;\n"
        "esac\n"
    )
    for name in ("python3", "nvidia-smi"):
        (tmp_path / name).chmod(0o755)
    result = subprocess.run(
        ["sh", "-c", GPU_SCRIPT, "nodecheck-gpu"],
        input="",
        capture_output=True,
        text=True,
        env={"PATH": f"{tmp_path}:/usr/bin:/bin"},
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    facts = parse_gpu_probe(result.stdout)
    assert facts.source == "nvidia-smi" and "no pynvml" in facts.source_note
    with open("/proc/sys/kernel/random/boot_id") as f:
        assert facts.boot_id == f.read().strip()
    assert facts.clock is not None and facts.uptime_s is not None and facts.uptime_s > 0
    zero = (("replay", 0), ("recovery", 0), ("crc_flit", 0))
    links1 = facts.gpus[1].nvlinks
    assert links1 is not None
    by_link = {link.link: link.errors for link in links1}
    # -s lists 18 links; -e (the derived recording) only 0, 1 and 17: the rest stay unread
    assert by_link[0] == by_link[1] == zero and by_link[5] is None
    assert by_link[17] == (("replay", 0), ("recovery", 0), ("crc_flit", 9))


def test_fallback_without_the_new_sections_reads_as_before():
    facts = parse_gpu_probe(fallback_stdout())
    assert (facts.clock, facts.uptime_s, facts.boot_id) == (None, None, None)
    assert all(link.errors is None for gpu in facts.gpus for link in gpu.nvlinks or ())


@pytest.mark.parametrize(
    "clock, uptime, boot_id, expected",
    [
        (
            "1796190253.123456789\n",
            "27718.20 55000.01\n",
            "dda7b88b-2fbb-4708-a635-68e2e354ae4c\n",
            (1796190253.123456789, 27718.2, "dda7b88b-2fbb-4708-a635-68e2e354ae4c"),
        ),
        ("1796190253.%N\n", "garbage\n", "not-a-boot-id\n", (1796190253.0, None, None)),  # busybox date
        ("yesterday\n", "", "", (None, None, None)),
    ],
)
def test_fallback_clock_sections(clock, uptime, boot_id, expected):
    def section(name: str, text: str) -> str:
        return f"@@nodecheck begin {name}\n{text}@@nodecheck end {name} rc=0\n"

    text = fallback_stdout() + section("clock", clock) + section("uptime", uptime) + section("boot-id", boot_id)
    facts = parse_gpu_probe(text)
    assert (facts.clock, facts.uptime_s, facts.boot_id) == expected


def _vbios_nodes(tmp_path: Path, changes: dict[str, Callable[[dict], object] | None]) -> dict:
    by_node = {}
    for node, change in changes.items():
        (tmp_path / node).mkdir()
        by_node[node] = captures(GPU, nvml_stdout(write_state(tmp_path / node, change)), node=node)
    return by_node


def test_vbios_and_gsp_agree_across_nodes_and_pins(tmp_path):
    by_node = _vbios_nodes(tmp_path, {"node1": None, "node2": None})
    vbios = list(all_checks()["gpu.vbios"].judge(by_node, PinOrDrift(expect="96.00.99.00.01")))
    assert [(nodes, v.status, v.message) for nodes, v in vbios] == [
        (("node1", "node2"), PASS, "GPU VBIOS 96.00.99.00.01 (pinned; 2 nodes)")
    ]
    gsp = list(all_checks()["gpu.gsp_firmware"].judge(by_node, PinOrDrift()))
    assert [(nodes, v.status, v.message) for nodes, v in gsp] == [
        (("node1", "node2"), PASS, "GPU GSP firmware 550.90.07 (all 2 nodes agree)")
    ]


def test_one_gpu_flashed_apart_from_its_peers_fails_its_node(tmp_path):
    by_node = _vbios_nodes(tmp_path, {"node1": None, "node2": None, "node3": gpu(7, vbios="96.00.74.00.01")})
    vbios = list(all_checks()["gpu.vbios"].judge(by_node, PinOrDrift()))
    assert [(nodes, v.status, v.message) for nodes, v in vbios] == [
        (("node1", "node2"), PASS, "GPU VBIOS 96.00.99.00.01 (majority: 2 of 3 nodes)"),
        (
            ("node3",),
            FAIL,
            "GPU VBIOS 96.00.74.00.01 (GPU7) + 96.00.99.00.01 (GPU0, GPU1, GPU2, GPU3, GPU4, GPU5, GPU6) on node3, "
            "expected 96.00.99.00.01 (2 nodes)",
        ),
    ]


def test_gsp_not_in_use_on_one_gpu_is_drift_a_failed_read_is_an_error_and_other_models_are_named(tmp_path):
    by_node = _vbios_nodes(
        tmp_path,
        {
            "node1": gpu(3, gsp_firmware=None),  # NotSupported: this GPU runs without GSP firmware
            "node2": gpu(0, name="NVIDIA H100 NVL", vbios="96.00.30.00.01"),
            "node3": gpu(5, errors={"nvmlDeviceGetGspFirmwareVersion": "Unknown"}),
        },
    )
    gsp = list(all_checks()["gpu.gsp_firmware"].judge(by_node, PinOrDrift(expect="550.90.07")))
    assert [(nodes, v.status, v.message) for nodes, v in gsp] == [
        (("node3",), ERROR, "cannot read gpu probe output: NVML did not report the GSP firmware version of GPU5"),
        (
            ("node1",),
            FAIL,
            "GPU GSP firmware no GSP firmware in use (GPU3) + 550.90.07 (GPU0, GPU1, GPU2, GPU4, GPU5, GPU6, GPU7) "
            "on node1, expected 550.90.07 (pinned; 1 node)",
        ),
        (("node2",), PASS, "GPU GSP firmware 550.90.07 (pinned; 1 node)"),
    ]
    vbios = list(all_checks()["gpu.vbios"].judge({"node2": by_node["node2"]}, PinOrDrift()))
    assert [v.message for _, v in vbios] == [
        "GPU VBIOS NVIDIA H100 80GB HBM3: 96.00.99.00.01; NVIDIA H100 NVL: 96.00.30.00.01 "
        "(the only node judged; nothing to compare with)"
    ]


def test_vbios_on_a_node_without_gpus_is_absent():
    text = fallback_stdout(query_gpu="No devices were found\n", query_rc=6)
    by_node = {"node1": captures(GPU, text, node="node1")}
    vbios = list(all_checks()["gpu.vbios"].judge(by_node, PinOrDrift()))
    assert [(v.status, v.message) for _, v in vbios] == [
        (
            FAIL,
            "no GPU found (nvidia-smi: No devices were found): no VBIOS version to compare",
        )
    ]
