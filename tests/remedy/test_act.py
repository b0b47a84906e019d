"""The executor (nodecheck.remedy.act), against an in-process Slurm and node: every step on record,
the re-check just before acting, the idle guard's refusal, the re-proof, holds and reboots."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from nodecheck.app.slurm import drain_reason
from nodecheck.config.remedy import RemedySettings, load_ladders
from nodecheck.core.model import Capture, CheckResult, Node, Outcome, Status, Verdict
from nodecheck.gate.command import GateLog
from nodecheck.parsers.slurm import NodeState, held_for_a_person, parse_show_node, reason_body
from nodecheck.remedy import record
from nodecheck.remedy.act import Executor
from nodecheck.remedy.model import Entry, Failure
from nodecheck.remedy.plan import plan
from nodecheck.report import Report

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=timezone.utc)
REMAP = "GPU3: row remap pending (correctable 0, uncorrectable 4); reset the GPU before the next job"
LADDERS = """\
ladders:
  - name: gpu-row-remap-pending
    check: gpu.health
    when: {remap_pending: true}
    steps: [reset_gpu, reboot, hold]
"""
RESET_OK = (
    "@@nodecheck begin action\nGPU 00000000:3B:00.0 was successfully reset.\nAll done.\n@@nodecheck end action rc=0\n"
)
EVIDENCE = "@@nodecheck begin dmesg\n[  0.000000] Linux version 6.8.0\n@@nodecheck end dmesg rc=0\n"


class FakeSlurm:
    """scontrol's effect, in memory: node states, the calls made, and states to show next."""

    def __init__(self, states: dict[str, tuple[str, str]]) -> None:
        self.states = dict(states)  # node -> (State=, Reason=)
        self.calls: list[tuple] = []
        self.next_reads: list[dict[str, tuple[str, str]]] = []  # states to show on the next reads

    def nodes(self, names=()):
        if self.next_reads:
            self.states.update(self.next_reads.pop(0))
        self.calls.append(("show", tuple(names)))
        return {
            n: NodeState(n, st, frozenset(st.split("+")), reason, "root" if reason else "", "2026-12-07T10:00:00")
            for n, (st, reason) in self.states.items()
            if not names or n in names
        }

    def drain(self, node, reason):
        self.calls.append(("drain", node, reason))
        self.states[node] = ("IDLE+DRAIN", reason)

    def resume(self, node):
        self.calls.append(("resume", node))
        self.states[node] = ("IDLE", "")

    def reboot(self, node, reason):
        self.calls.append(("reboot", node, reason))
        self.states[node] = ("DOWN+DRAIN+REBOOT_ISSUED", reason + " : reboot issued")

    def changes(self) -> list[tuple]:
        return [c for c in self.calls if c[0] != "show"]

    def said(self) -> list[str]:
        """The changes as words: "drain repairing: reset_gpu GPU3", "drain back", "resume", "reboot"."""
        out = []
        for c in self.changes():
            if c[0] == "drain":
                rest = reason_body(c[2]).partition(" ")[2]
                out.append("drain back" if c[2] == OURS else f"drain {rest.split(' (')[0]}")
            else:
                out.append(c[0])
        return out


class FakeNode:
    """The transport: each probe answered by its name's prefix; every probe run is kept."""

    def __init__(self, answers: dict[str, tuple[str, int]]) -> None:
        self.answers = answers
        self.ran: list[tuple[str, tuple[str, ...]]] = []

    def connect(self, node, timeout_s):
        return self

    def run(self, probe, timeout_s):
        self.ran.append((probe.name, probe.argv))
        stdout, code = next(v for k, v in self.answers.items() if probe.name.startswith(k))
        return Capture("node2", probe.name, probe.argv, Outcome.EXITED, code, stdout, "", 0.1)

    def close(self):
        pass


