"""Read NVIDIA Xid events and OOM kills out of kernel log text (dmesg, kern.log, journalctl -k)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone

from nodecheck.core.model import quote
from nodecheck.parsers.lines import split_lines

UTC = timezone.utc

# re.ASCII where numbers are read: a str pattern's \d also matches other scripts' digits.
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_MONTH = "(?P<mon>" + "|".join(_MONTHS) + ")"
# `dmesg --decode`: "kern  :warn  : " ahead of any timestamp form
_DECODE = re.compile(r"[a-z]+ *:[a-z]+ *: ", re.ASCII)
# `dmesg --time-format iso` prints "2025-01-21T04:41:44,283302+00:00"; journalctl -o short-iso
# prints "+0000" (older systemd) or "+00:00", short-iso-precise adds ".283302"
_ISO = re.compile(
    r"(?P<date>\d{4})-(?P<m>\d\d)-(?P<d>\d\d)T(?P<H>\d\d):(?P<M>\d\d):(?P<S>\d\d)"
    r"(?:[,.](?P<frac>\d{1,9}))?(?P<tz>Z|[+-]\d\d:?\d\d)(?: |$)",
    re.ASCII,
)
# journal and syslog lines name the host and the kernel before the message
_HOST_KERNEL = re.compile(r"\S+ kernel: ")
_UPTIME = re.compile(r"\[ *(?P<s>\d+\.\d+)\] ?", re.ASCII)
# `dmesg -T`: ctime(3) layout, day padded with a space: "[Thu Dec  7 00:05:14 2017]"
_CTIME = re.compile(
    r"\[(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) "
    + _MONTH
    + r" {1,2}(?P<d>\d{1,2}) (?P<H>\d\d):(?P<M>\d\d):(?P<S>\d\d) (?P<y>\d{4})\] ?",
    re.ASCII,
)
# rsyslog / journalctl short: "May 15 23:09:30 host kernel: "; short-precise adds ".283302"
_SYSLOG = re.compile(
    _MONTH + r" {1,2}(?P<d>\d{1,2}) (?P<H>\d\d):(?P<M>\d\d):(?P<S>\d\d)"
    r"(?:\.(?P<frac>\d{1,9}))? \S+ kernel: ",
    re.ASCII,
)

_XID_MARK = "NVRM: Xid"
# "NVRM: Xid (PCI:0000:9b:00): 119, pid=…, name=…, detail"; MIG adds " GPU-I:05" inside the
# parentheses; the fields after the code differ by driver age, so they are read one by one below
_XID = re.compile(
    r"NVRM: Xid(?: \((?:PCI:)?(?P<pci>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})"
    r"(?:\.[0-7])?(?: [^)]*)?\))?: (?P<code>\d+)(?:, (?P<rest>.*)|,?)$",
    re.ASCII,
)
_PID_FIELD = re.compile(r"pid=(?P<v>[^,]*)(?:, |,?$)")
_NAME_FIELD = re.compile(r"name=(?P<v>.*?)(?:, |,?$)")
_FIELD_NAMES = ("pid=", "name=")
_DIGITS = re.compile(r"\d+", re.ASCII)
# printed where the driver does not know the process: pid='<unknown>', name=<unknown>, pid='N/A'
_NO_PROCESS = {"<unknown>", "'<unknown>'", "N/A", "'N/A'", ""}
# the driver's "lost GPU" message (nv.c): three lines, only the first naming the GPU
#   NVRM: The NVIDIA GPU 0000:b3:00.0
#   NVRM: (PCI ID: 10de:26b5) installed in this system has
#   NVRM: fallen off the bus and is not responding to commands.
# "The NVIDIA GPU … installed in this system is not supported" starts the same way: only the
# "fallen off the bus" text makes it an event
_LOST_HEAD = re.compile(
    r"NVRM: The NVIDIA GPU (?P<pci>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})"
    r"(?:\.[0-7])?\b",
    re.ASCII,
)
_LOST_TEXT = "fallen off the bus"
_LOST_LINES = 3  # the most lines the driver spreads the message over

# mm/oom_kill.c __oom_kill_process: "%s: Killed process %d (%s) total-vm:%lukB, anon-rss:%lukB, …"
# with %s "Out of memory" or "Memory cgroup out of memory"; kernels before 4.x printed the
# "Killed process" line bare, after a "…: Kill process %d (%s) score %u or sacrifice child" line;
# RHEL 6 printed "Killed process %d, UID %d, (%s)". The name is matched greedily up to the last
# ")" before the sizes because a comm may hold parentheses: "((resolved))"; every kernel since
# 2.6.32 prints sizes after the name, so a line ending at ")" is cut short ("((resolved)").
_KILLED_MARK = re.compile(r"\bKilled process\b")
_KILLED = re.compile(
    r"(?:(?P<msg>Out of memory|Memory cgroup out of memory)(?: \([a-z_]+\))?: )?"
    r"Killed process (?P<pid>\d+)(?:, UID \d+,)? \((?P<name>.*)\)"
    r"(?P<tail>,? (?:total-vm|vsz):.*)$",
    re.ASCII,
)
_ANON_RSS = re.compile(r"\banon-rss:(?P<kb>\d+)kB", re.ASCII)
# the victim choice before a bare "Killed process": names the scope, is not a kill (the kernel may
# then kill a child instead: the EL7 corpus file chooses 24572 and kills 28438)
_CHOICE = re.compile(
    r"(?P<msg>Out of memory|Memory cgroup out of memory)(?: \([a-z_]+\))?: "
    r"Kill process \d+ ",
    re.ASCII,
)
# mm/memcontrol.c (3.10-4.18): "Task in <cgroup> killed as a result of limit of <cgroup>"
_TASK_IN = re.compile(r"Task in (?P<task>\S+) killed as a result of limit of (?P<limit>\S+)$")
# mm/oom_kill.c dump_oom_summary (4.19+), printed just before "Killed process" for the same pid:
# "oom-kill:constraint=CONSTRAINT_MEMCG,…,oom_memcg=/x,task_memcg=/x/y,task=python3,pid=1234,uid=0"
_SUMMARY = re.compile(r"oom-kill:(?P<fields>constraint=.*)$")
_SUMMARY_PID = re.compile(r"(?:^|,)pid=(?P<pid>\d+)(?:,|$)", re.ASCII)
_SUMMARY_MEMCG = re.compile(r"(?:^|,)oom_memcg=(?P<cg>[^,]+)")
_EPISODE = "invoked oom-killer"  # a new OOM episode: earlier context no longer applies
_SCOPES = {"Out of memory": "global", "Memory cgroup out of memory": "cgroup"}

# a syslog date carries no year; a date up to this far past `now` is still taken as this year,
# because `now` may be the controller's clock or read just before the log, and a fresh event
# pushed back a year would be judged stale
_SYSLOG_SLACK = timedelta(days=1)


@dataclass(frozen=True)
class XidEvent:
    code: int
    pci: str | None  # "0000:9b:00" as printed after PCI: (lower case), None if absent
    pid: int | None  # None for '<unknown>' or absent
    process: str | None  # None for <unknown> or absent
    detail: str  # the text after the code/pid/name fields
    time: datetime | None  # timezone-aware UTC when determinable, else None
    raw: str  # the line(s)
    inferred: bool = False  # True for "fallen off the bus" messages without an Xid line (code 79)


@dataclass(frozen=True)
class OomKill:
    pid: int | None
    process: str | None  # "python3", "(resolved)": the name inside the outer parentheses
    scope: str  # "global" | "cgroup" | "unknown"
    cgroup: str | None  # the memory cgroup whose limit was hit, when the log names it
    anon_rss_kb: int | None
    time: datetime | None
    raw: str


@dataclass(frozen=True)
class Unreadable:
    raw: str
    reason: str
    kind: str = "xid"  # "xid" or "oom": which check cannot judge it


@dataclass(frozen=True)
class KernelLog:
    xids: tuple[XidEvent, ...]
    ooms: tuple[OomKill, ...]
    unreadable: tuple[Unreadable, ...]
    lines: int  # lines read
    timestamps: str  # "iso", "uptime", "ctime", "syslog", "journal", "none" or "mixed"
    # the earliest time any line can be placed at: how far back the log reaches (a wrapped ring
    # buffer starts after boot); None when no line carries a usable time
    first_time: datetime | None = None
    first_uptime_s: float | None = None  # the first "[ 12.345]" stamp, seconds after boot
    # lines that open with a kernel timestamp of a known form: 0 means nothing shows this is a
    # kernel log at all (whitespace, garbage, "-- No entries --"), so finding no event in it is no pass
    stamped: int = 0


@dataclass(frozen=True)
class _Line:
    raw: str
    message: str  # the text after any level and timestamp prefix, outer blanks removed
    form: str | None  # the timestamp form, None when the line has none
    time: datetime | None


@dataclass(frozen=True)
class _OomContext:
    """What the lines before a "Killed process" line said about it."""

    scope: str = "unknown"
    cgroup: str | None = None
    summary_pid: int | None = None
    summary_memcg: str | None = None


def parse_kernel_log(
    text: str, *, now: datetime | None = None, uptime_s: float | None = None, utc_offset_s: int = 0
) -> KernelLog:
    """Every Xid event and OOM kill in `text`; a line marked as one but unreadable goes to `unreadable`.

    `now` (timezone-aware) and `uptime_s` place "[ 1399.140318]" seconds-since-boot stamps;
    `now` also gives a syslog date its year; `utc_offset_s` is the node's local offset, applied to
    `dmesg -T` and syslog dates, which are printed in local time.
    """
    if now is not None and now.utcoffset() is None:
        raise ValueError("now must be timezone-aware")  # a caller's bug, not odd input
    offset = timedelta(seconds=utc_offset_s)
    raw_lines = split_lines(text)
    lines = [_read_line(raw, now, uptime_s, offset) for raw in raw_lines]
    xids: list[XidEvent] = []
    ooms: list[OomKill] = []
    unreadable: list[Unreadable] = []
    context = _OomContext()
    i = 0
    while i < len(lines):
        line = lines[i]
        used = 1
        if _XID_MARK in line.message:
            event = _xid(line)
            if isinstance(event, XidEvent):
                xids.append(event)
            else:
                unreadable.append(event)
        elif _LOST_HEAD.search(line.message):
            lost, used = _lost_gpu(lines, i)
            if lost is not None:
                xids.append(lost)
        elif _KILLED_MARK.search(line.message):
            kill = _killed(line, context)
            if isinstance(kill, OomKill):
                ooms.append(kill)
            else:
                unreadable.append(kill)
            context = _OomContext()
        else:
            context = _oom_context(line.message, context)
        i += used
    cut = bool(text) and not text.endswith(("\n", "\r"))
    times = [ln.time for ln in lines if ln.time is not None]
    first_uptime = next(
        (float(m.group("s")) for raw in raw_lines[:50] if (m := _UPTIME.search(raw[:40])) is not None), None
    )
    stamped = sum(1 for ln in lines if ln.form is not None)
    return KernelLog(
        tuple(_drop_echoed_79(xids)),
        tuple(ooms),
        tuple(unreadable),
        len(raw_lines),
        _timestamp_form(lines, cut),
        min(times) if times else None,
        first_uptime,
        stamped,
    )


# -- line prefixes and times ------------------------------------------------------------------------


def _read_line(raw: str, now: datetime | None, uptime_s: float | None, offset: timedelta) -> _Line:
    rest = raw
    decode = _DECODE.match(rest)
    if decode:
        rest = rest[decode.end() :]
    form, time, rest = _timestamp(rest, now, uptime_s, offset)
    return _Line(raw, rest.strip(), form, time)


def _timestamp(
    text: str, now: datetime | None, uptime_s: float | None, offset: timedelta
) -> tuple[str | None, datetime | None, str]:
    """(form, UTC time or None, the rest of the line) for the one timestamp form the line opens with."""
    match = _ISO.match(text)
    if match:
        rest = text[match.end() :]
        host = _HOST_KERNEL.match(rest)
        if host:  # journalctl -o short-iso[-precise], rsyslog RFC 3339
            return "journal", _iso_time(match), _after_uptime(rest[host.end() :])
        return "iso", _iso_time(match), rest
    match = _SYSLOG.match(text)
    if match:  # its own "[  518.050606]" is skipped: the date is absolute
        return "syslog", _syslog_time(match, now, offset), _after_uptime(text[match.end() :])
    match = _CTIME.match(text)
    if match:
        local = _datetime(int(match["y"]), _month(match), match)
        return "ctime", _local_to_utc(local, offset), text[match.end() :]
    match = _UPTIME.match(text)
    if match:
        return "uptime", _boot_time(match["s"], now, uptime_s), text[match.end() :]
    return None, None, text


def _after_uptime(text: str) -> str:
    match = _UPTIME.match(text)
    return text[match.end() :] if match else text


def _month(match: re.Match) -> int:
    return _MONTHS.index(match["mon"]) + 1


def _micro(frac: str | None) -> int:
    return int((frac or "0")[:6].ljust(6, "0"))


def _datetime(year: int, month: int, match: re.Match, frac: str | None = None) -> datetime | None:
    """A naive datetime from the matched fields; None for a date no calendar has (Feb 30, 25:00)."""
    try:
        return datetime(year, month, int(match["d"]), int(match["H"]), int(match["M"]), int(match["S"]), _micro(frac))
    except ValueError:
        return None


def _iso_time(match: re.Match) -> datetime | None:
    local = _datetime(int(match["date"]), int(match["m"]), match, match["frac"])
    tz = match["tz"]
    if local is None:
        return None
    if tz == "Z":
        return local.replace(tzinfo=UTC)
    sign = -1 if tz[0] == "-" else 1
    hours, minutes = int(tz[1:3]), int(tz[-2:])
    if hours > 23 or minutes > 59:
        return None
    return _local_to_utc(local, sign * timedelta(hours=hours, minutes=minutes))


def _local_to_utc(local: datetime | None, offset: timedelta) -> datetime | None:
    if local is None:
        return None
    try:
        return (local - offset).replace(tzinfo=UTC)
    except OverflowError:  # year 1 or 9999 pushed past the calendar
        return None


def _boot_time(seconds: str, now: datetime | None, uptime_s: float | None) -> datetime | None:
    """now - uptime + t: the boot time read from the node's clock, plus the stamp."""
    if now is None or uptime_s is None:
        return None
    try:
        return (now - timedelta(seconds=uptime_s) + timedelta(seconds=float(seconds))).astimezone(UTC)
    except (OverflowError, ValueError):  # a stamp of 10^12 seconds is not a time
        return None


