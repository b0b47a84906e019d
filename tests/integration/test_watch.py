"""`nodecheck watch` on the simulated cluster: fake trainers writing step lines on real nodes over real
SSH, the fake nvidia-smi following the same scenario clock (tests/harness/training.py), time-compressed
(a sample every 0.2 s, bounds of 1-2.5 s; each fault comes 1.5-3 s into the run, after the watcher's
first samples: a first sample is a baseline, and on 2 busy cores the first SSH handshakes take a while).
Each scenario of the issue: a healthy run completes quietly; a checkpoint raises no alert; the epoch-end
power deadlock is `hung` naming the odd node/GPU/rank, alerted once through the command hook and once by
HTTP POST (its first attempt refused, its retry accepted), with an incident record of the samples, and
the processes survive (no --on-hang); a rank that dies is `crashed`; throughput under the floor is
`slow`, naming the node; a node whose ranks step 30% slower is a `straggler`; a node that stops
answering SSH is `unresponsive` while the watch goes on; a watcher killed mid-hang resumes without a
second alert; --on-hang cancel ends the processes; and a real Slurm job watched by --slurm-job ends
`completed`, or, hung with --on-hang cancel, is scancelled once."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from harness import training
from integration.runs import nodecheck

from tests.helpers import read_until
from tests.watch.test_alerts import Receiver

pytestmark = pytest.mark.integration

NODES = ["node1", "node2"]
CONFIG = """match: 'train\\.py'
interval_s: 0.2
progress: {log: /root/train.log}
bounds: {hang_after_s: 1.0, checkpoint_max_s: 2.5, startup_grace_s: 2.0, unresponsive_after_s: 2.0,
         slow_for_s: 1.0, throughput_floor: 3000}
alerts: {retries: 1, backoff_s: 0.05, timeout_s: 5}
"""
HOOK = """import json, sys
event = json.load(sys.stdin)
with open(sys.argv[1], "a") as f:
    f.write(json.dumps(event) + "\\n")
"""


class Watch:
    """The files of one watch: config, hook, reports; argv for `nodecheck watch` on the cluster."""

    def __init__(self, cluster, tmp_path: Path, *extra: str, url: str | None = None, config: str = CONFIG) -> None:
        self.tmp, self.out, self.events = tmp_path, tmp_path / "reports", tmp_path / "events.jsonl"
        (tmp_path / "watch.yml").write_text(config)
        (tmp_path / "hook.py").write_text(HOOK)
        self.argv = [
            "watch",
            str(cluster.inventory_path),
            "--nodes",
            "node[1-2]",
            "--config",
            str(tmp_path / "watch.yml"),
            "--alert-command",
            f"{sys.executable} {tmp_path / 'hook.py'} {self.events}",
            "--output-dir",
            str(self.out),
            *(["--alert-url", url] if url else []),
            *extra,
        ]

    def run(self, *extra: str, timeout: float = 60) -> tuple[int, list[str], str]:
        code, out, err, _ = nodecheck(*self.argv, *extra, timeout=timeout)
        return code, out.splitlines(), err

    def start(self, *extra: str) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "nodecheck", *self.argv, *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def sent(self) -> list[dict]:
        return [json.loads(x) for x in self.events.read_text().splitlines()] if self.events.exists() else []

    def alert_log(self) -> list[str]:
        [log] = (self.out / "watch").glob("*/alerts.log")
        return log.read_text().splitlines()

    def state(self) -> dict:
        """The watcher's state.json ({} before its first save, or while it is being replaced)."""
        try:
            [path] = (self.out / "watch").glob("*/state.json")
            return json.loads(path.read_text())
        except (ValueError, OSError):
            return {}

    def incidents(self, verdict: str) -> list[Path]:
        return sorted(
            p for p in self.out.iterdir() if "_watch_" in p.name and p.name.split("_")[-1].split("-")[0] == verdict
        )


def verdicts(lines: list[str]) -> list[str]:
    """The verdict of each change line (`<stamp> job <label>: <verdict>: ...`), in order."""
    return [
        ln.split(": ", 2)[1].split(":")[0]
        for ln in lines[1:-1]
        if " job " in ln and ": " in ln and "on-hang" not in ln.split(": ", 2)[1]
    ]


def test_a_healthy_run_progresses_then_completes_quietly(cluster, tmp_path):
    cluster.start_training_all(training.healthy(NODES, duration=2.5))
    w = Watch(cluster, tmp_path)
    code, lines, err = w.run("--duration", "15")
    assert code == 0, err
    assert verdicts(lines)[-2:] == ["progressing", "completed"] and set(verdicts(lines)) <= {
        "starting",
        "progressing",
        "completed",
    }
    assert "stopped (the job completed): completed since" in lines[-1] and lines[-1].endswith("exit 0")
    assert [(e["kind"], e["verdict"]) for e in w.sent()] == [("completed", "completed")]  # no alarm


