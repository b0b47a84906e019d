"""nccl-tests through `nodecheck run` on the simulated cluster: the fake all_reduce_perf ranks meet
over real TCP (mpirun / srun stand-ins start them over real ssh), with bandwidth, corruption and hangs
set per node by the scenario. One slow node among 8 is named, a corrupting node is named, both hang
kinds are classified, and the single-node test judges every node on its own."""

from __future__ import annotations

import pytest
from harness.scenarios import Nccl, apply
from integration.runs import results, run_checks

pytestmark = pytest.mark.integration

MULTI = """  nccl.allreduce_multi:
    launcher: {launcher}
    launcher_args: [{args}]
    max_bytes: 1G
    busbw_gbps: {{fail_below: 300, warn_below: 335}}
    test_timeout_s: {timeout}
"""
SINGLE = """  nccl.allreduce_single:
    gpus: 8
    max_bytes: 1G
    busbw_gbps: {fail_below: 400, warn_below: 440}
    test_timeout_s: 4
"""


def run(cluster, tmp_path, book: str, nodes: str = "node[1-8]", *extra):
    return run_checks(cluster, tmp_path, book, nodes, *extra, deadline_s=200)


def multi(launcher: str = "mpirun", timeout: int = 6) -> str:
    return MULTI.format(launcher=launcher, timeout=timeout, args="--allow-run-as-root" if launcher == "mpirun" else "")


def nccl(**faults) -> dict:
    return {"*": [Nccl(nodes=tuple((node, tuple(cfg.items())) for node, cfg in faults.items()), test_s=0.2)]}


def test_one_slow_node_among_8_is_named_by_the_pair_tests(cluster, tmp_path):
    apply(cluster, nccl(node5={"net_busbw_gbs": 150.0}))
    code, doc, _ = run(cluster, tmp_path, multi())
    assert code == 2
    got = results(doc, "nccl.allreduce_multi")
    [(status, message)] = got["node5"]
    assert status == "fail"
    assert (
        message.startswith("all_reduce: bad node: the 8-node test failed (busbw 147.")
        and "expected >= 300 GB/s" in message
    ), message
    assert "fails with 2 partners that pass with others: node4: busbw 147." in message
    for node in ("node1", "node2", "node3", "node4", "node6", "node7", "node8"):
        [(status, message)] = got[node]
        assert status == "pass" and "this node's 2-node tests pass (blamed: node5)" in message, (node, message)
    [test] = doc["extras"]["nccl.allreduce_multi"]["tests"]
    assert test["bad_nodes"] == ["node5"] and test["status"] == "fail" and test["ranks"] == 64
    assert {p["round"] for p in test["pairs"]} == {1, 2} and len(test["pairs"]) == 8


def test_a_corrupting_node_is_named(cluster, tmp_path):
    apply(cluster, nccl(node3={"corrupt": True}))
    code, doc, _ = run(cluster, tmp_path, multi())
    got = results(doc, "nccl.allreduce_multi")
    [(status, message)] = got["node3"]
    assert status == "fail" and "bad node" in message and "data corruption" in message, message
    assert all(got[n][0][0] == "pass" for n in got if n != "node3")


def test_a_rank_that_never_finishes_nccl_init_is_classified_and_named(cluster, tmp_path):
    # a stale image: node4's ranks load another NCCL and never finish init; with NCCL_DEBUG=INFO
    # every rank prints its version, and the check names the odd one out
    apply(cluster, nccl(node4={"hang": "init", "nccl_version": "2.21.5+cuda12.4"}))
    code, doc, wall = run(cluster, tmp_path, multi(timeout=4) + "    env: {NCCL_DEBUG: INFO}\n")
    got = results(doc, "nccl.allreduce_multi")
    [(status, message)] = got["node4"]
    assert status == "fail" and "bad node" in message, message
    assert "hung in NCCL init" in message and "stale image" in message
    assert "ranks run different NCCL versions: 2.21.5+cuda12.4 on node4, 2.29.2+cuda12.4 on node[1-3,5-8]" in message
    test = doc["extras"]["nccl.allreduce_multi"]["tests"][0]
    assert test["hang"] == "init" and test["bad_nodes"] == ["node4"]
    assert all(got[n][0][0] == "pass" for n in got if n != "node4")
    # this cluster's fake ranks only (the nodes share the host's pid namespace with other clusters)
    mine = str(cluster.state_dir / "nodes")
    left = [p for p in cluster.run("node1", "ps -eo args")[1].splitlines() if mine in p and "/data/nccl_tests.py" in p]
    assert left == []  # killed tests leave no rank behind


