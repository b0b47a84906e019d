"""The watcher's own cost per tick at fleet scale, without a cluster: parsing every node's sample
(8 GPUs, processes, a 64 KiB log tail), reading progress from the tails, Tracker.update, and the
state it saves every tick (to_json size, json.dumps, from_json). Pure CPU.

    .venv/bin/python benchmarks/bench_watch.py [--nodes 1000] [--ticks 30]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import time
from pathlib import Path

from nodecheck.parsers.watch_sample import parse_sample, read_progress
from nodecheck.watch.classify import Tracker
from nodecheck.watch.config import WatchConfig
from nodecheck.watch.verdicts import Observation, Tick

SAMPLE = (
    Path(__file__).resolve().parent.parent
    / "tests"
    / "data"
    / "watch"
    / "constructed-sample-h100x8-training-torchtitan.txt"
).read_text()


def sample_text(node: int, step: int) -> str:
    """The recorded-shape sample with this tick's step lines: a full 64 KiB log tail."""
    lines = []
    size = 0
    s = step
    while size < 64 * 1024:
        line = f"[rank0]: step: {s}  loss: 7.1234  memory: 31.20GiB(39.43%)  tps: 5,400  mfu: 41.20%\n" + "".join(
            f"rank {node * 8 + g} step {s} time 0.1{g}s\n" for g in range(8)
        )
        lines.insert(0, line)
        size += len(line)
        s -= 1
    head, marker, _ = SAMPLE.rpartition("@@nodecheck begin log_tail\n")
    assert marker, "the sample's shape changed: no log_tail section"
    return head + marker + "".join(lines) + "\n@@nodecheck end log_tail rc=0\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--ticks", type=int, default=30)
    args = ap.parse_args()
    cfg = WatchConfig.model_validate(
        {
            "match": "train",
            "progress": {
                "log": "/root/train.log",
                "rank_time_regex": r"rank (?P<rank>\d+) step \d+ time (?P<seconds>[\d.]+)s",
            },
        }
    )
    nodes = [f"gpu{i:05d}" for i in range(args.nodes)]
    parse_s, progress_s, update_s, dump_s = [], [], [], []
    tracker = Tracker(cfg, nodes)
    state = ""
    for t in range(args.ticks):
        texts = [sample_text(i, 1000 + t) for i in range(min(args.nodes, 50))]  # 50 distinct tails, reused
        started = time.perf_counter()
        samples = [parse_sample(texts[i % len(texts)]) for i in range(args.nodes)]
        parse_s.append(time.perf_counter() - started)
        started = time.perf_counter()
        obs = tuple(Observation(n, s, "", read_progress(s.log_tail, cfg.progress)) for n, s in zip(nodes, samples))
        progress_s.append(time.perf_counter() - started)
        started = time.perf_counter()
        verdict = tracker.update(Tick(1_800_000_000.0 + 30 * t, obs, "RUNNING"))
        update_s.append(time.perf_counter() - started)
        started = time.perf_counter()
        state = json.dumps(tracker.to_json())
        dump_s.append(time.perf_counter() - started)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    started = time.perf_counter()
    Tracker.from_json(cfg, nodes, json.loads(state))
    load_s = time.perf_counter() - started
    med = statistics.median
    print(f"{args.nodes} nodes x 8 GPUs, {args.ticks} ticks; last verdict: {verdict.message[:150]}")
    print(f"parse_sample (all nodes):   median {med(parse_s) * 1000:8.1f} ms per tick")
    print(f"read_progress (64 KiB tails): median {med(progress_s) * 1000:8.1f} ms per tick")
    print(f"Tracker.update:             median {med(update_s) * 1000:8.1f} ms per tick")
    print(f"state json.dumps:           median {med(dump_s) * 1000:8.1f} ms per tick, {len(state) / 1e6:.2f} MB")
    print(f"Tracker.from_json:          {load_s * 1000:8.1f} ms")
    print(f"peak RSS of the process:    {peak / 1e6:8.1f} MB (every sample of a tick held at once)")


if __name__ == "__main__":
    main()