def test_a_normal_checkpoint_raises_no_alert(cluster, tmp_path):
    cluster.start_training_all(training.checkpoint(NODES, at=2.5, length=1.6))
    w = Watch(cluster, tmp_path)
    code, lines, err = w.run("--duration", "6")
    assert code == 0, err
    assert "checkpointing" in verdicts(lines) and set(verdicts(lines)) <= {"starting", "progressing", "checkpointing"}
    assert verdicts(lines)[-1] == "progressing"  # resumed after the save
    assert w.sent() == []


def test_the_power_deadlock_is_hung_naming_the_odd_rank_alerted_once_each_way(cluster, tmp_path):
    receiver = Receiver(statuses=[503])  # the first POST fails: retried, logged
    try:
        # at 3 s: the watcher has seen steps move before the freeze even when its first SSH
        # handshakes are slow (a loaded CI machine); else it is "no progress within the startup grace"
        cluster.start_training_all(training.deadlock(NODES, at=3.0, odd_node="node2", odd_gpu=3))
        w = Watch(cluster, tmp_path, url=receiver.url)
        code, lines, err = w.run("--duration", "6.5")
    finally:
        receiver.close()
    assert code == 2, err
    assert verdicts(lines)[-1] == "hung"
    [event] = w.sent()
    # one hook run; the POST answered 503, then its one retry (alerts.retries: 1) was accepted
    assert receiver.bodies == [event, event] and receiver.types == ["application/json"] * 2
    posts = [ln for ln in w.alert_log() if 'channel="url"' in ln and 'verdict="hung"' in ln]
    assert (
        len(posts) == 2
        and "action=alert-failed" in posts[0]
        and 'attempt="1/2"' in posts[0]
        and 'detail="HTTP 503' in posts[0]
    ), posts
    assert "action=alert-delivered" in posts[1] and 'attempt="2/2"' in posts[1] and 'detail="HTTP 200"' in posts[1]
    assert (event["kind"], event["verdict"], event["nodes"], event["ranks"]) == ("alarm", "hung", ["node2"], [11]), (
        event["message"]
    )
    assert (
        event["message"].startswith("hung: power-deadlock signature")
        and "rank 11 (node2 GPU3) at 0% while the other 15 ranks read 100%" in event["message"]
    )
    [record] = w.incidents("hung")
    assert event["incident"] == str(record)
    ticks = [json.loads(x) for x in (record / "samples.jsonl").read_text().splitlines()]
    assert len(ticks) >= 5
    last = ticks[-1]["nodes"]["node2"]
    assert [g["util_pct"] for g in last["sample"]["gpus"]] == [100, 100, 100, 0, 100, 100, 100, 100]
    assert {g["power_w"] for g in last["sample"]["gpus"]} == {190.0}
    assert "@@nodecheck begin gpus" in last["raw"]["stdout"]
    assert len(cluster.training_pids()) == 2  # without --on-hang the job is untouched


def test_a_rank_that_dies_is_crashed_naming_its_node(cluster, tmp_path):
    cluster.start_training_all(training.rank_dies(NODES, at=2.0, node="node2"))
    w = Watch(cluster, tmp_path)
    code, lines, err = w.run("--duration", "4")
    assert code == 2, err
    assert verdicts(lines)[-1] == "crashed"
    [event] = [e for e in w.sent() if e["verdict"] == "crashed"]
    assert event["nodes"] == ["node2"] and event["message"].startswith("crashed: processes gone on node2")


def test_throughput_under_the_floor_is_slow_naming_the_slowest_node(cluster, tmp_path):
    start = time.time()  # node2 sags (5,400 -> 2,700 tps < 3,000), node1 keeps its pace
    cluster.start_training_all(
        {
            **training.healthy(NODES, start=start),
            "node2": training.sagging(NODES, at=1.5, factor=2.0, start=start)["node2"],
        }
    )
    w = Watch(cluster, tmp_path)
    code, lines, err = w.run("--duration", "5.5")
    assert code == 1, (err, lines)
    assert verdicts(lines)[-1] == "slow"
    [event] = w.sent()
    assert (event["verdict"], event["nodes"]) == ("slow", ["node2"])
    assert (
        event["message"].startswith("slow: throughput 2,700 below the floor 3,000 for ")
        and "(lowest on node2; last step " in event["message"]
    )


