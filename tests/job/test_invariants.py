"""The job's invariants, pass and fail, on constructed probe outputs (and the incident's own counts)."""

from __future__ import annotations

import json

import pytest

from nodecheck.core.model import Capture, Outcome, Status
from nodecheck.job.counts import RankCounts
from nodecheck.job.invariants import (
    JobContext,
    checkpoints,
    data_balance,
    env_consistency,
    flight_recorder,
    retries,
    specs,
    timeouts,
    world_size,
)
from nodecheck.job.probe import PROBE_NAME
from nodecheck.job.spec import JobSpec
from nodecheck.parsers.slurm import JobRecord, parse_squeue_job
from tests.helpers import data

# `squeue -O` of job 1 on node[1-3] (what job-check reads), and the same job DERIVED inline as job 5
# on node[2-3] holding 16 GPUs (gres/gpu in its allocated TRES)
SQUEUE_RUNNING = "slurm-job/derived-recorded-22.05-squeue-O-running-multinode.txt"


def running_job() -> JobRecord:
    return parse_squeue_job(data(SQUEUE_RUNNING), "1")


def two_node_job_with_16_gpus() -> JobRecord:
    text = (
        data(SQUEUE_RUNNING)
        .replace("1\x1f1\x1f", "5\x1f5\x1f", 1)
        .replace("node[1-3]", "node[2-3]")
        .replace(
            "\x1f3\x1f3\x1fcpu=3,node=3,billing=3\x1fnode1", "\x1f2\x1f2\x1fcpu=2,node=2,billing=2,gres/gpu=16\x1fnode2"
        )
    )
    return parse_squeue_job(text, "5")


INCIDENT = {int(r): c for r, c in json.loads(data("job/constructed-incident-counts.json")).items()}
NODES = ("node1", "node2")


def probe_out(
    env: str = "",
    conf: str = "",
    writable: str = "default\tok\ncheckpoint\tok\n",
    ckpt: str = "1",
    avail_kib: int = 104857600,
    fs: str = "nfs:/ckpt 1000000000 1 104857600 1% /shared",
    resume: str = "",
    gpus: int = 8,
    gpu_rc: int = 0,
    fstype: str = "",
    checked_as: str = "",
) -> str:
    df = f"Filesystem 1024-blocks Used Available Capacity Mounted on\n{fs.replace('104857600', str(avail_kib))}\n"
    return (
        f"@@nodecheck conf_path /root/.nccl.conf\n@@nodecheck begin user.conf\n{conf}@@nodecheck end user.conf rc=0\n"
        "@@nodecheck begin nccl.conf\n@@nodecheck end nccl.conf rc=0\n"
        f"@@nodecheck begin node_env\n{env}@@nodecheck end node_env rc=0\n"
        + (f"@@nodecheck checked_as {checked_as}\n" if checked_as else "")
        + f"@@nodecheck begin writable\n{writable}@@nodecheck end writable rc=0\n"
        f"@@nodecheck ckpt_exists {ckpt}\n"
        + (f"@@nodecheck begin df\n{df}@@nodecheck end df rc=0\n" if ckpt == "1" else "")
        + (f"@@nodecheck ckpt_fstype {fstype}\n" if fstype else "")
        + (f"@@nodecheck resume {resume}\n" if resume else "")
        + "@@nodecheck begin gpus\n"
        + ("".join(f"{i}\n" for i in range(gpus)) if gpu_rc == 0 else "NVIDIA-SMI has failed\n")
        + f"@@nodecheck end gpus rc={gpu_rc}\n"
    )


def by_node(**outs: str) -> dict:
    return {
        node: {PROBE_NAME: Capture(node, PROBE_NAME, ("sh",), Outcome.EXITED, 0, out, "", 0.1)}
        for node, out in outs.items()
    }


def spec(**over) -> JobSpec:
    base = dict(
        world_size=16,
        gpus_per_node=8,
        env={
            "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3",
            "TORCH_NCCL_TRACE_BUFFER_SIZE": "2000",
            "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
        },
        checkpoint={"dir": "/shared/ckpt", "every_minutes": 30, "save_s": 300},
        data_balance={"counts_file": "c.json", "per_step": 8},
    )
    base.update(over)
    return JobSpec.model_validate(base)


def ctx(s: JobSpec | None = None, counts: dict | None = None, slurm=None, order=NODES) -> JobContext:
    return JobContext(
        s or spec(), tuple(order), RankCounts(counts if counts is not None else INCIDENT, "counts.json"), slurm
    )


