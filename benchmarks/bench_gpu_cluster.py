"""gpu.perf and gpu.sdc end to end on a simulated cluster: what the GPU benchmark costs the operator
host per node (client CPU, peak RSS) and the wall of a run, and whether the verdicts are right.

Each row is one `nodecheck run --allow-disruptive` over real SSH against N simulated 8x H100 nodes:
the real probe goes to each node's python3 over stdin, where a fake CuPy does the math for real in
NumPy (small sizes: the GPU time is modeled, the CPU time is real) and nvbandwidth replays a real
8x H100 recording. One node has a GPU at 85 % speed, one a GPU that flips a bit in every GEMM. Client
CPU and peak RSS are the `nodecheck` process's own (getrusage of the child), so they exclude the
nodes' sshd and probes, which share this machine's 2 cores. Run it through benchmarks/gpu.sh.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tabulate import tabulate

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from harness.cluster import SimCluster  # noqa: E402
from harness.scenarios import apply, gpu_bench_node  # noqa: E402

PLAYBOOKS = {
    "gpu.perf": "gpu.perf: {duration_s: 0.3, gemm_size: 128, dtypes: [fp16], copy_mib: 4, pcie_mib: 4, p2p_mib: 2, "
    "test_timeout_s: 300}",
    "gpu.sdc": "gpu.sdc: {size: 96, steps: 4, test_timeout_s: 300}",
}


def case(cluster: SimCluster, n: int, checks: list[str], work: Path) -> dict:
    layout = {f"node{i}": gpu_bench_node() for i in range(1, n + 1)}
    layout["node2"] = gpu_bench_node(speed=((5, 0.85),))
    layout["node3"] = gpu_bench_node(bitflip=((2, "persistent"),))
    apply(cluster, layout)
    book = work / "gpu.yml"
    book.write_text("version: 1\ndeadline_s: 1800\nchecks:\n" + "".join(f"  {PLAYBOOKS[c]}\n" for c in checks))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "nodecheck", "run", str(cluster.inventory_path), "--nodes", f"node[1-{n}]"]
        + ["--playbook", str(book), "--format", "json", "--output-dir", str(work / "reports"), "--allow-disruptive"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    doc = json.loads(proc.stdout)
    bad = {
        (node["node"], r["check"], r["subject"])
        for node in doc["nodes"]
        for r in node["results"]
        if r["status"] != "pass"
    }
    want = set()
    if "gpu.perf" in checks:
        want |= {("node2", "gpu.perf", "GPU5")}
    if "gpu.sdc" in checks:
        want |= {("node3", "gpu.sdc", "GPU2")}
    return {
        "wall": wall,
        "cpu": cpu,
        "rss_mb": after.ru_maxrss / 1024,
        "right": bad == want,
        "exit": proc.returncode,
        "bad": sorted(bad),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--state-dir", required=True)
    ap.add_argument("--nodes", type=int, default=16)
    args = ap.parse_args()
    n = args.nodes
    cluster = SimCluster(state_dir=args.state_dir).up(n)
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for checks in (["gpu.perf"], ["gpu.sdc"], ["gpu.perf", "gpu.sdc"]):
                r = case(cluster, n, checks, Path(tmp))
                rows.append(
                    [
                        " + ".join(checks),
                        n,
                        f"{r['wall']:.1f} s",
                        f"{r['cpu']:.2f} s",
                        f"{r['cpu'] / n * 1000:.0f} ms",
                        f"{r['rss_mb']:.0f} MB",
                        "yes" if r["right"] else f"NO {r['bad']}",
                        r["exit"],
                    ]
                )
                print(rows[-1], file=sys.stderr)
    finally:
        cluster.down()
    print(f"{n} simulated 8x H100 nodes, real SSH, the real probe over a fake CuPy (NumPy math)\n")
    print(
        tabulate(
            rows,
            headers=[
                "checks",
                "nodes",
                "wall",
                "client CPU",
                "client CPU per node",
                "peak RSS",
                "right verdicts",
                "exit",
            ],
            tablefmt="github",
        )
    )
    return 0 if all(r[6] == "yes" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
