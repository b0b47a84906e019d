"""parse_kernel_log on every copied dmesg corpus file with exact events, plus each line and stamp form."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import pytest

from nodecheck.parsers.kernel_log import KernelLog, OomKill, Unreadable, XidEvent, parse_kernel_log
from nodecheck.parsers.xid_codes import UNKNOWN, XID_ACTIONS, classify
from tests.helpers import data, data_files

TOOLS = ("dmesg-xid", "dmesg-oom")
UTC = timezone.utc
NOW = datetime(2025, 6, 1, tzinfo=UTC)
UPTIME_S = 2000.0  # so boot was 2025-05-31T23:26:40Z
BOOT = NOW - timedelta(seconds=UPTIME_S)


def t(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp).replace(tzinfo=UTC)


@dataclass(frozen=True)
class Expect:
    xids: tuple[tuple, ...] = ()  # (code, pci, pid, process, time, inferred)
    ooms: tuple[tuple, ...] = ()  # (pid, process, scope, cgroup, anon_rss_kb, time)
    lines: int = 0
    timestamps: str = "none"


T_119 = "2025-02-23T16:"
XID_13_TIMES = (
    "283302",
    "283390",
    "283575",
    "283671",
    "283758",
    "283937",
    "284042",
    "284250",
    "284345",
    "284433",
    "284616",
    "284705",
    "284792",
    "284971",
    "285060",
    "285147",
)
# every file is parsed with now=NOW, uptime_s=UPTIME_S, utc_offset_s=0 (see test_corpus_file)
FILES = {
    "dmesg-xid/forum-gnome-freeze-xid32-old-format-gpu-at-line.txt": Expect(
        xids=(
            (32, "0000:01:00", None, None, BOOT + timedelta(seconds=1399.140323), False),
            (32, "0000:01:00", None, None, BOOT + timedelta(seconds=1399.140655), False),
        ),
        lines=3,
        timestamps="uptime",
    ),
    "dmesg-xid/gpud-pr1174-nvlink-xid149-145-netir-rlw-kmsg-lines.txt": Expect(
        xids=(
            (149, "0019:01:00", None, None, None, False),
            (149, "0000:00:00", None, None, None, False),
            (145, "0018:01:00", None, None, None, False),
        ),
        lines=3,
        timestamps="none",
    ),
    "dmesg-xid/gpud-xid119-gsp-rpc-timeout-dmesg-T-xe9680.txt": Expect(
        xids=(
            (119, "0000:9b:00", 2024380, "nvidia-smi", t(T_119 + "24:18"), False),
            (119, "0000:9b:00", 2024380, "nvidia-smi", t(T_119 + "24:24"), False),
            (119, "0000:9b:00", 2024380, "nvidia-smi", t(T_119 + "24:30"), False),
            (119, "0000:9b:00", 1263500, "cache_mgr_main", t(T_119 + "27:12"), False),
            (119, "0000:9b:00", 1240590, "gpud", t(T_119 + "30:13"), False),
        ),
        lines=43,
        timestamps="ctime",
    ),
    "dmesg-xid/gpud-xid13-xid43-dmesg-decode-iso-format.txt": Expect(
        xids=tuple((13, "0000:38:00", None, None, t(f"2025-01-21T04:41:44.{us}"), False) for us in XID_13_TIMES)
        + ((43, "0000:38:00", 2924364, "pt_main_thread", t("2025-01-21T04:41:44.287197"), False),),
        lines=17,
        timestamps="iso",
    ),
    # the syslog date has no year: 2024 is the latest Dec 2 not after NOW; its "[  219.470994]" is skipped
    "dmesg-xid/gpu-operator-1146-syslog-xid48-dbe-framebuffer-one-line.txt": Expect(
        xids=((48, "0000:07:00", None, None, t("2024-12-02T11:38:47"), False),), lines=1, timestamps="syslog"
    ),
    "dmesg-xid/nvsentinel-155-fallen-off-bus-multiline-no-xid-570.txt": Expect(
        xids=((79, "0000:b3:00", None, None, BOOT + timedelta(seconds=1843.308145), True),),
        lines=5,
        timestamps="uptime",
    ),  # the indented continuation lines carry no stamp
    # the syslog date has no year: 2025 is the latest May 15 not after NOW
    "dmesg-oom/docker-for-linux-1001-syslog-prefixed-global-oom-killed-process-truncated.txt": Expect(
        ooms=(
            (15784, "python3", "global", None, 4288, t("2025-05-15T23:09:30")),
            (15925, "(resolved)", "global", None, 4064, t("2025-05-15T23:09:30")),
            (15783, "python3", "global", None, 4288, t("2025-05-15T23:09:30")),
            (15934, "(resolved)", "global", None, 4064, t("2025-05-15T23:09:30")),
        ),
        lines=9,
        timestamps="syslog",
    ),  # the cut last line "May 15 2" is not a form
    # one kill: "Kill process 24572 … sacrifice child" is the victim choice, 28438 is the one killed
    "dmesg-oom/k8s-56891-el7-kernel310-kill-process-score-sacrifice-child.txt": Expect(
        ooms=((28438, "java", "cgroup", None, 466160, t("2017-12-07T00:05:15")),), lines=11, timestamps="ctime"
    ),
}


def _xid_rows(log: KernelLog) -> tuple[tuple, ...]:
    return tuple((x.code, x.pci, x.pid, x.process, x.time, x.inferred) for x in log.xids)


def _oom_rows(log: KernelLog) -> tuple[tuple, ...]:
    return tuple((o.pid, o.process, o.scope, o.cgroup, o.anon_rss_kb, o.time) for o in log.ooms)


def parse(text: str, **kwargs) -> KernelLog:
    return parse_kernel_log(text, **kwargs)


# -- every file has an exact expectation, and every corpus file has a copy here ------------------


def test_every_data_file_has_an_expectation():
    on_disk = {path for tool in TOOLS for path in data_files(tool)}
    assert on_disk == set(FILES)
    assert len(on_disk) == 8


def test_every_data_file_has_a_source_line():
    sources = data("SOURCES.md")
    assert sources.count("## dmesg Xid / OOM") == 1
    assert all(f"- `{path}` - " in sources for path in FILES)


# -- exact events per file --------------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(FILES))
def test_corpus_file_gives_exact_events(path):
    log = parse(data(path), now=NOW, uptime_s=UPTIME_S, utc_offset_s=0)
    want = FILES[path]
    assert _xid_rows(log) == want.xids
    assert _oom_rows(log) == want.ooms
    assert log.unreadable == ()
    assert (log.lines, log.timestamps) == (want.lines, want.timestamps)
    for event in log.xids + log.ooms:  # raw is the line(s) as stored
        assert event.raw in data(path)
        assert event.time is None or event.time.tzinfo is not None


def test_xid_details_are_the_text_after_the_fields():
    old = parse(data("dmesg-xid/forum-gnome-freeze-xid32-old-format-gpu-at-line.txt"))
    assert {x.detail for x in old.xids} == {"Channel ID 00000009 intr 00800000"}
    nvlink = parse(data("dmesg-xid/gpud-pr1174-nvlink-xid149-145-netir-rlw-kmsg-lines.txt"))
    assert nvlink.xids[2].detail == (
        "RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 0x00000008 0x00000001 0x00000000 0x00100000 0x00000004)"
    )
    gsp = parse(data("dmesg-xid/gpud-xid119-gsp-rpc-timeout-dmesg-T-xe9680.txt"))
    assert gsp.xids[0].detail == (
        "Timeout after 6s of waiting for RPC response from GPU4 GSP! Expected function 103 (GSP_RM_ALLOC) (0x2081 0x4)."
    )
    iso = parse(data("dmesg-xid/gpud-xid13-xid43-dmesg-decode-iso-format.txt"))
    assert iso.xids[0].detail == "Graphics SM Global Exception on (GPC 8, TPC 5, SM 1): Multiple Warp Errors"
    assert iso.xids[-1].detail == "Ch 00000008"


def test_fallen_off_the_bus_message_is_one_inferred_79_with_all_its_lines():
    text = data("dmesg-xid/nvsentinel-155-fallen-off-bus-multiline-no-xid-570.txt")
    (event,) = parse(text).xids
    assert event.raw == "\n".join(text.splitlines()[:3])
    assert event.detail == (
        "The NVIDIA GPU 0000:b3:00.0 (PCI ID: 10de:26b5) installed in this system "
        "has fallen off the bus and is not responding to commands."
    )
    assert (event.time, event.pid, event.process) == (None, None, None)  # no now/uptime given
    assert classify(event.code) == ("fail", "GPU has fallen off the bus")


def test_dmesg_T_times_are_node_local():
    text = data("dmesg-xid/gpud-xid119-gsp-rpc-timeout-dmesg-T-xe9680.txt")
    assert parse(text).xids[0].time == t("2025-02-23T16:24:18")  # utc_offset_s=0
    assert parse(text, utc_offset_s=3600).xids[0].time == t("2025-02-23T15:24:18")
    assert parse(text, utc_offset_s=-5 * 3600).xids[0].time == t("2025-02-23T21:24:18")


def test_times_that_need_now_are_none_without_it():
    forum = data("dmesg-xid/forum-gnome-freeze-xid32-old-format-gpu-at-line.txt")
    assert {x.time for x in parse(forum).xids} == {None}
    assert {x.time for x in parse(forum, now=NOW).xids} == {None}  # uptime_s missing
    assert {x.time for x in parse(forum, uptime_s=UPTIME_S).xids} == {None}  # now missing
    docker = data("dmesg-oom/docker-for-linux-1001-syslog-prefixed-global-oom-killed-process-truncated.txt")
    assert {o.time for o in parse(docker).ooms} == {None}


def test_naive_now_is_refused():
    with pytest.raises(ValueError, match="timezone-aware"):
        parse("", now=datetime(2025, 6, 1))


# -- timestamp forms (constructed lines, one per form) -------------------------------------------

XID = "NVRM: Xid (PCI:0000:3b:00): 48, pid=77, name=python3, DBE (0x1) detected"


@pytest.mark.parametrize(
    "line, form, when",
    [
        # dmesg --time-format iso (comma decimal, offset) and with --decode's facility:level prefix
        (f"2025-01-21T04:41:44,283302+00:00 {XID}", "iso", t("2025-01-21T04:41:44.283302")),
        (f"kern  :warn  : 2025-01-21T04:41:44,283302+00:00 {XID}", "iso", t("2025-01-21T04:41:44.283302")),
        (f"2025-01-21T06:41:44,283302+02:00 {XID}", "iso", t("2025-01-21T04:41:44.283302")),
        # journalctl -k -o short-iso (older systemd "+0000", newer "+00:00") and short-iso-precise
        (f"2025-01-21T04:41:44+0000 node001 kernel: {XID}", "journal", t("2025-01-21T04:41:44")),
        (f"2025-01-21T05:41:44+01:00 node001 kernel: {XID}", "journal", t("2025-01-21T04:41:44")),
        (f"2025-01-21T04:41:44.283302+0000 node001 kernel: {XID}", "journal", t("2025-01-21T04:41:44.283302")),
        # dmesg's default seconds since boot: now - uptime_s + t
        (f"[ 1399.140318] {XID}", "uptime", BOOT + timedelta(seconds=1399.140318)),
        (f"kern  :err   : [    5.000000] {XID}", "uptime", BOOT + timedelta(seconds=5)),
        # dmesg -T, node local time (utc_offset_s=0 here)
        (f"[Sun Feb 23 16:24:18 2025] {XID}", "ctime", t("2025-02-23T16:24:18")),
        (f"[Thu Dec  7 00:05:14 2017] {XID}", "ctime", t("2017-12-07T00:05:14")),
        # syslog / kern.log / journalctl short and short-precise: the latest such date not after now
        (f"May 15 23:09:30 node001 kernel: [  518.050606] {XID}", "syslog", t("2025-05-15T23:09:30")),
        (f"May  1 23:09:30 node001 kernel: {XID}", "syslog", t("2025-05-01T23:09:30")),
        (f"Dec 31 23:59:59 node001 kernel: {XID}", "syslog", t("2024-12-31T23:59:59")),
        (f"Jun  1 00:00:00.500000 node001 kernel: {XID}", "syslog", t("2025-06-01T00:00:00.5")),
        # kmsg / bare message: no time at all
        (XID, "none", None),
        (f"kern  :err   : {XID}", "none", None),
    ],
)
def test_each_timestamp_form(line, form, when):
    log = parse(line + "\n", now=NOW, uptime_s=UPTIME_S)
    (event,) = log.xids
    assert (event.code, event.pci, event.pid, event.process) == (48, "0000:3b:00", 77, "python3")
    assert event.detail == "DBE (0x1) detected"
    assert (log.timestamps, event.time, event.raw) == (form, when, line)


def test_syslog_date_in_local_time_and_year_rollover():
    line = f"Jan  1 00:30:00 node001 kernel: {XID}\n"
    now = datetime(2025, 1, 1, 0, 10, tzinfo=UTC)  # 01:10 local at UTC+1
    (event,) = parse(line, now=now, utc_offset_s=3600).xids
    assert event.time == t("2024-12-31T23:30:00")
    # a date a few minutes past `now` (the clock that gave `now` lags) is still this year
    (event,) = parse(f"Jun  1 00:05:00 node001 kernel: {XID}\n", now=NOW).xids
    assert event.time == t("2025-06-01T00:05:00")
    # a leap day is placed in the latest leap year not after now
    (event,) = parse(f"Feb 29 12:00:00 node001 kernel: {XID}\n", now=NOW).xids
    assert event.time == t("2024-02-29T12:00:00")


def test_mixed_forms_are_reported_as_mixed():
    text = f"[ 1.0] {XID}\n[Sun Feb 23 16:24:18 2025] {XID}\n"
    assert parse(text).timestamps == "mixed"
    assert parse(f"[ 1.0] {XID}\n{XID}\n").timestamps == "mixed"


def test_impossible_dates_give_no_time():
    log = parse(
        f"[Sun Feb 30 16:24:18 2025] {XID}\n2025-13-01T00:00:00,0+00:00 {XID}\n[ 99999999999999999999.0] {XID}\n",
        now=NOW,
        uptime_s=UPTIME_S,
    )
    assert [x.time for x in log.xids] == [None, None, None]
    assert [x.code for x in log.xids] == [48, 48, 48]


# -- Xid line forms the corpus does not hold (constructed) -------------------------------------------


def test_xid_79_line_constructed():
    """Constructed: the Xid 79 line as NVIDIA's Xid document describes it; not from a recording."""
    line = "[ 1843.308000] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus."
    (event,) = parse(line + "\n").xids
    assert (event.code, event.pci, event.pid, event.process) == (79, "0000:3b:00", 1234, None)
    assert (event.detail, event.inferred) == ("GPU has fallen off the bus.", False)


