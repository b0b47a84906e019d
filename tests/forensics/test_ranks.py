"""forensics/ranks.py: who a process is (rank, GPU) from its launcher's variables, and the ranks missing."""

from __future__ import annotations

import pytest

from nodecheck.forensics.ranks import (
    by_rank,
    duplicated,
    expected_world,
    fold_ranks,
    gpu_of,
    likely_node,
    missing_ranks,
    rank_process,
    rank_processes,
    ranks_phrase,
)
from nodecheck.parsers.forensics import JobProcess
from nodecheck.parsers.watch_sample import Proc


def proc(pid: int, **env: str) -> JobProcess:
    return JobProcess(Proc(pid, "Sl", 60, "python train.py", 1), env)


def test_torchrun_variables():
    p = rank_process(
        "node2",
        proc(
            7,
            RANK="11",
            LOCAL_RANK="3",
            WORLD_SIZE="16",
            GROUP_RANK="1",
            LOCAL_WORLD_SIZE="8",
            TORCH_FR_DUMP_TEMP_FILE="/scratch/fr/r_",
        ),
    )
    assert (p.rank, p.local_rank, p.gpu, p.world_size, p.node_rank, p.local_world_size) == (11, 3, "3", 16, 1, 8)
    assert p.place == "node2 GPU3" and p.dump_prefix == "/scratch/fr/r_" and p.elapsed_s == 60


def test_srun_variables_and_one_bound_gpu():
    p = rank_process(
        "gpu-a07",
        proc(8, SLURM_PROCID="3", SLURM_LOCALID="3", SLURM_NTASKS="16", SLURM_STEP_ID="0", CUDA_VISIBLE_DEVICES="5"),
    )
    assert (p.rank, p.gpu, p.world_size) == (3, "5", 16) and p.place == "gpu-a07 GPU5"


def test_srun_batch_script_and_client_are_not_ranks():
    batch = proc(5, SLURM_PROCID="0", SLURM_JOB_ID="42", SLURM_NTASKS="16")  # no SLURM_STEP_ID
    assert rank_process("node1", batch).rank is None


def test_torchrun_under_srun_only_the_workers_are_ranks():
    agent = proc(10, SLURM_PROCID="1", SLURM_STEP_ID="0", SLURM_LOCALID="0")
    workers = [proc(11 + k, RANK=str(8 + k), LOCAL_RANK=str(k), SLURM_PROCID="1", SLURM_STEP_ID="0") for k in range(2)]
    ps = rank_processes("node2", [agent, *workers])
    assert [p.rank for p in ps] == [None, 8, 9] and [p.local_rank for p in ps] == [None, 0, 1]


def test_no_rank_variables_is_a_process_without_a_rank():
    p = rank_process("node1", proc(9))
    assert p.rank is None and p.gpu is None and p.place == "node1 pid 9"


@pytest.mark.parametrize(
    "local, visible, gpu",
    [
        (2, None, "2"),
        (2, "4,5,6,7", "6"),
        (1, "3", "3"),
        (5, "0,1", None),
        (None, None, None),
        (0, "GPU-8a1b,GPU-77c2", "GPU-8a1b"),
    ],
)
def test_gpu_of(local, visible, gpu):
    assert gpu_of(local, visible) == gpu


def test_missing_ranks_and_where_they_ran():
    ps = [
        rank_process(
            f"node{1 + r // 4}",
            proc(100 + r, RANK=str(r), WORLD_SIZE="8", GROUP_RANK=str(r // 4), LOCAL_WORLD_SIZE="4"),
        )
        for r in range(8)
        if r != 6
    ]
    assert expected_world(ps) == 8 and missing_ranks(ps) == (6,)
    assert likely_node(6, ps) == "node2" and likely_node(1, ps) == "node1"


def test_no_world_size_means_nothing_is_known_missing():
    assert missing_ranks([rank_process("node1", proc(1, RANK="0"))]) == ()


def test_a_rank_claimed_twice():
    ps = [rank_process("node1", proc(1, RANK="0")), rank_process("node1", proc(2, RANK="0"))]
    assert list(duplicated(ps)) == [0] and by_rank(ps)[0].pid == 1


def test_folding():
    assert fold_ranks([0, 1, 2, 4, 5, 6, 7]) == "0-2,4-7" and fold_ranks([]) == ""
    assert ranks_phrase([3]) == "rank 3" and ranks_phrase([3, 1, 2]) == "ranks 1-3"
