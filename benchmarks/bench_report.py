"""Report rendering at fleet scale: JSON, table and JSON round trip for N nodes with cross-node
(drift) results, each listed under every node of its group. Pure CPU, no cluster needed.

    .venv/bin/python benchmarks/bench_report.py [--nodes 5000] [--fleet-checks 7]
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import datetime, timezone

from nodecheck.core.model import CheckResult, Evidence, Status, Verdict
from nodecheck.report import Report, table
from nodecheck.report import json as report_json


def build(n: int, checks: int) -> Report:
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--fleet-checks", type=int, default=7)
    args = ap.parse_args()
    report = build(args.nodes, args.fleet_checks)
    for name, step in (("to_dict", lambda: report_json.to_dict(report)), ("table", lambda: table.render(report))):
        started = time.perf_counter()
        step()
        print(f"{name:10} {time.perf_counter() - started:.2f} s")
    text = report_json.dumps(report)
    started = time.perf_counter()
    report_json.from_dict(json.loads(text))
    print(f"{'loads':10} {time.perf_counter() - started:.2f} s   ({len(text) / 1e6:.1f} MB of JSON)")


if __name__ == "__main__":
    main()
