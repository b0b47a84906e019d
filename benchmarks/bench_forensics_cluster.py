"""What `nodecheck forensics` costs end to end on the simulated cluster: N nodes (real sshd each) with R
fake ranks per node (tests/fakes/hung_rank.py) blocked in all_gather, rank 3 in all_reduce, each with a
flight-recorder dump where its TORCH_FR_DUMP_TEMP_FILE says; the real py-spy dumps every rank. What is
measured is the gathering: two SSH round trips a node, py-spy on every rank, one fetch per dump file.
The dumps are copies of the 8 recorded torch 2.13 ones (mismatched scenario), and a dump names its own
rank, so the flight-recorder comparison covers those 8 ranks (one dump per rank is kept); its cost at
scale is benchmarks/bench_forensics.py's. Reports wall time, the command's CPU (user + sys, with its
children) and peak RSS, and checks the verdict names rank 3. Run it through benchmarks/forensics.sh
(root, private network namespace)."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from harness.cluster import SimCluster  # noqa: E402

DUMPS = ROOT / "tests" / "data" / "flight-recorder" / "mismatched"
PREFIX = "/root/fr/trace_rank_"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--state-dir", required=True)
    ap.add_argument("--nodes", type=int, default=16)
    ap.add_argument("--ranks-per-node", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    cluster = SimCluster(state_dir=a.state_dir)
    cluster.up(a.nodes)
    try:
        return run(cluster, a)
    finally:
        cluster.down()


def run(cluster: SimCluster, a) -> int:
    world = a.nodes * a.ranks_per_node
    cluster.install_pyspy()
    env = {"TORCH_FR_DUMP_TEMP_FILE": PREFIX, "TORCH_NCCL_DUMP_ON_TIMEOUT": "1"}
    for k, node in enumerate(cluster.nodes):
        ranks = range(k * a.ranks_per_node, (k + 1) * a.ranks_per_node)
        cluster.start_ranks(
            node,
            [
                {
                    "rank": r,
                    "local_rank": r - k * a.ranks_per_node,
                    "collective": "all_reduce" if r == 3 else "all_gather",
                }
                for r in ranks
            ],
            world_size=world,
            env=env,
            timeout=60,
        )
        # the recorded 8-rank dumps: rank 3's has the other collective; the rest are alike but for the rank
        cluster.place_dumps(
            node,
            {r: DUMPS / f"nccl_trace_rank_{3 if r == 3 else (r % 8 if r % 8 != 3 else 2)}" for r in ranks},
            prefix=PREFIX,
        )
    out = Path(tempfile.mkdtemp(prefix="nodecheck-bench-forensics-"))
    walls, cpus, rss = [], [], []
    for i in range(a.repeat):
        t = time.monotonic()
        before = os.times()
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "nodecheck",
                "forensics",
                str(cluster.inventory_path),
                "--match",
                "train\\.py",
                "--format",
                "json",
                "--output-dir",
                str(out / str(i)),
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        walls.append(time.monotonic() - t)
        after = os.times()
        cpus.append(after.children_user + after.children_system - before.children_user - before.children_system)
        rss.append(_children_maxrss_mib())
        doc = json.loads(proc.stdout)
        d = doc["diagnosis"]
        ok = proc.returncode == 0 and d["class"] == "mismatched collectives" and 3 in d["culprit_ranks"]
        stacks = sum(len(g["processes"]) for g in doc["stack_groups"] if not g["failure"])
        dumps = sum(1 for x in doc["dumps"] if x["read"])
        print(
            f"run {i + 1}: exit {proc.returncode}, {d['class']}, culprits {d['culprit_ranks']}, "
            f"{stacks}/{world} stacks, {dumps} dumps read, {walls[-1]:.2f} s",
            flush=True,
        )
        if not ok:
            print(proc.stderr[-2000:], file=sys.stderr)
            return 1
    print(
        f"{a.nodes} nodes x {a.ranks_per_node} ranks = {world} ranks: wall median {statistics.median(walls):.2f} s "
        f"(min {min(walls):.2f}, max {max(walls):.2f}); client CPU median {statistics.median(cpus):.2f} s "
        f"({statistics.median(cpus) / world * 1e3:.1f} ms a rank); peak RSS {max(rss):.0f} MiB"
    )
    return 0


def _children_maxrss_mib() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


if __name__ == "__main__":
    sys.exit(main())
