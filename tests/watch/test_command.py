"""`nodecheck watch` (nodecheck/watch/command.py) with a fake transport, a scripted Tracker and a fake
Slurm: input validated before anything runs (exit 64), one probe per node per tick, unreadable output
as the node's failure, one line per change of verdict, incident records, quiet changes recorded but not
alerted, no duplicate alert across a restart, pending alerts retried, --on-hang once per hang (and
nothing touched without it), Slurm PENDING/ended, --once, exit 3 when nothing answered, SIGTERM, and
the drift-free schedule."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar

import pytest

from nodecheck import cli
from nodecheck.app.slurm import SlurmError
from nodecheck.core.model import Capture, Outcome
from nodecheck.watch import classify
from nodecheck.watch import command as wcmd
from nodecheck.watch.onhang import CANCEL_SCRIPT, cancel_probe
from nodecheck.watch.state import StateDir
from nodecheck.watch.verdicts import ALARM, Assessment

T0 = 1_764_424_923.0


def sample(step: int = 42, util: float = 100, power: float = 600.0) -> str:
    """A sample in the probe's section format (as nodecheck/watch/probe.py prints it)."""
    return (
        f"@@nodecheck begin clock\n{T0:.3f}\n@@nodecheck end clock rc=0\n"
        f"@@nodecheck begin gpus\n0, {util:g}, {power:.2f}, 700.00, 30000, 81559\n"
        f"1, {util:g}, {power:.2f}, 700.00, 30000, 81559\n@@nodecheck end gpus rc=0\n"
        "@@nodecheck begin procs\n  4242     1 Sl     120 python3 train.py\n@@nodecheck end procs rc=0\n"
        f"@@nodecheck begin log_stat\n1234\n{T0 - 1:.1f}\n@@nodecheck end log_stat rc=0\n"
        "@@nodecheck heartbeat unwatched\n"
        f"@@nodecheck begin log_tail\n[rank0]: step: {step}  loss: 7.1  tps: 5,400\n\n"
        "@@nodecheck end log_tail rc=0\n"
    )


class FakeTransport:
    """Answers each probe with `answer(node, probe, tick)`; tick = how many sample probes node1 saw."""

    def __init__(self, answer=None) -> None:
        self.answer = answer or (lambda node, probe, tick: sample(step=40 + tick))
        self.runs: list[tuple[str, str, tuple]] = []
        self.started: list[float] = []
        self.lock = threading.Lock()
        self.connects = 0

    def connect(self, node, timeout_s):
        with self.lock:
            self.connects += 1
        return FakeSession(self, node)


class FakeSession:
    def __init__(self, t: FakeTransport, node) -> None:
        self.t, self.node = t, node

    def run(self, probe, timeout_s):
        with self.t.lock:
            if probe.name == "watch" and self.node.name == "node1":
                self.t.started.append(time.monotonic())
            self.t.runs.append((self.node.name, probe.name, probe.argv))
            tick = sum(1 for n, p, _ in self.t.runs if p == "watch" and n == self.node.name) - 1
        out = self.t.answer(self.node.name, probe, tick)
        if isinstance(out, Capture):
            return out
        return Capture(self.node.name, probe.name, probe.argv, Outcome.EXITED, 0, out, "", 0.01)

    def close(self):
        pass


class ScriptedTracker:
    """Stands in for classify.Tracker: the verdicts of SCRIPT in turn (the last one repeats); keeps
    every tick it was given; its JSON is the position in the script."""

    SCRIPT: ClassVar[list[str]] = ["progressing"]
    made: ClassVar[list[ScriptedTracker]] = []

    def __init__(self, cfg, nodes, at: int = 0) -> None:
        self.nodes, self.at, self.ticks = tuple(nodes), at, []
        ScriptedTracker.made.append(self)

    def update(self, tick):
        self.ticks.append(tick)
        verdict = self.SCRIPT[min(self.at, len(self.SCRIPT) - 1)]
        self.at += 1
        odd = ("node2",) if verdict in ALARM else ()
        return Assessment(
            verdict=verdict,
            message=f"{verdict}: scripted tick {self.at}",
            nodes=odd,
            ranks=(3,) if odd else (),
            since=tick.at,
            facts={"tick": self.at},
        )

    def to_json(self):
        return {"at": self.at}

    @classmethod
    def from_json(cls, cfg, nodes, data):
        return cls(cfg, nodes, at=data["at"])