def judged(judge, c: JobContext, **outs) -> list[tuple[tuple[str, ...], Status, str]]:
    outs = outs or {n: probe_out() for n in c.order}
    return [(nodes, v.status, v.message) for nodes, v in judge(by_node(**outs), c)]


# --- data balance -----------------------------------------------------------------------------------


def test_incident_counts_fail_with_the_spread_the_steps_and_the_remedy():
    [(nodes, status, message)] = judged(data_balance, ctx())
    assert (nodes, status) == (NODES, Status.FAIL)
    assert message.startswith(
        "rank 3: 30,835 blocks, rank 11: 30,888; 53 blocks = 0.17%; ranks would stop "
        "~7 steps apart (rank 3 on node1, rank 11 on node2; 8 per step)"
    )
    assert message.endswith("truncate all ranks to the global minimum (30,835): drop 53 blocks max, 0.085% of tokens")


def test_equal_steps_pass_and_say_the_leftover():
    counts = {r: 30835 + (r % 4) for r in range(16)}  # 30835..30838 // 8 = 3854 everywhere
    [(_, status, message)] = judged(data_balance, ctx(counts=counts))
    assert status is Status.PASS
    assert message == (
        "all 16 ranks run 3,854 steps (counts.json, 8 per step); the counts differ by 3 blocks "
        "(30,835-30,838), less than one step, which each rank leaves unused"
    )


def test_grad_accum_counts_in_the_steps():
    counts = {r: 64 if r else 80 for r in range(16)}  # // (8 x 2): 4 vs 5 steps
    s = spec(data_balance={"counts_file": "c.json", "per_step": 8, "grad_accum": 2})
    [(_, status, message)] = judged(data_balance, ctx(s, counts))
    assert status is Status.FAIL
    assert "rank 1: 64 blocks, rank 0: 80; 16 blocks = 25.00%; ranks would stop ~1 step apart" in message
    assert "8 per step x 2 accumulation" in message


def test_missing_and_extra_ranks_are_named():
    counts = dict.fromkeys((*range(12), 16, 17), 10)
    [(_, status, message)] = judged(data_balance, ctx(counts=counts))
    assert status is Status.FAIL
    assert message.startswith("counts.json: no count for ranks 12-15; counts for ranks 16-17 beyond world_size 16")


# --- world size -------------------------------------------------------------------------------------


def test_world_size_pass():
    assert judged(world_size, ctx()) == [(NODES, Status.PASS, "world_size 16 = 2 nodes x 8 GPUs; 8 GPUs visible")]


def test_world_size_against_a_three_node_slurm_job_and_a_node_short_of_gpus():
    job = running_job()
    c = ctx(slurm=job, order=job.nodes)
    out = judged(world_size, c, node1=probe_out(), node2=probe_out(gpus=4), node3=probe_out())
    assert out[0] == (
        ("node1", "node2", "node3"),
        Status.FAIL,
        "world_size 16 but Slurm job 1's 3 nodes x 8 GPUs per node = 24 ranks: the launcher starts 24 "
        "ranks, or the job waits forever for the missing ones; allocate 2 nodes or fix world_size",
    )
    assert out[2][:2] == (("node2",), Status.FAIL)
    assert out[2][2].startswith("4 GPUs visible, the job puts 8 ranks on each node")


def test_slurm_gres_gpu_must_match():
    job = two_node_job_with_16_gpus()
    assert [
        s for _, s, _ in judged(world_size, ctx(slurm=job, order=job.nodes), node2=probe_out(), node3=probe_out())
    ] == [Status.PASS]
    small = ctx(spec(world_size=8, gpus_per_node=4), slurm=job, order=job.nodes)
    out = judged(world_size, small, node2=probe_out(), node3=probe_out())
    assert out[0][1:] == (
        Status.FAIL,
        "Slurm job 5 holds 16 GPUs (gres/gpu) but world_size is 8: ask for --gpus-per-node=4 on 2 nodes",
    )


def test_nvidia_smi_failure_is_an_error_of_that_node():
    out = judged(world_size, ctx(), node1=probe_out(), node2=probe_out(gpu_rc=9))
    assert out[1] == (("node2",), Status.ERROR, "cannot count the GPUs: nvidia-smi exited 9: NVIDIA-SMI has failed")


# --- env consistency --------------------------------------------------------------------------------


