"""What remediation costs a node's health check (HealthCheckProgram), and how long a repair takes,
on the simulated cluster with a real Slurm 22.05.

Each row: `nodecheck-health` run on a simulated 8x H100 node exactly as slurmd runs it (inside the
node's namespaces, a bare environment), several times; CPU is the run's own user+sys (getrusage of
the child: nodecheck and every probe it ran, all on this machine's 2 cores), wall is its duration.
Cases: a healthy node without a `remedy:` section (the gate alone), with `remedy:` observing, with
`remedy: {act: true}`; then a node with GPU3's row remap pending, drained, repaired in one health
run (evidence, nvidia-smi -r, the health playbook again and DCGM level 2 as the reset's acceptance,
resume): the drain-to-resume time. Run it through benchmarks/remedy.sh.
"""

from __future__ import annotations

import argparse
import resource
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
from harness.scenarios import NVML_REMAP_PENDING, GpuReset, apply, dcgm, gpu_node, node_os  # noqa: E402
from harness.sim_playbooks import shipped_for_sim  # noqa: E402

from nodecheck.parsers.slurm import reason_mark  # noqa: E402

HEALTH = Path(sys.executable).parent / "nodecheck-health"
ACCEPTANCE = "version: 1\ndeadline_s: 600\nchecks:\n  gpu.dcgm_diag: {level: 2, test_timeout_s: 60}\n"
REMAP = "gpu.health GPU3: row remap pending"


def configure(cluster: SimCluster, work: Path, remedy: dict | None) -> None:
    (work / "accept.yml").write_text(ACCEPTANCE)
    config = {
        "output_dir": str(work / "reports"),
        "log_file": str(work / "gate.log"),
        "health": {"playbook": str(shipped_for_sim("health", work))},
    }
    if remedy is not None:
        config["remedy"] = {
            "state_dir": str(work / "remedy"),
            "bug_report_s": 0,
            "acceptance": {"reset_gpu": str(work / "accept.yml")},
            **remedy,
        }
    for folder in (cluster.slurm_conf.parent, cluster.slurm_dir / "etc"):
        (folder / "nodecheck.yml").write_text(yaml.safe_dump(config))


def health(cluster: SimCluster, node: str) -> tuple[float, float, str]:
    """(CPU s, wall s, result line) of one nodecheck-health run on the node."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    rc, out, err = cluster.run_on_node(node, [str(HEALTH)], timeout=600)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, (out + err).strip().splitlines()[-1] if (out + err).strip() else f"exit {rc}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--state-dir", required=True)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    nodes = [f"node{i}" for i in range(1, 5)]
    cluster = SimCluster(state_dir=args.state_dir).up(len(nodes))
    remedy_node = gpu_node(nvml=NVML_REMAP_PENDING) + node_os(real_slurmd=True) + dcgm() + [GpuReset()]
    layout = {"node1": gpu_node() + node_os(real_slurmd=True) + dcgm() + [GpuReset()]}
    layout |= dict.fromkeys(nodes[1:], remedy_node)
    apply(cluster, layout)
    cluster.slurm_up(nodes, reboot_program=True)
    rows, ok = [], True
    try:
        with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
            work = Path(tmp)
            work.chmod(0o755)
            for label, remedy in (
                ("healthy node, no remedy: section (the gate alone)", None),
                ("healthy node, remedy: observe", {}),
                ("healthy node, remedy: act", {"act": True}),
            ):
                configure(cluster, work, remedy)
                runs = [health(cluster, "node1") for _ in range(args.repeat)]
                ok &= all(" PASS" in line for _, _, line in runs)
                rows.append(
                    [
                        label,
                        len(runs),
                        f"{statistics.median(c for c, _, _ in runs):.2f} s",
                        f"{statistics.median(w for _, w, _ in runs):.1f} s",
                        "-",
                    ]
                )
            configure(cluster, work, {"act": True, "max_nodes": 10})
            repairs = []
            for node in nodes[1:]:
                cluster.scontrol(
                    "update", f"nodename={node}", "state=drain", f"reason=nodecheck[{reason_mark(REMAP)}]: {REMAP}"
                )
                started = time.monotonic()
                cpu, wall, line = health(cluster, node)
                back = "DRAIN" not in cluster.node(node)["State"]
                ok &= back and "reset_gpu GPU3 returned" in line
                repairs.append((cpu, wall, time.monotonic() - started))
            rows.append(
                [
                    "GPU3 remap pending: evidence, reset, re-proof + DCGM level 2, resume",
                    len(repairs),
                    f"{statistics.median(c for c, _, _ in repairs):.2f} s",
                    f"{statistics.median(w for _, w, _ in repairs):.1f} s",
                    f"{statistics.median(t for _, _, t in repairs):.1f} s",
                ]
            )
    finally:
        cluster.slurm_down()
        cluster.down()
    print("one nodecheck-health run on a simulated 8x H100 node, as slurmd runs it (real Slurm 22.05)\n")
    print(tabulate(rows, headers=["case", "runs", "CPU, median", "wall, median", "drain to resume"], tablefmt="github"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