def test_xid_79_line_and_the_lost_gpu_message_count_once():
    """Constructed: both messages for one GPU; the inferred one is the same loss."""
    text = (
        "[ 10.0] NVRM: Xid (PCI:0000:B3:00): 79, pid=1234, GPU has fallen off the bus.\n"
        "[ 10.1] NVRM: The NVIDIA GPU 0000:b3:00.0\n"
        "        NVRM: (PCI ID: 10de:26b5) installed in this system has\n"
        "        NVRM: fallen off the bus and is not responding to commands.\n"
        "[ 10.2] NVRM: The NVIDIA GPU 0000:1a:00.0\n"
        "        NVRM: (PCI ID: 10de:26b5) installed in this system has\n"
        "        NVRM: fallen off the bus and is not responding to commands.\n"
    )
    log = parse(text)
    assert [(x.code, x.pci, x.inferred) for x in log.xids] == [(79, "0000:b3:00", False), (79, "0000:1a:00", True)]


def test_lost_gpu_message_in_two_lines_and_in_syslog_form():
    """Constructed from the driver's text: older drivers wrap it in two lines; syslog stamps each."""
    two = (
        "NVRM: The NVIDIA GPU 0000:01:00.0 (PCI ID: 10de:1e07) installed in this\n"
        "NVRM: system has fallen off the bus and is not responding to commands.\n"
    )
    (event,) = parse(two).xids
    assert (event.code, event.pci, event.inferred, event.raw) == (79, "0000:01:00", True, two.rstrip("\n"))
    syslog = "".join(
        f"May 15 23:09:30 node001 kernel: {part}\n"
        for part in (
            "NVRM: The NVIDIA GPU 0000:b3:00.0",
            "NVRM: (PCI ID: 10de:26b5) installed in this system has",
            "NVRM: fallen off the bus and is not responding to commands.",
        )
    )
    (event,) = parse(syslog, now=NOW).xids
    assert (event.pci, event.time, len(event.raw.splitlines())) == ("0000:b3:00", t("2025-05-15T23:09:30"), 3)


