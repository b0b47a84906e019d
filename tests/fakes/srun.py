#!/usr/bin/env python3
"""A fake `srun` for the srun transport's unit tests: runs each task of a step here, as the real one
runs them on the nodes: `/bin/sh -s` with SLURMD_NODENAME set, the step's stdin to every task
(--input=all), each output line labelled with the task id (--label), stdout and stderr apart.

Faults, by environment:
  FAKE_SRUN_DOWN=node2,node5   Slurm cannot start the task there: srun says so and aborts the step
                               (the other tasks are killed), exit 1, as Slurm 22.05 does
  FAKE_SRUN_LOG=FILE           append one line per step: the --nodelist it was given
(srun passes only some of its environment on: tests set these in a wrapper script, see
tests/transport/test_srun.py.)

Interrupted (nodecheck cancels a step with SIGINT), it ends every task with all it started, as
slurmstepd kills a cancelled step's cgroup; and SIGINT is its to handle even when it was started with
SIGINT ignored (a suite run as a background job), as the real srun makes sure (_srun_signal_mgr:
"make sure no required signals are ignored (possibly inherited)"). Everything else about a real step
(credentials, slurmstepd) is out of scope: the integration tests run the real srun."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

from ClusterShell.NodeSet import NodeSet


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.default_int_handler)
    opts = dict(a[2:].split("=", 1) for a in argv if a.startswith("--") and "=" in a)
    nodes = list(NodeSet(opts["nodelist"]))
    if log := os.environ.get("FAKE_SRUN_LOG"):
        with open(log, "a") as f:
            f.write(opts["nodelist"] + "\n")
    script = sys.stdin.buffer.read()
    down = [n for n in os.environ.get("FAKE_SRUN_DOWN", "").split(",") if n in nodes]
    if down:
        for n in down:
            print(
                f"srun: error: Task launch for StepId=7.0 failed on node {n}: Communication connection failure",
                file=sys.stderr,
            )
        print("srun: error: Application launch failed: Communication connection failure", file=sys.stderr)
        return 1
    lock = threading.Lock()
    procs, pumps = [], []
    for tid, node in enumerate(nodes):
        env = {"SLURMD_NODENAME": node, "PATH": "/usr/bin:/bin"}
        p = subprocess.Popen(
            ["/bin/sh", "-s"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,  # the task's session: all it starts, `timeout`'s own group too
        )
        p.stdin.write(script)
        p.stdin.close()
        procs.append(p)
        for stream, out in ((p.stdout, sys.stdout.buffer), (p.stderr, sys.stderr.buffer)):
            pumps.append(threading.Thread(target=_pump, args=(tid, stream, out, lock), daemon=True))
            pumps[-1].start()
    try:
        codes = [p.wait() for p in procs]
    except KeyboardInterrupt:  # the step is cancelled
        _kill_sessions({p.pid for p in procs})
        return 130
    for pump in pumps:  # every line out before srun ends, as the real one
        pump.join()
    return max(codes)


def _kill_sessions(sids: set[int]) -> None:
    """SIGKILL every process of these sessions (a task's shell, its `timeout`, the tool)."""
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as f:
                session = int(f.read().rpartition(")")[2].split()[3])
        except (OSError, ValueError, IndexError):
            continue
        if session in sids:
            try:
                os.kill(int(entry), signal.SIGKILL)
            except ProcessLookupError:
                pass


def _pump(tid: int, stream, out, lock) -> None:
    for line in stream:
        with lock:
            out.write(f"{tid}: ".encode() + line)
            out.flush()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