def test_single_node_tests_judge_each_node_and_classify_a_hang_mid_sweep(cluster, tmp_path):
    apply(
        cluster,
        nccl(
            node2={"nvlink_busbw_gbs": 200.0},
            node3={"corrupt": True},
            node4={"hang": "sweep", "hang_at_bytes": 1 << 20},
            node5={"gpus": 4},
        ),
    )
    code, doc, _ = run(cluster, tmp_path, SINGLE, "node[1-5]")
    got = results(doc, "nccl.allreduce_single")
    [(status, message)] = got["node1"]
    assert status == "pass" and message.startswith("all_reduce: busbw 472.") and "8 ranks" in message, message
    assert got["node2"][0][0] == "fail" and "expected >= 400 GB/s" in got["node2"][0][1]
    assert got["node3"][0][0] == "fail" and "data corruption" in got["node3"][0][1]
    status, message = got["node4"][0]
    assert status == "fail" and "a collective hung mid-sweep after 524288 B (512 KiB)" in message, message
    assert got["node5"][0][0] == "fail", got["node5"]


def test_the_network_only_variant_and_the_job_env_reach_the_test(cluster, tmp_path):
    apply(cluster, nccl(node2={"net_busbw_gbs": 100.0}))
    book = SINGLE + "    variants: [default, network_only]\n    variant_busbw_gbps: {network_only: {fail_below: 300}}\n"
    code, doc, _ = run(cluster, tmp_path, book, "node[1-2]")
    got = {n: sorted(v) for n, v in results(doc, "nccl.allreduce_single").items()}
    assert [s for s, _ in got["node1"]] == ["pass", "pass"]
    assert [s for s, m in got["node2"]] == ["fail", "pass"] and "(network only)" in got["node2"][0][1]
    env = tmp_path / "job.env"
    env.write_text("# the job's environment\nexport NCCL_P2P_DISABLE=1\nNCCL_SHM_DISABLE='1'\n")
    code, doc, _ = run(cluster, tmp_path, SINGLE, "node[1-2]", "--job-env", str(env))
    got = results(doc, "nccl.allreduce_single")
    assert got["node1"][0][0] == "fail" and "busbw 364." in got["node1"][0][1]  # the NIC's 370, not NVLink's 480


def test_srun_launcher_runs_the_same_test(cluster, tmp_path):
    apply(cluster, nccl())
    code, doc, _ = run(cluster, tmp_path, multi("srun"), "node[1-4]")
    got = results(doc, "nccl.allreduce_multi")
    for node in ("node1", "node2", "node3", "node4"):
        [(status, message)] = got[node]
        assert status == "pass" and "across 4 nodes (node[1-4]), 32 ranks" in message, message


def test_a_launcher_that_refuses_to_start_blames_no_node(cluster, tmp_path):
    apply(cluster, nccl())
    book = multi().replace("launcher_args: [--allow-run-as-root]", "launcher_args: []")
    code, doc, _ = run(cluster, tmp_path, book, "node[1-4]")
    assert code == 3  # could not judge: not a failure of any node
    got = results(doc, "nccl.allreduce_multi")
    for node in ("node1", "node2", "node3", "node4"):
        [(status, message)] = got[node]
        assert status == "error" and "mpirun has detected an attempt to run as root." in message, message
    assert "pairs" not in doc["extras"]["nccl.allreduce_multi"]["tests"][0]  # nothing to localize
