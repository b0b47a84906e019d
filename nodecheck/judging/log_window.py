"""The window a kernel-log check looks back over, and what a log that cannot cover it means:
shared by gpu.xid, nvlink.sxid and node.oom."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from nodecheck.core.model import Status, Verdict, excerpt
from nodecheck.parsers.kernel_log import KernelLog

_SINCE = re.compile(r"^(\d+)([smhd])$", re.ASCII)
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class Window(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    since: str = Field(
        "boot",
        description='"boot" (everything in the kernel ring buffer) or a '
        "duration back from the node's clock: 30m, 24h, 7d",
    )

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
        match = _SINCE.match(self.since)
        assert match is not None, self.since  # the validator let only "boot" or a duration through
        n, unit = match.groups()
        return int(n) * _UNIT_S[unit]


class CodeWindow(Window):
    """A window of kernel-log events with numeric codes (Xid, SXid) and the playbook's lists that set
    a code's severity over the built-in one; a code sits in one list at most."""

    EVENT: ClassVar[str] = "event"  # the codes' name in messages: "Xid", "SXid"
    fail: list[int] = Field([], description="codes that fail, whatever the built-in severity says")
    warn: list[int] = Field([], description="codes that only warn, whatever the built-in severity says")
    ignore: list[int] = Field([], description="codes not judged at all")

    @model_validator(mode="after")
    def _disjoint(self) -> CodeWindow:
        seen: dict[int, str] = {}
        for name in ("fail", "warn", "ignore"):
            for code in getattr(self, name):
                if code in seen:
                    raise ValueError(f"{self.EVENT} {code} is listed under both {seen[code]} and {name}")
                seen[code] = name
        return self

    def listed(self, code: int) -> str | None:
        """The playbook list that names the code (fail, warn or ignore), or None."""
        return next((name for name in ("fail", "warn", "ignore") if code in getattr(self, name)), None)


def unread(log: KernelLog, source: str, text: Callable[[], str]) -> Verdict | None:
    """An ERROR in place of a PASS when no line of the log carries a kernel timestamp: whitespace,
    binary garbage or "-- No entries --" show nothing was read, and no event in nothing is no
    evidence of health. (Events found in such a log are still judged: they are evidence of a fault.)
    A wholly empty log is refused before this (probes/kernel_log.py): a running kernel always has
    messages, so an empty ring buffer means someone cleared it (dmesg -C) and what it held is unknown.
    `text()` gives the log as read, for the excerpt (split out only when it is needed)."""
    if log.stamped:
        return None
    return Verdict(
        Status.ERROR,
        f"cannot read {source} output: no line of its {log.lines} carries a kernel "
        "timestamp: nothing shows a kernel log was read",
        excerpt=excerpt(text()),
    )


BOOT_SLACK_S = 120.0  # a log that starts this soon after boot is the whole boot


def coverage(
    log: KernelLog, now: datetime | None, uptime_s: float | None, window: Window, source: str
) -> Verdict | None:
    """A WARN when the log provably starts after the window does (a wrapped ring buffer): no
    events found in it is then not the same as no events."""
    if now is None:
        return None
    boot = now - timedelta(seconds=uptime_s) if uptime_s is not None else None
    start = boot if window.seconds is None else now - timedelta(seconds=window.seconds)
    if start is None:
        return None
    if boot is not None and start < boot:
        start = boot  # nothing before this boot can be in its log
    first = log.first_time
    if log.first_uptime_s is not None and boot is not None:
        first = (
            min(first, boot + timedelta(seconds=log.first_uptime_s))
            if first
            else boot + timedelta(seconds=log.first_uptime_s)
        )
    if first is None or first <= start + timedelta(seconds=BOOT_SLACK_S):
        return None
    why = (
        "the ring buffer wrapped; a persistent journal keeps the whole boot"
        if source == "dmesg"
        else "the journal was rotated or is volatile"
    )
    return Verdict(
        Status.WARN,
        f"{source} reaches back only to {first:%Y-%m-%d %H:%M:%SZ}, but the window "
        f"starts {start:%Y-%m-%d %H:%M:%SZ} ({window_text(window)}): older events are not "
        f"seen ({why})",
        "kernel log",
        {"log_starts": first.isoformat()},
        {"log_starts_by": start.isoformat()},
    )


def in_window(time: datetime | None, now: datetime | None, window: Window) -> bool:
    """Unknown times count: an event we cannot place might be recent, and a false PASS is worse."""
    if window.seconds is None or time is None or now is None:
        return True
    return time >= now - timedelta(seconds=window.seconds)


def window_text(window: Window) -> str:
    return "since boot" if window.seconds is None else f"in the last {window.since}"