@pytest.fixture
def env(tmp_path, monkeypatch):
    """An inventory of node1..node2, the fake transport and the scripted tracker in place."""
    inv = tmp_path / "hosts.yml"
    inv.write_text("nodes:\n  node[1-2]:\n    address: 127.0.0.[1-2]\n")
    transport = FakeTransport()
    monkeypatch.setattr("nodecheck.app.transports.ssh_transport", lambda args: transport)
    monkeypatch.setattr(classify, "Tracker", ScriptedTracker)
    ScriptedTracker.made = []
    (tmp_path / "hook.py").write_text(
        "import json, os, sys\n"
        "event = json.load(sys.stdin)\n"
        "with open(sys.argv[1], 'a') as f: f.write(json.dumps(event) + '\\n')\n"
        "count = sys.argv[1] + '.n'\n"
        "n = int(open(count).read()) + 1 if os.path.exists(count) else 1\n"
        "open(count, 'w').write(str(n))\n"
        "sys.exit(1 if n <= int(os.environ.get('FAIL_FIRST', '0')) else 0)\n"
    )
    return SimpleNamespace(
        tmp=tmp_path,
        inv=inv,
        transport=transport,
        alerts=tmp_path / "alerts.jsonl",
        hook=f"{sys.executable} {tmp_path / 'hook.py'} {tmp_path / 'alerts.jsonl'}",
        out=tmp_path / "reports",
    )


def watch(env, *extra, script=None, inventory=True, capsys=None):
    if script is not None:
        ScriptedTracker.SCRIPT = script
    # short ticks keep multi-sample tests fast; a single sample gets 1 s. The interval is also the
    # sample timeout: beside a CPU hog an in-process sample of two nodes can take over 0.02 s, and a
    # tick that missed a node breaks the exact counts these tests assert (a watch that never got a
    # sample exits 3; --once judges a sample with a node missing). 0.2 s held beside 2 x nproc loops.
    one_sample = extra[:2] == ("--max-samples", "1") or "--once" in extra
    interval = "1" if one_sample else "0.2"
    argv = [
        "watch",
        *([str(env.inv), "--match", r"train\.py"] if inventory else []),
        "--log",
        "/x/train.log",
        "--interval",
        interval,
        "--output-dir",
        str(env.out),
        *extra,
    ]
    return cli.main(argv)


def sent(env) -> list[dict]:
    return [json.loads(x) for x in env.alerts.read_text().splitlines()] if env.alerts.exists() else []


def incidents(env) -> list[str]:
    """The verdicts of the incident records written, sorted."""
    return (
        sorted(
            json.loads((p / "incident.json").read_text())["assessment"]["verdict"]
            for p in env.out.iterdir()
            if "_watch_" in p.name
        )
        if env.out.exists()
        else []
    )


def state_of(env) -> dict:
    [path] = list((env.out / "watch").glob("*/state.json"))
    return json.loads(path.read_text())


# ---- bad input: exit 64 before anything runs --------------------------------------------------------


@pytest.mark.parametrize(
    "argv, message",
    [
        (["watch", "--log", "/l"], "which job? give --slurm-job ID, or an inventory (hosts.yml) and --match PATTERN"),
        (["watch", "INV", "--log", "/l"], "--match: an inventory needs --match PATTERN"),
        (["watch", "INV", "--match", "x"], "no progress signal: the watcher cannot tell a hang from work without one"),
        (
            ["watch", "INV", "--match", "x", "--log", "/l", "--on-hang", "requeue"],
            "--on-hang: --on-hang requeue needs --slurm-job: only Slurm can requeue a job",
        ),
        (
            ["watch", "--slurm-job", "12", "--nodes", "node1", "--log", "/l"],
            "--nodes: --nodes selects inventory nodes: give the inventory too",
        ),
        (
            ["watch", "INV", "--match", "x", "--log", "/l", "--once", "--max-samples", "3"],
            "arguments: --once takes one sample: it cannot be combined with --max-samples or --duration",
        ),
        (["watch", "--slurm-job", "12; rm", "--log", "/l"], "--slurm-job: --slurm-job '12; rm' is not a job id"),
        (["watch", "INV", "--match", "x", "--log", "/l", "--nodes", "node9"], "--nodes: node9 not in the inventory"),
        (
            ["watch", "INV", "--match", "x", "--log", "/l", "--alert-url", "ftp://h/x"],
            "--alert-url: Value error, must be an http:// or https:// URL with a host",
        ),
    ],
)
def test_bad_input_exits_64_naming_the_fix_and_runs_nothing(env, capsys, argv, message):
    argv = [str(env.inv) if a == "INV" else a for a in argv]
    assert cli.main([*argv, "--output-dir", str(env.out)]) == 64
    err = capsys.readouterr().err
    assert err.startswith("nodecheck: error: ") and message in err
    assert env.transport.runs == [] and not env.out.exists()


def test_an_unknown_slurm_job_is_bad_input(env, capsys, monkeypatch):
    slurm = FakeSlurm(
        [SlurmError("scontrol show job 99: exit 1: slurm_load_jobs error: Invalid job id specified", returncode=1)]
    )
    monkeypatch.setattr(wcmd, "_slurm", lambda: slurm)
    assert watch(env, "--slurm-job", "99", inventory=False) == 64
    assert (
        "--slurm-job: Slurm does not know job 99: scontrol show job 99: exit 1: slurm_load_jobs error: "
        "Invalid job id specified" in capsys.readouterr().err
    )


# ---- ticks, verdict lines, incidents, alerts -------------------------------------------------------


