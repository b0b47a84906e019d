"""Thousand-node scale (issue 22): `nodecheck run` of a passive playbook at 128..1,024 simulated nodes
versus pdsh running the same probes, on ONE cluster brought up at the largest size (--nodes subsets).

Per size and client, measured with os.wait4 (as bench_fanout.py): wall, client CPU (user+sys of the
process and every child it reaped: pdsh's ssh processes), peak RSS. Every run is checked: nodecheck
exits 0 with every node PASS; pdsh gets every node's end marker with every probe's exit status 0.
pdsh runs, per node, in ONE ssh connection, exactly the commands nodecheck sends (remote_command: the
same `env LC_ALL=C timeout ...` wrapper), `cmd1 < stdin1; cmd2; ...`, a probe's stdin (the NVML probe)
read from a file every node sees; both clients use curve25519-sha256 (pdsh: -o KexAlgorithms).
`--profile N`: one nodecheck run at N nodes under cProfile in every thread (benchmarks/README.md).
Also `up`/`down` time of the cluster and the memory it holds.

Needs root and a private network namespace: run it through `sudo bash benchmarks/scale.sh`.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import re
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_fanout import PDSH_KEX, measure_wait4  # noqa: E402
from bench_fanout import summarise as fanout_summary  # noqa: E402
from harness.cluster import SimCluster  # noqa: E402
from harness.scenarios import apply, gpu_node, node_os  # noqa: E402
from harness.sim_playbooks import shipped_for_sim  # noqa: E402

IB_ONLY = ROOT / "tests" / "data" / "playbooks" / "ib-only.yml"
END = "NCSCALE-END"


# The shipped prolog's checks whose probes the simulation cannot serve at scale: the simulated nodes
# share this machine's one PID namespace (services, time.sync, limits and proc.health walk all of its
# ~5,000 processes per node) and one FUSE server for every node's /mnt/shared (fs.mounts, fs.free).
HOST_WALKS = ("services", "time.sync", "limits", "proc.health", "fs.mounts", "fs.free")


def prolog_without_host_walks(work: Path) -> Path:
    """The shipped prolog playbook as the simulation meets it, less HOST_WALKS: the GPU (NVML probe),
    IB, memory, CPU, kernel, NVIDIA-stack, NVLink and drift checks (19 of its 25 checks)."""
    import yaml

    doc = yaml.safe_load(shipped_for_sim("prolog", work).read_text())
    doc["checks"] = {k: v for k, v in doc["checks"].items() if k not in HOST_WALKS}
    path = work / "prolog-sim.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def mem_available_mb() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no MemAvailable in /proc/meminfo")


def node_script(playbook: str, work: Path) -> tuple[str, int]:
    """The commands nodecheck sends a node for `playbook` as one shell line (stdin from files), and
    how many probes that is."""
    from nodecheck.config.playbook import load_playbook
    from nodecheck.run.runner import plan_probes
    from nodecheck.transport import remote_command

    probes = plan_probes(load_playbook(playbook).checks)
    parts = []
    for i, p in enumerate(probes):
        cmd = remote_command(p, p.timeout_s)
        if p.stdin:
            f = work / f"stdin{i}"
            f.write_text(p.stdin)
            f.chmod(0o644)
            cmd += f" < {shlex.quote(str(f))}"
        else:
            cmd += " < /dev/null"
        # every probe's exit status, so a failed probe cannot pass unseen
        parts.append(f"{cmd} >/dev/null 2>&1; echo {shlex.quote(p.name)}=$?")
    return "; ".join(parts) + f"; echo {END}", len(probes)


def nodecheck_run(cluster: SimCluster, playbook: str, size: int, fanout: int, work: Path, profile: str = "") -> dict:
    out = str(work / "nodecheck.json")
    argv = [sys.executable, "-m", "nodecheck"]
    if profile:
        argv = [sys.executable, str(Path(__file__).resolve()), "--profile-child", profile, "--"]
    argv += [
        "run",
        str(cluster.inventory_path),
        "--playbook",
        playbook,
        "--nodes",
        f"node[1-{size}]",
        "--fanout",
        str(fanout),
        "--deadline",
        "900",
        "--format",
        "json",
        "--output-dir",
        str(work / "reports"),
    ]
    r = measure_wait4(argv, stdout=out)
    doc = json.loads(Path(out).read_text())
    bad = {n["node"]: n["status"] for n in doc["nodes"] if n["status"] != "pass"}
    assert r["rc"] == 0 and doc["status"] == "pass" and len(doc["nodes"]) == size and not bad, (
        f"nodecheck: rc {r['rc']}, {doc['status']}, {len(doc['nodes'])}/{size} nodes, "
        f"not pass: {dict(list(bad.items())[:5])}"
    )
    shutil.rmtree(work / "reports", ignore_errors=True)
    return r


def pdsh_run(cluster: SimCluster, script: str, probes: int, size: int, fanout: int, work: Path) -> dict:
    out = work / "pdsh.out"
    env = dict(os.environ, PDSH_RCMD_TYPE="ssh", PDSH_SSH_ARGS_APPEND=f"-F {cluster.ssh_config} {PDSH_KEX}")
    argv = ["pdsh", "-R", "ssh", "-f", str(fanout), "-u", "900", "-w", f"node[1-{size}]", script]
    r = measure_wait4(argv, env, stdout=str(out))
    text = out.read_text()
    ended = set(re.findall(rf"^(node\d+): {END}$", text, re.M))
    statuses = re.findall(r"^(node\d+): [a-z0-9_.:-]+=(\d+)$", text, re.M)  # names like kernel-modules:d9f4
    failed = sorted({n for n, code in statuses if code != "0"})
    assert r["rc"] == 0 and len(ended) == size and len(statuses) == size * probes and not failed, (
        f"pdsh: rc {r['rc']}, {len(ended)}/{size} nodes answered, {len(statuses)}/{size * probes} statuses, "
        f"failed on {failed[:5]}"
    )
    return r


def summarise(rows: list[dict], nodes: int) -> dict:
    """bench_fanout's figures, plus the CPU range per node and the runs themselves."""
    return {
        **fanout_summary(rows, nodes),
        "cpu_ms_per_node_min": min(r["cpu_s"] for r in rows) * 1000 / nodes,
        "cpu_ms_per_node_max": max(r["cpu_s"] for r in rows) * 1000 / nodes,
        "runs": rows,
    }


