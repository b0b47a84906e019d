"""The simulated training jobs for `nodecheck watch` (tests/fakes/trainer.py, tests/fakes/gpu_telemetry.py,
tests/harness/training.py), checked over real SSH: step lines at the scenario's rate, the fake
nvidia-smi's CSV per phase (checkpoint, power deadlock, crash, completion), the trainer found by
`pgrep -f 'train\\.py'` on its own node only, and hang_ssh(): SSH times out while the node trains on."""

from __future__ import annotations

import os
import re
import time

import paramiko
import pytest
from harness import training

from nodecheck.parsers.nvidia_smi_csv import parse_query_gpu

pytestmark = pytest.mark.integration

QUERY = (
    "nvidia-smi --query-gpu=index,utilization.gpu,power.draw,power.limit,memory.used,memory.total "
    "--format=csv,noheader,nounits"
)
STEP = re.compile(
    r"^\[rank(\d+)\]: step: (\d+)  loss: \d+\.\d{4}  memory: 60\.55GiB\(76\.02%\)  tps: ([\d,]+)  mfu: (\d+\.\d\d)%$"
)


def wait_until(start: float, t: float) -> None:
    """Sleep until t seconds after the scenario's start."""
    left = start + t - time.time()
    if left > 0:
        time.sleep(left)


def ssh(cluster, node: str, cmd: str) -> str:
    rc, out, err = cluster.run(node, cmd)
    assert rc == 0, f"{node}: {cmd}: exit {rc}: {err}"
    return out


def gpus(cluster, node: str) -> list[str]:
    """The noheader,nounits CSV rows: "index, util, power, limit, used, total"."""
    return ssh(cluster, node, QUERY).splitlines()


def steps(log_text: str) -> list[int]:
    return [int(m[2]) for m in map(STEP.match, log_text.splitlines()) if m]


def timed_steps(cluster, node: str, start: float, step_s: float) -> tuple[int, int, list[int]]:
    """(fewest, most steps the clock allows around the read, steps in the log read over ssh)."""
    before = time.time() - start
    text = ssh(cluster, node, "cat /root/train.log")
    after = time.time() - start
    return int(before / step_s + 1e-9), int(after / step_s + 1e-9), steps(text)


def pgrep(cluster, node: str) -> list[int]:
    rc, out, _ = cluster.run(node, "pgrep -f 'train\\.py'")
    assert rc in (0, 1)
    return sorted(int(p) for p in out.split())


def test_healthy_steps_at_rate_busy_gpus_and_process_on_its_node_only(cluster):
    job = training.healthy(["node1", "node2"], step_s=0.1)
    start = job["node1"]["start"]
    logs = cluster.start_training_all(job)
    assert logs == {
        "node1": cluster.node_dir("node1") / "home" / "train.log",
        "node2": cluster.node_dir("node2") / "home" / "train.log",
    }
    wait_until(start, 0.75)
    lo, hi, got = timed_steps(cluster, "node1", start, 0.1)
    assert got == list(range(1, len(got) + 1)) and lo <= len(got) <= hi, (lo, hi, got)
    wait_until(start, 1.55)
    lo, hi, got = timed_steps(cluster, "node2", start, 0.1)
    assert got == list(range(1, len(got) + 1)) and 15 <= lo <= len(got) <= hi, (lo, hi, got)

    first = ssh(cluster, "node2", "head -n 1 /root/train.log")
    assert first == "[rank8]: step: 1  loss: 10.9775  memory: 60.55GiB(76.02%)  tps: 5,400  mfu: 41.20%\n"
    assert ssh(cluster, "node1", "head -n 1 /root/train.log").startswith("[rank0]: step: 1  loss: 10.9775  ")

    assert gpus(cluster, "node1") == [f"{g}, 100, 595.00, 700.00, 62000, 81559" for g in range(8)]
    csv = ssh(cluster, "node2", "nvidia-smi --query-gpu=index,utilization.gpu,power.draw,memory.used --format=csv")
    assert csv.splitlines() == ["index, utilization.gpu [%], power.draw [W], memory.used [MiB]"] + [
        f"{g}, 100 %, 595.00 W, 62000 MiB" for g in range(8)
    ]
    rows = parse_query_gpu(csv)  # nodecheck's own parser reads it as nvidia-smi's CSV
    assert [(r["index"], r["utilization.gpu"], r["power.draw"]) for r in rows] == [
        (str(g), "100", "595.00") for g in range(8)
    ]

    # the trainer: one process per node, in the node's namespaces (so `down` kills it), found on its node only
    p1, p2 = cluster.training_pids("node1"), cluster.training_pids("node2")
    assert len(p1) == 1 and len(p2) == 1
    assert pgrep(cluster, "node1") == p1 and pgrep(cluster, "node2") == p2 and pgrep(cluster, "node3") == []
    assert os.stat(f"/proc/{p1[0]}/ns/mnt").st_ino == int((cluster.node_dir("node1") / "mntns").read_text())
    d = cluster.training_dir("node1")
    with open(f"/proc/{p1[0]}/cmdline") as f:
        cmdline = f.read()
    assert cmdline.split("\0")[1:-1] == [
        "-I",
        f"{d}/trainer.py",
        "train.py",
        "--scenario",
        f"{d}/scenario.json",
        "--proc",
        "0",
    ]
    assert ssh(cluster, "node1", f"cat /proc/{p1[0]}/comm") == "python3\n"


