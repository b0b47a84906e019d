"""`nodecheck sweep --slurm-submit` against fake scontrol/sbatch on PATH: which nodes the job gets,
the sbatch it runs, the private batch script, hostile Slurm output; and the job's side: the nodes
it did not get are SKIPPED "not tested: busy", never healthy in the report, history, diff, metrics."""

from __future__ import annotations

import json
import os
import stat
import sys
from argparse import Namespace
from datetime import timedelta
from pathlib import Path

import pytest

from nodecheck import cli
from nodecheck.app.slurm import Slurm, SlurmError
from nodecheck.core.errors import ConfigError
from nodecheck.core.model import Status
from nodecheck.fleet import submit
from nodecheck.fleet.history import History
from nodecheck.parsers.slurm import NodeState, parse_reservation_nodes, parse_sbatch_parsable
from nodecheck.report import EXIT_UNKNOWN, metrics
from nodecheck.report import diff as D
from tests.fakes.scontrol import block
from tests.report.test_diff import T0, r, report

BOOK = "version: 1\nchecks:\n  ib.ports: {timeout_s: 2, expected_ports: 8, min_rate_gbps: 400}\n"
STATES = {
    "node1": "IDLE",
    "node2": "MIXED",
    "node3": "ALLOCATED",
    "node4": "IDLE+DRAIN",
    "node5": "DOWN+NOT_RESPONDING",
    "node6": "IDLE",
    "node7": "IDLE+RESERVED",
    "node8": "IDLE",
}


def state(name: str, text: str) -> NodeState:
    return NodeState(name, text, frozenset(w.rstrip("*") for w in text.split("+")), "")


class FakeSlurm:
    """scontrol (show node / show reservation) and sbatch on PATH: they print the files the test
    writes and log their argv; sbatch keeps the batch script it was given."""

    def __init__(self, root: Path) -> None:
        self.bin = root / "bin"
        self.bin.mkdir()
        log = self.bin / "argv.log"
        for tool in ("scontrol", "sbatch"):
            script = self.bin / tool
            script.write_text(
                f"#!{sys.executable}\n"
                "import json, os, shutil, sys\n"
                "here = os.path.dirname(os.path.abspath(__file__))\n"
                f"open({str(log)!r}, 'a').write(json.dumps([{tool!r}, *sys.argv[1:]]) + '\\n')\n"
                f"if {tool!r} == 'sbatch':\n"
                "    shutil.copy(sys.argv[-1], os.path.join(here, 'script.copy'))\n"
                "    shutil.copymode(sys.argv[-1], os.path.join(here, 'script.copy'))\n"
                f"kind = '.' + sys.argv[2] if {tool!r} == 'scontrol' else ''\n"
                f"name = os.path.join(here, {tool!r} + kind + '.out')\n"
                "data = open(name, 'rb').read() if os.path.exists(name) else b''\n"
                "sys.stdout.buffer.write(data); sys.stdout.flush()\n"
                "rc = os.path.join(here, 'rc')\n"
                "sys.exit(int(open(rc).read()) if os.path.exists(rc) else 0)\n"
            )
            script.chmod(script.stat().st_mode | stat.S_IXUSR)
        self.log = log
        self.nodes({})
        self.set("sbatch.out", "4242\n")

    def set(self, name: str, text: str | bytes) -> None:
        (self.bin / name).write_bytes(text.encode() if isinstance(text, str) else text)

    def nodes(self, states: dict[str, str]) -> None:
        self.set("scontrol.node.out", "\n".join(block(n, {"state": s, "reason": ""}) for n, s in states.items()))

    def calls(self, tool: str) -> list[list[str]]:
        if not self.log.exists():
            return []
        return [c[1:] for c in map(json.loads, self.log.read_text().splitlines()) if c[0] == tool]


