"""The kernel-log probe's output as the checks receive it, built around copied corpus text from
tests/data/dmesg-xid and dmesg-oom: shared by the gpu.xid, node.oom and kernel-log reading tests."""

from __future__ import annotations

from nodecheck.checks import all_checks
from nodecheck.checks.gpu_xid import XidParams
from nodecheck.checks.gpu_xid import xid as gpu_xid
from nodecheck.checks.node import OomParams
from nodecheck.checks.node import oom as node_oom
from nodecheck.config.playbook import PlannedCheck
from nodecheck.core.model import Status, Verdict
from nodecheck.probes.kernel_log import KERNEL_LOG
from tests.helpers import captures

PASS, WARN, FAIL, ERROR = Status.PASS, Status.WARN, Status.FAIL, Status.ERROR
XID119 = "dmesg-xid/gpud-xid119-gsp-rpc-timeout-dmesg-T-xe9680.txt"  # dmesg -T, 5 Xid 119 lines
XID13 = "dmesg-xid/gpud-xid13-xid43-dmesg-decode-iso-format.txt"  # 16x Xid 13, 1x Xid 43, ISO
NVLINK = "dmesg-xid/gpud-pr1174-nvlink-xid149-145-netir-rlw-kmsg-lines.txt"  # no timestamps at all
OFF_BUS = "dmesg-xid/nvsentinel-155-fallen-off-bus-multiline-no-xid-570.txt"  # uptime stamps, no Xid line
OOM_SYSLOG = "dmesg-oom/docker-for-linux-1001-syslog-prefixed-global-oom-killed-process-truncated.txt"
OOM_EL7 = "dmesg-oom/k8s-56891-el7-kernel310-kill-process-score-sacrifice-child.txt"

AFTER_119 = 1740328260  # 2025-02-23 16:31:00Z: a minute after the last Xid 119 of XID119
THREE_DAYS_LATER = AFTER_119 + 3 * 86400
AFTER_OOM = 1747350600  # 2025-05-15 23:10:00Z: half a minute after the OOM kills of OOM_SYSLOG
DMESG_DENIED = "dmesg: read kernel buffer failed: Operation not permitted\n"


def section(name: str, body: str, rc: int = 0) -> str:
    return f"@@nodecheck begin {name}\n{body}@@nodecheck end {name} rc={rc}\n"


def probe_out(
    body: str,
    now: int = AFTER_119,
    uptime: str = "300.00",
    offset: str = "+0000",
    rc: int = 0,
    journal: tuple[str, int] | None = None,
    clock: bool = True,
) -> dict:
    """The kernel-log probe's stdout as KERNEL_LOG_SCRIPT prints it, as the judge receives it."""
    text = f"@@nodecheck clock now={now} uptime={uptime} utc_offset={offset}\n" if clock else ""
    text += section("dmesg", body, rc)
    if journal is not None:
        text += section("journal", *journal)
    return captures(KERNEL_LOG, text)


def events_only(verdicts) -> list[Verdict]:
    """The verdicts about events; the coverage WARN (corpus excerpts start mid-log) is tested apart."""
    return [v for v in verdicts if v.subject != "kernel log"]


def xid(out, **params) -> list[Verdict]:
    return events_only(gpu_xid(out, XidParams(**params)))


def oom(out, **params) -> list[Verdict]:
    return events_only(node_oom(out, OomParams(**params)))


def rows(verdicts: list[Verdict]) -> list[tuple[Status, str, str]]:
    return [(v.status, v.subject, v.message) for v in verdicts]


def planned(name: str, **params) -> PlannedCheck:
    spec = all_checks()[name]
    model = spec.params.model_validate(params)
    return PlannedCheck(spec, model, spec.probes_for(model))
