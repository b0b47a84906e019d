"""NVIDIA Xid events the kernel log recorded on the node, classified by what they require."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import ClassVar

from nodecheck.core.model import Status, Verdict, excerpt
from nodecheck.core.registry import Captures, check
from nodecheck.judging.log_window import CodeWindow, coverage, in_window, unread, window_text
from nodecheck.parsers.xid_codes import classify
from nodecheck.probes.kernel_log import KERNEL_LOG, read_kernel_log, source_text


class XidParams(CodeWindow):
    """The window, and Xid codes whose severity the playbook sets over the built-in table
    (nodecheck/parsers/xid_codes.py)."""

    EVENT: ClassVar[str] = "Xid"

    def action(self, code: int) -> tuple[str, str]:
        """(fail|warn|ignore, meaning): the playbook first, then the built-in table."""
        severity, meaning = classify(code)
        if (listed := self.listed(code)) is not None:
            return listed, meaning + " (severity set in the playbook)"
        return severity, meaning


@check("gpu.xid", probes=[KERNEL_LOG], params=XidParams)
def xid(out: Captures, want: XidParams) -> Iterator[Verdict]:
    """NVIDIA Xid events in the kernel log within the window, classified by what they require."""
    log, now, source, uptime = read_kernel_log(out)
    if (partial := coverage(log, now, uptime, want, source)) is not None:
        yield partial
    unreadable = [bad for bad in log.unreadable if bad.kind == "xid"]
    for bad in unreadable:
        yield Verdict(Status.ERROR, f"unreadable Xid line: {bad.reason}", excerpt=excerpt(bad.raw))
    events = [e for e in log.xids if in_window(e.time, now, want)]
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
        yield Verdict(
            Status.FAIL if action == "fail" else Status.WARN,
            f"Xid {code} on PCI:{pci}: {meaning}{how} ({times}{when}{who})",
            f"PCI:{pci}",
            {
                "xid": code,
                "count": len(same),
                "pci": pci,
                "pid": last.pid,
                "process": last.process,
                "time": last.time.isoformat() if last.time else None,
            },
            {"xid": None},
            excerpt("\n".join(e.raw for e in same[-3:])),
        )
    if not judged and not unreadable and (missing := unread(log, source, lambda: source_text(out, source))) is not None:
        yield missing
    elif not judged and not unreadable:
        ignored = len(events)
        note = f" ({ignored} ignored by the playbook)" if ignored else ""
        yield Verdict(
            Status.PASS,
            f"no Xid events {window_text(want)} ({source}, {log.lines} lines){note}",
            observed={"xids": 0, "lines": log.lines},
        )