def _syslog_time(match: re.Match, now: datetime | None, offset: timedelta) -> datetime | None:
    """The latest date of that month/day/time not after `now` (plus slack), in the node's local time."""
    if now is None:
        return None
    try:
        local_now = now.astimezone(UTC).replace(tzinfo=None) + offset + _SYSLOG_SLACK
    except OverflowError:
        return None
    for year in range(local_now.year, local_now.year - 8, -1):  # 8 years reach a leap day's Feb 29
        local = _datetime(year, _month(match), match, match["frac"]) if year >= 1 else None
        if local is not None and local <= local_now:
            return _local_to_utc(local, offset)
    return None


def _timestamp_form(lines: list[_Line], cut: bool) -> str:
    """The one form the timestamped lines share, "none" when no line has one, else "mixed".

    An indented line without a stamp is dmesg's continuation of the line above, and a last line
    without a newline is cut off mid-stamp ("May 15 2"): neither is a form of its own.
    """
    forms = set()
    for n, line in enumerate(lines):
        if line.form is not None:
            forms.add(line.form)
        elif line.raw.strip() and not line.raw[0].isspace() and not (cut and n == len(lines) - 1):
            forms.add("none")
    if not forms:
        return "none"
    return forms.pop() if len(forms) == 1 else "mixed"


