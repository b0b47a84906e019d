"""nccl.env through `nodecheck run` on the simulated cluster: the job environment from --job-env against
each node's interfaces (the cluster namespace's lo), IB devices (fake sysfs) and dump directory, then
real TCP listeners on the nodes' addresses and connections between them. A port taken on one node is
said to be busy, and a node whose python3 cannot run cannot be tested: neither is a FAIL or a PASS."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

PLAYBOOKS = Path(__file__).resolve().parents[1] / "data" / "playbooks"
ACTIVE = {"mlx5_0/ports/1/link_layer": "InfiniBand\n", "mlx5_0/ports/1/state": "4: ACTIVE\n"}
MASTER = "master: MASTER_ADDR=node1 (job environment); MASTER_PORT=29511 (job environment)"


def nodecheck(cluster, tmp_path, playbook: str, nodes: str, *extra) -> tuple[int, dict | None, str]:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "nodecheck",
            "run",
            str(cluster.inventory_path),
            "--playbook",
            str(PLAYBOOKS / playbook),
            "--nodes",
            nodes,
            "--format",
            "json",
            "--output-dir",
            str(tmp_path / "reports"),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return proc.returncode, json.loads(proc.stdout) if proc.returncode != 64 else None, proc.stderr


def results(doc) -> dict[str, list[tuple[str, str]]]:
    return {
        n["node"]: [(r["status"], r["message"]) for r in n["results"] if r["check"] == "nccl.env"] for n in doc["nodes"]
    }


def test_the_job_environment_against_four_nodes_with_a_busy_port_and_a_broken_python(cluster, tmp_path):
    for node in ("node1", "node3", "node4"):
        cluster.fake_sysfs(node, ACTIVE)
    cluster.fake_sysfs("node2", {**ACTIVE, "mlx5_0/ports/1/state": "1: DOWN\n"})
    cluster.fake_exit("node4", "python3", 127, "python3: not installed on this node\n")
    job = tmp_path / "job.env"
    job.write_text(
        "# the training job's environment\nexport NCCL_SOCKET_IFNAME=lo\nNCCL_IB_HCA='mlx5_0:1'\n"
        "TORCH_NCCL_TRACE_BUFFER_SIZE=2000\nTORCH_NCCL_DUMP_ON_TIMEOUT=1\n"
        "MASTER_ADDR=node1\nMASTER_PORT=29511\n"
    )
    taken = socket.socket()  # something already listens on node3's ring port
    taken.bind((cluster.address("node3"), 29611))
    taken.listen()
    try:
        code, doc, err = nodecheck(cluster, tmp_path, "nccl-env.yml", "node[1-4]", "--job-env", str(job))
    finally:
        taken.close()
    assert doc is not None, err
    found = results(doc)
    for node in ("node1", "node2", "node3", "node4"):
        by_start = {m.split(":")[0].split(" ")[0]: (s, m) for s, m in found[node]}
        status, message = by_start["NCCL_SOCKET_IFNAME=lo"]
        assert status == "pass" and message.startswith(
            "NCCL_SOCKET_IFNAME=lo (job environment): NCCL uses lo (127.0.0.1/8"
        ), message
        assert by_start["TORCH_NCCL_ASYNC_ERROR_HANDLING=3"] == (
            "pass",
            "TORCH_NCCL_ASYNC_ERROR_HANDLING=3 (job environment): the watchdog ends a collective that "
            "outlives the process group's timeout (tear the process down without aborting the communicator)",
        )
        assert (
            "pass",
            "flight recorder on (TORCH_NCCL_TRACE_BUFFER_SIZE=2000 (job environment), "
            "TORCH_NCCL_DUMP_ON_TIMEOUT=1 (job environment)): dumps to /tmp/nccl_trace_rank_ (PyTorch's "
            "default); its directory is writable on this node",
        ) in found[node]
        [(status, message)] = [r for r in found[node] if r[1].startswith(("max locked memory", "cannot read the max"))]
        assert (status == "pass") == message.startswith(
            "max locked memory unlimited (ulimit -l in nodecheck's session on the node)"
        ), message
    ib = {node: [r for r in found[node] if "NCCL_IB_HCA" in r[1]] for node in found}
    assert ib["node1"] == [("pass", "NCCL_IB_HCA=mlx5_0:1 (job environment): NCCL uses mlx5_0/1")]
    assert ib["node2"] == [
        (
            "fail",
            "mlx5_0/1 (named by NCCL_IB_HCA=mlx5_0:1 (job environment)) is DOWN, expected ACTIVE: NCCL skips a "
            "port that is not ACTIVE",
        ),
        (
            "fail",
            "NCCL_IB_HCA=mlx5_0:1 (job environment): no ACTIVE port among the HCAs it selects (ACTIVE here: "
            "none): NCCL falls back to TCP sockets, far slower",
        ),
    ]

    def reach(node: str) -> list[tuple[str, str]]:
        return [r for r in found[node] if r[1].startswith(("reaches", "port busy", "cannot test", "node"))]

    assert reach("node1") == [("pass", f"reaches node1:29511 ({MASTER}); node2:29611 (ring successor)")]
    # node3's ring port is taken: node2's connection to it is not tested, not failed
    assert reach("node2") == [
        (
            "error",
            "port busy: 127.0.1.3:29611 is already in use on node3 (Address already in use): another job or "
            "service holds it, and a job that needs it there cannot bind it; connections to it from node2 were "
            "not tested",
        ),
        ("pass", f"reaches node1:29511 ({MASTER})"),
    ]
    assert reach("node3")[0] == reach("node2")[0]
    assert reach("node3")[1] == ("pass", f"reaches node1:29511 ({MASTER}); node1:29611 (ring successor)")
    assert reach("node4") == [
        (
            "error",
            "cannot test reachability: no python3 on node4 (python3 exited 127 before "
            "listening): python3: not installed on this node",
        )
    ]
    steps = {(c["node"], c["probe"]) for c in doc["captures"]}
    assert {("node1", "nccl_env.listen"), ("node2", "nccl_env.connect"), ("node4", "nccl_env.listen-stop")} <= steps
    assert code == 2  # node2's HCA port is down
    leftovers = subprocess.run(["pgrep", "-f", "nodecheck %s"], capture_output=True, text=True).stdout.split()
    assert leftovers == []  # every listener was killed by its stop step
    assert not list(Path("/tmp").glob("nodecheck-reach.*"))


def test_strict_levels_a_missing_interface_and_an_unwritable_dump_directory_fail(cluster, tmp_path):
    code, doc, err = nodecheck(cluster, tmp_path, "nccl-env-strict.yml", "node[1-2]")
    assert doc is not None, err
    found = results(doc)
    messages = {m.split(" (")[0].split(":")[0]: (s, m) for s, m in found["node1"]}
    assert [s for s, m in found["node1"] if m.startswith("NCCL_SOCKET_IFNAME==eth0")] == ["warn", "fail"]
    assert messages["NCCL_IB_HCA unset"] == (
        "pass",
        "NCCL_IB_HCA unset: NCCL uses every ACTIVE HCA port (this node has no RDMA device)",
    )
    assert (
        "fail",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING unset and TORCH_NCCL_BLOCKING_WAIT unset: NCCL has no timeout by "
        "default, so a hung collective hangs the job forever unless PyTorch's watchdog acts (recent "
        "PyTorch releases default to 3, older ones to 0); set TORCH_NCCL_ASYNC_ERROR_HANDLING=3",
    ) in found["node1"]
    [(status, message)] = [r for r in found["node2"] if r[1].startswith("flight recorder")]
    assert status == "fail" and message.startswith(
        "flight recorder on (TORCH_NCCL_TRACE_BUFFER_SIZE=2000 (job environment), TORCH_NCCL_DUMP_ON_TIMEOUT=1 (job "
        "environment)): dumps to TORCH_NCCL_DEBUG_INFO_TEMP_FILE=/nonexistent-nodecheck/trace_ (job environment), "
        "but /nonexistent-nodecheck is not writable on this node (mktemp: "
    )
    assert (
        "skipped",
        "reachability not tested: no port to test (MASTER_ADDR and MASTER_PORT unset, reachability.ports empty)",
    ) in found["node2"]
    assert code == 2


def test_a_job_env_file_the_shell_would_have_to_run_is_refused_with_its_line(cluster, tmp_path):
    job = tmp_path / "job.env"
    job.write_text("NCCL_DEBUG=WARN\nMASTER_ADDR=$(hostname)\n")
    code, doc, err = nodecheck(cluster, tmp_path, "nccl-env.yml", "node1", "--job-env", str(job))
    assert code == 64 and doc is None
    assert (
        f"{job}:2: MASTER_ADDR: command substitution in '$(hostname)': nodecheck reads this file, it does not "
        "run it, so it cannot know the value" in err
    )
