"""The harness's remediation targets (issue 33), against the real Slurm 22.05 and the fake NVML: a
RebootProgram that "reboots" a simulated node (tests/harness/slurm_reboot.sh: its slurmd restarts with
-b), and nvidia-smi resetting a GPU in the node's nvml_state.json (tests/fakes/nvidia_smi.py). What
these tests measure is written down in tests/harness/README.md, "Reboot": nodecheck relies on it."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from harness.cluster import HarnessError
from harness.scenarios import NVML_HEALTHY, NVML_REMAP_PENDING, GpuReset, Nvml, apply, remedy_gpu_node
from harness.sim.common import HARNESS, alive
from integration.runs import results, run_checks

NODES = ["node1", "node2", "node3", "node4"]
RESUME_TIMEOUT = 20  # s; a reboot that never completes is DOWN within RESUME_TIMEOUT + 30 s (Slurm's check)
GPU3_PENDING = "GPU3: row remap pending (correctable 0, uncorrectable 4); reset the GPU before the next job"
GPU_HEALTH = "  gpu.health: {expected_nvlinks: 18, power_limit_w: {fail_below: 700}}\n"
BUS_ID_GPU3 = "00000000:5D:00.0"


@pytest.fixture(scope="module")
def slurm_module(cluster):
    yield cluster
    cluster.slurm_down()


@pytest.fixture
def slurm(slurm_module):
    """Slurm with the harness's RebootProgram on node1-4, every node idle and undrained."""
    slurm_module.slurm_up(NODES, reboot_program=True, resume_timeout=RESUME_TIMEOUT)
    slurm_module.slurm_reset()
    return slurm_module


def _states_until(slurm, node: str, done: Callable[[dict], bool], timeout: float = 60) -> list[tuple[str, str]]:
    """Every distinct (State, Reason) the node showed, polled until done(node); the last one is done's."""
    seen: list[tuple[str, str]] = []
    deadline = time.monotonic() + timeout
    while True:
        n = slurm.node(node)
        if not seen or seen[-1] != (n["State"], n["ReasonText"]):
            seen.append((n["State"], n["ReasonText"]))
        if done(n):
            return seen
        if time.monotonic() > deadline:
            raise AssertionError(f"{node} not done after {timeout} s; states seen: {seen}\n{slurm.slurm_logs()}")
        time.sleep(0.1)


def _slurmd_pid(slurm, node: str) -> int:
    return int((slurm.slurm_dir / f"slurmd-{node}.pid").read_text())


def test_reboot_of_a_drained_node_runs_the_reboot_program_and_the_node_comes_back_drained(slurm):
    reason = "nodecheck: gpu.health GPU3 row remap pending"
    slurm.drain("node2", reason)
    before, pid, done = slurm.node("node2"), _slurmd_pid(slurm, "node2"), len(slurm.reboots("node2"))

    started = time.monotonic()
    assert slurm.scontrol("reboot", "node2") == ""
    seen = _states_until(slurm, "node2", lambda n: len(slurm.reboots("node2")) > done and n["State"] == "IDLE+DRAIN")
    took = time.monotonic() - started

    # slurmctld set REBOOT_ISSUED (and DOWN) and appended " : reboot issued" before it sent the request:
    # the RebootProgram saw that, and the node keeps the appended reason once back
    [reboot] = slurm.reboots("node2")[done:]
    assert reboot["State"] == "DOWN+DRAIN+REBOOT_ISSUED"
    assert re.fullmatch(re.escape(f"{reason} : reboot issued") + r" \[root@[0-9T:-]+\]", reboot["Reason"])
    after = slurm.node("node2")
    assert (after["State"], after["ReasonText"], after["ReasonUser"]) == (
        "IDLE+DRAIN",
        f"{reason} : reboot issued",
        "root",
    )
    # the states polled on the way, in Slurm's order (a short one may fall between two polls)
    order = ["IDLE+DRAIN+REBOOT_REQUESTED", "DOWN+DRAIN+REBOOT_ISSUED", "IDLE+DRAIN"]
    assert [s for s, _ in seen] == [s for s in order if s in {s for s, _ in seen}] and seen[-1][0] == "IDLE+DRAIN"
    # a new slurmd, whose boot time is its start: the "reboot"
    assert _slurmd_pid(slurm, "node2") != pid
    assert after["BootTime"] > before["BootTime"] and after["BootTime"] == after["SlurmdStartTime"]
    print(f"\nreboot of a drained node: {took:.2f} s; states {seen}")


