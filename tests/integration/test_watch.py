"""`nodecheck watch` on the simulated cluster: fake trainers writing step lines on real nodes over real
SSH, the fake nvidia-smi following the same scenario clock (tests/harness/training.py), time-compressed.

Independent of scheduling (issue 32, 2.5): a busy machine samples slower, so the pace is MEASURED, not
assumed. The `pace` fixture samples the nodes as the watcher does and sets one tick (the interval, and so
the sample timeout) to 3x the median sample round, at least 1.5x the slowest; every bound and scenario
time is a number of ticks (Pace). And the tests wait on state: the watcher starts first and the job only
once it has said its first verdict (its own start-up is not part of the job's clock); each test then
waits for the verdict line it is about, for its alert to be delivered (state.json: nothing pending), and
stops the watcher with SIGTERM, rather than guessing a --duration.

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
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from harness import training
from integration.runs import nodecheck

from tests.helpers import Streamed, wait_until
from tests.watch.test_alerts import Receiver

pytestmark = pytest.mark.integration

NODES = ["node1", "node2"]
# in ticks (Pace.tick): the bounds of the watch config ...
HANG_AFTER, CHECKPOINT_MAX, STARTUP_GRACE, UNRESPONSIVE_AFTER, SLOW_FOR = 5, 12, 10, 10, 5
# ... and the scenarios' times: a fault comes after the watcher has seen the job progress (a first
# sample is a baseline, the next one that moved is progress), a checkpoint lasts longer than
# HANG_AFTER and less than CHECKPOINT_MAX, a healthy run long enough to be seen progressing
FAULT_AT, CHECKPOINT_LENGTH, HEALTHY_FOR = 6, 8, 8
MIN_TICK_S = 0.3
SAMPLE_ROUNDS = 8
HOOK = """import json, sys
event = json.load(sys.stdin)
with open(sys.argv[1], "a") as f:
    f.write(json.dumps(event) + "\\n")
