"""The fabric checks through `nodecheck run` on the simulated cluster: pairwise ib_write_bw (the fake
rendezvouses over real TCP between the nodes), IB counters before and after, and RoCE GID tables on
real veth netdevs that nodecheck really takes down and up."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from harness.scenarios import IB_CAS, IBSTAT_HEALTHY, Fabric, Missing, Replay, RocePort, Script, apply, ib_counters
from integration.runs import results, run_checks

pytestmark = pytest.mark.integration


def run(cluster, tmp_path, book: str, nodes: str, *extra):
    return run_checks(cluster, tmp_path, book, nodes, *extra)


def ib_nodes(cluster, n: int, link_down: str | None = None, **fabric) -> dict:
    layout = {"*": [Fabric(devices=IB_CAS, **fabric)]}
    for i in range(1, n + 1):
        node = f"node{i}"
        layout[node] = [Replay("ibstat", IBSTAT_HEALTHY)] + ib_counters(link_down if node == "node3" else None)
    return layout


PAIRS = "  ib.pairs: {devices: [mlx5_0, mlx5_3], duration_s: 1, test_timeout_s: 4}\n"


def test_pair_tests_name_the_bad_node_and_the_bad_link_and_counters_the_link_that_went_down(cluster, tmp_path):
    apply(
        cluster,
        ib_nodes(
            cluster, 8, link_down="mlx5_3", nodes=(("node5", (("gbps", 120.0),)),), links=(("node1", "node2", 90.0),)
        ),
    )
    code, doc, wall = run(cluster, tmp_path, "  ib.counters: {}\n" + PAIRS, "node[1-8]")
    pairs = results(doc, "ib.pairs")
    assert pairs["node5"] == [
        (
            "fail",
            "bad node: fails with 2/2 partners, which pass with others: node4: 2 HCAs "
            "both ways at 120 Gb/s; node6: 2 HCAs both ways at 120 Gb/s (expected >= "
            "320 Gb/s)",
        )
    ]
    link = (
        "fail",
        "bad link node1-node2: both pass with other partners, not with each other: 2 HCAs both ways "
        "at 90 Gb/s (expected >= 320 Gb/s)",
    )
    assert pairs["node1"] == [link] and pairs["node2"] == [link]
    for node in ("node3", "node7", "node8"):
        [(status, message)] = pairs[node]
        assert status == "pass" and message.startswith("8 tests with 2 partners pass; slowest 392 Gb/s"), message
    for node, good in (("node4", "node3"), ("node6", "node7")):
        [(status, message)] = pairs[node]
        assert (status, message) == (
            "pass",
            f"4 tests with 1 partner pass; slowest 392 Gb/s (mlx5_0 with {good}); "
            "its failures with node5 are blamed on that node",
        )
    counters = results(doc, "ib.counters")
    bad = sorted(r for r in counters["node3"] if r[0] != "pass")
    assert [s for s, _ in bad] == ["fail", "warn"]
    assert bad[0][1].startswith("mlx5_3/1: LinkDownedCounter +1 in ")
    assert bad[1][1].startswith("mlx5_3/1: SymbolErrorCounter +42 in ") and "window too short" in bad[1][1]
    assert all(s == "pass" for node in ("node1", "node8") for s, _ in counters[node])
    assert len(counters["node1"]) == len(IB_CAS)  # one verdict per IB port
    extras = doc["extras"]["ib.pairs"]
    assert (extras["rounds"], extras["pairs_tested"], extras["tests"]) == (2, 8, 32)  # both directions
    assert extras["bad_nodes"] == ["node5"] and extras["bad_links"] == [["node1", "node2"]]
    assert extras["matrix_gbps"]["node5"]["node4"] == 120.0 and extras["matrix_gbps"]["node3"]["node4"] == 392.0
    probes = {(c["node"], c["probe"]) for c in doc["captures"]}
    assert {
        ("node1", "ib_write_bw.r1.server-start"),
        ("node2", "ib_write_bw.r1.client"),
        ("node1", "ib_write_bw.r1.server"),
        ("node3", "ib_counters.after"),
    } <= probes
    assert code == 2 and wall < 30


def _ib_write_bw_processes() -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if (
                proc.name.isdigit()
                and b"ib_write_bw" in (proc / "cmdline").read_bytes()
                and "\nState:\tZ" not in (proc / "status").read_text()
            ):
                found.append(proc.name)
        except OSError:
            pass
    return found


def test_a_hung_node_is_a_timeout_for_its_pairs_and_leaves_no_test_behind(cluster, tmp_path):
    apply(cluster, ib_nodes(cluster, 6, nodes=(("node6", (("hang", True),)),)))
    code, doc, wall = run(cluster, tmp_path, PAIRS, "node[1-6]")
    pairs = results(doc, "ib.pairs")
    [(status, message)] = pairs["node6"]
    assert status == "fail" and message.startswith("bad node: fails with 2/2 partners, which pass with others:")
    assert "test hung, killed after 4 s" in message
    statuses = {r["status"] for r in doc["extras"]["ib.pairs"]["results"] if "node6" in (r["server"], r["client"])}
    assert statuses == {"timeout"}
    assert all(pairs[n][0][0] == "pass" for n in ("node1", "node2", "node3", "node4", "node5"))
    deadline = time.monotonic() + 10  # the servers' own `timeout` is the backstop
    while _ib_write_bw_processes() and time.monotonic() < deadline:
        time.sleep(0.3)
    assert _ib_write_bw_processes() == []
    assert code == 2 and wall < 30


def test_all_pairs_test_every_pair_once_in_n_minus_one_rounds(cluster, tmp_path):
    apply(cluster, ib_nodes(cluster, 6))
    code, doc, _ = run(cluster, tmp_path, "  ib.pairs: {devices: [mlx5_0], pairing: all}\n", "node[1-6]")
    extras = doc["extras"]["ib.pairs"]
    assert (extras["rounds"], extras["pairs_tested"], extras["all_pairs_would_be"]) == (5, 15, 15)
    assert sorted(len(row) for row in extras["matrix_gbps"].values()) == [5] * 6
    assert code == 0


def test_a_missing_hca_or_tool_fails_the_pairs_with_the_tools_words(cluster, tmp_path):
    layout = ib_nodes(cluster, 6, nodes=(("node4", (("devices_missing", ["mlx5_3"]),)),))
    layout["node6"] = layout["node6"] + [Missing("ib_write_bw")]
    apply(cluster, layout)
    code, doc, _ = run(cluster, tmp_path, PAIRS, "node[1-6]")
    pairs = results(doc, "ib.pairs")
    [(status, message)] = pairs["node4"]
    assert status == "fail" and "IB device mlx5_3 not found; Unable to find the Infiniband/RoCE device" in message
    [(status, message)] = pairs["node6"]
    assert status == "error" and "ib_write_bw not found (perftest not installed)" in message, message
    assert code == 2


def test_counters_fall_back_to_sysfs_without_perfquery(cluster, tmp_path):
    from nodecheck.checks.ib_counters import JUDGED
    from nodecheck.judging.counter_rules import COUNTERS

    counters = {
        **{COUNTERS[n].sysfs_name: "0\n" for n in JUDGED},
        "symbol_error": "3\n",
        "port_xmit_wait": "4294967295\n",
    }
    files = {
        "mlx5_0/ports/1/link_layer": "InfiniBand\n",
        "mlx5_0/ports/1/state": "4: ACTIVE\n",
        **{f"mlx5_0/ports/1/counters/{name}": value for name, value in counters.items()},
    }
    apply(cluster, {})
    cluster.fake_sysfs("node1", files)
    code, doc, _ = run(cluster, tmp_path, "  ib.counters: {}\n", "node1")
    [(status, message)] = results(doc, "ib.counters")["node1"]
    assert status == "pass" and message.startswith("mlx5_0/1: no error counter rose in ")
    assert message.endswith(
        "(sysfs counters); PortXmitWait saturated at 4294967295 (congestion, not judged); "
        "clear with perfquery -R (basic) / perfquery -x -R (extended), then re-run"
    )
    assert code == 0


NMCLI = (
    'case "$*" in\n  *RUNNING*) echo running ;;\n'
    '  *DEVICE*) printf "lo:loopback:unmanaged\\nrnic{i}:ethernet:connected\\n" ;;\n  *) exit 2 ;;\nesac'
)


def test_roce_gid_tables_networkmanager_and_a_real_port_flap(cluster, tmp_path):
    apply(
        cluster,
        {
            "node1": [RocePort("stable")],
            "node2": [RocePort("networkmanager"), Script("nmcli", NMCLI.format(i=2))],
            "node3": [RocePort("stable"), RocePort("stable", ca="mlx5_1")],
        },
    )
    book = "  roce.gids: {gid_index: 3}\n  roce.networkmanager: {}\n"
    code, doc, _ = run(cluster, tmp_path, book, "node[1-3]")
    gids = results(doc, "roce.gids")
    assert gids["node1"] == [("pass", "mlx5_0/1 (rnic1): RoCE v2 IPv4 GID 10.77.0.1 at index 3 (the playbook)")]
    [(status, message)] = results(doc, "roce.networkmanager")["node2"]
    assert status == "warn" and message.startswith("NetworkManager manages RDMA netdevs rnic2 (mlx5_0/1, connected)")
    assert "unmanaged-devices=interface-name:rnic2" in message
    assert results(doc, "roce.networkmanager")["node1"] == [
        ("pass", "NetworkManager is not installed (nmcli not found)")
    ]
    assert code == 1

    flap = "  roce.gid_stability: {down_s: 0.5, settle_s: 0.5, wait_s: 10, guard_s: 8}\n"
    code, doc, _ = run(cluster, tmp_path, flap, "node[1-3]")  # listed, but no --allow-disruptive
    assert {s for node in results(doc, "roce.gid_stability").values() for s, _ in node} == {"skipped"}
    assert code == 3
    assert (
        "state DOWN" not in subprocess.run(["ip", "-o", "link", "show", "rnic2"], capture_output=True, text=True).stdout
    )  # nothing was touched

    code, doc, _ = run(cluster, tmp_path, flap, "node[1-3]", "--allow-disruptive")
    stability = results(doc, "roce.gid_stability")
    [(status, message)] = stability["node2"]
    assert (
        status == "fail"
        and ("mlx5_0/1 (rnic2): RoCE v2 IPv4 GID changed across a port flap: 10.77.0.2 moved from index 3 to 5")
        in message
    )
    [(status, message)] = stability["node1"]
    assert status == "pass" and message.startswith(
        "mlx5_0/1 (rnic1): RoCE v2 IPv4 GID stable across the flap (10.77.0.1 at 3); port ACTIVE, address back after "
    )
    # two ports on one node: each flapped and judged on its own (the table walk must not move $p)
    assert [(st, m.split(":")[0]) for st, m in stability["node3"]] == [
        ("pass", "mlx5_0/1 (rnic3)"),
        ("pass", "mlx5_1/1 (rnic3x1)"),
    ]
    assert code == 2

    # after the flap the table is what the next job sees: index 3 is no longer the v2 GID on node2
    code, doc, _ = run(cluster, tmp_path, book, "node[1-3]")
    assert results(doc, "roce.gids")["node2"] == [
        (
            "fail",
            "mlx5_0/1 (rnic2): GID index 3 (the playbook) is empty, not RoCE v2 IPv4; the RoCE v2 IPv4 GID is at 5",
        ),
        (
            "warn",
            "mlx5_0/1: RoCE v2 IPv4 GID at index 5 on node2, at 3 on 2 nodes: a job pinned to one index "
            "breaks on the others",
        ),
    ]


def test_the_flap_refuses_a_node_with_gpu_processes(cluster, tmp_path):
    smi = 'case "$*" in\n  *query-compute-apps*) echo "4242, python3" ;;\n  *) exit 2 ;;\nesac'
    apply(cluster, {"node4": [RocePort("stable"), Script("nvidia-smi", smi)]})
    code, doc, _ = run(
        cluster,
        tmp_path,
        "  roce.gid_stability: {down_s: 0.5, settle_s: 0, guard_s: 8}\n",
        "node4",
        "--allow-disruptive",
    )
    [(status, message)] = results(doc, "roce.gid_stability")["node4"]
    assert (status, message) == ("skipped", "mlx5_0/1 (rnic4): not flapped: GPU processes are running: 4242, python3")
    assert code == 3
    # where slurmd runs, a Slurm allocation and a squeue that cannot answer both refuse (fail closed)
    slurmd = tmp_path / "slurmd"  # a process named slurmd (the nodes share PIDs)
    shutil.copy("/bin/sleep", slurmd)
    daemon = subprocess.Popen([str(slurmd), "60"])
    try:
        for squeue, why in (
            ("echo 4242", "Slurm jobs are allocated on this node: 4242"),
            (
                'echo "slurm_load_jobs error: Unable to contact slurm controller" >&2; exit 1',
                "slurmd runs here and squeue cannot tell whether jobs are allocated (it failed or timed out)",
            ),
        ):
            apply(cluster, {"node4": [RocePort("stable"), Script("squeue", squeue)]})
            code, doc, _ = run(
                cluster,
                tmp_path,
                "  roce.gid_stability: {down_s: 0.5, settle_s: 0, guard_s: 8}\n",
                "node4",
                "--allow-disruptive",
            )
            assert results(doc, "roce.gid_stability")["node4"] == [("skipped", f"mlx5_0/1 (rnic4): not flapped: {why}")]
    finally:
        daemon.kill()
        daemon.wait()


def _flap_scripts(netdev: str) -> list[int]:
    """The flap script's processes (the `sh -c` holding roce_table for this netdev), not the guard."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if proc.name.isdigit() and any(b"roce_table" in part for part in cmd) and netdev.encode() in cmd:
            found.append(int(proc.name))
    return found