# -- Xid --------------------------------------------------------------------------------------------


def _xid(line: _Line) -> XidEvent | Unreadable:
    start = line.message.index(_XID_MARK)
    match = _XID.match(line.message, start)
    if not match:
        return Unreadable(line.raw, f"Xid line without a readable code: {quote(line.message[start:])}")
    rest = match["rest"] or ""
    pid = process = None
    field = _PID_FIELD.match(rest)
    if field:
        value = field["v"].strip()
        if _DIGITS.fullmatch(value):
            pid = int(value)
        elif value not in _NO_PROCESS:
            return Unreadable(line.raw, f"Xid pid {quote(value)} is not a number")
        rest = rest[field.end() :]
    field = _NAME_FIELD.match(rest)
    if field:
        value = field["v"].strip()
        process = None if value in _NO_PROCESS else value
        rest = rest[field.end() :]
    if not rest.strip() or any(field.startswith(rest) for field in _FIELD_NAMES):
        # the driver always prints a message after the fields: a line ending at the code or inside
        # pid=/name= was cut short ("119" cut to "11" is another code, ", p" a lost pid)
        return Unreadable(line.raw, f"Xid line ends before its message (cut short?): {quote(line.message[start:])}")
    pci = match["pci"].lower() if match["pci"] else None
    return XidEvent(int(match["code"]), pci, pid, process, rest.strip(), line.time, line.raw)