def health_report(status: Status, node: str = "node2") -> Report:
    v = Verdict(status, REMAP if status is Status.FAIL else "GPU3: no remap pending", "GPU3")
    return Report(
        run_id="20261207T120000Z_health",
        playbook="health",
        playbook_path="health.yml",
        playbook_sha256="0" * 64,
        inventory=None,
        started=NOW,
        finished=NOW,
        deadline_s=30,
        complete=True,
        nodes=((node, node),),
        results=(CheckResult("gpu.health", (node,), v),),
    )


class Reprove:
    def __init__(self, *statuses: Status) -> None:
        self.statuses = list(statuses)
        self.calls: list[tuple[str, str]] = []

    def __call__(self, node, started, action):
        self.calls.append((node.name, action))
        return health_report(self.statuses.pop(0)), "/reports/20261207T120100Z_health_node2_reproof"


OURS = drain_reason("gpu.health", REMAP)


@pytest.fixture
def site(tmp_path):
    ladders_file = tmp_path / "ladders.yml"
    ladders_file.write_text(LADDERS)
    return tmp_path, load_ladders(ladders_file, ["gpu.health"])


def failing() -> Failure:
    return Failure("node2", "gpu.health", "GPU3", REMAP, {"remap_pending": True}, "captures/node2/nvml.stdout")


def make(tmp_path, slurm, node, reprove, *, now=NOW, settings=None) -> Executor:
    return Executor(
        slurm=slurm,
        transport=node,
        nodes={"node2": Node("node2", "node2")},
        state_dir=str(tmp_path / "remedy"),
        log=GateLog(str(tmp_path / "gate.log"), "remediate"),
        report=health_report(Status.FAIL),
        report_dir=str(tmp_path / "report"),
        reprove=reprove,
        bug_report_s=0,
        now=lambda: now,
        settings=settings or RemedySettings(),
    )


def planned(tmp_path, ladders, slurm, fs=None, settings=None):
    records = {"node2": record.load(tmp_path / "remedy", "node2")}
    return plan(
        {"node2": fs if fs is not None else [failing()]},
        ["node2"],
        slurm.nodes(),
        records,
        ladders,
        settings or RemedySettings(),
        now=NOW,
    )


def events(tmp_path) -> list[str]:
    return [line.split(" action=")[1].split(" ")[0] for line in (tmp_path / "gate.log").read_text().splitlines()]


def test_a_reset_that_helps_collects_evidence_resets_reproves_and_returns_the_node(site):
    tmp_path, ladders = site
    slurm = FakeSlurm({"node2": ("IDLE+DRAIN", OURS)})
    node = FakeNode({"remedy-evidence": (EVIDENCE, 0), "remedy-reset_gpu": (RESET_OK, 0)})
    reprove = Reprove(Status.PASS)
    (taken,) = make(tmp_path, slurm, node, reprove).carry_out(planned(tmp_path, ladders, slurm))
    assert (taken.what, taken.result) == ("reset_gpu GPU3", "returned")
    assert taken.reproof == "/reports/20261207T120100Z_health_node2_reproof"
    # the evidence first, then the action with the GPU as its argument, behind the idle guard
    assert [name for name, _ in node.ran] == ["remedy-evidence", "remedy-reset_gpu"]
    argv = node.ran[1][1]
    assert argv[-3:] == ("reset_gpu", "3", "120") and "pgrep -x slurmstepd" in argv[2]
    assert reprove.calls == [("node2", "reset_gpu")]
    # marked as under repair (the cluster counts it from Slurm), then resumed
    assert slurm.said() == ["drain repairing: reset_gpu GPU3", "resume"]
    entries = record.load(tmp_path / "remedy", "node2")
    assert [(e.event, e.action, e.target, e.outcome) for e in entries] == [
        ("action", "reset_gpu", "3", "pending"),
        ("action", "reset_gpu", "3", "done"),
        ("returned", "", "", ""),
    ]
    bundle = tmp_path / "report" / "evidence" / "node2"
    assert entries[0].evidence == str(bundle)
    assert (bundle / "dmesg.txt").read_text() == "[  0.000000] Linux version 6.8.0\n"
    assert "captures/node2/nvml.stdout" in (bundle / "manifest.json").read_text()
    assert oct((bundle / "dmesg.txt").stat().st_mode & 0o777) == "0o600"
    assert entries[1].detail == "GPU 00000000:3B:00.0 was successfully reset. All done."
    assert events(tmp_path) == ["evidence", "remedy-done", "resume"]