def test_same_env_passes():
    assert judged(
        env_consistency, ctx(), node1=probe_out("NCCL_IB_HCA=mlx5\n"), node2=probe_out("NCCL_IB_HCA=mlx5\n")
    ) == [(NODES, Status.PASS, "4 NCCL_/TORCH_NCCL_/TORCH_FR_/CUDA_ variables, the same on every node judged")]


def test_one_node_drifts_via_its_nccl_conf():
    three = ("node1", "node2", "node3")
    out = judged(
        env_consistency,
        ctx(order=three),
        node1=probe_out(),
        node2=probe_out(conf="NCCL_IB_HCA=mlx5_1\n"),
        node3=probe_out(),
    )
    assert out[0][:2] == (("node1", "node3"), Status.PASS)
    assert out[1][:2] == (("node2",), Status.FAIL)
    assert out[1][2].startswith("drift: NCCL_IB_HCA=mlx5_1 on node2 (/root/.nccl.conf), expected unset on node[1,3]")


def test_job_env_wins_over_the_node():
    out = judged(
        env_consistency,
        ctx(spec(env={"NCCL_IB_HCA": "mlx5_0"})),
        node1=probe_out("NCCL_IB_HCA=mlx5_9\n"),
        node2=probe_out(),
    )
    assert [s for _, s, _ in out] == [Status.PASS]


def test_two_nodes_disagreeing_has_no_majority():
    out = judged(env_consistency, ctx(), node1=probe_out("NCCL_ALGO=Ring\n"), node2=probe_out("NCCL_ALGO=Tree\n"))
    assert out == [
        (
            NODES,
            Status.FAIL,
            "drift: NCCL_ALGO differs with no majority: NCCL_ALGO=Ring on node1 (node "
            "environment); NCCL_ALGO=Tree on node2 (node environment): ranks that disagree on these choose "
            "different transports or algorithms and hang or slow the job; set them in JOB.yml's env or make "
            "the nodes agree",
        )
    ]


# --- timeouts ---------------------------------------------------------------------------------------


def test_timeouts_pass_with_a_30_minute_collective_timeout():
    out = judged(timeouts, ctx(spec(timeouts={"collective_s": 1800})))
    assert [s for _, s, _ in out] == [Status.PASS, Status.PASS]
    assert out[0][2] == (
        "collective timeout 1800 s (init_process_group(timeout=)) covers the longest blocking "
        "phase, 300 s (checkpoint.save_s)"
    )


def test_default_10_minutes_is_shorter_than_a_20_minute_save():
    s = spec(checkpoint={"dir": "/c", "every_minutes": 30, "save_s": 1200})
    out = judged(timeouts, ctx(s))
    assert out[0][1] is Status.FAIL
    assert out[0][2].startswith(
        "collective timeout unset: PyTorch's default 600 s (10 min) is shorter than the "
        "longest blocking phase, 1200 s (checkpoint.save_s)"
    )


def test_an_unset_timeout_that_happens_to_cover_the_save_warns():
    s = spec(checkpoint={"dir": "/c", "every_minutes": 30, "save_s": 300})
    out = judged(timeouts, ctx(s))
    assert out[0][1] is Status.WARN
    assert out[0][2] == (
        "collective timeout unset: PyTorch's default 600 s (10 min) covers the longest blocking "
        "phase, 300 s (checkpoint.save_s), by luck of the default: pass timeout= to "
        "init_process_group and say it in timeouts.collective_s, so a change of default or of "
        "save time is caught"
    )


def test_absurdly_long_and_async_handling_off():
    s = spec(timeouts={"collective_s": 7200}, env={})
    out = judged(timeouts, ctx(s))
    assert [s for _, s, _ in out] == [Status.PASS, Status.FAIL, Status.FAIL]
    assert out[1][2].startswith(
        "collective timeout 7200 s (init_process_group(timeout=)) is longer than limits.timeout_max_s 3600 s"
    )
    assert out[2][2].startswith("TORCH_NCCL_ASYNC_ERROR_HANDLING unset and TORCH_NCCL_BLOCKING_WAIT unset")


# --- flight recorder --------------------------------------------------------------------------------


def test_flight_recorder_on_and_its_dump_dir_unwritable_on_one_node():
    out = judged(
        flight_recorder,
        ctx(),
        node1=probe_out(),
        node2=probe_out(writable="default\t!mktemp: Permission denied\ncheckpoint\tok\n"),
    )
    assert out[0][:2] == (("node1",), Status.PASS)
    assert out[1][:2] == (("node2",), Status.FAIL)
    assert "but /tmp is not writable on this node (mktemp: Permission denied)" in out[1][2]


