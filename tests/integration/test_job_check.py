"""`nodecheck job-check` on the simulated cluster: real sshd nodes (each with its own /root, so its own
~/.nccl.conf), a fake nvidia-smi, a checkpoint directory on the "shared" /tmp or per-node /root, and
the harness's real Slurm for --slurm-job."""

from __future__ import annotations

import json

from runs import nodecheck

NODES = ("node1", "node2")
GPUS = "".join(f"{i}\n" for i in range(8))


def _job(tmp_path, counts: dict, world_size=16, ckpt: str | None = None, **extra) -> str:
    (tmp_path / "counts.json").write_text(json.dumps(counts))
    ckpt = ckpt or str(tmp_path / "ckpt")
    lines = [
        f"world_size: {world_size}",
        "gpus_per_node: 8",
        'env: {NCCL_SOCKET_IFNAME: lo, TORCH_NCCL_ASYNC_ERROR_HANDLING: "3", TORCH_NCCL_TRACE_BUFFER_SIZE: "2000", '
        'TORCH_NCCL_DUMP_ON_TIMEOUT: "1"}',
        f"checkpoint: {{dir: {ckpt}, every_minutes: 30, save_s: 300}}",
        "data_balance: {counts_file: counts.json, per_step: 8}",
        "timeouts: {collective_s: 1800}",
        "launcher: {kind: torchrun, max_restarts: 3}",
        *extra,
    ]
    (tmp_path / "job.yml").write_text("\n".join(lines) + "\n")
    return str(tmp_path / "job.yml")


def _check(cluster, tmp_path, job: str, *args, env=None):
    code, out, err, _ = nodecheck(
        "job-check", job, *args, "--format", "json", "--output-dir", str(tmp_path / "reports"), env=env
    )
    assert code != 64, err
    doc = json.loads(out)
    res: dict[tuple[str, str], tuple[str, str]] = {}
    for n in doc["nodes"]:  # per (node, check): its first result that is not a pass
        for r in n["results"]:
            key = (n["node"], r["check"])
            if key not in res or res[key][0] == "pass":
                res[key] = (r["status"], r["message"])
    return code, res


def _gpus(cluster, nodes=NODES):
    for node in nodes:
        cluster.fake_output(node, "nvidia-smi", GPUS)


def _inventory(cluster, nodes=NODES):
    return ("--inventory", str(cluster.inventory_path), "--nodes", ",".join(nodes))


def test_a_sound_job_passes_and_a_drifting_node_an_empty_ckpt_and_the_incident_counts_fail(cluster, tmp_path):
    _gpus(cluster)
    (tmp_path / "ckpt").mkdir()
    even = {str(r): 30835 for r in range(16)}
    code, res = _check(cluster, tmp_path, _job(tmp_path, even), *_inventory(cluster))
    assert code == 0, res
    assert res[("node1", "job.data_balance")] == ("pass", "all 16 ranks run 3,854 steps (counts.json, 8 per step)")
    assert res[("node2", "job.world_size")] == ("pass", "world_size 16 = 2 nodes x 8 GPUs; 8 GPUs visible")
    assert res[("node1", "job.checkpoints")][0] == "pass"
    assert list(tmp_path.joinpath("ckpt").iterdir()) == []  # the write test left nothing

    # node2's own ~/.nccl.conf (each node has its own /root) sets a different NCCL_IB_HCA
    assert cluster.run("node2", "echo NCCL_IB_HCA=mlx5_1 > /root/.nccl.conf")[0] == 0
    try:
        with open("tests/data/job/constructed-incident-counts.json") as f:
            incident = json.loads(f.read())
        code, res = _check(cluster, tmp_path, _job(tmp_path, incident), *_inventory(cluster))
    finally:
        cluster.run("node2", "rm -f /root/.nccl.conf")
    assert code == 2
    status, message = res[("node2", "job.env_consistency")]
    assert status == "fail"
    # two nodes: no majority to call one of them odd, both are named
    assert message.startswith(
        "drift: NCCL_IB_HCA differs with no majority: unset on node1; NCCL_IB_HCA=mlx5_1 on node2 (/root/.nccl.conf)"
    )
    status, message = res[("node1", "job.data_balance")]
    assert status == "fail"
    assert message.startswith(
        "rank 3: 30,835 blocks, rank 11: 30,888; 53 blocks = 0.17%; ranks would stop ~7 "
        "steps apart (rank 3 on node1, rank 11 on node2"
    )
    assert message.endswith("drop 53 blocks max, 0.085% of tokens")