def test_a_reset_that_does_not_help_leaves_the_node_drained_and_the_next_run_reboots(site):
    tmp_path, ladders = site
    slurm = FakeSlurm({"node2": ("IDLE+DRAIN", OURS)})
    node = FakeNode({"remedy-evidence": (EVIDENCE, 0), "remedy-reset_gpu": (RESET_OK, 0)})
    (taken,) = make(tmp_path, slurm, node, Reprove(Status.FAIL)).carry_out(planned(tmp_path, ladders, slurm))
    assert taken.result == "still-failing" and taken.detail == f"gpu.health fail: {REMAP}"
    assert slurm.said() == ["drain repairing: reset_gpu GPU3", "drain back"]
    slurm.calls.clear()
    # the next run: the second rung, no second evidence bundle
    again = planned(tmp_path, ladders, slurm)
    assert again.nodes[0].action == "reboot"
    node.ran.clear()
    (taken,) = make(tmp_path, slurm, node, Reprove()).carry_out(again)
    assert (taken.what, taken.result) == ("reboot", "pending")
    assert node.ran == []
    assert slurm.said() == ["drain repairing: reboot", "reboot"]
    (_, name, reason) = slurm.changes()[-1]
    assert name == "node2"
    assert reason_body(reason).startswith("gpu.health rebooting: gpu.health GPU3: row remap pending")
    assert record.load(tmp_path / "remedy", "node2")[-1].outcome == "pending"
    # while Slurm reboots it: it waits, and counts against the cluster budget
    during = planned(tmp_path, ladders, slurm)
    assert during.nodes[0].verb == "wait" and during.in_remediation == ("node2",)


def test_after_the_reboot_a_passing_node_is_returned_and_a_failing_one_is_held(site):
    tmp_path, ladders = site
    slurm = FakeSlurm({"node2": ("IDLE+DRAIN", OURS)})
    started = NOW - timedelta(minutes=10)
    record.append(
        tmp_path / "remedy",
        "node2",
        [
            Entry(started, "action", "reset_gpu", "3", "gpu-row-remap-pending", "gpu.health", "done"),
            Entry(started, "action", "reboot", "", "gpu-row-remap-pending", "gpu.health", "pending"),
        ],
    )
    node = FakeNode({})
    # it booted and still fails: the ladder is used up, held for a person
    held = planned(tmp_path, ladders, slurm, settings=RemedySettings(max_actions=5))
    assert held.nodes[0].verb == "hold" and "tried reset_gpu, reboot" in held.nodes[0].why
    # (with the default budget, two actions in 7 days hold it too, saying so)
    assert planned(tmp_path, ladders, slurm).nodes[0].why.startswith("needs a person: remediated 2 times in 7 days")
    (taken,) = make(tmp_path, slurm, node, Reprove()).carry_out(held)
    assert taken.result == "held"
    ((verb, name, reason),) = slurm.changes()
    assert verb == "drain" and held_for_a_person(reason)
    entries = record.load(tmp_path / "remedy", "node2")
    assert [(e.event, e.action, e.outcome) for e in entries[-2:]] == [("action", "reboot", "done"), ("held", "", "")]


def test_a_node_that_passes_after_its_reboot_is_returned(site):
    tmp_path, ladders = site
    slurm = FakeSlurm({"node2": ("IDLE+DRAIN", OURS)})
    record.append(
        tmp_path / "remedy",
        "node2",
        [Entry(NOW - timedelta(minutes=5), "action", "reboot", "", "gpu-row-remap-pending", "gpu.health", "pending")],
    )
    the_plan = planned(tmp_path, ladders, slurm, fs=[])
    assert the_plan.nodes[0].verb == "return"
    executor = make(tmp_path, slurm, FakeNode({}), Reprove())
    executor.report = health_report(Status.PASS)
    (taken,) = executor.carry_out(the_plan)
    assert taken.result == "returned"
    assert slurm.changes() == [("resume", "node2")]
    assert [e.event for e in record.load(tmp_path / "remedy", "node2")][-2:] == ["action", "returned"]