def test_reboot_asap_nextstate_resume_of_an_idle_node_returns_it_idle_without_reason(slurm):
    done = len(slurm.reboots("node3"))
    started = time.monotonic()
    slurm.scontrol("reboot", "ASAP", "nextstate=RESUME", "reason=nodecheck: reboot for GPU3", "node3")
    seen = _states_until(slurm, "node3", lambda n: len(slurm.reboots("node3")) > done and n["State"] == "IDLE")
    took = time.monotonic() - started

    [reboot] = slurm.reboots("node3")[done:]
    assert reboot["State"] == "DOWN+DRAIN+REBOOT_ISSUED"  # ASAP drains the node until the reboot is done
    assert reboot["Reason"].startswith("nodecheck: reboot for GPU3 : reboot issued [root@")
    after = slurm.node("node3")
    assert (after["State"], after["Reason"]) == ("IDLE", "")
    order = ["IDLE+DRAIN+REBOOT_REQUESTED", "DOWN+DRAIN+REBOOT_ISSUED", "IDLE"]
    assert [s for s, _ in seen] == [s for s in order if s in {s for s, _ in seen}]
    print(f"\nreboot ASAP nextstate=RESUME: {took:.2f} s; states {seen}")


def test_reboot_asap_waits_for_the_running_job_and_can_be_cancelled_until_issued(slurm):
    done = len(slurm.reboots("node1"))
    job = slurm.sbatch("-w", "node1", wrap="sleep 300")
    slurm.wait_job(job, {"RUNNING"})

    slurm.scontrol("reboot", "ASAP", "nextstate=RESUME", "reason=nodecheck: first", "node1")
    busy = slurm.node("node1")
    assert (busy["State"], busy["ReasonText"]) == ("MIXED+DRAIN+REBOOT_REQUESTED", "nodecheck: first")
    assert slurm.scontrol("cancel_reboot", "node1") == ""
    cancelled = slurm.node("node1")
    assert (cancelled["State"], cancelled["Reason"]) == ("MIXED", "")  # ASAP's drain undone with it
    assert len(slurm.reboots("node1")) == done

    slurm.scontrol("reboot", "ASAP", "nextstate=RESUME", "reason=nodecheck: second", "node1")
    slurm.slurm_command("scancel", str(job))
    seen = _states_until(slurm, "node1", lambda n: len(slurm.reboots("node1")) > done and n["State"] == "IDLE")
    [reboot] = slurm.reboots("node1")[done:]
    assert reboot["Reason"].startswith("nodecheck: second : reboot issued [")
    assert "MIXED+DRAIN+REBOOT_REQUESTED" in {s for s, _ in seen} or seen[0][0].endswith("DRAIN+REBOOT_REQUESTED")


def test_nextstate_drain_is_refused(slurm):
    r = slurm.slurm_command("scontrol", "reboot", "nextstate=DRAIN", "node4", check=False)
    assert (r.returncode, r.stderr) == (1, "Invalid state: DRAIN\nValid states: DOWN, RESUME\n")
    assert slurm.node("node4")["State"] == "IDLE"


def test_a_node_that_does_not_come_back_is_down_after_resume_timeout(slurm):
    slurm.on_reboot("node4", f"exit {slurm.NODE_STAYS_OFF}")
    done = len(slurm.reboots("node4"))
    started = time.monotonic()
    slurm.scontrol("reboot", "ASAP", "nextstate=RESUME", "reason=nodecheck: Z", "node4")
    slurm.wait_node("node4", lambda n: len(slurm.reboots("node4")) > done, timeout=30)

    # issued: too late to cancel (22.05 says no more than this; slurmctld logs "Invalid node state
    # transition requested for node node4 from=DOWN to=CANCEL_REBOOT")
    r = slurm.slurm_command("scontrol", "cancel_reboot", "node4", check=False)
    assert (r.returncode, r.stderr) == (1, "slurm_update error: Invalid node state specified\n")
    issued = slurm.node("node4")
    assert issued["State"] == "DOWN+DRAIN+REBOOT_ISSUED"
    down = slurm.wait_node("node4", lambda n: n["State"] == "DOWN", timeout=RESUME_TIMEOUT + 60)
    took = time.monotonic() - started
    # the timeout clears DRAIN and REBOOT_ISSUED (the node is DOWN, plain) and appends its own words
    assert down["ReasonText"] == "nodecheck: Z : reboot issued : reboot timed out"
    print(f"\nreboot timed out after {took:.1f} s (ResumeTimeout={RESUME_TIMEOUT}); cancel: {r.stderr.strip()!r}")

    slurm.on_reboot("node4", None)
    slurm.slurm_reset()  # its slurmd started again, the node resumed
    assert slurm.slurm_nodes()["node4"] == "IDLE"


