"""time.skew: every node's clock read from the operator host, judged against the fleet's median.

Each node's `date +%s.%N` is read K times; the sample with the shortest round trip is kept. The
node printed its time somewhere between the operator's wall clock before and after the call, so
    offset = node time - (before + after) / 2,   uncertainty = (after - before) / 2.
Nodes are judged against the median of all offsets (robust to the operator host's own clock being
off, and to a minority of bad nodes); with fewer than 3 nodes there is no median worth the name and
the operator's clock is the reference, which the message says. On the node itself (the local
transport) there is no operator clock apart from the node's: not judged, SKIPPED.
"""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from nodecheck.checks.context import ActiveContext
from nodecheck.core.model import Capture, Outcome, Status, Verdict, excerpt
from nodecheck.core.registry import check
from nodecheck.core.thresholds import Ceiling, fmt
from nodecheck.parsers.lines import split_lines
from nodecheck.probes.time_sync import DATE

Grouped = tuple[tuple[str, ...], Verdict]
_EPOCH = re.compile(r"^\s*([0-9]{9,12}\.[0-9]{1,9})\s*$")
MIN_NODES_FOR_MEDIAN = 3
ON_THIS_HOST = (
    "not judged: nodecheck runs on the node itself (--local, the Prolog, health), so there is no other clock "
    "to compare it with; run time.skew from the operator host over SSH"
)


class TimeSkew(BaseModel):
    """How far a node's clock may be from the fleet's, and how many reads to take."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    offset_s: Ceiling = Field(
        # 1 s: chrony's default configuration steps a clock off by more than 1 s (makestep 1 3,
        # chrony.conf(5)) and STIG V-219332 requires correcting a difference over one second; 0.1 s is
        # time.sync's own failure bound, which a node past it has evidently missed
        Ceiling(warn_above=0.1, fail_above=1.0),
        description="|node clock - fleet median| in seconds (operator clock with fewer than 3 nodes)",
    )
    samples: int = Field(
        3, ge=1, le=20, strict=True, description="reads per node; the one with the shortest round trip is kept"
    )


@dataclass(frozen=True)
class Sample:
    offset_s: float  # node clock - operator clock at the read's midpoint
    rtt_s: float  # the read's round trip on the operator's clock

    @property
    def uncertainty_s(self) -> float:
        return self.rtt_s / 2


@dataclass(frozen=True)
class SkewReport:
    """The JSON report's time.skew block: every node's offset and round trip, the reference."""

    reference: str  # "fleet median" or "operator clock"
    median_s: float  # the reference's offset from the operator's clock (0 for "operator clock")
    spread_s: float  # max - min of the node offsets
    samples: dict[str, Sample]

    def as_json(self, incomplete: Sequence[str]) -> dict:
        return {
            "reference": self.reference,
            "median_offset_s": self.median_s,
            "operator_offset_s": -self.median_s,
            "spread_s": self.spread_s,
            "nodes": {
                n: {"offset_s": s.offset_s, "rtt_s": s.rtt_s, "uncertainty_s": s.uncertainty_s}
                for n, s in self.samples.items()
            },
            "incomplete": list(incomplete),
        }


# DATE is also its passive probe: a node that did not answer the run's first round (unreachable,
# host key) then gets the run's one result for it, like every other check, and is not read again
@check("time.skew", probes=[DATE], params=TimeSkew, scope="active")
def skew(ctx: ActiveContext, want: TimeSkew) -> Iterator[Grouped]:
    """Every node's clock against the fleet's median, read from the operator host with the round trip
    bounding the error (a node seconds off breaks munge, log order and timeouts across ranks). Run on
    the node itself (--local, the Prolog, health) it is SKIPPED: there is no other clock to compare."""
    nodes = list(ctx.nodes)
    if ctx.on_this_host:  # the operator host is the node: its clock against itself says nothing
        for node in nodes:
            yield (node,), Verdict(Status.SKIPPED, ON_THIS_HOST)
        return
    read = ctx.each(nodes, lambda node: _read(ctx, node, want.samples))
    samples: dict[str, Sample] = {}
    for node, (sample, problem) in zip(nodes, read):
        if problem is not None:
            yield (node,), problem
        if sample is not None:
            samples[node] = sample
    if not samples:
        return
    offsets = sorted(s.offset_s for s in samples.values())
    if len(samples) >= MIN_NODES_FOR_MEDIAN:
        median = statistics.median(offsets)
        # the median's own error: the widest of the samples it is taken from
        middle = sorted(samples.values(), key=lambda s: s.offset_s)
        k = len(middle)
        median_u = max(s.uncertainty_s for s in middle[(k - 1) // 2 : k // 2 + 1])
        reference = "fleet median"
    else:
        median, median_u, reference = 0.0, 0.0, "operator clock"
    spread = offsets[-1] - offsets[0]
    ctx.report(SkewReport(reference, median, spread, samples))
    for node, sample in samples.items():
        yield (node,), _judge(node, sample, median, median_u, reference, spread, want)


def _read(ctx: ActiveContext, node: str, count: int) -> tuple[Sample | None, Verdict | None]:
    """The node's best of `count` reads, or why there is none."""
    best: Sample | None = None
    for _ in range(count):
        if ctx.stopped() or ctx.left() < DATE.timeout_s:
            break
        before = time.time()
        out = ctx.run(node, DATE)
        after = time.time()
        if out.outcome is not Outcome.EXITED or out.exit_code != 0:
            return best, None if best else _failed(out)
        m = _EPOCH.match(out.stdout)
        if not m:
            first = next((ln.strip() for ln in split_lines(out.stdout) if ln.strip()), "nothing")
            return None, Verdict(
                Status.ERROR,
                f"`date +%s.%N` printed {first[:80]!r}, not seconds.nanoseconds (a date without %N, such as "
                "busybox's?): clock not read",
                excerpt=excerpt(out.stdout + out.stderr),
            )
        sample = Sample(float(m.group(1)) - (before + after) / 2, after - before)
        if best is None or sample.rtt_s < best.rtt_s:
            best = sample
    if best is None:
        why = "a stop was asked" if ctx.stopped() else f"{ctx.left():.0f} s left before the run's deadline"
        return None, Verdict(Status.SKIPPED, f"clock not read: {why}")
    return best, None