def test_a_failure_an_earlier_reset_answered_is_re_proven_since_that_reset_then_returned(site):
    """The next run after a return sees the same old kernel-log event: the node is re-proven with the
    log windows reaching back to the reset (not judged on the report that saw the old event)."""
    tmp_path, ladders = site
    slurm = FakeSlurm({"node2": ("IDLE+DRAIN", OURS)})
    reset_at = NOW - timedelta(minutes=30)
    record.append(
        tmp_path / "remedy",
        "node2",
        [
            Entry(reset_at, "action", "reset_gpu", "3", "gpu-row-remap-pending", "gpu.health", "done"),
            Entry(reset_at + timedelta(minutes=2), "returned"),
        ],
    )
    old = replace(failing(), observed={"remap_pending": True, "time": (reset_at - timedelta(minutes=5)).isoformat()})
    the_plan = planned(tmp_path, ladders, slurm, fs=[old])
    assert (the_plan.nodes[0].verb, the_plan.nodes[0].since) == ("return", reset_at)
    seen = []

    def reprove(node, started, action):
        seen.append((node.name, started, action))
        return health_report(Status.PASS), "/reports/x_node2_reproof"

    (taken,) = make(tmp_path, slurm, FakeNode({}), reprove).carry_out(the_plan)
    assert seen == [("node2", reset_at, "return")]
    assert taken.result == "returned"
    assert slurm.changes() == [("resume", "node2")]
    assert [e.event for e in record.load(tmp_path / "remedy", "node2")][-1] == "returned"


def test_a_node_that_got_a_job_between_planning_and_acting_is_not_touched(site):
    tmp_path, ladders = site
    slurm = FakeSlurm({"node2": ("IDLE+DRAIN", OURS)})
    the_plan = planned(tmp_path, ladders, slurm)
    assert the_plan.nodes[0].verb == "act"
    slurm.next_reads.append({"node2": ("MIXED+DRAIN", OURS)})
    node = FakeNode({"remedy": ("", 0)})
    (taken,) = make(tmp_path, slurm, node, Reprove()).carry_out(the_plan)
    assert taken.result == "not-taken" and "a job came onto it since the plan (MIXED+DRAIN)" in taken.detail
    assert node.ran == [] and slurm.changes() == []
    assert record.load(tmp_path / "remedy", "node2") == ()


def test_a_node_resumed_by_a_person_meanwhile_is_not_touched(site):
    tmp_path, ladders = site
    slurm = FakeSlurm({"node2": ("IDLE+DRAIN", OURS)})
    the_plan = planned(tmp_path, ladders, slurm)
    slurm.next_reads.append({"node2": ("IDLE", "")})
    node = FakeNode({"remedy": ("", 0)})
    (taken,) = make(tmp_path, slurm, node, Reprove()).carry_out(the_plan)
    assert taken.result == "not-taken" and "no longer drained by nodecheck" in taken.detail
    assert node.ran == []


def test_a_refusal_by_the_idle_guard_does_nothing_and_does_not_use_a_rung(site):
    tmp_path, ladders = site
    slurm = FakeSlurm({"node2": ("IDLE+DRAIN", OURS)})
    busy = "@@nodecheck refuse GPU processes are running: 4242, python\n"
    node = FakeNode({"remedy-evidence": (EVIDENCE, 0), "remedy-reset_gpu": (busy, 0)})
    reprove = Reprove()
    (taken,) = make(tmp_path, slurm, node, reprove).carry_out(planned(tmp_path, ladders, slurm))
    assert taken.result == "refused" and "GPU processes are running: 4242, python" in taken.detail
    assert reprove.calls == [] and slurm.said() == ["drain repairing: reset_gpu GPU3", "drain back"]
    again = planned(tmp_path, ladders, slurm)
    assert (again.nodes[0].action, again.nodes[0].rung) == ("reset_gpu GPU3", (1, 3))


