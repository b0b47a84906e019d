"""`ntpq -pn`: ntpd's peers; the one marked `*` is the system peer the clock is steered by, and its
offset (milliseconds) is how far the clock is from it.

         remote           refid      st t when poll reach   delay   offset  jitter
    ==============================================================================
    *10.0.0.1        161.53.123.8     2 u  117 1024  377    0.417    0.011   0.058
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.parsers.chrony import DaemonDown
from nodecheck.parsers.lines import split_lines

TOOL = "ntpq -pn"
_DOWN = ("Connection refused", "timed out, nothing received", "Request timed out")
_TALLY = " *+-#xo.^~"  # the first column: * system peer, + candidate, - outlier, x falseticker, ...
# ntpq prints milliseconds with 3 decimals (an offset of days is 9 digits: jc-31's 5602175), a
# stratum of 0-16: a longer run of digits is not ntpq's (float() of 400 digits is inf, not an error;
# float() also reads nan, inf, 1e309 and 1_0, int() other scripts' digits)
_MS = re.compile(r"[+-]?[0-9]{1,12}(?:\.[0-9]{1,9})?", re.ASCII)
_STRATUM = re.compile(r"[0-9]{1,2}", re.ASCII)


@dataclass(frozen=True)
class NtpPeer:
    tally: str  # "*" the system peer
    remote: str
    refid: str
    stratum: int
    reach: str  # octal register of the last 8 polls
    delay_ms: float
    offset_ms: float  # + the peer is ahead of this clock
    jitter_ms: float


@dataclass(frozen=True)
class NtpPeers:
    peers: tuple[NtpPeer, ...]

    @property
    def system_peer(self) -> NtpPeer | None:
        return next((p for p in self.peers if p.tally == "*"), None)


def parse_ntpq_peers(text: str) -> NtpPeers | DaemonDown:
    stripped = text.strip()
    if any(d in stripped for d in _DOWN):
        return DaemonDown("ntpq", stripped.splitlines()[0])
    if stripped == "No association ID's returned":
        return NtpPeers(())
    lines = split_lines(text)
    header = next((i for i, ln in enumerate(lines) if ln.split()[:2] == ["remote", "refid"]), None)
    if header is None or header + 1 >= len(lines) or not lines[header + 1].startswith("="):
        raise ParseError(TOOL, "no 'remote refid st t when poll reach delay offset jitter' header", text)
    peers: list[NtpPeer] = []
    pending = ""  # a long remote (an IPv6 address) is printed alone, its columns on the next line
    for line in lines[header + 2 :]:
        if not line.strip():
            continue
        if pending:
            line, pending = pending + " " + line.strip(), ""
        fields = line[1:].split()
        if len(fields) == 1:
            pending = line
            continue
        peers.append(_peer(line, fields, text))
    if pending:
        raise ParseError(TOOL, f"peer {pending.strip()[:120]!r} without its columns (output cut off?)", text)
    if not peers:  # ntpd without associations says "No association ID's returned", not a bare header
        raise ParseError(TOOL, "a header and no peer line (output cut off?)", text)
    if sum(p.tally == "*" for p in peers) > 1:  # ntpd selects one system peer: two outputs run together
        raise ParseError(TOOL, "two system peers ('*') in one listing", text)
    return NtpPeers(tuple(peers))


def _peer(line: str, fields: list[str], text: str) -> NtpPeer:
    tally = line[0]
    if tally not in _TALLY or len(fields) != 10:
        raise ParseError(TOOL, f"not a peer line: {line.strip()[:120]!r}", text)
    remote, refid, st, _kind, _when, _poll, reach, delay, offset, jitter = fields
    if not _STRATUM.fullmatch(st) or not all(_MS.fullmatch(v) for v in (delay, offset, jitter)):
        raise ParseError(TOOL, f"not a peer line: {line.strip()[:120]!r}", text)
    return NtpPeer(tally.strip(), remote, refid, int(st), reach, float(delay), float(offset), float(jitter))
