"""Issue 32, 2.1: on the node itself (the node Prolog, local health) a tool that hangs past its own
timeout is the node's fault and drains by default; a playbook may say otherwise (gate.drain_on).
The real CLI as slurmd runs it (a bare environment), a fake scontrol (tests/fakes/scontrol.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.fakes import scontrol as fake_scontrol

REPO = Path(__file__).resolve().parents[2]
HANGS = "  command.site_ready:\n    sh: 'sleep 60'\n    shell: true\n    timeout_s: 1\n"


def _site(tmp_path: Path, gate: str) -> dict[str, str]:
    book = tmp_path / "book.yml"
    book.write_text(f"version: 1\ndeadline_s: 30\ngate: {{settle_s: 0{gate}}}\nchecks:\n{HANGS}", encoding="utf-8")
    return fake_scontrol.gate_site(tmp_path, book)


def _run(command: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "nodecheck", command], env=env, cwd=REPO, capture_output=True, text=True, timeout=120
    )


def _state(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "slurm" / "nodes.json").read_text(encoding="utf-8"))["nodeX"]


def test_the_node_prolog_drains_a_node_whose_tool_hangs_past_its_timeout(tmp_path):
    proc = _run("prolog", _site(tmp_path, ""))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.startswith(
        "nodecheck prolog nodeX job 7: TIMEOUT command.site_ready: command:site_ready probe timed out: "
        "no answer within 1 s; killed; drained (report "
    ), proc.stdout
    state = _state(tmp_path)
    assert state["state"] == "IDLE+DRAIN"
    assert "command.site_ready command:site_ready probe timed out: no answer within 1 s" in state["reason"], state


def test_local_health_drains_it_too(tmp_path):
    proc = _run("health", _site(tmp_path, ""))
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert _state(tmp_path)["state"] == "IDLE+DRAIN", proc.stdout + proc.stderr


def test_a_playbook_that_drains_on_fail_only_keeps_the_old_rule(tmp_path):
    proc = _run("prolog", _site(tmp_path, ", drain_on: [fail]"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "COULD NOT JUDGE command.site_ready (timeout)" in proc.stdout
    assert "not drained: it drains on fail only; the job may start" in proc.stdout
    assert _state(tmp_path)["state"] == "IDLE"


def test_help_docs_and_the_code_say_the_same_about_what_drains():
    """Issue 32, 2.1: docs/slurm-gate.md, docs/custom-checks.md and `--help` agree with the defaults."""
    from nodecheck.gate.decide import LOCAL_DRAIN_ON, REMOTE_DRAIN_ON

    local, remote = ",".join(LOCAL_DRAIN_ON), ",".join(REMOTE_DRAIN_ON)
    for command in ("prolog", "health", "sweep"):
        said = subprocess.run(
            [sys.executable, "-m", "nodecheck", command, "--help"], capture_output=True, text=True, check=True
        ).stdout
        said = " ".join(said.split())
        assert f"else {local} on the node itself" in said and f"and {remote} over SSH" in said, (command, said)
    for doc in ("docs/slurm-gate.md", "docs/custom-checks.md"):
        text = " ".join((REPO / doc).read_text(encoding="utf-8").split())
        assert f"[{', '.join(LOCAL_DRAIN_ON)}]" in text and f"[{', '.join(REMOTE_DRAIN_ON)}]" in text, doc
        assert "drain_on: [fail, timeout, unreachable]" not in text, doc  # the old, wrong claim