def test_unsupported_gpu_message_is_not_a_lost_gpu():
    text = (
        "NVRM: The NVIDIA GPU 0000:01:00.0 (PCI ID: 10de:1234)\n"
        "NVRM: installed in this system is not supported by the\n"
        "NVRM: NVIDIA 470.00 driver release.\n"
    )
    assert parse(text).xids == ()


def test_mig_xid_from_nvidia_memory_error_document():
    """The example line in NVIDIA "GPU Memory Error Management", Table 3 (contained error, MIG)."""
    line = "NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, Contained: CE User Channel (0x9). RST: No, D-RST: No"
    (event,) = parse(line).xids
    assert (event.code, event.pci, event.pid, event.process) == (94, "0000:01:00", 7194, None)
    assert event.detail == "Contained: CE User Channel (0x9). RST: No, D-RST: No"


@pytest.mark.parametrize(
    "line, reason",
    [
        ("NVRM: Xid (PCI:0000:01:00): abc, Channel ID 00000009", "without a readable code"),
        ("NVRM: Xid (PCI:0000:01:0", "without a readable code"),
        ("NVRM: Xid (PCI:zzzz:01:00): 13, x", "without a readable code"),
        ("NVRM: Xid (PCI:0000:01:00): 119, pid=12x4, name=gpud, Timeout", "pid '12x4' is not a number"),
        ("NVRM: Xid (PCI:0000:01:00): 11", "ends before its message"),  # "119" cut short
        ("NVRM: Xid (PCI:0000:01:00): 119, pid=20", "ends before its message"),
        ("NVRM: Xid (PCI:0000:01:00): 119, p", "ends before its message"),
        ("NVRM: Xid (PCI:0000:01:00): 119, pid=2024380, na", "ends before its message"),
        ("NVRM: Xid (PCI:0000:01:00): 119, pid=2024380, name=nvidia-s", "ends before its message"),
    ],
)
def test_unreadable_xid_line_is_kept_not_dropped(line, reason):
    text = f"[ 1.0] NVRM: GPU at PCI:0000:01:00: GPU-x\n[ 2.0] {line}\n[ 3.0] {XID}\n"
    log = parse(text)
    assert [x.code for x in log.xids] == [48]
    (entry,) = log.unreadable
    assert isinstance(entry, Unreadable)
    assert entry.raw == f"[ 2.0] {line}"
    assert reason in entry.reason


