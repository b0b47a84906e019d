"""`nodecheck remediate` end to end on this machine: the checks run locally (a pinned kernel that
this node does not have fails kernel.version), Slurm is the fake scontrol of tests/fakes, the plan is
printed and nothing changes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from nodecheck.app.slurm import is_ours
from nodecheck.parsers.slurm import held_for_a_person, reason_body
from nodecheck.remedy import record
from nodecheck.remedy.model import Entry
from tests.fakes import scontrol as fake_scontrol
from tests.helpers import marked_reason

KERNEL = os.uname().release
WRONG_KERNEL = "0.0.0-not-this-kernel"
PIN_MESSAGE = f"kernel {KERNEL} on nodeX, expected {WRONG_KERNEL} (pinned; no node has it)"
OURS = marked_reason(f"kernel.version {PIN_MESSAGE}")
REBOOT_LADDER = """\
ladders:
  - name: wrong-kernel
    check: kernel.version
    steps: [reboot, hold]
    source: a reboot boots the pinned kernel
"""


class Site:
    def __init__(self, root: Path, nodes: dict[str, dict], config: str = "") -> None:
        self.root = root
        (root / "slurm").mkdir()
        self.scontrol = fake_scontrol.install(root / "slurm", nodes)
        self.playbook = root / "pin.yml"
        self.playbook.write_text(
            f'version: 1\ndeadline_s: 60\nchecks:\n  kernel.version: {{expect: "{WRONG_KERNEL}"}}\n'
        )
        self.state_dir = root / "remedy"
        self.log = root / "gate.log"
        self.config = root / "nodecheck.yml"
        self.config.write_text(
            f"log_file: {self.log}\nscontrol: {self.scontrol}\nplaybook: {self.playbook}\n"
            f"remedy:\n  state_dir: {self.state_dir}\n{config}"
        )

    def run(self, *argv: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "SLURMD_NODENAME": "nodeX", "NODECHECK_GATE_CONFIG": str(self.config)}
        return subprocess.run(
            [sys.executable, "-m", "nodecheck", "remediate", *argv],
            env=env,
            cwd=Path(__file__).resolve().parents[2],
            capture_output=True,
            text=True,
            timeout=120,
        )

    def updates(self) -> list[list[str]]:
        return [c["argv"] for c in fake_scontrol.calls(self.root / "slurm") if c["argv"][0] != "show"]

    def log_lines(self) -> list[str]:
        return self.log.read_text(encoding="utf-8").splitlines() if self.log.exists() else []


def drained(reason: str) -> dict:
    return {"state": "IDLE+DRAIN", "reason": reason, "user": "root", "time": "2026-12-07T10:00:00"}


OTHERS = {"node2": {"state": "IDLE", "reason": "", "user": "", "time": ""}}


def row(out: str, node: str) -> list[str]:
    line = next(line for line in out.splitlines() if line.startswith(node + " "))
    return line.split(None, 3)


def test_a_failure_no_ladder_names_is_planned_as_a_hold_and_nothing_changes(tmp_path):
    site = Site(tmp_path, {"nodeX": drained(OURS), **OTHERS})
    proc = site.run("--metrics", str(tmp_path / "remedy.prom"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    prom = (tmp_path / "remedy.prom").read_text()
    assert (
        'nodecheck_remedy_plan_nodes{plan="hold"} 1\n' in prom and 'nodecheck_remedy_plan_nodes{plan="act"} 0\n' in prom
    )
    node, verb, step, why = row(proc.stdout, "nodeX")
    assert (verb, step) == ("hold", "-")
    assert why.startswith(f"needs a person: kernel.version {PIN_MESSAGE[:40]}")
    assert "observe: nothing was changed (no Slurm state, GPU or service)" in proc.stdout
    assert site.updates() == []
    (line,) = site.log_lines()
    assert "nodecheck[remediate] action=would-hold node=nodeX" in line


def test_a_ladder_step_is_planned_and_logged_and_the_record_moves_it_up_the_ladder(tmp_path):
    (tmp_path / "ladders.yml").write_text(REBOOT_LADDER)
    site = Site(tmp_path, {"nodeX": drained(OURS), **OTHERS}, config=f"  ladders: {tmp_path / 'ladders.yml'}\n")
    proc = site.run()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert row(proc.stdout, "nodeX")[1:3] == ["act", "reboot"]
    assert "(ladder wrong-kernel, step 1 of 2)" in proc.stdout
    assert (
        "plan: 1 to act on, 0 to return, 0 held for a person, 0 waiting, 0 left alone; "
        "at most 2 nodes in remediation" in proc.stdout
    )
    (line,) = site.log_lines()
    assert 'action=would-remedy node=nodeX step="reboot" ladder="wrong-kernel"' in line
    # once a reboot is on the node's record, the next step of this incident is a person
    record.append(
        site.state_dir,
        "nodeX",
        [Entry(datetime.now(timezone.utc), "action", "reboot", "", "wrong-kernel", "kernel.version", "done")],
    )
    proc = site.run("--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    (plan,) = doc["nodes"]
    assert (plan["node"], plan["plan"], plan["step"]) == ("nodeX", "hold", None)
    assert plan["why"].endswith("(ladder wrong-kernel; tried reboot)")
    assert plan["failures"][0]["check"] == "kernel.version"
    assert doc["observe"] is True and doc["capacity"] == 2
    assert site.updates() == []


MEMORY = "memory:\n  - {name: drained-often, drains: 3, within_h: 168}\n"


def _drained_in_the_log(site: Site, days_ago: list[float]) -> None:
    """nodecheck's gate log saying it drained nodeX at these times, resumed in between."""
    now = datetime.now(timezone.utc)
    lines = []
    for d in days_ago:
        at = now - timedelta(days=d)
        lines.append(f'{at:%Y-%m-%dT%H:%M:%SZ} nodecheck[prolog] action=drain node=nodeX check="kernel.version"')
        if d > 0.01:
            lines.append(f"{at + timedelta(hours=1):%Y-%m-%dT%H:%M:%SZ} nodecheck[health] action=resume node=nodeX")
    site.log.write_text("\n".join(lines) + "\n")
    os.chmod(site.log, 0o640)