def test_a_failed_reset_is_recorded_and_the_next_run_goes_on_up_the_ladder(site):
    tmp_path, ladders = site
    slurm = FakeSlurm({"node2": ("IDLE+DRAIN", OURS)})
    failed = (
        "@@nodecheck begin action\nGPU 00000000:3B:00.0 is currently in use by another process.\n"
        "@@nodecheck end action rc=255\n"
    )
    node = FakeNode({"remedy-evidence": (EVIDENCE, 0), "remedy-reset_gpu": (failed, 0)})
    (taken,) = make(tmp_path, slurm, node, Reprove()).carry_out(planned(tmp_path, ladders, slurm))
    assert taken.result == "failed"
    assert taken.detail == "exit 255: GPU 00000000:3B:00.0 is currently in use by another process."
    assert planned(tmp_path, ladders, slurm).nodes[0].action == "reboot"


def test_two_nodes_marked_at_the_same_moment_with_room_for_one_the_later_one_steps_back(site):
    """HealthCheckProgram runs on every node at once: each plans alone, and only Slurm is shared."""
    tmp_path, ladders = site
    slurm = FakeSlurm({"node1": ("IDLE+DRAIN", OURS), "node2": ("IDLE+DRAIN", OURS)})
    # node1's own health check marked it a moment ago (the same reason time: the name decides)
    node1_repairing = drain_reason("gpu.health", "repairing: reset_gpu GPU3 (gpu-row-remap-pending, step 1 of 3): x")
    the_plan = planned(tmp_path, ladders, slurm, settings=RemedySettings(max_nodes=1))
    assert the_plan.nodes[0].verb == "act"  # planned before node1 marked itself
    slurm.next_reads.append({"node1": ("IDLE+DRAIN", node1_repairing)})
    node = FakeNode({"remedy": ("", 0)})
    (taken,) = make(tmp_path, slurm, node, Reprove(), settings=RemedySettings(max_nodes=1)).carry_out(the_plan)
    assert taken.result == "not-taken"
    assert taken.detail == "budget: 1 node under repair at once (node1 under way)"
    assert slurm.said() == ["drain repairing: reset_gpu GPU3", "drain back"]
    assert node.ran == [] and record.load(tmp_path / "remedy", "node2") == ()
    # and the planner counts node1 as under way from its reason alone
    assert planned(tmp_path, ladders, slurm, settings=RemedySettings(max_nodes=1)).nodes[0].verb == "wait"


@pytest.mark.parametrize("target", ["3;reboot", "-1", "../x", ""])
def test_a_target_that_is_not_a_gpu_never_reaches_the_node(site, target):
    tmp_path, ladders = site
    slurm = FakeSlurm({"node2": ("IDLE+DRAIN", OURS)})
    the_plan = planned(tmp_path, ladders, slurm)
    p = the_plan.nodes[0]
    import dataclasses

    forged = dataclasses.replace(the_plan, nodes=(dataclasses.replace(p, target=target),))
    node = FakeNode({"remedy-evidence": (EVIDENCE, 0), "remedy": ("", 0)})
    (taken,) = make(tmp_path, slurm, node, Reprove()).carry_out(forged)
    assert taken.result == "not-taken" and "is not an index or a PCI bus id" in taken.detail
    assert all(name != "remedy-reset_gpu" for name, _ in node.ran)


def test_the_scontrol_show_node_fake_parses():
    # the state strings FakeSlurm uses are real Slurm forms
    text = "NodeName=node2 Arch=x86_64\n   State=DOWN+DRAIN+REBOOT_ISSUED ThreadsPerCore=1\n"
    assert parse_show_node(text)["node2"].flags == frozenset({"DOWN", "DRAIN", "REBOOT_ISSUED"})