def test_empty_text():
    assert parse("") == KernelLog((), (), (), 0, "none")
    assert parse("\n\n") == KernelLog((), (), (), 2, "none")


@pytest.mark.parametrize(
    "text",
    [
        "\x00\x01\xff\ufffd\n\x7f",
        "NVRM: Xid" * 10_000,
        "x" * 100_000,
        "[\n]\n[ .]\n[Sun Feb",
        "Killed process ((((((",
        "NVRM: The NVIDIA GPU 0000:01:00.0",
    ],
)
def test_odd_input_does_not_crash(text):
    log = parse(text, now=NOW, uptime_s=UPTIME_S, utc_offset_s=-43200)
    assert log.lines == len(text.splitlines())
    assert all(len(entry.reason) < 200 for entry in log.unreadable)


@pytest.mark.parametrize("path", sorted(FILES))
def test_every_prefix_gives_true_events_or_unreadable(path):
    """Cut a recording at every character: events read are the whole file's, never another code."""
    text = data(path)
    whole = parse(text, now=NOW, uptime_s=UPTIME_S)
    xids, ooms = _xid_rows(whole), [row[:4] + row[5:] for row in _oom_rows(whole)]
    for end in range(len(text)):
        log = parse(text[:end], now=NOW, uptime_s=UPTIME_S)
        assert _xid_rows(log) == xids[: len(log.xids)], end
        got = [row[:4] + row[5:] for row in _oom_rows(log)]
        assert got == ooms[: len(got)], end
        assert all(o.anon_rss_kb in (None, w.anon_rss_kb) for o, w in zip(log.ooms, whole.ooms)), end
        last = text[:end].splitlines()[-1:] or [""]
        assert all(entry.raw == last[0] for entry in log.unreadable), end