def test_one_line_per_change_quiet_changes_recorded_not_alerted(env, capsys):
    script = [
        "starting",
        "progressing",
        "checkpointing",
        "checkpointing",
        "progressing",
        "hung",
        "hung",
        "progressing",
        "completed",
    ]
    assert watch(env, "--alert-command", env.hook, script=script) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(
        r"nodecheck watch: job inventory:train\.py on node[1-2] (2 nodes), every 0.2 s; "
        "alerts: command; on hang: nothing (the job is never touched); state "
    )
    changes = [line.split(" ", 1)[1] for line in out[1:-1]]  # without the time stamp
    assert [c.split(" (was")[0].split(";")[0] for c in changes] == [
        r"job inventory:train\.py: starting: scripted tick 1",
        r"job inventory:train\.py: progressing: scripted tick 2",
        r"job inventory:train\.py: checkpointing: scripted tick 3",
        r"job inventory:train\.py: progressing: scripted tick 5",
        r"job inventory:train\.py: hung: scripted tick 6",
        r"job inventory:train\.py: progressing: scripted tick 8",
        r"job inventory:train\.py: completed: scripted tick 9",
    ]
    assert out[-1].endswith("stopped (the job completed): completed since " + out[-1].split(" since ")[1])
    assert out[-1].endswith("; exit 0")
    # each tick: one probe per node, in inventory order, through the fake transport
    assert len([r for r in env.transport.runs if r[1] == "watch"]) == 2 * 9
    assert {r[1] for r in env.transport.runs} == {"watch"}
    [tracker] = ScriptedTracker.made
    assert [o.node for o in tracker.ticks[0].nodes] == ["node1", "node2"]
    assert [o.progress.step for o in tracker.ticks[3].nodes] == [43, 43]
    # alerts: the alarm, its recovery, the completion -- never the quiet changes
    assert [(e["kind"], e["previous"], e["verdict"], e["nodes"], e["ranks"]) for e in sent(env)] == [
        ("alarm", "progressing", "hung", ["node2"], [3]),
        ("resolved", "hung", "progressing", [], []),
        ("completed", "progressing", "completed", [], []),
    ]
    # incidents: every change but the fresh watcher's first, quiet verdict
    assert incidents(env) == ["checkpointing", "completed", "hung", "progressing", "progressing", "progressing"]


def test_the_incident_record_holds_the_event_and_the_samples_behind_it(env, capsys):
    assert (
        watch(env, "--alert-command", env.hook, "--max-samples", "3", script=["progressing", "progressing", "hung"])
        == 2
    )
    [hung] = [p for p in env.out.iterdir() if p.name.endswith("_hung")]
    assert sorted(p.name for p in hung.iterdir()) == ["incident.json", "samples.jsonl", "summary.txt"]
    doc = json.loads((hung / "incident.json").read_text())
    [event] = sent(env)
    assert event["incident"] == str(hung)
    assert doc["event"] == {k: v for k, v in event.items() if k != "incident"}
    assert doc["assessment"]["verdict"] == "hung" and doc["assessment"]["facts"] == {"tick": 3}
    assert doc["samples"]["ticks"] == 3 and doc["on_hang"] is None
    ticks = [json.loads(x) for x in (hung / "samples.jsonl").read_text().splitlines()]
    assert len(ticks) == 3
    node1 = ticks[2]["nodes"]["node1"]
    assert node1["outcome"] == "exited" and node1["failure"] == ""
    assert node1["progress"]["step"] == 42 and node1["progress"]["throughput"] == 5400.0
    assert [g["power_w"] for g in node1["sample"]["gpus"]] == [600.0, 600.0]
    assert "log_tail" not in node1["sample"]
    assert node1["raw"]["stdout"] == sample(step=42)  # the raw probe output too
    summary = (hung / "summary.txt").read_text().splitlines()
    assert summary[0].startswith(r"nodecheck watch: job inventory:train\.py: hung (was progressing) at ")
    assert summary[1] == "hung: scripted tick 3"
    assert "; nodes node2; ranks 3" in summary[2]
    assert capsys.readouterr().out.count(f"incident {hung}") == 1


def test_output_that_cannot_be_parsed_is_the_nodes_failure_with_the_excerpt(env, capsys):
    def answer(node, probe, tick):
        if node == "node2":
            return "Segmentation fault\n"
        return sample()

    env.transport.answer = answer
    assert watch(env, "--max-samples", "1", script=["progressing"]) == 0
    [tick] = ScriptedTracker.made[0].ticks
    node1, node2 = tick.nodes
    assert node1.sample is not None and node1.failure == ""
    assert node2.sample is None and node2.progress is None
    assert node2.failure.startswith("unreadable sample (exit 0): ") and "'Segmentation fault" in node2.failure


def test_a_node_that_did_not_answer_carries_its_outcome(env, capsys):
    env.transport.answer = lambda node, probe, tick: (
        Capture(node, probe.name, probe.argv, Outcome.UNREACHABLE, None, "", "", 0.0, "connection refused")
        if node == "node2"
        else sample()
    )
    assert watch(env, "--max-samples", "1", script=["progressing"]) == 0
    assert ScriptedTracker.made[0].ticks[0].nodes[1].failure == "unreachable: connection refused"


