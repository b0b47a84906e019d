"""What the node Prolog costs a job: nodecheck-prolog's own wall time on one node, and sbatch to
COMPLETED without a Prolog, with nodecheck-prolog (shipped `prolog` playbook), and with one node
failing (drained, job requeued and run elsewhere). Real Slurm 22.05 on the simulated cluster
(tests/harness): every node a healthy 8x H100 behind the fake NVML and IB tools, with the node itself
as the node checks read it (scenarios.node_os; the playbook as the simulation can meet it:
harness/sim_playbooks.py). Run it through benchmarks/prolog.sh (root, private network namespace)."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml
from tabulate import tabulate

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from harness.cluster import SimCluster  # noqa: E402
from harness.scenarios import NVML_HEALTHY, NVML_REMAP_PENDING, apply, gpu_node, node_os  # noqa: E402
from harness.sim_playbooks import shipped_for_sim  # noqa: E402

PROLOG = Path(sys.executable).parent / "nodecheck-prolog"


def submit(cluster: SimCluster, nodes: int) -> float:
    started = time.monotonic()
    job = cluster.sbatch(f"-N{nodes}")
    cluster.wait_job(job, timeout=180)
    return time.monotonic() - started


def write_config(cluster: SimCluster, work: Path, keep_reports: str = "problems") -> None:
    playbook = str(shipped_for_sim("prolog", work))
    doc = {
        "keep_reports": keep_reports,
        "output_dir": str(work / "reports"),
        "log_file": str(work / "gate.log"),
        "prolog": {"playbook": playbook},
    }
    for folder in (cluster.slurm_conf.parent, cluster.slurm_dir / "etc"):
        (folder / "nodecheck.yml").write_text(yaml.safe_dump(doc))


def probe_clocks(reports: Path) -> str:
    """The newest node1 report's probes by their own clocks, slowest first: where the Prolog's time went."""
    newest = max(reports.glob("*_prolog_node1_*/report.json"), key=lambda p: p.stat().st_mtime)
    doc = json.loads(newest.read_text())
    rows = sorted(((c["probe"], c.get("duration_s") or 0.0) for c in doc.get("captures", [])), key=lambda r: -r[1])
    return tabulate([[name, f"{s * 1000:.0f} ms"] for name, s in rows], headers=["probe", "its own clock"])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--state-dir", required=True)
    ap.add_argument("--nodes", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument(
        "--alone",
        action="store_true",
        help="only nodecheck-prolog's own wall time on node1 (no jobs timed), with its probes' clocks",
    )
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="nodecheck-bench-prolog-"))
    os.chmod(work, 0o755)
    rows = []
    with SimCluster(state_dir=args.state_dir).up(args.nodes) as cluster:
        apply(cluster, {n: gpu_node() + node_os(real_slurmd=True) for n in cluster.nodes})
        for label, prolog in () if args.alone else (("no Prolog", None), ("nodecheck-prolog", PROLOG)):
            cluster.slurm_up(cluster.nodes, prolog=prolog)
            cluster.slurm_reset()
            write_config(cluster, work)
            for size in sorted({4, args.nodes}):
                submit(cluster, size)  # the scheduler's first pass is slower
                times = [submit(cluster, size) for _ in range(args.repeat)]
                rows.append(
                    [label, f"-N{size}", f"{statistics.median(times):.2f} s", f"{min(times):.2f}-{max(times):.2f} s"]
                )
        if args.alone:
            cluster.slurm_up(cluster.nodes, prolog=None)
            write_config(cluster, work)
        walls = []
        env = {"SLURMD_NODENAME": "node1", "SLURM_JOB_ID": "0", "SLURM_CONF": str(cluster.slurm_conf)}
        for _ in range(args.repeat):
            started = time.monotonic()
            rc, out, err = cluster.run_on_node("node1", [str(PROLOG)], env=env)
            walls.append(time.monotonic() - started)
            assert rc == 0, out + err
        rows.append(
            [
                "nodecheck-prolog alone (node1, idle)",
                "-",
                f"{statistics.median(walls):.2f} s",
                f"{min(walls):.2f}-{max(walls):.2f} s",
            ]
        )
        if args.alone:
            write_config(cluster, work, keep_reports="always")  # one more run, to read its probes' clocks
            rc, out, err = cluster.run_on_node("node1", [str(PROLOG)], env=env)
            assert rc == 0, out + err
            print(probe_clocks(work / "reports"))
            cluster.slurm_down()
            print(tabulate(rows, headers=["case", "job", "wall (median)", "range"], tablefmt="github"))
            return 0
        cluster.fake_nvml("node3", NVML_REMAP_PENDING)
        started = time.monotonic()
        job = cluster.sbatch("-N4")
        done = cluster.wait_job(job, timeout=180)
        took = time.monotonic() - started
        assert "DRAIN" in cluster.node("node3")["State"], cluster.node("node3")
        rows.append(
            [
                f"node3 fails gpu.health: drained, requeued, ran on {done['NodeList']}",
                "-N4",
                f"{took:.2f} s",
                f"Restarts={done['Restarts']}",
            ]
        )
        cluster.fake_nvml("node3", NVML_HEALTHY)
        cluster.slurm_down()
    print(tabulate(rows, headers=["case", "job", "sbatch -> COMPLETED (median)", "range"], tablefmt="github"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
