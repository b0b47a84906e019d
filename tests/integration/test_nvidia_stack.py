"""NVIDIA's own diagnostics and the NVLink fabric end to end (issue 20): real sshd nodes, the real
NVML probe over stdin against the fake nvidia-ml-py, dcgmi replaying real (and derived) DCGM outputs,
the Fabric Manager as a process, the driver's libraries laid out in each node's own mount namespace.

One fault per node (harness.scenarios.NVIDIA_STACK): six HGX H100 boards and four GB200 trays of one
rack; each broken node is named by exactly one check, with one precise reason."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from harness.scenarios import NVIDIA_STACK, apply, dcgm, hgx_node

from nodecheck.core.model import Status

# the idle guard must find no slurmd: no Slurm an earlier test left up (tests/integration/conftest.py)
pytestmark = pytest.mark.usefixtures("no_slurm")


HGX_PLAYBOOK = """\
version: 1
deadline_s: 300
checks:
  gpu.dcgm_diag: {level: 2, test_timeout_s: 60}
  nvlink.fabric: {fabric_manager: auto, gpu_fabric: required, nvswitches: 4, active_links_per_gpu: 18}
  nvlink.errors: {min_window_s: 1}
  nvidia.libraries: {}
"""
GB200_PLAYBOOK = """\
version: 1
deadline_s: 300
checks:
  gpu.dcgm_diag: {test_timeout_s: 60}
  nvlink.fabric: {fabric_manager: ignore, gpu_fabric: required, active_links_per_gpu: 18}
  nvlink.domain: {group_label: nvl_domain}
  nvlink.errors: {min_window_s: 1}
  nvidia.libraries: {}