def test_no_sample_from_any_node_ever_exits_3(env, capsys):
    env.transport.answer = lambda node, probe, tick: Capture(
        node, probe.name, probe.argv, Outcome.TIMEOUT, None, "", "", 0.0, "no answer within 0.2 s"
    )
    assert watch(env, "--max-samples", "2", script=["unresponsive"]) == 3
    assert (
        "nodecheck: error: no node answered with a sample in 2 tick(s): could not watch (node1: timeout: "
        "no answer within 0.2 s; node2: timeout: no answer within 0.2 s)" in capsys.readouterr().err
    )


def test_a_job_slurm_ended_is_judged_by_slurm_even_without_a_sample(env, capsys, monkeypatch):
    env.transport.answer = lambda node, probe, tick: Capture(
        node, probe.name, probe.argv, Outcome.UNREACHABLE, None, "", "", 0.0, "connection refused"
    )
    monkeypatch.setattr(wcmd, "_slurm", lambda: FakeSlurm([job("RUNNING"), job("COMPLETED")]))
    assert watch(env, "--slurm-job", "1234", str(env.inv), inventory=False, script=["starting", "completed"]) == 0


# ---- restarts and pending alerts -------------------------------------------------------------------


def test_a_restart_mid_hang_resumes_without_a_second_alert(env, capsys):
    assert watch(env, "--alert-command", env.hook, "--max-samples", "3", script=["progressing", "hung", "hung"]) == 2
    assert [e["verdict"] for e in sent(env)] == ["hung"]
    before = incidents(env)
    ScriptedTracker.made = []
    assert (
        watch(
            env,
            "--alert-command",
            env.hook,
            "--max-samples",
            "2",
            script=["progressing", "hung", "hung", "hung", "progressing"],
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "; resumed: hung since " in out
    assert ScriptedTracker.made[0].at == 5  # resumed from the saved position (3), 2 more ticks
    assert [e["verdict"] for e in sent(env)] == ["hung", "progressing"]
    assert len(incidents(env)) == len(before) + 1


def test_an_undelivered_alert_stays_pending_and_is_retried_on_later_ticks(env, capsys, monkeypatch):
    monkeypatch.setenv("FAIL_FIRST", "3")  # the hook fails its first 3 runs: 2 attempts a tick
    assert (
        watch(
            env, "--alert-command", env.hook, "--max-samples", "1", "--config", str(quick_alerts(env)), script=["hung"]
        )
        == 2
    )
    assert state_of(env)["pending"][0]["channels"] == ["command"]
    assert [e["verdict"] for e in sent(env)] == ["hung", "hung"]  # 2 attempts, both failed
    assert (
        watch(
            env, "--alert-command", env.hook, "--max-samples", "2", "--config", str(quick_alerts(env)), script=["hung"]
        )
        == 2
    )  # a restart retries it, once a tick
    assert state_of(env)["pending"] == []
    assert [e["verdict"] for e in sent(env)] == ["hung"] * 4
    log = (next((env.out / "watch").iterdir()) / "alerts.log").read_text().splitlines()
    assert [ln.split(" action=")[1].split(" ")[0] for ln in log] == ["alert-failed"] * 3 + ["alert-delivered"]


def quick_alerts(env) -> Path:
    path = env.tmp / "watch.yml"
    path.write_text("alerts: {retries: 1, backoff_s: 0.01, timeout_s: 10}\n")
    return path


# ---- --on-hang ---------------------------------------------------------------------------------------


def test_without_on_hang_nothing_touches_the_job(env, capsys):
    assert watch(env, "--max-samples", "4", script=["progressing", "hung"]) == 2
    assert {r[1] for r in env.transport.runs} == {"watch"}


def test_on_hang_cancel_signals_the_matched_processes_once_per_hang(env, capsys):
    def answer(node, probe, tick):
        if probe.name == "watch-cancel":
            return f"signalled 4242 python3 train.py --node {node}\n@@nodecheck signalled 1\n"
        return sample()

    env.transport.answer = answer
    assert (
        watch(
            env,
            "--on-hang",
            "cancel",
            "--max-samples",
            "6",
            script=["progressing", "hung", "hung", "progressing", "hung", "hung"],
        )
        == 2
    )
    cancels = [(n, argv) for n, p, argv in env.transport.runs if p == "watch-cancel"]
    assert [n for n, _ in cancels] == ["node1", "node2", "node1", "node2"]  # once per hang, on every node
    assert cancels[0][1] == ("sh", "-c", CANCEL_SCRIPT, "nodecheck-watch-cancel", r"train\.py")
    records = [p for p in env.out.iterdir() if "_hung" in p.name]
    assert len(records) == 2  # one per hang (-2 if in the same second)
    action = json.loads((records[0] / "incident.json").read_text())["on_hang"]
    assert action == {
        "action": "cancel",
        "ok": True,
        "nodes": {
            "node1": ["signalled 4242 python3 train.py --node node1"],
            "node2": ["signalled 4242 python3 train.py --node node2"],
        },
        "result": r"SIGTERM to 2 process(es) matching 'train\\.py' on 2 node(s)",
    }
    out = capsys.readouterr().out
    assert r"; on-hang cancel: SIGTERM to 2 process(es) matching 'train\\.py' on 2 node(s); incident " in out


def test_on_hang_cancel_keeps_a_ranks_token_out_of_the_incident(env, capsys):
    """The signalled processes' command lines go into incident.json and alerts: a token on them is masked."""

    def answer(node, probe, tick):
        if probe.name == "watch-cancel":
            return "signalled 4242 python3 train.py --hf-token hf_s3cr3t WANDB_API_KEY=w4ndb\n@@nodecheck signalled 1\n"
        return sample()

    env.transport.answer = answer
    assert watch(env, "--on-hang", "cancel", "--max-samples", "3", script=["progressing", "hung", "hung"]) == 2
    records = [p for p in env.out.iterdir() if "_hung" in p.name]
    text = (records[0] / "incident.json").read_text()
    assert "hf_s3cr3t" not in text and "w4ndb" not in text
    lines = json.loads(text)["on_hang"]["nodes"]["node1"]
    assert lines == ["signalled 4242 python3 train.py --hf-token <redacted> WANDB_API_KEY=<redacted>"]


def test_what_our_own_cancel_causes_is_not_a_second_alarm(env, capsys):
    """After --on-hang cancel, the processes gone (or Slurm's CANCELLED) read as crashed: that is the
    cancel, so the verdict stays hung, one alert, one incident."""

    def answer(node, probe, tick):
        if probe.name == "watch-cancel":
            return f"signalled 4242 python3 train.py --node {node}\n@@nodecheck signalled 1\n"
        return sample()

    env.transport.answer = answer
    assert (
        watch(
            env,
            "--on-hang",
            "cancel",
            "--alert-command",
            env.hook,
            "--max-samples",
            "4",
            script=["progressing", "hung", "crashed", "crashed"],
        )
        == 2
    )
    assert [e["verdict"] for e in sent(env)] == ["hung"]
    assert incidents(env) == ["hung"]
    state = state_of(env)
    assert state["verdict"] == "hung"
    assert state["message"] == "hung: scripted tick 2; cancelled by --on-hang cancel (scripted tick 4)"
    # without --on-hang, a crash after a hang is the crash it is
    assert (
        watch(
            env,
            "--alert-command",
            env.hook,
            "--max-samples",
            "3",
            "--state-dir",
            str(env.tmp / "s2"),
            script=["progressing", "hung", "crashed"],
        )
        == 2
    )
    assert [e["verdict"] for e in sent(env)][1:] == ["hung", "crashed"]


def test_a_failed_cancel_is_tried_again_on_the_next_hung_ticks_up_to_three_times(env, capsys):
    def answer(node, probe, tick):
        if probe.name == "watch-cancel":
            return "failed 4242 python3 train.py\n@@nodecheck signalled 0\n"
        return sample()

    env.transport.answer = answer
    assert watch(env, "--on-hang", "cancel", "--max-samples", "6", script=["hung"]) == 2
    assert len([r for r in env.transport.runs if r[1] == "watch-cancel"]) == 3 * 2


def test_the_cancel_script_signals_matches_but_never_itself(tmp_path):
    """The real script, run locally: a matching process gets SIGTERM; the probe's own shell (whose
    argv holds the pattern) and its pipeline subshell survive to print the count."""
    import subprocess

    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "nodecheck-victim-7x"])
    try:
        probe = cancel_probe("nodecheck-victim-7")
        done = subprocess.run(list(probe.argv), capture_output=True, text=True, timeout=10)
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert lines == [
            f"signalled {victim.pid} {sys.executable} -c import time; time.sleep(60) nodecheck-victim-7x ",
            "@@nodecheck signalled 1",
        ]
        assert victim.wait(timeout=10) == -signal.SIGTERM
    finally:
        victim.kill()
        victim.wait()


