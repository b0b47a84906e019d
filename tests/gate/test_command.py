"""nodecheck.gate.command: run_gated's retries against a scripted runner (exact runner.run arguments), and
the gate commands end to end as Slurm runs them: `python -m nodecheck prolog|health` with no PATH,
this machine's kernel pinned to a wrong value, and a fake scontrol keeping node states in JSON."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from argparse import Namespace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest

from nodecheck.cli import build_parser
from nodecheck.config.playbook import load_playbook
from nodecheck.core.errors import ConfigError
from nodecheck.core.model import CheckResult, Evidence, Node, Status, Verdict
from nodecheck.core.progress import NULL_PROGRESS
from nodecheck.gate import command as gatecmd
from nodecheck.report import Report
from nodecheck.run import runner as runner
from tests.fakes import scontrol as fake_scontrol
from tests.helpers import marked_reason

T0 = datetime(2026, 11, 29, 14, 0, 0, tzinfo=timezone.utc)
NODES = [Node("gpu001", "10.0.0.1"), Node("gpu002", "10.0.0.2"), Node("gpu003", "10.0.0.3")]
NAMES = [n.name for n in NODES]
TRANSPORT = object()  # the fake runner never uses it; identity is asserted
KERNEL = os.uname().release  # what `uname -r` prints in the versions probe
WRONG_KERNEL = "0.0.0-not-this-kernel"


# ---- run_gated: retries, against a scripted runner.run -------------------------------------------


def res(check: str, nodes: str | tuple[str, ...], status: Status, message: str = "") -> CheckResult:
    nodes = (nodes,) if isinstance(nodes, str) else nodes
    evidence = tuple(Evidence(n, "probe", ("probe",), 0, f"captures/{n}/{check}.txt") for n in nodes)
    return CheckResult(check, nodes, Verdict(status, message or f"{check} {status.value}"), evidence)


def report(results, names=NAMES, *, finished_s: float = 5.0) -> Report:
    return Report(
        run_id="20261129T140000Z_gated",
        playbook="gated",
        playbook_path="gated.yml",
        playbook_sha256="0" * 64,
        inventory="hosts.yml",
        started=T0,
        finished=T0 + timedelta(seconds=finished_s),
        deadline_s=60.0,
        complete=True,
        nodes=tuple((n, n) for n in names),
        results=tuple(results),
    )


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class ScriptedRunner:
    """runner.run's stand-in: returns the scripted reports in turn, each run taking `took` seconds
    of the fake clock, and keeps every call's arguments."""

    def __init__(self, clock: Clock, *runs: tuple[float, Report]) -> None:
        self.clock, self.runs, self.calls = clock, list(runs), []

    def __call__(self, playbook, nodes, transport, **kwargs) -> Report:
        assert transport is TRANSPORT
        self.calls.append(
            {"checks": [c.spec.name for c in playbook.checks], "nodes": [n.name for n in nodes], **kwargs}
        )
        took, rep = self.runs.pop(0)
        self.clock.now += took
        return rep


@pytest.fixture(scope="module")
def playbook(tmp_path_factory):
    path = tmp_path_factory.mktemp("book") / "gated.yml"
    path.write_text(
        "version: 1\ndeadline_s: 60\nchecks:\n  gpu.health: {}\n  ib.pairs: {}\n  nccl.allreduce_single: {}\n"
    )
    book = load_playbook(str(path))
    assert [(c.spec.name, c.spec.scope) for c in book.checks] == [
        ("gpu.health", "node"),
        ("ib.pairs", "active"),
        ("nccl.allreduce_single", "node"),
    ]
    assert (book.gate.retries, book.deadline_s) == (1, 60.0)
    return book