def test_flight_recorder_off():
    out = judged(flight_recorder, ctx(spec(env={})))
    assert out[0][:2] == (NODES, Status.FAIL)
    assert out[0][2].startswith("flight recorder off (TORCH_FR_BUFFER_SIZE unset, TORCH_NCCL_DUMP_ON_TIMEOUT unset)")


# --- checkpoints ------------------------------------------------------------------------------------


def test_checkpoints_pass_on_a_shared_filesystem():
    out = judged(checkpoints, ctx(spec(checkpoint={"dir": "/shared/ckpt", "every_minutes": 30, "min_free_gb": 50})))
    assert out == [
        (NODES, Status.PASS, "checkpoint every 30 min (<= 60 min)"),
        (
            NODES,
            Status.PASS,
            "/shared/ckpt writable, 107.4 GB (10^9 bytes) free (>= 50 GB) (shared "
            "filesystem on every node: nfs:/ckpt on /shared)",
        ),
    ]


def test_checkpoint_interval_from_steps_and_step_seconds():
    s = spec(checkpoint={"dir": "/c", "every_steps": 500, "step_seconds": 12})
    assert judged(checkpoints, ctx(s))[0][1:] == (
        Status.FAIL,
        "checkpoint every 500 steps x 12 s = 100.0 min, more "
        "than limits.checkpoint_max_minutes 60: a hang or crash loses up to "
        "100 min of every GPU; save more often",
    )


def test_checkpoint_missing_unwritable_full_and_no_resume_point():
    s = spec(checkpoint={"dir": "/c", "every_minutes": 30, "min_free_gb": 200, "resume": True})
    out = judged(
        checkpoints,
        ctx(s, order=("node1", "node2", "node3")),
        node1=probe_out(ckpt="0"),
        node2=probe_out(writable="default\tok\ncheckpoint\t!Read-only file system\n", resume="entry step-5"),
        node3=probe_out(resume="missing"),
    )
    assert [(nodes, status) for nodes, status, _ in out] == [
        (("node1", "node2", "node3"), Status.PASS),
        (("node1",), Status.FAIL),
        (("node1", "node3"), Status.FAIL),
        (("node2",), Status.FAIL),
        (("node2", "node3"), Status.FAIL),
        (("node2",), Status.PASS),
    ]
    assert "/c does not exist on this node" in out[1][2]
    assert out[2][2].startswith("checkpoint.resume is true but a checkpoint in /c is not there on this node")
    assert out[3][2].startswith("checkpoint directory /c is not writable on this node (Read-only file system)")
    assert out[4][2].startswith("/c: 107.4 GB (10^9 bytes) free, checkpoint.min_free_gb is 200")
    assert out[5][2] == "resumes from a checkpoint in /c: present on this node"


def test_no_checkpoint_block_fails():
    out = judged(checkpoints, ctx(spec(checkpoint=None)))
    assert out[0][:2] == (NODES, Status.FAIL) and out[0][2].startswith("no checkpoint: block in JOB.yml")


# --- retries ----------------------------------------------------------------------------------------


def test_retries():
    assert judged(retries, ctx(spec(launcher={"kind": "torchrun", "max_restarts": 3})))[0][1] is Status.PASS
    job = running_job()
    assert judged(retries, ctx(slurm=job))[0][1:] == (
        Status.PASS,
        "Slurm job 1 has Requeue=1: Slurm requeues it after a node failure",
    )
    [(_, status, message)] = judged(retries, ctx(spec(launcher={"kind": "torchrun", "max_restarts": 0})))
    assert status is Status.WARN and message.startswith(
        "a failed start is not retried (launcher torchrun, max_restarts 0)"
    )


def test_specs_are_fleet_and_not_registered():
    from nodecheck.checks import all_checks

    names = [s.name for s in specs(spec())]
    assert names == [
        "job.data_balance",
        "job.world_size",
        "job.env_consistency",
        "job.timeouts",
        "job.flight_recorder",
        "job.checkpoints",
        "job.retries",
    ]
    assert {s.scope for s in specs(spec())} == {"fleet"}
    assert not set(names) & set(all_checks())


@pytest.mark.parametrize("text", ["garbage\n", ""])
def test_unreadable_probe_output_is_an_error_of_that_node(text):
    out = judged(env_consistency, ctx(), node1=probe_out(), node2=text)
    assert out[0][:2] == (("node2",), Status.ERROR)


