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
# A name is letters, spaces and parentheses ("Ref time (UTC)"); the line is split at its first ':'
# (values hold colons: "Fri Apr 19 22:12:03 2024"), never by a pattern that tries every split.
_NAME = re.compile(r"[A-Za-z][A-Za-z ()]*")
# chronyc prints seconds as %.9f (tracking's report), so 12 digits before the point are ~31,000
# years: a longer run of digits is not chrony's, and float() of 400 digits is inf, not an error
_DECIMAL = r"[0-9]{1,12}(?:\.[0-9]{1,12})?"
_SYSTEM_TIME = re.compile(rf"({_DECIMAL}) seconds (fast|slow) of NTP time", re.ASCII)
_SECONDS = re.compile(rf"([+-]?{_DECIMAL}) seconds", re.ASCII)
_STRATUM = re.compile(r"[0-9]{1,3}", re.ASCII)  # 0-16 (NTP), 0 when unsynchronised
# chronyc's words for the leap indicator (client.c, print_report's "Leap status"): a whitelist, so a
# cut "Not" or chrony's own "Invalid" is not read as synchronised
SYNCHRONISED_LEAP = ("Normal", "Insert second", "Delete second")
UNSYNCHRONISED_LEAP = ("Not synchronised", "Not synchronized")
# delay and dispersion are sums of positive round trips and error bounds: never below zero
_NON_NEGATIVE = ("Root delay", "Root dispersion")


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
    leap: str  # one of SYNCHRONISED_LEAP or UNSYNCHRONISED_LEAP
    system_offset_s: float | None  # + the clock is ahead of NTP time, - behind
    last_offset_s: float | None
    root_delay_s: float | None
    root_dispersion_s: float | None

    @property
    def synchronised(self) -> bool:
        return self.leap in SYNCHRONISED_LEAP

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
    fields = _fields(text)
    if "Leap status" not in fields:
        raise ParseError(TOOL, "no 'Leap status' line", text)
    return ChronyTracking(
        reference=fields.get("Reference ID"),
        stratum=_stratum(fields.get("Stratum"), text),
        leap=_leap(fields["Leap status"], text),
        system_offset_s=_system_time(fields.get("System time"), text),
        last_offset_s=_seconds(fields, "Last offset", text),
        root_delay_s=_seconds(fields, "Root delay", text),
        root_dispersion_s=_seconds(fields, "Root dispersion", text),
    )


def _fields(text: str) -> dict[str, str]:
    """{name: value} of every 'Name : value' line; a name twice is two reports run together."""
    fields: dict[str, str] = {}
    for line in split_lines(text):
        if not line.strip():
            continue
        name, colon, value = line.partition(":")
        name = name.strip()
        if not colon or not _NAME.fullmatch(name):
            raise ParseError(TOOL, f"not a 'Name : value' line: {line.strip()[:120]!r}", text)
        if name in fields:
            raise ParseError(TOOL, f"{name!r} printed twice (two reports run together?)", text)
        fields[name] = value.strip()
    return fields


def _leap(value: str, text: str) -> str:
    if value in SYNCHRONISED_LEAP or value in UNSYNCHRONISED_LEAP:
        return value
    known = ", ".join(SYNCHRONISED_LEAP + UNSYNCHRONISED_LEAP[:1])
    raise ParseError(TOOL, f"Leap status {value[:80]!r}: not one of chrony's ({known})", text)


def _stratum(value: str | None, text: str) -> int | None:
    if value is None:
        return None
    if not _STRATUM.fullmatch(value):
        raise ParseError(TOOL, f"Stratum {value[:80]!r}: not a stratum (0-16)", text)
    return int(value)


def _system_time(value: str | None, text: str) -> float | None:
    if value is None:
        return None
    m = _SYSTEM_TIME.fullmatch(value)
    if not m:
        raise ParseError(TOOL, f"System time {value[:80]!r}: not 'N seconds fast|slow of NTP time'", text)
    seconds = float(m.group(1))
    return seconds if m.group(2) == "fast" else -seconds


def _seconds(fields: dict[str, str], name: str, text: str) -> float | None:
    value = fields.get(name)
    if value is None:
        return None
    m = _SECONDS.fullmatch(value)
    if not m:
        raise ParseError(TOOL, f"{name} {value[:80]!r}: not 'N seconds'", text)
    seconds = float(m.group(1))
    if name in _NON_NEGATIVE and m.group(1).startswith("-"):
        raise ParseError(TOOL, f"{name} {value[:80]!r}: negative, which chrony never prints", text)
    return seconds