@pytest.fixture
def scripted(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(gatecmd, "time", SimpleNamespace(monotonic=clock, sleep=time.sleep))

    def make(*runs: tuple[float, Report]) -> ScriptedRunner:
        fake = ScriptedRunner(clock, *runs)
        monkeypatch.setattr(runner, "run", fake)
        return fake

    return make


def first_call(stop, deadline_s: float = 60.0) -> dict:
    return {
        "checks": ["gpu.health", "ib.pairs", "nccl.allreduce_single"],
        "nodes": NAMES,
        "fanout": 8,
        "deadline_s": deadline_s,
        "inventory": "hosts.yml",
        "stop": stop,
        "excluded": ("gpu009",),
        "allow_disruptive": False,
        "own_job": None,
        "progress": NULL_PROGRESS,
    }


def gated(playbook, stop, **kwargs) -> Report:
    return gatecmd.run_gated(
        playbook, NODES, TRANSPORT, fanout=8, inventory="hosts.yml", stop=stop, excluded=("gpu009",), **kwargs
    )


def outcomes(rep: Report) -> list[tuple[str, tuple[str, ...], str, str]]:
    return [(r.check, r.nodes, r.verdict.status.value, r.verdict.message) for r in rep.results]


PASSES = [res("gpu.health", n, Status.PASS, "8 GPUs healthy") for n in NAMES]


def test_a_node_check_that_fails_once_is_rerun_on_that_node_only_and_becomes_a_flaky_warn(playbook, scripted):
    stop = threading.Event()
    fake = scripted(
        (
            20.0,
            report(
                PASSES
                + [
                    res("nccl.allreduce_single", "gpu001", Status.PASS, "busbw 480 GB/s"),
                    res("nccl.allreduce_single", "gpu002", Status.FAIL, "busbw 212 GB/s, expected >= 400"),
                ]
            ),
        ),
        (3.0, report([res("nccl.allreduce_single", "gpu002", Status.PASS, "busbw 478 GB/s")], ["gpu002"])),
    )
    merged = gated(playbook, stop)
    assert fake.calls == [
        first_call(stop),
        {
            "checks": ["nccl.allreduce_single"],
            "nodes": ["gpu002"],
            "fanout": 8,
            "deadline_s": 40.0,
            "inventory": "hosts.yml",
            "stop": stop,
            "allow_disruptive": False,
            "own_job": None,
            "progress": NULL_PROGRESS,
        },
    ]
    assert outcomes(merged)[-2:] == [
        ("nccl.allreduce_single", ("gpu001",), "pass", "busbw 480 GB/s"),
        (
            "nccl.allreduce_single",
            ("gpu002",),
            "warn",
            "flaky: busbw 212 GB/s, expected >= 400 on attempt 1; passed on attempt 2",
        ),
    ]
    assert merged.results[-1].verdict.observed == {"attempts": 2, "flaky": True}
    assert merged.extras["gate"] == {
        "attempts": 2,
        "retried": ["nccl.allreduce_single"],
        "cleared": ["gpu002 nccl.allreduce_single"],
        "notes": [],
    }


def test_a_pair_check_that_fails_every_attempt_reruns_on_all_nodes_and_the_fail_stands(playbook, scripted):
    stop = threading.Event()
    pair = ("gpu001", "gpu002")
    fake = scripted(
        (
            30.0,
            report(
                PASSES
                + [
                    res("ib.pairs", pair, Status.FAIL, "gpu001<->gpu002: 95 Gb/s, expected >= 350"),
                    res("ib.pairs", ("gpu002", "gpu003"), Status.PASS, "371 Gb/s"),
                ]
            ),
        ),
        (10.0, report([res("ib.pairs", pair, Status.FAIL, "gpu001<->gpu002: 97 Gb/s, expected >= 350")])),
    )
    merged = gated(playbook, stop)
    # ib.pairs is active (cross-node): its partners matter, so the retry runs on every node of the run
    assert fake.calls[1] == {
        "checks": ["ib.pairs"],
        "nodes": NAMES,
        "fanout": 8,
        "deadline_s": 30.0,
        "inventory": "hosts.yml",
        "stop": stop,
        "allow_disruptive": False,
        "own_job": None,
        "progress": NULL_PROGRESS,
    }
    assert len(fake.calls) == 2
    assert outcomes(merged)[-2:] == [
        ("ib.pairs", pair, "fail", "gpu001<->gpu002: 95 Gb/s, expected >= 350 [failed on 2 of 2 attempts]"),
        ("ib.pairs", ("gpu002", "gpu003"), "pass", "371 Gb/s"),
    ]
    assert merged.results[-2].verdict.observed == {"attempts": 2, "failed_attempts": 2}
    assert merged.finished == T0 + timedelta(seconds=5)


def test_retries_zero_runs_once_and_returns_the_first_report(playbook, scripted):
    stop = threading.Event()
    first = report(PASSES + [res("ib.pairs", ("gpu001", "gpu002"), Status.FAIL, "95 Gb/s")])
    fake = scripted((2.0, first))
    assert gated(playbook, stop, retries=0) is first
    assert fake.calls == [first_call(stop)]


def test_a_failure_of_a_check_not_flaky_prone_is_never_retried(playbook, scripted):
    stop = threading.Event()
    first = report(
        [
            res("gpu.health", "gpu003", Status.FAIL, "GPU3: 2 uncorrectable ECC errors"),
            res("nccl.allreduce_single", "gpu003", Status.PASS, "busbw 480 GB/s"),
        ]
    )
    fake = scripted((2.0, first))
    assert gated(playbook, stop, retries=3) is first
    assert len(fake.calls) == 1


def test_each_retry_gets_the_time_left_and_a_third_attempt_can_clear_it(playbook, scripted):
    stop = threading.Event()
    fake = scripted(
        (10.0, report([res("nccl.allreduce_single", "gpu003", Status.FAIL, "busbw 100 GB/s")])),
        (15.0, report([res("nccl.allreduce_single", "gpu003", Status.FAIL, "busbw 120 GB/s")], ["gpu003"])),
        (5.0, report([res("nccl.allreduce_single", "gpu003", Status.PASS, "busbw 470 GB/s")], ["gpu003"])),
    )
    merged = gated(playbook, stop, retries=2, deadline_s=45.0)
    assert [(c["nodes"], c["deadline_s"]) for c in fake.calls] == [
        (NAMES, 45.0),
        (["gpu003"], 35.0),
        (["gpu003"], 20.0),
    ]
    assert outcomes(merged) == [
        ("nccl.allreduce_single", ("gpu003",), "warn", "flaky: busbw 100 GB/s on attempt 1; passed on attempt 3")
    ]


def test_no_time_left_for_the_retry_the_fail_stands_and_says_why(playbook, scripted):
    stop = threading.Event()
    first = report([res("nccl.allreduce_single", "gpu002", Status.FAIL, "busbw 212 GB/s")])
    fake = scripted((56.0, first))
    merged = gated(playbook, stop)
    assert len(fake.calls) == 1
    assert outcomes(merged) == [
        (
            "nccl.allreduce_single",
            ("gpu002",),
            "fail",
            "busbw 212 GB/s [retry not run: no time left for retry 1 (4 s of the 60 s deadline)]",
        )
    ]
    assert merged.results[0].verdict.observed == {"attempts": 1, "failed_attempts": 1}
    assert merged.extras["gate"] == {
        "attempts": 1,
        "retried": [],
        "cleared": [],
        "notes": ["no time left for retry 1 (4 s of the 60 s deadline)"],
    }


def test_a_stop_signal_prevents_the_retry(playbook, scripted):
    stop = threading.Event()
    stop.set()
    fake = scripted((1.0, report([res("ib.pairs", ("gpu001", "gpu003"), Status.FAIL, "80 Gb/s")])))
    merged = gated(playbook, stop)
    assert len(fake.calls) == 1
    assert outcomes(merged) == [
        ("ib.pairs", ("gpu001", "gpu003"), "fail", "80 Gb/s [retry not run: stopped by a signal before retry 1]")
    ]


def test_a_timeout_is_retried_only_when_timeout_drains(playbook, scripted):
    stop = threading.Event()
    timed_out = report([res("nccl.allreduce_single", "gpu001", Status.TIMEOUT, "all_reduce_perf timed out")])
    fake = scripted((1.0, timed_out))
    assert gated(playbook, stop) is timed_out  # drain_on [fail]: a TIMEOUT never drains, nothing to retry
    fake = scripted(
        (1.0, timed_out), (1.0, report([res("nccl.allreduce_single", "gpu001", Status.PASS, "ok")], ["gpu001"]))
    )
    merged = gated(playbook, stop, drain_on=["fail", "timeout"])
    assert [c["nodes"] for c in fake.calls] == [NAMES, ["gpu001"]]
    assert outcomes(merged)[0][2:] == ("warn", "flaky: all_reduce_perf timed out on attempt 1; passed on attempt 2")


# ---- the log and the result line: one line each, whatever a message holds ------------------------


def test_log_values_are_json_strings_on_one_line(tmp_path):
    log = gatecmd.GateLog(str(tmp_path / "gate.log"), "prolog", "7")
    line = log.event("drain", "gpu001", check="gpu.health", reason='a "b"\nc\u2028d\x85e\x1bf', evidence=None)
    assert line.endswith(
        ' action=drain node=gpu001 job=7 check="gpu.health" reason="a \\"b\\"\\nc\\u2028d\\u0085e\\u001bf"'
    )
    assert (tmp_path / "gate.log").read_text(encoding="utf-8").splitlines() == [line]
    assert json.loads(line.split("reason=", 1)[1]) == 'a "b"\nc\u2028d\x85e\x1bf'


def test_an_unwritable_log_is_a_warning_not_a_failure(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    log = gatecmd.GateLog(str(tmp_path / "file" / "gate.log"), "health")
    log.event("resume", "gpu001")
    assert log.path is None and len(log.lines) == 1
    assert "nodecheck: warning: cannot write the gate log" in capsys.readouterr().err


def test_the_log_masks_secrets_is_not_world_readable_and_never_follows_a_planted_link(tmp_path):
    import os
    import stat

    log = gatecmd.GateLog(str(tmp_path / "logs" / "gate.log"), "prolog", "7")
    log.event("could-not-judge", "gpu001", message="probe argv: env HF_TOKEN=hf_s3cr3t python3 - --api-key k3y5")
    text = (tmp_path / "logs" / "gate.log").read_text()
    assert "hf_s3cr3t" not in text and "k3y5" not in text and "HF_TOKEN=<redacted>" in text
    assert stat.S_IMODE(os.stat(tmp_path / "logs" / "gate.log").st_mode) == 0o640
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    (tmp_path / "planted.log").symlink_to(victim)
    gatecmd.GateLog(str(tmp_path / "planted.log"), "health").event("resume", "gpu001")
    assert victim.read_text() == "keep\n"


def test_the_result_line_folds_newlines_and_separators(capsys):
    gatecmd._say("FAIL gpu.health: line 1\nline 2\r\u2028tab\there")
    assert capsys.readouterr().out == "FAIL gpu.health: line 1 line 2  tab here\n"


# ---- exceptions and config errors: fail open under Slurm -----------------------------------------


def _args(*argv: str) -> Namespace:
    return build_parser().parse_args(list(argv))


@pytest.mark.parametrize(
    "command, slurm_env, code",
    [
        (["prolog"], {"SLURM_JOB_ID": "7"}, 0),
        (["prolog"], {"SLURM_SCRIPT_CONTEXT": "prolog_slurmd"}, 0),
        (["prolog"], {}, 3),
        (["prolog", "--controller"], {"SLURM_JOB_ID": "7"}, 0),
        (["health"], {"SLURM_JOB_ID": "7"}, 3),
    ],
)
def test_an_internal_error_drains_nothing_and_fails_open_under_slurm(
    tmp_path, monkeypatch, capsys, command, slurm_env, code
):
    for key in ("SLURM_JOB_ID", "SLURM_SCRIPT_CONTEXT", "NODECHECK_GATE_CONFIG"):
        monkeypatch.delenv(key, raising=False)
    for key, value in slurm_env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("SLURMD_NODENAME", "nodeX")
    cfg = tmp_path / "gate.yml"
    cfg.write_text(f"log_file: {tmp_path}/gate.log\n")

    def boom(args, log, job, *after):  # (health gets the repair pass to run after it)
        raise KeyError("oops")

    for name in ("_node_prolog", "_controller", "_health"):
        monkeypatch.setattr(gatecmd, name, boom)
    assert gatecmd.gate_command(_args(*command, "--config", str(cfg))) == code
    mode = "controller" if "--controller" in command else command[0]
    assert (
        capsys.readouterr().out
        == f"nodecheck {mode}: INTERNAL ERROR, nothing judged, nothing drained: KeyError: 'oops'\n"
    )
    (line,) = (tmp_path / "gate.log").read_text().splitlines()
    assert f"nodecheck[{mode}] action=internal-error node=nodeX" in line and line.endswith(
        "message=\"KeyError: 'oops'\""
    )


# ---- end to end: the commands as Slurm runs them, against a fake scontrol -------------------------

# The fake scontrol of tests/fakes/scontrol.py: node states in nodes.json beside it (found from its own
# path: Slurm's environment has no room for more variables), no `clock` file, so a reason it sets is
# stamped with the local time now, as slurmctld does; an `update-fails` file beside it makes every update
# fail as slurmctld does when it cannot be reached.

IDLE = {"state": "IDLE", "reason": "", "user": "", "time": ""}
FOREIGN = {
    "state": "IDLE+DRAIN",
    "reason": "RMA ticket 4411: replace GPU 5",
    "user": "alice",
    "time": "2026-11-28T22:10:05",
}
PIN_MESSAGE = f"kernel {KERNEL} on nodeX, expected {WRONG_KERNEL} (pinned; no node has it)"

M = marked_reason  # the reason nodecheck writes for a body


OUR_REASON = M(f"kernel.version {PIN_MESSAGE}")
_FIELD = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')


def drained(reason: str, time: str = "2026-11-28T22:10:05") -> dict:
    return {"state": "IDLE+DRAIN", "reason": reason, "user": "root", "time": time}


class Site:
    """A tmp Slurm site: playbook, gate config, fake scontrol, report dir and gate log."""

    def __init__(
        self,
        root: Path,
        nodes: dict[str, dict],
        *,
        kernel: str = WRONG_KERNEL,
        gate: str = "settle_s: 0",
        config: str = "",
    ) -> None:
        self.root = root
        (root / "slurm").mkdir()
        self.scontrol = fake_scontrol.install(root / "slurm", nodes)
        self.playbook = root / "pin.yml"
        self.playbook.write_text(
            f'version: 1\ndeadline_s: 60\ngate: {{{gate}}}\nchecks:\n  kernel.version: {{expect: "{kernel}"}}\n'
        )
        self.out, self.log = root / "reports", root / "gate.log"
        self.config = root / "nodecheck.yml"
        self.config.write_text(
            f"output_dir: {self.out}\nlog_file: {self.log}\nscontrol: {self.scontrol}\n"
            f"playbook: {self.playbook}\n{config}"
        )

    def run(self, *argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
        """As slurmd runs a Prolog: a bare environment, no PATH, no HOME; the interpreter absolute."""
        base = {"SLURMD_NODENAME": "nodeX", "SLURM_JOB_ID": "7", "NODECHECK_GATE_CONFIG": str(self.config)}
        return subprocess.run(
            [sys.executable, "-m", "nodecheck", *argv],
            env=base if env is None else env,
            cwd=Path(__file__).resolve().parents[2],
            capture_output=True,
            text=True,
            timeout=120,
        )

    def state(self, name: str = "nodeX") -> dict:
        return json.loads((self.root / "slurm" / "nodes.json").read_text(encoding="utf-8"))[name]

    def calls(self) -> list[list[str]]:
        return [call["argv"] for call in fake_scontrol.calls(self.root / "slurm")]

    def events(self) -> list[dict]:
        """The gate log's lines as {field: value}; quoted values decoded."""
        out = []
        for line in self.log.read_text(encoding="utf-8").splitlines():
            stamp, tag, rest = line.split(" ", 2)
            assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", stamp), line
            out.append({"tag": tag, **{k: json.loads(v) if v.startswith('"') else v for k, v in _FIELD.findall(rest)}})
        return out

    def report_dir(self, stdout: str) -> Path:
        m = re.search(r"\(report (\S+)\)$", stdout.rstrip("\n"))
        assert m, stdout
        path = Path(m.group(1))
        assert path.parent == self.out and path.is_dir()
        return path


def one_line(proc: subprocess.CompletedProcess) -> str:
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, proc.stdout + proc.stderr
    return lines[0]


def test_prolog_drains_a_failing_node_with_its_reason_and_exits_1(tmp_path):
    site = Site(tmp_path, {"nodeX": dict(IDLE)})
    proc = site.run("prolog")
    assert proc.returncode == 1, proc.stderr
    where = site.report_dir(proc.stdout)
    assert re.fullmatch(r"\d{8}T\d{6}Z_pin_nodeX_job7", where.name)
    assert (
        one_line(proc) == f"nodecheck prolog nodeX job 7: FAIL kernel.version: {PIN_MESSAGE}; drained (report {where})"
    )
    # then, after the settle wait, every node's state for the cluster breaker (1 node: below its minimum)
    assert site.calls() == [
        ["show", "node", "nodeX"],
        ["update", "NodeName=nodeX", "State=DRAIN", f"Reason={OUR_REASON}"],
        ["show", "node"],
    ]
    assert (site.state()["state"], site.state()["reason"]) == ("IDLE+DRAIN", OUR_REASON)
    (event,) = site.events()
    assert event == {
        "tag": "nodecheck[prolog]",
        "action": "drain",
        "node": "nodeX",
        "job": "7",
        "check": "kernel.version",
        "reason": OUR_REASON,
        "evidence": f"{where}/captures/nodeX/versions.txt",
    }
    # the report was stored before the drain: the evidence the log names exists, with the kernel in it
    assert f"\n{KERNEL}\n" in Path(event["evidence"]).read_text()
    assert json.loads((where / "report.json").read_text())["run_id"] == where.name


def test_prolog_observe_drains_nothing_and_exits_0(tmp_path):
    site = Site(tmp_path, {"nodeX": dict(IDLE)}, config="prolog: {observe: true}\n")
    proc = site.run("prolog")
    assert proc.returncode == 0, proc.stderr
    where = site.report_dir(proc.stdout)
    assert one_line(proc) == (
        f"nodecheck prolog nodeX job 7: FAIL kernel.version: {PIN_MESSAGE}; observe only: not drained (report {where})"
    )
    assert site.calls() == [] and site.state() == IDLE
    assert [(e["action"], e["node"], e["reason"]) for e in site.events()] == [("would-drain", "nodeX", OUR_REASON)]


def test_prolog_passes_and_touches_nothing_when_the_kernel_is_the_pinned_one(tmp_path):
    site = Site(tmp_path, {"nodeX": dict(IDLE)}, kernel=KERNEL)
    proc = site.run("prolog")
    assert proc.returncode == 0, proc.stderr
    # a Prolog runs per job and node: a run where all passed keeps no report by default
    assert one_line(proc) == "nodecheck prolog nodeX job 7: PASS (all passed: no report kept)"
    assert site.calls() == [] and not site.log.exists()
    assert not (tmp_path / "reports").exists() or not any((tmp_path / "reports").iterdir())


def test_prolog_sets_its_own_path_from_the_config(tmp_path):
    # Slurm gives the Prolog no PATH: the tools are found on the configured one (here a fake uname)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "uname").write_text(f"#!/bin/sh\necho {WRONG_KERNEL}\n")
    (bin_dir / "uname").chmod(0o755)
    site = Site(tmp_path, {"nodeX": dict(IDLE)}, config=f"path: {bin_dir}:/usr/bin:/bin\n")
    proc = site.run("prolog")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert one_line(proc) == "nodecheck prolog nodeX job 7: PASS (all passed: no report kept)"
    assert site.calls() == []


def test_prolog_config_error_under_slurm_drains_nothing_and_exits_0(tmp_path):
    site = Site(tmp_path, {"nodeX": dict(IDLE)}, config=f"prolog: {{playbook: {tmp_path}/missing.yml}}\n")
    proc = site.run("prolog")
    assert proc.returncode == 0, proc.stderr
    assert one_line(proc).startswith(
        f"nodecheck prolog: CONFIG ERROR, nothing judged, nothing drained: {tmp_path}/missing.yml: "
    )
    assert site.calls() == [] and site.state() == IDLE
    (event,) = site.events()
    assert (event["action"], event["node"], event["job"]) == ("config-error", "nodeX", "7")
    assert event["message"].startswith(f"{tmp_path}/missing.yml: ")
    # run by hand (no SLURM_* in the environment) the same error is bad input
    by_hand = site.run("prolog", env={"NODECHECK_GATE_CONFIG": str(site.config)})
    assert by_hand.returncode == 64
    assert one_line(by_hand).startswith("nodecheck prolog: CONFIG ERROR, nothing judged, nothing drained: ")


def test_a_broken_config_file_under_slurm_exits_0_with_one_result_line(tmp_path):
    site = Site(tmp_path, {"nodeX": dict(IDLE)})
    site.config.write_text("prolog: {deadline: -1, bogus: 2}\nretries: [\n")
    proc = site.run("prolog", "--log-file", str(site.log))  # the file that names the log is unreadable
    assert proc.returncode == 0, proc.stderr
    assert one_line(proc).startswith(f"nodecheck prolog: CONFIG ERROR, nothing judged, nothing drained: {site.config}:")
    assert [e["action"] for e in site.events()] == ["config-error"]
    assert site.calls() == []


def test_prolog_leaves_a_foreign_drain_and_exits_1(tmp_path):
    site = Site(tmp_path, {"nodeX": dict(FOREIGN)})
    proc = site.run("prolog")
    assert proc.returncode == 1
    where = site.report_dir(proc.stdout)
    assert one_line(proc) == (
        f"nodecheck prolog nodeX job 7: FAIL kernel.version: {PIN_MESSAGE}; "
        f"already drained by someone else; left as is (report {where})"
    )
    assert site.calls() == [["show", "node", "nodeX"]] and site.state() == FOREIGN
    (event,) = site.events()
    assert (event["action"], event["check"]) == ("left", "kernel.version")
    assert event["reason"] == (
        "already IDLE+DRAIN, reason 'RMA ticket 4411: replace GPU 5' (set by alice at "
        "2026-11-28T22:10:05); not nodecheck's to change"
    )


def test_prolog_drain_that_scontrol_refuses_is_logged_failed_and_exits_1(tmp_path):
    site = Site(tmp_path, {"nodeX": dict(IDLE)})
    (tmp_path / "slurm" / "update-fails").write_text("")
    proc = site.run("prolog")
    assert proc.returncode == 1
    where = site.report_dir(proc.stdout)
    assert one_line(proc) == (
        f"nodecheck prolog nodeX job 7: FAIL kernel.version: {PIN_MESSAGE}; "
        f"drain FAILED (Slurm will drain it for the Prolog error) (report {where})"
    )
    (event,) = site.events()
    assert (event["action"], event["evidence"]) == ("failed", f"{where}/captures/nodeX/versions.txt")
    assert event["reason"] == (
        f"{site.scontrol} update NodeName=nodeX State=DRAIN 'Reason={OUR_REASON}': exit 1: "
        "slurm_update error: Unable to contact slurm controller (connect failure)"
    )
    assert site.state() == IDLE


@pytest.mark.parametrize("hangs", ["update", "show"])
def test_prolog_with_a_hanging_scontrol_ends_at_its_bound_with_a_clear_error(tmp_path, hangs):
    """slurmctld down: scontrol retries for minutes. The gate's every call is bounded (5 s in the
    Prolog): the drain fails loudly, Slurm drains the node for the Prolog error, nothing hangs."""
    site = Site(tmp_path, {"nodeX": dict(IDLE)})
    (tmp_path / "slurm" / "hangs").write_text(hangs)
    started = time.monotonic()
    proc = site.run("prolog")
    assert time.monotonic() - started < 30
    assert proc.returncode == 1, proc.stdout + proc.stderr
    where = site.report_dir(proc.stdout)
    assert one_line(proc) == (
        f"nodecheck prolog nodeX job 7: FAIL kernel.version: {PIN_MESSAGE}; "
        f"drain FAILED (Slurm will drain it for the Prolog error) (report {where})"
    )
    (event,) = site.events()
    assert event["action"] == "failed"
    said = "'slurm_load_node: Unable to contact slurm controller (connect failure), retrying'"
    if hangs == "update":
        assert event["reason"] == (
            f"{site.scontrol} update NodeName=nodeX State=DRAIN 'Reason={OUR_REASON}': "
            f"no answer within 5 s; killed; stderr: {said}"
        )
    else:
        assert event["reason"] == (
            f"cannot read its state: {site.scontrol} show node nodeX: no answer within 5 s; killed; stderr: {said}"
        )
    assert site.state() == IDLE


def _cluster(others_drained_at: str) -> dict[str, dict]:
    nodes = {"nodeX": dict(IDLE)}
    for i in range(1, 10):
        nodes[f"node{i:02d}"] = drained(
            M(f"kernel.version kernel 6.1.0 on node{i:02d}, expected {WRONG_KERNEL}"), others_drained_at
        )
    return nodes


def test_prolog_breaker_undoes_its_own_drain_when_the_check_drained_the_cluster_just_now(tmp_path):
    now = datetime.now().strftime("%Y-%m-%dT%H:%M:%S")  # Slurm stamps reasons in local time
    site = Site(tmp_path, _cluster(now))
    proc = site.run("prolog")
    assert proc.returncode == 0, proc.stderr
    where = site.report_dir(proc.stdout)
    breaker = (
        "mass-drain breaker: 10 of 10 nodes are drained by nodecheck for kernel.version (more than 10%): "
        "suspect the check, its thresholds or the config; this node is not drained"
    )
    assert one_line(proc) == (
        f"nodecheck prolog nodeX job 7: FAIL kernel.version: {PIN_MESSAGE}; {breaker}; "
        f"the job may start (report {where})"
    )
    assert site.calls() == [
        ["show", "node", "nodeX"],
        ["update", "NodeName=nodeX", "State=DRAIN", f"Reason={OUR_REASON}"],
        ["show", "node"],
        ["show", "node", "nodeX"],
        ["update", "NodeName=nodeX", "State=RESUME"],
    ]
    assert site.state() == IDLE and site.state("node01")["state"] == "IDLE+DRAIN"
    assert [(e["action"], e["node"]) for e in site.events()] == [("drain", "nodeX"), ("breaker", "nodeX")]
    assert site.events()[1] == {
        "tag": "nodecheck[prolog]",
        "action": "breaker",
        "node": "nodeX",
        "job": "7",
        "message": breaker,
        "undo": "resume",
        "evidence": str(where),
    }


def test_prolog_breaker_does_not_count_drains_older_than_its_window(tmp_path):
    yesterday = (datetime.now() - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%S")
    site = Site(tmp_path, _cluster(yesterday))
    proc = site.run("prolog")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert one_line(proc).endswith(f"; drained (report {site.report_dir(proc.stdout)})")
    assert [c[:2] for c in site.calls()] == [["show", "node"], ["update", "NodeName=nodeX"], ["show", "node"]]
    assert site.state()["reason"] == OUR_REASON


def test_prolog_whose_own_run_trips_the_breaker_exits_0_and_drains_nothing(tmp_path):
    # breaker_min_nodes: 1 judges even a one-node run: 1 of 1 fails -> the breaker; the Prolog must not
    # exit non-zero then (Slurm would drain the node for "Prolog error" in the breaker's stead)
    site = Site(tmp_path, {"nodeX": dict(IDLE)}, gate="settle_s: 0, breaker_min_nodes: 1")
    proc = site.run("prolog")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    breaker = (
        "mass-drain breaker: kernel.version fails on 1 of 1 nodes (more than 10%): suspect the check, "
        "its thresholds or the config, not the nodes; nothing was drained"
    )
    assert one_line(proc) == (
        f"nodecheck prolog nodeX job 7: FAIL kernel.version: {PIN_MESSAGE}; {breaker}; "
        f"the job may start (report {site.report_dir(proc.stdout)})"
    )
    assert site.calls() == [] and site.state() == IDLE
    assert [(e["action"], e["message"], e["blamed"]) for e in site.events()] == [("breaker", breaker, "nodeX")]


def test_controller_without_slurm_job_nodelist_is_a_config_error(tmp_path):
    site = Site(tmp_path, {"nodeX": dict(IDLE)})
    env = {"SLURM_JOB_ID": "7", "NODECHECK_GATE_CONFIG": str(site.config)}
    proc = site.run("prolog", "--controller", env=env)
    assert proc.returncode == 0, proc.stderr
    message = (
        "environment: SLURM_JOB_NODELIST is not set: --controller runs as slurm.conf's PrologSlurmctld; "
        "hint: or set SLURM_JOB_NODELIST=node[1-4] to try it by hand"
    )
    assert one_line(proc) == f"nodecheck controller: CONFIG ERROR, nothing judged, nothing drained: {message}"
    (event,) = site.events()
    assert (event["tag"], event["action"], event["job"], event["message"]) == (
        "nodecheck[controller]",
        "config-error",
        "7",
        message,
    )
    assert site.run("prolog", "--controller", env={"NODECHECK_GATE_CONFIG": str(site.config)}).returncode == 64
    assert site.calls() == []


def test_health_resumes_its_own_drain_once_the_check_passes(tmp_path):
    site = Site(tmp_path, {"nodeX": drained(M("kernel.version old kernel"))}, kernel=KERNEL)
    proc = site.run("health", env={"SLURMD_NODENAME": "nodeX", "NODECHECK_GATE_CONFIG": str(site.config)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    where = site.report_dir(proc.stdout)
    assert re.fullmatch(r"\d{8}T\d{6}Z_pin_nodeX", where.name)
    assert one_line(proc) == f"nodecheck health nodeX: PASS; resume nodeX (report {where})"
    assert site.calls() == [
        ["show", "node", "nodeX"],
        ["show", "node", "nodeX"],
        ["update", "NodeName=nodeX", "State=RESUME"],
    ]
    assert site.state() == IDLE
    (event,) = site.events()
    assert event == {
        "tag": "nodecheck[health]",
        "action": "resume",
        "node": "nodeX",
        "reason": M("kernel.version old kernel"),
        "evidence": str(where),
    }


def test_health_holds_a_drain_for_a_check_it_did_not_run_and_never_resumes_a_foreign_one(tmp_path):
    site = Site(tmp_path, {"nodeX": drained(M("gpu.health GPU3 Xid 79"))}, kernel=KERNEL)
    env = {"SLURMD_NODENAME": "nodeX", "NODECHECK_GATE_CONFIG": str(site.config)}
    proc = site.run("health", env=env)
    assert proc.returncode == 0
    assert one_line(proc) == f"nodecheck health nodeX: PASS (report {site.report_dir(proc.stdout)})"
    assert site.calls() == [["show", "node", "nodeX"]]
    assert site.state()["reason"] == M("gpu.health GPU3 Xid 79")
    (event,) = site.events()
    assert (event["action"], event["message"]) == (
        "held",
        "drained for gpu.health, which this run did not check; resume it by hand once fixed: "
        "scontrol update nodename=nodeX state=resume",
    )
    (tmp_path / "slurm" / "nodes.json").write_text(json.dumps({"nodeX": FOREIGN}))
    assert site.run("health", env=env).returncode == 0
    assert site.state() == FOREIGN and len(site.events()) == 1  # nothing done, nothing logged
    assert [c[0] for c in site.calls()] == ["show", "show"]


def test_health_never_resumes_an_operators_nodecheck_style_reason(tmp_path):
    """Issue 17, finding 10: the check named in the reason passes, the reason is not nodecheck's mark."""
    rma = "nodecheck: kernel.version held for RMA #4711 - do not resume"
    site = Site(tmp_path, {"nodeX": drained(rma)}, kernel=KERNEL)
    proc = site.run("health", env={"SLURMD_NODENAME": "nodeX", "NODECHECK_GATE_CONFIG": str(site.config)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert one_line(proc) == f"nodecheck health nodeX: PASS (report {site.report_dir(proc.stdout)})"
    assert site.calls() == [["show", "node", "nodeX"]]
    assert site.state()["reason"] == rma
    (event,) = site.events()
    assert event["action"] == "held" and event["message"].startswith(
        f"drained with an unmarked nodecheck-style reason ({rma!r}): "
    )
    assert event["message"].endswith("resume it by hand: scontrol update nodename=nodeX state=resume")


def test_the_sites_drain_token_marks_the_reasons_it_drains_and_resumes(tmp_path):
    site = Site(tmp_path, {"nodeX": dict(IDLE)}, config="drain_token: site-7\n")
    env = {"SLURMD_NODENAME": "nodeX", "NODECHECK_GATE_CONFIG": str(site.config)}
    assert site.run("health", env=env).returncode == 2
    assert site.state()["reason"] == M(f"kernel.version {PIN_MESSAGE}", "site-7") != OUR_REASON
    # the pin fixed (a new playbook): the reason this site's token marked is resumed
    site.playbook.write_text(site.playbook.read_text().replace(WRONG_KERNEL, KERNEL))
    proc = site.run("health", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert site.state() == IDLE
    assert [e["action"] for e in site.events()] == ["drain", "resume"]


def test_health_drains_a_failing_node_and_exits_2(tmp_path):
    site = Site(tmp_path, {"nodeX": dict(IDLE)})
    proc = site.run("health", env={"SLURMD_NODENAME": "nodeX", "NODECHECK_GATE_CONFIG": str(site.config)})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert one_line(proc) == (
        f"nodecheck health nodeX: FAIL kernel.version: {PIN_MESSAGE}; drain nodeX "
        f"(report {site.report_dir(proc.stdout)})"
    )
    assert site.state()["reason"] == OUR_REASON
    assert [e["action"] for e in site.events()] == ["drain"]


@pytest.mark.parametrize("fault", ["update-fails", "update-hangs"])
def test_health_whose_drain_fails_says_so_on_its_result_line(tmp_path, fault):
    """slurmctld down (scontrol says so) or `scontrol update` killed at its bound (10 s): the result
    line says the drain FAILED and why, bounded, as the Prolog's does; never "drain nodeX" as if
    it had been done (the gate log alone said action=failed)."""
    site = Site(tmp_path, {"nodeX": dict(IDLE)})
    if fault == "update-fails":
        (tmp_path / "slurm" / "update-fails").write_text("")
        why = "exit 1: slurm_update error: Unable to contact slurm controller (connect failure)"
    else:
        (tmp_path / "slurm" / "hangs").write_text("update")
        why = (
            "no answer within 10 s; killed; stderr: "
            "'slurm_load_node: Unable to contact slurm controller (connect failure), retrying'"
        )
    proc = site.run("health", env={"SLURMD_NODENAME": "nodeX", "NODECHECK_GATE_CONFIG": str(site.config)})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = one_line(proc)
    head = f"nodecheck health nodeX: FAIL kernel.version: {PIN_MESSAGE}; drain FAILED nodeX ("
    assert line.startswith(head), line
    assert line.endswith(f"{why}) (report {site.report_dir(proc.stdout)})"), line
    assert len(line) - len(head) < 400 + 2 * len(str(tmp_path)), line  # the why is an excerpt
    assert site.state() == IDLE
    (event,) = site.events()
    assert event["action"] == "failed" and event["reason"].endswith(why)


def test_a_message_with_a_newline_stays_one_result_line_and_one_log_line(tmp_path):
    # a pinned value with a newline in it reaches the verdict's message as is
    site = Site(tmp_path, {"nodeX": dict(IDLE)}, kernel="0.0.0\\nnot-this", config="observe: true\n")
    proc = site.run("prolog")
    assert proc.returncode == 0, proc.stderr
    where = site.report_dir(proc.stdout)
    report_json = json.loads((where / "report.json").read_text())
    assert [r["message"] for n in report_json["nodes"] for r in n["results"]] == [
        f"kernel {KERNEL} on nodeX, expected 0.0.0\nnot-this (pinned; no node has it)"
    ]
    assert one_line(proc) == (
        f"nodecheck prolog nodeX job 7: FAIL kernel.version: kernel {KERNEL} on nodeX, "
        f"expected 0.0.0 not-this (pinned; no node has it); observe only: not drained "
        f"(report {where})"
    )
    (event,) = site.events()  # the drain reason is folded to one line by drain_reason
    assert event["reason"] == M(
        f"kernel.version kernel {KERNEL} on nodeX, expected 0.0.0 not-this (pinned; no node has it)"
    )


def test_the_node_prolog_console_script_exits_non_zero_only_for_a_drain():
    """slurmd drains a node whose Prolog exits non-zero: under it, bad arguments exit 0, by hand 64."""
    script = str(Path(sys.executable).parent / "nodecheck-prolog")
    under_slurm = subprocess.run(
        [script, "--no-such-option"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"SLURM_SCRIPT_CONTEXT": "prolog_slurmd", "SLURMD_NODENAME": "nodeX"},
    )
    assert under_slurm.returncode == 0
    assert "unrecognized arguments: --no-such-option" in under_slurm.stderr
    by_hand = subprocess.run([script, "--no-such-option"], capture_output=True, text=True, timeout=60, env={})
    assert by_hand.returncode == 64


def test_local_health_check_has_the_cluster_breaker_too(tmp_path):
    """HealthCheckProgram runs on every node by itself: a bad pin must not drain the fleet."""
    now = datetime.now().strftime("%Y-%m-%dT%H:%M:%S")
    site = Site(tmp_path, _cluster(now))
    proc = site.run("health")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "mass-drain breaker: 10 of 10 nodes are drained by nodecheck for kernel.version" in one_line(proc)
    assert site.state() == IDLE  # its own drain undone
    assert [(e["action"], e["node"]) for e in site.events()] == [("drain", "nodeX"), ("breaker", "nodeX")]


def test_keep_reports_always_keeps_a_passing_runs_report(tmp_path):
    site = Site(tmp_path, {"nodeX": dict(IDLE)}, kernel=KERNEL, config="keep_reports: always\n")
    proc = site.run("prolog")
    assert proc.returncode == 0, proc.stderr
    assert one_line(proc) == f"nodecheck prolog nodeX job 7: PASS (report {site.report_dir(proc.stdout)})"
    assert (site.report_dir(proc.stdout) / "report.json").is_file()


# ---- the controller Prolog's result line: what its drains became --------------------------------


def _controller_site(tmp_path, monkeypatch, nodes: dict[str, dict], failing: list[str], config: str = ""):
    """`prolog --controller` in process: the job's nodes gpu001-3, the cross-node run scripted (ib.pairs
    blames `failing`), a fake scontrol holding `nodes`. Returns (run, site dir)."""
    for key in ("SLURM_SCRIPT_CONTEXT", "NODECHECK_GATE_CONFIG"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    monkeypatch.setenv("PATH", os.environ.get("PATH", ""))  # _set_environment rewrites it
    (tmp_path / "slurm").mkdir()
    scontrol = fake_scontrol.install(tmp_path / "slurm", nodes)
    book = tmp_path / "pairs.yml"
    book.write_text("version: 1\ndeadline_s: 60\ngate: {settle_s: 0}\nchecks:\n  ib.pairs: {}\n")
    cfg = tmp_path / "nodecheck.yml"
    cfg.write_text(
        f"output_dir: {tmp_path}/reports\nlog_file: {tmp_path}/gate.log\nscontrol: {scontrol}\n"
        f"playbook: {book}\n{config}"
    )
    results = [
        res(
            "ib.pairs",
            n,
            Status.FAIL if n in failing else Status.PASS,
            f"bad node: fails with 2/2 partners ({n})" if n in failing else "2 tests pass",
        )
        for n in NAMES
    ]
    monkeypatch.setattr(gatecmd, "_job_nodes", lambda args: (NODES, TRANSPORT))
    monkeypatch.setattr(gatecmd, "run_gated", lambda *a, **k: report(results))

    def run(capsys) -> tuple[int, str]:
        code = gatecmd.gate_command(_args("prolog", "--controller", "--config", str(cfg)))
        return code, capsys.readouterr().out

    return run


def test_controller_whose_drain_fails_says_drain_failed_and_why_not_left_as_is(tmp_path, monkeypatch, capsys):
    """slurmctld unreachable while the controller drains: the result line (Slurm's log, the
    operator's view) says the drain FAILED and why, as health's does; "left as is" is only for a
    drain someone else owns. The job is still requeued: the node was judged bad."""
    run = _controller_site(tmp_path, monkeypatch, {n: dict(IDLE) for n in NAMES}, ["gpu002"])
    (tmp_path / "slurm" / "update-fails").write_text("")
    code, out = run(capsys)
    why = "exit 1: slurm_update error: Unable to contact slurm controller (connect failure)"
    m = re.fullmatch(
        r"nodecheck prolog --controller job 7 \(3 nodes\): FAIL: (.*); the job is requeued "
        r"\(report (\S+)\)\n",
        out,
    )
    assert m and m.group(1).startswith("drain FAILED gpu002 (") and m.group(1).endswith(f"{why})"), out
    assert "left as is" not in out and len(m.group(1)) < 400, out  # the why is an excerpt
    assert code == gatecmd.EXIT_DRAINED
    assert [(e["action"], e["node"]) for e in _log_events(tmp_path / "gate.log")] == [("failed", "gpu002")]


def test_controller_result_line_names_what_it_drained_and_what_it_left(tmp_path, monkeypatch, capsys):
    nodes = {"gpu001": dict(IDLE), "gpu002": dict(IDLE), "gpu003": dict(FOREIGN)}
    run = _controller_site(tmp_path, monkeypatch, nodes, ["gpu002", "gpu003"])
    code, out = run(capsys)
    m = re.fullmatch(
        r"nodecheck prolog --controller job 7 \(3 nodes\): FAIL: (.*); the job is requeued "
        r"\(report (\S+)\)\n",
        out,
    )
    assert m and m.group(1) == "drained gpu002 (ib.pairs); left as is (drained by someone else): gpu003", out
    assert code == gatecmd.EXIT_DRAINED
    state = json.loads((tmp_path / "slurm" / "nodes.json").read_text())
    assert state["gpu002"]["reason"] == M("ib.pairs bad node: fails with 2/2 partners (gpu002)")
    assert state["gpu003"] == FOREIGN


def test_controller_drains_with_the_sites_drain_token(tmp_path, monkeypatch, capsys):
    """The site's token marks the controller's drains as it does health's: else health, run with
    that token, would take the controller's drain for a person's and never resume it."""
    run = _controller_site(
        tmp_path, monkeypatch, {n: dict(IDLE) for n in NAMES}, ["gpu002"], config="drain_token: site-7\n"
    )
    code, _ = run(capsys)
    state = json.loads((tmp_path / "slurm" / "nodes.json").read_text())
    assert state["gpu002"]["reason"] == M("ib.pairs bad node: fails with 2/2 partners (gpu002)", "site-7")
    assert code == gatecmd.EXIT_DRAINED


def _log_events(path: Path) -> list[dict]:
    return [
        {k: json.loads(v) if v.startswith('"') else v for k, v in _FIELD.findall(line.split(" ", 2)[2])}
        for line in path.read_text(encoding="utf-8").splitlines()
    ]


# ---- gate playbooks refuse disruptive DCGM levels; the Prolog says when NVML did not answer -------


def _book(tmp_path, block: str):
    path = tmp_path / "gate.yml"
    path.write_text(f"version: 1\ndeadline_s: 20\nchecks:\n  gpu.dcgm_diag: {block}\n")
    return str(path)


@pytest.mark.parametrize("mode", ["prolog", "controller", "health"])
@pytest.mark.parametrize("block", ["{level: 2}", "{level: 3}", "{tests: [memory]}"])
def test_a_disruptive_dcgm_run_is_refused_in_every_gate_mode(tmp_path, mode, block):
    with pytest.raises(ConfigError) as e:
        gatecmd.load_playbook_for(Namespace(playbook=_book(tmp_path, block)), mode)
    assert "not in a " + mode + " playbook" in e.value.message
    assert e.value.file == str(tmp_path / "gate.yml")
    assert "level 1 at most" in (e.value.hint or "")


def test_level_1_reads_state_only_and_is_allowed(tmp_path):
    playbook = gatecmd.load_playbook_for(Namespace(playbook=_book(tmp_path, "{level: 1}")), "health")
    assert [c.spec.name for c in playbook.checks] == ["gpu.dcgm_diag"]


# ---- the Prolog says when the GPUs were read without NVML -----------------------------------------


def _gpu_capture(stdout: str):
    from nodecheck.core.model import Capture, Outcome

    return Capture("gpu017", "gpu", ("sh",), Outcome.EXITED, 0, stdout, "", 0.4)


def _logged(tmp_path, stdout: str) -> list[str]:
    import dataclasses

    log = gatecmd.GateLog(str(tmp_path / "gate.log"), "prolog", "4242")
    rep = dataclasses.replace(report([], names=("gpu017",)), captures=(_gpu_capture(stdout),))
    gatecmd._log_gpu_fallback(rep, log, "gpu017")
    return log.lines


def test_a_prolog_that_read_the_gpus_with_nvidia_smi_says_why_and_the_fix(tmp_path):
    [line] = _logged(tmp_path, "nodecheck-nvml-unavailable: No module named 'pynvml'\n@@nodecheck begin query-gpu\n")
    assert "action=gpu-source node=gpu017 job=4242" in line
    assert 'source="nvidia-smi"' in line
    assert "not NVML (No module named 'pynvml'): install nodecheck[nvml] on the node" in line
    assert (tmp_path / "gate.log").read_text().strip() == line


def test_nvml_answering_logs_nothing(tmp_path):
    assert _logged(tmp_path, '{"schema": 2, "source": "nvml", "gpus": []}') == []


def test_a_check_judged_against_the_other_nodes_is_retried_on_all_of_them(tmp_path, scripted):
    path = tmp_path / "related.yml"
    path.write_text(
        "version: 1\ndeadline_s: 60\nchecks:\n  nccl.allreduce_single:\n"
        "    busbw_gbps: {fail_below: 100, relative: {fail_below_pct: 10}}\n"
    )
    book = load_playbook(str(path))
    stop = threading.Event()
    slow = report([res("nccl.allreduce_single", "gpu001", Status.FAIL, "15.0% below its peers' median")])
    fake = scripted((1.0, slow), (1.0, report([res("nccl.allreduce_single", "gpu001", Status.FAIL, "again")])))
    gated(book, stop)
    # gpu001 alone would have no peers: the retry runs every node, so the band can judge it again
    assert [c["nodes"] for c in fake.calls] == [NAMES, NAMES]


@pytest.mark.parametrize("check", ["gpu.perf", "gpu.sdc"])
def test_a_gate_playbook_refuses_the_gpu_benchmarks(tmp_path, check):
    path = tmp_path / "prolog.yml"
    path.write_text(f"version: 1\nchecks:\n  gpu.health: {{}}\n  {check}: {{}}\n")
    with pytest.raises(ConfigError) as caught:
        gatecmd._refuse_disruptive(load_playbook(str(path)), "prolog")
    assert caught.value.message.startswith(f"{check}: the ") and "not in a prolog playbook" in caught.value.message
    assert "sweep" in caught.value.hint and "acceptance" in caught.value.hint
