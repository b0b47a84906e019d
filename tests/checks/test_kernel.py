"""gpu.xid and node.oom judged on the kernel-log probe's output: the node's clock line, then a dmesg
(or journal) section wrapping copied corpus text from tests/data/dmesg-xid and dmesg-oom.
Exact statuses, subjects and messages throughout."""
from __future__ import annotations

import pytest
from pydantic import ValidationError

from nodecheck.checks.kernel import KERNEL_LOG, KERNEL_LOG_SCRIPT, OomParams, XidParams, gpu_xid, node_oom
from nodecheck.core.errors import ParseError
from nodecheck.core.model import Status, Verdict
from nodecheck.config.playbook import PlannedCheck
from nodecheck.core.registry import all_checks
from nodecheck.run.runner import judge_node
from tests.helpers import captures, data

PASS, WARN, FAIL, ERROR = Status.PASS, Status.WARN, Status.FAIL, Status.ERROR
XID119 = "dmesg-xid/gpud-xid119-gsp-rpc-timeout-dmesg-T-xe9680.txt"          # dmesg -T, 5 Xid 119 lines
XID13 = "dmesg-xid/gpud-xid13-xid43-dmesg-decode-iso-format.txt"              # 16x Xid 13, 1x Xid 43, ISO
NVLINK = "dmesg-xid/gpud-pr1174-nvlink-xid149-145-netir-rlw-kmsg-lines.txt"   # no timestamps at all
OFF_BUS = "dmesg-xid/nvsentinel-155-fallen-off-bus-multiline-no-xid-570.txt"  # uptime stamps, no Xid line
OOM_SYSLOG = "dmesg-oom/docker-for-linux-1001-syslog-prefixed-global-oom-killed-process-truncated.txt"
OOM_EL7 = "dmesg-oom/k8s-56891-el7-kernel310-kill-process-score-sacrifice-child.txt"

AFTER_119 = 1740328260          # 2025-02-23 16:31:00Z: a minute after the last Xid 119 of XID119
THREE_DAYS_LATER = AFTER_119 + 3 * 86400
AFTER_OOM = 1747350600          # 2025-05-15 23:10:00Z: half a minute after the OOM kills of OOM_SYSLOG
DMESG_DENIED = "dmesg: read kernel buffer failed: Operation not permitted\n"


def section(name: str, body: str, rc: int = 0) -> str:
    return f"@@nodecheck begin {name}\n{body}@@nodecheck end {name} rc={rc}\n"


def probe_out(body: str, now: int = AFTER_119, uptime: str = "300.00", offset: str = "+0000",
              rc: int = 0, journal: tuple[str, int] | None = None, clock: bool = True) -> dict:
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


# -- gpu.xid ----------------------------------------------------------------------------------------

def test_xid_119_fails_with_code_pci_count_time_and_pid():
    verdicts = xid(probe_out(data(XID119)))
    assert rows(verdicts) == [(FAIL, "PCI:0000:9b:00", "Xid 119 on PCI:0000:9b:00: GSP RPC timeout "
                                                       "(5x, last 2025-02-23 16:30:13Z, pid 1240590 gpud)")]
    assert verdicts[0].observed == {"xid": 119, "count": 5, "pci": "0000:9b:00", "pid": 1240590, "process": "gpud",
                                    "time": "2025-02-23T16:30:13+00:00"}
    assert verdicts[0].expected == {"xid": None}
    # the excerpt is the last three events' raw lines
    assert [line[:71] for line in verdicts[0].excerpt.splitlines()] == [
        "[Sun Feb 23 16:24:30 2025] NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380",
        "[Sun Feb 23 16:27:12 2025] NVRM: Xid (PCI:0000:9b:00): 119, pid=1263500",
        "[Sun Feb 23 16:30:13 2025] NVRM: Xid (PCI:0000:9b:00): 119, pid=1240590"]


def test_xid_13_and_43_warn_as_application_faults_with_counts():
    assert rows(xid(probe_out(data(XID13)))) == [
        (WARN, "PCI:0000:38:00", "Xid 13 on PCI:0000:38:00: graphics engine exception (usually an application "
                                 "fault) (16x, last 2025-01-21 04:41:44Z)"),
        (WARN, "PCI:0000:38:00", "Xid 43 on PCI:0000:38:00: GPU stopped processing: channel reset after an "
                                 "application fault (1x, last 2025-01-21 04:41:44Z, pid 2924364 pt_main_thread)")]


def test_xid_the_node_utc_offset_places_dmesg_T_local_times():
    [verdict] = xid(probe_out(data(XID119), offset="+0100"))
    assert verdict.message == ("Xid 119 on PCI:0000:9b:00: GSP RPC timeout (5x, last 2025-02-23 15:30:13Z, "
                               "pid 1240590 gpud)")


