"""The srun transport against SSH on the same nodes, under a real Slurm (slurmctld + one slurmd per
simulated node): `nodecheck run` of the same playbook over the same allocation, once with
`--slurm-job J --transport srun` (no SSH, one srun step per probe round) and once over SSH with the
inventory, alternating, repeated. Measured per run with os.wait4 (the srun processes nodecheck reaps
count in its client CPU). Run it through benchmarks/srun.sh (root, private network namespace)."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tabulate import tabulate

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_fanout import measure_wait4  # noqa: E402
from harness.cluster import SimCluster  # noqa: E402
from harness.scenarios import IBSTAT_HEALTHY, Replay, apply, gpu_node, node_os  # noqa: E402

NODECHECK = str(Path(sys.executable).parent / "nodecheck")
IB_ONLY = ROOT / "tests/data/playbooks/ib-only.yml"
# the demo playbook's passive GPU and IB checks: 4 probes per node, one of them the NVML probe
# (`python3 -` with the probe on stdin) on every node
GPU_IB = """\
version: 1
deadline_s: 120
checks:
  ib.ports: {timeout_s: 5, link_layer: InfiniBand, min_rate_gbps: 400, expected_ports: 8}
  gpu.count: {expect: 8, name: "NVIDIA H100 80GB HBM3"}
  gpu.health: {expected_nvlinks: 18, power_limit_w: {warn_below: 700, fail_below: 350}}
  gpu.processes: {}
  gpu.xid: {since: boot}
  node.oom: {since: 24h}
  gpu.driver: {drift: fail}
  cuda.version: {drift: fail}
  kernel.version: {drift: fail}
"""


def one(cluster: SimCluster, transport: str, job: str, playbook: str, out: Path) -> dict:
    target = ["--slurm-job", job, "--transport", "srun"] if transport == "srun" else [str(cluster.inventory_path)]
    argv = [NODECHECK, "run", *target, "--playbook", playbook, "--format", "json", "--output-dir", str(out)]
    stdout = out / "last.json"
    r = measure_wait4(argv, env=cluster.slurm_env(), stdout=str(stdout))
    doc = json.loads(stdout.read_text())
    statuses = {n["status"] for n in doc["nodes"]}
    assert r["rc"] == 0 and statuses == {"pass"} and len(doc["nodes"]) == len(cluster.nodes), (r, statuses)
    return r


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--state-dir", required=True)
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", help="write the raw figures here")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="nodecheck-bench-srun-"))
    os.chmod(work, 0o755)
    rows, raw = [], {}
    with SimCluster(state_dir=args.state_dir).up(args.nodes) as cluster:
        apply(
            cluster,
            {n: gpu_node() + node_os(real_slurmd=True) + [Replay("ibstat", IBSTAT_HEALTHY)] for n in cluster.nodes},
        )
        cluster.slurm_up(cluster.nodes, extra_conf=["SchedulerParameters=sched_interval=1"], timeout=120)
        job = str(cluster.sbatch(f"-N{args.nodes}", "--exclusive", wrap="sleep 3600"))
        cluster.wait_job(int(job), ("RUNNING",), timeout=120)
        (work / "gpu-ib.yml").write_text(GPU_IB)
        books = {"ib-only (1 probe)": str(IB_ONLY), "GPU + IB passive (NVML probe)": str(work / "gpu-ib.yml")}
        for label, book in books.items():
            runs: dict[str, list[dict]] = {"srun": [], "ssh": []}
            for i in range(args.repeat):
                for transport in ("srun", "ssh") if i % 2 == 0 else ("ssh", "srun"):
                    runs[transport].append(one(cluster, transport, job, book, work))
            raw[label] = runs
            for transport, rs in runs.items():
                walls = [r["wall_s"] for r in rs]
                cpu = statistics.median(r["cpu_s"] for r in rs)
                rows.append(
                    [
                        label,
                        transport,
                        f"{statistics.median(walls):.2f} s ({min(walls):.2f}-{max(walls):.2f})",
                        f"{cpu:.2f} s",
                        f"{cpu / args.nodes * 1000:.1f} ms",
                        f"{max(r['peak_rss_mb'] for r in rs):.0f} MB",
                    ]
                )
        # what one step costs here, nodecheck aside: 64 slurmstepd start on this machine's 2 cores (on a
        # cluster each on its own node)
        bare = [
            measure_wait4(
                ["srun", f"--jobid={job}", "--overlap", f"-N{args.nodes}", "--ntasks-per-node=1", "/bin/true"],
                env=cluster.slurm_env(),
                stdout="/dev/null",
            )
            for _ in range(args.repeat)
        ]
        walls = [r["wall_s"] for r in bare]
        rows.append(
            [
                "(none: `srun -N n /bin/true`)",
                "srun alone",
                f"{statistics.median(walls):.2f} s ({min(walls):.2f}-{max(walls):.2f})",
                f"{statistics.median(r['cpu_s'] for r in bare):.2f} s",
                "",
                f"{max(r['peak_rss_mb'] for r in bare):.0f} MB",
            ]
        )
        cluster.slurm_command("scancel", job, check=False)
        cluster.slurm_down()
    print(f"{args.nodes} nodes, {args.repeat} runs each, alternating; {time.strftime('%Y-%m-%d')}")
    print(
        tabulate(
            rows,
            headers=["playbook", "transport", "wall, median (min-max)", "client CPU", "per node", "peak RSS"],
            tablefmt="github",
        )
    )
    if args.json:
        Path(args.json).write_text(json.dumps(raw, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
