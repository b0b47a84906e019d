"""What happened to the node as a whole: OOM kills the kernel log recorded."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Literal

from pydantic import Field

from nodecheck.core.model import Status, Verdict, excerpt
from nodecheck.core.registry import Captures, check
from nodecheck.judging.log_window import Window, coverage, in_window, unread, window_text
from nodecheck.probes.kernel_log import KERNEL_LOG, read_kernel_log, source_text


class OomParams(Window):
    since: str = Field("24h", description="how far back OOM kills count: 30m, 24h, 7d, or boot")
    status: Literal["fail", "warn"] = Field("warn", description="what an OOM kill in the window means")


@check("node.oom", probes=[KERNEL_LOG], params=OomParams)
def oom(out: Captures, want: OomParams) -> Iterator[Verdict]:
    """OOM kills in the kernel log within the window (a leftover of the last job, or a node short
    of memory)."""
    log, now, source, uptime = read_kernel_log(out)
    if (partial := coverage(log, now, uptime, want, source)) is not None:
        yield partial
    unreadable = [bad for bad in log.unreadable if bad.kind == "oom"]
    for bad in unreadable:  # a kill we cannot read is not "no kill"
        yield Verdict(Status.ERROR, f"unreadable OOM kill line: {bad.reason}", excerpt=excerpt(bad.raw))
    kills = [k for k in log.ooms if in_window(k.time, now, want)]
    if not kills and not unreadable and (missing := unread(log, source, lambda: source_text(out, source))) is not None:
        yield missing
        return
    if not kills and not unreadable:
        yield Verdict(
            Status.PASS, f"no OOM kills {window_text(want)} ({source}, {log.lines} lines)", observed={"oom_kills": 0}
        )
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
        yield Verdict(
            Status.FAIL if want.status == "fail" else Status.WARN,
            f"OOM killed {process} {len(same)}x {window_text(want)} ({when}, pid {last.pid}, {scope}), expected none",
            process,
            {"oom_kills": len(same), "process": process, "pid": last.pid},
            {"oom_kills": 0},
            excerpt("\n".join(k.raw for k in same[-3:])),
        )
