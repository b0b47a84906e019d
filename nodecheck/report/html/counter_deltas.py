"""Every IB port's counter deltas over the run, for the page: the two reads ib.counters took (its
captures before and after the active checks) parsed again with the pure parsers and differenced by
judging.counter_rules. The verdicts keep only the counters that rose past a limit; an operator
reading a port wants all of them (traffic too, as Gb/s). Pure but for read_capture."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from nodecheck.checks.ib_counters import port_reads
from nodecheck.core.errors import ParseError
from nodecheck.judging import counter_rules as C
from nodecheck.parsers.perfquery import PortCounters
from nodecheck.parsers.sections import Sections, split_sections
from nodecheck.report import capture_relpath

BEFORE, AFTER = "ib_counters", "ib_counters.after"  # nodecheck.checks.ib_counters' probes
_PORT = re.compile(r"^@@nodecheck port (\S+) (\S+) ?(.*)$", re.M)
_OCTETS_PER_UNIT = 4  # *Data counters count 32-bit words (perfquery(8))


@dataclass(frozen=True)
class CounterChange:
    counter: str
    kind: str  # its class: fail_on_increase, rate, congestion, info
    increase: int | None  # None: unknown (saturated before, missing in one read)
    per_hour: float | None
    state: str  # ok | saturated | reset | missing
    gbps: float | None = None  # the *Data counters: traffic in Gb/s over the window


@dataclass(frozen=True)
class PortDeltas:
    node: str
    port: str  # "mlx5_0/1"
    source: str  # "perfquery -x", "perfquery", "sysfs counters"
    window_s: float
    changes: tuple[CounterChange, ...]  # the counters that changed (or whose change is unknown)


def port_deltas(node: str, read_capture: Callable[[str], str | None]) -> list[PortDeltas]:
    """Each port of `node` read twice: its counters that changed, in counter_rules' order. []
    when either read is missing or has no clock to measure the window by."""
    first, second = read_capture(capture_relpath(node, BEFORE)), read_capture(capture_relpath(node, AFTER))
    if not first or not second:
        return []
    before, after = split_sections(first, BEFORE), split_sections(second, AFTER)
    window = _window(before.facts, after.facts)
    if window is None:
        return []
    out = []
    for ca, port, _ in _PORT.findall(second):
        pair = _pair(ca, port, before, after)
        if pair is None:
            continue
        old, new, source = pair
        try:
            deltas = C.delta(old, new, window)
        except ValueError:
            continue
        changes = []
        order = {name: i for i, name in enumerate(C.COUNTERS)}
        for d in sorted(deltas, key=lambda d: order.get(d.name, len(order))):
            if d.state == "ok" and not d.increase:
                continue
            kind = C.COUNTERS[d.name].kind if d.name in C.COUNTERS else ""
            gbps = None
            if d.name.endswith("Data") and d.increase is not None:
                gbps = d.increase * _OCTETS_PER_UNIT * 8 / window / 1e9
            changes.append(CounterChange(d.name, kind, d.increase, d.per_hour, d.state, gbps))
        out.append(PortDeltas(node, f"{ca}/{port}" if ca != "-" else "local port", source, window, tuple(changes)))
    return out


def _window(before: Mapping[str, str], after: Mapping[str, str]) -> float | None:
    for key in ("uptime", "clock"):
        try:
            window = float(after[key]) - float(before[key])
        except (KeyError, ValueError):
            continue
        if window > 0:
            return window
    return None


def _pair(ca: str, port: str, before: Sections, after: Sections) -> tuple[PortCounters, PortCounters, str] | None:
    """The two reads of a port from the same source, as the check pairs them; None when none."""
    try:
        return port_reads(ca, port, before, after)
    except ParseError:
        return None