def _lost_gpu(lines: list[_Line], i: int) -> tuple[XidEvent | None, int]:
    """Code 79 from the driver's "fallen off the bus" message, and how many lines it spans."""
    head = _LOST_HEAD.search(lines[i].message)
    assert head is not None  # the caller found it there
    parts = [lines[i].message[head.start() :]]
    end = i + 1
    while _LOST_TEXT not in " ".join(parts) and end < len(lines) and end - i < _LOST_LINES:
        following = lines[end].message
        # the next lines carry their own "NVRM:"; anything else, or a new message, ends it
        if not following.startswith("NVRM:") or _XID_MARK in following or _LOST_HEAD.search(following):
            break
        parts.append(following)
        end += 1
    detail = " ".join(part.removeprefix("NVRM:").strip() for part in parts)
    if _LOST_TEXT not in detail:
        return None, 1  # another "The NVIDIA GPU …" message: not an event
    raw = "\n".join(line.raw for line in lines[i:end])
    return XidEvent(79, head["pci"].lower(), None, None, detail, lines[i].time, raw, inferred=True), end - i


def _drop_echoed_79(xids: list[XidEvent]) -> list[XidEvent]:
    """An inferred 79 for a GPU whose Xid 79 line is also in the log is the same loss, counted once."""
    logged = {event.pci for event in xids if event.code == 79 and not event.inferred}
    return [event for event in xids if not (event.inferred and event.pci in logged)]