def test_xid_lost_gpu_message_is_an_inferred_79():
    # "[ 1843.308145]" seconds since boot, placed from the node's clock: now - uptime + 1843.308145
    assert rows(xid(probe_out(data(OFF_BUS), uptime="5000.00"))) == [
        (FAIL, "PCI:0000:b3:00", "Xid 79 on PCI:0000:b3:00: GPU has fallen off the bus (from the kernel's "
                                 "message; no Xid line) (1x, last 2025-02-23 15:38:23Z)")]


def test_xid_playbook_overrides_fail_warn_and_ignore():
    assert rows(xid(probe_out(data(XID13)), fail=[13], ignore=[43])) == [
        (FAIL, "PCI:0000:38:00", "Xid 13 on PCI:0000:38:00: graphics engine exception (usually an application "
                                 "fault) (severity set in the playbook) (16x, last 2025-01-21 04:41:44Z)")]
    assert rows(xid(probe_out(data(XID119)), warn=[119])) == [
        (WARN, "PCI:0000:9b:00", "Xid 119 on PCI:0000:9b:00: GSP RPC timeout (severity set in the playbook) "
                                 "(5x, last 2025-02-23 16:30:13Z, pid 1240590 gpud)")]


def test_xid_all_events_ignored_pass_and_say_so():
    assert rows(xid(probe_out(data(XID13)), ignore=[13, 43])) == [
        (PASS, "", "no Xid events since boot (dmesg, 17 lines) (17 ignored by the playbook)")]


@pytest.mark.parametrize("params", [{"fail": [13], "ignore": [13]}, {"warn": [119], "fail": [119]},
                                    {"since": "2w"}, {"since": "24 h"}, {"fail": ["x"]}, {"window": "24h"}])
def test_xid_params_are_validated(params):
    with pytest.raises(ValidationError):
        XidParams.model_validate(params)


def test_xid_a_code_in_two_lists_names_both():
    with pytest.raises(ValidationError, match="Xid 13 is listed under both fail and ignore"):
        XidParams(fail=[13], ignore=[13])


def test_xid_window_excludes_events_older_than_since():
    assert rows(xid(probe_out(data(XID119), now=THREE_DAYS_LATER), since="24h")) == [
        (PASS, "", "no Xid events in the last 24h (dmesg, 43 lines)")]
    assert [v.status for v in xid(probe_out(data(XID119)), since="24h")] == [FAIL]
    # since boot: the same old events still count
    assert [v.status for v in xid(probe_out(data(XID119), now=THREE_DAYS_LATER))] == [FAIL]


def test_xid_events_with_unknown_time_count_in_any_window():
    verdicts = xid(probe_out(data(XID119) + data(NVLINK), now=THREE_DAYS_LATER), since="24h")
    assert rows(verdicts) == [
        (FAIL, "PCI:0018:01:00", "Xid 145 on PCI:0018:01:00: NVLink RLW error (1x, time unknown)"),
        (FAIL, "PCI:0000:00:00", "Xid 149 on PCI:0000:00:00: NVLink NETIR error (1x, time unknown)"),
        (FAIL, "PCI:0019:01:00", "Xid 149 on PCI:0019:01:00: NVLink NETIR error (1x, time unknown)")]


def test_xid_without_the_clock_line_every_event_counts():
    verdicts = xid(probe_out(data(XID13), clock=False), since="30m")
    assert [(v.status, v.observed["xid"], v.observed["count"]) for v in verdicts] == [(WARN, 13, 16), (WARN, 43, 1)]


def test_xid_unreadable_line_is_an_error_not_a_pass():
    verdicts = xid(probe_out("[ 12.000000] NVRM: Xid (PCI:0000:9b:00): 11\n"))
    assert rows(verdicts) == [(ERROR, "", "unreadable Xid line: Xid line ends before its message (cut short?): "
                                          "'NVRM: Xid (PCI:0000:9b:00): 11'")]
    assert verdicts[0].excerpt == "[ 12.000000] NVRM: Xid (PCI:0000:9b:00): 11"
    # next to readable events, both are reported
    mixed = xid(probe_out(data(XID13) + "[ 12.000000] NVRM: Xid (PCI:0000:9b:00): 11\n"))
    assert [v.status for v in mixed] == [ERROR, WARN, WARN]


def test_xid_kernel_log_without_xid_passes_with_its_size():
    text = data("scenarios/derived-dmesg-T-nvrm-gpu-at-no-xid.txt")
    [verdict] = xid(probe_out(text))
    assert (verdict.status, verdict.message, verdict.observed) == (
        PASS, "no Xid events since boot (dmesg, 2 lines)", {"xids": 0, "lines": 2})


