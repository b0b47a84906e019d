"""Read NVSwitch SXid events out of kernel log text (dmesg, kern.log, journalctl -k).

The NVSwitch driver (nvidia-nvswitch, open-gpu-kernel-modules src/common/nvswitch) prints one error
as several lines, all "nvidia-nvswitchN: SXid (PCI:DDDD:BB:DD.F): CODE, …" with a different tail:
    …: 22013, Data {0x0000002b, …}                                  raw error registers
    …: 22013, Non-fatal, Link 44 Minion Link DLREQ interrupt         the headline: Fatal or Non-fatal
    …: 22013, Severity 0 Engine instance 44 Sub-engine instance 00   the severity the driver assigned
and some errors (the SOE's) print a bare message with no Fatal/Non-fatal word ("26008, SOE Watchdog
error"). One headline (or bare message) is one event; its Data and Severity lines belong to it.
Timestamps and line prefixes are read exactly as for Xids (parsers/kernel_log.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from nodecheck.core.model import quote
from nodecheck.parsers.counts import TOO_BIG, u64
from nodecheck.parsers.kernel_log import Unreadable, _Line, _read_line
from nodecheck.parsers.lines import split_lines

_MARK = "SXid ("
# re.ASCII: a str pattern's \d also matches other scripts' digits
_SXID = re.compile(
    r"(?:nvidia-(?P<switch>nvswitch\d+): )?SXid \(PCI:(?P<pci>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\): "
    r"(?P<code>\d+)(?:, (?P<rest>.*)|,?)$",
    re.ASCII,
)
_HEADLINE = re.compile(r"(?P<kind>Fatal|Non-fatal), ?(?P<rest>.*)$")
_LINK = re.compile(r"Link (?P<link>\d+)(?: (?P<message>.*))?$", re.ASCII)
_DATA = re.compile(r"Data \{")
_SEVERITY = re.compile(r"Severity (?P<severity>\d+)(?: |$)", re.ASCII)


@dataclass(frozen=True)
class SxidEvent:
    code: int
    pci: str  # "0000:04:00.0" as printed after PCI: (lower case)
    switch: str | None  # "nvswitch3": the driver's instance name, None when the line lacks it
    fatal: bool | None  # the driver's "Fatal" / "Non-fatal"; None when it printed neither
    link: int | None  # the NVLink port the headline names, None when it names none
    message: str  # the driver's words after the code (and after "Link N")
    severity: int | None  # from the "Severity N Engine instance …" line that follows, if any
    time: datetime | None  # timezone-aware UTC when determinable, else None
    raw: str  # the headline, and its Severity line when there is one


@dataclass(frozen=True)
class SxidLog:
    events: tuple[SxidEvent, ...]
    unreadable: tuple[Unreadable, ...]  # kind "sxid"


@dataclass(frozen=True)
class _Detail:
    """A Data or Severity line: part of an event, not one of its own."""

    key: tuple[str, int]
    severity: int | None
    line: _Line
    switch: str | None


def parse_sxids(
    text: str, *, now: datetime | None = None, uptime_s: float | None = None, utc_offset_s: int = 0
) -> SxidLog:
    """Every SXid event in `text`; a line marked "SXid (" that cannot be read goes to `unreadable`.

    `now`, `uptime_s` and `utc_offset_s` place the lines' times as parse_kernel_log does.
    """
    if now is not None and now.utcoffset() is None:
        raise ValueError("now must be timezone-aware")  # a caller's bug, not odd input
    offset = timedelta(seconds=utc_offset_s)
    events: list[SxidEvent] = []
    details: list[_Detail] = []
    unreadable: list[Unreadable] = []
    last: dict[tuple[str, int], int] = {}  # the latest headline per (PCI, code): its index in events
    for raw in split_lines(text):
        if _MARK not in raw:
            continue
        line = _read_line(raw, now, uptime_s, offset)
        read = _sxid(line)
        if isinstance(read, Unreadable):
            unreadable.append(read)
        elif isinstance(read, _Detail):
            details.append(read)
            at = last.get(read.key)
            if read.severity is not None and at is not None and events[at].severity is None:
                events[at] = replace(events[at], severity=read.severity, raw=events[at].raw + "\n" + raw)
        else:
            last[(read.pci, read.code)] = len(events)
            events.append(read)
    return SxidLog(tuple(events + _orphans(details, set(last))), tuple(unreadable))


def _sxid(line: _Line) -> SxidEvent | _Detail | Unreadable:
    # search, not match: the leftmost match takes the "nvidia-nvswitchN: " ahead of the mark
    match = _SXID.search(line.message)
    text = line.message[match.start() if match else line.message.index(_MARK) :]
    if not match:
        return Unreadable(line.raw, f"SXid line without a readable PCI address and code: {quote(text)}", "sxid")
    rest = (match["rest"] or "").strip()
    pci, code, switch = match["pci"].lower(), u64(match["code"]), match["switch"]
    if code is None:
        return Unreadable(line.raw, f"SXid code is not a count ({TOO_BIG}): {quote(text)}", "sxid")
    if not rest:
        # the driver always prints something after the code: a line ending there was cut short
        # ("22013" cut to "2201" is another code)
        return Unreadable(line.raw, f"SXid line ends at its code (cut short?): {quote(text)}", "sxid")
    if _DATA.match(rest):
        return _Detail((pci, code), None, line, switch)
    severity = _SEVERITY.match(rest)
    if severity:
        level = u64(severity["severity"])
        if level is None:
            return Unreadable(line.raw, f"SXid severity is not a count ({TOO_BIG}): {quote(text)}", "sxid")
        return _Detail((pci, code), level, line, switch)
    fatal: bool | None = None
    headline = _HEADLINE.match(rest)
    if headline:
        fatal = headline["kind"] == "Fatal"
        rest = headline["rest"].strip()
        if not rest or "Link ".startswith(rest) or rest == "Link":
            # "Non-fatal, Li", "Non-fatal, Link": the port number was lost
            return Unreadable(
                line.raw, f"SXid line ends before its link and message (cut short?): {quote(text)}", "sxid"
            )
    link = None
    named = _LINK.match(rest)
    if named:
        link = u64(named["link"])
        if link is None:
            return Unreadable(line.raw, f"SXid link is not a count ({TOO_BIG}): {quote(text)}", "sxid")
        rest = (named["message"] or "").strip()
    return SxidEvent(code, pci, switch, fatal, link, rest, None, line.time, line.raw)


def _orphans(details: list[_Detail], headed: set[tuple[str, int]]) -> list[SxidEvent]:
    """Events for Data/Severity lines whose headline is not in the log (cut off by the ring buffer or
    an excerpt): the error happened, but its Fatal/Non-fatal word is unknown. One event per Data line
    (the driver prints one per error); Severity lines only where a (PCI, code) has no Data line."""
    loose = [d for d in details if d.key not in headed]
    with_data = {d.key for d in loose if d.severity is None}
    return [
        SxidEvent(d.key[1], d.key[0], d.switch, None, None, "", d.severity, d.line.time, d.line.raw)
        for d in loose
        if d.severity is None or d.key not in with_data
    ]
