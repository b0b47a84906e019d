"""Running `nodecheck run` on the simulated cluster the way an operator does, for the integration
tests: a playbook written into the test's tmp dir, JSON on stdout, the report in tmp."""

from __future__ import annotations

import json
import subprocess
import sys
import time


def nodecheck(*args, timeout=240, env=None):
    """(exit code, stdout, stderr, wall seconds) of `python -m nodecheck ARGS` (env: the whole environment)."""
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "nodecheck", *args], capture_output=True, text=True, timeout=timeout, env=env
    )
    return proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started


def run_checks(cluster, tmp_path, checks: str, nodes: str, *extra, deadline_s: float | None = None):
    """`checks`: the playbook's indented `checks:` block. Returns (exit code, report, wall)."""
    head = "version: 1\n" + (f"deadline_s: {deadline_s:g}\n" if deadline_s else "")
    (tmp_path / "book.yml").write_text(head + "checks:\n" + checks)
    code, out, err, wall = nodecheck(
        "run",
        str(cluster.inventory_path),
        "--playbook",
        str(tmp_path / "book.yml"),
        "--nodes",
        nodes,
        "--format",
        "json",
        "--output-dir",
        str(tmp_path / "reports"),
        *extra,
    )
    assert code != 64, err
    return code, json.loads(out), wall


def results(doc, check: str) -> dict[str, list[tuple[str, str]]]:
    """{node: [(status, message)]} of one check."""
    return {n["node"]: [(r["status"], r["message"]) for r in n["results"] if r["check"] == check] for n in doc["nodes"]}