"""


def inventory(cluster, tmp_path) -> Path:
    """The cluster's inventory with node7-10 labelled as one GB200 rack's NVLink domain."""
    text = cluster.inventory_path.read_text()
    head, _, _ = text.partition("nodes:\n")
    net = re.search(r"address: (\S+)\.\[1-", text).group(1)
    path = tmp_path / "hosts.yml"
    path.write_text(
        head + "nodes:\n"
        f"  node[1-6]:\n    address: {net}.[1-6]\n"
        f"  node[7-10]:\n    address: {net}.[7-10]\n    labels: [nvl_domain=rackA]\n"
    )
    return path


def run(cluster, tmp_path, book_text: str, nodes: str, *extra: str) -> tuple[int, dict]:
    book = tmp_path / f"book-{len(list(tmp_path.glob('book-*')))}.yml"
    book.write_text(book_text)
    args = ["run", str(inventory(cluster, tmp_path)), "--playbook", str(book), "--nodes", nodes]
    args += ["--format", "json", "--output-dir", str(tmp_path / "reports"), *extra]
    proc = subprocess.run([sys.executable, "-m", "nodecheck", *args], capture_output=True, text=True, timeout=300)
    assert proc.returncode != 64, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def results(doc: dict) -> dict[str, list[tuple[str, str, str]]]:
    """{node: [(status, check, message)]} of every result."""
    return {n["node"]: [(r["status"], r["check"], r["message"]) for r in n["results"]] for n in doc["nodes"]}


def unhealthy(doc: dict) -> dict[str, list[tuple[str, str, str]]]:
    return {
        node: bad
        for node, rs in results(doc).items()
        if (bad := [r for r in rs if not Status(r[0]).healthy or r[0] == "warn"])
    }


def test_each_hgx_fault_is_named_by_one_check_and_the_healthy_board_passes(cluster, tmp_path):
    apply(cluster, NVIDIA_STACK)
    code, doc = run(cluster, tmp_path, HGX_PLAYBOOK, "node[1-6]", "--allow-disruptive")
    assert (code, doc["complete"]) == (2, True)
    bad = unhealthy(doc)
    assert sorted(bad) == ["node2", "node3", "node4", "node5", "node6"]
    # one check names each broken node
    assert {n: sorted({c for _, c, _ in rs}) for n, rs in bad.items()} == {
        "node2": ["gpu.dcgm_diag"],
        "node3": ["gpu.dcgm_diag"],
        "node4": ["nvlink.fabric"],
        "node5": ["nvlink.errors"],
        "node6": ["nvidia.libraries"],
    }
    by = {n: {(s, m) for s, _, m in rs} for n, rs in bad.items()}
    # DCGM's memory test failed: FAIL with DCGM's own words and error code
    [(status, message)] = by["node2"]
    assert status == "fail" and "memory" in message and "DCGM error" in message, message
    # the host engine is down: an ERROR that says how to start it, never a failure that drains
    [(status, message)] = by["node3"]
    assert status == "error" and "nv-hostengine" in message, message
    # Fabric Manager not running on an NVSwitch board: the GPUs' fabric registration never completes
    [(status, message)] = by["node4"]
    assert status == "fail" and "nvidia-fabricmanager" in message, message
    assert message.endswith("GPU fabric state in_progress on all 8 GPUs"), message
    # NVLink error counters rising on GPU2 link 5 (replay: any increase fails)
    assert any(s == "fail" and "GPU2" in m and "replay" in m for s, m in by["node5"]), by["node5"]
    # a 0-byte libnvidia-ml left by a failed upgrade
    [(status, message)] = [(s, m) for s, m in by["node6"] if s == "fail"]
    assert "libnvidia-ml.so.1 -> libnvidia-ml.so.550.90.07 is empty (0 bytes)" in message, message
    # the healthy board passes every check, DCGM level 2 included
    node1 = results(doc)["node1"]
    assert {c for _, c, _ in node1} == {"gpu.dcgm_diag", "nvlink.fabric", "nvlink.errors", "nvidia.libraries"}
    assert all(s == "pass" for s, _, _ in node1), node1
    assert any(c == "gpu.dcgm_diag" and "DCGM level 2 passed" in m for _, c, m in node1), node1


def test_a_gb200_tray_outside_its_racks_nvlink_partition_is_named(cluster, tmp_path):
    apply(cluster, NVIDIA_STACK)
    code, doc = run(cluster, tmp_path, GB200_PLAYBOOK, "node[7-10]")
    assert (code, doc["complete"]) == (2, True)
    bad = unhealthy(doc)
    assert sorted(bad) == ["node10"], bad
    [(status, check, message)] = bad["node10"]
    assert (status, check) == ("fail", "nvlink.domain")
    assert "32765" in message and "32766" in message, message  # its CliqueId and the rack's
    for node in ("node7", "node8", "node9"):
        assert all(s == "pass" for s, _, _ in results(doc)[node]), results(doc)[node]


def test_dcgm_level_2_never_starts_on_a_node_with_gpu_processes(cluster, tmp_path):
    marker = cluster.node_dir("node1") / "dcgmi-started"
    marker.unlink(missing_ok=True)
    layout = {"node1": hgx_node() + dcgm(busy=True)}
    apply(cluster, layout)
    cluster.fake_script("node1", "dcgmi", f"touch {marker}; exit 1")  # any start would leave the mark
    code, doc = run(cluster, tmp_path, HGX_PLAYBOOK, "node1", "--allow-disruptive")
    [(status, message)] = [(s, m) for s, c, m in results(doc)["node1"] if c == "gpu.dcgm_diag"]
    assert status == "skipped" and "busy" in message and "GPU processes" in message, message
    assert not marker.exists()
    assert code == 3  # not tested is not healthy


def test_without_allow_disruptive_level_2_is_skipped_on_every_node(cluster, tmp_path):
    apply(cluster, NVIDIA_STACK)
    code, doc = run(cluster, tmp_path, HGX_PLAYBOOK, "node1")
    [(status, message)] = [(s, m) for s, c, m in results(doc)["node1"] if c == "gpu.dcgm_diag"]
    assert status == "skipped" and "not run without --allow-disruptive" in message, message
    assert code == 3