def test_checkpoint_writer_idle_others_busy_at_low_power_then_training_resumes(cluster):
    job = training.checkpoint(["node1", "node2"], at=0.5, length=1.0)
    start = job["node1"]["start"]
    cluster.start_training_all(job)
    wait_until(start, 0.6)
    log = ssh(cluster, "node2", "cat /root/train.log").splitlines()
    assert steps("\n".join(log)) == [1, 2, 3, 4, 5]
    assert log[-1] == "[rank8]: saving checkpoint at step 5"
    assert gpus(cluster, "node1") == ["0, 0, 140.00, 700.00, 62000, 81559"] + [
        f"{g}, 100, 140.00, 700.00, 62000, 81559" for g in range(1, 8)
    ]
    assert gpus(cluster, "node2") == [f"{g}, 100, 140.00, 700.00, 62000, 81559" for g in range(8)]
    assert time.time() - start < 1.5, "too slow to see the checkpoint phase"
    wait_until(start, 1.75)
    log = ssh(cluster, "node1", "cat /root/train.log").splitlines()
    assert log[5:7] == ["[rank0]: saving checkpoint at step 5", "[rank0]: checkpoint saved at step 5 in 1.00 s"]
    assert steps("\n".join(log[7:]))[:2] == [6, 7]  # at 1.6 s, 1.7 s
    assert gpus(cluster, "node1") == [f"{g}, 100, 595.00, 700.00, 62000, 81559" for g in range(8)]


def test_deadlock_signature_one_gpu_idle_rest_busy_near_idle_power_no_steps(cluster):
    job = training.deadlock(["node1", "node2", "node3"], at=0.4, odd_node="node2", odd_gpu=3)
    start = job["node1"]["start"]
    cluster.start_training_all(job)
    wait_until(start, 0.6)
    assert gpus(cluster, "node2") == [f"{g}, {0 if g == 3 else 100}, 190.00, 1100.00, 62000, 81559" for g in range(8)]
    assert gpus(cluster, "node1") == [f"{g}, 100, 190.00, 1100.00, 62000, 81559" for g in range(8)]
    first = cluster.training_log("node3").read_text()
    wait_until(start, 1.0)
    assert cluster.training_log("node3").read_text() == first  # frozen
    assert steps(first) == [1, 2, 3, 4]
    assert first.splitlines()[-1].startswith("[rank16]: step: 4  ")
    assert len(pgrep(cluster, "node2")) == 1  # alive, silent


def test_rank_dies_process_gone_gpus_idle_others_stalled(cluster):
    job = training.rank_dies(["node1", "node2"], at=0.3, node="node2")
    start = job["node1"]["start"]
    cluster.start_training_all(job)
    wait_until(start, 0.6)
    assert pgrep(cluster, "node2") == [] and cluster.training_pids("node2") == []
    assert len(pgrep(cluster, "node1")) == 1
    log = ssh(cluster, "node2", "cat /root/train.log").splitlines()
    assert steps("\n".join(log)) == [1, 2, 3]
    assert log[-1] == "[rank8]: RuntimeError: simulated rank failure (exit code 1)"
    assert gpus(cluster, "node2") == [f"{g}, 0, 70.00, 700.00, 0, 81559" for g in range(8)]
    assert gpus(cluster, "node1") == [f"{g}, 100, 280.00, 700.00, 62000, 81559" for g in range(8)]


def test_sagging_throughput_and_step_rate_drop(cluster):
    job = training.sagging(["node1", "node2"], at=0.5, factor=4)
    start = job["node1"]["start"]
    cluster.start_training_all(job)
    wait_until(start, 1.45)
    text = ssh(cluster, "node1", "cat /root/train.log")
    after = time.time() - start
    got = steps(text)
    assert got == list(range(1, len(got) + 1)) and 7 <= len(got) <= 5 + int((after - 0.5) / 0.4 + 1e-9), got
    tps = [(int(m[2]), m[3], m[4]) for m in map(STEP.match, text.splitlines()) if m]
    assert tps[4] == (5, "5,400", "41.20") and tps[5] == (6, "1,350", "10.30") and tps[6] == (7, "1,350", "10.30")