def host_cpu_s() -> float:
    """user+system seconds of the whole machine so far (the nodes' sshd and probes included)."""
    f = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    return (int(f[1]) + int(f[2]) + int(f[3])) / os.sysconf("SC_CLK_TCK")


def bench(cluster: SimCluster, playbooks: dict[str, str], sizes: list[int], repeat: int, fanout: int, work: Path):
    results = []
    for label, playbook in playbooks.items():
        script, probes = node_script(playbook, work)
        for size in sizes:
            nc_rows, pdsh_rows, host = [], [], {"nodecheck": [], "pdsh": []}
            for i in range(repeat):  # alternate who goes first: no warm-cache bias
                order = ["nodecheck", "pdsh"] if i % 2 == 0 else ["pdsh", "nodecheck"]
                for name in order:
                    h0 = host_cpu_s()
                    if name == "nodecheck":
                        nc_rows.append(nodecheck_run(cluster, playbook, size, fanout, work))
                    else:
                        pdsh_rows.append(pdsh_run(cluster, script, probes, size, fanout, work))
                    host[name].append(host_cpu_s() - h0)
                print(
                    f"{label} {size}: run {i + 1}: nodecheck {nc_rows[-1]['wall_s']:.2f} s, "
                    f"pdsh {pdsh_rows[-1]['wall_s']:.2f} s",
                    file=sys.stderr,
                    flush=True,
                )
            r = {
                "playbook": label,
                "probes_per_node": probes,
                "nodes": size,
                "nodecheck": summarise(nc_rows, size),
                "pdsh": summarise(pdsh_rows, size),
                "host_cpu_s": {k: statistics.median(v) for k, v in host.items()},
            }
            r["wall_ratio"] = r["nodecheck"]["wall_s"] / r["pdsh"]["wall_s"]
            results.append(r)
    return results


