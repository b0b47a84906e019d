"""What the job guard costs: `nodecheck job-check` of a JOB.yml over N simulated nodes (one probe per
node over SSH), then `nodecheck watch` over the same nodes (real sshd each, a fake trainer
writing step lines and per-rank times, the fake nvidia-smi on the same clock) for a number of ticks.
Reports the watcher's wall time per tick (from its stdout's schedule), its CPU (user + sys) per node
per tick, peak RSS, and whether every tick got every node's sample. Run it through
benchmarks/watch.sh (root, private network namespace)."""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from harness import training  # noqa: E402
from harness.cluster import SimCluster  # noqa: E402

JOB = """world_size: {world}
gpus_per_node: 8
env: {{NCCL_SOCKET_IFNAME: lo, TORCH_NCCL_ASYNC_ERROR_HANDLING: "3", TORCH_NCCL_TRACE_BUFFER_SIZE: "2000",
      TORCH_NCCL_DUMP_ON_TIMEOUT: "1"}}
checkpoint: {{dir: {ckpt}, every_minutes: 30, save_s: 300}}
data_balance: {{counts_file: counts.json, per_step: 8}}
timeouts: {{collective_s: 1800}}
launcher: {{kind: torchrun, max_restarts: 3}}
"""
CONFIG = """match: 'train[.]py'
interval_s: {interval}
progress: {{log: /root/train.log, rank_time_regex: 'rank (?P<rank>\\d+) step \\d+ time (?P<seconds>[\\d.]+)s'}}
bounds: {{hang_after_s: 600, checkpoint_max_s: 900, startup_grace_s: 900}}
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--state-dir", required=True)
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--ticks", type=int, default=10)
    ap.add_argument("--interval", type=float, default=2.0)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="nodecheck-bench-watch-"))
    (work / "watch.yml").write_text(CONFIG.format(interval=args.interval))
    with SimCluster(state_dir=args.state_dir).up(args.nodes) as cluster:
        names = cluster.nodes
        for n in names:  # every node: 8 GPUs (the fake nvidia-smi answers --query-gpu)
            cluster.fake_output(n, "nvidia-smi", "".join(f"{i}\n" for i in range(8)))
        (work / "counts.json").write_text(json.dumps({str(r): 30_000 for r in range(8 * len(names))}))
        (work / "ckpt").mkdir()
        (work / "job.yml").write_text(JOB.format(world=8 * len(names), ckpt=work / "ckpt"))
        started = time.monotonic()
        check = subprocess.run(
            [
                sys.executable,
                "-m",
                "nodecheck",
                "job-check",
                str(work / "job.yml"),
                "--inventory",
                str(cluster.inventory_path),
                "--output-dir",
                str(work / "reports"),
                "--format",
                "json",
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        took = time.monotonic() - started
        doc = json.loads(check.stdout)
        print(
            f"job-check of {args.nodes} nodes: exit {check.returncode} in {took:.2f} s (report "
            f"{doc.get('summary', '')})"
        )
        # straggler with factor 1: every node logs its ranks' step times (the straggler check's input)
        cluster.start_training_all(training.straggler(names, names[0], factor=1.0, step_s=0.5))
        argv = [
            sys.executable,
            "-m",
            "nodecheck",
            "watch",
            str(cluster.inventory_path),
            "--config",
            str(work / "watch.yml"),
            "--output-dir",
            str(work / "reports"),
            "--max-samples",
            str(args.ticks),
            "--fanout",
            "64",
        ]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.monotonic()
        run = subprocess.run(argv, capture_output=True, text=True, timeout=args.ticks * args.interval + 120)
        wall = time.monotonic() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        state = next((work / "reports" / "watch").iterdir()) / "state.json"
        saved = json.loads(state.read_text())
        print(run.stdout[-1500:])
        print(
            f"{args.nodes} nodes, {args.ticks} ticks every {args.interval:g} s: exit {run.returncode}, "
            f"wall {wall:.1f} s, watcher CPU {cpu:.2f} s = {cpu / args.ticks * 1000:.0f} ms per tick = "
            f"{cpu / args.ticks / args.nodes * 1000:.1f} ms per node per tick; peak RSS "
            f"{after.ru_maxrss / 1024:.0f} MB; ticks probed {saved['probed_ticks']}, with a sample "
            f"{saved['sampled_ticks']}; state.json {state.stat().st_size / 1000:.0f} kB"
        )
        print(f"last verdict: {saved['message']}")
    return 0 if run.returncode in (0, 1) else 1


if __name__ == "__main__":
    sys.exit(main())
