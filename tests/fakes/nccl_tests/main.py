"""The entry point: which program a node's wrapper asked for (MODE), on which node."""

from __future__ import annotations

import os
import signal
import sys

from nccl_tests.launch import agent_main
from nccl_tests.mpirun import mpirun_main
from nccl_tests.perf import perf_main
from nccl_tests.srun import srun_main
from nccl_tests.state import AGENT_FLAG, HARD_CAP_S, LAUNCHERS, PERF_TOOLS, Ctx, State


def main(argv: list[str]) -> int:
    if len(argv) < 6:
        sys.stderr.write("usage: nccl_tests.py NODE NODE_ADDRESS NET STATE_JSON MODE ARGV0 [args]\n")
        return 2
    node, address, net, state_path, mode, argv0, *args = argv
    ctx = Ctx(node, address, net, state_path, State.load(state_path))
    if mode in LAUNCHERS and args[:1] == [AGENT_FLAG]:
        return agent_main(ctx)
    if mode == "mpirun":
        return mpirun_main(ctx, args)
    if mode == "srun":
        return srun_main(ctx, args)
    if mode in PERF_TOOLS:
        signal.signal(signal.SIGALRM, lambda *_: os._exit(1))
        signal.alarm(HARD_CAP_S)
        try:
            return perf_main(ctx, mode, argv0, args)
        except BrokenPipeError:
            os._exit(1)
    sys.stderr.write(f"nccl_tests.py: unknown mode {mode!r}\n")
    return 2