# ---- Slurm mode ------------------------------------------------------------------------------------


class FakeSlurm:
    """Slurm.job answers from a list (the last repeats); cancel/requeue are recorded."""

    def __init__(self, answers) -> None:
        self.answers, self.calls = list(answers), []

    def job(self, job_id):
        self.calls.append(("job", job_id))
        answer = self.answers[0] if len(self.answers) == 1 else self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def cancel(self, job_id):
        self.calls.append(("cancel", job_id))

    def requeue(self, job_id):
        self.calls.append(("requeue", job_id))


def job(state: str, nodes=("node1", "node2"), reason="None"):
    ended = state in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY")
    return SimpleNamespace(job_id="1234", state=state, reason=reason, nodes=tuple(nodes), ended=ended)


def test_slurm_pending_is_starting_unprobed_then_running_then_ended(env, capsys, monkeypatch):
    slurm = FakeSlurm(
        [
            job("PENDING", (), "Resources"),
            job("PENDING", (), "Resources"),
            job("RUNNING"),
            job("RUNNING"),
            job("COMPLETED"),
        ]
    )
    monkeypatch.setattr(wcmd, "_slurm", lambda: slurm)
    code = watch(
        env, "--slurm-job", "1234", str(env.inv), inventory=False, script=["progressing", "progressing", "completed"]
    )
    assert code == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("nodecheck watch: job 1234 (job 1234 is PENDING (Resources)), every 0.2 s")
    assert out[1].endswith("job 1234: starting: job 1234 is PENDING (Resources)")
    assert out[2].endswith(
        "job 1234: progressing: scripted tick 1 (was starting); incident "
        + str(next(env.out.glob("*_watch_1234_progressing")))
    )
    assert "stopped (job 1234 is COMPLETED): completed since" in out[-1]
    assert [c for c in slurm.calls if c[0] == "job"] == [("job", "1234")] * 5
    assert len([r for r in env.transport.runs if r[1] == "watch"]) == 3 * 2  # none while pending
    states = [t.job_state for t in ScriptedTracker.made[0].ticks]
    assert states == ["RUNNING", "RUNNING", "COMPLETED"]


