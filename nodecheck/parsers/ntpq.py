"""`ntpq -pn`: ntpd's peers; the one marked `*` is the system peer the clock is steered by, and its
offset (milliseconds) is how far the clock is from it.

         remote           refid      st t when poll reach   delay   offset  jitter
    ==============================================================================
    *10.0.0.1        161.53.123.8     2 u  117 1024  377    0.417    0.011   0.058
"""

from __future__ import annotations

from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.parsers.chrony import DaemonDown
from nodecheck.parsers.lines import split_lines

TOOL = "ntpq -pn"
_DOWN = ("Connection refused", "timed out, nothing received", "Request timed out")
_TALLY = " *+-#xo.^~"  # the first column: * system peer, + candidate, - outlier, x falseticker, ...


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
    peers = []
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
        raise ParseError(TOOL, f"peer {pending.strip()!r} without its columns (output cut off?)", text)
    return NtpPeers(tuple(peers))


def _peer(line: str, fields: list[str], text: str) -> NtpPeer:
    tally = line[0]
    if tally not in _TALLY or len(fields) != 10:
        raise ParseError(TOOL, f"not a peer line: {line.strip()[:120]!r}", text)
    remote, refid, st, _kind, _when, _poll, reach, delay, offset, jitter = fields
    try:
        return NtpPeer(tally.strip(), remote, refid, int(st), reach, float(delay), float(offset), float(jitter))
    except ValueError:
        raise ParseError(TOOL, f"not a peer line: {line.strip()[:120]!r}", text) from None
