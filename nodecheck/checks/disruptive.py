"""What every disruptive active check does before it loads a node (a port flap, DCGM's levels >= 2, the
GPU benchmarks): nothing at all without --allow-disruptive, and no step the run's deadline would cut.
The node-side half, the idle guard, is nodecheck.probes.idle."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from nodecheck.checks.context import AFTER_RESERVE_S, ActiveContext
from nodecheck.core.model import Capture, Outcome, Probe, Status, Verdict, excerpt
from nodecheck.probes.idle import refusal


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


def did_not_complete(out: Capture, label: str) -> Verdict | None:
    """The step's verdict when it did not run to its end (timed out, unreachable, failed to start):
    not judged, and never healthy. None: it exited."""
    if out.outcome is Outcome.EXITED:
        return None
    how = out.outcome.value + (f": {out.detail}" if out.detail else "")
    status = {Outcome.TIMEOUT: Status.TIMEOUT, Outcome.UNREACHABLE: Status.UNREACHABLE}.get(out.outcome, Status.ERROR)
    return Verdict(
        status, f"{label} did not complete ({how}); not judged", excerpt=excerpt(out.stdout + out.stderr), cut=out.cut
    )


def busy(facts: Mapping[str, str], label: str) -> Verdict | None:
    """SKIPPED "not run: busy" when the idle guard refused the node (its `@@nodecheck refuse` fact)."""
    why = refusal(facts)
    return None if why is None else Verdict(Status.SKIPPED, f"{label} not run: busy — {why}", observed={"refused": why})