def test_reboot_program_refuses_to_run_outside_a_simulated_node(slurm):
    done = {n: len(slurm.reboots(n)) for n in NODES}
    pids = {n: _slurmd_pid(slurm, n) for n in NODES}
    r = subprocess.run(
        ["/bin/bash", str(HARNESS / "slurm_reboot.sh")],
        env={"PATH": "/usr/bin:/bin", "SLURM_CONF": str(slurm.slurm_conf)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 1 and "not a simulated node's: refusing" in r.stderr, r
    assert {n: len(slurm.reboots(n)) for n in NODES} == done
    assert {n: _slurmd_pid(slurm, n) for n in NODES} == pids and all(alive(p) for p in pids.values())


# ---- the fake GPU reset ---------------------------------------------------------------------------


def _nvml(cluster, node: str) -> dict:
    return json.loads((cluster.node_dir(node) / "py" / "nvml_state.json").read_text())


def _smi(cluster, node: str, *args: str) -> tuple[int, str, str]:
    return cluster.run_on_node(node, ["/usr/local/sbin/nvidia-smi", *args])


def _gpu3_health(cluster, tmp_path, node: str) -> tuple[str, str]:
    """gpu.health's (status, message) for GPU3 of the node (the check judges each GPU)."""
    _, doc, _ = run_checks(cluster, tmp_path, GPU_HEALTH, node)
    [gpu3] = [r for r in results(doc, "gpu.health")[node] if r[1].startswith("GPU3:")]
    return gpu3


def test_gpu_reset_applies_the_pending_remap_and_gpu_health_passes_again(cluster, tmp_path):
    apply(cluster, {"node2": remedy_gpu_node()})
    assert _gpu3_health(cluster, tmp_path, "node2") == ("fail", GPU3_PENDING)
    assert _smi(cluster, "node2", "--query-compute-apps=pid,process_name", "--format=csv,noheader") == (0, "", "")

    assert _smi(cluster, "node2", "-r", "-i", "3") == (0, f"GPU {BUS_ID_GPU3} was successfully reset.\n", "")

    gpus = _nvml(cluster, "node2")["gpus"]
    assert gpus[3]["remapped_rows"] == [0, 4, 0, 0]  # applied: still 4 remapped rows, none pending
    assert [g["remapped_rows"] for i, g in enumerate(gpus) if i != 3] == [[0, 0, 0, 0]] * 7
    assert cluster.nvidia_smi_resets("node2") == ["reset GPU 3: ok"]
    status, message = _gpu3_health(cluster, tmp_path, "node2")
    assert status == "pass" and "no remap pending" in message, message


def test_gpu_reset_of_a_gpu_that_does_not_exist_fails_and_changes_nothing(cluster):
    apply(cluster, {"node2": remedy_gpu_node()})
    before = _nvml(cluster, "node2")
    assert _smi(cluster, "node2", "--gpu-reset", "-i", "8") == (6, "No devices were found\n", "")
    assert _nvml(cluster, "node2") == before
    assert cluster.nvidia_smi_resets("node2") == ["reset GPU 8: no such GPU"]


def test_gpu_reset_refused_while_a_gpu_process_runs(cluster):
    apply(cluster, {"node4": remedy_gpu_node(busy=True)})
    before = _nvml(cluster, "node4")
    rc, out, err = _smi(cluster, "node4", "--query-compute-apps=pid,process_name", "--format=csv,noheader")
    assert (rc, out, err) == (0, "12345, python3\n", "")

    rc, out, err = _smi(cluster, "node4", "-r", "-i", "3")
    assert (rc, out, err) == (
        255,
        f"The following GPUs could not be reset:\n  GPU {BUS_ID_GPU3}: In use by another client\n",
        "",
    )
    assert _nvml(cluster, "node4") == before


def test_a_reset_that_does_not_help_leaves_the_remap_pending_and_a_reboot_applies_it(slurm, tmp_path):
    apply(slurm, {"node3": remedy_gpu_node(reset_helps=False)})
    slurm.remove_tool("node3", "squeue")  # Slurm is up: the node's real squeue answers
    assert _smi(slurm, "node3", "-r", "-i", "3") == (0, f"GPU {BUS_ID_GPU3} was successfully reset.\n", "")
    assert _nvml(slurm, "node3")["gpus"][3]["remapped_rows"] == [0, 4, 1, 0]
    assert _gpu3_health(slurm, tmp_path, "node3") == ("fail", GPU3_PENDING)

    done = len(slurm.reboots("node3"))
    slurm.scontrol("reboot", "ASAP", "nextstate=RESUME", "reason=nodecheck: GPU3 reset did not help", "node3")
    slurm.wait_node("node3", lambda n: len(slurm.reboots("node3")) > done and n["State"] == "IDLE", timeout=60)

    assert _nvml(slurm, "node3")["gpus"][3]["remapped_rows"] == [0, 4, 0, 0]
    assert slurm.nvidia_smi_resets("node3") == ["reset GPU 3: no change", "reboot: every pending remap applied"]
    status, message = _gpu3_health(slurm, tmp_path, "node3")
    assert status == "pass" and "no remap pending" in message, message


def test_gpu_reset_action_needs_the_nvml_state_first(cluster):
    with pytest.raises(HarnessError, match="fake_nvml first"):
        apply(cluster, {"node1": [GpuReset()]})
    apply(cluster, {"node1": [Nvml(NVML_HEALTHY), GpuReset()]})
    assert _smi(cluster, "node1", "-r", "-i", "0")[0] == 0


def test_remap_pending_state_is_the_one_the_scenarios_use():
    assert json.loads(Path(NVML_REMAP_PENDING).read_text())["gpus"][3]["pci_bus_id"] == BUS_ID_GPU3
