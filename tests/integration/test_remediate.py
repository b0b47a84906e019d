"""`nodecheck remediate` against a real Slurm 22.05 and the simulated nodes: the plan for nodes the
gate drained, from checks run now over SSH, and nothing changed (observe)."""

from __future__ import annotations

import json
import os
import re
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml
from harness.scenarios import DATA, DMESG_CLEAN, NVML_REMAP_PENDING, Action, GpuReset, apply, dcgm, gpu_node, node_os
from harness.sim_playbooks import shipped_for_sim
from integration.runs import nodecheck

from nodecheck.app.slurm import is_ours
from nodecheck.fleet.history import History
from nodecheck.parsers.slurm import held_for_a_person, reason_body, reason_mark
from nodecheck.remedy import record
from nodecheck.remedy.model import Entry
from nodecheck.report.diff import CounterRow, SweepSnapshot

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
PROLOG = BIN / "nodecheck-prolog"
ALL = [f"node{i}" for i in range(1, 11)]  # as tests/integration/test_slurm_gate.py: the same Slurm, not restarted
REMAP = "gpu.health GPU3: row remap pending"


def M(body: str) -> str:
    return f"nodecheck[{reason_mark(body)}]: {body}"


@pytest.fixture
def work(tmp_path):
    os.chmod(tmp_path, 0o755)
    return tmp_path


RESUME_TIMEOUT = 60  # s: a simulated reboot takes about 1 s (tests/harness/README.md, "Reboot")


def remedy_node(**reset) -> list:
    """GPU3's row remap pending; DCGM answering (the reset's acceptance level 2); nvidia-smi resetting."""
    return gpu_node(nvml=NVML_REMAP_PENDING) + node_os(real_slurmd=True) + dcgm() + [GpuReset(**reset)]


# A real node's Xid 48 (a DBE in GPU memory; NVIDIA/gpu-operator#1146), moved from that node's GPU at
# 0000:07:00 to GPU3 of the simulated nodes (00000000:5D:00.0 in tests/fakes/nvml_states)
XID48_RECORDED = "dmesg-xid/gpu-operator-1146-syslog-xid48-dbe-framebuffer-one-line.txt"
GPU3_PCI = "0000:5d:00"


def xid48_line(at: datetime) -> str:
    """The recorded Xid 48 as `dmesg --time-format iso` (what the kernel-log probe runs) prints it
    when the kernel logged it at `at`: the recording's syslog date and uptime stamp give way to that."""
    recorded = (DATA / XID48_RECORDED).read_text()
    message = recorded[recorded.index("NVRM: Xid ") :].rstrip("\n").replace("PCI:0000:07:00", f"PCI:{GPU3_PCI}")
    return f"{at.astimezone(timezone.utc):%Y-%m-%dT%H:%M:%S,%f}+00:00 {message}\n"


@dataclass(frozen=True)
class Xid48OnGpu3(Action):
    """dmesg: the clean node's log, then the recorded Xid 48 on GPU3, logged `ago_s` before the layout
    is installed, i.e. as each test starts: inside the health playbook's window (gpu.xid since 1h), and
    before any action the test's health runs take."""

    ago_s: float = 60.0

    def describe(self) -> str:
        return f"dmesg: Xid 48 on GPU3 {self.ago_s:g} s before the layout"

    def install(self, cluster, node: str) -> None:
        logged_at = datetime.now(timezone.utc) - timedelta(seconds=self.ago_s)
        cluster.fake_output(node, "dmesg", (DATA / DMESG_CLEAN).read_text() + xid48_line(logged_at))

    def recordings(self) -> tuple[str, ...]:
        return (DMESG_CLEAN, XID48_RECORDED)


def xid48_node() -> list:
    """GPU3's memory failed (Xid 48) while NVML shows it healthy; DCGM answering; nvidia-smi resetting."""
    return gpu_node() + node_os(real_slurmd=True) + dcgm() + [GpuReset(), Xid48OnGpu3()]


# one layout for the whole file (installing fakes resets the nodes: it must come before Slurm starts)
LAYOUT = {
    "node1": gpu_node() + node_os(real_slurmd=True),  # healthy
    "node2": remedy_node(),  # a reset of GPU3 clears the remap
    "node3": remedy_node(reset_helps=False),  # the reset does not help; a reboot does
    "node4": remedy_node(reset_helps=False, reboot_clears=False),  # nothing helps: a person
    "node5": remedy_node(),
    "node6": remedy_node(),
    "node7": remedy_node(busy=True),  # a GPU process: the idle guard refuses a reset
    "node8": remedy_node(),
    "node9": remedy_node(),
    "node10": xid48_node(),  # an Xid 48 on GPU3: reset; held when it comes back within 24 h
}