# -- OOM kills ---------------------------------------------------------------------------------------

# Constructed from mm/oom_kill.c (Linux 5.x/6.x) __oom_kill_process:
#   "%s: Killed process %d (%s) total-vm:%lukB, anon-rss:%lukB, file-rss:%lukB, shmem-rss:%lukB,
#    UID:%u pgtables:%lukB oom_score_adj:%hd\n"  with %s "Out of memory" or "Memory cgroup out of memory"
# and dump_oom_summary / mem_cgroup_print_oom_context:
#   "oom-kill:constraint=%s,nodemask=%*pbl,cpuset=…,mems_allowed=…[,oom_memcg=…|,global_oom]
#    ,task_memcg=…,task=%s,pid=%d,uid=%d"
SIZES = "total-vm:1000kB, anon-rss:2048kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:100kB oom_score_adj:0"


def test_global_oom_kill_from_the_kernel_format():
    text = (
        "[  99.000000] python3 invoked oom-killer: gfp_mask=0x100cca(GFP_HIGHUSER_MOVABLE), order=0, oom_score_adj=0\n"
        "[  99.000001] oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,"
        "global_oom,task_memcg=/user.slice/user-1000.slice,task=python3,pid=1234,uid=1000\n"
        f"[  99.000002] Out of memory: Killed process 1234 (python3) {SIZES}\n"
        "[  99.000100] oom_reaper: reaped process 1234 (python3), now anon-rss:0kB, file-rss:0kB, shmem-rss:0kB\n"
    )
    log = parse(text)
    assert _oom_rows(log) == ((1234, "python3", "global", None, 2048, None),)
    assert log.ooms[0].raw == text.splitlines()[2]