def test_a_node_whose_ranks_step_slower_is_a_straggler_naming_its_ranks(cluster, tmp_path):
    cluster.start_training_all(training.straggler(NODES, slow_node="node2", factor=1.3))  # 0.130 s vs 0.100 s
    config = CONFIG.replace(
        "progress: {log: /root/train.log}",
        "progress: {log: /root/train.log, rank_time_regex: "
        "'rank (?P<rank>[0-9]+) step [0-9]+ time (?P<seconds>[0-9.]+)s'}",
    )
    w = Watch(cluster, tmp_path, config=config)
    code, lines, err = w.run("--duration", "3")
    assert code == 1, err
    assert verdicts(lines)[-1] == "straggler"
    [event] = w.sent()
    assert (event["verdict"], event["nodes"], event["ranks"]) == ("straggler", ["node2"], list(range(8, 16)))
    assert event["message"].startswith(
        "straggler: node2 ranks 8-15 median 0.13 s per step, 30% above the other "
        "ranks' median 0.1 s (8: 0.13 s, 9: 0.13 s,"
    )


def test_a_node_that_stops_answering_ssh_is_unresponsive_and_the_watch_goes_on(cluster, tmp_path):
    cluster.start_training_all(training.unresponsive(NODES))
    w = Watch(cluster, tmp_path)
    proc = w.start("--duration", "5")
    try:
        read_until(proc, ": progressing", 10)
        cluster.hang_ssh("node2")
        read_until(proc, ": unresponsive", 10)
        out, err = proc.communicate(timeout=30)
    finally:
        cluster.unhang_ssh("node2")
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    assert "stopped (--duration 5 s reached): unresponsive" in out
    [event] = w.sent()
    assert (event["verdict"], event["nodes"]) == ("unresponsive", ["node2"])
    # "not answering for 2.1 s", or, when a sample got through between the redials of its stopped
    # sshd, "failed 8 of its 10 samples in 2.2 s, not answering now"
    assert event["message"].startswith("unresponsive: node2 ") and "not answering" in event["message"]
    assert event["message"].endswith(
        f"the job still progresses (last step {event['message'].rsplit('(last step ', 1)[1]}"
    )
    [record] = w.incidents("unresponsive")
    ticks = [json.loads(x) for x in (record / "samples.jsonl").read_text().splitlines()]
    assert ticks[-1]["nodes"]["node1"]["failure"] == "" and ticks[-1]["nodes"]["node2"]["failure"] != ""


def test_a_watcher_killed_mid_hang_resumes_without_a_second_alert(cluster, tmp_path):
    cluster.start_training_all(training.deadlock(NODES, at=1.5, odd_node="node1", odd_gpu=5))
    w = Watch(cluster, tmp_path)
    proc = w.start()
    try:
        read_until(proc, ": hung", 15)
        deadline = time.monotonic() + 10
        # the alert went out AND the watcher recorded it: killed between the hook's answer and that
        # record, a restart delivers it again (at least once, by design)
        while (
            not (w.sent() and w.state().get("verdict") == "hung" and not w.state().get("pending"))
            and time.monotonic() < deadline
        ):
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)  # no chance to save anything more
        proc.wait()
    [event] = w.sent()
    assert event["verdict"] == "hung" and event["ranks"] == [5]
    code, lines, err = w.run("--duration", "1.5")
    assert code == 2, err
    assert "; resumed: hung since " in lines[0]
    assert verdicts(lines) == []  # no change of verdict: no line, no incident
    assert [e["verdict"] for e in w.sent()] == ["hung"] and len(w.incidents("hung")) == 1


def test_on_hang_cancel_ends_the_matched_processes(cluster, tmp_path):
    cluster.start_training_all(training.deadlock(NODES, at=2.0, odd_node="node2", odd_gpu=0))
    assert len(cluster.training_pids()) == 2
    w = Watch(cluster, tmp_path, "--on-hang", "cancel")
    code, lines, err = w.run("--duration", "7")  # hung 2.5 s after the freeze
    assert "; on-hang cancel: SIGTERM to 2 process(es) matching 'train\\\\.py' on 2 node(s); incident" in "\n".join(
        lines
    ), lines
    deadline = time.monotonic() + 5
    while cluster.training_pids() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert cluster.training_pids() == []
    action = json.loads((w.incidents("hung")[0] / "incident.json").read_text())["on_hang"]
    assert action["ok"] is True and sorted(action["nodes"]) == NODES
    assert code == 2, err  # processes gone afterwards: crashed


def slurm_training(cluster, tmp_path, scenarios: dict[str, dict]) -> int:
    """A one-node Slurm job (on node1) that runs the fake trainer of `scenarios`; its id."""
    cluster.slurm_up(nodes=1)
    cluster.start_training_all(scenarios)
    cluster.stop_training()  # keep its scenario, nvidia-smi and pgrep: the job runs it
    d = cluster.training_dir("node1")
    # the run's clock starts once the job and the watcher are up, so the watcher sees it progress
    scenario = json.loads((d / "scenario.json").read_text())
    (d / "scenario.json").write_text(json.dumps(dict(scenario, start=time.time() + 2.0)))
    script = tmp_path / "train.sbatch"
    script.write_text(
        f"#!/bin/sh\nexec /usr/bin/python3 -I {d / 'trainer.py'} train.py --scenario {d / 'scenario.json'} --proc 0\n"
    )
    script.chmod(0o755)
    return cluster.sbatch("-w", "node1", str(script), wrap=None)


