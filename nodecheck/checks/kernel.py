"""What the kernel log says happened on the node: NVIDIA Xid events (classified) and OOM kills."""
from __future__ import annotations

import functools
import re
from collections import defaultdict
from datetime import datetime, timedelta, timezone
from typing import Iterator, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from nodecheck.core.errors import ParseError
from nodecheck.core.model import Probe, Status, Verdict, excerpt
from nodecheck.parsers.kernel_log import KernelLog, parse_kernel_log
from nodecheck.parsers.xid_codes import classify
from nodecheck.parsers.sections import split_sections
from nodecheck.core.registry import Captures, check

# The node's clock first (events are timed against it, not ours), then dmesg with absolute ISO
# times; where dmesg is not allowed (kernel.dmesg_restrict) the journal's kernel messages instead.
KERNEL_LOG_SCRIPT = r"""
printf '@@nodecheck clock now=%s uptime=%s utc_offset=%s\n' "$(date +%s)" "$(cut -d' ' -f1 /proc/uptime)" "$(date +%z)"
section() { n=$1; shift; echo "@@nodecheck begin $n"; "$@" 2>&1; rc=$?; echo "@@nodecheck end $n rc=$rc"; return $rc; }
section dmesg dmesg --time-format iso && exit 0
if command -v journalctl >/dev/null 2>&1; then section journal journalctl -k -b -o short-iso --no-pager -q; fi
exit 0
"""
KERNEL_LOG = Probe("kernel-log", ("sh", "-c", KERNEL_LOG_SCRIPT, "nodecheck-kernel-log"), timeout_s=20)

_SINCE = re.compile(r"^(\d+)([smhd])$", re.ASCII)
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_CLOCK = re.compile(r"now=(\d+) uptime=([\d.]+) utc_offset=([+-])(\d\d)(\d\d)", re.ASCII)


