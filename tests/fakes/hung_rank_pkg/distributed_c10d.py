"""Collectives named like torch.distributed's, each blocking for ever in `wait` like a NCCL work
whose peers never arrive (the fake hung_rank.py's innermost frames)."""
import time

# A real hang parks the main thread in the collective until the job is killed; an hour per sleep
# keeps the process idle (py-spy reports it "idle") and the loop keeps it there past any sleep.
_FOREVER_S = 3600.0


def wait(on_blocked):
    on_blocked()  # the stack is in place: tell whoever waits to dump it
    while True:
        time.sleep(_FOREVER_S)  # BLOCKED: wait


def all_reduce(tensor, on_blocked):
    return wait(on_blocked)  # CALL: all_reduce


def reduce_scatter(tensor, on_blocked):
    return wait(on_blocked)  # CALL: reduce_scatter


def broadcast(tensor, on_blocked):
    return wait(on_blocked)  # CALL: broadcast


def barrier(on_blocked):
    return wait(on_blocked)  # CALL: barrier


def all_gather(tensor, on_blocked):
    return wait(on_blocked)  # CALL: all_gather


def watchdog_loop(stop):
    # torch's NCCL watchdog is a C++ thread; this Python stand-in gives a dump a second thread.
    while not stop.is_set():
        time.sleep(_FOREVER_S)  # BLOCKED: watchdog_loop
