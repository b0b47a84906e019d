"""Record the forensics probes' real output on this machine (run by hand, as root, not in CI):

    sudo .venv/bin/python tests/data/forensics/record.py tests/data/forensics

Starts three fake ranks (tests/fakes/hung_rank.py) with a launcher's rank variables and a flight-recorder
prefix, writes two dump files and a job log with NCCL WARN lines, freezes rank 2 (cgroup freezer: py-spy
gets no answer), then runs the real snapshot, stacks and fetch probes (nodecheck/forensics/probe.py) with
/bin/sh and the venv's py-spy, and writes what they printed.
"""

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "fakes"))

import freeze  # noqa: E402

from nodecheck.forensics.probe import fetch_probe, snapshot_probe, stacks_probe  # noqa: E402


def run(probe):
    return subprocess.run(probe.argv, capture_output=True, text=True, timeout=probe.timeout_s).stdout


def main(out: Path) -> None:
    work = Path(tempfile.mkdtemp(prefix="nc-forensics-record-"))
    prefix = f"{work}/fr/trace_rank_"
    (work / "fr").mkdir()
    for rank in (0, 1):
        Path(f"{prefix}{rank}").write_bytes(b"\x80\x04\x95" + bytes(range(256)) * 4)
    # what a hostile job leaves under its prefix: a symbolic link to a root-only file (listed as refused,
    # and refused by the fetch even when asked for it by name)
    secret = work / "root-only-secret"
    secret.write_text("NODECHECK-SECRET-MARKER\n")
    secret.chmod(0o600)
    Path(f"{prefix}2").symlink_to(secret)
    log = work / "train.log"
    log.write_text(
        "step 10 loss 2.1\nnode1:4242:4300 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n"
        "node1:4242:4301 [0] transport/net_ib.cc:1701 NCCL WARN NET/IB : Got completion from peer "
        "10.0.0.2<47622> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.0.0.1 "
        "remoteGids::ffff:10.0.0.2 hca mlx5_3\n"
        "node1:4242:4301 [0] NCCL WARN Cuda failure 'an illegal memory access was encountered'\n"
    )
    procs, pids = [], []
    for rank, collective in ((0, "reduce_scatter"), (1, "reduce_scatter"), (2, "all_reduce")):
        env = dict(
            os.environ,
            RANK=str(rank),
            LOCAL_RANK=str(rank),
            WORLD_SIZE="4",
            LOCAL_WORLD_SIZE="4",
            GROUP_RANK="0",
            CUDA_VISIBLE_DEVICES="0,1,2,3",
            TORCH_FR_DUMP_TEMP_FILE=prefix,
            TORCH_NCCL_DUMP_ON_TIMEOUT="1",
            SECRET_TOKEN="never-leaves-the-node",
            NCCL_ODD="line one\nRANK=99",
        )
        pid_file = work / f"rank-{rank}.pid"
        procs.append(
            subprocess.Popen(
                [
                    "/usr/bin/python3",
                    "-I",
                    str(ROOT / "tests/fakes/hung_rank.py"),
                    "train.py",
                    "--collective",
                    collective,
                    "--pid-file",
                    str(pid_file),
                ]
                + (["--via-aggregate"] if rank == 2 else []),
                env=env,
            )
        )
        while not pid_file.exists():
            time.sleep(0.01)
        pids.append(procs[-1].pid)
    frozen = freeze.freeze([pids[2]], "nodecheck-record")
    try:
        pattern = f"hung_rank\\.py train\\.py .*{work.name}"  # this run's ranks only
        (out / "recorded-snapshot-three-ranks-no-nvidia-smi.txt").write_text(
            run(snapshot_probe("match", pattern, "node1", str(log), None, 20))
        )
        (out / "recorded-stacks-two-answer-one-frozen.txt").write_text(
            run(stacks_probe(pids, 3, True, str(ROOT / ".venv/bin/py-spy")))
        )
        (out / "recorded-stacks-no-pyspy.txt").write_text(run(stacks_probe(pids[:1], 3, True, "/nonexistent/py-spy")))
        uid = os.getuid()
        (out / "recorded-fetch-dump-gzip.txt").write_text(run(fetch_probe(0, f"{prefix}0", uid, 1 << 20, 10)))
        (out / "recorded-fetch-too-large.txt").write_text(run(fetch_probe(0, f"{prefix}0", uid, 100, 10)))
        (out / "recorded-fetch-missing.txt").write_text(run(fetch_probe(0, f"{prefix}9", uid, 100, 10)))
        (out / "recorded-fetch-refused-symlink.txt").write_text(run(fetch_probe(0, f"{prefix}2", uid, 1 << 20, 10)))
        (out / "recorded-fetch-refused-owner.txt").write_text(
            run(fetch_probe(0, f"{prefix}0", uid + 4242, 1 << 20, 10))
        )
    finally:
        freeze.thaw(frozen)
        for p in procs:
            p.terminate()
            p.wait()
    print(f"pids {pids}; work dir {work}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
