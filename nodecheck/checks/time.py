"""time.sync: the node's clock is synchronised by its time daemon, close to its reference."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field

from nodecheck.core.errors import ParseError
from nodecheck.core.model import Status, Verdict, excerpt
from nodecheck.core.registry import Captures, check
from nodecheck.core.thresholds import Ceiling, fmt
from nodecheck.parsers.chrony import DaemonDown, parse_chronyc_tracking
from nodecheck.parsers.ntpq import parse_ntpq_peers
from nodecheck.parsers.sections import Section, split_sections
from nodecheck.parsers.systemctl import parse_process_list
from nodecheck.parsers.timedatectl import parse_timedatectl
from nodecheck.probes.time_sync import TIME_SYNC

T = TypeVar("T")
NONE_FOUND = "no time synchronisation (chronyd, ntpd, systemd-timesyncd) found"


class TimeSync(BaseModel):
    """How far from its reference the clock may be."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    offset_s: Ceiling = Field(
        # chrony keeps LAN clients within tens of microseconds (chrony's documentation: "on a LAN,
        # accuracy is typically in tens of microseconds"); 10 ms is a daemon that is not keeping up,
        # 100 ms a clock that misorders logs and traces across nodes (NCCL/PyTorch timeouts are judged
        # on each rank's own clock, Slurm and munge tolerate minutes: munge's default credential TTL
        # is 300 s, munged(8)), so fail well before either breaks
        Ceiling(warn_above=0.01, fail_above=0.1),
        description="|clock offset| from the daemon's reference in seconds (chrony: System time; ntpd: the "
        "system peer's offset)",
    )
    root_distance_s: Ceiling = Field(
        # root delay / 2 + root dispersion bounds the clock's error through its reference (chrony FAQ);
        # chronyd itself drops sources whose distance exceeds 3 s (maxdistance, chrony.conf(5)); a
        # cluster LAN source reads well under 0.1 s
        Ceiling(warn_above=0.1, fail_above=1.0),
        description="chrony's root distance (root delay / 2 + root dispersion) in seconds: the worst "
        "error the clock can have through its reference",
    )


@check("time.sync", probes=[TIME_SYNC], params=TimeSync)
def sync(out: Captures, want: TimeSync) -> Iterator[Verdict]:
    """The clock is synchronised by whichever daemon runs (chronyd, ntpd, systemd-timesyncd), with its
    offset and root distance within bounds (a drifted clock misorders logs and breaks munge credentials)."""
    text = out[TIME_SYNC.name].stdout
    sections = split_sections(text, "time_sync probe")
    down: list[DaemonDown] = []
    for name, judge in (("chronyc", _chrony), ("ntpq", _ntpq), ("timedatectl", _timedatectl)):
        section = sections.get(name)
        if section is None:
            continue
        try:
            verdicts = judge(section, want)
        except ParseError as e:
            yield Verdict(Status.ERROR, f"cannot read {e.tool}: {e.reason}", excerpt=e.excerpt)
            return
        if isinstance(verdicts, DaemonDown):
            down.append(verdicts)
            continue
        yield from verdicts
        return
    daemons = sections.get("daemons")
    running = sorted({p.comm for p in parse_process_list(daemons.text) if p.namespace == "same"}) if daemons else []
    seen = f"; running: {', '.join(running)}" if running else ""
    if down:
        said = "; ".join(f"{d.tool}: {d.message}" for d in down)
        yield Verdict(
            Status.FAIL,
            f"no time daemon answers ({said}){seen}, expected a synchronised clock",
            observed={"clients": [d.tool for d in down], "running": running},
            expected={"synchronised": True},
            excerpt=excerpt(text),
        )
        return
    yield Verdict(
        Status.FAIL,
        f"{NONE_FOUND}: none of chronyc, ntpq, timedatectl (with systemd) on this node{seen}",
        observed={"clients": [], "running": running},
        expected={"synchronised": True},
    )


def _read(section: Section, parse: Callable[[str], T], tool: str) -> T:
    """What a client said, only from a section that ended (its end marker came) with exit 0: a cut
    or killed client (`timeout 5`: 124) may have printed half a report. A daemon that did not answer
    is said whatever the exit status (chronyc's 506 exits 1)."""
    if section.rc is None:
        raise ParseError(tool, "output cut off (the section's end marker never came)", section.text)
    try:
        parsed = parse(section.text)
    except ParseError as e:
        if section.rc != 0:
            raise ParseError(tool, f"exited {section.rc} and {e.reason}", section.text) from None
        raise
    if section.rc != 0 and not isinstance(parsed, DaemonDown):
        raise ParseError(tool, f"exited {section.rc}: what it printed may not be all of it", section.text)
    return parsed