def test_a_lost_ssh_session_mid_flap_cannot_leave_the_port_down(cluster, tmp_path):
    import os
    import signal

    apply(cluster, {"node5": [RocePort("stable")]})
    (tmp_path / "book.yml").write_text(
        "version: 1\nchecks:\n  roce.gid_stability: {down_s: 5, settle_s: 0, wait_s: 10, guard_s: 8}\n"
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "nodecheck",
            "run",
            str(cluster.inventory_path),
            "--nodes",
            "node5",
            "--playbook",
            str(tmp_path / "book.yml"),
            "--allow-disruptive",
            "--format",
            "json",
            "--output-dir",
            str(tmp_path / "reports"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def up() -> bool:
        return ",UP" in subprocess.run(["ip", "-o", "link", "show", "rnic5"], capture_output=True, text=True).stdout

    deadline = time.monotonic() + 15
    while up() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not up(), "the flap never took rnic5 down"
    went_down = time.monotonic()
    # the operator's network drops: the session dies and with it the script doing the flap, which
    # would have brought the port up after 5 s
    assert cluster.kill_ssh_sessions("node5") >= 1
    killed = _flap_scripts("rnic5")
    for pid in killed:
        os.kill(pid, signal.SIGKILL)
    assert killed
    while not up() and time.monotonic() - went_down < 30:
        time.sleep(0.05)
    back_after = time.monotonic() - went_down
    assert up(), "the port is still down"
    assert 6 < back_after < 12, back_after  # the guard's 8 s, not the flap's 5 s
    out, err = proc.communicate(timeout=60)
    state = (cluster.sysfs_dir("node5") / "mlx5_0/ports/1/state").read_text()
    assert state == "4: ACTIVE\n"
    [(status, message)] = results(json.loads(out), "roce.gid_stability")["node5"]
    assert status == "error" and "the flap was cut short" in message, message
    assert "the port is back (4: ACTIVE, address 10.77.0.5/32" in message


def test_pairs_over_roce_use_the_gid_index_and_judge_each_port_by_its_own_rate(cluster, tmp_path):
    roce_ibstat = "ibstat/gpud-h100-cx7-roce-12ca-down-polling-disabled.txt"  # 400 and 100 Gb/s ports
    layout = {"*": [Fabric(devices=("mlx5_0", "mlx5_1"), link_type="Ethernet", default_gbps=95.0)]}
    layout.update({f"node{i}": [Replay("ibstat", roce_ibstat)] for i in range(1, 5)})
    apply(cluster, layout)
    code, doc, _ = run(
        cluster,
        tmp_path,
        "  ib.pairs: {link_layer: Ethernet, devices: [mlx5_0, mlx5_1], gid_index: 3, "
        "duration_s: 1, test_timeout_s: 4}\n",
        "node[1-4]",
    )
    tests = doc["extras"]["ib.pairs"]["results"]
    # 95 Gb/s: below 80 % of mlx5_0's 400 Gb/s, fine for mlx5_1's 100 Gb/s (>= 90 %)
    assert {(t["device"], t["status"]) for t in tests} == {("mlx5_0", "fail"), ("mlx5_1", "pass")}
    clients = [c for c in doc["captures"] if c["probe"].endswith(".client")]
    assert clients and all("-x 3" in " ".join(doc["argvs"][c["argv"]]) for c in clients)
    assert code == 2