# -- where the log comes from: dmesg, else the journal -------------------------------------------------

# derived: the first Xid 119 line of XID119 as `journalctl -k -o short-iso` prints it
JOURNAL_119 = ("2025-02-23T16:24:18+0000 xe9680 kernel: NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, "
               "name=nvidia-smi, Timeout after 6s of waiting for RPC response from GPU4 GSP! Expected function "
               "103 (GSP_RM_ALLOC) (0x2081 0x4).\n")


def test_dmesg_denied_reads_the_journal_instead():
    out = probe_out(DMESG_DENIED, rc=1, journal=(JOURNAL_119, 0))
    assert rows(xid(out)) == [(FAIL, "PCI:0000:9b:00", "Xid 119 on PCI:0000:9b:00: GSP RPC timeout "
                                                       "(1x, last 2025-02-23 16:24:18Z, pid 2024380 nvidia-smi)")]
    # "-- No entries --": the journal holds no kernel line for this boot (journald with ReadKMsg=no,
    # or the wrong boot): nothing shows the log was read, so no event found is not a pass (issue 17)
    assert rows(xid(captures(KERNEL_LOG, out["kernel-log"].stdout.replace(JOURNAL_119, "-- No entries --\n")))) == [
        (ERROR, "", "cannot read journalctl -k output: no line of its 1 carries a kernel timestamp: "
                    "nothing shows a kernel log was read")]


def test_both_sources_failing_is_an_error_naming_both():
    # constructed: journalctl on a node without a persistent or volatile journal
    out = probe_out(DMESG_DENIED, rc=1, journal=("No journal files were found.\n", 1))
    with pytest.raises(ParseError) as caught:
        xid(out)
    assert (caught.value.tool, caught.value.reason) == (
        "kernel log", "could not read the kernel log (dmesg exit 1: dmesg: read kernel buffer failed: "
                      "Operation not permitted; journal exit 1: No journal files were found.)")
    for name in ("gpu.xid", "node.oom"):
        [result] = judge_node(planned(name), "node001", {("node001", "kernel-log"): out["kernel-log"]})
        assert (result.verdict.status, result.verdict.message) == (
            ERROR, "cannot read kernel log output: could not read the kernel log (dmesg exit 1: dmesg: read "
                   "kernel buffer failed: Operation not permitted; journal exit 1: No journal files were found.)")


def test_dmesg_denied_without_journalctl_is_an_error():
    with pytest.raises(ParseError, match=r"^kernel log: could not read the kernel log \(dmesg exit 1: dmesg: "
                                         r"read kernel buffer failed: Operation not permitted\)$"):
        xid(probe_out(DMESG_DENIED, rc=1))


def test_empty_kernel_log_is_an_error_not_a_pass():
    for name in ("gpu.xid", "node.oom"):
        [result] = judge_node(planned(name), "node001", {("node001", "kernel-log"): probe_out("")["kernel-log"]})
        assert (result.check, result.verdict.status, result.verdict.message) == (
            name, ERROR, "cannot read dmesg output: the kernel log is empty: nothing could be read")


def test_kernel_log_probe_prints_the_clock_then_dmesg_then_the_journal():
    assert KERNEL_LOG.argv == ("sh", "-c", KERNEL_LOG_SCRIPT, "nodecheck-kernel-log")
    lines = [line.strip() for line in KERNEL_LOG_SCRIPT.strip().splitlines()]
    assert lines[0].startswith("printf '@@nodecheck clock now=%s uptime=%s utc_offset=%s\\n'")
    assert lines[2] == "section dmesg dmesg --time-format iso && exit 0"
    assert "journalctl -k -b -o short-iso --no-pager -q" in lines[3]
    assert planned("gpu.xid").probes == planned("node.oom").probes == (KERNEL_LOG,)


# -- node.oom -----------------------------------------------------------------------------------------

def test_oom_since_boot_warns_per_process_with_counts():
    verdicts = oom(probe_out(data(OOM_SYSLOG), now=AFTER_OOM), since="boot")
    assert rows(verdicts) == [
        (WARN, "python3", "OOM killed python3 2x since boot (last 2025-05-15 23:09:30Z, pid 15783, global), expected none"),
        (WARN, "(resolved)", "OOM killed (resolved) 2x since boot (last 2025-05-15 23:09:30Z, pid 15934, global), expected none")]
    assert (verdicts[0].observed, verdicts[0].expected) == (
        {"oom_kills": 2, "process": "python3", "pid": 15783}, {"oom_kills": 0})


