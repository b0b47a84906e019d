"""Read /proc/uptime (seconds since boot, then the idle seconds summed over CPUs), and a node's clock
as a probe reports it: when a read of counters was taken, for rates between two reads."""

from __future__ import annotations

import math
import re

from nodecheck.core.errors import ParseError

# seconds since boot: 12 digits are 31,000 years; a longer run is no uptime (1e300 s would overflow
# the datetime arithmetic that places log lines)
_UPTIME = re.compile(r"^\s*(\d{1,12}(?:\.\d+)?)(?:\s+\d+(?:\.\d+)?)?\s*$", re.ASCII)


def parse_uptime(text: str) -> float:
    """Seconds since boot ("18481.75 19829.75" -> 18481.75)."""
    match = _UPTIME.match(text)
    if match is None:
        raise ParseError("/proc/uptime", "not 'SECONDS IDLE_SECONDS'", text)
    seconds = float(match.group(1))
    if not math.isfinite(seconds):
        raise ParseError("/proc/uptime", "not a finite number", text)
    return seconds


# busybox date may print %N as is; 12 digits of seconds reach the year 33658 (400 would read as inf)
_EPOCH = re.compile(r"(\d{1,12})(?:\.(\d+|%N))?", re.ASCII)
_BOOT_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.ASCII)


def node_clock(
    clock: str | None, uptime: str | None, boot_id: str | None
) -> tuple[float | None, float | None, str | None]:
    """(wall clock, uptime, boot id) from `date +%s.%N`, /proc/uptime and the boot_id file as a probe
    printed them; each one missing or unreadable reads None (only rates between reads need them)."""
    wall = None
    if clock is not None and (match := _EPOCH.fullmatch(clock.strip())):
        fraction = match[2] if match[2] and match[2].isdigit() else "0"
        wall = float(f"{match[1]}.{fraction}")
    up = None
    if uptime is not None:
        try:
            up = parse_uptime(uptime)
        except ParseError:
            up = None
    boot = boot_id.strip() if boot_id is not None and _BOOT_ID.fullmatch(boot_id.strip()) else None
    return wall, up, boot