"""


@dataclass(frozen=True)
class Pace:
    """One watcher tick on this machine now (the interval and the sample timeout), in seconds; every
    bound and scenario time of these tests is a number of ticks."""

    tick: float

    def s(self, ticks: float) -> float:
        return round(ticks * self.tick, 2)

    @property
    def wait(self) -> float:
        """The most any one wait on state may take: an upper bound only (a wait returns once the state
        is there), far above the slowest scenario (about HANG_AFTER + FAULT_AT ticks and a forensics)."""
        return 60 + self.s(40)

    def config(self, progress: str = "{log: /root/train.log}") -> str:
        return (
            "match: 'train\\.py'\n"
            f"interval_s: {self.tick:g}\n"
            f"progress: {progress}\n"
            f"bounds: {{hang_after_s: {self.s(HANG_AFTER):g}, checkpoint_max_s: {self.s(CHECKPOINT_MAX):g}, "
            f"startup_grace_s: {self.s(STARTUP_GRACE):g}, unresponsive_after_s: {self.s(UNRESPONSIVE_AFTER):g}, "
            f"slow_for_s: {self.s(SLOW_FOR):g}, throughput_floor: 3000}}\n"
            "alerts: {retries: 1, backoff_s: 0.05, timeout_s: 5}\n"
        )


def sample_rounds(cluster, rounds: int) -> list[float]:
    """Seconds of each round of the watcher's own sample probe on NODES, over kept SSH sessions as the
    watcher keeps them (the first round dials)."""
    from nodecheck.config.inventory import load_inventory, select
    from nodecheck.transport.fanout import run_probes
    from nodecheck.transport.kept import KeptSessions
    from nodecheck.transport.ssh import SshTransport
    from nodecheck.watch.config import WatchConfig
    from nodecheck.watch.probe import sample_probe

    nodes = select(load_inventory(str(cluster.inventory_path)), "node[1-2]")
    cfg = WatchConfig.model_validate({"match": "train\\.py", "progress": {"log": "/root/train.log"}})
    transport = KeptSessions(SshTransport(accept_new_host_keys=False, connect_timeout_s=30))
    took = []
    try:
        for _ in range(rounds):
            started = time.monotonic()
            work = {n: [sample_probe(cfg, n.name, "")] for n in nodes}
            done = run_probes(transport, work, fanout=8, deadline=started + 60)
            took.append(time.monotonic() - started)
            failed = [c for c in done.captures.values() if c.exit_code != 0]
            assert not failed, f"a sample failed while measuring the pace: {failed}"
    finally:
        transport.close()
    return took


@pytest.fixture(scope="module")
def pace(cluster) -> Pace:
    """The tick for this machine, measured while a job trains: 3x the median sample round, at least 1.5x
    the slowest (a busy machine's rounds vary) and MIN_TICK_S."""
    cluster.start_training_all(training.healthy(NODES))
    try:
        rounds = sample_rounds(cluster, SAMPLE_ROUNDS + 1)[1:]  # the first one dials
    finally:
        cluster.clear_training()
        cluster.clear_tools()
    tick = max(MIN_TICK_S, 3 * statistics.median(rounds), 1.5 * max(rounds))
    return Pace(math.ceil(tick * 20) / 20)


class Watch:
    """The files of one watch: config, hook, reports; argv for `nodecheck watch` on the cluster."""

    def __init__(
        self, cluster, tmp_path: Path, pace: Pace, *extra: str, url: str | None = None, config: str | None = None
    ) -> None:
        self.tmp, self.out, self.events = tmp_path, tmp_path / "reports", tmp_path / "events.jsonl"
        (tmp_path / "watch.yml").write_text(pace.config() if config is None else config)
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

    def start(self, *extra: str, argv: list[str] | None = None, env: dict | None = None) -> Streamed:
        return Streamed([sys.executable, "-m", "nodecheck", *(argv or self.argv), *extra], env=env)

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

    def delivered(self, verdict: str, pace: Pace) -> None:
        """Until the state says `verdict` with no alert left to deliver (the line is said before the
        alert goes out: stopped at the line, the alert would be cut)."""
        wait_until(
            lambda: self.state().get("verdict") == verdict and not self.state().get("pending"),
            pace.wait,
            f"{verdict} said and its alert delivered",
        )

    def incidents(self, verdict: str) -> list[Path]:
        return sorted(
            p for p in self.out.iterdir() if "_watch_" in p.name and p.name.split("_")[-1].split("-")[0] == verdict
        )


def deadlock(pace: Pace, odd_node: str, odd_gpu: int, nodes: list[str] = NODES) -> Callable[[], dict[str, dict]]:
    """The power deadlock as a job for watch_then_train: every rank blocked, `odd_node`'s GPU `odd_gpu`
    the rank that idles at low power (the one the verdict must name)."""
    return lambda: training.deadlock(nodes, at=pace.s(FAULT_AT), odd_node=odd_node, odd_gpu=odd_gpu)


def until_hung_alerted(run: Streamed, w: Watch, pace: Pace) -> str:
    """The watcher's hung line, once its alert went out and was recorded; that line."""
    line = run.until(": hung", pace.wait)
    w.delivered("hung", pace)
    return line


def watch_then_train(cluster, w: Watch, pace: Pace, job: Callable[[], dict[str, dict]], *extra: str) -> Streamed:
    """The watcher started, its first verdict said (the nodes sampled once, no job yet); then the job,
    its clock starting now (`job` builds the scenarios then): a watcher slow to start (a busy machine)
    does not eat into the job's timeline."""
    run = w.start(*extra)
    try:
        run.until(": starting", pace.wait)
        cluster.start_training_all(job())
    except BaseException:
        run.kill()
        raise
    return run


def verdicts(lines: list[str]) -> list[str]:
    """The verdict of each change line (`<stamp> job <label>: <verdict>: ...`), in order."""
    return [
        ln.split(": ", 2)[1].split(":")[0]
        for ln in lines[1:-1]
        if " job " in ln and ": " in ln and "on-hang" not in ln.split(": ", 2)[1]
    ]


def test_a_healthy_run_progresses_then_completes_quietly(cluster, tmp_path, pace):
    w = Watch(cluster, tmp_path, pace)
    run = watch_then_train(cluster, w, pace, lambda: training.healthy(NODES, duration=pace.s(HEALTHY_FOR)))
    code, lines, err = run.finish(pace.wait)  # the watch ends by itself: completed
    assert code == 0, err
    assert verdicts(lines)[-2:] == ["progressing", "completed"] and set(verdicts(lines)) <= {
        "starting",
        "progressing",
        "completed",
    }
    assert "stopped (the job completed): completed since" in lines[-1] and lines[-1].endswith("exit 0")
    assert [(e["kind"], e["verdict"]) for e in w.sent()] == [("completed", "completed")]  # no alarm


def test_a_normal_checkpoint_raises_no_alert(cluster, tmp_path, pace):
    w = Watch(cluster, tmp_path, pace)
    job = lambda: training.checkpoint(NODES, at=pace.s(FAULT_AT), length=pace.s(CHECKPOINT_LENGTH))  # noqa: E731
    run = watch_then_train(cluster, w, pace, job)
    try:
        run.until(": checkpointing", pace.wait)
        run.until(": progressing", pace.wait)  # resumed after the save
    finally:
        code, lines, err = run.stop()
    assert code == 0, err
    assert "checkpointing" in verdicts(lines) and set(verdicts(lines)) <= {"starting", "progressing", "checkpointing"}
    assert verdicts(lines)[-1] == "progressing"
    assert w.sent() == []


def test_the_power_deadlock_is_hung_naming_the_odd_rank_alerted_once_each_way(cluster, tmp_path, pace):
    receiver = Receiver(statuses=[503])  # the first POST fails: retried, logged
    try:
        w = Watch(cluster, tmp_path, pace, url=receiver.url)
        run = watch_then_train(cluster, w, pace, deadlock(pace, "node2", 3))
        try:
            until_hung_alerted(run, w, pace)
        finally:
            code, lines, err = run.stop()
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
    assert len(ticks) >= FAULT_AT + HANG_AFTER  # every tick since the watch began
    last = [t for t in ticks if "sample" in t["nodes"]["node2"]][-1]["nodes"]["node2"]  # its last answer
    assert [g["util_pct"] for g in last["sample"]["gpus"]] == [100, 100, 100, 0, 100, 100, 100, 100]
    assert {g["power_w"] for g in last["sample"]["gpus"]} == {190.0}
    assert "@@nodecheck begin gpus" in last["raw"]["stdout"]
    assert len(cluster.training_pids()) == 2  # without --on-hang the job is untouched


def test_a_rank_that_dies_is_crashed_naming_its_node(cluster, tmp_path, pace):
    w = Watch(cluster, tmp_path, pace)
    run = watch_then_train(cluster, w, pace, lambda: training.rank_dies(NODES, at=pace.s(FAULT_AT), node="node2"))
    try:
        run.until(": crashed", pace.wait)
        w.delivered("crashed", pace)
    finally:
        code, lines, err = run.stop()
    assert code == 2, err
    assert verdicts(lines)[-1] == "crashed"
    [event] = [e for e in w.sent() if e["verdict"] == "crashed"]
    assert event["nodes"] == ["node2"] and event["message"].startswith("crashed: processes gone on node2")


def test_throughput_under_the_floor_is_slow_naming_the_slowest_node(cluster, tmp_path, pace):
    def job() -> dict[str, dict]:  # node2 sags (5,400 -> 2,700 tps < 3,000), node1 keeps its pace
        start = time.time()
        sags = training.sagging(NODES, at=pace.s(FAULT_AT), factor=2.0, start=start)["node2"]
        return {**training.healthy(NODES, start=start), "node2": sags}

    w = Watch(cluster, tmp_path, pace)
    run = watch_then_train(cluster, w, pace, job)
    try:
        run.until(": slow", pace.wait)
        w.delivered("slow", pace)
    finally:
        code, lines, err = run.stop()
    assert code == 1, (err, lines)
    assert verdicts(lines)[-1] == "slow"
    [event] = w.sent()
    assert (event["verdict"], event["nodes"]) == ("slow", ["node2"])
    assert (
        event["message"].startswith("slow: throughput 2,700 below the floor 3,000 for ")
        and "(lowest on node2; last step " in event["message"]
    )


def test_a_node_whose_ranks_step_slower_is_a_straggler_naming_its_ranks(cluster, tmp_path, pace):
    rank_time = "'rank (?P<rank>[0-9]+) step [0-9]+ time (?P<seconds>[0-9.]+)s'"
    config = pace.config(progress=f"{{log: /root/train.log, rank_time_regex: {rank_time}}}")
    w = Watch(cluster, tmp_path, pace, config=config)
    # node2's ranks take 0.130 s a step, node1's 0.100 s
    run = watch_then_train(cluster, w, pace, lambda: training.straggler(NODES, slow_node="node2", factor=1.3))
    try:
        run.until(": straggler", pace.wait)
        w.delivered("straggler", pace)
    finally:
        code, lines, err = run.stop()
    assert code == 1, err
    assert verdicts(lines)[-1] == "straggler"
    [event] = w.sent()
    assert (event["verdict"], event["nodes"], event["ranks"]) == ("straggler", ["node2"], list(range(8, 16)))
    assert event["message"].startswith(
        "straggler: node2 ranks 8-15 median 0.13 s per step, 30% above the other "
        "ranks' median 0.1 s (8: 0.13 s, 9: 0.13 s,"
    )


def test_a_node_that_stops_answering_ssh_is_unresponsive_and_the_watch_goes_on(cluster, tmp_path, pace):
    w = Watch(cluster, tmp_path, pace)
    run = watch_then_train(cluster, w, pace, lambda: training.unresponsive(NODES))
    try:
        run.until(": progressing", pace.wait)
        cluster.hang_ssh("node2")
        run.until(": unresponsive", pace.wait)
        w.delivered("unresponsive", pace)
        ticks = w.state()["probed_ticks"]
        wait_until(lambda: w.state().get("probed_ticks", 0) >= ticks + 2, pace.wait, "two more ticks")  # goes on
    finally:
        code, lines, err = run.stop()
        cluster.unhang_ssh("node2")
    assert code == 1, err
    assert "stopped (stopped by a signal): unresponsive" in lines[-1]
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


def test_a_watcher_killed_mid_hang_resumes_without_a_second_alert(cluster, tmp_path, pace):
    w = Watch(cluster, tmp_path, pace)
    run = watch_then_train(cluster, w, pace, deadlock(pace, "node1", 5))
    try:
        run.until(": hung", pace.wait)
        # the alert went out AND the watcher recorded it: killed between the hook's answer and that
        # record, a restart delivers it again (at least once, by design)
        w.delivered("hung", pace)
    finally:
        run.kill()  # SIGKILL: no chance to save anything more
    [event] = w.sent()
    assert event["verdict"] == "hung" and event["ranks"] == [5]
    code, lines, err = w.run("--duration", f"{pace.s(8):g}")
    assert code == 2, err
    assert "; resumed: hung since " in lines[0]
    assert verdicts(lines) == []  # no change of verdict: no line, no incident
    assert [e["verdict"] for e in w.sent()] == ["hung"] and len(w.incidents("hung")) == 1


def test_on_hang_cancel_ends_the_matched_processes(cluster, tmp_path, pace):
    w = Watch(cluster, tmp_path, pace, "--on-hang", "cancel")
    run = watch_then_train(cluster, w, pace, deadlock(pace, "node2", 0))
    try:
        assert len(cluster.training_pids()) == 2
        hung = run.until(": hung", pace.wait)
        wait_until(lambda: cluster.training_pids() == [], pace.wait, "the matched processes ended")
        w.delivered("hung", pace)  # processes gone afterwards: still hung, the cancel was its own
    finally:
        code, lines, err = run.stop()
    assert "; on-hang cancel: SIGTERM to 2 process(es) matching 'train\\\\.py' on 2 node(s); incident" in hung, lines
    action = json.loads((w.incidents("hung")[0] / "incident.json").read_text())["on_hang"]
    assert action["ok"] is True and sorted(action["nodes"]) == NODES
    assert code == 2, err


def slurm_training(cluster, tmp_path, scenarios: dict[str, dict]) -> tuple[int, Callable[[], None]]:
    """A one-node Slurm job (on node1) that runs the fake trainer of `scenarios` once told to: (its id,
    go). go() starts the run's clock, then the trainer: call it once the watcher watches."""
    cluster.slurm_up(nodes=1)
    cluster.start_training_all(scenarios)
    cluster.stop_training()  # keep its scenario, nvidia-smi and pgrep: the job runs it
    d = cluster.training_dir("node1")
    scenario_file, go_file = d / "scenario.json", tmp_path / "go"
    scenario = json.loads(scenario_file.read_text())

    def clock_from(start: float) -> None:  # atomic: the fake nvidia-smi reads it at every sample
        (d / "scenario.json.new").write_text(json.dumps(dict(scenario, start=start)))
        os.replace(d / "scenario.json.new", scenario_file)

    def go() -> None:
        clock_from(time.time())
        go_file.touch()

    clock_from(time.time() + 86400)  # idle GPUs until go()
    script = tmp_path / "train.sbatch"
    script.write_text(
        f"#!/bin/sh\nwhile [ ! -e {go_file} ]; do sleep 0.05; done\n"
        f"exec /usr/bin/python3 -I {d / 'trainer.py'} train.py --scenario {scenario_file} --proc 0\n"
    )
    script.chmod(0o755)
    jobid = cluster.sbatch("-w", "node1", str(script), wrap=None)
    cluster.wait_job(jobid, states=("RUNNING",), timeout=60)  # its script waits for go()
    return jobid, go


def watch_slurm(cluster, w: Watch, pace: Pace, jobid: int, go: Callable[[], None]) -> Streamed:
    """`nodecheck watch --slurm-job` started; once it said its first verdict, the job's trainer."""
    argv = [a for a in w.argv if a not in ("--nodes", "node[1-2]")]
    run = w.start("--slurm-job", str(jobid), argv=argv, env=cluster.slurm_env())
    try:
        run.until(": starting", pace.wait)
        go()
    except BaseException:
        run.kill()
        raise
    return run


def test_a_slurm_job_watched_by_id_ends_completed(cluster, tmp_path, pace):
    jobid, go = slurm_training(cluster, tmp_path, training.healthy(["node1"], duration=pace.s(HEALTHY_FOR)))
    w = Watch(cluster, tmp_path, pace)
    code, lines, err = watch_slurm(cluster, w, pace, jobid, go).finish(pace.wait)  # the job's end ends it
    assert code == 0, err
    assert lines[0].startswith(f"nodecheck watch: job {jobid} ")
    assert "progressing" in verdicts(lines) and verdicts(lines)[-1] == "completed"
    # stopped by Slurm's COMPLETED, or a moment before it by the log's "training complete" with the
    # process gone: either way completed
    assert any(
        f"stopped ({why}): completed since" in lines[-1] for why in (f"job {jobid} is COMPLETED", "the job completed")
    )
    assert cluster.wait_job(jobid, timeout=10)["JobState"] == "COMPLETED"
    assert [(e["job"], e["verdict"]) for e in w.sent()] == [(str(jobid), "completed")]


def test_on_hang_cancel_of_a_slurm_job_scancels_it_once(cluster, tmp_path, pace):
    job = training.deadlock(["node1"], at=pace.s(FAULT_AT), odd_node="node1", odd_gpu=3)
    jobid, go = slurm_training(cluster, tmp_path, job)
    w = Watch(cluster, tmp_path, pace, "--on-hang", "cancel")
    code, lines, err = watch_slurm(cluster, w, pace, jobid, go).finish(pace.wait)  # the job's end ends it
    out = "\n".join(lines)
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


def test_forensics_on_hang_runs_before_anything_else_and_is_linked(cluster, tmp_path, pace):
    """--forensics: when the deadlock turns hung, `nodecheck forensics` runs on the job's nodes (the real
    py-spy on each fake trainer) before the alert; the event, the incident and stdout link its record."""
    cluster.install_pyspy()
    w = Watch(cluster, tmp_path, pace, "--forensics")
    run = watch_then_train(cluster, w, pace, deadlock(pace, "node2", 3))
    try:
        until_hung_alerted(run, w, pace)
    finally:
        code, lines, err = run.stop()
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
