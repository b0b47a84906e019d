"""Fan-out benchmark: the passive ib.ports playbook over N simulated nodes versus pdsh -R ssh.

Both run the same probe command (`ibstat`, a fake replaying a real recording) on the same real
sshd nodes, in one process each, alternating order, repeated. Measured per run with os.wait4:
wall time, client CPU (user+sys of the process and every child it reaped, e.g. pdsh's ssh
processes) and peak RSS. Also `nodecheck --help` start-up time.

Needs root and a private network namespace: run it through `sudo bash benchmarks/run.sh`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from harness.cluster import SimCluster  # noqa: E402
from harness.scenarios import apply  # noqa: E402

IB_ONLY = str(Path(__file__).resolve().parents[1] / "tests" / "data" / "playbooks" / "ib-only.yml")
PDSH_KEX = "-o KexAlgorithms=curve25519-sha256"  # OpenSSH's default sntrup761 KEX costs ~65 ms CPU per connection


def measure_wait4(argv: list[str], env: dict | None = None, stdout=subprocess.DEVNULL) -> dict:
    started = time.monotonic()
    pid = os.posix_spawnp(
        argv[0],
        argv,
        env or dict(os.environ),
        file_actions=[
            (os.POSIX_SPAWN_OPEN, 1, stdout, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644),
            (os.POSIX_SPAWN_OPEN, 2, "/dev/null", os.O_WRONLY, 0),
        ],
    )
    _, status, ru = os.wait4(pid, 0)
    wall = time.monotonic() - started
    return {
        "wall_s": wall,
        "cpu_s": ru.ru_utime + ru.ru_stime,
        "peak_rss_mb": ru.ru_maxrss / 1024,
        "rc": os.waitstatus_to_exitcode(status),
    }


def nodecheck_run(cluster: SimCluster, fanout: int, out_dir: Path, stdout: str) -> dict:
    # ib.ports alone: the same single ibstat per node that pdsh runs
    argv = [
        sys.executable,
        "-m",
        "nodecheck",
        "run",
        str(cluster.inventory_path),
        "--playbook",
        IB_ONLY,
        "--fanout",
        str(fanout),
        "--format",
        "json",
        "--output-dir",
        str(out_dir),
    ]
    r = measure_wait4(argv, stdout=stdout)
    doc = json.loads(Path(stdout).read_text())
    assert r["rc"] == 0 and doc["status"] == "pass" and len(doc["nodes"]) == len(cluster.nodes), doc["summary"]
    return r


def pdsh_run(cluster: SimCluster, fanout: int, stdout: str) -> dict:
    env = dict(os.environ, PDSH_RCMD_TYPE="ssh", PDSH_SSH_ARGS_APPEND=f"-F {cluster.ssh_config} {PDSH_KEX}")
    n = len(cluster.nodes)
    argv = ["pdsh", "-R", "ssh", "-f", str(fanout), "-w", f"node[1-{n}]", "ibstat"]
    r = measure_wait4(argv, env, stdout=stdout)
    answered = set(re.findall(r"^(node\d+): ", Path(stdout).read_text(), re.M))
    assert r["rc"] == 0 and len(answered) == n, f"pdsh: rc {r['rc']}, {len(answered)}/{n} nodes answered"
    return r


def startup(repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        started = time.monotonic()
        subprocess.run([sys.executable, "-m", "nodecheck", "--help"], stdout=subprocess.DEVNULL, check=True)
        times.append(time.monotonic() - started)
    return times


def summarise(rows: list[dict], nodes: int) -> dict:
    med = lambda k: statistics.median(r[k] for r in rows)  # noqa: E731
    return {
        "wall_s": med("wall_s"),
        "wall_min_s": min(r["wall_s"] for r in rows),
        "wall_max_s": max(r["wall_s"] for r in rows),
        "cpu_s": med("cpu_s"),
        "cpu_ms_per_node": med("cpu_s") * 1000 / nodes,
        "peak_rss_mb": max(r["peak_rss_mb"] for r in rows),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--fanout", type=int, default=64)
    ap.add_argument("--json", help="also write the raw figures here")
    ap.add_argument("--state-dir", help="where the simulated cluster lives (default: a temp dir)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="nodecheck-bench-"))
    cluster = SimCluster(state_dir=args.state_dir or work / "sim")
    t = time.monotonic()
    cluster.up(args.nodes)
    up_s = time.monotonic() - t
    try:
        apply(cluster, "ib-healthy")
        nc_rows, pdsh_rows = [], []
        for i in range(args.repeat):  # alternate who goes first: no warm-cache bias
            order = [("nodecheck", nc_rows), ("pdsh", pdsh_rows)]
            for name, rows in order if i % 2 == 0 else order[::-1]:
                out = str(work / f"{name}.out")
                rows.append(
                    nodecheck_run(cluster, args.fanout, work / "reports", out)
                    if name == "nodecheck"
                    else pdsh_run(cluster, args.fanout, out)
                )
        help_times = startup(20)
    finally:
        cluster.down()
        shutil.rmtree(work, ignore_errors=True)
    result = {
        "nodes": args.nodes,
        "repeat": args.repeat,
        "fanout": args.fanout,
        "cluster_up_s": up_s,
        "nodecheck": summarise(nc_rows, args.nodes),
        "pdsh": summarise(pdsh_rows, args.nodes),
        "nodecheck_runs": nc_rows,
        "pdsh_runs": pdsh_rows,
        "help_startup_s": {"median": statistics.median(help_times), "max": max(help_times)},
    }
    result["wall_ratio"] = result["nodecheck"]["wall_s"] / result["pdsh"]["wall_s"]
    print(render(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


def render(r: dict) -> str:
    lines = [
        f"{r['nodes']} nodes, fanout {r['fanout']}, {r['repeat']} runs each (median; wall min-max)",
        "",
        "| client | wall (s) | client CPU (s) | CPU per node (ms) | peak RSS (MB) |",
        "|---|---|---|---|---|",
    ]
    for name in ("nodecheck", "pdsh"):
        s = r[name]
        lines.append(
            f"| {name if name == 'nodecheck' else 'pdsh -R ssh (curve25519)'} | {s['wall_s']:.2f} "
            f"({s['wall_min_s']:.2f}-{s['wall_max_s']:.2f}) | {s['cpu_s']:.2f} | "
            f"{s['cpu_ms_per_node']:.1f} | {s['peak_rss_mb']:.0f} |"
        )
    lines += [
        "",
        f"wall ratio nodecheck/pdsh: {r['wall_ratio']:.2f}",
        f"`nodecheck --help` start-up: median {r['help_startup_s']['median'] * 1000:.0f} ms, "
        f"max {r['help_startup_s']['max'] * 1000:.0f} ms (20 runs)",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
