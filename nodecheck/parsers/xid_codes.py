"""What an NVIDIA Xid code means for a node about to run a job: severity "fail" or "warn", and why."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

# Source: NVIDIA "XID Errors" (GPU deployment and management documentation,
# https://docs.nvidia.com/deploy/xid-errors/ — the Xid catalog's mnemonic, description and
# "Resolution Bucket (Immediate Action)" columns) and NVIDIA "GPU Memory Error Management"
# (https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/) for 48/63/64/94/95.
#
# The rule: "fail" where NVIDIA's immediate action is a GPU reset, node reboot or hardware service,
# since the next job would land on a GPU in that state; "warn" where the immediate action is
# restarting the application (the Xid is usually the previous job's own fault, e.g. an illegal
# address), since the GPU itself is not known to be bad.
#
# 92 (high single-bit ECC rate) is "fail", as the project's GPU-health issue specifies for 92-95:
# a GPU that corrects errors at a high rate is one step from an uncorrectable one, and a pre-job
# gate errs on the side of the job. The errors were corrected, though, and the row-remapper /
# retired-page counters (which gpu.health reads) decide whether memory is failing, so a fleet
# that drains too eagerly on it can set `gpu.xid: {warn: [92]}` in its playbook. 145 is logged as
# "Nonfatal" by the driver, but stays "fail" with the rest of the NVLink range: a link that logged
# it is degraded for an NVLink-bound job, and one bad link slows the whole collective.
XID_ACTIONS: Mapping[int, tuple[str, str]] = MappingProxyType(
    {
        8: ("warn", "GPU stopped processing (channel idle timeout)"),
        13: ("warn", "graphics engine exception (usually an application fault)"),
        31: ("warn", "GPU memory page fault (usually an application fault)"),
        32: ("warn", "invalid or corrupted push buffer stream"),
        43: ("warn", "GPU stopped processing: channel reset after an application fault"),
        45: ("warn", "preemptive cleanup after a previous error"),
        46: ("fail", "GPU stopped processing"),
        48: ("fail", "double-bit ECC error (uncorrectable memory error)"),
        61: ("fail", "internal micro-controller breakpoint/warning"),
        62: ("fail", "internal micro-controller halt"),
        63: ("fail", "row remapping / page retirement recorded: reset the GPU to apply it"),
        64: ("fail", "row remapping / page retirement failed to record"),
        68: ("warn", "video decoder (NVDEC) exception"),
        69: ("warn", "graphics engine class error"),
        74: ("fail", "NVLink error"),
        79: ("fail", "GPU has fallen off the bus"),
        92: ("fail", "high single-bit ECC error rate (corrected)"),
        94: ("fail", "contained ECC error"),
        95: ("fail", "uncontained ECC error"),
        109: ("warn", "context switch timeout"),
        119: ("fail", "GSP RPC timeout"),
        120: ("fail", "GSP error"),
        140: ("fail", "unrecovered ECC error"),
        143: ("fail", "GPU initialization failure"),
        144: ("fail", "NVLink SAW error"),
        145: ("fail", "NVLink RLW error"),
        146: ("fail", "NVLink TLW error"),
        147: ("fail", "NVLink TREX error"),
        148: ("fail", "NVLink NVLPW control error"),
        149: ("fail", "NVLink NETIR error"),
        150: ("fail", "NVLink MSE error"),
        154: ("fail", "GPU recovery action changed: the driver asks for a reset or reboot"),
    }
)

# An unknown code is not a pass: NVIDIA adds codes with each driver branch (the 140-150s arrived
# with Hopper/Blackwell), and a code this table has never seen is as likely to be a hardware fault
# as an application one; passing it would put a job on a GPU nobody has judged. Failing it costs an
# operator one look and, if benign, one line in this table.
UNKNOWN: tuple[str, str] = ("fail", "unknown Xid: not in the table")


def classify(code: int) -> tuple[str, str]:
    """(severity, meaning) for an Xid code; a code not in XID_ACTIONS fails (see UNKNOWN)."""
    return XID_ACTIONS.get(code, UNKNOWN)
