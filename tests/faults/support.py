"""What every fault test asserts, in one place: the real CLI as a child process, its JSON report
(stdout and the stored report.json agree, every node present, complete or explicitly partial), no
crash (no traceback, a documented exit code), and nothing left behind on the nodes (no process in
the node's namespace but its sshd, no nodecheck temp dir in /tmp, which the nodes share)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from harness.scenarios import IBSTAT_HEALTHY

DATA = Path(__file__).resolve().parents[1] / "data"
HEALTHY = DATA / IBSTAT_HEALTHY
EXIT_CODES = {0, 1, 2, 3}  # README "Exit codes": pass, warn, fail, could not judge
# what nodecheck creates in a node's /tmp (pair tests, reachability listeners, nccl-tests runs,
# the write test); the harness's and run_all.sh's own dirs are not nodecheck's leftovers
_TEMP = re.compile(r"^\.?nodecheck-(?!test\.|demo\.|bench|harness)")
# a remote command ends at its timeout + REMOTE_KILL_GRACE_S (5) + timeout's -k 2: the backstop
# for a tool the client gave up on (nodecheck/transport/__init__.py)
REMOTE_BACKSTOP_S = 7


def book(timeout_s: float = 2, deadline_s: float = 30, extra: str = "") -> str:
    return (
        "version: 1\n"
        f"deadline_s: {deadline_s:g}\n"
        "checks:\n"
        f"  ib.ports: {{timeout_s: {timeout_s:g}, expected_ports: 8, min_rate_gbps: 400}}\n" + extra
    )


@dataclass
class Outcome:
    code: int
    doc: dict  # the JSON report on stdout
    stored: dict | None  # report.json in the report dir, None if none was written
    err: str
    wall: float

    def status(self, node: str) -> str:
        return self.by_node[node]["status"]

    @property
    def by_node(self) -> dict[str, dict]:
        return {n["node"]: n for n in self.doc["nodes"]}

    def messages(self, node: str) -> list[tuple[str, str]]:
        return [(r["status"], r["message"]) for r in self.by_node[node]["results"]]

    def capture(self, node: str, probe: str) -> dict:
        [c] = [c for c in self.doc["captures"] if (c["node"], c["probe"]) == (node, probe)]
        return c


def command(
    cluster,
    tmp_path: Path,
    nodes: str,
    *extra: str,
    playbook: str | None = None,
    inventory: Path | None = None,
    out: Path | None = None,
) -> list[str]:
    (tmp_path / "book.yml").write_text(playbook or book())
    return [
        sys.executable,
        "-m",
        "nodecheck",
        "run",
        str(inventory or cluster.inventory_path),
        "--playbook",
        str(tmp_path / "book.yml"),
        "--nodes",
        nodes,
        "--format",
        "json",
        "--output-dir",
        str(out or tmp_path / "reports"),
        *extra,
    ]


def run(cluster, tmp_path: Path, nodes: str, *extra: str, timeout: float = 120, env=None, **kw) -> Outcome:
    started = time.monotonic()
    proc = subprocess.run(
        command(cluster, tmp_path, nodes, *extra, **kw), capture_output=True, text=True, timeout=timeout, env=env
    )
    return outcome(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started, tmp_path, kw.get("out"))


def outcome(code: int, out: str, err: str, wall: float, tmp_path: Path, out_dir: Path | None = None) -> Outcome:
    assert_no_crash(code, err)
    doc = json.loads(out)
    reports = (
        list((out_dir or tmp_path / "reports").glob("*/report.json"))
        if (out_dir or tmp_path / "reports").is_dir()
        else []
    )
    stored = json.loads(reports[0].read_text()) if len(reports) == 1 else None
    return Outcome(code, doc, stored, err, wall)


def assert_no_crash(code: int, err: str) -> None:
    assert "Traceback (most recent call last)" not in err, err
    assert code in EXIT_CODES, f"exit {code}: {err}"


def assert_report(o: Outcome, nodes: list[str], complete: bool, reason: str = "") -> None:
    """Every node in the report, complete or explicitly partial (with the reason), and the stored
    report.json says the same as stdout."""
    assert [n["node"] for n in o.doc["nodes"]] == nodes
    assert all(n["results"] for n in o.doc["nodes"]), "a node without a result"
    assert o.doc["complete"] is complete, o.doc.get("incomplete_reason")
    if not complete:
        assert o.doc["incomplete_reason"] == reason, [(n["node"], n["results"][0]["message"]) for n in o.doc["nodes"]]
    assert o.stored is not None, f"no report.json was written: {o.err}"
    assert (o.stored["complete"], [n["node"] for n in o.stored["nodes"]]) == (complete, nodes)
    assert [n["status"] for n in o.stored["nodes"]] == [n["status"] for n in o.doc["nodes"]]


def temp_entries() -> set[str]:
    return {p.name for p in Path("/tmp").iterdir() if _TEMP.match(p.name)}


def assert_nothing_left(cluster, nodes: list[str], before: set[str], within: float = 3.0) -> None:
    """Within `within` seconds: no process on the nodes but their sshd, no new nodecheck temp
    entry in /tmp (another engineer's or test's transient entries are given the same time to go)."""
    end = time.monotonic() + within
    while True:
        procs = {n: cluster.node_processes(n) for n in nodes}
        temps = temp_entries() - before
        if not any(procs.values()) and not temps:
            return
        if time.monotonic() >= end:
            break
        time.sleep(0.25)
    assert not any(procs.values()), f"processes left on the nodes: {procs}"
    assert not temps, f"temp files left in /tmp: {sorted(temps)}"


def start(cluster, tmp_path: Path, nodes: str, *extra: str, **kw) -> subprocess.Popen:
    """The CLI in the background, for faults injected while it runs."""
    return subprocess.Popen(
        command(cluster, tmp_path, nodes, *extra, **kw), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def finish(proc: subprocess.Popen, tmp_path: Path, started: float, timeout: float = 60) -> Outcome:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"nodecheck did not finish within {timeout} s: {err[-2000:]}") from None
    return outcome(proc.returncode, out, err, time.monotonic() - started, tmp_path)


def wait_for(path: Path, timeout: float = 20) -> None:
    end = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < end, f"{path} never appeared"
        time.sleep(0.05)