def test_slurm_on_hang_requeue_acts_once_through_slurm(env, capsys, monkeypatch):
    slurm = FakeSlurm([job("RUNNING")] * 3 + [job("REQUEUED", ()), job("PENDING", ())])
    monkeypatch.setattr(wcmd, "_slurm", lambda: slurm)
    assert (
        watch(
            env,
            "--slurm-job",
            "1234",
            str(env.inv),
            "--on-hang",
            "requeue",
            "--max-samples",
            "5",
            inventory=False,
            script=["progressing", "hung", "hung"],
        )
        == 0
    )
    assert [c for c in slurm.calls if c[0] != "job"] == [("requeue", "1234")]
    assert {r[1] for r in env.transport.runs} == {"watch"}  # no SIGTERM in Slurm mode
    assert "on-hang requeue: scontrol requeue 1234: done" in capsys.readouterr().out


def test_a_job_purged_between_ticks_ends_the_watch(env, capsys, monkeypatch):
    gone = SlurmError("scontrol show job 1234: exit 1: slurm_load_jobs error: Invalid job id specified", returncode=1)
    slurm = FakeSlurm([job("RUNNING"), gone])
    monkeypatch.setattr(wcmd, "_slurm", lambda: slurm)
    assert watch(env, "--slurm-job", "1234", str(env.inv), inventory=False, script=["progressing", "crashed"]) == 2
    assert "stopped (job 1234 is no longer known to Slurm (ended and purged)): crashed" in capsys.readouterr().out
    assert [t.job_state for t in ScriptedTracker.made[0].ticks] == ["RUNNING", None]


# ---- --once, signals, schedule ------------------------------------------------------------------------


def test_once_takes_one_sample_against_the_state_on_disk(env, capsys):
    ScriptedTracker.SCRIPT = ["progressing", "slow", "slow"]
    assert watch(env, "--once") == 0
    assert watch(env, "--once") == 1
    out = capsys.readouterr().out.splitlines()
    assert out[-1].startswith(r"job inventory:train\.py: slow since ") and out[-1].endswith(": slow: scripted tick 2")
    assert len([r for r in env.transport.runs if r[1] == "watch"]) == 4
    assert state_of(env)["verdict"] == "slow" and state_of(env)["tracker"] == {"at": 2}


def test_sigterm_drops_the_tick_in_flight_saves_and_exits_with_the_last_verdict(env, capsys):
    def answer(node, probe, tick):
        if tick == 2 and node == "node1":
            os.kill(os.getpid(), signal.SIGTERM)
        return sample()

    env.transport.answer = answer
    assert watch(env, script=["progressing", "straggler", "hung"]) == 1
    assert len(ScriptedTracker.made[0].ticks) == 2  # the third tick was never judged
    assert state_of(env)["verdict"] == "straggler" and state_of(env)["tracker"] == {"at": 2}
    assert "stopped (stopped by a signal): straggler since" in capsys.readouterr().out
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_ticks_follow_a_drift_free_schedule_skipping_missed_boundaries(env, capsys):
    def answer(node, probe, tick):
        if tick == 1 and node == "node1":
            time.sleep(1.25)  # 2.5 intervals: boundaries 2 and 3 are missed
        return sample()

    env.transport.answer = answer
    # 0.5 s intervals: at 0.2 s a busy CI machine's scheduling jitter alone could miss boundary 5
    assert watch(env, "--interval", "0.5", "--max-samples", "4", script=["progressing"]) == 0
    t = env.transport.started
    slots = [(x - t[0]) / 0.5 for x in t]
    assert [round(s) for s in slots] == [0, 1, 4, 5]
    assert all(abs(s - round(s)) < 0.4 for s in slots), slots  # on the boundary, not after the tick


def test_the_duration_bounds_the_watch(env, capsys):
    started = time.monotonic()
    assert watch(env, "--interval", "0.1", "--duration", "0.35", script=["progressing"]) == 0
    assert len(env.transport.started) == 4  # at 0, 0.1, 0.2, 0.3
    assert time.monotonic() - started < 5
    assert "stopped (--duration 0.35 s reached)" in capsys.readouterr().out


