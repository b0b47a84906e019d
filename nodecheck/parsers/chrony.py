"""`chronyc -n tracking`: is chronyd synchronised, and how far off is the clock.

    Reference ID    : 2D40B9B4 (45.64.185.180)
    System time     : 0.001983523 seconds fast of NTP time
    Root delay      : 0.006364488 seconds
    Root dispersion : 0.023038883 seconds
    Leap status     : Normal

"fast" means the system clock is ahead of NTP time, "slow" behind (chronyc(1), tracking). Leap
status "Not synchronised" is chronyd's own word that it has no source to steer by.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.parsers.lines import split_lines

TOOL = "chronyc tracking"
_FIELD = re.compile(r"^([A-Za-z][A-Za-z ()]*?)\s*:\s*(.*)$")
_SYSTEM_TIME = re.compile(r"^([0-9.]+) seconds (fast|slow) of NTP time$")
_SECONDS = re.compile(r"^([+-]?[0-9.]+) seconds$")


@dataclass(frozen=True)
class DaemonDown:
    """The client ran but its daemon did not answer: "506 Cannot talk to daemon" (chronyc),
    "ntpq: read: Connection refused" (ntpq)."""

    tool: str
    message: str


@dataclass(frozen=True)
class ChronyTracking:
    reference: str | None  # "2D40B9B4 (45.64.185.180)"; "00000000 ()" when unsynchronised
    stratum: int | None
    leap: str  # Normal, Insert second, Delete second, Not synchronised
    system_offset_s: float | None  # + the clock is ahead of NTP time, - behind
    last_offset_s: float | None
    root_delay_s: float | None
    root_dispersion_s: float | None

    @property
    def synchronised(self) -> bool:
        return self.leap.lower() not in ("not synchronised", "not synchronized", "unknown")

    @property
    def root_distance_s(self) -> float | None:
        """Root delay / 2 + root dispersion: chrony's bound on how far the clock can be from true
        time through its reference (chrony FAQ, "How accurate is my system clock?")."""
        if self.root_delay_s is None or self.root_dispersion_s is None:
            return None
        return self.root_delay_s / 2 + self.root_dispersion_s


def parse_chronyc_tracking(text: str) -> ChronyTracking | DaemonDown:
    stripped = text.strip()
    if stripped.startswith("506 ") or "Cannot talk to daemon" in stripped:
        return DaemonDown("chronyc", stripped.splitlines()[0])
    fields: dict[str, str] = {}
    for line in split_lines(text):
        if not line.strip():
            continue
        m = _FIELD.match(line)
        if not m:
            raise ParseError(TOOL, f"not a 'Name : value' line: {line.strip()[:120]!r}", text)
        fields[m.group(1).strip()] = m.group(2).strip()
    if "Leap status" not in fields:
        raise ParseError(TOOL, "no 'Leap status' line", text)
    return ChronyTracking(
        reference=fields.get("Reference ID"),
        stratum=int(fields["Stratum"]) if fields.get("Stratum", "").isdigit() else None,
        leap=fields["Leap status"],
        system_offset_s=_system_time(fields.get("System time"), text),
        last_offset_s=_seconds(fields, "Last offset", text),
        root_delay_s=_seconds(fields, "Root delay", text),
        root_dispersion_s=_seconds(fields, "Root dispersion", text),
    )


def _system_time(value: str | None, text: str) -> float | None:
    if value is None:
        return None
    m = _SYSTEM_TIME.match(value)
    if not m:
        raise ParseError(TOOL, f"System time {value!r}: not 'N seconds fast|slow of NTP time'", text)
    seconds = float(m.group(1))
    return seconds if m.group(2) == "fast" else -seconds


def _seconds(fields: dict[str, str], name: str, text: str) -> float | None:
    value = fields.get(name)
    if value is None:
        return None
    m = _SECONDS.match(value)
    if not m:
        raise ParseError(TOOL, f"{name} {value!r}: not 'N seconds'", text)
    return float(m.group(1))