def render(r: dict) -> str:
    lines = [
        f"{r['repeat']} runs each (median; min-max), fanout {r['fanout']}; cluster up {r['up_s']:.0f} s "
        f"({r['cluster_nodes']} nodes, {r['cluster_mem_mb']:.0f} MB held), down {r.get('down_s', 0):.1f} s",
        "",
        "| playbook (probes/node) | nodes | nodecheck wall (s) | pdsh wall (s) | ratio | nodecheck CPU ms/node | "
        "pdsh CPU ms/node | nodecheck RSS (MB) | pdsh RSS (MB) | whole host CPU s (nc / pdsh) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for x in r["results"]:
        nc, pd = x["nodecheck"], x["pdsh"]
        lines.append(
            f"| {x['playbook']} ({x['probes_per_node']}) | {x['nodes']} | {nc['wall_s']:.2f} ({nc['wall_min_s']:.2f}-"
            f"{nc['wall_max_s']:.2f}) | {pd['wall_s']:.2f} ({pd['wall_min_s']:.2f}-{pd['wall_max_s']:.2f}) | "
            f"{x['wall_ratio']:.2f} | {nc['cpu_ms_per_node']:.1f} ({nc['cpu_ms_per_node_min']:.1f}-"
            f"{nc['cpu_ms_per_node_max']:.1f}) | {pd['cpu_ms_per_node']:.1f} | {nc['peak_rss_mb']:.0f} | "
            f"{pd['peak_rss_mb']:.0f} | {x['host_cpu_s']['nodecheck']:.0f} / {x['host_cpu_s']['pdsh']:.0f} |"
        )
    return "\n".join(lines)


def profile_child(out: str, argv: list[str]) -> int:
    """Run nodecheck's main with cProfile in the main thread AND every thread it starts (the
    fan-out's workers, paramiko's transport threads); one merged pstats file."""
    import threading

    profiles: list[cProfile.Profile] = []
    orig = threading.Thread._bootstrap_inner  # type: ignore[attr-defined]

    def bootstrap(self):  # type: ignore[no-untyped-def]
        # per-thread CPU time, not wall: waiting threads cost nothing (paramiko's Transport
        # overrides run(), so the hook is one level up)
        p = cProfile.Profile(time.thread_time)
        profiles.append(p)
        p.enable()
        try:
            orig(self)
        finally:
            p.disable()

    threading.Thread._bootstrap_inner = bootstrap  # type: ignore[attr-defined]
    from nodecheck.cli import main

    main_prof = cProfile.Profile(time.thread_time)
    main_prof.enable()
    try:
        rc = main(argv)
    finally:
        main_prof.disable()
        stats = pstats.Stats(main_prof)
        for p in profiles:
            try:
                stats.add(p)
            except (TypeError, ValueError):  # a daemon thread still running: its profile is not usable
                pass
        stats.dump_stats(out)
    return rc


def main() -> int:
    if len(sys.argv) > 3 and sys.argv[1] == "--profile-child" and sys.argv[3] == "--":
        return profile_child(sys.argv[2], sys.argv[4:])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="128,256,512,1024")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--fanout", type=int, default=64)
    ap.add_argument(
        "--playbooks",
        default="ib-only",
        help="ib-only, prolog (shipped, as the simulation meets it; README: times out here), prolog-sim "
        "(prolog less the checks whose probes walk the host's shared /proc or its one FUSE server)",
    )
    ap.add_argument("--state-dir", help="where the simulated cluster lives (default: a temp dir)")
    ap.add_argument("--reuse", action="store_true", help="the cluster at --state-dir is up already: keep it")
    ap.add_argument("--no-apply", action="store_true", help="with --reuse: the nodes are set up already")
    ap.add_argument("--profile", type=int, default=0, help="also: one cProfiled nodecheck run at this many nodes")
    ap.add_argument("--json", help="also write the raw figures here")
    args = ap.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    work = Path(tempfile.mkdtemp(prefix="nodecheck-bench-scale-"))
    os.chmod(work, 0o755)  # the stdin files are read on the nodes
    cluster = SimCluster(state_dir=args.state_dir or work / "sim")
    books = {
        "prolog": str(shipped_for_sim("prolog", work)),
        "prolog-sim": str(prolog_without_host_walks(work)),
        "ib-only": str(IB_ONLY),
    }
    playbooks = {k: books[k] for k in args.playbooks.split(",")}
    result: dict = {"sizes": sizes, "repeat": args.repeat, "fanout": args.fanout, "cluster_nodes": max(sizes)}
    mem0 = mem_available_mb()
    t = time.monotonic()
    if not args.reuse:
        cluster.up(max(sizes))
    result["up_s"] = time.monotonic() - t
    try:
        t = time.monotonic()
        if not (args.reuse and args.no_apply):
            apply(cluster, {n: gpu_node() + node_os() for n in cluster.nodes})
        result["apply_s"] = time.monotonic() - t
        result["cluster_mem_mb"] = mem0 - mem_available_mb()
        if args.profile:
            prof = work / "profile.pstats"
            r = nodecheck_run(cluster, playbooks[next(iter(playbooks))], args.profile, args.fanout, work, str(prof))
            stats = pstats.Stats(str(prof))
            stats.sort_stats("tottime").print_stats(40)
            result["profile"] = {"nodes": args.profile, **r}
            shutil.copy(prof, ROOT / "benchmarks" / "results" / f"scale-profile-{args.profile}.pstats")
        result["results"] = bench(cluster, playbooks, sizes, args.repeat, args.fanout, work)
    finally:
        if not args.reuse:
            t = time.monotonic()
            cluster.down()
            result["down_s"] = time.monotonic() - t
        shutil.rmtree(work, ignore_errors=True)
    print(render(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