def test_nothing_in_the_record_dir_is_readable_by_others(site):
    tmp_path, ladders = site
    slurm = FakeSlurm({"node2": ("IDLE+DRAIN", OURS)})
    node = FakeNode({"remedy-evidence": (EVIDENCE, 0), "remedy-reset_gpu": (RESET_OK, 0)})
    make(tmp_path, slurm, node, Reprove(Status.PASS)).carry_out(planned(tmp_path, ladders, slurm))
    assert oct(Path(tmp_path / "remedy").stat().st_mode & 0o777) == "0o700"
    assert oct(Path(tmp_path / "remedy" / "node2.jsonl").stat().st_mode & 0o777) == "0o600"


def test_a_reboot_slurm_refuses_is_recorded_failed_and_the_reason_put_back(site):
    from nodecheck.app.slurm import SlurmError

    tmp_path, ladders = site
    slurm = FakeSlurm({"node2": ("IDLE+DRAIN", OURS)})
    record.append(
        tmp_path / "remedy",
        "node2",
        [Entry(NOW - timedelta(hours=1), "action", "reset_gpu", "3", "gpu-row-remap-pending", "gpu.health", "done")],
    )

    def refuse(node, reason):
        raise SlurmError("scontrol reboot: Access/permission denied")

    slurm.reboot = refuse
    (taken,) = make(tmp_path, slurm, FakeNode({}), Reprove()).carry_out(planned(tmp_path, ladders, slurm))
    assert (taken.what, taken.result) == ("reboot", "failed")
    assert "Access/permission denied" in taken.detail
    assert slurm.said() == ["drain repairing: reboot", "drain back"]
    assert [(e.action, e.outcome) for e in record.load(tmp_path / "remedy", "node2")][-2:] == [
        ("reboot", "pending"),
        ("reboot", "failed"),
    ]


def test_nothing_is_done_when_the_action_cannot_be_put_on_record_first(site):
    tmp_path, ladders = site
    slurm = FakeSlurm({"node2": ("IDLE+DRAIN", OURS)})
    (tmp_path / "remedy").mkdir()
    (tmp_path / "remedy" / "node2.jsonl").symlink_to(tmp_path / "elsewhere")  # refused: never followed
    node = FakeNode({"remedy-evidence": (EVIDENCE, 0), "remedy-reset_gpu": (RESET_OK, 0)})
    the_plan = plan({"node2": [failing()]}, ["node2"], slurm.nodes(), {"node2": ()}, ladders, RemedySettings(), now=NOW)
    (taken,) = make(tmp_path, slurm, node, Reprove()).carry_out(the_plan)
    assert taken.result == "failed"
    assert taken.detail.startswith("its action record cannot be read or written, so nothing was done")
    assert node.ran == [] and slurm.said() == []


def test_a_node_the_executor_cannot_reach_is_not_touched(site):
    tmp_path, ladders = site
    slurm = FakeSlurm({"node2": ("IDLE+DRAIN", OURS)})
    executor = make(tmp_path, slurm, FakeNode({}), Reprove())
    executor.nodes = {}  # a stored report's node the inventory does not name
    (taken,) = executor.carry_out(planned(tmp_path, ladders, slurm))
    assert taken.result == "not-taken" and "not among the inventory's nodes" in taken.detail
    assert slurm.said() == [] and record.load(tmp_path / "remedy", "node2") == ()


def test_the_evidence_bundle_masks_a_secret_a_tool_printed(site):
    tmp_path, ladders = site
    slurm = FakeSlurm({"node2": ("IDLE+DRAIN", OURS)})
    leaky = "@@nodecheck begin dmesg\nsvc started --token=s3cr3tvalue\n@@nodecheck end dmesg rc=0\n"
    node = FakeNode({"remedy-evidence": (leaky, 0), "remedy-reset_gpu": (RESET_OK, 0)})
    make(tmp_path, slurm, node, Reprove(Status.PASS)).carry_out(planned(tmp_path, ladders, slurm))
    text = (tmp_path / "report" / "evidence" / "node2" / "dmesg.txt").read_text()
    assert "s3cr3tvalue" not in text and "svc started --token=" in text
