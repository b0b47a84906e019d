"""Which IB port counters matter and how: the classification table, deltas between two reads of a
port's counters, and a pure judge of those deltas against per-hour limits.

A counter read once says little (a port that has been up for a year has errors); two reads a known
time apart say what the link is doing now. So the judge works on deltas, never on absolute values,
unless the caller sets `max_absolute` for a counter.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TypedDict

from nodecheck.parsers.perfquery import BASIC_WIDTHS, SYSFS_NAMES, PortCounters

FAIL_ON_INCREASE, RATE, CONGESTION, INFO = "fail_on_increase", "rate", "congestion", "info"
STATES = ("ok", "saturated", "reset", "missing")
# the ibdiagnet BER check it is modelled on: clear counters, "Wait for some time (5-10 minutes)", read
# again (NVIDIA ibdiagnet User Manual, "Bit Error Rate (BER)"); fewer seconds cannot rate a link
DEFAULT_MIN_WINDOW_S = 300.0
# IBA link BER requirement: "less than one-bit error per 10^12 bits transmitted" (NVIDIA DGX
# SuperPOD cabling guide, "Mixing Widths and Rates"; also ibdiagnet --ber_test's default 10^-12)
IBA_MAX_BER = 1e-12
RESET_FIX = "clear with perfquery -R (basic) / perfquery -x -R (extended), then re-run"


@dataclass(frozen=True)
class CounterInfo:
    name: str  # perfquery name: "SymbolErrorCounter"
    sysfs_name: str | None  # "symbol_error"; None: not in sysfs counters/
    width: int  # bits in basic PortCounters (64: extended only)
    kind: str  # FAIL_ON_INCREASE | RATE | CONGESTION | INFO
    source: str  # why it is in that class


@dataclass(frozen=True)
class RateLimit:
    """Per-hour limits for a rate counter; a rate above fail_per_hour fails, above warn_per_hour warns."""

    warn_per_hour: float | None = None
    fail_per_hour: float | None = None
    source: str = ""


def symbol_error_limit_per_hour(rate_gbps: float, ber: float = IBA_MAX_BER) -> float:
    """Symbol errors per hour a link of `rate_gbps` may show and still meet `ber`: each counted
    symbol error is at least one bit error, so more than ber × bits/h means the BER is worse."""
    return round(rate_gbps * 1e9 * ber * 3600, 6)  # round off float noise: 1440, not 1439.99…


_LINK_DOWN = (
    "IBA: counts link error recovery that failed and downed the link (Shanley, InfiniBand "
    "Network Architecture ch. 26 'Performance Counters'); a link down breaks a job's RDMA "
    "connections; NADDOD 'InfiniBand Symbol Error Counter' (2024) ranks it the most severe"
)
_OVERRUN = (
    "UFM-SDN 4.18 'Supported Traps and Events': 'times that OverrunErrors consecutive flow "
    "control update periods occurred, each having at least one overrun error' - a flow-control "
    "violation on a lossless link; NADDOD (2024) ranks it second most severe"
)
_INTEGRITY = (
    "UFM Cyber-AI 'List of Supported Events' lists local_link_integrity_errors under Link "
    "Failure Prediction; each increment is a burst of local physical errors, not one bit error"
)
_SYMBOL = (
    "minor physical-lane errors that PAM4/FEC links show at a low rate (ibdiagnet 'Bit Error "
    "Rate (BER)': NDR/HDR symbol errors are errors left after FEC), so judged by rate, not presence"
)
_RECOVERY = "IBA: link retrains that succeeded (Shanley ch. 26); occasional ones are survivable, so rated"
_RCV_ERRORS = (
    "UFM 'Supported Port Counters': received packets with errors (local physical, malformed, "
    "buffer overrun, ...); rated because a bad cable shows as a rising rate"
)
_DISCARDS = (
    "UFM 'Supported Port Counters': outbound packets discarded when the port is down or "
    "congested; UFM's default alarm threshold is 200 (UFM-SDN 4.18 'Supported Traps and Events')"
)
_REMOTE_PHYS = "packets received marked bad by the sender (EBP): the far side's link errors; rated"
_XMIT_WAIT = (
    "ticks the port had data to send but no flow-control credits: congestion/back-pressure, "
    "not a link fault (formats.md section 2; rdma-core error_thresholds suggests 1000); "
    "reported only"
)
_RELAY = (
    "ibqueryerrors -c suppresses exactly this one as a common 'side effect' counter (rdma-core "
    "ibqueryerrors.c: 'the only \"common\" error'); nodecheck reports it, does not judge it"
)
_CONSTRAINT = "partition/raw-packet enforcement drops: configuration, not link health (nodecheck default)"
_VL15 = "SMPs dropped for lack of VL15 buffers; UFM alarms at 50, not a data-path fault (nodecheck default)"
_QP1 = "QP1 (GMP) MADs dropped: management traffic, not the data path (nodecheck default)"
_DATA = "traffic volume, octets/4 for *Data (perfquery(8)); context for rates, never a fault"

_TABLE: tuple[tuple[str, str, str], ...] = (
    ("LinkDownedCounter", FAIL_ON_INCREASE, _LINK_DOWN),
    ("ExcessiveBufferOverrunErrors", FAIL_ON_INCREASE, _OVERRUN),
    ("LocalLinkIntegrityErrors", FAIL_ON_INCREASE, _INTEGRITY),
    ("SymbolErrorCounter", RATE, _SYMBOL),
    ("LinkErrorRecoveryCounter", RATE, _RECOVERY),
    ("PortRcvErrors", RATE, _RCV_ERRORS),
    ("PortXmitDiscards", RATE, _DISCARDS),
    ("PortRcvRemotePhysicalErrors", RATE, _REMOTE_PHYS),
    ("PortXmitWait", CONGESTION, _XMIT_WAIT),
    ("PortRcvSwitchRelayErrors", INFO, _RELAY),
    ("PortXmitConstraintErrors", INFO, _CONSTRAINT),
    ("PortRcvConstraintErrors", INFO, _CONSTRAINT),
    ("VL15Dropped", INFO, _VL15),
    ("QP1Dropped", INFO, _QP1),
    ("PortXmitData", INFO, _DATA),
    ("PortRcvData", INFO, _DATA),
    ("PortXmitPkts", INFO, _DATA),
    ("PortRcvPkts", INFO, _DATA),
    ("PortUnicastXmitPkts", INFO, _DATA),
    ("PortUnicastRcvPkts", INFO, _DATA),
    ("PortMulticastXmitPkts", INFO, _DATA),
    ("PortMulticastRcvPkts", INFO, _DATA),
)
_SYSFS_BY_NAME = {canonical: sysfs for sysfs, canonical in SYSFS_NAMES.items()}
COUNTERS: dict[str, CounterInfo] = {
    name: CounterInfo(name, _SYSFS_BY_NAME.get(name), BASIC_WIDTHS.get(name, 64), kind, source)
    for name, kind, source in _TABLE
}

_SCALE = "rdma-core infiniband-diags/etc/error_thresholds suggests {n} (an absolute count for ibqueryerrors)"
# Defaults the playbook overrides. Per hour, over a window of at least DEFAULT_MIN_WINDOW_S.
DEFAULT_RATE_LIMITS: dict[str, RateLimit] = {
    "SymbolErrorCounter": RateLimit(
        10,
        symbol_error_limit_per_hour(400),
        "fail: IBA BER 1e-12 at 400 Gb/s (NDR 4x) = 1440/h; warn: nodecheck default, " + _SCALE.format(n=10),
    ),
    "LinkErrorRecoveryCounter": RateLimit(0, 10, "nodecheck default; " + _SCALE.format(n=10)),
    "PortRcvErrors": RateLimit(10, 100, "nodecheck default; " + _SCALE.format(n=10)),
    "PortXmitDiscards": RateLimit(100, 1000, "nodecheck default; " + _SCALE.format(n=100) + "; UFM alarms at 200"),
    "PortRcvRemotePhysicalErrors": RateLimit(10, 100, "nodecheck default; " + _SCALE.format(n=100)),
}


@dataclass(frozen=True)
class CounterDelta:
    name: str
    before: int | None
    after: int | None
    increase: int | None  # None: unknown (stuck saturated, missing); a lower bound
    # when saturated during the window or after a reset
    window_s: float
    state: str  # "ok" | "saturated" | "reset" | "missing"

    @property
    def per_second(self) -> float | None:
        return None if self.increase is None else self.increase / self.window_s

    @property
    def per_hour(self) -> float | None:
        return None if self.increase is None else self.increase * 3600 / self.window_s


@dataclass(frozen=True)
class CounterFinding:
    status: str  # "pass" | "warn" | "fail"
    counter: str
    kind: str
    message: str  # observed vs expected
    increase: int | None = None
    window_s: float | None = None
    per_hour: float | None = None
    limit_per_hour: float | None = None  # the limit that decided the status
    value: int | None = None  # the counter's value at the second read


def delta(before: PortCounters, after: PortCounters, window_s: float, *, reset: bool = False) -> list[CounterDelta]:
    """One CounterDelta per counter in either read, in `after`'s order; a counter in only one read
    is "missing". A counter that went down means the port's counters were cleared (perfquery -R) or
    the node rebooted: that clears every counter of the port, so all are "reset" and counted from
    zero (a lower bound: some of the window came before the reset). `reset`: the caller knows it
    happened (the node's uptime went down). A value at its width's all-ones maximum is "saturated":
    stuck there before the window, the increase is unknown; reached during it, it is at least the
    difference."""
    if not window_s > 0:
        raise ValueError(f"window_s must be > 0, got {window_s}")
    if (before.ca, before.port) != (after.ca, after.port):
        raise ValueError(f"reads of different ports: {before.where} and {after.where}")
    names = list(after.counters) + [n for n in before.counters if n not in after.counters]
    cleared = reset or any(
        after.counters[n] < before.counters[n]
        for n in after.counters
        if n in before.counters and not after.saturated(n)
    )
    return [_delta(name, before, after, window_s, cleared) for name in names]


def _delta(name: str, before: PortCounters, after: PortCounters, window_s: float, cleared: bool) -> CounterDelta:
    old, new = before.counters.get(name), after.counters.get(name)
    if old is None or new is None:
        return CounterDelta(name, old, new, None, window_s, "missing")
    if new < old and not after.saturated(name):
        return CounterDelta(name, old, new, new, window_s, "reset")
    if before.saturated(name):
        return CounterDelta(name, old, new, None, window_s, "saturated")  # stuck: no increase known
    if cleared:
        return CounterDelta(name, old, new, new, window_s, "reset")
    if after.saturated(name):
        return CounterDelta(name, old, new, new - old, window_s, "saturated")  # at least this much
    return CounterDelta(name, old, new, new - old, window_s, "ok")


def judge_deltas(
    deltas: Iterable[CounterDelta],
    thresholds: Mapping[str, RateLimit | Mapping[str, float | None]] | None = None,
    *,
    min_window_s: float = DEFAULT_MIN_WINDOW_S,
    max_absolute: Mapping[str, int] | None = None,
) -> list[CounterFinding]:
    """Findings for the counters that matter: every fail_on_increase and rate counter (pass when
    unchanged), congestion counters that moved (reported, status pass), and every counter named in
    `max_absolute`. `thresholds` overrides DEFAULT_RATE_LIMITS per rate counter."""
    limits = {**DEFAULT_RATE_LIMITS, **{n: _limit(n, v) for n, v in (thresholds or {}).items()}}
    absolute = dict(max_absolute or {})
    for name in absolute:
        if name not in COUNTERS:
            raise ValueError(f"max_absolute: unknown counter {name!r}")
        if _kind(name) == CONGESTION:
            raise ValueError(f"{name} is a congestion counter: reported, never judged")
    findings: list[CounterFinding] = []
    for d in deltas:
        kind = _kind(d.name)
        if kind == FAIL_ON_INCREASE:
            findings.append(_judge_increase(d))
        elif kind == RATE:
            findings.append(_judge_rate(d, limits.get(d.name, RateLimit()), min_window_s))
        elif kind == CONGESTION and d.state != "missing" and (d.increase or d.state == "saturated"):
            findings.append(_report_congestion(d))
        if d.name in absolute and d.after is not None:
            findings.append(_judge_absolute(d, absolute[d.name]))
    return findings


def _kind(name: str) -> str:
    info = COUNTERS.get(name)
    return info.kind if info else INFO


def _limit(name: str, value: RateLimit | Mapping[str, float | None]) -> RateLimit:
    if name not in COUNTERS or _kind(name) != RATE:
        rated = ", ".join(n for n, i in COUNTERS.items() if i.kind == RATE)
        raise ValueError(f"{name} is not a rate counter; rate limits apply to: {rated}")
    if isinstance(value, RateLimit):
        return value
    unknown = set(value) - {"warn_per_hour", "fail_per_hour"}
    if unknown:
        raise ValueError(f"{name}: unknown keys {sorted(unknown)}; expected warn_per_hour, fail_per_hour")
    return RateLimit(value.get("warn_per_hour"), value.get("fail_per_hour"), "playbook")


def _unjudgeable(d: CounterDelta, kind: str) -> CounterFinding | None:
    """The warning for a delta that cannot be judged (stuck saturated, missing), or None."""
    if d.state == "saturated" and d.increase is None:
        return CounterFinding(
            "warn",
            d.name,
            kind,
            f"{d.name} saturated at {_n(d.after)}: increase unknown; {RESET_FIX}",
            window_s=d.window_s,
            value=d.after,
        )
    if d.state == "missing":
        where = "first" if d.before is None else "second"
        return CounterFinding(
            "warn",
            d.name,
            kind,
            f"{d.name} missing from the {where} read: increase unknown",
            window_s=d.window_s,
            value=d.after,
        )
    return None


def _seen(d: CounterDelta) -> str:
    """ "SymbolErrorCounter +120 in 300 s", with a reset or a saturation named."""
    if d.state == "reset":
        return (
            f"{d.name} +{_n(d.increase)} in {_n(d.window_s)} s (counters reset in between; at least "
            f"{_n(d.increase)} since)"
        )
    if d.state == "saturated":
        return f"{d.name} +{_n(d.increase)} or more in {_n(d.window_s)} s (saturated at {_n(d.after)}; {RESET_FIX})"
    return f"{d.name} +{_n(d.increase)} in {_n(d.window_s)} s"


def _judge_increase(d: CounterDelta) -> CounterFinding:
    unjudgeable = _unjudgeable(d, FAIL_ON_INCREASE)
    if unjudgeable:
        return unjudgeable
    status = "fail" if d.increase else "pass"
    return CounterFinding(
        status,
        d.name,
        FAIL_ON_INCREASE,
        f"{_seen(d)}, expected no increase",
        d.increase,
        d.window_s,
        d.per_hour,
        0,
        d.after,
    )


class _RateNumbers(TypedDict):
    """What every rate finding carries: CounterFinding's measured fields."""

    increase: int
    window_s: float
    per_hour: float
    value: int | None


def _judge_rate(d: CounterDelta, limit: RateLimit, min_window_s: float) -> CounterFinding:
    unjudgeable = _unjudgeable(d, RATE)
    if unjudgeable:
        return unjudgeable
    rate = d.per_hour
    assert rate is not None and d.increase is not None  # ok/reset/saturated-in-window carry one
    numbers = _RateNumbers(increase=d.increase, window_s=d.window_s, per_hour=rate, value=d.after)
    if d.increase == 0:
        return CounterFinding("pass", d.name, RATE, f"{_seen(d)}", **numbers)
    if d.window_s < min_window_s:
        return CounterFinding(
            "warn", d.name, RATE, f"{_seen(d)}: window too short to rate, expected >= {_n(min_window_s)} s", **numbers
        )
    at_least = "at least " if d.state != "ok" else ""
    seen = f"{_seen(d)} = {at_least}{_n(rate)}/h"
    for status, bound in (("fail", limit.fail_per_hour), ("warn", limit.warn_per_hour)):
        if bound is not None and rate > bound:
            return CounterFinding(
                status, d.name, RATE, f"{seen}, expected <= {_n(bound)}/h", limit_per_hour=bound, **numbers
            )
    if d.state == "saturated":  # under the limits only as far as we can tell
        return CounterFinding("warn", d.name, RATE, f"{seen}: the true rate is unknown", **numbers)
    bound = limit.warn_per_hour if limit.warn_per_hour is not None else limit.fail_per_hour
    expected = f" (<= {_n(bound)}/h)" if bound is not None else " (no limit set)"
    return CounterFinding("pass", d.name, RATE, seen + expected, limit_per_hour=bound, **numbers)


def _report_congestion(d: CounterDelta) -> CounterFinding:
    if d.state == "saturated":
        message = f"{d.name} saturated at {_n(d.after)} (congestion, not judged); {RESET_FIX}"
    else:
        message = f"{_seen(d)} = {_n(d.per_hour)}/h (congestion: reported, not judged)"
    return CounterFinding("pass", d.name, CONGESTION, message, d.increase, d.window_s, d.per_hour, None, d.after)


def _judge_absolute(d: CounterDelta, ceiling: int) -> CounterFinding:
    status = "fail" if d.after is not None and d.after > ceiling else "pass"
    relation = "expected <=" if status == "fail" else "<="
    return CounterFinding(
        status,
        d.name,
        _kind(d.name),
        f"{d.name} = {_n(d.after)}, {relation} {ceiling}",
        d.increase,
        d.window_s,
        d.per_hour,
        None,
        d.after,
    )


def _n(value: float | int | None) -> str:
    """1440.0 → '1440', 0.25 → '0.25', 12.3456 → '12.3'; counts stay exact."""
    if value is None:
        return "?"
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