# -- OOM kills --------------------------------------------------------------------------------------


def _oom_context(message: str, context: _OomContext) -> _OomContext:
    """The context after a line that is not a kill: what it says about the next kill, if anything."""
    if _EPISODE in message:
        return _OomContext()
    choice = _CHOICE.match(message)
    if choice:
        return replace(context, scope=_SCOPES[choice["msg"]])
    task_in = _TASK_IN.match(message)
    if task_in:
        return replace(context, scope="cgroup", cgroup=task_in["limit"])
    summary = _SUMMARY.match(message)
    if summary:
        pid = _SUMMARY_PID.search(summary["fields"])
        memcg = _SUMMARY_MEMCG.search(summary["fields"])
        return replace(
            context, summary_pid=int(pid["pid"]) if pid else None, summary_memcg=memcg["cg"] if memcg else None
        )
    return context


def _killed(line: _Line, context: _OomContext) -> OomKill | Unreadable:
    """One kill per "Killed process" line; the lines before it may name its scope and cgroup."""
    match = _KILLED.match(line.message)
    if not match:
        return Unreadable(line.raw, f"OOM kill line not in a known form: {quote(line.message)}", "oom")
    pid = int(match["pid"])
    scope = _SCOPES[match["msg"]] if match["msg"] else context.scope
    cgroup = context.cgroup
    if context.summary_pid == pid and context.summary_memcg:
        scope, cgroup = "cgroup", context.summary_memcg
    anon = _ANON_RSS.search(match["tail"] or "")
    return OomKill(
        pid,
        match["name"],
        scope,
        cgroup if scope == "cgroup" else None,
        int(anon["kb"]) if anon else None,
        line.time,
        line.raw,
    )
