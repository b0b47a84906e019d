"""The loss aggregation step that reaches a collective from inside the engine (Megatron-like)."""
import distributed_c10d


def _aggregate_total_loss(collective, loss, on_blocked):
    return collective(loss, on_blocked)  # CALL: _aggregate_total_loss
