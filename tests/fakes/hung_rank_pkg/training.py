"""The training loop of the fake rank: steps until `step`, then hangs where it was told to."""
import functools

import dataloader
import distributed_c10d
import engine


def train(collective, via_aggregate, step, rank, on_blocked):
    # rank and step are locals so that `py-spy dump --locals` shows them, as in a real loop
    loss = [float(rank)]
    if collective == "none":
        batch = next(dataloader.DataLoaderIter(on_blocked))  # CALL: train none
        return batch
    if collective == "barrier":
        return distributed_c10d.barrier(on_blocked)  # CALL: train barrier
    op = getattr(distributed_c10d, collective)
    if via_aggregate:
        return engine._aggregate_total_loss(op, loss, on_blocked)  # CALL: train via-aggregate
    return op(loss, on_blocked)  # CALL: train direct