def test_connections_are_kept_between_ticks(env, capsys):
    assert watch(env, "--max-samples", "3", script=["progressing"]) == 0
    assert env.transport.connects == 2  # one per node, not per tick


def test_a_timed_out_sample_keeps_its_connection_until_three_in_a_row(env, capsys):
    env.transport.answer = lambda node, probe, tick: (
        Capture(node, probe.name, probe.argv, Outcome.TIMEOUT, None, "", "", 0.02, "no answer")
        if node == "node2"
        else sample()
    )
    assert watch(env, "--max-samples", "5", script=["progressing"]) == 0
    assert env.transport.connects == 1 + 2  # node1 once; node2 again after its 3rd timeout


def test_a_slow_handshake_is_dialled_across_ticks_not_redone_each_tick(env, capsys, monkeypatch):
    slow_connect = env.transport.connect

    def connect(node, timeout_s):
        time.sleep(0.25)  # longer than a tick's deadline (the 0.1 s interval)
        return slow_connect(node, timeout_s)

    monkeypatch.setattr(env.transport, "connect", connect)
    assert watch(env, "--interval", "0.1", "--max-samples", "6", script=["progressing"]) == 0
    ticks = ScriptedTracker.made[0].ticks
    waiting = [o.failure for t in ticks for o in t.nodes if o.failure]
    # (on a loaded machine the dial's wait can end past the tick's deadline, and a sample over a
    # dialled node can miss the 0.1 s tick: the fan-out then says so; never a second dial)
    assert waiting and all(
        f.startswith(
            (
                "unreachable: no SSH connection yet: still connecting after 0.",
                "skipped: not started: the run deadline was reached",
                "skipped: no answer within 0.1 s",
            )
        )
        for f in waiting
    )
    assert any(all(o.sample is not None for o in t.nodes) for t in ticks)  # then sampled over the dialled ones
    assert env.transport.connects == 2  # one dial per node in all


def test_a_second_watcher_of_the_same_job_refuses(env, capsys):
    assert watch(env, "--max-samples", "1", script=["progressing"]) == 0
    [state_dir] = list((env.out / "watch").iterdir())
    d = StateDir(state_dir)
    d.lock()
    try:
        assert watch(env, "--max-samples", "1") == 64
        assert f"another watcher holds {state_dir} (pid {os.getpid()})" in capsys.readouterr().err
    finally:
        d.unlock()


def test_a_progress_regex_that_reads_no_number_is_the_nodes_log_problem_not_a_crash():
    from nodecheck.watch.classify import Tracker
    from nodecheck.watch.config import WatchConfig
    from nodecheck.watch.verdicts import Tick

    cfg = WatchConfig.model_validate(
        {"match": "train", "progress": {"log": "/root/train.log", "step_regex": r"step: (?P<step>\S+)  loss"}}
    )  # "42" ok ...
    capture = Capture(
        "node1", "watch", ("sh",), Outcome.EXITED, 0, sample().replace("step: 42  loss", "step: 4x2  loss"), "", 0.1
    )  # ... "4x2" not
    seen = wcmd.observe("node1", capture, cfg)
    assert seen.sample is not None and seen.progress is None and seen.failure == ""
    assert seen.sample.log_error.startswith("cannot read the progress: ")
    tracker = Tracker(
        cfg.model_copy(update={"bounds": cfg.bounds.model_copy(update={"startup_grace_s": 10})}), ["node1"]
    )
    tracker.update(Tick(T0, (seen,)))
    hung = tracker.update(Tick(T0 + 11, (seen,)))
    assert hung.verdict == "hung"
    assert "; the log cannot be read on node1: cannot read the progress: " in hung.message


# ---- review: Slurm answers that must not read as a change, the job key, the watcher's own failures ----


def test_scontrol_failing_at_a_restart_mid_hang_neither_resolves_nor_repeats_the_hang(env, capsys, monkeypatch):
    monkeypatch.setattr(wcmd, "_slurm", lambda: FakeSlurm([job("RUNNING")]))
    assert (
        watch(
            env,
            "--slurm-job",
            "1234",
            str(env.inv),
            "--alert-command",
            env.hook,
            "--max-samples",
            "2",
            inventory=False,
            script=["progressing", "hung"],
        )
        == 2
    )
    down = SlurmError(
        "scontrol show job 1234: exit 1: slurm_load_jobs error: Unable to contact slurm controller (connect failure)",
        returncode=1,
    )
    slurm = FakeSlurm([down, down, down, job("RUNNING")])
    monkeypatch.setattr(wcmd, "_slurm", lambda: slurm)
    assert (
        watch(
            env,
            "--slurm-job",
            "1234",
            str(env.inv),
            "--alert-command",
            env.hook,
            "--max-samples",
            "4",
            inventory=False,
            script=["progressing", "hung"],
        )
        == 2
    )
    assert [e["verdict"] for e in sent(env)] == ["hung"]  # no "resolved", no second alarm
    assert state_of(env)["verdict"] == "hung"
    out = capsys.readouterr()
    assert "scontrol failed: scontrol show job 1234: exit 1: slurm_load_jobs error: Unable to contact" in out.err