def _failed(out: Capture) -> Verdict:
    status = {
        Outcome.TIMEOUT: Status.TIMEOUT,
        Outcome.UNREACHABLE: Status.UNREACHABLE,
        Outcome.SKIPPED: Status.SKIPPED,
    }.get(out.outcome, Status.ERROR)
    said = next((ln.strip() for ln in split_lines(out.stderr) if ln.strip()), out.detail or "no message")
    how = f"exited {out.exit_code}" if out.outcome is Outcome.EXITED else out.outcome.value
    return Verdict(status, f"clock not read: date {how}: {said}", excerpt=excerpt(out.stdout + out.stderr), cut=out.cut)


def _judge(
    node: str, s: Sample, median: float, median_u: float, reference: str, spread: float, want: TimeSkew
) -> Verdict:
    off = s.offset_s - median
    u = s.uncertainty_s + median_u
    low, high = max(0.0, abs(off) - u), abs(off) + u
    fail, warn = want.offset_s.fail_above, want.offset_s.warn_above
    way = "ahead of" if off > 0 else "behind"
    against = (
        f"the fleet median (which is {_s(median)} s {'ahead of' if median > 0 else 'behind'} the operator host)"
        if reference == "fleet median"
        else f"the operator host's clock (fewer than {MIN_NODES_FOR_MEDIAN} nodes: no fleet median)"
    )
    seen = f"{node} clock {_s(abs(off))} s ± {_s(u)} s {way} {against}"
    observed = {
        "offset_s": off,
        "uncertainty_s": u,
        "rtt_s": s.rtt_s,
        "offset_to_operator_s": s.offset_s,
        "reference": reference,
        "median_offset_s": median,
        "operator_offset_s": -median,
        "spread_s": spread,
    }
    if low > fail:
        return Verdict(
            Status.FAIL, f"{seen}, expected within {fmt(fail)} s", node, observed, {"max_abs_offset_s": fail}
        )
    if high > fail:
        return Verdict(
            Status.ERROR,
            f"{seen}: cannot tell whether it is within {fmt(fail)} s, the round trip ({_s(s.rtt_s)} s) was too "
            "long to bound the offset",
            node,
            observed,
            {"max_abs_offset_s": fail},
        )
    if warn is not None and abs(off) > warn:
        return Verdict(
            Status.WARN, f"{seen}, expected within {fmt(warn)} s", node, observed, {"max_abs_offset_s": warn}
        )
    limit = warn if warn is not None else fail
    return Verdict(Status.PASS, f"{seen}, within {fmt(limit)} s", node, observed, {"max_abs_offset_s": limit})


def _s(seconds: float) -> str:
    """Seconds to the millisecond, never "-0.000"."""
    shown = round(seconds, 3)
    return f"{shown if shown else 0.0:.3f}"
