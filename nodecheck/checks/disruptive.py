"""What every disruptive active check does before it loads a node (a port flap, DCGM's levels >= 2, the
GPU benchmarks): nothing at all without --allow-disruptive, and no step the run's deadline would cut.
The node-side half, the idle guard, is nodecheck.probes.idle."""

from __future__ import annotations

from collections.abc import Iterator

from nodecheck.checks.context import AFTER_RESERVE_S, ActiveContext
from nodecheck.core.model import Probe, Status, Verdict


def without_consent(ctx: ActiveContext, what: str) -> Iterator[tuple[tuple[str, ...], Verdict]]:
    """Every node SKIPPED (never healthy): `what` the check would do, said to the operator who did not
    give --allow-disruptive ("takes RoCE ports down")."""
    for node in ctx.nodes:
        yield (node,), Verdict(Status.SKIPPED, f"disruptive ({what}): not run without --allow-disruptive")


def not_started(ctx: ActiveContext, node: str, probe: Probe, label: str, fix: str) -> Verdict | None:
    """SKIPPED, and the run marked incomplete, when the deadline (or a stop) would cut the step: it is
    never started. None: there is time."""
    needs = probe.timeout_s + AFTER_RESERVE_S
    if not ctx.stopped() and ctx.left() >= needs:
        return None
    ctx.incomplete(f"{node}: {label} not started ({ctx.left():.0f} s left, it may take {needs:.0f} s)")
    return Verdict(
        Status.SKIPPED,
        f"{label} not started: {ctx.left():.0f} s left before the run's deadline, it may take "
        f"{probe.timeout_s:.0f} s ({fix})",
    )
