"""Sweeps: what a sweep keeps of its report, what changed since the last one, repeat offenders.

Two sweeps of the same small fleet an hour apart (built below, reused by test_metrics and
test_history): node1 gets a slow link and its error counters rise, node2 recovers from a port
down and rebooted, node3 was unreachable and is back, node4 is not in the second sweep, node5 is
new with a GPU fault, NCCL was upgraded.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from nodecheck.core.model import CheckResult, Status, Verdict
from nodecheck.report import Report
from nodecheck.report import diff as D
from nodecheck.report.diff import (
    CounterReset,
    CounterRise,
    CounterRow,
    Finding,
    Measurement,
    NodeSweep,
    Offender,
    ResultRow,
    StatusChange,
    SweepSnapshot,
    VersionChange,
)

T0 = datetime(2026, 11, 29, 10, 0, 0, tzinfo=timezone.utc)
T1 = datetime(2026, 11, 29, 11, 2, 30, tzinfo=timezone.utc)
P, W, F, U, E, S = Status.PASS, Status.WARN, Status.FAIL, Status.UNREACHABLE, Status.ERROR, Status.SKIPPED


def r(nodes, check, status, message, subject="", observed=None) -> CheckResult:
    nodes = (nodes,) if isinstance(nodes, str) else tuple(nodes)
    return CheckResult(check, nodes, Verdict(status, message, subject, observed or {}))


def counters(node, port, boot, source="perfquery -x", status=P, **values) -> CheckResult:
    snap = {"source": source, "clock": "1764410400.0", "uptime": "5000.0", "boot_id": boot, "counters": values}
    return r(
        node,
        "ib.counters",
        status,
        f"{port}: no error counter rose in 2.0 s ({source})",
        port,
        {"window_s": 2.0, "snapshot": snap},
    )


def report(run_id, started, nodes, results, extras=None, complete=True) -> Report:
    return Report(
        run_id,
        "sweep",
        "playbooks/sweep.yml",
        "ab" * 32,
        "hosts.yml",
        started,
        started + timedelta(seconds=42.5),
        600.0,
        complete,
        tuple((n, n) for n in nodes),
        tuple(results),
        extras=extras or {},
    )


UNREACHABLE = "unreachable: connection refused by node3:22"


def previous_report() -> Report:
    return report(
        "20261129T100000Z_sweep",
        T0,
        ["node1", "node2", "node3", "node4"],
        [
            r("node1", "ib.ports", P, "mlx5_0/1: Active/LinkUp 400 Gb/s", "mlx5_0/1"),
            r("node1", "gpu.health", P, "GPU0: ok", "GPU0"),
            r("node1", "gpu.health", P, "GPU1: ok", "GPU1"),
            counters("node1", "mlx5_0/1", "boot-1", LinkDownedCounter=0, SymbolErrorCounter=5, PortXmitData=1000),
            counters("node1", "mlx5_1/1", "boot-1", source="sysfs counters", LinkDownedCounter=5),
            counters("node1", "mlx5_2/1", "boot-1", LinkDownedCounter=3),
            r("node1", "gpu.xid", W, "Xid 13 (1x): application error"),
            r("node2", "ib.ports", F, "mlx5_3/1: Down/Polling, expected Active/LinkUp", "mlx5_3/1"),
            r("node2", "gpu.health", P, "GPU0: ok", "GPU0"),
            counters("node2", "mlx5_0/1", "boot-2", LinkDownedCounter=1, SymbolErrorCounter=7),
            r("node2", "gpu.xid", F, "Xid 79 on PCI:0000:b3:00: GPU has fallen off the bus"),
            r("node2", "node.oom", F, "OOM killed python3 2x in 24h, expected none"),
            r("node3", "ib.ports", U, UNREACHABLE),
            r("node3", "gpu.health", U, UNREACHABLE),
            r("node4", "ib.ports", P, "mlx5_0/1: Active/LinkUp 400 Gb/s", "mlx5_0/1"),
            r("node4", "gpu.health", F, "GPU3: row remap pending", "GPU3"),
            counters("node4", "mlx5_0/1", "boot-4", LinkDownedCounter=2),
            r(
                ["node1", "node2", "node4"],
                "nccl.version",
                P,
                "NCCL 2.23.4 (all 3 nodes agree)",
                observed={"NCCL": "2.23.4"},
            ),
        ],
    )


def current_report() -> Report:
    pairs = {
        "pairing": "ring",
        "results": [
            {"server": "node1", "client": "node2", "device": "mlx5_0", "status": "pass", "gbps": 391.5},
            {"server": "node1", "client": "node2", "device": "mlx5_0", "status": "pass", "gbps": 388.0},
            {"server": "node2", "client": "node3", "device": "mlx5_0", "status": "fail", "gbps": 120.0},
            {"server": "node3", "client": "node1", "device": "mlx5_0", "status": "timeout", "gbps": None},
        ],
    }
    return report(
        "20261129T110230Z_sweep",
        T1,
        ["node1", "node2", "node3", "node5"],
        [
            r("node1", "ib.ports", F, "mlx5_5/1: rate 200 Gb/s, expected >= 400 Gb/s", "mlx5_5/1"),
            r("node1", "gpu.health", P, "GPU0: ok", "GPU0"),
            r("node1", "gpu.health", P, "GPU1: ok", "GPU1"),
            counters("node1", "mlx5_0/1", "boot-1", LinkDownedCounter=1, SymbolErrorCounter=50, PortXmitData=99999),
            counters("node1", "mlx5_1/1", "boot-1", LinkDownedCounter=9),
            counters("node1", "mlx5_2/1", "boot-1", LinkDownedCounter=0),
            r(
                "node1",
                "nccl.allreduce_single",
                P,
                "all_reduce: busbw 452.1 GB/s",
                "all_reduce",
                {"busbw_plateau_gbs": 452.1, "avg_busbw_gbs": 300.2},
            ),
            r("node2", "ib.ports", P, "mlx5_3/1: Active/LinkUp 400 Gb/s", "mlx5_3/1"),
            r("node2", "gpu.health", P, "GPU0: ok", "GPU0"),
            counters("node2", "mlx5_0/1", "boot-2b", LinkDownedCounter=0, SymbolErrorCounter=0),
            r("node2", "node.oom", F, "OOM killed python3 3x in 24h, expected none"),
            r("node3", "ib.ports", P, "mlx5_0/1: Active/LinkUp 400 Gb/s", "mlx5_0/1"),
            r("node3", "gpu.health", P, "GPU0: ok", "GPU0"),
            r("node5", "ib.ports", P, "mlx5_0/1: Active/LinkUp 400 Gb/s", "mlx5_0/1"),
            r("node5", "gpu.health", P, "GPU0: ok", "GPU0"),
            r("node5", "gpu.health", F, "GPU1: volatile uncorrectable ECC 2, expected <= 0", "GPU1"),
            r("node5", "gpu.health", E, "GPU2: ECC not reported", "GPU2"),
            r(
                ["node1", "node2", "node3"],
                "nccl.version",
                P,
                "NCCL 2.23.5 (majority: 3 of 4 nodes)",
                observed={"NCCL": "2.23.5"},
            ),
            r(
                "node5",
                "nccl.version",
                F,
                "NCCL 2.23.4 on node5, expected 2.23.5 (3 nodes)",
                observed={"NCCL": "2.23.4"},
            ),
            r(
                ["node1", "node2"],
                "kernel.version",
                E,
                "kernel: no majority among ...",
                observed={"kernel": {"6.8.0": "node1", "6.5.0": "node2"}},
            ),
            r("node3", "cuda.version", F, "no CUDA driver", observed={"CUDA driver API": None}),
        ],
        extras={"ib.pairs": pairs},
    )


def test_a_sweep_keeps_failures_as_they_are_and_one_row_per_passing_check():
    snap = D.snapshot(current_report())
    assert snap.nodes == ("node1", "node2", "node3", "node5")
    node1 = [row for row in snap.results if row.node == "node1"]
    assert node1 == [
        ResultRow("node1", "ib.ports", F, "mlx5_5/1: rate 200 Gb/s, expected >= 400 Gb/s", "mlx5_5/1"),
        ResultRow("node1", "gpu.health", P, "2 of 2 pass"),
        ResultRow("node1", "ib.counters", P, "3 of 3 pass"),
        ResultRow("node1", "nccl.allreduce_single", P, "all_reduce: busbw 452.1 GB/s", "all_reduce"),
        ResultRow("node1", "nccl.version", P, "NCCL 2.23.5 (majority: 3 of 4 nodes)"),
        ResultRow("node1", "kernel.version", E, "kernel: no majority among ..."),
    ]
    node5 = [row for row in snap.results if row.node == "node5"]
    assert [(row.check, row.status, row.subject) for row in node5] == [
        ("ib.ports", P, "mlx5_0/1"),
        ("gpu.health", F, "GPU1"),
        ("gpu.health", E, "GPU2"),
        ("nccl.version", F, ""),
    ]
    assert len(snap.results) == 6 + 6 + 4 + 4
    assert snap.node_statuses == {"node1": F, "node2": F, "node3": F, "node5": F}
    assert snap.status is F


def test_facts_are_single_values_only_a_tie_or_an_absent_thing_is_no_fact():
    snap = D.snapshot(current_report())
    assert snap.facts == (
        ("node1", "nccl.version", "2.23.5"),
        ("node2", "nccl.version", "2.23.5"),
        ("node3", "nccl.version", "2.23.5"),
        ("node5", "nccl.version", "2.23.4"),
    )


def test_only_error_counters_are_kept_once_per_port_with_boot_and_source():
    snap = D.snapshot(current_report())
    assert snap.counters == (
        CounterRow("node1", "mlx5_0/1", "LinkDownedCounter", 1, "boot-1", "perfquery -x"),
        CounterRow("node1", "mlx5_0/1", "SymbolErrorCounter", 50, "boot-1", "perfquery -x"),
        CounterRow("node1", "mlx5_1/1", "LinkDownedCounter", 9, "boot-1", "perfquery -x"),
        CounterRow("node1", "mlx5_2/1", "LinkDownedCounter", 0, "boot-1", "perfquery -x"),
        CounterRow("node2", "mlx5_0/1", "LinkDownedCounter", 0, "boot-2b", "perfquery -x"),
        CounterRow("node2", "mlx5_0/1", "SymbolErrorCounter", 0, "boot-2b", "perfquery -x"),
    )
    assert "PortXmitData" not in D.KEPT_COUNTERS and len(D.KEPT_COUNTERS) == 8


def test_measurements_are_the_judged_busbw_and_each_nodes_best_pair_bandwidth():
    assert D.snapshot(current_report()).measurements == (
        Measurement("node1", "nccl.allreduce_single", "busbw", "all_reduce", 452.1, "GB/s"),
        Measurement("node1", "ib.pairs", "ib_write_bw_best", "mlx5_0", 391.5, "Gb/s"),
        Measurement("node2", "ib.pairs", "ib_write_bw_best", "mlx5_0", 391.5, "Gb/s"),
        Measurement("node3", "ib.pairs", "ib_write_bw_best", "mlx5_0", 120.0, "Gb/s"),
    )


def test_the_first_sweep_has_nothing_to_compare():
    changes = D.diff(None, D.snapshot(previous_report()))
    assert changes.first and changes.newly_failing == () and changes.still_failing == 0
    assert D.render(changes, [], 3, 5, T0) == "Since the last sweep: first sweep: nothing to compare.\n"


def changes():
    return D.diff(D.snapshot(previous_report()), D.snapshot(current_report()))


def test_newly_failing_recovered_and_still_failing_follow_status_healthy():
    c = changes()
    assert (c.previous_run, c.previous_started) == ("20261129T100000Z_sweep", T0)
    assert c.newly_failing == (
        Finding("node1", "ib.ports", F, "mlx5_5/1: rate 200 Gb/s, expected >= 400 Gb/s"),
        Finding("node1", "kernel.version", E, "kernel: no majority among ..."),
        Finding("node2", "kernel.version", E, "kernel: no majority among ..."),
        Finding("node3", "cuda.version", F, "no CUDA driver"),
        Finding("node5", "gpu.health", F, "GPU1: volatile uncorrectable ECC 2, expected <= 0 (+1 more)"),
        Finding("node5", "nccl.version", F, "NCCL 2.23.4 on node5, expected 2.23.5 (3 nodes)"),
    )
    # unreachable is not healthy: coming back is a recovery; the old finding is what is shown
    assert c.recovered == (
        Finding("node2", "ib.ports", F, "mlx5_3/1: Down/Polling, expected Active/LinkUp"),
        Finding("node3", "gpu.health", U, UNREACHABLE),
        Finding("node3", "ib.ports", U, UNREACHABLE),
    )
    assert c.still_failing == 1  # node2 node.oom
    # node2's gpu.xid was not judged this time: not checked, never recovered
    assert c.not_checked == (Finding("node2", "gpu.xid", F, "Xid 79 on PCI:0000:b3:00: GPU has fallen off the bus"),)
    # node4 is missing: its failing gpu.health is neither recovered nor not_checked per check
    assert (c.new_nodes, c.missing_nodes) == (("node5",), ("node4",))


def test_versions_changed_name_node_key_old_and_new():
    assert changes().versions_changed == (
        VersionChange("node1", "nccl.version", "2.23.4", "2.23.5"),
        VersionChange("node2", "nccl.version", "2.23.4", "2.23.5"),
    )


def test_counter_rises_within_one_boot_resets_and_reboots_are_said_as_such():
    c = changes()
    assert c.counters_risen == (
        CounterRise("node1", "mlx5_0/1", "LinkDownedCounter", 0, 1),
        CounterRise("node1", "mlx5_0/1", "SymbolErrorCounter", 5, 50),
    )
    # mlx5_1/1 was read from sysfs last time, perfquery now: other widths, not compared
    assert c.counters_reset == (
        CounterReset("node1", "mlx5_2/1", "counters went down: cleared (perfquery -R) or reset"),
        CounterReset("node2", "", "rebooted since the last sweep (new boot id): counters restart at zero"),
    )


def test_offenders_count_unhealthy_sweeps_in_the_window_only():
    rows = [
        NodeSweep(0, "node1", F, ("ib.ports",)),
        NodeSweep(0, "node2", P),
        NodeSweep(1, "node1", U, ("gpu.health", "ib.ports")),
        NodeSweep(1, "node2", F, ("node.oom",)),
        NodeSweep(2, "node1", W),
        NodeSweep(2, "node2", F, ("node.oom",)),
        NodeSweep(2, "node3", F, ("gpu.xid",)),
        NodeSweep(3, "node1", F, ("ib.ports",)),
        NodeSweep(3, "node2", E, ("kernel.version",)),
    ]
    assert D.offenders(rows, 2, 3) == [
        Offender("node2", 3, 3, ("kernel.version", "node.oom")),
        Offender("node1", 2, 3, ("gpu.health", "ib.ports")),
    ]
    assert D.offenders(rows, 3, 4) == [
        Offender("node1", 3, 4, ("gpu.health", "ib.ports")),
        Offender("node2", 3, 4, ("kernel.version", "node.oom")),
    ]
    assert D.offenders(rows, 1, 1) == [
        Offender("node1", 1, 1, ("ib.ports",)),
        Offender("node2", 1, 1, ("kernel.version",)),
    ]
    assert D.offenders(rows[:2], 2, 5) == []  # one sweep so far: nobody failed twice
    assert D.offenders([], 1, 1) == []


def test_node_sweeps_of_a_snapshot_name_the_failing_checks():
    assert D.node_sweeps(D.snapshot(previous_report()), 7) == [
        NodeSweep(7, "node1", W, ()),
        NodeSweep(7, "node2", F, ("gpu.xid", "ib.ports", "node.oom")),
        NodeSweep(7, "node3", U, ("gpu.health", "ib.ports")),
        NodeSweep(7, "node4", F, ("gpu.health",)),
    ]


def test_the_changes_read_as_one_line_per_finding_naming_node_and_check():
    found = [Offender("node1", 2, 3, ("ib.ports",))]
    assert D.render(changes(), found, 2, 3, T1).splitlines() == [
        "Since the last sweep (20261129T100000Z_sweep, 1 h 2 min ago):",
        "newly failing:",
        "  node1  ib.ports  fail: mlx5_5/1: rate 200 Gb/s, expected >= 400 Gb/s",
        "  node[1-2]  kernel.version  error: kernel: no majority among ...",
        "  node3  cuda.version  fail: no CUDA driver",
        "  node5  gpu.health  fail: GPU1: volatile uncorrectable ECC 2, expected <= 0 (+1 more)",
        "  node5  nccl.version  fail: NCCL 2.23.4 on node5, expected 2.23.5 (3 nodes)",
        "recovered:",
        "  node2  ib.ports  (was fail: mlx5_3/1: Down/Polling, expected Active/LinkUp)",
        "  node3  gpu.health  (was unreachable: unreachable: connection refused by node3:22)",
        "  node3  ib.ports  (was unreachable: unreachable: connection refused by node3:22)",
        "not checked this time (failing last time):",
        "  node2  gpu.xid  (was fail: Xid 79 on PCI:0000:b3:00: GPU has fallen off the bus)",
        "versions changed:",
        "  node[1-2]  nccl.version  2.23.4 -> 2.23.5",
        "counters risen:",
        "  node1  ib.counters  mlx5_0/1 LinkDownedCounter 0 -> 1 (+1)",
        "  node1  ib.counters  mlx5_0/1 SymbolErrorCounter 5 -> 50 (+45)",
        "counters reset (not counted as a rise):",
        "  node1  ib.counters  mlx5_2/1: counters went down: cleared (perfquery -R) or reset",
        "  node2  ib.counters  rebooted since the last sweep (new boot id): counters restart at zero",
        "new nodes: node5",
        "not checked (in the last sweep, not in this one): node4",
        "still failing: 1 (node, check) pair.",
        "repeat offenders (not healthy in at least 2 of the last 3 sweeps):",
        "  node1  failed in 2 of the last 3  ib.ports",
    ]


def test_no_change_says_so_and_long_sections_point_at_the_report():
    snap = D.snapshot(previous_report())
    later = D.SweepSnapshot(**{**snap.__dict__, "run_id": "later", "started": T1})
    assert D.render(D.diff(snap, later), [], 3, 5, T0 + timedelta(days=2, hours=3)).splitlines() == [
        "Since the last sweep (20261129T100000Z_sweep, 2 d 3 h ago):",
        "no change.",
        "still failing: 6 (node, check) pairs.",
    ]
    many = [Finding(f"node{i}", "ib.ports", F, f"port {i} down") for i in range(45)]
    lines = D.render(D.Changes("x", T0, newly_failing=tuple(many)), [], 3, 5, T0 + timedelta(seconds=59)).splitlines()
    assert lines[0] == "Since the last sweep (x, 59 s ago):"
    assert len(lines) == 1 + 1 + D.SECTION_MAX_LINES + 1 + 1
    assert lines[-2] == "  ... and 5 more (all in the report's summary.txt)"
    assert (
        len(D.render(D.Changes("x", T0, newly_failing=tuple(many)), [], 3, 5, T0, max_lines=None).splitlines())
        == 1 + 1 + 45 + 1
    )  # the report's summary.txt: all of them


def test_the_json_form_carries_every_change_and_the_offender_rule():
    d = D.to_dict(changes(), [Offender("node1", 2, 3, ("ib.ports",))], 2, 3)
    assert d["previous_run"] == "20261129T100000Z_sweep" and d["first"] is False
    assert d["previous_started"] == "2026-11-29T10:00:00.000000Z"
    assert d["newly_failing"][0] == {
        "node": "node1",
        "check": "ib.ports",
        "status": "fail",
        "message": "mlx5_5/1: rate 200 Gb/s, expected >= 400 Gb/s",
    }
    assert d["recovered"][0] == {
        "node": "node2",
        "check": "ib.ports",
        "was": "fail",
        "message": "mlx5_3/1: Down/Polling, expected Active/LinkUp",
    }
    assert d["versions_changed"][0] == {"node": "node1", "key": "nccl.version", "old": "2.23.4", "new": "2.23.5"}
    assert d["counters_risen"][1] == {
        "node": "node1",
        "port": "mlx5_0/1",
        "counter": "SymbolErrorCounter",
        "old": 5,
        "new": 50,
    }
    assert (d["still_failing"], d["new_nodes"], d["missing_nodes"]) == (1, ["node5"], ["node4"])
    assert d["offenders"] == {
        "k": 2,
        "n": 3,
        "nodes": [{"node": "node1", "failed_in": 2, "of_last": 3, "checks": ["ib.ports"]}],
    }


def test_a_node_without_any_result_is_an_error_row_never_silence():
    bare = report("r", T0, ["node1", "node9"], [r("node1", "ib.ports", P, "ok")])
    snap = D.snapshot(bare)
    assert snap.results[-1] == ResultRow("node9", "-", E, "no check ran on this node")
    assert snap.node_statuses == {"node1": P, "node9": E}
    assert D.diff(D.snapshot(report("q", T0, ["node9"], [r("node9", "ib.ports", P, "ok")])), snap).newly_failing == (
        Finding("node9", "-", E, "no check ran on this node"),
    )


# ---------------------------------------------------------------- review: what a cut sweep and odd values must not do

CUT = "ib.ports probe not run: the run deadline was reached"


def sweep_of(run_id, rows, complete=True, nodes=("node1", "node2", "node3"), started=T0, **more) -> SweepSnapshot:
    return SweepSnapshot(
        run_id,
        "sweep",
        started,
        started + timedelta(seconds=600),
        complete,
        nodes,
        tuple(ResultRow(*row) for row in rows),
        **more,
    )


def test_a_check_the_deadline_cut_neither_recovers_nor_hides_a_failure():
    cut = sweep_of(
        "cut",
        [("node1", "ib.ports", S, CUT), ("node2", "ib.ports", F, "mlx5_3/1: Down"), ("node3", "ib.ports", S, CUT)],
        complete=False,
        incomplete_reason="the run deadline was reached",
    )
    now = sweep_of(
        "now",
        [
            ("node1", "ib.ports", F, "mlx5_0/1: Down"),
            ("node2", "ib.ports", S, CUT),
            ("node3", "ib.ports", P, "8 of 8 pass"),
        ],
        started=T1,
    )
    c = D.diff(cut, now)
    # node1: skipped is no judgment, so its failure now is new (it was counted "still failing")
    assert c.newly_failing == (Finding("node1", "ib.ports", F, "mlx5_0/1: Down"),)
    # node3: a pass after a skip is no recovery (it was listed as "recovered (was skipped)")
    assert c.recovered == () and c.still_failing == 0
    # node2 failed, then the deadline cut it: not checked, never "still failing"
    assert c.not_checked == (Finding("node2", "ib.ports", F, "mlx5_3/1: Down"),)
    assert c.previous_incomplete == "the run deadline was reached"
    assert D.render(c, [], 3, 5, T1).splitlines() == [
        "Since the last sweep (cut, 1 h 2 min ago; it was cut short: the run deadline was reached):",
        "newly failing:",
        "  node1  ib.ports  fail: mlx5_0/1: Down",
        "not checked this time (failing last time):",
        "  node2  ib.ports  (was fail: mlx5_3/1: Down)",
        "still failing: 0 (node, check) pairs.",
    ]
    again = D.diff(now, replace_run(now, "again"))
    assert (again.newly_failing, again.not_checked, again.still_failing) == ((), (), 2)  # the same again: no news


def replace_run(snap: SweepSnapshot, run_id: str) -> SweepSnapshot:
    return SweepSnapshot(**{**snap.__dict__, "run_id": run_id})


def test_failing_another_way_is_a_change_not_still_failing():
    before = sweep_of(
        "a",
        [
            ("node1", "ib.ports", F, "mlx5_3/1: Down"),
            ("node2", "gpu.health", F, "GPU3: remap"),
            ("node3", "gpu.health", E, "GPU2: ECC not reported"),
        ],
    )
    after = sweep_of(
        "b",
        [
            ("node1", "ib.ports", U, "unreachable: connect timeout after 10 s"),
            ("node2", "gpu.health", F, "GPU3: remap"),
            ("node3", "gpu.health", F, "GPU2: ECC 4"),
        ],
    )
    c = D.diff(before, after)
    assert c.status_changed == (
        StatusChange("node1", "ib.ports", F, U, "unreachable: connect timeout after 10 s"),
        StatusChange("node3", "gpu.health", E, F, "GPU2: ECC 4"),
    )
    assert (c.newly_failing, c.recovered, c.still_failing) == ((), (), 1)
    assert D.render(c, [], 3, 5, T0).splitlines()[1:4] == [
        "still not healthy, another status:",
        "  node1  ib.ports  unreachable: unreachable: connect timeout after 10 s  (was fail)",
        "  node3  gpu.health  fail: GPU2: ECC 4  (was error)",
    ]
    assert D.to_dict(c, [], 3, 5)["status_changed"][0] == {
        "node": "node1",
        "check": "ib.ports",
        "was": "fail",
        "status": "unreachable",
        "message": "unreachable: connect timeout after 10 s",
    }


def test_a_node_the_deadline_cut_is_no_repeat_offender():
    rows = [NodeSweep(i, "node9", S, ()) for i in range(3)] + [
        NodeSweep(i, "node1", F, ("ib.ports",)) for i in range(3)
    ]
    assert D.offenders(rows, 2, 3) == [Offender("node1", 3, 3, ("ib.ports",))]
    mixed = sweep_of("m", [("node1", "ib.ports", S, CUT), ("node1", "gpu.health", F, "GPU3: remap")])
    assert D.node_sweeps(mixed, 0)[0] == NodeSweep(0, "node1", F, ("gpu.health",))  # the cut check is no offence


def test_a_nan_or_infinite_bandwidth_is_no_measurement():
    pairs = {
        "results": [
            {"server": "node1", "client": "node2", "device": "mlx5_0", "gbps": float("nan")},
            {"server": "node1", "client": "node2", "device": "mlx5_1", "gbps": 390.0},
        ]
    }
    rep = report(
        "r",
        T0,
        ["node1", "node2"],
        [
            r(
                "node1",
                "nccl.allreduce_single",
                P,
                "all_reduce: busbw nan GB/s",
                "all_reduce",
                {"busbw_plateau_gbs": float("nan")},
            ),
            r(
                "node2",
                "nccl.allreduce_single",
                P,
                "all_reduce: busbw inf GB/s",
                "all_reduce",
                {"busbw_plateau_gbs": float("inf")},
            ),
        ],
        extras={"ib.pairs": pairs},
    )
    assert D.snapshot(rep).measurements == (
        Measurement("node1", "ib.pairs", "ib_write_bw_best", "mlx5_1", 390.0, "Gb/s"),
        Measurement("node2", "ib.pairs", "ib_write_bw_best", "mlx5_1", 390.0, "Gb/s"),
    )


def test_an_unreadable_history_is_not_a_first_sweep():
    c = D.Changes(None, unread="could not read the sweep history h.sqlite: database disk image is malformed")
    assert not c.first
    assert D.render(c, [], 3, 5, T0) == (
        "Since the last sweep: not compared: could not read the sweep history "
        "h.sqlite: database disk image is malformed\n"
    )
    assert D.to_dict(c, [], 3, 5)["first"] is False


def nvlink(node, gpu, boot, **values) -> CheckResult:
    snap = {"source": "nvml", "clock": 1764410400.0, "uptime": 5000.0, "boot_id": boot, "counters": values, "links": {}}
    return r(node, "nvlink.errors", P, f"{gpu}: no NVLink error counter rose", gpu, {"window_s": 2.0, "snapshot": snap})


def test_nvlink_counters_are_kept_and_compared_with_the_last_sweep():
    before = report("20261129T100000Z_sweep", T0, ["node1"], [nvlink("node1", "GPU3", "b1", replay=0, crc_flit=5)])
    after = report(
        "20261129T110230Z_sweep",
        T1,
        ["node1", "node2"],
        [nvlink("node1", "GPU3", "b1", replay=2, crc_flit=5), nvlink("node2", "GPU0", "c1", recovery=1)],
    )
    old, new = D.snapshot(before), D.snapshot(after)
    assert CounterRow("node1", "GPU3", "crc_flit", 5, "b1", "nvml") in new.counters
    changes = D.diff(old, new)
    assert changes.counters_risen == (CounterRise("node1", "GPU3", "replay", 0, 2),)
    assert "nvlink.errors  GPU3 replay 0 -> 2 (+2)" in D.render(changes, [], 3, 5, T1)
    reset = D.counter_changes(new.counters, old.counters)[1]
    assert reset == (
        CounterReset("node1", "GPU3", "counters went down: reset (GPU reset, nvidia-smi nvlink -r)", "nvlink.errors"),
    )
