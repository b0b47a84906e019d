"""Report rendering at fleet scale (issue 22): every node with the passive `prolog` playbook's results,
drift groups among them, and the report directory as `nodecheck run` writes it. Pure CPU and local
disk, no cluster: the node's answers are benchmarks/data/prolog-node.json (one simulated 8x H100 node,
recorded by record_prolog_node.sh), replayed for every node by a transport that answers at once, so
the runner's judging and the fleet (drift) checks run as in a real run. A minority of nodes (--drift,
default 1%) has another NCCL and another kernel: two drift checks with a minority group.

Timed, one process per size (peak RSS is the process's): "run" (runner.run over the replay: probes
collected, every check judged, drift), "to_dict", "json" (dumps), "table", "junit", "summary"
(table.render of the summary the report dir keeps), "store" (report.store: report.json, summary.txt,
every capture, each fsynced, renamed into place), "loads" (JSON back into a Report).

    .venv/bin/python benchmarks/bench_report.py [--nodes 16000] [--drift 0.01] [--dir /tmp/x]
    (the older synthetic form, 7 drift checks and no node results: --synthetic [--fleet-checks 7])
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from nodecheck.core.model import Capture, CheckResult, Evidence, Node, Outcome, Status, Verdict
from nodecheck.report import Report, junit, table
from nodecheck.report import json as report_json
from nodecheck.report.store import store

ROOT = Path(__file__).resolve().parents[1]
RECORDED = ROOT / "benchmarks" / "data" / "prolog-node.json"
sys.path.insert(0, str(ROOT / "tests"))


def synthetic(n: int, checks: int) -> Report:
    nodes = [f"gpu{i:05d}" for i in range(n)]
    results = []
    for c in range(checks):
        majority, minority = tuple(nodes[:-2]), tuple(nodes[-2:])
        for group, verdict in (
            (majority, Verdict(Status.PASS, "NCCL 2.23.4 (majority)")),
            (minority, Verdict(Status.FAIL, "NCCL 2.21.5 on x, expected 2.23.4")),
        ):
            evidence = tuple(
                Evidence(node, "versions", ("sh", "-c", "x"), 0, f"captures/{node}/versions.txt") for node in group
            )
            results.append(CheckResult(f"check{c}", group, verdict, evidence))
    now = datetime.now(timezone.utc)
    return Report("r", "p", "p", "0" * 64, None, now, now, 10, True, tuple((n, n) for n in nodes), tuple(results))


class Replay:
    """Transport: every node answers every probe at once with the recorded node's answer (drifted
    nodes with another NCCL and kernel)."""

    def __init__(self, recorded: dict, drifted: set[str]) -> None:
        self.recorded, self.drifted = recorded, drifted

    def connect(self, node: Node, timeout_s: float) -> Replay._Session:
        return Replay._Session(self, node)

    class _Session:
        def __init__(self, owner: Replay, node: Node) -> None:
            self.owner, self.node = owner, node

        def run(self, probe, timeout_s: float) -> Capture:
            rec = self.owner.recorded.get(probe.name)
            name = self.node.name
            if rec is None:
                return Capture(name, probe.name, probe.argv, Outcome.EXITED, 127, "", "not recorded", 0.01)
            stdout = rec["stdout"].replace("NODE", name)
            if name in self.owner.drifted:
                stdout = stdout.replace("libnccl.so.2.29.2", "libnccl.so.2.27.7").replace(
                    "6.18.44-fc-v1272", "6.18.40-fc-v1200"
                )
            if rec["outcome"] != "exited":
                return Capture(
                    name, probe.name, probe.argv, Outcome.TIMEOUT, None, stdout, "", timeout_s, "no answer in time"
                )
            return Capture(name, probe.name, probe.argv, Outcome.EXITED, rec["exit_code"], stdout, rec["stderr"], 0.05)

        def close(self) -> None:
            pass


def realistic(n: int, drift: float, fanout: int) -> Report:
    from harness.sim_playbooks import shipped_for_sim

    from nodecheck.config.playbook import load_playbook
    from nodecheck.run.runner import run

    recorded = json.loads(RECORDED.read_text())["probes"]
    work = Path(tempfile.mkdtemp(prefix="nodecheck-bench-report-"))
    try:
        playbook = load_playbook(str(shipped_for_sim("prolog", work)))
    finally:
        shutil.rmtree(work)
    nodes = [Node(f"gpu{i:05d}", f"10.{i // 65536}.{i // 256 % 256}.{i % 256}") for i in range(n)]
    step = max(1, round(1 / drift)) if drift else 0
    drifted = {nodes[i].name for i in range(0, n, step)} if step else set()
    return run(playbook, nodes, Replay(recorded, drifted), fanout=fanout, deadline_s=3600, inventory="hosts.yml")


def du(path: Path) -> int:
    return sum(os.lstat(os.path.join(d, f)).st_size for d, _, files in os.walk(path) for f in files)


def timed(name: str, step, rows: list) -> object:
    started = time.perf_counter()
    cpu = time.process_time()
    out = step()
    rows.append((name, time.perf_counter() - started, time.process_time() - cpu))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=16000)
    ap.add_argument("--drift", type=float, default=0.01, help="share of nodes with another NCCL and kernel")
    ap.add_argument("--fanout", type=int, default=64)
    ap.add_argument("--dir", default=None, help="where the report directory is written (default: a temporary)")
    ap.add_argument("--no-store", action="store_true", help="skip writing the report directory")
    ap.add_argument("--synthetic", action="store_true", help="the older form: drift results only")
    ap.add_argument("--fleet-checks", type=int, default=7)
    args = ap.parse_args()
    rows: list[tuple[str, float, float]] = []
    if args.synthetic:
        report = timed("build", lambda: synthetic(args.nodes, args.fleet_checks), rows)
    else:
        report = timed("run", lambda: realistic(args.nodes, args.drift, args.fanout), rows)
    assert isinstance(report, Report)
    timed("to_dict", lambda: report_json.to_dict(report), rows)
    text = timed("json", lambda: report_json.dumps(report), rows)
    assert isinstance(text, str)
    timed("table", lambda: table.render(report), rows)
    timed("junit", lambda: junit.render(report), rows)
    summary = timed("summary", lambda: table.render(report), rows)
    dir_bytes = files = 0
    if not args.no_store:
        out = Path(args.dir or tempfile.mkdtemp(prefix="nodecheck-bench-report-out-"))
        try:
            where = timed("store", lambda: store(report, str(summary), out, text), rows)
            assert isinstance(where, Path)
            dir_bytes = du(where)
            files = sum(len(f) for _, _, f in os.walk(where))
        finally:
            if args.dir is None:
                shutil.rmtree(out)
    timed("loads", lambda: report_json.from_dict(json.loads(text)), rows)
    statuses = report.summary()
    print(f"{args.nodes} nodes, {len(report.results)} results, {len(report.captures)} captures, statuses {statuses}")
    for name, wall, cpu in rows:
        print(f"{name:8} {wall:7.2f} s wall {cpu:7.2f} s CPU")
    print(f"report.json {len(text.encode()) / 1e6:.1f} MB ({len(text.encode()) / args.nodes / 1e3:.1f} kB/node)")
    if dir_bytes:
        print(f"report dir  {dir_bytes / 1e6:.1f} MB in {files} files ({dir_bytes / args.nodes / 1e3:.1f} kB/node)")
    print(f"peak RSS    {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
