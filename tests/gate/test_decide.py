"""nodecheck.gate.decide: drain / resume / breaker / retry decisions on hand-built reports, exact outcomes."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from nodecheck.config.gate_settings import GateSettings
from nodecheck.core.model import Capture, CheckResult, Cut, Evidence, Outcome, Status, Verdict
from nodecheck.gate import decide as gate
from nodecheck.gate.decide import Blame, decide, merge_attempts, reason_check
from nodecheck.parsers.slurm import NodeState, reason_owner
from nodecheck.report import Report
from nodecheck.transport import CUT_AT_DEADLINE
from tests.helpers import marked_reason

T0 = datetime(2026, 11, 29, 14, 0, 0, tzinfo=timezone.utc)
FAIL_ONLY = gate.drain_statuses(["fail"])
ORDER = ("gpu.count", "gpu.health", "ib.ports", "ib.pairs", "gpu.driver")


def res(
    check: str,
    nodes: str | tuple[str, ...],
    status: Status,
    message: str = "",
    subject: str = "",
    observed: dict | None = None,
    cut: Cut | None = None,
) -> CheckResult:
    nodes = (nodes,) if isinstance(nodes, str) else nodes
    evidence = tuple(Evidence(n, check.split(".")[0], ("probe",), 0, f"captures/{n}/{check}.txt") for n in nodes)
    return CheckResult(
        check, nodes, Verdict(status, message or f"{check} {status.value}", subject, observed or {}, cut=cut), evidence
    )


def report(
    names,
    results,
    *,
    complete: bool = True,
    incomplete_reason: str = "",
    captures=(),
    finished: datetime | None = None,
    extras: dict | None = None,
) -> Report:
    return Report(
        run_id="20261129T140000Z_health",
        playbook="health",
        playbook_path="playbooks/health.yml",
        playbook_sha256="0" * 64,
        inventory="hosts.yml",
        started=T0,
        finished=finished or T0 + timedelta(seconds=5),
        deadline_s=60.0,
        complete=complete,
        nodes=tuple((n, n) for n in names),
        results=tuple(results),
        captures=tuple(captures),
        incomplete_reason=incomplete_reason,
        extras=extras or {},
    )


def names(n: int) -> list[str]:
    return [f"gpu{i:03d}" for i in range(1, n + 1)]


M = marked_reason  # the reason nodecheck writes for a body


def state(name: str, flags: str, reason: str = "", reason_time: str = "") -> NodeState:
    return NodeState(name, flags, frozenset(flags.split("+")), reason, "root" if reason else "", reason_time)


DEFAULT = GateSettings()


# ---- decide: what drains ---------------------------------------------------------------------


def test_a_fail_drains_with_the_most_severe_then_first_in_playbook_order():
    rep = report(
        ["gpu001"],
        [
            res("ib.ports", "gpu001", Status.FAIL, "rate 100 Gb/s, expected >= 400 Gb/s", "mlx5_2/1"),
            res("gpu.health", "gpu001", Status.FAIL, "NVLink 3 down", "GPU3"),
            res("gpu.count", "gpu001", Status.TIMEOUT, "nvidia-smi hung"),
            res("gpu.driver", "gpu001", Status.PASS, "550.54.15"),
        ],
    )
    d = decide(rep, DEFAULT, order=ORDER)
    assert d.drain == (
        Blame("gpu001", "gpu.health", Status.FAIL, "GPU3: NVLink 3 down", "captures/gpu001/gpu.health.txt"),
    )
    assert d.blamed == d.drain and not d.tripped and d.breaker == ""
    assert (d.resume, d.held, d.unjudged) == ((), (), ())


def test_without_order_the_first_failing_result_is_named_and_subject_is_not_repeated():
    rep = report(
        ["gpu001"],
        [
            res("ib.ports", "gpu001", Status.FAIL, "mlx5_2/1: down", "mlx5_2/1"),
            res("gpu.health", "gpu001", Status.FAIL, "NVLink 3 down", "GPU3"),
        ],
    )
    (b,) = decide(rep, DEFAULT).drain
    assert (b.check, b.message) == ("ib.ports", "mlx5_2/1: down")


@pytest.mark.parametrize(
    "status", [Status.ERROR, Status.SKIPPED, Status.TIMEOUT, Status.UNREACHABLE, Status.WARN, Status.PASS]
)
def test_nothing_but_fail_drains_with_the_default_drain_on(status):
    rep = report(
        ["gpu001", "gpu002"],
        [res("gpu.health", "gpu001", status, "could not tell"), res("gpu.health", "gpu002", Status.PASS, "ok")],
    )
    d = decide(rep, DEFAULT, order=ORDER)
    assert d.drain == () and d.blamed == () and not d.tripped
    expected = () if status.healthy else (Blame("gpu001", "gpu.health", status, "could not tell"),)
    assert d.unjudged == expected


def test_error_never_drains_even_when_every_drain_on_word_is_given():
    rep = report(
        ["gpu001"],
        [
            res("gpu.health", "gpu001", Status.ERROR, "internal error in gpu.health"),
            res("gpu.count", "gpu001", Status.SKIPPED, "deadline"),
        ],
    )
    d = decide(rep, DEFAULT, drain_on=["fail", "timeout", "unreachable"])
    assert d.drain == () and [b.status for b in d.unjudged] == [Status.ERROR]


def test_with_drain_on_fail_and_timeout_a_timeout_drains():
    rep = report(
        ["gpu001", "gpu002"],
        [
            res("gpu.count", "gpu001", Status.TIMEOUT, "nvidia-smi hung after 10 s"),
            res("gpu.count", "gpu002", Status.UNREACHABLE, "connect timeout"),
        ],
    )
    d = decide(rep, DEFAULT, drain_on=["fail", "timeout"])
    assert d.drain == (
        Blame("gpu001", "gpu.count", Status.TIMEOUT, "nvidia-smi hung after 10 s", "captures/gpu001/gpu.count.txt"),
    )
    assert d.unjudged == (Blame("gpu002", "gpu.count", Status.UNREACHABLE, "connect timeout"),)
    # the playbook's own drain_on is used when the caller gives none
    assert decide(rep, GateSettings(drain_on=["timeout"])).drain == d.drain


def test_a_probe_cut_by_nodecheck_own_deadline_never_drains_even_with_drain_on_timeout():
    cut = f"ibstat timed out: {CUT_AT_DEADLINE} after 1.5 s (probe timeout 5 s)"
    rep = report(
        ["gpu001", "gpu002"],
        [
            res("ib.ports", "gpu001", Status.TIMEOUT, cut, cut=Cut.DEADLINE),
            res("ib.ports", "gpu002", Status.TIMEOUT, "ibstat timed out after 5 s"),
        ],
    )
    d = decide(rep, DEFAULT, drain_on=["fail", "timeout"])
    assert [b.node for b in d.drain] == ["gpu002"]  # its own tool hung: that is the node's
    assert d.unjudged == (Blame("gpu001", "ib.ports", Status.TIMEOUT, cut),)


@pytest.mark.parametrize("how", [Cut.SIGNAL, Cut.CONNECTION_LOST])
def test_a_probe_nodecheck_itself_stopped_never_drains_even_with_drain_on_timeout(how):
    """A stop signal (a Prolog's SIGTERM, Ctrl-C) cut the probe: the node did not hang, nodecheck did
    stop (issue 32, 2.1: a local TIMEOUT drains by default, so this must be told apart)."""
    rep = report(["gpu001"], [res("ib.ports", "gpu001", Status.TIMEOUT, "still running when stopped", cut=how)])
    d = decide(rep, DEFAULT, drain_on=["fail", "timeout"])
    assert d.drain == () and [b.node for b in d.unjudged] == ["gpu001"]


def test_what_drains_by_default_depends_on_where_the_checks_ran():
    """Issue 32, 2.1: on the node itself (node Prolog, local health) a tool that hangs is the node's
    fault: fail and timeout drain; over SSH an unreachable or timed-out node is incomplete: fail only.
    The command line, then the playbook's gate.drain_on, come first."""
    default = GateSettings()
    assert gate.drain_on_for(None, default, local=True) == ("fail", "timeout")
    assert gate.drain_on_for(None, default, local=False) == ("fail",)
    chosen = GateSettings(drain_on=["fail", "unreachable"])
    assert gate.drain_on_for(None, chosen, local=True) == ("fail", "unreachable")
    assert gate.drain_on_for(("fail",), chosen, local=True) == ("fail",)
    # decide() on its own (sweep --drain, the controller) is the remote default
    rep = report(["gpu001"], [res("ib.ports", "gpu001", Status.TIMEOUT, "ibstat timed out after 5 s")])
    assert decide(rep, default).drain == ()
    assert [b.node for b in decide(rep, default, drain_on=gate.drain_on_for(None, default, local=True)).drain] == [
        "gpu001"
    ]


def test_the_deadline_cut_is_read_from_the_result_not_from_its_words():
    """Whether nodecheck cut a probe is a field of the result: other words do not hide it, and a node's
    own message that happens to quote the words does not pass for it."""
    rep = report(
        ["gpu001", "gpu002"],
        [
            res("ib.ports", "gpu001", Status.TIMEOUT, "ibstat timed out", cut=Cut.DEADLINE),
            res("ib.ports", "gpu002", Status.TIMEOUT, f"the tool said: {CUT_AT_DEADLINE}"),
        ],
    )
    d = decide(rep, DEFAULT, drain_on=["fail", "timeout"])
    assert [b.node for b in d.drain] == ["gpu002"]


def test_unjudged_lists_unhealthy_non_draining_nodes_and_a_node_without_results():
    rep = report(
        ["gpu001", "gpu002", "gpu003", "gpu004"],
        [
            res("gpu.health", "gpu001", Status.ERROR, "cannot read nvidia-smi output"),
            res("gpu.count", "gpu001", Status.SKIPPED, "deadline"),
            res("gpu.health", "gpu002", Status.FAIL, "GPU3: ECC off"),
            res("gpu.health", "gpu002", Status.ERROR, "GPU5: not read"),
            res("gpu.health", "gpu003", Status.WARN, "persistence off"),
        ],
    )
    d = decide(rep, DEFAULT)
    assert d.unjudged == (
        Blame("gpu001", "gpu.health", Status.ERROR, "cannot read nvidia-smi output"),
        Blame("gpu004", "-", Status.ERROR, "no result: the node was not checked"),
    )
    assert [b.node for b in d.drain] == ["gpu002"]


def test_drain_on_words_are_checked_even_past_validation():
    with pytest.raises(ValueError, match="'error'"):
        gate.drain_statuses(["fail", "error"])
    with pytest.raises(ValueError):
        gate.drain_statuses([])
    assert gate.drain_statuses(("unreachable", "fail")) == {Status.UNREACHABLE, Status.FAIL}


def test_blame_reason_is_slurm_drain_reason_bounded():
    b = Blame("gpu001", "gpu.health", Status.FAIL, "GPU3: NVLink 3 down\nand more")
    assert b.reason(256) == M("gpu.health GPU3: NVLink 3 down and more")
    assert b.reason(40) == M("gpu.health GPU3: N…")
    assert reason_check(b.reason(40)) == "gpu.health"
    assert b.reason(256, token="site7") == M("gpu.health GPU3: NVLink 3 down and more", "site7")


# ---- the run breaker ---------------------------------------------------------------------------


def test_two_of_ten_failing_the_same_check_trip_the_breaker_and_drain_nothing():
    nodes = names(10)
    rep = report(
        nodes, [res("gpu.health", n, Status.FAIL if n in ("gpu003", "gpu007") else Status.PASS, "x") for n in nodes]
    )
    d = decide(rep, DEFAULT)
    assert d.tripped and d.drain == ()
    assert [b.node for b in d.blamed] == ["gpu003", "gpu007"]
    assert d.breaker == (
        "mass-drain breaker: gpu.health fails on 2 of 10 nodes (more than 10%): suspect "
        "the check, its thresholds or the config, not the nodes; nothing was drained"
    )


def test_one_of_ten_does_not_trip():
    nodes = names(10)
    rep = report(nodes, [res("gpu.health", n, Status.FAIL if n == "gpu003" else Status.PASS) for n in nodes])
    d = decide(rep, DEFAULT)
    assert not d.tripped and [b.node for b in d.drain] == ["gpu003"]


def test_nine_nodes_all_failing_are_below_breaker_min_nodes():
    nodes = names(9)
    d = decide(report(nodes, [res("gpu.health", n, Status.FAIL) for n in nodes]), DEFAULT)
    assert not d.tripped and [b.node for b in d.drain] == nodes


def test_different_checks_on_different_nodes_do_not_trip():
    nodes = names(10)
    checks = [
        "gpu.count",
        "gpu.health",
        "ib.ports",
        "ib.pairs",
        "gpu.driver",
        "gpu.xid",
        "node.oom",
        "nccl.version",
        "kernel.version",
        "roce.ports",
    ]
    rep = report(nodes, [res(c, n, Status.FAIL) for c, n in zip(checks, nodes)])
    d = decide(rep, DEFAULT)
    assert not d.tripped and len(d.drain) == 10


def test_a_multi_node_drift_result_counts_each_of_its_nodes_once():
    nodes = names(10)
    drift = res("gpu.driver", ("gpu002", "gpu005"), Status.FAIL, "driver 535.104 on gpu[002,005], expected 550.54")
    ok = res("gpu.driver", tuple(n for n in nodes if n not in ("gpu002", "gpu005")), Status.PASS, "550.54")
    d = decide(report(nodes, [drift, ok, drift]), DEFAULT)  # the same result twice still counts 2 nodes
    assert d.tripped and "gpu.driver fails on 2 of 10 nodes" in d.breaker
    one = res("gpu.driver", ("gpu002",), Status.FAIL)
    assert not decide(report(nodes, [one, one]), DEFAULT).tripped


def test_nodes_outside_the_run_do_not_count_for_the_breaker():
    nodes = names(10)
    rep = report(nodes, [res("ib.pairs", ("gpu001", "spare99"), Status.FAIL, "bad link gpu001-spare99")])
    d = decide(rep, DEFAULT)
    assert not d.tripped and [b.node for b in d.drain] == ["gpu001"]


def test_breaker_share_is_compared_exactly_at_the_edge():
    # 0.29 * 100 is 28.999999999999996 in floats: 29 of 100 is not more than 29%
    nodes = names(100)
    rep = report(nodes, [res("gpu.health", n, Status.FAIL) for n in nodes[:29]])
    assert not decide(rep, GateSettings(breaker_share=0.29)).tripped
    rep30 = report(nodes, [res("gpu.health", n, Status.FAIL) for n in nodes[:30]])
    d = decide(rep30, GateSettings(breaker_share=0.29))
    assert d.tripped and "30 of 100 nodes (more than 29%)" in d.breaker


def test_breaker_names_the_worst_check_and_the_others():
    nodes = names(10)
    rep = report(
        nodes,
        [res("gpu.health", n, Status.FAIL) for n in nodes[:3]] + [res("ib.ports", n, Status.FAIL) for n in nodes[5:7]],
    )
    d = decide(rep, GateSettings(breaker_share=0.125))
    assert d.breaker.startswith("mass-drain breaker: gpu.health fails on 3 of 10 nodes (more than 12.5%)")
    assert d.breaker.endswith("nothing was drained (also tripped: ib.ports)")


@dataclass(frozen=True)
class Drained:
    drained: bool
    reason: str
    reason_time: str = ""

    def owner(self, token: str = "") -> str:
        return reason_owner(self.reason, token)


def test_cluster_breaker_counts_nodecheck_drains_for_the_same_check():
    states = {n: Drained(False, "") for n in names(10)}
    states["gpu001"] = Drained(True, M("gpu.health GPU3: NVLink 3 down"))
    assert gate.cluster_breaker("gpu.health", states, DEFAULT) == ""
    states["gpu002"] = Drained(True, M("gpu.health GPU1: ECC off"))
    assert gate.cluster_breaker("gpu.health", states, DEFAULT) == (
        "mass-drain breaker: 2 of 10 nodes are drained by nodecheck for gpu.health (more than 10%): "
        "suspect the check, its thresholds or the config; this node is not drained"
    )
    # other checks, foreign drains and a nodecheck reason on an undrained node do not count
    other = dict(states, gpu002=Drained(True, M("ib.ports mlx5_0/1 down")))
    other.update(gpu003=Drained(True, "gpu.health by hand"), gpu004=Drained(False, M("gpu.health x")))
    assert gate.cluster_breaker("gpu.health", other, DEFAULT) == ""
    # fewer than breaker_min_nodes in the cluster: never trips
    small = {n: Drained(True, M("gpu.health x")) for n in names(9)}
    assert gate.cluster_breaker("gpu.health", small, DEFAULT) == ""


def test_cluster_breaker_since_leaves_out_drains_set_before_the_run():
    local = datetime(2026, 11, 29, 14, 0, 0)
    states = {n: Drained(False, "") for n in names(10)}
    states["gpu001"] = Drained(True, M("gpu.health old fault"), "2026-11-22T09:00:00")
    states["gpu002"] = Drained(True, M("gpu.health this run"), "2026-11-29T14:00:02")
    assert gate.cluster_breaker("gpu.health", states, DEFAULT, since=local) == ""
    assert gate.cluster_breaker("gpu.health", states, DEFAULT) != ""  # without since: both count
    unreadable = dict(states, gpu001=Drained(True, M("gpu.health x"), "Tue Nov 22"))
    assert "2 of 10" in gate.cluster_breaker("gpu.health", unreadable, DEFAULT, since=local)


# ---- resume -------------------------------------------------------------------------------------


def test_resume_only_our_drains_once_the_check_ran_and_the_node_is_healthy():
    nodes = ["gpu001", "gpu002", "gpu003", "gpu004", "gpu005", "gpu006", "gpu007"]
    rep = report(
        nodes,
        [
            res("gpu.health", "gpu001", Status.PASS),  # ours, gpu.health now passes -> resume
            res("gpu.health", "gpu002", Status.PASS),  # foreign drain -> never
            res("gpu.health", "gpu003", Status.PASS),  # ours for ib.ports, not run here -> held
            res("gpu.health", "gpu004", Status.FAIL, "GPU3: ECC off"),  # ours, still failing -> neither
            res("gpu.health", "gpu005", Status.ERROR, "cannot read"),  # ours, unjudged -> held
            res("gpu.health", "gpu006", Status.PASS),  # ours but not drained (reason left over) -> nothing
            res("gpu.health", "gpu007", Status.PASS),  # no state read -> nothing
        ],
    )
    states = {
        "gpu001": state("gpu001", "IDLE+DRAIN", M("gpu.health GPU3: NVLink 3 down")),
        "gpu002": state("gpu002", "IDLE+DRAIN", "bad fan, ticket 4711"),
        "gpu003": state("gpu003", "IDLE+DRAIN", M("ib.ports mlx5_2/1: Down")),
        "gpu004": state("gpu004", "IDLE+DRAIN", M("gpu.health GPU3: ECC off")),
        "gpu005": state("gpu005", "IDLE+DRAIN", M("gpu.health GPU3: ECC off")),
        "gpu006": state("gpu006", "IDLE", M("gpu.health old")),
    }
    d = decide(rep, DEFAULT, states=states)
    assert d.resume == ("gpu001",)
    assert d.held == (
        (
            "gpu003",
            "drained for ib.ports, which this run did not check; resume it by hand once fixed: "
            "scontrol update nodename=gpu003 state=resume",
        ),
        ("gpu005", "not resumed: it could not be judged (error)"),
    )
    assert [b.node for b in d.drain] == ["gpu004"]
    assert decide(rep, DEFAULT, states=states, resume=False).resume == ()
    assert decide(rep, DEFAULT, states=states, resume=False).held == ()


def test_the_reason_check_must_have_run_on_that_node_not_just_somewhere():
    rep = report(
        ["gpu001", "gpu002"], [res("ib.ports", "gpu001", Status.PASS), res("gpu.health", "gpu002", Status.PASS)]
    )
    states = {"gpu002": state("gpu002", "IDLE+DRAIN", M("ib.ports mlx5_2/1: Down"))}
    d = decide(rep, DEFAULT, states=states)
    assert d.resume == () and [n for n, _ in d.held] == ["gpu002"]


def test_an_unnamed_nodecheck_reason_is_held():
    rep = report(["gpu001"], [res("gpu.health", "gpu001", Status.PASS)])
    d = decide(rep, DEFAULT, states={"gpu001": state("gpu001", "IDLE+DRAIN", M("-"))})
    assert d.held == (
        (
            "gpu001",
            "drained for -, which this run did not check; resume it by "
            "hand once fixed: scontrol update nodename=gpu001 state=resume",
        ),
    )


def test_a_node_remediation_held_for_a_person_is_never_resumed_when_the_check_passes():
    """Issue 33: a hold ("needs a person: ...") is a person's to lift, even once the check passes."""
    rep = report(["gpu001"], [res("gpu.health", "gpu001", Status.PASS)])
    held = M(
        "gpu.health needs a person: GPU3: row remap pending (ladder gpu-row-remap-pending; tried reset_gpu, reboot)"
    )
    d = decide(rep, DEFAULT, states={"gpu001": state("gpu001", "IDLE+DRAIN", held)})
    assert d.resume == ()
    assert d.held == (
        (
            "gpu001",
            "held for a person by nodecheck's remediation (gpu.health needs a person: GPU3: row remap "
            "pending (ladder gpu-row-remap-pending; tried reset_gpu, reboot)); once fixed, resume it by "
            "hand: scontrol update nodename=gpu001 state=resume",
        ),
    )


RMA = "nodecheck: gpu.health GPU3 held for RMA #4711 - do not resume"


def test_an_operators_reason_in_nodecheck_style_is_never_resumed_when_the_check_passes():
    """Issue 17, finding 10: ownership by the "nodecheck:" prefix resumed an operator's RMA hold."""
    rep = report(
        ["gpu001", "gpu002"], [res("gpu.health", "gpu001", Status.PASS), res("gpu.health", "gpu002", Status.PASS)]
    )
    states = {
        "gpu001": state("gpu001", "IDLE+DRAIN", RMA),
        "gpu002": state("gpu002", "IDLE+DRAIN", M("gpu.health GPU3: row remap pending")),
    }
    d = decide(rep, DEFAULT, states=states)
    assert d.resume == ("gpu002",)  # the reason nodecheck wrote is resumed
    assert d.held == (
        (
            "gpu001",
            f"drained with an unmarked nodecheck-style reason ({RMA!r}): nodecheck before "
            'the ownership mark wrote these, and so can a person ("held for RMA"), so it is '
            "never resumed automatically; once fixed, resume it by hand: scontrol update "
            "nodename=gpu001 state=resume",
        ),
    )
    # nor a copy of nodecheck's own reason that a person edited, nor another token's
    edited = M("gpu.health GPU3: row remap pending") + " - RMA, do not resume"
    other_site = M("gpu.health GPU3: row remap pending", "site-b")
    for reason in (edited, other_site):
        d = decide(rep, DEFAULT, states={"gpu001": state("gpu001", "IDLE+DRAIN", reason)})
        assert (d.resume, d.held) == ((), ())
    d = decide(rep, DEFAULT, states={"gpu001": state("gpu001", "IDLE+DRAIN", other_site)}, token="site-b")
    assert d.resume == ("gpu001",)


def test_old_format_drains_do_not_count_towards_the_cluster_breaker():
    states = {n: Drained(True, RMA) for n in names(10)}
    assert gate.cluster_breaker("gpu.health", states, DEFAULT) == ""


@pytest.mark.parametrize(
    "reason, check",
    [
        (M("gpu.health GPU3: NVLink 3 down"), "gpu.health"),
        (M("ib.pairs…"), "ib.pairs"),
        ("nodecheck[12345678]: ib.pairs x", "ib.pairs"),  # (whose it is, is reason_owner's to say)
        ("nodecheck: gpu.health GPU3: NVLink 3 down", "gpu.health"),
        ("nodecheck:ib.pairs bad node", "ib.pairs"),
        ("nodecheck: nccl.allreduce_multi busbw 12 GB/s", "nccl.allreduce_multi"),
        ("nodecheck: gpu.health…", "gpu.health"),
        ("nodecheck: ", None),
        ("nodecheck:", None),
        ("Prolog error", None),
        (" nodecheck: gpu.health x", None),
        ("NODECHECK: gpu.health x", None),
        ("admin: nodecheck: gpu.health", None),
        ("", None),
    ],
)
def test_reason_check(reason, check):
    assert reason_check(reason) == check


def test_reason_check_of_none_is_none():
    assert reason_check(None) is None  # a NodeState without a reason must not crash decide


# ---- retries ------------------------------------------------------------------------------------


def cap(node: str, probe: str) -> Capture:
    return Capture(node, probe, (probe,), Outcome.EXITED, 0, "out", "", 1.0)


def test_no_retries_return_the_same_report():
    first = report(["gpu001"], [res("ib.pairs", "gpu001", Status.FAIL)])
    assert merge_attempts(first, [], {"ib.pairs"}, FAIL_ONLY) is first


def test_a_flaky_failure_cleared_on_retry_is_a_warning_and_a_repeated_one_stands():
    nodes = ["gpu001", "gpu002", "gpu003"]
    first = report(
        nodes,
        [
            res("nccl.allreduce_single", "gpu001", Status.FAIL, "busbw 120 GB/s, expected >= 400 GB/s"),
            res("nccl.allreduce_single", "gpu002", Status.FAIL, "busbw 90 GB/s, expected >= 400 GB/s"),
            res("nccl.allreduce_single", "gpu003", Status.PASS, "busbw 450 GB/s"),
            res("gpu.health", "gpu003", Status.FAIL, "GPU3: ECC off"),  # not retried: untouched
        ],
        captures=[cap("gpu001", "nccl"), cap("gpu002", "nccl")],
    )
    retry = report(
        ["gpu001", "gpu002"],
        [
            res("nccl.allreduce_single", "gpu001", Status.PASS, "busbw 451 GB/s"),
            res("nccl.allreduce_single", "gpu002", Status.FAIL, "busbw 91 GB/s, expected >= 400 GB/s"),
        ],
        captures=[cap("gpu001", "nccl"), cap("gpu002", "nccl")],
        finished=T0 + timedelta(seconds=30),
    )
    merged = merge_attempts(first, [retry], {"nccl.allreduce_single"}, FAIL_ONLY)
    by = {(r.check, r.nodes): r.verdict for r in merged.results}
    assert len(merged.results) == 4
    v1 = by[("nccl.allreduce_single", ("gpu001",))]
    assert (v1.status, v1.message) == (
        Status.WARN,
        "flaky: busbw 120 GB/s, expected >= 400 GB/s on attempt 1; passed on attempt 2",
    )
    assert v1.observed == {"attempts": 2, "flaky": True}
    v2 = by[("nccl.allreduce_single", ("gpu002",))]
    assert (v2.status, v2.message) == (Status.FAIL, "busbw 90 GB/s, expected >= 400 GB/s [failed on 2 of 2 attempts]")
    assert v2.observed == {"attempts": 2, "failed_attempts": 2}
    assert by[("gpu.health", ("gpu003",))].message == "GPU3: ECC off"
    assert [(c.node, c.probe) for c in merged.captures] == [
        ("gpu001", "nccl"),
        ("gpu002", "nccl"),
        ("gpu001", "nccl@retry1"),
        ("gpu002", "nccl@retry1"),
    ]
    assert merged.finished == T0 + timedelta(seconds=30) and merged.complete
    assert merged.extras["gate"] == {
        "attempts": 2,
        "retried": ["nccl.allreduce_single"],
        "cleared": ["gpu001 nccl.allreduce_single"],
        "notes": [],
    }
    d = decide(merged, DEFAULT)
    assert [(b.node, b.check) for b in d.drain] == [("gpu002", "nccl.allreduce_single"), ("gpu003", "gpu.health")]


def test_a_pair_result_where_one_node_cleared_is_split():
    nodes = ["gpu001", "gpu002", "gpu003"]
    first = report(
        nodes,
        [
            res("ib.pairs", ("gpu001", "gpu002"), Status.FAIL, "bad link gpu001-gpu002: 180 Gb/s"),
            res("ib.pairs", "gpu003", Status.PASS),
        ],
    )
    retry = report(
        nodes,
        [
            res("ib.pairs", "gpu001", Status.PASS, "390 Gb/s with gpu003"),
            res("ib.pairs", "gpu002", Status.FAIL, "bad node: fails with 2/2 partners"),
            res("ib.pairs", "gpu003", Status.PASS),
        ],
    )
    merged = merge_attempts(first, [retry], {"ib.pairs"}, FAIL_ONLY)
    assert [(r.nodes, r.verdict.status, r.verdict.message) for r in merged.results] == [
        (("gpu002",), Status.FAIL, "bad link gpu001-gpu002: 180 Gb/s [failed on 2 of 2 attempts]"),
        (("gpu001",), Status.WARN, "flaky: bad link gpu001-gpu002: 180 Gb/s on attempt 1; passed on attempt 2"),
        (("gpu003",), Status.PASS, "ib.pairs pass"),
    ]
    # the gpu003 pass in the retry is not a "cleared" failure: it never failed
    assert merged.extras["gate"]["cleared"] == ["gpu001 ib.pairs"]


def test_a_retry_that_could_not_judge_neither_clears_nor_counts_as_a_failure():
    first = report(["gpu001", "gpu002"], [res("ib.pairs", ("gpu001", "gpu002"), Status.FAIL, "bad link")])
    retry = report(
        ["gpu001", "gpu002"],
        [res("ib.pairs", "gpu001", Status.SKIPPED, "deadline"), res("ib.pairs", "gpu002", Status.FAIL, "bad node")],
        complete=False,
        incomplete_reason="the run deadline was reached",
    )
    merged = merge_attempts(first, [retry], {"ib.pairs"}, FAIL_ONLY)
    assert [(r.nodes, r.verdict.message, r.verdict.observed) for r in merged.results] == [
        (
            ("gpu001",),
            "bad link [failed on 1 of 2 attempts; the others could not judge it]",
            {"attempts": 2, "failed_attempts": 1},
        ),
        (("gpu002",), "bad link [failed on 2 of 2 attempts]", {"attempts": 2, "failed_attempts": 2}),
    ]
    assert not merged.complete and merged.incomplete_reason == "the run deadline was reached"


def test_counts_over_several_retries_and_the_attempt_that_passed():
    first = report(
        ["gpu001", "gpu002"], [res("ib.pairs", "gpu001", Status.FAIL, "a"), res("ib.pairs", "gpu002", Status.FAIL, "b")]
    )
    r1 = report(
        ["gpu001", "gpu002"], [res("ib.pairs", "gpu001", Status.FAIL, "a"), res("ib.pairs", "gpu002", Status.FAIL, "b")]
    )
    r2 = report(
        ["gpu001", "gpu002"], [res("ib.pairs", "gpu001", Status.PASS), res("ib.pairs", "gpu002", Status.FAIL, "b")]
    )
    merged = merge_attempts(first, [r1, r2], {"ib.pairs"}, FAIL_ONLY)
    assert [r.verdict.message for r in merged.results] == [
        "flaky: a on attempt 1; passed on attempt 3",
        "b [failed on 3 of 3 attempts]",
    ]
    assert merged.extras["gate"]["attempts"] == 3


def test_a_node_not_in_the_retry_says_the_retry_did_not_run():
    first = report(["gpu001"], [res("ib.pairs", "gpu001", Status.FAIL, "a")])
    empty = report([], [])
    merged = merge_attempts(first, [empty], {"ib.pairs"}, FAIL_ONLY, notes=["no time left for retry 2"])
    (r,) = merged.results
    assert (r.verdict.status, r.verdict.message) == (Status.FAIL, "a [retry not run: no time left for retry 2]")
    assert r.verdict.observed == {"attempts": 1, "failed_attempts": 1}


def test_incomplete_retries_make_the_merged_report_incomplete():
    first = report(["gpu001"], [res("ib.pairs", "gpu001", Status.FAIL)])
    retry = report(
        ["gpu001"], [res("ib.pairs", "gpu001", Status.PASS)], complete=False, incomplete_reason="stopped by a signal"
    )
    merged = merge_attempts(first, [retry], {"ib.pairs"}, FAIL_ONLY)
    assert (merged.complete, merged.incomplete_reason) == (False, "stopped by a signal")
    first_cut = dataclasses.replace(first, complete=False, incomplete_reason="the run deadline was reached")
    merged = merge_attempts(first_cut, [retry], {"ib.pairs"}, FAIL_ONLY)
    assert merged.incomplete_reason == "the run deadline was reached"


def test_merge_never_loses_a_result_or_a_node():
    nodes = names(4)
    first = report(
        nodes,
        [
            res("ib.pairs", ("gpu001", "gpu002"), Status.FAIL, "bad link"),
            res("ib.pairs", ("gpu003", "gpu004"), Status.TIMEOUT, "hung"),
            CheckResult("ib.pairs", (), Verdict(Status.FAIL, "about nobody")),
            res("gpu.health", nodes, Status.PASS),
        ],
    )
    retry = report(nodes, [res("ib.pairs", n, Status.PASS) for n in nodes])
    merged = merge_attempts(first, [retry], {"ib.pairs"}, FAIL_ONLY)
    covered = sorted((n, r.check) for r in merged.results for n in r.nodes)
    assert covered == sorted((n, r.check) for r in first.results for n in r.nodes)
    assert CheckResult("ib.pairs", (), Verdict(Status.FAIL, "about nobody")) in merged.results
    # TIMEOUT is not in drain_on here: it is left as it was
    assert res("ib.pairs", ("gpu003", "gpu004"), Status.TIMEOUT, "hung") in merged.results


def test_flaky_checks_and_failing():
    assert gate.flaky_checks(DEFAULT, ["ib.pairs", "gpu.health"]) == {"ib.pairs"}
    assert gate.flaky_checks(GateSettings(flaky=["gpu.health"]), ["ib.pairs", "gpu.health"]) == {"gpu.health"}
    rep = report(
        names(3),
        [
            res("ib.pairs", ("gpu001", "gpu002"), Status.FAIL),
            res("ib.pairs", "gpu003", Status.TIMEOUT),
            res("gpu.health", "gpu003", Status.FAIL),
        ],
    )
    assert gate.failing(rep, {"ib.pairs"}, FAIL_ONLY) == {"ib.pairs": {"gpu001", "gpu002"}}
    assert gate.healthy_in(rep, "ib.pairs") == set()


# ---- settings ------------------------------------------------------------------------------------


def test_gate_settings_defaults():
    s = GateSettings()
    assert (s.drain_on, s.retries, s.flaky, s.breaker_share, s.breaker_min_nodes, s.settle_s) == (
        None,  # by where the checks run: gate.drain_on_for
        1,
        None,
        0.10,
        10,
        3.0,
    )


@pytest.mark.parametrize(
    "bad",
    [
        {"drain_on": ["fail", "error"]},
        {"drain_on": []},
        {"retries": 11},
        {"retries": -1},
        {"retries": "2"},
        {"breaker_share": 0},
        {"breaker_share": 2},
        {"breaker_share": float("nan")},
        {"breaker_min_nodes": 0},
        {"settle_s": 61},
        {"drian_on": ["fail"]},
    ],
)
def test_gate_settings_validation(bad):
    with pytest.raises(ValidationError):
        GateSettings(**bad)
