"""How fast, and in how much memory, the nccl-tests parser reads the biggest output a run hands it:
a 512-rank (64 nodes x 8 GPUs) all_reduce_perf sweep 8 B..8 GiB run with NCCL_DEBUG=INFO, where
every rank's NCCL INFO lines (~200 each, ~100k lines) are interleaved with the header, the 512 rank
lines and the table, as mpirun forwards them. Every line is shaped on a real recording in
tests/data/nccl-tests and tests/data/nccl-debug-info; only hosts, pids and numbers vary.

    .venv/bin/python benchmarks/bench_nccl_parse.py [--ranks 512] [--info-per-rank 200] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nodecheck.parsers.nccl_tests import parse_nccl_tests
from nodecheck.parsers.nccl_tests_facts import Stage

INFO = [  # tests/data/nccl-debug-info/sglang-roce-nccl-2.27.5-*: one rank's lines
    "{h}:{p}:{p} [{d}] NCCL INFO cudaDriverVersion 13010",
    "{h}:{p}:{p} [{d}] NCCL INFO NCCL_SOCKET_IFNAME set by environment to enp25s0np0",
    "{h}:{p}:{p} [{d}] NCCL INFO Bootstrap: Using enp25s0np0:10.99.91.63<0>",
    "{h}:{p}:{p} [{d}] NCCL INFO NCCL_IB_GID_INDEX set by environment to 3.",
    "{h}:{p}:{p} [{d}] NCCL INFO Channel {c:02d}/0 : 9[1] -> 8[0] via P2P/IPC",
    "{h}:{p}:{p} [{d}] NCCL INFO Channel {c:02d}/0 : 8[0] -> 7[7] [send] via NET/IB/0/GDRDMA",
]


def build(ranks: int, info_per_rank: int) -> str:
    lines = [
        "# nccl-tests version 2.17.9 nccl-headers=22902 nccl-library=22902",
        "# Collective test starting: all_reduce_perf",
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 "
        "agg iters: 1 validation: 1 graph: 0",
        "#",
        "# Using devices",
    ]
    for r in range(ranks):
        lines.append(
            f"#  Rank {r:2d} Group  0 Pid {100000 + r:6d} on gpu{r // 8:04d} device {r % 8:2d} "
            f"[0000:{0x18 + r % 8:02x}:00] NVIDIA H100 80GB HBM3"
        )
    for r in range(ranks):
        for i in range(info_per_rank):
            lines.append(INFO[i % len(INFO)].format(h=f"gpu{r // 8:04d}", p=100000 + r, d=r % 8, c=i % 32))
    lines.append("NCCL version 2.29.2+cuda12.4")
    lines += [
        "#",
        "#                                                              out-of-place"
        "                       in-place          ",
        "#       size         count      type   redop    root     time   algbw   busbw  #wrong"
        "     time   algbw   busbw  #wrong ",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
        "             (us)  (GB/s)  (GB/s)         ",
    ]
    size = 8
    while size <= 8 << 30:
        bw = 370 * size / (size + (16 << 20))
        t = max(size / (bw / 1.998) / 1e3, 20.0)
        lines.append(
            f"{size:12d}  {size // 4:12d}     float     sum      -1  {t:7.1f}  {bw / 1.998:6.2f}  {bw:6.2f}       0"
            f"  {t:7.1f}  {bw / 1.998:6.2f}  {bw:6.2f}       0"
        )
        size *= 2
    lines += [
        "# Out of bounds values : 0 OK",
        "# Avg bus bandwidth    : 120.5 ",
        "#",
        "# Collective test concluded: all_reduce_perf",
        "#",
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=512)
    ap.add_argument("--info-per-rank", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    text = build(args.ranks, args.info_per_rank)
    walls = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        run = parse_nccl_tests(text)
        walls.append(time.perf_counter() - started)
    assert run.stage is Stage.DONE and len(run.devices) == args.ranks and len(run.rows) == 31, run.stage
    assert run.log_count == args.ranks * args.info_per_rank
    tracemalloc.start()
    parse_nccl_tests(text)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    lines = text.count("\n")
    print(
        f"{lines} lines ({len(text) / 1e6:.1f} MB), {args.ranks} ranks, {len(run.rows)} rows: "
        f"median {statistics.median(walls):.3f} s (min {min(walls):.3f}, max {max(walls):.3f}) over "
        f"{args.repeat} runs, {lines / statistics.median(walls) / 1e3:.0f}k lines/s, "
        f"peak traced memory {peak / 1e6:.1f} MB ({peak / len(text):.1f}x the text)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
