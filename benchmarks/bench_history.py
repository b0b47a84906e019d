"""A sweep's history write and diff at fleet scale (issue 22): what `nodecheck sweep` does with the
history after the probes (nodecheck/fleet/sweep.py: baseline + node_sweeps, diff, record, prune), and
the `nodecheck history` listing, over a history that grows sweep by sweep. Pure CPU and local disk.

Each sweep's snapshot: the node results of the passive `prolog` playbook (bench_report.realistic on
--sample nodes, each node's rows copied to --nodes nodes: the history keeps per-node rows, so the
copy is as big as the real thing) plus what the `sweep` playbook adds that prolog lacks: 64 IB/NVLink
error counter rows a node (8 ports x 8 counters; history.py: "64 rows a node"). Between sweeps a few
nodes change: 0.5% change status and 1% see a counter rise, so the diff has findings.

    .venv/bin/python benchmarks/bench_history.py [--nodes 2000] [--sweeps 30] [--keep 720]
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_report

from nodecheck.core.model import Status
from nodecheck.fleet.history import History
from nodecheck.fleet.history_command import _entry, render_history
from nodecheck.report import diff as D
from nodecheck.report.diff import CounterRow, ResultRow, SweepSnapshot

COUNTERS = (
    "SymbolErrorCounter",
    "LinkErrorRecoveryCounter",
    "LinkDownedCounter",
    "PortRcvErrors",
    "PortRcvRemotePhysicalErrors",
    "PortXmitDiscards",
    "LocalLinkIntegrityErrors",
    "ExcessiveBufferOverrunErrors",
)


def fleet_snapshot(nodes: int, sample: int) -> SweepSnapshot:
    report = bench_report.realistic(sample, 0.01, 16)
    small = D.snapshot(report)
    names = [f"gpu{i:05d}" for i in range(nodes)]
    source = {n: f"gpu{i % sample:05d}" for i, n in enumerate(names)}
    results_by = {}
    for r in small.results:
        results_by.setdefault(r.node, []).append(r)
    facts_by = {}
    for f in small.facts:
        facts_by.setdefault(f[0], []).append(f)
    results = tuple(replace(r, node=n) for n in names for r in results_by.get(source[n], []))
    facts = tuple((n, k, v) for n in names for _, k, v in facts_by.get(source[n], []))
    counters = tuple(
        CounterRow(n, f"mlx5_{p}/1", c, 0, f"boot-{n}", "perfquery -x")
        for n in names
        for p in range(8)
        for c in COUNTERS
    )
    return replace(small, nodes=tuple(names), results=results, facts=facts, counters=counters)


def next_sweep(snap: SweepSnapshot, k: int, rng: random.Random) -> SweepSnapshot:
    nodes = list(snap.nodes)
    flip = set(rng.sample(nodes, max(1, len(nodes) // 200)))
    rise = set(rng.sample(nodes, max(1, len(nodes) // 100)))
    results = tuple(
        ResultRow(r.node, r.check, Status.FAIL, "changed", r.subject)
        if r.node in flip and r.check == "gpu.health"
        else r
        for r in snap.results
    )
    counters = tuple(
        replace(c, value=c.value + k) if c.node in rise and c.counter == "SymbolErrorCounter" else c
        for c in snap.counters
    )
    started = snap.started + timedelta(hours=k)
    return replace(
        snap,
        run_id=f"{started:%Y%m%dT%H%M%SZ}_sweep",
        started=started,
        finished=started,
        results=results,
        counters=counters,
    )


def size(path: Path) -> int:
    return sum(os.path.getsize(p) for p in (path, Path(f"{path}-wal")) if p.exists())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--sample", type=int, default=100, help="nodes the runner judges; the others copy them")
    ap.add_argument("--sweeps", type=int, default=30)
    ap.add_argument("--keep", type=int, default=720, help="sweep --keep (shipped default 720)")
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    rng = random.Random(1)
    base = fleet_snapshot(args.nodes, args.sample)
    rows_per_sweep = len(base.nodes) + len(base.results) + len(base.facts) + len(base.counters)
    folder = Path(args.dir or tempfile.mkdtemp(prefix="nodecheck-bench-history-"))
    path = folder / "history.sqlite"
    writes, diffs, listings, by_check, growth = [], [], [], [], []
    before = 0
    for k in range(args.sweeps):
        snap = next_sweep(base, k, rng)
        with History.open(path) as h:  # the sweep opens it once, as `nodecheck sweep` does
            started = time.process_time()
            previous = h.baseline(snap.playbook, snap)
            rows = h.node_sweeps(snap.playbook, 23)
            changes = D.diff(previous, snap)
            found = D.offenders(rows + D.node_sweeps(snap, max((r.sweep for r in rows), default=-1) + 1), 3, 24)
            D.render(changes, found, 3, 24, snap.started, max_lines=None)
            diffs.append(time.process_time() - started)
            started = time.perf_counter()
            recorded = h.record(snap, None)
            h.prune(snap.playbook, args.keep, recorded)
            writes.append(time.perf_counter() - started)
        with History.open(path, readonly=True) as h:  # `nodecheck history` (last 10 sweeps, every node)
            started = time.process_time()
            render_history([_entry(h, s, None, None) for s in h.sweeps(10)], None, None)
            listings.append(time.process_time() - started)
            started = time.process_time()  # `nodecheck history --check gpu.health`: every node's rows
            render_history([_entry(h, s, None, "gpu.health") for s in h.sweeps(10)], None, "gpu.health")
            by_check.append(time.process_time() - started)
        now = size(path)
        growth.append(now - before)
        before = now
        print(
            f"sweep {k + 1}: diff {diffs[-1]:.2f} s CPU, write {writes[-1]:.2f} s, listing {listings[-1]:.2f} s CPU, "
            f"file {now / 1e6:.1f} MB",
            flush=True,
        )

    def med(xs: list[float]) -> str:
        return f"{statistics.median(xs):.2f} s ({min(xs):.2f}-{max(xs):.2f})"

    per = statistics.median(growth[1:]) if len(growth) > 1 else growth[0]
    print(
        f"{args.nodes} nodes, {args.sweeps} sweeps, {rows_per_sweep} rows a sweep "
        f"({len(base.results)} results, {len(base.facts)} facts, {len(base.counters)} counters)"
    )
    print(
        f"diff  (baseline + node_sweeps + diff + render, CPU)  {med(diffs)}; first {diffs[0]:.2f}, last {diffs[-1]:.2f}"
    )
    print(f"write (record + prune, wall, fsync included) {med(writes)}; first {writes[0]:.2f}, last {writes[-1]:.2f}")
    print(f"`history` listing, last 10 sweeps (CPU)                {med(listings)}; last {listings[-1]:.2f}")
    print(f"`history --check gpu.health`, last 10 (CPU)           {med(by_check)}; last {by_check[-1]:.2f}")
    print(f"file {size(path) / 1e6:.1f} MB after {args.sweeps} sweeps; {per / 1e6:.2f} MB a sweep (median growth)")
    print(
        f"at --keep {args.keep}: ~{per * (args.keep + 1) / 1e9:.2f} GB steady; "
        f"hourly without retention: {per * 8760 / 1e9:.1f} GB a year"
    )
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    if args.dir is None:
        for p in folder.iterdir():
            p.unlink()
        folder.rmdir()


if __name__ == "__main__":
    main()
