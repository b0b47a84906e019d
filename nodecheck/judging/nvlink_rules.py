"""How NVLink error counters are judged: the classification of each counter and a pure judge of two
reads of one link's counters.

Modelled on DCGM's NVLink health watch (NVIDIA/DCGM modules/health/DcgmHealthWatch.cpp,
MonitorNVLink; dcgmlib/dcgm_gpu_hardware_limits.h): a replay or recovery error is a failure on any
increase (DCGM_FR_NVLINK_ERROR_CRITICAL, "Replay and recovery errors are failures, not warnings");
a CRC flit or data error warns on any increase and fails at 100 or more a second ("RM has informed
us that CRC errors only matter at rates of 100+ per second", DCGM_LIMIT_MAX_NVLINK_CRC_ERROR).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from nodecheck.judging.counter_rules import FAIL_ON_INCREASE, RATE, RateLimit

# DCGM's health watch compares samples a minute apart (DcgmHealthWatch: startTime = now - one
# minute): a shorter window can show a rise but cannot rate it
DEFAULT_MIN_WINDOW_S = 60.0
DCGM_CRC_FAIL_PER_SECOND = 100.0  # DCGM_LIMIT_MAX_NVLINK_CRC_ERROR
_DCGM = "DCGM health watch (DcgmHealthWatch::MonitorNVLink)"
_CRC = _DCGM + ": WARN on any, FAIL at >= 100/s (DCGM_LIMIT_MAX_NVLINK_CRC_ERROR)"


@dataclass(frozen=True)
class NvLinkCounter:
    name: str  # nodecheck's name (parsers.gpu.NVLINK_ERROR_COUNTERS)
    kind: str  # FAIL_ON_INCREASE | RATE
    words: str  # what it counts, for messages
    source: str


COUNTERS: dict[str, NvLinkCounter] = {
    c.name: c
    for c in (
        NvLinkCounter("replay", FAIL_ON_INCREASE, "replay errors (data link retransmits)", _DCGM + ": FAIL on any"),
        NvLinkCounter("recovery", FAIL_ON_INCREASE, "recovery errors (link retrains)", _DCGM + ": FAIL on any"),
        NvLinkCounter(
            "crc_flit",
            RATE,
            "CRC flit errors",
            _CRC,
        ),
        NvLinkCounter(
            "crc_data",
            RATE,
            "CRC data errors",
            _CRC,
        ),
        # corrected by the link's ECC (Hopper and later report it); rated like CRC errors: nodecheck default
        NvLinkCounter("ecc_data", RATE, "ECC data errors", "nodecheck default: rated like the CRC counters"),
    )
}
# counters every NVLink source reports (NVML's nvmlNvLinkErrorCounter_t; `nvidia-smi nvlink -e`
# prints "Replay Errors", "Recovery Errors" and "CRC Errors" = flit errors on Hopper and Blackwell);
# crc_data and ecc_data only where the link and source have them: their absence is not a gap
REQUIRED = ("replay", "recovery", "crc_flit")
DEFAULT_RATE_LIMITS: dict[str, RateLimit] = {
    name: RateLimit(0, DCGM_CRC_FAIL_PER_SECOND * 3600, COUNTERS[name].source)
    for name in ("crc_flit", "crc_data", "ecc_data")
}


@dataclass(frozen=True)
class LinkFinding:
    status: str  # "pass" | "warn" | "fail"
    counter: str
    message: str  # "replay +3 in 320 s, expected no increase"
    increase: int | None = None
    per_hour: float | None = None
    limit_per_hour: float | None = None


def judge_link(
    before: Mapping[str, int],
    after: Mapping[str, int],
    window_s: float,
    *,
    reset: bool,
    limits: Mapping[str, RateLimit],
    min_window_s: float = DEFAULT_MIN_WINDOW_S,
) -> list[LinkFinding]:
    """One finding per counter read twice. `reset`: the counters restarted in between (a reboot, a
    GPU reset, `nvidia-smi nvlink -r`): the second value is then the increase, a lower bound. A
    counter that went down within one boot means the same; the caller passes reset for the link."""
    if not window_s > 0:
        raise ValueError(f"window_s must be > 0, got {window_s}")
    findings = []
    for name, info in COUNTERS.items():
        if name not in before or name not in after:
            continue
        increase = after[name] if reset else after[name] - before[name]
        per_hour = increase * 3600 / window_s
        seen = f"{name} +{increase} in {_n(window_s)} s" + (" (counters reset in between: at least)" if reset else "")
        if increase <= 0:
            findings.append(LinkFinding("pass", name, seen, increase, per_hour))
        elif info.kind == FAIL_ON_INCREASE:
            findings.append(LinkFinding("fail", name, f"{seen}, expected no increase", increase, per_hour, 0))
        else:
            findings.append(
                _rated(name, seen, increase, per_hour, window_s, limits.get(name, RateLimit()), min_window_s)
            )
    return findings


def _rated(
    name: str, seen: str, increase: int, per_hour: float, window_s: float, limit: RateLimit, min_window_s: float
) -> LinkFinding:
    rate = f"{seen} = {_n(per_hour / 3600)}/s"
    if limit.fail_per_hour is not None and per_hour >= limit.fail_per_hour and window_s >= min_window_s:
        return LinkFinding(
            "fail",
            name,
            f"{rate}, expected < {_n(limit.fail_per_hour / 3600)}/s",
            increase,
            per_hour,
            limit.fail_per_hour,
        )
    if limit.warn_per_hour is not None and per_hour > limit.warn_per_hour:
        short = f"; window under {_n(min_window_s)} s: not rated" if window_s < min_window_s else ""
        return LinkFinding(
            "warn",
            name,
            f"{rate}, expected <= {_n(limit.warn_per_hour)}/h{short}",
            increase,
            per_hour,
            limit.warn_per_hour,
        )
    return LinkFinding("pass", name, rate, increase, per_hour, limit.fail_per_hour)


def _n(value: float) -> str:
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
