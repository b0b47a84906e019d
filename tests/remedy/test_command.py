"""`nodecheck remediate` end to end on this machine: the checks run locally (a pinned kernel that
this node does not have fails kernel.version), Slurm is the fake scontrol of tests/fakes, the plan is
printed and nothing changes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

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
    proc = site.run()
    assert proc.returncode == 0, proc.stdout + proc.stderr
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
        "plan: 1 to act on, 0 held for a person, 0 waiting, 0 left alone; at most 2 nodes in remediation" in proc.stdout
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
    assert "nodecheck remediate: nodeX: its action record cannot be read, so nothing is planned for it" in proc.stdout
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