@pytest.fixture
def slurm(cluster, work):
    """Slurm on the ten nodes of LAYOUT, with the harness's RebootProgram (the node's slurmd restarts
    as after a boot; its reboot hook applies pending GPU remaps, as a real reboot does)."""
    apply(cluster, LAYOUT)
    cluster.slurm_up(ALL, prolog=PROLOG, reboot_program=True, resume_timeout=RESUME_TIMEOUT)
    cluster.slurm_reset()
    yield cluster
    cluster.slurm_down()


def remediate(slurm, work: Path, *extra: str) -> tuple[int, str, str]:
    config = work / "nodecheck.yml"
    config.write_text(
        yaml.safe_dump({"log_file": str(work / "gate.log"), "remedy": {"state_dir": str(work / "remedy")}})
    )
    code, out, err, _ = nodecheck(
        "remediate",
        str(slurm.inventory_path),
        "--playbook",
        str(shipped_for_sim("health", work)),
        "--config",
        str(config),
        *extra,
        env=slurm.slurm_env(),
    )
    return code, out, err


def states(slurm, nodes) -> dict[str, tuple[str, str]]:
    return {n: (slurm.node(n)["State"], slurm.node(n).get("Reason", "")) for n in nodes}


def row(out: str, node: str) -> list[str]:
    line = next(line for line in out.splitlines() if line.startswith(node + " "))
    return line.split(None, 3)


def test_the_plan_resets_the_gpu_with_a_pending_remap_and_changes_nothing(slurm, work):
    slurm.drain("node2", M(REMAP))  # what the Prolog left
    slurm.drain("node3", "operator: replacing a fan")
    slurm.drain("node4", M(REMAP))
    record.append(
        work / "remedy",
        "node4",
        [Entry(datetime.now(timezone.utc), "action", "reset_gpu", "3", "gpu-row-remap-pending", "gpu.health", "done")],
    )
    before = states(slurm, ALL)
    code, out, err = remediate(slurm, work, "--nodes", "node[1-4]")
    assert code == 0, out + err
    assert row(out, "node2")[1:3] == ["act", "reset_gpu"]
    assert re.search(
        r"^node2 +act +reset_gpu GPU3 +gpu\.health GPU3: row remap pending "
        r".*\(ladder gpu-row-remap-pending, step 1 of 3\)",
        out,
        re.M,
    ), out
    assert row(out, "node3")[1] == "leave" and "drained by someone else (operator: replacing a fan)" in out
    # node4 had its GPU reset in this incident and still fails: the ladder's next step
    assert re.search(r"^node4 +act +reboot +.*\(ladder gpu-row-remap-pending, step 2 of 3\)", out, re.M), out
    assert "healthy (nothing to repair): node1" in out
    assert "observe: nothing was changed" in out
    assert states(slurm, ALL) == before
    assert slurm.nvidia_smi_resets("node2") == []  # nothing reset it
    code, out, err = remediate(slurm, work, "--nodes", "node2", "--json")
    assert code == 0, out + err
    (node2,) = json.loads(out)["nodes"]
    assert (node2["plan"], node2["step"], node2["target"]) == ("act", "reset_gpu GPU3", "3")
    logged = (work / "gate.log").read_text()
    assert (
        'nodecheck[remediate] action=would-remedy node=node2 step="reset_gpu GPU3" ladder="gpu-row-remap-pending"'
        in logged
    )
    assert 'action=would-remedy node=node4 step="reboot"' in logged


# ---- acting: nodecheck health (HealthCheckProgram) and remediate --act ---------------------------------

HEALTH = BIN / "nodecheck-health"
ACCEPTANCE = "version: 1\ndeadline_s: 600\nchecks:\n  gpu.dcgm_diag: {level: 2, test_timeout_s: 60}\n"


def acting_config(slurm, work: Path, **remedy) -> None:
    """nodecheck.yml beside slurm.conf and in the nodes' /etc/slurm: the health playbook, and remedy
    acting, its records and reports under `work` (shared by every node, as shared storage would be)."""
    (work / "accept.yml").write_text(ACCEPTANCE)
    (work / "accept.yml").chmod(0o644)
    config = {
        "output_dir": str(work / "reports"),
        "log_file": str(work / "gate.log"),
        "health": {"playbook": str(shipped_for_sim("health", work))},
        "remedy": {
            "act": True,
            "state_dir": str(work / "remedy"),
            "bug_report_s": 0,
            "reproof_s": 12,  # a re-proof that fails gives up after its second try (RETRY_S 10)
            "acceptance": {"reset_gpu": str(work / "accept.yml")},
            **remedy,
        },
    }
    for folder in (slurm.slurm_conf.parent, slurm.slurm_dir / "etc"):
        (folder / "nodecheck.yml").write_text(yaml.safe_dump(config))


