"""A fake training rank hung in a collective: real Python stacks for py-spy to dump.

Usage: /usr/bin/python3 -I tests/fakes/hung_rank.py train.py --rank R --local-rank L \
           --collective NAME [--via-aggregate] [--step N] [--threads] [--pid-file PATH]

"train.py" in argv is only there so that `pgrep -f 'train\\.py'` finds the process like a real job.
Standard library only (Python >= 3.9). See tests/fakes/README.md, section "hung_rank.py".
"""
import argparse
import os
import signal
import sys
import threading

# -I leaves the script's directory off sys.path; the frames' modules live next to it, in a directory
# without __init__.py so that py-spy prints bare file names ("distributed_c10d.py").
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "hung_rank_pkg"))

import distributed_c10d  # noqa: E402
import training  # noqa: E402

COLLECTIVES = ("all_reduce", "reduce_scatter", "broadcast", "barrier", "all_gather", "none")
WATCHDOG_THREAD = "pt_nccl_watchdog"


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="hung_rank.py")
    parser.add_argument("script", help='"train.py", for pgrep -f')
    parser.add_argument("--rank", type=int, default=0)
    parser.add_argument("--local-rank", type=int, default=0)
    parser.add_argument("--collective", choices=COLLECTIVES, required=True)
    parser.add_argument("--via-aggregate", action="store_true",
                        help="reach the collective through engine._aggregate_total_loss")
    parser.add_argument("--step", type=int, default=0)
    parser.add_argument("--threads", action="store_true",
                        help=f"also run a {WATCHDOG_THREAD!r} thread sleeping in watchdog_loop")
    parser.add_argument("--pid-file", help="written (atomically) once the stack is in place")
    args = parser.parse_args(argv)
    if args.via_aggregate and args.collective in ("none", "barrier"):
        parser.error(f"--via-aggregate needs a collective with a tensor, not {args.collective}")
    # a launcher (torchrun, srun) gives ranks in the environment; those win over the arguments
    args.rank = int(os.environ.get("RANK", args.rank))
    args.local_rank = int(os.environ.get("LOCAL_RANK", args.local_rank))
    return args


def _terminate(signum, frame):
    raise SystemExit(0)  # unwinds the hung stack: finally blocks run, exit status 0


def _pid_file_writer(path):
    def write():
        if path:
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w") as f:
                f.write(f"{os.getpid()}\n")
            os.replace(tmp, path)  # a reader never sees a half-written pid
    return write


def main(argv):
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    stop = threading.Event()
    if args.threads:
        # started first so that it is asleep before the main thread reports its stack in place
        threading.Thread(target=distributed_c10d.watchdog_loop, args=(stop,),
                         name=WATCHDOG_THREAD, daemon=True).start()
    try:
        on_blocked = _pid_file_writer(args.pid_file)
        training.train(args.collective, args.via_aggregate, args.step, args.rank, on_blocked)  # CALL: main
    finally:
        stop.set()
        if args.pid_file and os.path.exists(args.pid_file):
            os.unlink(args.pid_file)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))  # CALL: <module>
