"""A playbook's `gate:` block: the Slurm gate's settings as an operator writes them (decided on in
nodecheck.gate.decide). Here, below the gate, so a playbook can hold them without importing the gate."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

DrainOn = Literal["fail", "timeout", "unreachable"]


class GateSettings(BaseModel):
    """A playbook's `gate:` block; the command line overrides each key."""

    model_config = ConfigDict(extra="forbid")
    drain_on: list[DrainOn] | None = Field(
        None,
        min_length=1,
        description="statuses that drain a node, from fail, timeout, unreachable (ERROR and SKIPPED never "
        "drain). Default: on the node itself (node Prolog, local health) fail and timeout, a tool that hangs "
        "there being the node's fault; over SSH (prolog --controller, health with an inventory, sweep "
        "--drain) fail only, an unreachable or timed-out node being incomplete, not unhealthy",
    )
    retries: int = Field(
        1, ge=0, le=10, strict=True, description="re-runs of a failing flaky-prone check before its failure stands"
    )
    flaky: list[str] | None = Field(
        None,
        description="checks retried before draining (default: the "
        "bandwidth tests: ib.pairs, nccl.allreduce_single, nccl.allreduce_multi)",
    )
    breaker_share: float = Field(
        0.10,
        gt=0,
        le=1,
        allow_inf_nan=False,
        description="one check failing on more than this share of the nodes trips the breaker: nothing is drained",
    )
    breaker_min_nodes: int = Field(
        10, ge=1, strict=True, description="the breaker only judges runs (or clusters) of at least this many nodes"
    )
    breaker_window_s: float = Field(
        600.0,
        gt=0,
        le=86_400,
        allow_inf_nan=False,
        description="node Prolog and local health: nodecheck drains for the same "
        "check set this long before the run count towards the breaker",
    )
    settle_s: float = Field(
        3.0,
        ge=0,
        le=60,
        allow_inf_nan=False,
        description="node Prolog: after draining itself, wait this long for the job's other "
        "Prologs, then count nodecheck's drains cluster-wide for the breaker",
    )