def health_on(slurm, node: str) -> str:
    """nodecheck-health run on the node as slurmd runs its HealthCheckProgram; its result line."""
    rc, out, err = slurm.run_on_node(node, [str(HEALTH)], timeout=240)
    assert rc in (0, 1, 2), out + err
    return out.strip()


def events(work: Path, node: str) -> list[str]:
    lines = (work / "gate.log").read_text().splitlines()
    return [re.search(r" action=(\S+)", line).group(1) for line in lines if f" node={node} " in line]


def chain(work: Path, node: str) -> list[tuple[str, str, str]]:
    return [(e.event, e.action, e.outcome) for e in record.load(work / "remedy", node)]


def test_health_resets_the_gpu_with_a_pending_remap_reproves_and_resumes_the_node(slurm, work):
    acting_config(slurm, work)
    started = time.monotonic()
    slurm.drain("node2", M(REMAP))  # what the Prolog left
    line = health_on(slurm, "node2")
    took = time.monotonic() - started
    assert "repair: node2 reset_gpu GPU3 returned" in line, line
    # resumed (the flag NOT_RESPONDING may linger a moment after the nodes' reset: not ours to judge)
    assert "DRAIN" not in slurm.node("node2")["State"] and slurm.node("node2")["Reason"] == ""
    assert slurm.nvidia_smi_resets("node2") == ["reset GPU 3: ok"]
    assert chain(work, "node2") == [
        ("action", "reset_gpu", "pending"),
        ("action", "reset_gpu", "done"),
        ("returned", "", ""),
    ]
    entries = record.load(work / "remedy", "node2")
    bundle = Path(entries[0].evidence)
    assert (bundle / "dmesg.txt").is_file() and (bundle / "manifest.json").is_file()
    assert oct(bundle.stat().st_mode & 0o777) == "0o700"
    proof = Path(entries[-1].detail.removeprefix("re-proven: "))
    assert proof.name.endswith("_node2_reproof")
    doc = json.loads((proof / "report.json").read_text())
    (node2,) = doc["nodes"]
    statuses = {(r["check"], r["status"]) for r in node2["results"]}
    assert node2["healthy"] and ("gpu.dcgm_diag", "pass") in statuses  # the acceptance level ran
    assert {s for c, s in statuses if c == "gpu.health"} == {"pass"}
    assert events(work, "node2") == ["drain", "evidence", "remedy-done", "resume"]  # the gate drains it anew
    print(f"\nreset path: drain to resume {took:.1f} s (one health run)")


def test_a_reset_that_does_not_help_is_followed_by_a_reboot_through_slurm_then_reproof_and_resume(slurm, work):
    acting_config(slurm, work)
    started = time.monotonic()
    slurm.drain("node3", M(REMAP))
    line = health_on(slurm, "node3")
    assert "repair: node3 reset_gpu GPU3 still-failing" in line, line
    assert _ours_reason(slurm, "node3").startswith("gpu.health GPU3: row remap pending")  # the failure's again
    booted = len(slurm.reboots("node3"))
    line = health_on(slurm, "node3")
    assert "repair: node3 reboot pending" in line, line
    # Slurm reboots it (the RebootProgram), and it comes back drained: nodecheck's reason, Slurm's suffix
    node = slurm.wait_node("node3", lambda n: len(slurm.reboots("node3")) > booted and n["State"] == "IDLE+DRAIN", 90)
    assert node["ReasonText"].endswith(" : reboot issued")
    assert reason_body(node["ReasonText"]).startswith("gpu.health rebooting: gpu.health GPU3: row remap pending")
    # slurmd ran the health check as it started; or this one: the gate resumes it, the record closes
    line = health_on(slurm, "node3")
    slurm.wait_node("node3", lambda n: n["State"] == "IDLE", 30)
    took = time.monotonic() - started
    assert chain(work, "node3") == [
        ("action", "reset_gpu", "pending"),
        ("action", "reset_gpu", "done"),
        ("action", "reboot", "pending"),
        ("action", "reboot", "done"),
        ("returned", "", ""),
    ]
    assert slurm.nvidia_smi_resets("node3")[0] == "reset GPU 3: no change"
    print(f"\nreboot path: drain to resume {took:.1f} s (three health runs, one simulated reboot)")