def test_cgroup_oom_kill_names_the_memcg_from_the_summary_line():
    memcg = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice"
    text = (
        "[  99.0] python3 invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=985\n"
        f"[  99.1] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=cri-1,mems_allowed=0,"
        f"oom_memcg={memcg},task_memcg={memcg}/cri-1,task=python3,pid=4321,uid=0\n"
        f"[  99.2] Memory cgroup out of memory: Killed process 4321 (python3) {SIZES}\n"
    )
    assert _oom_rows(parse(text)) == ((4321, "python3", "cgroup", memcg, 2048, None),)


def test_cgroup_oom_kill_without_summary_has_no_cgroup():
    text = f"Memory cgroup out of memory: Killed process 1234 (python3) {SIZES}\n"
    assert _oom_rows(parse(text)) == ((1234, "python3", "cgroup", None, 2048, None),)


def test_summary_for_another_pid_is_not_applied():
    text = (
        "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/a,"
        "task_memcg=/a,task=x,pid=1,uid=0\n"
        f"Memory cgroup out of memory: Killed process 2 (y) {SIZES}\n"
    )
    assert _oom_rows(parse(text)) == ((2, "y", "cgroup", None, 2048, None),)


def test_old_kill_process_line_is_a_choice_and_the_killed_line_the_kill():
    """Kernels before 4.19 print the victim choice, then a bare "Killed process" (maybe a child)."""
    text = (
        "[ 5.0] Task in /kubepods/pod1/ctr killed as a result of limit of /kubepods/pod1\n"
        "[ 5.1] Memory cgroup out of memory: Kill process 24572 (java) score 0 or sacrifice child\n"
        "[ 5.2] Killed process 28438 (java) total-vm:20255636kB, anon-rss:466160kB, file-rss:13684kB\n"
        "[ 6.0] Out of memory: Kill process 7 (a) score 900 or sacrifice child\n"
        "[ 6.1] Killed process 8 (b) total-vm:10kB, anon-rss:5kB, file-rss:0kB\n"
        "[ 7.0] Killed process 9 (c) total-vm:10kB, anon-rss:6kB, file-rss:0kB\n"
    )
    assert _oom_rows(parse(text)) == (
        (28438, "java", "cgroup", "/kubepods/pod1", 466160, None),
        (8, "b", "global", None, 5, None),
        (9, "c", "unknown", None, 6, None),
    )