# --- review: no PASS where nothing was judged; the words the numbers deserve -----------------------


def test_zero_steps_on_every_rank_is_not_a_pass():
    [(_, status, message)] = judged(data_balance, ctx(counts=dict.fromkeys(range(16), 5)))
    assert status is Status.FAIL
    assert message.startswith("no rank has a full step (at most 5 blocks, 8 per step): the job would train on nothing")


def test_a_rank_without_a_full_step_is_named_and_truncation_is_not_offered():
    counts = {r: 0 if r == 3 else 100 for r in range(16)}
    [(_, status, message)] = judged(data_balance, ctx(counts=counts))
    assert status is Status.FAIL
    assert message.startswith(
        "rank 3: 0 blocks, rank 0: 100; rank 3 has no full step (8 per step) while rank 0 runs "
        "12: ranks would stop ~12 steps apart (rank 3 on node1, rank 0 on node1)"
    )
    assert "truncate" not in message and "all%" not in message


def test_tiny_spreads_are_not_rounded_to_zero_and_one_step_is_singular():
    counts = {r: 10_000_000 if r == 3 else 10_000_008 for r in range(16)}
    [(_, status, message)] = judged(data_balance, ctx(counts=counts))
    assert status is Status.FAIL
    assert "8 blocks = <0.01%; ranks would stop ~1 step apart" in message
    assert message.endswith("drop 8 blocks max, <0.001% of tokens")


def test_per_step_1_is_the_issues_53_steps_and_other_units_are_not_tokens():
    s = spec(data_balance={"counts_file": "c.json", "per_step": 1, "unit": "samples"})
    [(_, _, message)] = judged(data_balance, ctx(s))
    assert "53 samples = 0.17%; ranks would stop ~53 steps apart" in message
    assert message.endswith("drop 53 samples max, 0.085% of the samples")


def test_equal_optimizer_steps_with_a_partial_accumulation_on_some_ranks_warns():
    # // (8 x 4) = 100 steps everywhere, but rank 0 holds one micro-batch more (401 vs 400 micro-steps)
    counts = {r: 3208 if r == 0 else 3200 for r in range(16)}
    s = spec(data_balance={"counts_file": "c.json", "per_step": 8, "grad_accum": 4})
    [(_, status, message)] = judged(data_balance, ctx(s, counts))
    assert status is Status.WARN
    assert message.startswith(
        "all 16 ranks run 100 steps (counts.json, 8 per step x 4 accumulation), but "
        "micro-steps differ: rank 1: 400, rank 0: 401"
    )


def test_cuda_visible_devices_limits_the_gpus_the_ranks_see():
    out = judged(world_size, ctx(spec(env={"CUDA_VISIBLE_DEVICES": "0,1,2,3"})))
    assert out == [
        (
            NODES,
            Status.FAIL,
            "4 GPUs visible (CUDA_VISIBLE_DEVICES=0,1,2,3 (job environment) of 8 on the "
            "node), the job puts 8 ranks on each node: ranks without a GPU fail at start "
            "or share one",
        )
    ]
    # CUDA stops at the first entry it cannot use: "0,1,9,2" is 2 GPUs on an 8-GPU node
    out = judged(world_size, ctx(spec(env={"CUDA_VISIBLE_DEVICES": "0,1,9,2"})))
    assert out[0][1] is Status.FAIL and out[0][2].startswith("2 GPUs visible")
    uuids = ",".join(f"GPU-{i}" for i in range(8))
    assert [s for _, s, _ in judged(world_size, ctx(spec(env={"CUDA_VISIBLE_DEVICES": uuids})))] == [Status.PASS]


def test_a_collective_timeout_in_minutes_by_mistake_fails():
    out = judged(timeouts, ctx(spec(timeouts={"collective_s": 30}, checkpoint=None)))
    assert out[1][1:] == (
        Status.FAIL,
        "collective timeout 30 s (init_process_group(timeout=)) is shorter than "
        "limits.timeout_min_s 60 s: the first slow collective (NCCL's setup, a "
        "compilation, a data stall) ends the job; is it in minutes? give seconds",
    )


def test_a_checkpoint_dir_that_is_a_file_is_named_and_its_name_is_no_resume_point():
    s = spec(checkpoint={"dir": "/c", "every_minutes": 30, "resume": True})
    out = judged(
        checkpoints,
        ctx(s),
        node1=probe_out(ckpt="notdir", resume="entry /c"),
        node2=probe_out(ckpt="notdir", resume="missing"),
    )
    assert out[1] == (
        NODES,
        Status.FAIL,
        "checkpoint directory /c is a file on this node, not a directory: the first "
        "save fails; remove it or point checkpoint.dir elsewhere",
    )
    assert [st for _, st, _ in out[2:]] == [Status.FAIL]