def test_a_fault_that_survives_the_ladder_is_held_for_a_person_with_its_evidence(slurm, work):
    acting_config(slurm, work, max_actions=3)
    slurm.drain("node4", M(REMAP))
    assert "reset_gpu GPU3 still-failing" in health_on(slurm, "node4")
    booted = len(slurm.reboots("node4"))
    assert "reboot pending" in health_on(slurm, "node4")
    slurm.wait_node("node4", lambda n: len(slurm.reboots("node4")) > booted and n["State"] == "IDLE+DRAIN", 90)
    line = health_on(slurm, "node4")
    assert "repair: node4 hold held" in line, line
    reason = slurm.node("node4")["ReasonText"]
    assert held_for_a_person(reason) and is_ours(reason)
    assert "tried reset_gpu, reboot" in reason_body(reason)
    held = record.load(work / "remedy", "node4")[-1]
    assert held.event == "held" and Path(held.evidence, "manifest.json").is_file()
    hold_line = [line for line in (work / "gate.log").read_text().splitlines() if " action=hold node=node4 " in line]
    assert hold_line and f'evidence="{held.evidence}"' in hold_line[0]
    # and it stays held: the next health run neither acts nor resumes
    resets = len(slurm.nvidia_smi_resets("node4"))
    health_on(slurm, "node4")
    assert held_for_a_person(slurm.node("node4")["ReasonText"])
    assert len(slurm.nvidia_smi_resets("node4")) == resets


def test_five_failing_nodes_with_a_budget_of_two_two_are_repaired_three_wait(slurm, work):
    five = ["node5", "node6", "node8", "node9", "node10"]  # GPU3's row remap pending; node10 its Xid 48
    acting_config(slurm, work, max_nodes=2)
    for n in five:
        slurm.drain(n, M(REMAP))
    config = slurm.slurm_dir / "etc" / "nodecheck.yml"
    code, out, err, _ = nodecheck(
        "remediate",
        str(slurm.inventory_path),
        "--nodes",
        "node[5-6,8-10]",
        "--config",
        str(config),
        "--playbook",
        str(shipped_for_sim("health", work)),
        env=slurm.slurm_env(),
        timeout=400,
    )
    assert code == 0, out + err
    repaired = [n for n in five if slurm.nvidia_smi_resets(n)]
    assert len(repaired) == 2, out
    assert all(re.search(rf"{n}: reset_gpu (GPU3|{GPU3_PCI}): returned", out) for n in repaired), out
    waiting = [n for n in five if n not in repaired]
    assert all(re.search(rf"^{n} +wait +- +budget: 2 nodes in remediation at once", out, re.M) for n in waiting), out
    assert [slurm.node(n)["State"] for n in waiting] == ["IDLE+DRAIN"] * 3
    assert all(record.load(work / "remedy", n) == () for n in waiting)


def test_a_node_with_a_gpu_process_is_not_reset(slurm, work):
    acting_config(slurm, work)
    slurm.drain("node7", M(REMAP))
    line = health_on(slurm, "node7")
    assert "repair: node7 reset_gpu GPU3 refused" in line, line
    assert slurm.nvidia_smi_resets("node7") == []  # the guard stopped it before nvidia-smi -r
    assert chain(work, "node7") == [("action", "reset_gpu", "pending"), ("action", "reset_gpu", "refused")]
    assert _ours_reason(slurm, "node7").startswith("gpu.health GPU3: row remap pending")


def _ours_reason(slurm, node: str) -> str:
    reason = slurm.node(node)["ReasonText"]
    assert is_ours(reason), reason
    return reason_body(reason)


def test_a_sweep_with_drain_repairs_the_node_it_drained_through_the_same_pass(slurm, work):
    acting_config(slurm, work)
    config = slurm.slurm_dir / "etc" / "nodecheck.yml"
    code, out, err, _ = nodecheck(
        "sweep",
        str(slurm.inventory_path),
        "--playbook",
        str(shipped_for_sim("health", work)),
        "--nodes",
        "node8",
        "--drain",
        "--config",
        str(config),
        "--output-dir",
        str(work / "reports"),
        env=slurm.slurm_env(),
        timeout=400,
    )
    assert code == 2, out + err  # the sweep's own verdict: node8 failed when it ran
    assert "gate: node8 drained: gpu.health: GPU3: row remap pending" in out
    assert "repair: node8 reset_gpu GPU3 returned" in out, out
    assert "DRAIN" not in slurm.node("node8")["State"]
    assert slurm.nvidia_smi_resets("node8") == ["reset GPU 3: ok"]
    assert [(e.event, e.outcome) for e in record.load(work / "remedy", "node8")][-1] == ("returned", "")


