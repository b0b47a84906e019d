"""Read /proc/uptime: seconds since boot, then the idle seconds summed over CPUs."""

from __future__ import annotations

import math
import re

from nodecheck.core.errors import ParseError

_UPTIME = re.compile(r"^\s*(\d+(?:\.\d+)?)(?:\s+\d+(?:\.\d+)?)?\s*$", re.ASCII)


def parse_uptime(text: str) -> float:
    """Seconds since boot ("18481.75 19829.75" -> 18481.75)."""
    match = _UPTIME.match(text)
    if match is None:
        raise ParseError("/proc/uptime", "not 'SECONDS IDLE_SECONDS'", text)
    seconds = float(match.group(1))
    if not math.isfinite(seconds):
        raise ParseError("/proc/uptime", "not a finite number", text)
    return seconds
