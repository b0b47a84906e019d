"""Record real PyTorch flight-recorder dumps of hung gloo jobs (run by hand, never in CI).

    /tmp/torchvenv/bin/python tests/data/flight-recorder/record.py [scenario ...]

Each scenario launches WORLD local processes (gloo on 127.0.0.1). Every rank starts a watchdog
thread right after init_process_group; it dumps the rank's flight recorder while the job is hung
(pickle via _dump_fr_trace, JSON via _dump_fr_trace_json), named as PyTorch names them
(prefix nccl_trace_rank_ + rank), then os._exit()s. Nothing here is imported by nodecheck.
"""

from __future__ import annotations

import argparse
import datetime
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
GO_FILE = Path("/tmp/fr-record-same-collective.go")
PREFIX = "nccl_trace_rank_"  # PyTorch's default TORCH_FR_DUMP_TEMP_FILE basename
DUMP_AFTER_S = 3.0  # well after the last step could finish, well before the timeout
EXIT_GRACE_S = 2.0
OP_TIMEOUT_S = 20  # the collective timeout; the dump must come first

# scenario -> (world size, ring-buffer entries, base port)
SCENARIOS = {
    "mismatched": (8, 2000, 29600),
    "missing-rank": (4, 16, 29620),  # 16 entries < 20 steps: the ring buffer wraps
    "same-collective": (8, 2000, 29630),
    "never-started": (8, 2000, 29640),
}


def dump(out: Path, rank: int) -> None:
    """Write this rank's trace in both formats; rename so a half-written file never lands."""
    import torch._C._distributed_c10d as c10d

    for sub, blob in (("", c10d._dump_fr_trace()), ("json", c10d._dump_fr_trace_json())):
        target = out / sub / f"{PREFIX}{rank}"
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".tmp")
        tmp.write_bytes(blob)
        os.replace(tmp, target)


def watchdog(out: Path, rank: int, after_s: float = DUMP_AFTER_S) -> None:
    def fire() -> None:
        dump(out, rank)
        # stay up while the peers dump: an exiting peer closes its gloo pairs, and gloo counts
        # the resulting error as a *completed* collective in pg_status
        time.sleep(EXIT_GRACE_S)
        os._exit(0)

    threading.Timer(after_s, fire).start()


def steps(dist, torch, n: int, shape=(64, 32)) -> None:
    for _ in range(n):
        dist.all_reduce(torch.ones(*shape))


def hang() -> None:
    # stand-in for a rank stuck outside NCCL (dataloader, checkpoint I/O): the watchdog still dumps
    time.sleep(3600)


def worker(scenario: str, rank: int, world: int, port: int, out: Path) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=OP_TIMEOUT_S))
    if scenario != "same-collective":
        watchdog(out, rank)
    try:
        run_scenario(scenario, rank, world, dist, torch, out)
    except Exception as exc:  # a gloo error on a mismatched op: keep the state for the dump
        print(f"rank {rank}: {type(exc).__name__}: {str(exc)[:120]}", file=sys.stderr)
    hang()


def run_scenario(scenario: str, rank: int, world: int, dist, torch, out: Path) -> None:
    if scenario == "never-started":
        return
    if scenario == "mismatched":
        steps(dist, torch, 5)
        if rank == 3:  # left the loop early: the epoch-end barrier-ish all_reduce
            dist.all_reduce(torch.ones(1))
        else:  # gloo has no native reduce_scatter; all_gather is a distinct op
            dist.all_gather([torch.zeros(64) for _ in range(world)], torch.ones(64))
    elif scenario == "mismatched-sizes":
        steps(dist, torch, 3)
        dist.all_reduce(torch.ones(32, 32) if rank == 1 else torch.ones(64, 32))
    elif scenario == "missing-rank":
        steps(dist, torch, 20, shape=(1024,))
        if rank == 2:
            hang()
        dist.all_reduce(torch.ones(1024))
    elif scenario == "same-collective":
        steps(dist, torch, 3, shape=(1024,))
        time.sleep(0.5)  # let gloo retire step 3 everywhere before the snapshot
        if rank == 2:
            # enqueue the collective, dump before any peer can have joined, then freeze every
            # thread of this process (a wedged NIC/driver stand-in); the parent then lets the
            # others enter the same all_reduce, where they wait on rank 2 until dumped
            work = dist.all_reduce(torch.ones(1024), async_op=True)
            dump(out, rank)
            os.kill(os.getpid(), signal.SIGSTOP)
            work.wait()
        else:
            while not GO_FILE.exists():
                time.sleep(0.05)
            watchdog(out, rank, after_s=2.0)
            dist.all_reduce(torch.ones(1024))


def release_after_frozen(pid: int, dumped: Path) -> None:
    """Create GO_FILE once rank 2 has dumped and is stopped ('T' in /proc/<pid>/stat)."""
    GO_FILE.unlink(missing_ok=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if dumped.exists() and (dumped.parent / "json" / dumped.name).exists() and state == "T":
            GO_FILE.touch()
            return
        time.sleep(0.05)
    raise SystemExit("rank 2 never froze")


def launch(scenario: str) -> None:
    world, buffer_size, port = SCENARIOS[scenario]
    out = HERE / scenario
    env = dict(os.environ, TORCH_FR_BUFFER_SIZE=str(buffer_size), PYTHONWARNINGS="ignore")
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--worker", scenario, str(rank), str(world), str(port), str(out)],
            env=env,
            cwd="/tmp",
        )
        for rank in range(world)
    ]
    if scenario == "same-collective":
        release_after_frozen(procs[2].pid, out / f"{PREFIX}2")
    deadline = time.monotonic() + 60
    for p in procs:
        try:
            p.wait(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()  # the SIGSTOPped rank of same-collective
            p.wait()
    print(f"{scenario}: {sorted(f.name for f in out.iterdir())}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", nargs=5, metavar=("SCENARIO", "RANK", "WORLD", "PORT", "OUT"))
    ap.add_argument("scenarios", nargs="*", default=list(SCENARIOS))
    args = ap.parse_args()
    if args.worker:
        scenario, rank, world, port, out = args.worker
        worker(scenario, int(rank), int(world), int(port), Path(out))
    else:
        for scenario in args.scenarios:
            launch(scenario)


if __name__ == "__main__":
    main()