def test_oom_default_window_is_24h():
    assert [v.message for v in oom(probe_out(data(OOM_SYSLOG), now=AFTER_OOM))] == [
        "OOM killed python3 2x in the last 24h (last 2025-05-15 23:09:30Z, pid 15783, global), expected none",
        "OOM killed (resolved) 2x in the last 24h (last 2025-05-15 23:09:30Z, pid 15934, global), expected none"]
    assert rows(oom(probe_out(data(OOM_SYSLOG), now=AFTER_OOM + 7 * 86400))) == [
        (PASS, "", "no OOM kills in the last 24h (dmesg, 9 lines)")]


def test_oom_status_fail_and_cgroup_scope():
    assert rows(oom(probe_out(data(OOM_EL7)), since="boot", status="fail")) == [
        (FAIL, "java", "OOM killed java 1x since boot (last 2017-12-07 00:05:15Z, pid 28438, cgroup), expected none")]


def test_oom_none_passes():
    assert rows(oom(probe_out(data(XID13)))) == [(PASS, "", "no OOM kills in the last 24h (dmesg, 17 lines)")]


@pytest.mark.parametrize("params", [{"status": "error"}, {"status": "off"}, {"since": "yesterday"}])
def test_oom_params_are_validated(params):
    with pytest.raises(ValidationError):
        OomParams.model_validate(params)


# -- how far back the log reaches -----------------------------------------------------------------

def test_a_log_that_starts_long_after_boot_warns_that_older_events_are_unseen():
    # the fallen-off-the-bus excerpt starts 1843 s after boot: a wrapped ring buffer looks like this
    out = probe_out(data(OFF_BUS), uptime="300.00")
    [coverage] = [v for v in gpu_xid(out, XidParams()) if v.subject == "kernel log"]
    assert coverage.status is WARN
    assert coverage.message.startswith("dmesg reaches back only to 2025-02-23 16:56:43Z, but the window "
                                       "starts 2025-02-23 16:26:00Z (since boot): older events are not seen")


def test_a_log_that_reaches_the_window_start_gives_no_coverage_warning():
    # -T stamps from 16:24:18 with boot at 16:26:00: the log covers the whole boot
    out = probe_out(data(XID119), uptime="300.00")
    assert [v for v in gpu_xid(out, XidParams()) if v.subject == "kernel log"] == []
    # a 5 min window (from 16:26:00) is covered; so is a 1 h one: it reaches back before this boot,
    # and no log of this boot can hold anything from before it
    assert [v for v in gpu_xid(out, XidParams(since="5m")) if v.subject == "kernel log"] == []
    assert [v for v in gpu_xid(out, XidParams(since="1h")) if v.subject == "kernel log"] == []
    # up for 2 h (boot 14:31): a 1 h window starts 15:31, the log only at 16:24
    longer = probe_out(data(XID119), uptime="7200.00")
    [partial] = [v for v in gpu_xid(longer, XidParams(since="1h")) if v.subject == "kernel log"]
    assert partial.status is WARN and "(in the last 1h)" in partial.message
    assert "the ring buffer wrapped" in partial.message


def test_an_unreadable_oom_line_is_an_oom_error_not_an_xid_error():
    line = "May 15 23:09:30 host kernel: [  518.050606] Out of memory: Killed process 1235 (python3)\n"
    out = probe_out(data(OOM_SYSLOG).split("\n")[0] + "\n" + line, now=AFTER_OOM, uptime="600.00")
    assert [(v.status, v.message.split(":")[0]) for v in oom(out, since="boot")] == [
        (ERROR, "unreadable OOM kill line"), (WARN, "OOM killed python3 1x since boot (last 2025-05-15 23")]
    assert [v.status for v in xid(out)] == [PASS]


@pytest.mark.parametrize("since", ["0s", "0h", "-1h", "24"])
def test_since_must_be_a_positive_duration(since):
    with pytest.raises(ValidationError, match="positive duration"):
        XidParams(since=since)


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
            check, ERROR, f"cannot read dmesg output: no line of its {lines} carries a kernel timestamp: "
                          "nothing shows a kernel log was read")
        assert result.verdict.excerpt == body


def test_events_in_a_log_without_timestamps_are_judged_but_nothing_passes_on_it():
    # kmsg-style lines without stamps: the Xid lines are evidence of a fault; the absence of OOM
    # kills in them is evidence of nothing
    out = probe_out(data(NVLINK))
    assert {v.status for v in xid(out)} == {FAIL}
    assert rows(oom(out)) == [(ERROR, "", "cannot read dmesg output: no line of its 3 carries a kernel "
                                         "timestamp: nothing shows a kernel log was read")]