def test_same_device_name_on_every_node_is_not_called_shared():
    local = "/dev/nvme0n1p1 1000000000 1 104857600 1% /"
    out = judged(checkpoints, ctx(), node1=probe_out(fs=local, fstype="xfs"), node2=probe_out(fs=local, fstype="xfs"))
    assert out[1] == (
        NODES,
        Status.PASS,
        "/shared/ckpt writable, 107.4 GB (10^9 bytes) free (node-local xfs "
        "filesystem on each node: a checkpoint stays on the node that wrote it)",
    )
    out = judged(checkpoints, ctx(), node1=probe_out(fstype="nfs"), node2=probe_out(fstype="nfs"))
    assert out[1][2] == (
        "/shared/ckpt writable, 107.4 GB (10^9 bytes) free (shared nfs filesystem on every node: nfs:/ckpt on /shared)"
    )


@pytest.mark.parametrize(
    "env, status, start",
    [
        (
            {"NCCL_ASYNC_ERROR_HANDLING": "1"},
            Status.PASS,
            "NCCL_ASYNC_ERROR_HANDLING=1 (job environment): the watchdog",
        ),
        (
            {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "0", "NCCL_ASYNC_ERROR_HANDLING": "1"},
            Status.FAIL,
            "TORCH_NCCL_ASYNC_ERROR_HANDLING=0 (job environment) and TORCH_NCCL_BLOCKING_WAIT unset",
        ),
        (
            {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "4"},
            Status.FAIL,
            "TORCH_NCCL_ASYNC_ERROR_HANDLING=4 (job environment) (not 0, 1, 2 or 3)",
        ),
        ({"TORCH_NCCL_ASYNC_ERROR_HANDLING": "2"}, Status.PASS, "TORCH_NCCL_ASYNC_ERROR_HANDLING=2 (job environment)"),
    ],
)
def test_async_error_handling_names_and_values(env, status, start):
    out = judged(timeouts, ctx(spec(env=env, timeouts={"collective_s": 1800})))
    assert out[-1][1] is status and out[-1][2].startswith(start)


# --- the directory tests are the job's user's, not root's (issue 17, slice I) -----------------------------

NOT_AS_USER = "!not checked as the job's user: neither setpriv nor runuser (util-linux) is on this node"


def test_directory_tests_that_could_not_run_as_the_jobs_user_are_errors_not_roots_answers():
    s = spec(checkpoint={"dir": "/c", "every_minutes": 30, "resume": True})
    text = probe_out(
        checked_as=NOT_AS_USER.replace(" ", "\\x20"),
        ckpt="",
        resume="",
        writable="default\t?" + NOT_AS_USER[1:] + "\ncheckpoint\t?" + NOT_AS_USER[1:] + "\n",
    )
    text = text.replace("@@nodecheck ckpt_exists \n", "")
    out = judged(checkpoints, ctx(s), node1=text, node2=text)
    assert out[1:] == [
        (NODES, Status.ERROR, "checkpoint directory /c: " + NOT_AS_USER[1:]),
        (NODES, Status.ERROR, "resume point: " + NOT_AS_USER[1:]),
    ]
    fr = judged(flight_recorder, ctx(), node1=text, node2=text)
    assert fr[0][:2] == (NODES, Status.ERROR) and fr[0][2].endswith("; its directory was " + NOT_AS_USER[1:])


def test_directory_tests_made_as_root_say_so():
    s = spec(checkpoint={"dir": "/c", "every_minutes": 30, "resume": True})
    out = judged(
        checkpoints,
        ctx(s),
        node1=probe_out(checked_as="root", resume="exists"),
        node2=probe_out(checked_as="alice", resume="exists"),
    )
    assert ("node1",) in [n for n, _, _ in out]
    messages = {(nodes, m) for nodes, _, m in out}
    assert (
        ("node1",),
        "resumes from a checkpoint in /c: present on this node (checked as root: the job's user is not known)",
    ) in messages
    assert (("node2",), "resumes from a checkpoint in /c: present on this node") in messages
    assert any(
        n == ("node1",) and m.endswith("(checked as root: the job's user is not known)") and "writable" in m
        for n, m in messages
    )