def watch_slurm(cluster, w: Watch, jobid: int, *extra: str) -> tuple[int, str, str]:
    argv = [a for a in w.argv if a not in ("--nodes", "node[1-2]")]
    code, out, err, _ = nodecheck(*argv, "--slurm-job", str(jobid), *extra, timeout=60, env=cluster.slurm_env())
    return code, out, err


def test_a_slurm_job_watched_by_id_ends_completed(cluster, tmp_path):
    jobid = slurm_training(cluster, tmp_path, training.healthy(["node1"], duration=3.0))
    w = Watch(cluster, tmp_path)
    code, out, err = watch_slurm(cluster, w, jobid, "--duration", "20")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith(f"nodecheck watch: job {jobid} ")
    assert "progressing" in verdicts(lines) and verdicts(lines)[-1] == "completed"
    # stopped by Slurm's COMPLETED, or a moment before it by the log's "training complete" with the
    # process gone: either way completed
    assert any(
        f"stopped ({why}): completed since" in lines[-1] for why in (f"job {jobid} is COMPLETED", "the job completed")
    )
    assert cluster.wait_job(jobid, timeout=10)["JobState"] == "COMPLETED"
    assert [(e["job"], e["verdict"]) for e in w.sent()] == [(str(jobid), "completed")]


def test_on_hang_cancel_of_a_slurm_job_scancels_it_once(cluster, tmp_path):
    jobid = slurm_training(cluster, tmp_path, training.deadlock(["node1"], at=3.0, odd_node="node1", odd_gpu=3))
    w = Watch(cluster, tmp_path, "--on-hang", "cancel")
    code, out, err = watch_slurm(cluster, w, jobid, "--duration", "25")
    lines = out.splitlines()
    assert f"; on-hang cancel: scancel {jobid}: done; incident" in out, lines
    assert cluster.wait_job(jobid, states=("CANCELLED",), timeout=10)["JobState"] == "CANCELLED"
    hung, *after = w.sent()
    assert (hung["kind"], hung["verdict"], hung["nodes"], hung["ranks"]) == ("alarm", "hung", ["node1"], [3])
    # Slurm's CANCELLED that follows is the watcher's own cancel: no second alarm
    assert after == [] and verdicts(lines)[-1] == "hung"
    [state] = (w.out / "watch").glob("*/state.json")
    assert "; cancelled by --on-hang cancel (" in json.loads(state.read_text())["message"]
    action = json.loads((w.incidents("hung")[0] / "incident.json").read_text())["on_hang"]
    assert action == {"action": "cancel", "ok": True, "result": f"scancel {jobid}: done"}
    assert len([ln for ln in w.alert_log() if "action=on-hang-cancel" in ln]) == 1  # once per hang
    assert code == 2, err


def test_forensics_on_hang_runs_before_anything_else_and_is_linked(cluster, tmp_path):
    """--forensics: when the deadlock turns hung, `nodecheck forensics` runs on the job's nodes (the real
    py-spy on each fake trainer) before the alert; the event, the incident and stdout link its record."""
    cluster.install_pyspy()
    cluster.start_training_all(training.deadlock(NODES, at=3.0, odd_node="node2", odd_gpu=3))
    w = Watch(cluster, tmp_path, "--forensics")
    code, lines, err = w.run("--duration", "10", timeout=120)
    assert code == 2, err
    assert "on hang: forensics, then nothing" in lines[0]
    [event] = w.sent()
    fx = event["forensics"]
    record = Path(fx["record"])
    assert record.parent == w.out and record.name.split("_")[1] == "forensics"
    doc = json.loads((record / "forensics.json").read_text())
    assert fx["verdict"] == doc["diagnosis"]["headline"]
    assert sorted(doc["nodes"]) == NODES and all(doc["nodes"][n]["pyspy"].startswith("py-spy ") for n in NODES)
    # every node's trainer process was found and its stack taken (the fake trainer sets no rank variables)
    stacked = [p for g in doc["stack_groups"] if not g["failure"] for p in g["processes"]]
    assert sorted(p["node"] for p in stacked) == NODES
    assert any(f"; forensics: {fx['verdict']} ({record}); incident " in line for line in lines), lines
    [incident] = w.incidents("hung")
    assert json.loads((incident / "incident.json").read_text())["event"]["forensics"] == fx