def test_one_node_of_three_drifts_through_its_own_nccl_conf(cluster, tmp_path):
    three = ("node1", "node2", "node3")
    _gpus(cluster, three)
    (tmp_path / "ckpt").mkdir()
    assert cluster.run("node3", "echo NCCL_IB_HCA=mlx5_1 > /root/.nccl.conf")[0] == 0
    try:
        code, res = _check(
            cluster,
            tmp_path,
            _job(tmp_path, {str(r): 8 for r in range(24)}, world_size=24),
            *_inventory(cluster, three),
        )
    finally:
        cluster.run("node3", "rm -f /root/.nccl.conf")
    assert code == 2
    assert res[("node1", "job.env_consistency")][0] == "pass"
    assert res[("node3", "job.env_consistency")][0] == "fail"
    assert res[("node3", "job.env_consistency")][1].startswith(
        "drift: NCCL_IB_HCA=mlx5_1 on node3 (/root/.nccl.conf), expected unset on node[1-2]"
    )
    assert {c for (n, c), (st, _) in res.items() if st != "pass"} == {"job.env_consistency"}


def test_checkpoint_dir_missing_on_one_node(cluster, tmp_path):
    _gpus(cluster)
    # /root is each node's own: the directory exists on node1 only
    assert cluster.run("node1", "mkdir -p /root/ckpt")[0] == 0
    try:
        code, res = _check(
            cluster, tmp_path, _job(tmp_path, {str(r): 8 for r in range(16)}, ckpt="/root/ckpt"), *_inventory(cluster)
        )
    finally:
        cluster.run("node1", "rm -rf /root/ckpt")
    assert code == 2
    assert res[("node1", "job.checkpoints")][0] == "pass"
    assert res[("node2", "job.checkpoints")] == (
        "fail",
        "checkpoint directory /root/ckpt does not exist on this node: the first save fails (or lands on "
        "local disk); create it or mount the shared filesystem",
    )


def test_slurm_job_with_three_nodes_is_not_world_size_16(cluster, tmp_path):
    three = ("node1", "node2", "node3")
    _gpus(cluster, three)
    (tmp_path / "ckpt").mkdir()
    cluster.slurm_up(3)
    try:
        jobid = cluster.sbatch("-N3", wrap="sleep 120")
        cluster.wait_job(jobid, states=("RUNNING",), timeout=30)
        code, res = _check(
            cluster,
            tmp_path,
            _job(tmp_path, {str(r): 8 for r in range(16)}),
            "--slurm-job",
            str(jobid),
            "--inventory",
            str(cluster.inventory_path),
            env=cluster.slurm_env(),
        )
    finally:
        cluster.slurm_down()
    assert code == 2
    status, message = res[("node3", "job.world_size")]
    assert status == "fail"
    assert message.startswith(f"world_size 16 but Slurm job {jobid}'s 3 nodes x 8 GPUs per node = 24 ranks")


def test_hostile_checkpoint_path_over_ssh_is_an_argument_never_code(cluster, tmp_path):
    _gpus(cluster)
    ckpt = tmp_path / "ck $(touch PWNED) `touch PWNED` 'q' \"d\" -n"
    ckpt.mkdir()
    (ckpt / "step 1").write_text("x")
    job = _job(tmp_path, {str(r): 8 for r in range(16)}, ckpt=json.dumps(str(ckpt)))
    with open(job) as f:
        text = f.read().replace("save_s: 300}", "save_s: 300, resume: true}")
    with open(job, "w") as f:
        f.write(text)
    code, res = _check(cluster, tmp_path, job, *_inventory(cluster))
    assert code == 0, res
    assert {st for (_, check), (st, _) in res.items() if check == "job.checkpoints"} == {"pass"}
    assert [p.name for p in ckpt.iterdir()] == ["step 1"]  # the write test left nothing
    assert not list(tmp_path.rglob("PWNED"))
    for node in NODES:  # the SSH session's working directory is the node's /root
        assert cluster.run(node, "test -e /root/PWNED")[0] == 1