def test_rhel6_killed_process_with_uid():
    text = "Killed process 2516, UID 27, (mysqld) total-vm:2457368kB, anon-rss:1083588kB, file-rss:0kB\n"
    assert _oom_rows(parse(text)) == ((2516, "mysqld", "unknown", None, 1083588, None),)


def test_oom_killer_invocation_and_reaper_are_not_kills():
    text = (
        "java invoked oom-killer: gfp_mask=0xd0, order=0, oom_score_adj=-998\n"
        "oom_reaper: reaped process 15784 (python3), now anon-rss:0kB, file-rss:0kB, shmem-rss:0kB\n"
        "Memory cgroup out of memory: Kill process 24572 (java) score 0 or sacrifice child\n"
    )
    log = parse(text)
    assert (log.ooms, log.unreadable, log.xids) == ((), (), ())


def test_unreadable_killed_process_line_is_kept():
    text = "Out of memory: Killed process 15784 (pyth\n"
    log = parse(text)
    assert log.ooms == ()
    (entry,) = log.unreadable
    assert entry.raw == text.rstrip("\n") and "OOM kill line" in entry.reason


def test_types_are_frozen():
    (kill,) = parse(f"Out of memory: Killed process 1 (a) {SIZES}").ooms
    assert isinstance(kill, OomKill)
    with pytest.raises(AttributeError):
        kill.pid = 2  # type: ignore[misc]
    assert isinstance(parse(XID).xids[0], XidEvent)


# -- classification ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "code, severity",
    [
        (79, "fail"),
        (48, "fail"),
        (63, "fail"),
        (64, "fail"),
        (74, "fail"),
        (92, "fail"),
        (94, "fail"),
        (95, "fail"),
        (119, "fail"),
        (120, "fail"),
        (13, "warn"),
        (31, "warn"),
        (43, "warn"),
        (32, "warn"),
        (45, "warn"),
        (61, "fail"),
        (62, "fail"),
    ]
    + [(code, "fail") for code in range(144, 151)],
)
def test_classification(code, severity):
    got, meaning = classify(code)
    assert got == severity and meaning


def test_unknown_code_fails():
    assert classify(9999) == classify(0) == UNKNOWN == ("fail", "unknown Xid: not in the table")
    assert all(severity in ("fail", "warn") and meaning for severity, meaning in XID_ACTIONS.values())


# -- issue 17: how many lines carry a kernel timestamp; lines break at "\n" only ------------------------


def test_stamped_counts_lines_with_a_recognised_timestamp():
    assert parse("").stamped == 0
    assert parse("  \n\t\n").stamped == 0
    assert parse("\x00\x01\xff\ufffd\x7f\n").stamped == 0
    assert parse("[    5.000001] Linux version 6.1.0\nno stamp here\n").stamped == 1


@pytest.mark.parametrize("breaker", ["\x0c", "\x1c", "\x85", "\u2028"], ids=ascii)
def test_a_splitlines_break_inside_a_message_keeps_it_one_line(breaker):
    line = f"[ 1399.140318] NVRM: Xid (PCI:0000:9b:00): 79, pid=1, name=a{breaker}b, GPU has fallen off the bus.\n"
    log = parse(line)
    assert (log.lines, log.stamped, [x.code for x in log.xids]) == (1, 1, [79])
    assert log.xids[0].process == f"a{breaker}b"