def test_a_node_drained_three_times_in_a_week_is_held_not_rebooted_again(tmp_path):
    (tmp_path / "ladders.yml").write_text(
        REBOOT_LADDER + "memory:\n  - {name: drained-often, drains: 3, within_h: 168}\n"
    )
    site = Site(tmp_path, {"nodeX": drained(OURS), **OTHERS}, config=f"  ladders: {tmp_path / 'ladders.yml'}\n")
    _drained_in_the_log(site, [8, 5, 2])  # the first is older than the week: two drains in it, and this one
    proc = site.run()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert row(proc.stdout, "nodeX")[1:3] == ["act", "reboot"]
    _drained_in_the_log(site, [6, 5, 2, 0])  # now four within 7 days, this one among them
    proc = site.run("--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (plan,) = json.loads(proc.stdout)["nodes"]
    assert plan["plan"] == "hold"
    assert plan["why"].startswith("needs a person: drained 4 times within 7 days (... ")
    assert "memory rule drained-often: 3 or more) and failing again: kernel.version" in plan["why"]
    assert site.updates() == []


def test_a_gate_log_that_is_not_roots_word_is_said_and_its_drains_are_not_counted(tmp_path):
    (tmp_path / "ladders.yml").write_text(
        REBOOT_LADDER + "memory:\n  - {name: drained-often, drains: 3, within_h: 168}\n"
    )
    site = Site(tmp_path, {"nodeX": drained(OURS), **OTHERS}, config=f"  ladders: {tmp_path / 'ladders.yml'}\n")
    _drained_in_the_log(site, [3, 2, 1, 0])
    os.chmod(site.log, 0o666)
    proc = site.run()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert row(proc.stdout, "nodeX")[1:3] == ["act", "reboot"]
    assert (
        f"nodecheck remediate: warning: the gate log {site.log} is not root's word (writable by group and others)"
        in (proc.stdout)
    )


def test_a_node_drained_by_a_person_is_left_alone(tmp_path):
    site = Site(tmp_path, {"nodeX": drained("RMA 4411: replace GPU 5"), **OTHERS})
    proc = site.run("--ladders", str(Path(__file__).parent / "no-such.yml"))
    assert proc.returncode == 64
    assert "ladder file" in proc.stderr and "no-such.yml" in proc.stderr and "not found" in proc.stderr
    proc = site.run()
    assert row(proc.stdout, "nodeX")[1] == "leave"
    assert "drained by someone else (RMA 4411: replace GPU 5)" in proc.stdout
    assert site.updates() == [] and site.log_lines() == []


def test_a_damaged_record_holds_off_the_plan_for_that_node(tmp_path):
    site = Site(tmp_path, {"nodeX": drained(OURS), **OTHERS})
    site.state_dir.mkdir()
    (site.state_dir / "nodeX.jsonl").write_text("garbage\n")
    proc = site.run()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "nodecheck remediate: nodeX: its action record cannot be read, so nothing is planned" in proc.stdout
    assert not any(line.startswith("nodeX ") for line in proc.stdout.splitlines())


def test_slurm_unreadable_plans_nothing_and_exits_3(tmp_path):
    site = Site(tmp_path, {"nodeX": drained(OURS)})
    (tmp_path / "slurm" / "nodes.json").write_text("not json")
    proc = site.run()
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert proc.stdout.startswith("nodecheck remediate: cannot read Slurm's node states (")
    assert proc.stdout.rstrip().endswith("nothing planned")


@pytest.mark.parametrize(
    ("remedy", "message"),
    [
        ("  max_nodes: 0\n", "remedy.max_nodes: Input should be greater than or equal to 1"),
        ("  max_node: 3\n", "unknown key 'remedy.max_node'"),
    ],
)
def test_a_bad_remedy_section_names_the_config_file_and_line(tmp_path, remedy, message):
    site = Site(tmp_path, {"nodeX": drained(OURS)}, config=remedy)
    proc = site.run()
    assert proc.returncode == 64
    assert f"{site.config}:6: {message}" in proc.stderr


HOLD_LADDER = """\
ladders:
  - name: wrong-kernel
    check: kernel.version
    steps: [hold]
"""


def acting_site(tmp_path, ladder: str, nodes: dict | None = None, act: str = "true") -> Site:
    (tmp_path / "ladders.yml").write_text(ladder)
    return Site(
        tmp_path,
        nodes or {"nodeX": drained(OURS), **OTHERS},
        config=f"  ladders: {tmp_path / 'ladders.yml'}\n  act: {act}\n  bug_report_s: 0\n"
        f"output_dir: {tmp_path / 'reports'}\n",
    )


def test_acting_a_hold_sets_an_owned_needs_a_person_reason_with_the_evidence_beside_the_report(tmp_path):
    site = acting_site(tmp_path, HOLD_LADDER)
    proc = site.run()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "observe: nothing was changed" not in proc.stdout
    assert re.search(r"^nodeX: hold: held \(needs a person: kernel\.version ", proc.stdout, re.M), proc.stdout
    ((verb, name, state, reason),) = site.updates()
    assert (verb, name, state) == ("update", "NodeName=nodeX", "State=DRAIN")
    reason = reason.removeprefix("Reason=")
    assert is_ours(reason) and held_for_a_person(reason)
    assert reason_body(reason).startswith(f"kernel.version needs a person: kernel.version {PIN_MESSAGE[:30]}")
    (entry,) = record.load(site.state_dir, "nodeX")
    assert entry.event == "held" and entry.evidence.endswith("_remedy/evidence/nodeX")
    bundle = Path(entry.evidence)
    assert {p.name for p in bundle.iterdir()} == {"dmesg.txt", "manifest.json"}
    assert json.loads((bundle / "manifest.json").read_text())["failures"][0]["check"] == "kernel.version"
    # a held node is held: the next run plans nothing new, and health never resumes it
    proc = site.run()
    assert row(proc.stdout, "nodeX")[1] == "hold" and "already held for a person" in proc.stdout
    assert len(site.updates()) == 1


def test_acting_a_reboot_asks_slurm_with_an_owned_reason_and_waits_for_it(tmp_path):
    site = acting_site(tmp_path, REBOOT_LADDER)
    proc = site.run()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "nodeX: reboot: pending (Slurm reboots it when idle; re-proven after it boots)" in proc.stdout
    mark, (verb, reason, name) = site.updates()
    assert mark[:3] == ["update", "NodeName=nodeX", "State=DRAIN"] and " repairing: reboot " in mark[3]
    assert (verb, name) == ("reboot", "nodeX")
    assert is_ours(reason.removeprefix("reason="))
    assert [(e.action, e.outcome) for e in record.load(site.state_dir, "nodeX")] == [("reboot", "pending")]
    proc = site.run("--observe")
    assert row(proc.stdout, "nodeX")[1] == "wait" and "a reboot is under way (DOWN+DRAIN+REBOOT_ISSUED)" in proc.stdout
    assert "at most 2 nodes in remediation at once (1 under way)" in proc.stdout


def test_observe_wins_over_the_configs_act(tmp_path):
    site = acting_site(tmp_path, HOLD_LADDER)
    proc = site.run("--observe")
    assert proc.returncode == 0
    assert "observe: nothing was changed" in proc.stdout and site.updates() == []
    assert record.load(site.state_dir, "nodeX") == ()


def health(site: Site, *argv: str) -> subprocess.CompletedProcess:
    """`nodecheck health` as slurmd runs it (HealthCheckProgram): a bare environment."""
    env = {"SLURMD_NODENAME": "nodeX", "NODECHECK_GATE_CONFIG": str(site.config)}
    return subprocess.run(
        [sys.executable, "-m", "nodecheck", "health", *argv],
        env=env,
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_health_drains_then_its_repair_pass_acts_on_the_same_report(tmp_path):
    site = acting_site(tmp_path, HOLD_LADDER, nodes={"nodeX": {"state": "IDLE", "reason": "", "user": "", "time": ""}})
    proc = health(site)
    assert proc.returncode == 2, proc.stdout + proc.stderr  # the health check's own exit: a failure
    line = proc.stdout.strip()
    assert line.startswith(
        f"nodecheck health nodeX: FAIL kernel.version: {PIN_MESSAGE}; drain nodeX; repair: nodeX hold held"
    )
    drain, hold = site.updates()
    assert drain[3] == f"Reason={OURS}"  # the gate's drain first
    assert held_for_a_person(hold[3].removeprefix("Reason="))
    assert [e.event for e in record.load(site.state_dir, "nodeX")] == ["held"]
    events = [line.split(" action=")[1].split(" ")[0] for line in site.log_lines()]
    assert events == ["drain", "evidence", "hold"]


def test_health_observes_by_default_and_does_nothing_without_a_remedy_section(tmp_path):
    site = acting_site(
        tmp_path, HOLD_LADDER, nodes={"nodeX": {"state": "IDLE", "reason": "", "user": "", "time": ""}}, act="false"
    )
    proc = health(site)
    assert "; drain nodeX; repair (observe): would hold nodeX (report " in proc.stdout
    assert len(site.updates()) == 1 and record.load(site.state_dir, "nodeX") == ()
    assert [line.split(" action=")[1].split(" ")[0] for line in site.log_lines()] == ["drain", "would-hold"]
    # no remedy: section at all: the gate's health run alone
    site.config.write_text(site.config.read_text().split("remedy:")[0] + f"output_dir: {tmp_path / 'reports'}\n")
    proc = health(site)
    assert "repair" not in proc.stdout and len(site.updates()) == 1


def test_a_bad_ladder_file_after_the_health_run_drained_says_so_and_repairs_nothing(tmp_path):
    site = acting_site(
        tmp_path,
        "ladders:\n  - {name: a, check: kernel.versionn, steps: [hold]}\n",
        nodes={"nodeX": {"state": "IDLE", "reason": "", "user": "", "time": ""}},
    )
    proc = health(site)
    line = proc.stdout.strip()
    assert "; drain nodeX; repair: CONFIG ERROR, nothing repaired: " in line, line
    assert "unknown check 'kernel.versionn'" in line
    assert len(site.updates()) == 1  # the gate's drain stands