def test_a_job_slurm_never_knew_ends_the_watch_as_bad_input_not_a_wait_forever(env, capsys, monkeypatch):
    down = SlurmError("scontrol show job 99: exit 1: Unable to contact slurm controller", returncode=1)
    unknown = SlurmError("scontrol show job 99: exit 1: slurm_load_jobs error: Invalid job id specified", returncode=1)
    monkeypatch.setattr(wcmd, "_slurm", lambda: FakeSlurm([down, down, unknown]))
    assert watch(env, "--slurm-job", "99", "--duration", "5", inventory=False, script=["progressing"]) == 64
    assert "--slurm-job: Slurm does not know job 99" in capsys.readouterr().err


def test_our_own_requeue_is_not_a_crash_and_the_job_back_on_other_nodes_is_watched_afresh(env, capsys, monkeypatch):
    moved = ("node3", "node4")
    env.inv.write_text("nodes:\n  node[1-4]:\n    address: 127.0.0.[1-4]\n")
    slurm = FakeSlurm(
        [
            job("RUNNING"),
            job("RUNNING"),
            job("RUNNING"),
            job("PENDING", (), "BeginTime"),
            job("RUNNING", moved),
            job("RUNNING", moved),
        ]
    )
    monkeypatch.setattr(wcmd, "_slurm", lambda: slurm)
    # the first run: progressing, hung (requeued), then its processes gone: crashed, as the tracker reads it
    assert (
        watch(
            env,
            "--slurm-job",
            "1234",
            str(env.inv),
            "--on-hang",
            "requeue",
            "--alert-command",
            env.hook,
            "--max-samples",
            "5",
            inventory=False,
            script=["progressing", "hung", "crashed", "progressing"],
        )
        == 0
    )
    assert [c for c in slurm.calls if c[0] != "job"] == [("requeue", "1234")]
    assert [(e["kind"], e["verdict"]) for e in sent(env)] == [("alarm", "hung"), ("resolved", "starting")]
    first, second = ScriptedTracker.made
    assert first.nodes == ("node1", "node2") and second.nodes == moved  # rebuilt for the new nodes
    assert [o.node for o in second.ticks[0].nodes] == list(moved)
    assert state_of(env)["verdict"] == "progressing" and state_of(env)["nodes"] == list(moved)


def test_two_inventories_with_the_same_match_keep_separate_state(env, capsys):
    other = env.tmp / "other" / "hosts.yml"
    other.parent.mkdir()
    other.write_text(env.inv.read_text())
    assert watch(env, "--max-samples", "1", script=["progressing"]) == 0
    env.inv = other
    assert watch(env, "--max-samples", "1", script=["progressing"]) == 0
    dirs = sorted(p.name for p in (env.out / "watch").iterdir())
    assert len(dirs) == 2 and all(d.startswith("hosts-") for d in dirs)


def test_the_watcher_failing_outside_a_tick_exits_70_not_a_verdict(env, capsys, monkeypatch):
    def broken(*args):
        raise RuntimeError("a bug")

    monkeypatch.setattr(wcmd, "_start_line", broken)
    assert watch(env, "--max-samples", "1", script=["progressing"]) == 70
    err = capsys.readouterr().err
    assert "RuntimeError: a bug" in err and "nodecheck: error: the watcher failed" in err


def test_a_quiet_change_is_recorded_with_its_last_ticks_an_alarm_with_the_history(env, capsys):
    assert (
        watch(env, "--max-samples", "8", script=["progressing"] * 5 + ["checkpointing", "checkpointing", "hung"]) == 2
    )
    ticks = {}
    for p in env.out.iterdir():
        if "_watch_" in p.name:
            doc = json.loads((p / "incident.json").read_text())
            ticks[doc["assessment"]["verdict"]] = doc["samples"]["ticks"]
    assert ticks == {"checkpointing": wcmd.QUIET_RECORD_TICKS, "hung": 8}


def test_a_sample_cut_at_the_tick_deadline_reads_as_the_sample_timeout_whatever_its_detail_says():
    from nodecheck.core.model import Cut
    from nodecheck.watch.config import WatchConfig

    cfg = WatchConfig.model_validate({"match": "train"})
    cut = Capture("node1", "watch", ("sh",), Outcome.TIMEOUT, None, "", "", 0.2, detail="anything", cut=Cut.DEADLINE)
    assert wcmd.observe("node1", cut, cfg).failure == f"timeout: no answer within {cfg.sample_timeout:g} s"
    # the words alone (a node's own message) are not nodecheck's deadline: shown as they are
    said = Capture(
        "node1", "watch", ("sh",), Outcome.TIMEOUT, None, "", "", 0.2, detail="stopped at the run deadline after 0.2 s"
    )
    assert wcmd.observe("node1", said, cfg).failure == "timeout: stopped at the run deadline after 0.2 s"
