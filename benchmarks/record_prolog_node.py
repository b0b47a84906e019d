"""Record what one healthy simulated 8x H100 node answers to the shipped `prolog` playbook's probes
(the playbook as the simulation can meet it), for bench_report.py and bench_history.py to replay at
fleet scale. Writes benchmarks/data/prolog-node.json: {"probes": {name: {outcome, exit_code,
stdout, stderr}}}, the node's name replaced by NODE. Run it through benchmarks/record_prolog_node.sh
(root, private network namespace); the recorded file is committed, so the benchmarks need no cluster.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from harness.cluster import SimCluster  # noqa: E402
from harness.scenarios import apply, gpu_node, node_os  # noqa: E402
from harness.sim_playbooks import shipped_for_sim  # noqa: E402

OUT = ROOT / "benchmarks" / "data" / "prolog-node.json"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--state-dir", required=True)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="nodecheck-record-prolog-"))
    with SimCluster(state_dir=args.state_dir).up(2) as cluster:
        apply(cluster, {n: gpu_node() + node_os() for n in cluster.nodes})
        playbook = shipped_for_sim("prolog", work)
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "nodecheck",
                "run",
                str(cluster.inventory_path),
                "--playbook",
                str(playbook),
                "--output-dir",
                str(work / "reports"),
                "--format",
                "json",
                "--deadline",
                "90",
            ],
            capture_output=True,
            text=True,
            timeout=180,
        )
        print(run.stderr[-2000:], file=sys.stderr)
        doc = json.loads(run.stdout)
    report_dir = next((work / "reports").iterdir())
    probes = {}
    for c in doc["captures"]:
        if c["node"] != "node1":
            continue
        out = report_dir / "captures" / "node1" / f"{c['probe']}.txt"
        err = report_dir / "captures" / "node1" / f"{c['probe']}.stderr.txt"
        probes[c["probe"]] = {
            "outcome": c["outcome"],
            "exit_code": c.get("exit_code"),
            "stdout": out.read_text().replace("node1", "NODE") if out.exists() else "",
            "stderr": err.read_text().replace("node1", "NODE") if err.exists() else "",
        }
    # a loaded host times probes out; keep an earlier recording's answer where this one has none
    earlier = json.loads(OUT.read_text())["probes"] if OUT.exists() else {}
    for name, was in earlier.items():
        if was["outcome"] == "exited" and probes.get(name, {}).get("outcome") != "exited":
            probes[name] = was
    statuses = {r["check"]: r["status"] for r in doc["nodes"][0]["results"]} if "nodes" in doc else {}
    OUT.write_text(json.dumps({"playbook": "prolog", "statuses": statuses, "probes": probes}, indent=1) + "\n")
    print(f"{len(probes)} probes -> {OUT}; statuses {statuses}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
