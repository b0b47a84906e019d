"""`nodecheck prolog --controller` (PrologSlurmctld) for a 128..1,024-node job with version drift among its
nodes, on the simulated cluster of benchmarks/scale.sh (issue 22).

As slurmctld runs it: SLURM_JOB_NODELIST=node[1-N], SLURM_JOB_ID, the shipped `prolog` playbook as the
simulation meets it (its cross-node checks only), the cluster's inventory. --observe: the simulated
cluster has no slurmctld here, so the blamed nodes are judged, logged and reported, not drained.
One node in ~500 gets another NVIDIA driver (NVML reports 580.159.04): gpu.driver must blame exactly
those. Measured with os.wait4: wall, client CPU (incl. reaped children), peak RSS.
Run it through benchmarks/scale.sh --controller (root, private network namespace, a cluster up).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_fanout import measure_wait4  # noqa: E402
from harness.cluster import SimCluster  # noqa: E402
from harness.scenarios import NVML_HEALTHY  # noqa: E402
from harness.sim_playbooks import shipped_for_sim  # noqa: E402

OTHER_DRIVER = "580.159.04"


def drifted(size: int) -> list[str]:
    """The nodes of node[1-size] with the other driver: node7, then one every 500."""
    return [f"node{i}" for i in range(7, size + 1, 500)]


def controller_run(cluster: SimCluster, playbook: str, size: int, deadline: float, work: Path) -> dict:
    log, reports = work / "gate.log", work / "reports"
    env = dict(
        os.environ,
        SLURM_JOB_NODELIST=f"node[1-{size}]",
        SLURM_JOB_ID=str(1000 + size),
        SLURM_JOB_USER="alice",
        SLURM_JOB_PARTITION="debug",
    )
    argv = [
        sys.executable,
        "-m",
        "nodecheck",
        "prolog",
        "--controller",
        "--observe",
        "--playbook",
        playbook,
        "--inventory",
        str(cluster.inventory_path),
        "--deadline",
        str(deadline),
        "--log-file",
        str(log),
        "--output-dir",
        str(reports),
    ]
    r = measure_wait4(argv, env=env, stdout=str(work / "controller.out"))
    docs = sorted(reports.glob("*/report.json"))
    assert r["rc"] == 0 and len(docs) == 1, (
        f"rc {r['rc']}, {len(docs)} reports: {(work / 'controller.out').read_text()[-2000:]}"
    )
    doc = json.loads(docs[0].read_text())
    status = {n["node"]: n["status"] for n in doc["nodes"]}
    blamed = sorted((n for n, s in status.items() if s == "fail"), key=lambda n: int(n[4:]))
    unjudged = {n: s for n, s in status.items() if s not in ("pass", "fail", "warn")}
    r.update(
        nodes=len(status),
        blamed=blamed,
        unjudged=len(unjudged),
        complete=doc["complete"],
        report_bytes=docs[0].stat().st_size,
    )
    assert len(status) == size and blamed == drifted(size) and not unjudged, (
        f"{len(status)}/{size} nodes, blamed {blamed[:10]} (want {drifted(size)}), "
        f"not judged: {dict(list(unjudged.items())[:5])}"
    )
    shutil.rmtree(reports, ignore_errors=True)
    log.unlink(missing_ok=True)
    return r


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--state-dir", required=True, help="a simulated cluster that is up, set up as bench_scale.py does")
    ap.add_argument("--sizes", default="128,1024")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--deadline", type=float, default=300)
    ap.add_argument("--json")
    args = ap.parse_args()
    cluster = SimCluster(state_dir=args.state_dir)
    work = Path(tempfile.mkdtemp(prefix="nodecheck-bench-controller-"))
    os.chmod(work, 0o755)
    playbook = str(shipped_for_sim("prolog", work))
    sizes = sorted({int(s) for s in args.sizes.split(",")})
    state = json.loads(Path(NVML_HEALTHY).read_text().replace('"550.90.07"', f'"{OTHER_DRIVER}"'))
    other = work / "nvml-other-driver.json"
    other.write_text(json.dumps(state))
    for node in drifted(max(sizes)):
        cluster.fake_nvml(node, other)
    rows = []
    try:
        for size in sizes:
            runs = [controller_run(cluster, playbook, size, args.deadline, work) for _ in range(args.repeat)]
            walls = [x["wall_s"] for x in runs]
            rows.append(
                {
                    "nodes": size,
                    "wall_s": statistics.median(walls),
                    "wall_min_s": min(walls),
                    "wall_max_s": max(walls),
                    "cpu_s": statistics.median(x["cpu_s"] for x in runs),
                    "peak_rss_mb": max(x["peak_rss_mb"] for x in runs),
                    "blamed": runs[0]["blamed"],
                    "report_bytes": runs[0]["report_bytes"],
                    "runs": runs,
                }
            )
            print(f"controller {size}: {walls}", file=sys.stderr, flush=True)
    finally:
        for node in drifted(max(sizes)):
            cluster.fake_nvml(node, NVML_HEALTHY)
        shutil.rmtree(work, ignore_errors=True)
    print(
        "| job nodes | wall (s) | client CPU (s) | CPU per node (ms) | peak RSS (MB) | blamed (gpu.driver) "
        "| report.json |"
    )
    print("|---|---|---|---|---|---|---|")
    for x in rows:
        print(
            f"| {x['nodes']} | {x['wall_s']:.1f} ({x['wall_min_s']:.1f}-{x['wall_max_s']:.1f}) | {x['cpu_s']:.1f} | "
            f"{x['cpu_s'] * 1000 / x['nodes']:.1f} | {x['peak_rss_mb']:.0f} | {', '.join(x['blamed'])} | "
            f"{x['report_bytes'] / 1e6:.1f} MB |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