def test_straggler_per_rank_times_and_one_process_per_gpu(cluster):
    job = training.straggler(["node1", "node2"], slow_node="node2", factor=1.3, procs=8)
    start = job["node1"]["start"]
    cluster.start_training_all(job)
    assert len(pgrep(cluster, "node2")) == 8 and len(cluster.training_pids()) == 16
    wait_until(start, 0.45)
    lines = ssh(cluster, "node2", "cat /root/train.log").splitlines()
    assert sorted(x for x in lines if x.endswith("step 2 time 0.130s")) == sorted(
        f"rank {r} step 2 time 0.130s" for r in range(8, 16)
    )
    assert "rank 3 step 2 time 0.100s" in cluster.training_log("node1").read_text().splitlines()
    assert cluster.stop_training("node2") == 8
    assert pgrep(cluster, "node2") == [] and len(pgrep(cluster, "node1")) == 8


def test_completes_prints_done_exits_and_gpus_go_idle(cluster):
    job = training.completes(["node1", "node2"], at=0.5)
    start = job["node1"]["start"]
    cluster.start_training_all(job)
    wait_until(start, 0.8)
    log = ssh(cluster, "node1", "cat /root/train.log").splitlines()
    assert steps("\n".join(log)) == [1, 2, 3, 4, 5] and log[-1] == "[rank0]: training complete"
    assert pgrep(cluster, "node1") == [] and cluster.training_pids() == []
    assert gpus(cluster, "node2") == [f"{g}, 0, 70.00, 700.00, 0, 81559" for g in range(8)]


def test_fake_nvidia_smi_before_start_and_refusals(cluster):
    job = training.healthy(["node1"], start=time.time() + 30, gpus=4)
    cluster.start_training_all(job)
    assert gpus(cluster, "node1") == [f"{g}, 0, 70.00, 700.00, 0, 81559" for g in range(4)]
    assert cluster.run("node1", "nvidia-smi --query-gpu=index,clocks.foo --format=csv") == (
        2,
        'Field "clocks.foo" is not a valid field to query.\n\n',
        "",
    )
    rc, out, err = cluster.run("node1", "nvidia-smi -q")
    assert (rc, out) == (2, "") and "only --query-gpu=FIELDS" in err
    assert ssh(cluster, "node1", "cat /root/train.log") == ""  # not started: alive, no line yet
    assert len(pgrep(cluster, "node1")) == 1


def test_hang_ssh_times_out_while_the_node_keeps_training(cluster):
    job = training.healthy(["node1", "node2"])
    cluster.start_training_all(job)
    log = cluster.training_log("node1")
    assert cluster.hang_ssh("node1") >= 1
    size = log.stat().st_size
    t0 = time.monotonic()
    # the kernel accepts the connection, sshd never sends its banner: paramiko's banner timeout
    with pytest.raises((paramiko.SSHException, OSError)):
        cluster.run("node1", "true", timeout=1.0)
    assert 0.9 <= time.monotonic() - t0 < 4
    assert log.stat().st_size > size  # training went on meanwhile
    assert ssh(cluster, "node2", "hostname") == "node2\n"
    cluster.unhang_ssh("node1")
    assert ssh(cluster, "node1", "hostname") == "node1\n"
    rc, out, err = cluster.run_on_node("node1", ["/usr/bin/tail", "-n", "1", "/root/train.log"])
    assert rc == 0 and STEP.match(out.strip()), (out, err)


def test_reset_unhangs_and_stops_training(cluster):
    cluster.start_training_all(training.healthy(["node2", "node3"]))
    cluster.hang_ssh("node2")
    cluster.reset()
    assert cluster.training_pids() == []
    assert not cluster.training_log("node2", {"log": "/root/train.log"}).exists()
    assert ssh(cluster, "node2", "hostname; command -v nvidia-smi pgrep") == "node2\n/usr/bin/pgrep\n"


def test_bad_scenarios_are_refused_before_anything_starts(cluster):
    with pytest.raises(ValueError, match="only the last phase may last for ever"):
        cluster.start_training(
            "node1",
            {"start": time.time(), "phases": [{"mode": "train", "step_s": 0.1, "until": None}, {"mode": "complete"}]},
        )
    with pytest.raises(ValueError, match="odd_gpu 9 is not a GPU"):
        cluster.start_training(
            "node1", {"start": time.time(), "phases": [{"mode": "deadlock", "odd_gpu": 9, "until": None}]}
        )
    with pytest.raises(ValueError, match="not one of the job's nodes"):
        training.deadlock(["node1"], at=1, odd_node="node2", odd_gpu=0)
    assert cluster.training_pids() == []