@pytest.fixture
def fake(tmp_path, monkeypatch):
    f = FakeSlurm(tmp_path)
    monkeypatch.setenv("PATH", f"{f.bin}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.setenv("NODECHECK_GATE_CONFIG", str(tmp_path / "no-gate.yml"))
    (tmp_path / "no-gate.yml").write_text("{}\n")
    (tmp_path / "hosts.yml").write_text("nodes:\n  node[1-8]:\n    address: 127.0.1.[1-8]\n")
    (tmp_path / "book.yml").write_text(BOOK)
    monkeypatch.chdir(tmp_path)
    return f


def sweep(tmp_path, *more: str) -> int:
    return cli.main(
        ["sweep", "hosts.yml", "--playbook", "book.yml", "--output-dir", "reports", "--slurm-submit", *more]
    )


# ---------------------------------------------------------------- pure: who gets tested


def test_only_idle_nodes_are_taken_and_every_other_one_says_why():
    usable, skipped = submit.classify(list(STATES), {n: state(n, s) for n, s in STATES.items() if n != "node8"})
    assert usable == ["node1", "node6"]
    assert skipped == {
        "node2": "not tested: busy (MIXED)",
        "node3": "not tested: busy (ALLOCATED)",
        "node4": "not tested: down (IDLE+DRAIN)",
        "node5": "not tested: down (DOWN+NOT_RESPONDING)",
        "node7": "not tested: busy (IDLE+RESERVED)",  # someone else's reservation
        "node8": "not tested: unknown to Slurm (scontrol show node does not list it)",
    }


def test_with_a_reservation_only_its_nodes_that_run_nothing_are_taken():
    states = {n: state(n, s) for n, s in STATES.items()} | {"node6": state("node6", "ALLOCATED+RESERVED")}
    usable, skipped = submit.classify(list(STATES), states, reserved=["node6", "node7", "node4"])
    assert usable == ["node7"]
    assert skipped["node1"] == "not tested: busy (IDLE; not in the sweep's reservation)"
    assert skipped["node6"] == "not tested: busy (ALLOCATED+RESERVED)"
    assert skipped["node4"] == "not tested: down (IDLE+DRAIN)"  # drained inside the reservation: still down


def test_reservation_and_sbatch_parsers():
    line = "ReservationName=maint StartTime=2026-12-06T12:00:00 Nodes=node[1-3,7] NodeCnt=4 Flags=MAINT,IGNORE_JOBS"
    assert parse_reservation_nodes(line + "\n", "maint") == ("node1", "node2", "node3", "node7")
    with pytest.raises(Exception, match="asked for reservation 'maint', got 'other'"):
        parse_reservation_nodes(line.replace("=maint", "=other"), "maint")
    with pytest.raises(Exception, match="2 lines"):
        parse_reservation_nodes(line + "\n" + line, "maint")
    assert parse_sbatch_parsable("4242;cluster1\n") == "4242"
    for bad in ("", "Submitted batch job 4242", "4242\n4243", "42\x1b[2J"):
        with pytest.raises(Exception, match="job id"):
            parse_sbatch_parsable(bad)


# ---------------------------------------------------------------- the submission


def test_submit_runs_one_exclusive_sbatch_on_the_idle_nodes_with_a_private_script(tmp_path, fake, capsys):
    fake.nodes(STATES)
    code = sweep(tmp_path, "--partition", "gpu", "--time", "1:00:00", "--allow-disruptive", "--offender", "2/4")
    out, err = capsys.readouterr()
    assert code == 0, err
    [argv] = fake.calls("sbatch")
    state_dir = Path(argv[-1]).parent
    assert argv[:-1] == [
        "--parsable",
        "--exclusive",
        "--partition=gpu",
        "--time=1:00:00",
        "--nodelist=node1,node6,node8",
        "--nodes=3",
        "--no-kill",
        "--job-name=nodecheck-sweep",
        f"--output={state_dir}/slurm-%j.out",
    ]
    assert fake.calls("scontrol") == [["show", "node", "node1,node2,node3,node4,node5,node6,node7,node8"]]
    assert "submitted sweep job 4242 on node[1,6,8] (3 nodes; 5 not tested)" in out
    assert "node[2-3]: not tested: busy" not in err and "node3: not tested: busy (ALLOCATED)" in err
    assert stat.S_IMODE(state_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(Path(argv[-1]).stat().st_mode) == 0o700
    assert stat.S_IMODE((state_dir / "skipped.json").stat().st_mode) == 0o600
    script = (fake.bin / "script.copy").read_text()
    inv, book = tmp_path / "hosts.yml", tmp_path / "book.yml"
    assert f"cd {tmp_path} || exit 3\n" in script
    line = next(x for x in script.splitlines() if "-m nodecheck sweep" in x)
    assert line.startswith(f"{sys.executable} -m nodecheck sweep {inv} ")
    assert f"--playbook {book}" in line and f"--output-dir {tmp_path / 'reports'}" in line
    assert "--allow-disruptive" in line and "--offender 2/4" in line
    assert line.endswith(f'--slurm-job "$SLURM_JOB_ID" --slurm-skipped {state_dir}/skipped.json')
    for own in ("--slurm-submit", "--partition", "--time", "--wait"):
        assert own not in line
    skipped = json.loads((state_dir / "skipped.json").read_text())
    assert set(skipped) == {"node2", "node3", "node4", "node5", "node7"}
    # the child's command line parses as a sweep (the same parser): nothing the submission added is lost
    child = cli.build_parser().parse_args(line.split()[3:-4])
    assert (child.allow_disruptive, child.offender, child.slurm_submit) == (True, "2/4", False)


def test_no_idle_node_submits_nothing_and_exits_3(tmp_path, fake, capsys):
    fake.nodes(dict.fromkeys(STATES, "ALLOCATED"))
    assert sweep(tmp_path) == EXIT_UNKNOWN
    err = capsys.readouterr().err
    assert "node[1-8]: not tested: busy (ALLOCATED)" in err and "nothing submitted" in err
    assert fake.calls("sbatch") == []


def test_the_config_file_gives_the_slurm_options_and_the_flags_win(tmp_path, fake):
    fake.nodes(STATES)
    (tmp_path / "no-gate.yml").write_text("sweep:\n  slurm: {partition: maint, account: ops, qos: high}\n")
    assert sweep(tmp_path, "--account", "infra") == 0
    [argv] = fake.calls("sbatch")
    assert [a for a in argv if a.startswith(("--partition", "--account", "--qos"))] == [
        "--partition=maint",
        "--account=infra",
        "--qos=high",
    ]
    (tmp_path / "no-gate.yml").write_text("sweep:\n  slurm: {partition: 'a b'}\n")
    assert sweep(tmp_path) == 64


def test_with_a_reservation_the_reservations_idle_nodes_are_submitted_into_it(tmp_path, fake):
    fake.nodes(STATES)
    fake.set("scontrol.reservation.out", "ReservationName=maint Nodes=node[6-7] Flags=MAINT,IGNORE_JOBS\n")
    assert sweep(tmp_path, "--reservation", "maint") == 0
    assert fake.calls("scontrol")[1] == ["show", "reservation", "-o", "maint"]
    [argv] = fake.calls("sbatch")
    assert "--reservation=maint" in argv and "--nodelist=node6,node7" in argv and "--nodes=2" in argv


@pytest.mark.parametrize(
    "output, words",
    [
        (b"x" * (64 * 1024 * 8 + 10), "more than 524288 bytes of output"),
        (b"garbage that is not scontrol\n", "expected a line like NodeName="),
        (b"NodeName=node1 Arch=x\n   State=IDLE\nNodeName=node\x1b[2J2\n   State=IDLE\n", "in NodeName=node\\x1b[2J2"),
        (b"NodeName=node1 Arch=x\n   State=IDLE\nNodeName=intruder\n   State=IDLE\n", "1 node(s) not asked for"),
        (b"NodeName=node1 Arch=x\n   State=IDLE\n   State=ALLOCATED\n", "two State= fields"),
        (b"NodeName=node1\n   State=IDLE\x0bALLOCATED\n", "control characters in    State=IDLE\\x0bALLOCATED"),
        (b"NodeName=node1\n   State=idle;rm -rf\n", "is not a Slurm state"),
    ],
)
def test_hostile_scontrol_output_is_a_clear_error_and_nothing_is_submitted(tmp_path, fake, capsys, output, words):
    fake.set("scontrol.node.out", output)
    assert sweep(tmp_path) == 64
    err = capsys.readouterr().err
    assert "cannot read the nodes' states from Slurm" in err and words in err
    assert fake.calls("sbatch") == []


def test_scontrol_or_sbatch_failing_is_bad_input_with_slurms_words(tmp_path, fake, capsys):
    fake.nodes(STATES)
    fake.set("sbatch.out", "Submitted batch job 4242\n")  # not --parsable's form
    assert sweep(tmp_path) == 64
    assert "sbatch refused the sweep" in capsys.readouterr().err
    fake.set("rc", "1")
    fake.set("scontrol.node.out", "slurm_load_node error: Unable to contact slurm controller\n")
    assert sweep(tmp_path) == 64
    assert "Unable to contact slurm controller" in capsys.readouterr().err


def test_a_hanging_scontrol_is_killed_at_its_timeout(tmp_path):
    hang = tmp_path / "scontrol"
    hang.write_text("#!/bin/sh\nexec sleep 30\n")
    hang.chmod(0o755)
    with pytest.raises(SlurmError, match=r"no answer within 0\.5 s"):
        Slurm(scontrol=str(hang), timeout_s=0.5).node_states(["node1"])


def test_names_that_are_not_one_node_never_reach_scontrol(tmp_path):
    with pytest.raises(SlurmError, match="not one node name"):
        Slurm(scontrol=str(tmp_path / "none")).node_states(["node1", "node[2-3]"])
    with pytest.raises(SlurmError, match="not a Slurm reservation name"):
        Slurm(scontrol=str(tmp_path / "none")).reservation_nodes("maint\nx")


def test_submit_refuses_a_job_of_its_own_and_bad_flags(tmp_path, fake, capsys):
    assert sweep(tmp_path, "--slurm-job", "12") == 64
    assert sweep(tmp_path, "--partition", "gpu;reboot") == 64
    assert sweep(tmp_path, "--time", "forever") == 64
    err = capsys.readouterr().err
    assert "give no --slurm-job" in err and "not a Slurm name" in err and "not a Slurm time limit" in err


# ---------------------------------------------------------------- --wait


class Jobs:
    def __init__(self, states):
        self.states = list(states)

    def job(self, job_id):
        s = self.states.pop(0)
        if isinstance(s, Exception):
            raise s
        return Namespace(ended=s in ("COMPLETED", "FAILED", "CANCELLED"))


def test_wait_returns_the_sweeps_exit_code_from_the_state_dir(tmp_path):
    (tmp_path / "exit_code").write_text("2\n")
    assert submit.wait_for(Jobs(["PENDING", "RUNNING", "COMPLETED"]), "7", tmp_path, poll_s=0) == 2


def test_wait_without_an_exit_code_or_a_job_is_could_not_judge(tmp_path, capsys):
    assert submit.wait_for(Jobs(["CANCELLED"]), "7", tmp_path, poll_s=0) == EXIT_UNKNOWN
    assert submit.wait_for(Jobs([SlurmError("x")] * 5), "7", tmp_path, poll_s=0) == EXIT_UNKNOWN
    (tmp_path / "exit_code").write_text("0; rm -rf /\n")
    assert submit.wait_for(Jobs([SlurmError("Invalid job id")]), "7", tmp_path, poll_s=0) == EXIT_UNKNOWN
    err = capsys.readouterr().err
    assert "ended without the sweep's exit code" in err and "cannot follow job 7" in err


# ---------------------------------------------------------------- the job's side


def test_nodes_outside_the_allocation_are_skipped_busy_with_the_recorded_state(tmp_path, monkeypatch):
    from nodecheck.config.playbook import load_playbook

    (tmp_path / "hosts.yml").write_text("nodes:\n  node[1-4]:\n")
    (tmp_path / "book.yml").write_text(BOOK)
    (tmp_path / "skipped.json").write_text(json.dumps({"node3": "not tested: down (DOWN)", "node4": "\x1b[2J evil"}))
    playbook = load_playbook(str(tmp_path / "book.yml"), ())
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    from nodecheck.app.targets import JobTarget

    job = JobTarget("7", ("node1", "node2"), None)  # what app.targets.reach resolved
    args = Namespace(job_target=job, local=False, nodes=None, inventory=str(tmp_path / "hosts.yml"), slurm_skipped=None)
    ran = [Namespace(name="node1"), Namespace(name="node2")]
    args.slurm_skipped = str(tmp_path / "skipped.json")
    assert submit.not_tested(args, playbook, ran) == {
        "node3": "not tested: down (DOWN)",
        "node4": submit.UNREADABLE,  # what the file says that we never write is not printed
    }
    (tmp_path / "skipped.json").write_text(json.dumps({"node3": "not tested: down (DOWN)"}))
    assert submit.not_tested(args, playbook, ran) == {"node3": "not tested: down (DOWN)"}  # node4: not asked
    args.slurm_skipped = None  # --slurm-job by hand: every inventory node outside the job
    assert submit.not_tested(args, playbook, ran) == dict.fromkeys(["node3", "node4"], submit.NOT_IN_ALLOCATION)
    args.slurm_skipped = str(tmp_path / "skipped.json")
    args.job_target = None
    assert submit.not_tested(args, playbook, ran) == {}  # no job: the sweep ran on the inventory itself
    (tmp_path / "skipped.json").write_text("[1, 2]")
    args.job_target = job
    with pytest.raises(ConfigError, match="not a mapping"):
        submit.not_tested(args, playbook, ran)


def test_a_busy_node_is_never_healthy_in_the_report_history_diff_or_metrics(tmp_path):
    P, F = Status.PASS, Status.FAIL
    before = report("s1", T0, ["node1", "node2"], [r("node1", "ib.ports", P, "ok"), r("node2", "ib.ports", F, "Down")])
    now = report("s2", T0 + timedelta(hours=1), ["node1"], [r("node1", "ib.ports", P, "ok")])
    now = submit.with_skipped(now, ["ib.ports"], {"node2": submit.NOT_IN_ALLOCATION}, {})
    assert now.node_names == ["node1", "node2"]
    assert now.node_status("node2") is Status.SKIPPED and not Status.SKIPPED.healthy
    assert now.exit_code == EXIT_UNKNOWN  # a sweep that left nodes untested is not a clean bill of health
    [row] = [x for x in now.results if x.nodes == ("node2",)]
    assert row.verdict.message == "not tested: busy (not in this sweep's allocation)"
    with History.open(tmp_path / "h.sqlite") as h:
        h.record(D.snapshot(before), None)
        snap = D.snapshot(now)
        changes = D.diff(h.baseline("sweep", snap), snap)
        h.record(snap, None)
        rows = h.node_sweeps("sweep", 5)
    # node2 failed before and was not tested now: neither recovered nor counted as a pass
    assert changes.recovered == () and changes.newly_failing == ()
    assert [(f.node, f.check, f.status) for f in changes.not_checked] == [("node2", "ib.ports", F)]
    text = metrics.render(snap, [], problems=0)
    assert 'nodecheck_node_healthy{node="node2"} 0' in text
    assert 'nodecheck_check_status{check="ib.ports",node="node2"} 2' in text or (
        'nodecheck_check_status{node="node2",check="ib.ports"} 2' in text
    )
    assert [x.status for x in rows if x.node == "node2"] == [F, Status.SKIPPED]


def test_the_config_may_name_the_interpreter_the_job_runs(tmp_path, fake, capsys):
    fake.nodes(STATES)
    (tmp_path / "no-gate.yml").write_text("sweep:\n  slurm: {python: /opt/nodecheck/bin/python}\n")
    assert sweep(tmp_path) == 0
    assert "\n/opt/nodecheck/bin/python -m nodecheck sweep " in (fake.bin / "script.copy").read_text()
    (tmp_path / "no-gate.yml").write_text("sweep:\n  slurm: {python: bin/python}\n")
    assert sweep(tmp_path) == 64
    assert "python" in capsys.readouterr().err


def test_submission_flags_without_slurm_submit_are_bad_input(tmp_path, fake, capsys):
    code = cli.main(["sweep", "hosts.yml", "--playbook", "book.yml", "--wait", "--partition", "gpu"])
    assert code == 64 and "--wait, --partition: only with --slurm-submit" in capsys.readouterr().err
    assert fake.calls("scontrol") == fake.calls("sbatch") == []
