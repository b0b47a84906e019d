"""How long, and in how much memory, forensics takes to judge a big job's evidence: N ranks' flight-
recorder dumps of E entries each (TORCH_NCCL_TRACE_BUFFER_SIZE=2000 is the usual setting; every entry
with its Python frames), read with the restricted unpickler, compared per process group; then N
py-spy stacks parsed and grouped. Every dump is shaped on a real one (tests/data/flight-recorder/
mismatched/nccl_trace_rank_0, torch 2.13's own pickle: its keys, its frames); only the sequence
numbers grow, and one rank (3) takes the other collective at the last one, as in the incident.

    .venv/bin/python benchmarks/bench_forensics.py [--ranks 1024] [--entries 2000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import copy
import pickle
import resource
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from nodecheck.forensics.collectives import analyze, describe  # noqa: E402
from nodecheck.forensics.ranks import rank_process  # noqa: E402
from nodecheck.forensics.stacks import ProcessStack, describe_group, group_stacks  # noqa: E402
from nodecheck.parsers.flight_recorder import parse_dump  # noqa: E402
from nodecheck.parsers.forensics import JobProcess  # noqa: E402
from nodecheck.parsers.pyspy import parse_pyspy_dump  # noqa: E402
from nodecheck.parsers.watch_sample import Proc  # noqa: E402

DATA = ROOT / "tests" / "data"


def dumps(ranks: int, entries: int) -> list[bytes]:
    """Each rank's pickle: the recorded dump's first entry repeated with growing sequence numbers."""
    base = pickle.loads((DATA / "flight-recorder" / "mismatched" / "nccl_trace_rank_0").read_bytes())  # our own file
    template = base["entries"][0]
    out = []
    for r in range(ranks):
        d = copy.deepcopy(base)
        d["rank"] = r
        d["pg_config"] = {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(ranks)))}}
        rows = []
        for k in range(entries):
            e = dict(template, record_id=k, collective_seq_id=k + 1, retired=k < entries - 1)
            if k == entries - 1 and r == 3:
                e = dict(e, profiling_name="gloo:all_reduce", input_sizes=[[1]], output_sizes=[[1]])
            rows.append(e)
        d["entries"] = rows
        d["pg_status"] = {
            "0": {
                "last_enqueued_collective": entries,
                "last_started_collective": entries,
                "last_completed_collective": entries - 1,
            }
        }
        out.append(pickle.dumps(d, protocol=2))
    return out


def stacks(ranks: int) -> list[ProcessStack]:
    common = (DATA / "py-spy" / "recorded-hung-rank-all_reduce.txt").read_text()
    odd = (DATA / "py-spy" / "recorded-hung-rank-broadcast-via-aggregate.txt").read_text()
    out = []
    for r in range(ranks):
        p = rank_process(
            f"gpu{r // 8:04d}",
            JobProcess(
                Proc(10_000 + r, "Sl", 600, "python train.py", 1),
                {"RANK": str(r), "LOCAL_RANK": str(r % 8), "WORLD_SIZE": str(ranks)},
            ),
        )
        out.append(ProcessStack(p, parse_pyspy_dump(odd if r == 3 else common)))
    return out


def measure(fn):
    t = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - t


def held_mib(fn) -> float:
    """What fn's result holds in memory (traced allocations still alive after it returned)."""
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept = fn()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del kept
    return (after - before) / 2**20


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--entries", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    raw = dumps(a.ranks, a.entries)
    size = sum(len(b) for b in raw)
    parse_s, analyze_s, stack_s = [], [], []
    for _ in range(a.repeat):
        parsed, took = measure(lambda: [parse_dump(b, source=f"nccl_trace_rank_{i}") for i, b in enumerate(raw)])
        parse_s.append(took)
        findings, took = measure(lambda parsed=parsed: analyze(parsed))
        analyze_s.append(took)
        del parsed
        groups, took = measure(lambda: group_stacks(stacks(a.ranks)))
        stack_s.append(took)
    sample = min(a.ranks, 64)  # memory held by parsed dumps, per dump, on a sample
    per_dump = held_mib(lambda: [parse_dump(b) for b in raw[:sample]]) / sample
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    assert findings[0].kind == "mismatched", findings[0]
    assert len(groups) == 2 and groups[1].ranks == (3,), groups
    print(
        f"{a.ranks} ranks x {a.entries} entries: {size / 2**20:.0f} MiB of pickles "
        f"({size / a.ranks / 2**10:.0f} KiB a dump)"
    )
    print(
        f"  parse (restricted unpickler + typed entries): median {statistics.median(parse_s):.2f} s "
        f"({statistics.median(parse_s) / a.ranks * 1e3:.1f} ms a dump)"
    )
    print(f"  analyze (every process group):                median {statistics.median(analyze_s):.2f} s")
    print(f"  parsed dumps held in memory:                  {per_dump:.2f} MiB a dump")
    print(f"  peak RSS of this process:                     {rss:.0f} MiB")
    print(f"  {a.ranks} py-spy stacks parsed and grouped:        median {statistics.median(stack_s):.2f} s")
    print(f"  finding: {describe(findings[0])}")
    print(f"  stacks:  {describe_group(groups[1])}")


if __name__ == "__main__":
    main()