class Window(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    since: str = Field("boot", description="\"boot\" (everything in the kernel ring buffer) or a "
                       "duration back from the node's clock: 30m, 24h, 7d")

    @field_validator("since")
    @classmethod
    def _since(cls, value: str) -> str:
        match = _SINCE.match(value)
        if value != "boot" and (not match or int(match.group(1)) == 0):
            raise ValueError(f"since must be boot or a positive duration like 30m, 24h, 7d; got {value!r}")
        return value

    @property
    def seconds(self) -> float | None:
        if self.since == "boot":
            return None
        n, unit = _SINCE.match(self.since).groups()
        return int(n) * _UNIT_S[unit]


class XidParams(Window):
    fail: list[int] = Field([], description="Xid codes that fail, overriding the built-in table")
    warn: list[int] = Field([], description="Xid codes that only warn, overriding the table")
    ignore: list[int] = Field([], description="Xid codes not judged at all")

    @model_validator(mode="after")
    def _disjoint(self) -> "XidParams":
        seen: dict[int, str] = {}
        for name in ("fail", "warn", "ignore"):
            for code in getattr(self, name):
                if code in seen:
                    raise ValueError(f"Xid {code} is listed under both {seen[code]} and {name}")
                seen[code] = name
        return self

    def action(self, code: int) -> tuple[str, str]:
        """(fail|warn|ignore, meaning): the playbook first, then the built-in table."""
        severity, meaning = classify(code)
        for name in ("fail", "warn", "ignore"):
            if code in getattr(self, name):
                return name, meaning + " (severity set in the playbook)"
        return severity, meaning


class OomParams(Window):
    since: str = Field("24h", description="how far back OOM kills count: 30m, 24h, 7d, or boot")
    status: Literal["fail", "warn"] = Field("warn", description="what an OOM kill in the window means")


def read_kernel_log(out: Captures) -> tuple[KernelLog, datetime | None, str, float | None]:
    """(parsed log, the node's clock, which source was read, the node's uptime in seconds)."""
    return _read_text(out[KERNEL_LOG.name].stdout)


@functools.lru_cache(maxsize=65536)              # gpu.xid and node.oom read the same log: parse it once
def _read_text(text: str) -> tuple[KernelLog, datetime | None, str, float | None]:
    sections = split_sections(text, "kernel log probe")
    clock = _CLOCK.match(sections.facts.get("clock", ""))
    now, uptime, offset = None, None, 0
    if clock:
        now = datetime.fromtimestamp(int(clock.group(1)), timezone.utc)
        uptime = float(clock.group(2))
        offset = (-1 if clock.group(3) == "-" else 1) * (int(clock.group(4)) * 3600 + int(clock.group(5)) * 60)
    for name, tool in (("dmesg", "dmesg"), ("journal", "journalctl -k")):
        section = sections.get(name)
        if section is not None and section.ok:
            log = parse_kernel_log(section.text, now=now, uptime_s=uptime, utc_offset_s=offset)
            if log.lines == 0:
                # a running kernel always has messages: an empty log means we read nothing
                raise ParseError(tool, "the kernel log is empty: nothing could be read", section.text)
            return log, now, tool, uptime
    tried = [s for s in ("dmesg", "journal") if sections.get(s) is not None]
    said = "; ".join(f"{s} exit {sections.get(s).rc}: {sections.get(s).text.strip()[:200]}" for s in tried)
    raise ParseError("kernel log", f"could not read the kernel log ({said or 'no output'})", text)


def _unread(out: Captures, log: KernelLog, source: str) -> Verdict | None:
    """An ERROR in place of a PASS when no line of the log carries a kernel timestamp: whitespace,
    binary garbage or "-- No entries --" show nothing was read, and no event in nothing is no
    evidence of health. (Events found in such a log are still judged: they are evidence of a fault.)
    A wholly empty log is refused before this (`_read_text`): a running kernel always has messages,
    so an empty ring buffer means someone cleared it (dmesg -C) and what it held is unknown."""
    if log.stamped:
        return None
    name = "dmesg" if source == "dmesg" else "journal"
    section = split_sections(out[KERNEL_LOG.name].stdout, "kernel log probe").get(name)
    return Verdict(Status.ERROR, f"cannot read {source} output: no line of its {log.lines} carries a kernel "
                   "timestamp: nothing shows a kernel log was read", excerpt=excerpt(section.text if section else ""))


BOOT_SLACK_S = 120.0                           # a log that starts this soon after boot is the whole boot


def _coverage(log: KernelLog, now: datetime | None, uptime_s: float | None, window: Window,
              source: str) -> Verdict | None:
    """A WARN when the log provably starts after the window does (a wrapped ring buffer): no
    events found in it is then not the same as no events."""
    if now is None:
        return None
    boot = now - timedelta(seconds=uptime_s) if uptime_s is not None else None
    start = boot if window.seconds is None else now - timedelta(seconds=window.seconds)
    if start is None:
        return None
    if boot is not None and start < boot:
        start = boot                           # nothing before this boot can be in its log
    first = log.first_time
    if log.first_uptime_s is not None and boot is not None:
        first = min(first, boot + timedelta(seconds=log.first_uptime_s)) if first else \
            boot + timedelta(seconds=log.first_uptime_s)
    if first is None or first <= start + timedelta(seconds=BOOT_SLACK_S):
        return None
    why = ("the ring buffer wrapped; a persistent journal keeps the whole boot" if source == "dmesg"
           else "the journal was rotated or is volatile")
    return Verdict(Status.WARN, f"{source} reaches back only to {first:%Y-%m-%d %H:%M:%SZ}, but the window "
                   f"starts {start:%Y-%m-%d %H:%M:%SZ} ({_window_text(window)}): older events are not "
                   f"seen ({why})", "kernel log",
                   {"log_starts": first.isoformat()}, {"log_starts_by": start.isoformat()})


def _in_window(time: datetime | None, now: datetime | None, window: Window) -> bool:
    """Unknown times count: an event we cannot place might be recent, and a false PASS is worse."""
    if window.seconds is None or time is None or now is None:
        return True
    return time >= now - timedelta(seconds=window.seconds)


def _window_text(window: Window) -> str:
    return "since boot" if window.seconds is None else f"in the last {window.since}"


@check("gpu.xid", probes=[KERNEL_LOG], params=XidParams)
def gpu_xid(out: Captures, want: XidParams) -> Iterator[Verdict]:
    """NVIDIA Xid events in the kernel log within the window, classified by what they require."""
    log, now, source, uptime = read_kernel_log(out)
    if (partial := _coverage(log, now, uptime, want, source)) is not None:
        yield partial
    unreadable = [bad for bad in log.unreadable if bad.kind == "xid"]
    for bad in unreadable:
        yield Verdict(Status.ERROR, f"unreadable Xid line: {bad.reason}", excerpt=excerpt(bad.raw))
    events = [e for e in log.xids if _in_window(e.time, now, want)]
    grouped: dict[tuple[str, int], list] = defaultdict(list)
    for e in events:
        grouped[(e.pci or "unknown PCI", e.code)].append(e)
    judged = 0
    for (pci, code), same in sorted(grouped.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        action, meaning = want.action(code)
        if action == "ignore":
            continue
        judged += 1
        last = same[-1]
        when = f", last {last.time:%Y-%m-%d %H:%M:%SZ}" if last.time else ", time unknown"
        who = f", pid {last.pid} {last.process}" if last.pid is not None else ""
        how = " (from the kernel's message; no Xid line)" if last.inferred else ""
        times = f"{len(same)}x" if len(same) > 1 else "1x"
        yield Verdict(Status.FAIL if action == "fail" else Status.WARN,
                      f"Xid {code} on PCI:{pci}: {meaning}{how} ({times}{when}{who})", f"PCI:{pci}",
                      {"xid": code, "count": len(same), "pci": pci, "pid": last.pid, "process": last.process,
                       "time": last.time.isoformat() if last.time else None},
                      {"xid": None}, excerpt("\n".join(e.raw for e in same[-3:])))
    if not judged and not unreadable and (unread := _unread(out, log, source)) is not None:
        yield unread
    elif not judged and not unreadable:
        ignored = len(events)
        note = f" ({ignored} ignored by the playbook)" if ignored else ""
        yield Verdict(Status.PASS, f"no Xid events {_window_text(want)} ({source}, {log.lines} lines){note}",
                      observed={"xids": 0, "lines": log.lines})


@check("node.oom", probes=[KERNEL_LOG], params=OomParams)
def node_oom(out: Captures, want: OomParams) -> Iterator[Verdict]:
    """OOM kills in the kernel log within the window (a leftover of the last job, or a node short
    of memory)."""
    log, now, source, uptime = read_kernel_log(out)
    if (partial := _coverage(log, now, uptime, want, source)) is not None:
        yield partial
    unreadable = [bad for bad in log.unreadable if bad.kind == "oom"]
    for bad in unreadable:                     # a kill we cannot read is not "no kill"
        yield Verdict(Status.ERROR, f"unreadable OOM kill line: {bad.reason}", excerpt=excerpt(bad.raw))
    kills = [k for k in log.ooms if _in_window(k.time, now, want)]
    if not kills and not unreadable and (unread := _unread(out, log, source)) is not None:
        yield unread
        return
    if not kills and not unreadable:
        yield Verdict(Status.PASS, f"no OOM kills {_window_text(want)} ({source}, {log.lines} lines)",
                      observed={"oom_kills": 0})
        return
    if not kills:
        return
    by_process: dict[str, list] = defaultdict(list)
    for k in kills:
        by_process[k.process or "unknown process"].append(k)
    for process, same in by_process.items():
        last = same[-1]
        when = f"last {last.time:%Y-%m-%d %H:%M:%SZ}" if last.time else "time unknown"
        scope = f"cgroup {last.cgroup}" if last.cgroup else last.scope
        yield Verdict(Status.FAIL if want.status == "fail" else Status.WARN,
                      f"OOM killed {process} {len(same)}x {_window_text(want)} ({when}, pid {last.pid}, {scope}), "
                      "expected none",
                      process, {"oom_kills": len(same), "process": process, "pid": last.pid},
                      {"oom_kills": 0}, excerpt("\n".join(k.raw for k in same[-3:])))
