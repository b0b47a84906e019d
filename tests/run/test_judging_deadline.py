"""Judging inside the run's deadline (issue 32, 1.8): `nodecheck run` whose command check has a pattern
that backtracks ends near its deadline with that check not judged (ERROR), instead of running for
hours after the probes (Python's re cannot be interrupted)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOK = """version: 1
deadline_s: 3
checks:
  command.backtracks:
    argv: [printf, 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!\\n']
    match: '^(a|aa)+$'
"""


def test_a_run_whose_pattern_backtracks_ends_near_its_deadline_and_says_not_judged(tmp_path):
    book = tmp_path / "book.yml"
    book.write_text(PLAYBOOK)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "nodecheck", "run", "--local", "--playbook", str(book), "--format", "json",
         "--output-dir", str(tmp_path / "reports")],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    took = time.monotonic() - started
    assert done.returncode == 3, done.stderr[-2000:]
    [node] = json.loads(done.stdout)["nodes"]
    [result] = [r for r in node["results"] if r["check"] == "command.backtracks"]
    assert result["status"] == "error"
    assert "the match pattern did not finish within" in result["message"]
    assert took < 60, took  # the deadline (3 s) and start-up; without the bound: hours
