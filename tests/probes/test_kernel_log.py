"""Reading the kernel-log probe's output, through both checks that read it (gpu.xid, node.oom): dmesg,
else the journal; a log that cannot be read, or holds no timestamped line, is never a pass."""

from __future__ import annotations

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.probes.kernel_log import KERNEL_LOG, KERNEL_LOG_SCRIPT
from nodecheck.run.runner import judge_node
from tests.checks.kernel_log_output import DMESG_DENIED, ERROR, FAIL, NVLINK, oom, planned, probe_out, rows, xid
from tests.helpers import captures, data

# -- where the log comes from: dmesg, else the journal -------------------------------------------------

# derived: the first Xid 119 line of XID119 as `journalctl -k -o short-iso` prints it
JOURNAL_119 = (
    "2025-02-23T16:24:18+0000 xe9680 kernel: NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, "
    "name=nvidia-smi, Timeout after 6s of waiting for RPC response from GPU4 GSP! Expected function "
    "103 (GSP_RM_ALLOC) (0x2081 0x4).\n"
)


def test_dmesg_denied_reads_the_journal_instead():
    out = probe_out(DMESG_DENIED, rc=1, journal=(JOURNAL_119, 0))
    assert rows(xid(out)) == [
        (
            FAIL,
            "PCI:0000:9b:00",
            "Xid 119 on PCI:0000:9b:00: GSP RPC timeout (1x, last 2025-02-23 16:24:18Z, pid 2024380 nvidia-smi)",
        )
    ]
    # "-- No entries --": the journal holds no kernel line for this boot (journald with ReadKMsg=no,
    # or the wrong boot): nothing shows the log was read, so no event found is not a pass (issue 17)
    assert rows(xid(captures(KERNEL_LOG, out["kernel-log"].stdout.replace(JOURNAL_119, "-- No entries --\n")))) == [
        (
            ERROR,
            "",
            "cannot read journalctl -k output: no line of its 1 carries a kernel timestamp: "
            "nothing shows a kernel log was read",
        )
    ]


def test_both_sources_failing_is_an_error_naming_both():
    # constructed: journalctl on a node without a persistent or volatile journal
    out = probe_out(DMESG_DENIED, rc=1, journal=("No journal files were found.\n", 1))
    with pytest.raises(ParseError) as caught:
        xid(out)
    assert (caught.value.tool, caught.value.reason) == (
        "kernel log",
        "could not read the kernel log (dmesg exit 1: dmesg: read kernel buffer failed: "
        "Operation not permitted; journal exit 1: No journal files were found.)",
    )
    for name in ("gpu.xid", "node.oom"):
        [result] = judge_node(planned(name), "node001", {("node001", "kernel-log"): out["kernel-log"]})
        assert (result.verdict.status, result.verdict.message) == (
            ERROR,
            "cannot read kernel log output: could not read the kernel log (dmesg exit 1: dmesg: read "
            "kernel buffer failed: Operation not permitted; journal exit 1: No journal files were found.)",
        )


def test_dmesg_denied_without_journalctl_is_an_error():
    with pytest.raises(
        ParseError,
        match=r"^kernel log: could not read the kernel log \(dmesg exit 1: dmesg: "
        r"read kernel buffer failed: Operation not permitted\)$",
    ):
        xid(probe_out(DMESG_DENIED, rc=1))


def test_empty_kernel_log_is_an_error_not_a_pass():
    for name in ("gpu.xid", "node.oom"):
        [result] = judge_node(planned(name), "node001", {("node001", "kernel-log"): probe_out("")["kernel-log"]})
        assert (result.check, result.verdict.status, result.verdict.message) == (
            name,
            ERROR,
            "cannot read dmesg output: the kernel log is empty: nothing could be read",
        )


def test_kernel_log_probe_prints_the_clock_then_dmesg_then_the_journal():
    assert KERNEL_LOG.argv == ("sh", "-c", KERNEL_LOG_SCRIPT, "nodecheck-kernel-log")
    lines = [line.strip() for line in KERNEL_LOG_SCRIPT.strip().splitlines()]
    assert lines[0].startswith("printf '@@nodecheck clock now=%s uptime=%s utc_offset=%s\\n'")
    assert lines[2] == "section dmesg dmesg --time-format iso && exit 0"
    assert "journalctl -k -b -o short-iso --no-pager -q" in lines[3]
    assert planned("gpu.xid").probes == planned("node.oom").probes == (KERNEL_LOG,)


# -- issue 17: output with no timestamped kernel line is no evidence of health ------------------------

NOT_A_LOG = {
    "whitespace": " \n\t\n",
    "binary": "\x00\x01\xff\ufffd\x7f\x1c\x85garbage\n",
    "prose": "the quick brown fox\n",
}


@pytest.mark.parametrize("name", sorted(NOT_A_LOG))
def test_a_dmesg_section_without_a_timestamped_line_is_an_error_not_a_pass(name):
    body = NOT_A_LOG[name]
    lines = len(body.rstrip("\n").split("\n"))
    for check in ("gpu.xid", "node.oom"):
        [result] = judge_node(planned(check), "node001", {("node001", "kernel-log"): probe_out(body)["kernel-log"]})
        assert (result.check, result.verdict.status, result.verdict.message) == (
            check,
            ERROR,
            f"cannot read dmesg output: no line of its {lines} carries a kernel timestamp: "
            "nothing shows a kernel log was read",
        )
        assert result.verdict.excerpt == body


def test_events_in_a_log_without_timestamps_are_judged_but_nothing_passes_on_it():
    # kmsg-style lines without stamps: the Xid lines are evidence of a fault; the absence of OOM
    # kills in them is evidence of nothing
    out = probe_out(data(NVLINK))
    assert {v.status for v in xid(out)} == {FAIL}
    assert rows(oom(out)) == [
        (
            ERROR,
            "",
            "cannot read dmesg output: no line of its 3 carries a kernel "
            "timestamp: nothing shows a kernel log was read",
        )
    ]