def kernel_logs(slurm, node: str, line: str) -> None:
    """The node's kernel logs `line`: its dmesg prints what it printed before, then the line."""
    rc, logged, err = slurm.run_on_node(node, ["/usr/local/sbin/dmesg"])
    assert rc == 0 and logged, err
    slurm.fake_output(node, "dmesg", logged + line)


def test_the_same_gpus_xid_48_again_within_24_h_of_its_reset_is_held_not_reset_again(slurm, work):
    acting_config(slurm, work)
    # the health run drains node10 for its Xid 48, resets GPU3, re-proves it (the kernel log since the
    # reset) and resumes it
    line = health_on(slurm, "node10")
    assert f"repair: node10 reset_gpu {GPU3_PCI} returned" in line, line
    assert "DRAIN" not in slurm.node("node10")["State"]
    assert slurm.nvidia_smi_resets("node10") == ["reset GPU 3: ok"]  # nvidia-smi -r -i 0000:5d:00
    assert events(work, "node10") == ["drain", "evidence", "remedy-done", "resume"]
    # the next health run still finds that Xid in the kernel log, but the reset answered it: the
    # node's runs judge its log from the reset on (nodecheck.gate.answered), so it stays in service
    line = health_on(slurm, "node10")
    assert "drain node10" not in line and "repair:" not in line, line
    assert "DRAIN" not in slurm.node("node10")["State"]
    assert events(work, "node10") == ["drain", "evidence", "remedy-done", "resume"]
    # GPU3's memory fails again: the kernel logs another Xid 48 on it
    kernel_logs(slurm, "node10", xid48_line(datetime.now(timezone.utc)))
    line = health_on(slurm, "node10")
    assert "repair: node10 hold held" in line, line
    node = slurm.node("node10")
    assert "DRAIN" in node["State"] and held_for_a_person(node["ReasonText"]) and is_ours(node["ReasonText"])
    held = record.load(work / "remedy", "node10")[-1]
    assert re.fullmatch(
        rf"needs a person: gpu\.xid Xid 48 on PCI:{GPU3_PCI}: .* \(1x, last [^)]*\): again within 24 h of "
        rf"reset_gpu {GPU3_PCI} at [-\d]+ [:\d]+Z \(ladder xid-gpu-memory\)",
        held.detail,
    ), held.detail
    assert slurm.nvidia_smi_resets("node10") == ["reset GPU 3: ok"]  # not reset again
    assert chain(work, "node10") == [
        ("action", "reset_gpu", "pending"),
        ("action", "reset_gpu", "done"),
        ("returned", "", ""),
        ("held", "", ""),
    ]


def test_a_port_whose_link_downed_rose_in_three_sweeps_of_a_day_is_held_not_reset(slurm, work):
    """The sweep's repair pass reads the sweep history: node9's mlx5_0/1 LinkDownedCounter rose in the
    three sweeps of the last day before this one (kept as a sweep keeps them). Its pending row remap
    would be reset, but a flapping link is a person's case (the shipped memory rule ib-link-flapping)."""
    acting_config(slurm, work)
    history = work / "history.sqlite"
    now = datetime.now(timezone.utc)
    with History.open(history) as h:
        for i, value in enumerate([0, 1, 2, 5]):
            started = now - timedelta(hours=8 - 2 * i)
            counters = (CounterRow("node9", "mlx5_0/1", "LinkDownedCounter", value, "boot-1", "perfquery -x"),)
            snap = SweepSnapshot(
                f"past{i}", "health", started, started + timedelta(minutes=1), True, ("node9",), (), (), counters
            )
            h.record(snap, None, "0.6.0")
    code, out, err, _ = nodecheck(
        "sweep",
        str(slurm.inventory_path),
        "--playbook",
        str(shipped_for_sim("health", work)),
        "--nodes",
        "node9",
        "--drain",
        "--config",
        str(slurm.slurm_dir / "etc" / "nodecheck.yml"),
        "--output-dir",
        str(work / "reports"),
        "--history",
        str(history),
        env=slurm.slurm_env(),
        timeout=400,
    )
    assert code == 2, out + err
    assert "gate: node9 drained: gpu.health: GPU3: row remap pending" in out, out
    assert "repair: node9 hold held" in out, out
    node = slurm.node("node9")
    assert "DRAIN" in node["State"] and held_for_a_person(node["ReasonText"]), node
    assert "port mlx5_0/1: LinkDownedCounter rose in 3 sweeps within 24 h" in node["ReasonText"], node
    assert slurm.nvidia_smi_resets("node9") == []  # not reset
    held = record.load(work / "remedy", "node9")[-1]
    assert held.event == "held" and "memory rule ib-link-flapping: 3 or more" in held.detail, held