def _chrony(section: Section, want: TimeSync) -> list[Verdict] | DaemonDown:
    t = _read(section, parse_chronyc_tracking, "chronyc tracking")
    if isinstance(t, DaemonDown):
        return t
    if not t.synchronised:
        return [
            Verdict(
                Status.FAIL,
                f"clock not synchronised: chronyd says Leap status {t.leap!r} (reference {t.reference or 'none'}), "
                "expected synchronised",
                "chronyd",
                {"leap": t.leap, "reference": t.reference},
                {"synchronised": True},
                excerpt(section.text),
            )
        ]
    # a synchronised report is judged on all three: a cut one that lost its root delay or dispersion
    # would otherwise pass on its offset alone
    offset = _required(t.system_offset_s, "System time", section)
    delay = _required(t.root_delay_s, "Root delay", section)
    dispersion = _required(t.root_dispersion_s, "Root dispersion", section)
    return [_offset(offset, f"chronyd, reference {t.reference}", want), _distance(delay, dispersion, want)]


def _required(value: float | None, line: str, section: Section) -> float:
    if value is None:
        raise ParseError("chronyc tracking", f"no '{line}' line in a synchronised tracking report", section.text)
    return value


def _offset(offset_s: float, source: str, want: TimeSync) -> Verdict:
    way = "ahead of" if offset_s > 0 else "behind"
    band = want.offset_s.judge(abs(offset_s), what="offset_s", unit="s")
    limit = _limit(want.offset_s, band.status)
    relation = "expected <=" if band.status is not Status.PASS else "<="
    return Verdict(
        band.status,
        f"clock {fmt(abs(offset_s))} s {way} its reference ({source}), {relation} {fmt(limit)} s",
        "clock",
        {"offset_s": offset_s, "source": source},
        {"max_abs_offset_s": limit},
    )


def _limit(band: Ceiling, status: Status) -> float:
    """The bound a message quotes: the warning one when it warned, or passed under a warning bound."""
    if band.warn_above is not None and status in (Status.WARN, Status.PASS):
        return band.warn_above
    return band.fail_above


def _distance(delay: float, dispersion: float, want: TimeSync) -> Verdict:
    # chrony's bound on the clock's error through its reference (ChronyTracking.root_distance_s)
    distance = delay / 2 + dispersion
    band = want.root_distance_s.judge(distance, what="root_distance_s", unit="s")
    limit = _limit(want.root_distance_s, band.status)
    relation = "expected <=" if band.status is not Status.PASS else "<="
    return Verdict(
        band.status,
        f"root distance {fmt(round(distance, 9))} s (root delay {fmt(delay)} s / 2 + root dispersion "
        f"{fmt(dispersion)} s; the clock's worst error through its reference), {relation} "
        f"{fmt(limit)} s",
        "root distance",
        {"root_distance_s": distance, "root_delay_s": delay, "root_dispersion_s": dispersion},
        {"max_root_distance_s": limit},
    )


def _ntpq(section: Section, want: TimeSync) -> list[Verdict] | DaemonDown:
    peers = _read(section, parse_ntpq_peers, "ntpq -pn")
    if isinstance(peers, DaemonDown):
        return peers
    peer = peers.system_peer
    if peer is None:
        return [
            Verdict(
                Status.FAIL,
                f"clock not synchronised: ntpd has no system peer (no '*' among {len(peers.peers)} peers in "
                "ntpq -pn), expected one",
                "ntpd",
                {"peers": len(peers.peers)},
                {"system_peer": True},
                excerpt(section.text),
            )
        ]
    # ntpq's offset is the peer's clock minus this one's, in milliseconds
    return [_offset(-peer.offset_ms / 1000, f"ntpd, system peer {peer.remote}", want)]


def _timedatectl(section: Section, want: TimeSync) -> list[Verdict] | DaemonDown:
    status = _read(section, parse_timedatectl, "timedatectl")
    service = f", NTP service {status.ntp_service}" if status.ntp_service else ""
    if not status.synchronized:
        return [
            Verdict(
                Status.FAIL,
                f"clock not synchronised (timedatectl: System clock synchronized: no{service}), expected yes",
                "clock",
                {"synchronized": False, "ntp_service": status.ntp_service},
                {"synchronized": True},
            )
        ]
    return [
        Verdict(
            Status.PASS,
            f"clock synchronised (timedatectl: System clock synchronized: yes{service}); systemd-timesyncd "
            "reports no offset: the kernel's flag is all there is to judge",
            "clock",
            {"synchronized": True, "ntp_service": status.ntp_service},
        )
    ]
