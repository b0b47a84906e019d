"""The remediation planner (nodecheck.remedy.plan): pure, every safety rule its own test."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from nodecheck.app.slurm import drain_reason
from nodecheck.config.remedy import Ladders, RemedySettings, load_ladders
from nodecheck.parsers.slurm import NodeState
from nodecheck.remedy.model import Entry, Failure
from nodecheck.remedy.plan import plan

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=timezone.utc)
LADDERS_YML = """\
version: 1
ladders:
  - name: gpu-remap-pending
    check: gpu.health
    when: {remap_pending: true}
    steps: [reset_gpu, reboot, hold]
  - name: gpu-remap-failure
    check: gpu.health
    when: {remap_failure: true}
    steps: [hold]
  - name: xid-reset
    check: gpu.xid
    when: {xid: [48, 94, 95]}
    steps: [reset_gpu, reboot, hold]
    again_within_h: 24
  - name: fabric-manager-down
    check: services
    when: {unit: nvidia-fabricmanager.service}
    steps: [{restart_service: nvidia-fabricmanager.service}, reboot, hold]
otherwise: [hold]
"""


@pytest.fixture
def ladders(tmp_path) -> Ladders:
    path = tmp_path / "ladders.yml"
    path.write_text(LADDERS_YML, encoding="utf-8")
    return load_ladders(path, ["gpu.health", "gpu.xid", "services", "kernel.version"])


def remap(node: str, gpu: int = 3) -> Failure:
    return Failure(
        node,
        "gpu.health",
        f"GPU{gpu}",
        f"GPU{gpu}: row remap pending (correctable 0, uncorrectable 1); reset the GPU before the next job",
        {"remap_pending": True, "remap_failure": False},
        f"{node}/nvidia-smi-q.stdout",
    )


def xid48(node: str, pci: str = "0000:3b:00") -> Failure:
    return Failure(node, "gpu.xid", f"PCI:{pci}", f"Xid 48 on PCI:{pci}: double-bit ECC error", {"xid": 48, "pci": pci})


def ours(
    check: str = "gpu.health",
    message: str = "GPU3: row remap pending",
    *,
    flags: str = "IDLE+DRAIN",
    at: str = "2026-12-07T11:00:00",
) -> NodeState:
    words = frozenset(flags.split("+"))
    return NodeState("n", flags, words, drain_reason(check, message), "root", at)


def state(name: str, base: NodeState) -> NodeState:
    return NodeState(name, base.state, base.flags, base.reason, base.reason_user, base.reason_time)


def action(
    hours_ago: float,
    action: str = "reset_gpu",
    target: str = "3",
    ladder: str = "gpu-remap-pending",
    outcome: str = "done",
) -> Entry:
    return Entry(NOW - timedelta(hours=hours_ago), "action", action, target, ladder, "gpu.health", outcome)


def returned(hours_ago: float) -> Entry:
    return Entry(NOW - timedelta(hours=hours_ago), "returned")


def one(fs, st, records=None, ladders_=None, settings=None, **kw):
    node = fs[0].node if fs else "n"
    p = plan(
        {node: fs} if fs else {},
        [node],
        {node: state(node, st)} if st else {},
        {node: records or ()},
        ladders_,
        settings or RemedySettings(),
        now=NOW,
        **kw,
    )
    (only,) = p.nodes
    return only


def test_a_pending_remap_resets_that_gpu_first(ladders):
    p = one([remap("n", 3)], ours(), ladders_=ladders)
    assert (p.verb, p.action, p.target, p.ladder, p.rung) == ("act", "reset_gpu GPU3", "3", "gpu-remap-pending", (1, 3))
    assert "ladder gpu-remap-pending, step 1 of 3" in p.why


def test_after_a_reset_that_did_not_help_the_next_step_is_a_reboot(ladders):
    p = one([remap("n", 3)], ours(), [action(1)], ladders_=ladders)
    assert (p.verb, p.action, p.rung) == ("act", "reboot", (2, 3))


def test_when_the_ladder_is_used_up_the_node_is_held_for_a_person(ladders):
    p = one(
        [remap("n")],
        ours(),
        [action(2), action(1, "reboot", "")],
        ladders_=ladders,
        settings=RemedySettings(max_actions=5),
    )
    assert p.verb == "hold"
    assert p.why.startswith("needs a person: gpu.health GPU3: row remap pending")
    assert "tried reset_gpu, reboot" in p.why


def test_a_new_incident_starts_the_ladder_again_after_the_node_returned(ladders):
    p = one([remap("n")], ours(), [action(100), returned(99)], ladders_=ladders)
    assert (p.verb, p.action) == ("act", "reset_gpu GPU3")


def test_a_remap_failure_is_held_at_once_whatever_else_fails(ladders):
    failed = Failure("n", "gpu.health", "GPU5", "GPU5: row remapping failed; replace the GPU", {"remap_failure": True})
    p = one([remap("n", 3), failed], ours(), ladders_=ladders)
    assert p.verb == "hold"
    assert "GPU5: row remapping failed" in p.why and "GPU3" not in p.why


def test_a_failure_no_ladder_names_is_held(ladders):
    odd = Failure("n", "kernel.version", "", "6.8.0-31-generic, expected 6.8.0-45-generic", {})
    p = one([odd], ours("kernel.version", "6.8.0-31"), ladders_=ladders)
    assert p.verb == "hold"
    assert p.why == "needs a person: kernel.version 6.8.0-31-generic, expected 6.8.0-45-generic (no ladder names it)"


def test_the_service_ladder_restarts_the_unit_the_ladder_names(ladders):
    fm = Failure(
        "n",
        "services",
        "nvidia-fabricmanager.service",
        "nvidia-fabricmanager.service failed",
        {"unit": "nvidia-fabricmanager.service"},
    )
    p = one([fm], ours("services", "nvidia-fabricmanager.service failed"), ladders_=ladders)
    assert (p.verb, p.action, p.target) == (
        "act",
        "restart_service nvidia-fabricmanager.service",
        "nvidia-fabricmanager.service",
    )


def test_a_unit_the_ladders_do_not_name_is_never_restarted(ladders):
    # the unit comes from the node's output: it selects a ladder, it never becomes the unit to restart
    other = Failure(
        "n", "services", "evil;reboot.service", "evil;reboot.service failed", {"unit": "evil;reboot.service"}
    )
    p = one([other], ours("services", "x"), ladders_=ladders)
    assert p.verb == "hold" and p.step is None


def test_the_ladder_with_the_lower_place_in_the_file_acts_first(ladders):
    fm = Failure("n", "services", "nvidia-fabricmanager.service", "down", {"unit": "nvidia-fabricmanager.service"})
    p = one([fm, remap("n", 3)], ours(), ladders_=ladders)
    assert (p.verb, p.ladder) == ("act", "gpu-remap-pending")


def test_reset_gpu_is_skipped_when_the_failure_names_no_gpu(ladders):
    nogpu = Failure("n", "gpu.health", "", "row remap pending on an unnamed GPU", {"remap_pending": True})
    p = one([nogpu], ours(), ladders_=ladders)
    assert (p.verb, p.action, p.rung) == ("act", "reboot", (2, 3))
    assert "skipped reset_gpu (the failure names no GPU)" in p.why


def test_an_xid_gpu_is_named_by_its_pci_address(ladders):
    p = one([xid48("n", "0000:3B:00")], ours("gpu.xid", "Xid 48"), ladders_=ladders)
    assert (p.verb, p.target, p.action) == ("act", "0000:3b:00", "reset_gpu 0000:3b:00")


def test_the_same_gpus_xid_48_twice_in_24_hours_is_held_not_reset_again(ladders):
    earlier = [action(20, "reset_gpu", "0000:3b:00", "xid-reset"), returned(19)]
    p = one([xid48("n")], ours("gpu.xid", "Xid 48"), earlier, ladders_=ladders)
    assert p.verb == "hold"
    assert "again within 24 h of reset_gpu 0000:3b:00 at 2026-12-06 16:00:00Z" in p.why


def logged(f: Failure, hours_ago: float) -> Failure:
    """The failure's kernel-log event logged `hours_ago` (gpu.xid's observed "time")."""
    return replace(f, observed={**f.observed, "time": (NOW - timedelta(hours=hours_ago)).isoformat()})


def test_an_xid_logged_before_the_reset_that_was_re_proven_is_answered_not_held_or_reset_again(ladders):
    """The kernel log keeps the Xid for hours after the reset answered it: the next run sees it again.
    It is that same event, not a second one: re-proven since the reset and returned, never held."""
    earlier = [action(0.6, "reset_gpu", "0000:3b:00", "xid-reset"), returned(0.5)]
    p = one([logged(xid48("n"), 0.7)], ours("gpu.xid", "Xid 48"), earlier, ladders_=ladders)
    assert (p.verb, p.since) == ("return", NOW - timedelta(hours=0.6))
    assert p.why.startswith("answered: gpu.xid Xid 48 on PCI:0000:3b:00: double-bit ECC error: logged before ")
    assert p.why.endswith(
        "reset_gpu 0000:3b:00 at 2026-12-07 11:24:00Z, which was re-proven and returned; re-proving since then"
    )


def test_an_xid_logged_after_the_reset_is_a_second_one_and_held(ladders):
    earlier = [action(0.6, "reset_gpu", "0000:3b:00", "xid-reset"), returned(0.5)]
    p = one([logged(xid48("n"), 0.1)], ours("gpu.xid", "Xid 48"), earlier, ladders_=ladders)
    assert p.verb == "hold"
    assert "again within 24 h of reset_gpu 0000:3b:00" in p.why


def test_an_answered_xid_beside_a_new_failure_leaves_the_new_one_to_its_ladder(ladders):
    earlier = [action(0.6, "reset_gpu", "0000:3b:00", "xid-reset"), returned(0.5)]
    p = one([logged(xid48("n"), 0.7), remap("n")], ours(), earlier, ladders_=ladders)
    assert (p.verb, p.action) == ("act", "reset_gpu GPU3")
    assert [f.check for f in p.failures] == ["gpu.health"]


def test_an_event_time_that_cannot_be_compared_is_never_answered(ladders):
    earlier = [action(0.6, "reset_gpu", "0000:3b:00", "xid-reset"), returned(0.5)]
    naive = replace(xid48("n"), observed={"xid": 48, "time": "2026-12-07T11:00:00"})
    assert one([naive], ours("gpu.xid", "x"), earlier, ladders_=ladders).verb == "hold"
    # no action re-proven before (the gate resumed it alone): nothing answered it
    alone = [returned(0.5)]
    assert one([logged(xid48("n"), 0.7)], ours("gpu.xid", "x"), alone, ladders_=ladders).verb == "act"


def test_the_same_xid_on_another_gpu_or_after_the_window_is_reset(ladders):
    other_gpu = [action(20, "reset_gpu", "0000:86:00", "xid-reset"), returned(19)]
    assert one([xid48("n")], ours("gpu.xid", "x"), other_gpu, ladders_=ladders).verb == "act"
    long_ago = [action(30, "reset_gpu", "0000:3b:00", "xid-reset"), returned(29)]
    assert one([xid48("n")], ours("gpu.xid", "x"), long_ago, ladders_=ladders).verb == "act"


def test_a_node_acted_on_max_actions_times_in_the_window_is_held(ladders):
    two = [action(150, "reboot", ""), returned(149), action(10), returned(9)]
    p = one([remap("n")], ours(), two, ladders_=ladders)
    assert p.verb == "hold"
    assert p.why.startswith("needs a person: remediated 2 times in 7 days")
    # outside the window, they do not count
    old = [action(200, "reboot", ""), returned(199), action(10), returned(9)]
    assert one([remap("n")], ours(), old, ladders_=ladders).verb == "act"


@pytest.mark.parametrize("flags", ["MIXED+DRAIN", "ALLOCATED+DRAIN", "IDLE+COMPLETING+DRAIN"])
def test_a_node_running_a_job_waits(ladders, flags):
    p = one([remap("n")], ours(flags=flags), ladders_=ladders)
    assert p.verb == "wait" and p.why.startswith(f"a job is on it ({flags})")


def test_a_node_rebooting_waits(ladders):
    p = one([remap("n")], ours(flags="IDLE+DRAIN+REBOOT_ISSUED"), ladders_=ladders)
    assert p.verb == "wait" and "reboot is under way" in p.why


def test_an_action_whose_outcome_is_not_in_waits(ladders):
    p = one([remap("n")], ours(), [action(0.1, outcome="pending")], ladders_=ladders)
    assert p.verb == "wait" and "has not finished" in p.why


def test_a_node_not_drained_or_drained_by_someone_else_is_left_alone(ladders):
    idle = NodeState("n", "IDLE", frozenset({"IDLE"}), "")
    assert one([remap("n")], idle, ladders_=ladders).verb == "leave"
    person = NodeState("n", "IDLE+DRAIN", frozenset({"IDLE", "DRAIN"}), "held for RMA", "alice")
    p = one([remap("n")], person, ladders_=ladders)
    assert p.verb == "leave" and "drained by someone else (held for RMA)" in p.why
    # another site's token: not ours either
    p = one([remap("n")], ours(), ladders_=ladders, token="othersite")
    assert p.verb == "leave"


def test_a_node_slurm_does_not_list_is_left_alone(ladders):
    p = one([remap("n")], None, ladders_=ladders)
    assert p.verb == "leave" and p.why.startswith("Slurm does not list this node")


def test_a_node_already_held_stays_held(ladders):
    held = ours("gpu.health", "needs a person: GPU3 row remap pending (tried reset_gpu, reboot)")
    p = one([remap("n")], held, ladders_=ladders)
    assert p.verb == "hold" and p.why.startswith("already held for a person")


def test_a_healthy_node_is_not_remediated(ladders):
    p = one([], ours(), ladders_=ladders)
    assert p.verb == "healthy"


def five(ladders, settings, records=None, states=None, **kw):
    names = [f"node{i}" for i in range(1, 6)]
    base = {n: state(n, ours(at=f"2026-12-07T10:0{9 - i}:00")) for i, n in enumerate(names)}
    return plan(
        {n: [remap(n)] for n in names},
        names,
        {**base, **(states or {})},
        records or {},
        ladders,
        settings,
        now=NOW,
        **kw,
    )


def test_five_nodes_fail_at_once_with_a_budget_of_two_two_act_three_wait(ladders):
    p = five(ladders, RemedySettings(max_nodes=2))
    assert [x.node for x in p.by_verb("act")] == ["node4", "node5"]  # drained longest first
    waiting = p.by_verb("wait")
    assert [x.node for x in waiting] == ["node1", "node2", "node3"]
    assert all(x.why == "budget: 2 nodes in remediation at once; next: reset_gpu GPU3" for x in waiting)
    assert [x.node for x in p.nodes] == ["node1", "node2", "node3", "node4", "node5"]  # the order checked


def test_nodes_already_under_way_use_the_budget(ladders):
    rebooting = {
        "node9": NodeState("node9", "IDLE+DRAIN+REBOOT_ISSUED", frozenset({"IDLE", "DRAIN", "REBOOT_ISSUED"}), "x")
    }
    p = five(ladders, RemedySettings(max_nodes=2), states=rebooting)
    assert [x.node for x in p.by_verb("act")] == ["node5"]
    assert p.in_remediation == ("node9",)
    pending = {"node8": (action(0.2, outcome="pending"),)}
    p = five(ladders, RemedySettings(max_nodes=2), records=pending, states=rebooting)
    assert p.by_verb("act") == []
    assert "node8, node9 under way" in p.by_verb("wait")[0].why


def test_max_share_bounds_the_budget_by_the_cluster_and_never_to_zero(ladders):
    p = five(ladders, RemedySettings(max_nodes=10, max_share=0.1), cluster_size=30)
    assert len(p.by_verb("act")) == 3 and p.capacity == 3
    p = five(ladders, RemedySettings(max_nodes=10, max_share=0.01), cluster_size=30)
    assert len(p.by_verb("act")) == 1 and p.capacity == 1


def test_max_share_is_per_partition_each_node_counted_in_every_partition_it_is_in(ladders):
    """Issue 33: "at most K nodes (or P % of a partition) in remediation at once"."""

    def in_parts(name: str, parts: tuple[str, ...], at: str) -> NodeState:
        base = ours(at=at)
        return NodeState(name, base.state, base.flags, base.reason, "root", at, partitions=parts)

    states = {
        "a1": in_parts("a1", ("gpu-a",), "2026-12-07T10:00:01"),
        "a2": in_parts("a2", ("gpu-a",), "2026-12-07T10:00:02"),
        "a3": in_parts("a3", ("gpu-a",), "2026-12-07T10:00:03"),
        "a4": in_parts("a4", ("gpu-a",), "2026-12-07T10:00:04"),
        "b1": in_parts("b1", ("gpu-b", "debug"), "2026-12-07T10:00:05"),
        "b2": in_parts("b2", ("gpu-b", "debug"), "2026-12-07T10:00:06"),
        "b3": in_parts("b3", ("gpu-b",), "2026-12-07T10:00:07"),
        "b4": in_parts("b4", ("gpu-b",), "2026-12-07T10:00:08"),
    }
    names = list(states)
    p = plan(
        {n: [remap(n)] for n in names},
        names,
        states,
        {},
        ladders,
        RemedySettings(max_nodes=10, max_share=0.25),
        now=NOW,
        cluster_size=8,
    )
    # a quarter of each 4-node partition: one node each, the one drained longest
    assert [x.node for x in p.by_verb("act")] == ["a1", "b1"]
    waiting = {x.node: x.why for x in p.by_verb("wait")}
    assert waiting["a2"].startswith("budget: 1 of partition gpu-a's 4 nodes (25%) in remediation at once (a1)")
    assert waiting["b2"].startswith("budget: 1 of partition gpu-b's 4 nodes (25%) in remediation at once (b1)")
    # max_nodes still bounds the whole cluster
    p = plan(
        {n: [remap(n)] for n in names},
        names,
        states,
        {},
        ladders,
        RemedySettings(max_nodes=1, max_share=0.5),
        now=NOW,
        cluster_size=8,
    )
    assert [x.node for x in p.by_verb("act")] == ["a1"]
    assert p.of("b1").why.startswith("budget: 1 node in remediation at once")


def test_the_result_line_phrase_says_what_was_or_would_be_done(ladders):
    from nodecheck.remedy.act import Taken
    from nodecheck.remedy.repair import summary

    odd = Failure("n2", "kernel.version", "", "6.8.0-31", {})
    states = {"n1": state("n1", ours()), "n2": state("n2", ours("kernel.version", "6.8.0-31"))}
    p = plan({"n1": [remap("n1")], "n2": [odd]}, ["n1", "n2"], states, {}, ladders, RemedySettings(), now=NOW)
    assert summary(p, None) == "repair (observe): would reset_gpu GPU3 on n1; would hold n2"
    assert summary(p, [Taken("n1", "reset_gpu GPU3", "returned")]) == "repair: n1 reset_gpu GPU3 returned"
    assert summary(plan({}, [], {}, {}, ladders, RemedySettings(), now=NOW), None) == "repair (observe): nothing to do"
