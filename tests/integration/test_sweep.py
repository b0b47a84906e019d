"""Three fleet sweeps of node[1-4] with the shipped sweep playbook, as the hourly timer runs them:
the faults change between sweeps and each sweep says what changed since the last, keeps its
history, flags the repeat offender and writes the Prometheus textfile.

    sweep 1: node1 has a GPU row remap pending (gpu.health fails); the rest healthy
    sweep 2: node1 still; node3's mlx5_3 port is down (ib.ports); node4's mlx5_3 link went down
             during the sweep (ib.counters: LinkDownedCounter +1, SymbolErrorCounter +42)
    sweep 3: all repaired, and every node's NCCL changed (2.29.2 -> 2.21.5)
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.scenarios import (
    IBSTAT_PORT_DOWN,
    NCCL_GOOD,
    NCCL_STALE,
    NVML_REMAP_PENDING,
    GpuLibrary,
    Replay,
    apply,
    dcgm,
    gpu_node,
    ib_counters,
    node_os,
)
from harness.sim_playbooks import shipped_for_sim
from integration.runs import nodecheck

from nodecheck.config.playbook import load_playbook

NODES = ("node1", "node2", "node3", "node4")


def layout(sweep: int) -> dict:
    nccl = NCCL_STALE if sweep == 3 else NCCL_GOOD
    nodes = {n: gpu_node(nccl=nccl) + ib_counters() for n in NODES}
    if sweep in (1, 2):
        nodes["node1"] = gpu_node(nvml=NVML_REMAP_PENDING) + ib_counters()
    if sweep == 2:
        nodes["node3"] = (
            [a for a in gpu_node() if getattr(a, "tool", "") != "ibstat"]
            + [Replay("ibstat", IBSTAT_PORT_DOWN)]
            + ib_counters()
        )
        nodes["node4"] = gpu_node() + ib_counters(link_went_down_on="mlx5_3")
    # the node itself as the sweep's node checks read it (every one of them passes), and DCGM's level 2
    # and the GPU benchmark (CuPy on every node) on these idle nodes
    return {n: actions + node_os() + dcgm() + [GpuLibrary()] for n, actions in nodes.items()}


def sweep(cluster, tmp_path, n: int, *extra) -> tuple[int, str, str]:
    apply(cluster, layout(n))
    code, out, err, _ = nodecheck(
        "sweep",
        str(cluster.inventory_path),
        "--playbook",
        str(shipped_for_sim("sweep", tmp_path)),  # the shipped sweep as the simulated nodes can meet it
        "--nodes",
        "node[1-4]",
        "--output-dir",
        str(tmp_path / "reports"),
        "--offender",
        "2/3",
        "--metrics",
        str(tmp_path / "nodecheck.prom"),
        "--allow-disruptive",  # as the shipped unit runs it: DCGM level 2 on the idle nodes
        *extra,
    )
    assert code != 64, err
    return code, out, (tmp_path / "nodecheck.prom").read_text()


def section(out: str) -> list[str]:
    """The "Since the last sweep" section of the table output, up to the fleet page and report lines."""
    lines = out.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("Since the last sweep"))
    return [ln for ln in lines[start:] if not ln.startswith(("report: ", "fleet page: "))]


def test_three_sweeps_report_changes_history_offenders_and_metrics(cluster, tmp_path):
    code, out, prom = sweep(cluster, tmp_path, 1)
    assert code == 2
    assert section(out) == ["Since the last sweep: first sweep: nothing to compare."]
    [page] = [ln.removeprefix("fleet page: ") for ln in out.splitlines() if ln.startswith("fleet page: ")]
    assert page.endswith("/fleet.html") and "node1" in Path(page).read_text()
    assert (Path(page).parent / "report.html").is_file()
    assert 'nodecheck_check_status{node="node1",check="gpu.health"} 6\n' in prom
    assert 'nodecheck_check_status{node="node3",check="ib.ports"} 0\n' in prom

    code, out, prom = sweep(cluster, tmp_path, 2)
    assert code == 2
    lines = section(out)
    assert lines[0].startswith("Since the last sweep (") and lines[0].endswith(" s ago):")
    assert lines[1] == "newly failing:"
    assert lines[2] == "  node3  ib.ports  fail: mlx5_3/1: Down/Polling, expected Active/LinkUp"
    assert lines[3].startswith("  node4  ib.counters  fail: mlx5_3/1: LinkDownedCounter +1 in ")
    assert lines[4:] == [
        "counters risen:",
        "  node4  ib.counters  mlx5_3/1 LinkDownedCounter 0 -> 1 (+1)",
        "  node4  ib.counters  mlx5_3/1 SymbolErrorCounter 0 -> 42 (+42)",
        "still failing: 1 (node, check) pair.",
        "repeat offenders (not healthy in at least 2 of the last 3 sweeps):",
        "  node1  failed in 2 of the last 2  gpu.health",
    ]
    assert 'nodecheck_check_status{node="node3",check="ib.ports"} 6\n' in prom
    assert 'nodecheck_check_healthy{node="node3",check="ib.ports"} 0\n' in prom
    assert 'nodecheck_node_healthy{node="node3"} 0\n' in prom
    assert 'nodecheck_repeat_offender{node="node1"} 1\n' in prom

    code, out, prom = sweep(cluster, tmp_path, 3, "--format", "json")
    assert code == 0, out
    doc = json.loads(out)
    changes = doc["sweep"]["changes"]
    assert [(c["node"], c["check"], c["was"]) for c in changes["recovered"]] == [
        ("node1", "gpu.health", "fail"),
        ("node3", "ib.ports", "fail"),
        ("node4", "ib.counters", "fail"),
    ]
    assert changes["newly_failing"] == [] and changes["still_failing"] == 0
    assert changes["versions_changed"] == [
        {"node": n, "key": "nccl.version", "old": NCCL_GOOD, "new": NCCL_STALE} for n in NODES
    ]
    # the repaired port's counters went back down: a reset, never a rise
    assert changes["counters_risen"] == []
    assert changes["counters_reset"] == [
        {
            "node": "node4",
            "port": "mlx5_3/1",
            "reason": "counters went down: cleared (perfquery -R) or reset",
            "check": "ib.counters",
        }
    ]
    assert changes["offenders"]["nodes"] == [{"node": "node1", "failed_in": 2, "of_last": 3, "checks": ["gpu.health"]}]
    assert 'nodecheck_check_status{node="node3",check="ib.ports"} 0\n' in prom
    assert 'nodecheck_nodes{status="pass"} 4\n' in prom

    code, out, err, _ = nodecheck(
        "history",
        "--history",
        str(tmp_path / "reports" / "history.sqlite"),
        "--node",
        "node3",
        "--check",
        "ib.ports",
        "--format",
        "json",
    )
    assert code == 0, err
    sweeps = json.loads(out)["sweeps"]
    assert [s["status"] for s in sweeps] == ["pass", "fail", "pass"]
    assert sweeps[1]["results"] == [
        {
            "node": "node3",
            "check": "ib.ports",
            "status": "fail",
            "subject": "mlx5_3/1",
            "message": "mlx5_3/1: Down/Polling, expected Active/LinkUp",
        }
    ]
    assert all(s["report_dir"].startswith(str(tmp_path / "reports")) for s in sweeps)
    evidence = json.loads(
        (tmp_path / "reports" / sweeps[1]["report_dir"].rsplit("/", 1)[1] / "report.json").read_text()
    )
    assert evidence["run_id"] == sweeps[1]["run_id"]
    code, out, err, _ = nodecheck(
        "history", "--history", str(tmp_path / "reports" / "history.sqlite"), "--node", "node1"
    )
    assert code == 0, err
    rows = [ln.split() for ln in out.splitlines() if ln.startswith("20")]  # one per sweep; details wrap
    assert [row[3] for row in rows] == ["fail", "fail", "pass"]
    assert rows[0][4:7] == ["gpu.health", "fail:", "GPU3:"] and rows[2][4:] == [
        str(len(load_playbook(str(tmp_path / "sweep.yml")).checks)),  # the sweep as run (harness/sim_playbooks.py)
        "checks",
        "pass",
        str(tmp_path / "reports" / sweeps[2]["run_id"]),
    ]
