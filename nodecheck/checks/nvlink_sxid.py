"""NVSwitch SXid errors the kernel log recorded on the node: the NVSwitch counterpart of gpu.xid.

NVIDIA Fabric Manager User Guide (docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide, Bare Metal
Mode, "Runtime NVSwitch and GPU Errors"; "NVSwitch SXid Errors" in the Error Handling appendix): the
NVSwitch driver logs SXids; on a fatal one the NVLink traffic through that switch stops, the CUDA jobs
on the GPUs behind it are aborted (Xid 45) and the GPUs and NVSwitches need a reset (in practice a
reboot) with Fabric Manager restarted before they are used again; non-fatal ones are corrected or
contained and only watched for repetition.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import ClassVar

from nodecheck.core.model import Status, Verdict, excerpt
from nodecheck.core.registry import Captures, check
from nodecheck.judging.log_window import CodeWindow, coverage, in_window, unread, window_text
from nodecheck.parsers.sxid import SxidEvent, parse_sxids
from nodecheck.probes.kernel_log import KERNEL_LOG, read_kernel_log, source_text, utc_offset_s

# NVIDIA's guidance for a fatal SXid, in the words of the Fabric Manager User Guide (see above)
FATAL_ACTION = (
    "a fatal NVSwitch error: NVLink traffic through this switch has stopped; the GPUs behind it "
    "need a reset (reboot) and Fabric Manager a restart (NVIDIA Fabric Manager User Guide)"
)


class SxidParams(CodeWindow):
    """The window, and SXid codes whose severity the playbook sets over the driver's own
    Fatal/Non-fatal word."""

    EVENT: ClassVar[str] = "SXid"

    def action(self, code: int, fatal: bool | None) -> tuple[str, bool]:
        """(fail|warn|ignore, whether the playbook set it): the playbook first, then the driver's own
        Fatal/Non-fatal word; an SXid whose word is not in the log warns."""
        if (listed := self.listed(code)) is not None:
            return listed, True
        return ("fail" if fatal else "warn"), False


@check("nvlink.sxid", probes=[KERNEL_LOG], params=SxidParams)
def sxid(out: Captures, want: SxidParams) -> Iterator[Verdict]:
    """NVSwitch SXid errors in the kernel log within the window: a Fatal one fails (the GPUs behind
    the switch need a reset), Non-fatal ones warn, counted per switch and code."""
    log, now, source, uptime = read_kernel_log(out)
    if (partial := coverage(log, now, uptime, want, source)) is not None:
        yield partial
    sxids = parse_sxids(source_text(out, source), now=now, uptime_s=uptime, utc_offset_s=utc_offset_s(out))
    for bad in sxids.unreadable:
        yield Verdict(Status.ERROR, f"unreadable SXid line: {bad.reason}", excerpt=excerpt(bad.raw))
    events = [e for e in sxids.events if in_window(e.time, now, want)]
    grouped: dict[tuple[str, int, bool | None], list[SxidEvent]] = defaultdict(list)
    for e in events:
        grouped[(e.pci, e.code, e.fatal)].append(e)
    judged = 0
    for (pci, code, fatal), same in sorted(grouped.items(), key=lambda kv: (kv[0][0], kv[0][1], str(kv[0][2]))):
        action, by_playbook = want.action(code, fatal)
        if action == "ignore":
            continue
        judged += 1
        yield _verdict(pci, code, fatal, same, action, by_playbook)
    if not judged and not sxids.unreadable and (missing := unread(log, source, lambda: source_text(out, source))):
        yield missing
    elif not judged and not sxids.unreadable:
        note = f" ({len(events)} ignored by the playbook)" if events else ""
        yield Verdict(
            Status.PASS,
            f"no NVSwitch SXid events {window_text(want)} ({source}, {log.lines} lines){note}",
            observed={"sxids": 0, "lines": log.lines},
        )


def _verdict(pci: str, code: int, fatal: bool | None, same: list[SxidEvent], action: str, by_playbook: bool) -> Verdict:
    last = same[-1]
    switch = f"{last.switch} " if last.switch else ""
    links = sorted({e.link for e in same if e.link is not None})
    where = f", link{'s' if len(links) > 1 else ''} {', '.join(map(str, links))}" if links else ""
    word = {True: "Fatal", False: "Non-fatal", None: "not marked Fatal or Non-fatal"}[fatal]
    said = next((e.message for e in reversed(same) if e.message), "")
    what = f": {said}" if said else ""
    when = f", last {last.time:%Y-%m-%d %H:%M:%SZ}" if last.time else ", time unknown"
    why = ""
    if action == "fail" and fatal:
        why = f": {FATAL_ACTION}"
    elif fatal is None and not by_playbook:
        why = ": no Fatal/Non-fatal word logged for it (see the code in the Fabric Manager guide's SXid tables)"
    if by_playbook:
        why += " (severity set in the playbook)"
    return Verdict(
        Status.FAIL if action == "fail" else Status.WARN,
        f"SXid {code} ({word}) on {switch}PCI:{pci}{where}{what} ({len(same)}x{when}){why}",
        f"NVSwitch PCI:{pci}",
        {
            "sxid": code,
            "fatal": fatal,
            "count": len(same),
            "pci": pci,
            "switch": last.switch,
            "links": links,
            "severity": last.severity,
            "time": last.time.isoformat() if last.time else None,
        },
        {"sxid": None},
        excerpt("\n".join(e.raw for e in same[-3:])),
    )
