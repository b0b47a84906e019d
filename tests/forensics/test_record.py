"""forensics/analysis.py examine() and forensics/record.py (render, to_json, files) on a Gathered built
from the forensics probes' real output (tests/data/forensics: three ranks on node1, rank 2 frozen so
py-spy got no answer) with real flight-recorder dumps (tests/data/flight-recorder), a second node that
was not reached, and dumps that cannot be used (the recorder's fake bytes, a file gone, a malicious pickle)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nodecheck.core.model import Capture, Outcome
from nodecheck.forensics import analysis, record
from nodecheck.forensics.collect import DumpRead, Gathered
from nodecheck.forensics.probe import SNAPSHOT, STACKS
from nodecheck.forensics.ranks import rank_processes
from nodecheck.forensics.verdict import MISMATCHED, MISSING, UNDETERMINED
from nodecheck.parsers.forensics import parse_fetch, parse_snapshot, parse_stacks
from nodecheck.parsers.watch_sample import GpuSample
from tests.helpers import DATA

FORENSICS = DATA / "forensics"
FR = DATA / "flight-recorder"
SNAPSHOT_TEXT = (FORENSICS / "recorded-snapshot-three-ranks-no-nvidia-smi.txt").read_text()
STACKS_TEXT = (FORENSICS / "recorded-stacks-two-answer-one-frozen.txt").read_text()
RECORDED_PREFIX = "/tmp/nc-forensics-record-7glaq490/fr/trace_rank_"
UNREACHED = "unreachable: connect timeout after 10 s"
XID119 = DATA / "dmesg-xid" / "gpud-xid119-gsp-rpc-timeout-dmesg-T-xe9680.txt"
AFTER_119 = 1740328260  # a minute after the last Xid 119 of XID119
THREE_DAYS_LATER = AFTER_119 + 3 * 86400  # its Xids long before the job's processes started


def capture(
    node: str, probe: str, stdout: str, outcome: Outcome = Outcome.EXITED, rc: int | None = 0, detail: str = ""
) -> Capture:
    return Capture(node, probe, ("sh", "-c", "..."), outcome, rc, stdout, "", 0.5, detail)


def kernel_log(body: str, now: int) -> str:
    return (
        f"@@nodecheck clock now={now} uptime=300.00 utc_offset=+0000\n"
        f"@@nodecheck begin dmesg\n{body}@@nodecheck end dmesg rc=0\n"
    )


def gathered(kernel: Capture | None = None) -> Gathered:
    """node1 as the probes recorded it, its kernel log (by default one whose Xids are days older than
    the job); node2 not reached."""
    snap = parse_snapshot(SNAPSHOT_TEXT)
    stacks = parse_stacks(STACKS_TEXT)
    g = Gathered(["node1", "node2"])
    g.snapshots["node1"] = snap
    g.failures["node2"] = UNREACHED
    g.processes = rank_processes("node1", snap.processes)
    g.stack_results = {("node1", pid): r for pid, r in stacks.results.items()}
    g.pyspy["node1"] = stacks.pyspy
    g.captures = [
        capture("node1", SNAPSHOT, SNAPSHOT_TEXT),
        capture("node1", STACKS, STACKS_TEXT),
        capture("node2", SNAPSHOT, "", Outcome.UNREACHABLE, None, "connect timeout after 10 s"),
    ]
    g.kernel["node1"] = kernel or capture("node1", "kernel-log", kernel_log(XID119.read_text(), THREE_DAYS_LATER))
    g.captures.append(g.kernel["node1"])
    return g


def fr_bytes(scenario: str, r: int) -> bytes:
    return (FR / scenario / f"nccl_trace_rank_{r}").read_bytes()


def dump_reads() -> list[DumpRead]:
    """Ranks 0-2 of the recorded missing-rank dumps (rank 2 never joined seq 21; rank 3 left none),
    the recorder's own fake trace_rank_0 as the fetch probe brought it, and a file gone when fetched."""
    reads = [DumpRead("node1", f"/scratch/fr/nccl_trace_rank_{r}", fr_bytes("missing-rank", r)) for r in range(3)]
    fetched = parse_fetch((FORENSICS / "recorded-fetch-dump-gzip.txt").read_text())
    gone = parse_fetch((FORENSICS / "recorded-fetch-missing.txt").read_text())
    reads.append(DumpRead("node1", f"{RECORDED_PREFIX}0", fetched.data, fetched.note))
    reads.append(DumpRead("node1", f"{RECORDED_PREFIX}1", None, f"not fetched: {gone.note}"))
    return reads


def node_line(text: str, node: str) -> str:
    """The node's line of render's "nodes:" section."""
    lines = text.splitlines()
    return next(x for x in lines[lines.index("nodes:") :] if x.startswith(f"  {node}: "))


@pytest.fixture
def examined() -> analysis.Forensics:
    return analysis.examine(gathered(), dump_reads(), 3.0)


FROZEN = (
    "py-spy got no answer within 3 s; process state D (disk sleep), waiting in the kernel at hrtimer_nanosleep "
    "(stuck below Python: the kernel or the driver)"
)
FR_LINE = (
    "pg 0 seq 21: ranks 0-1 (node1 GPU0, node1 GPU1) in all_reduce [1024] (scheduled), rank 2 (node1 GPU2) "
    "never joined (last completed seq 20) — missing rank"
)
WARN_IB = (
    "node1:4242:4301 [0] transport/net_ib.cc:1701 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<47622> "
    "with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.0.0.1 remoteGids::ffff:10.0.0.2 "
    "hca mlx5_3"
)
WARN_CUDA = "node1:4242:4301 [0] NCCL WARN Cuda failure 'an illegal memory access was encountered'"


def test_examine_a_frozen_rank_and_a_dead_one(examined):
    d = examined.diagnosis
    assert (d.kind, d.culprit_ranks, d.culprit_nodes) == (MISSING, (2, 3), ("node1",))
    assert d.basis == "flight recorder and the stacks"
    assert [r.dump is not None for r in examined.dumps] == [True, True, True, False, False]
    assert [g.ranks for g in examined.groups] == [(0, 1), (2,)]
    frozen = examined.stacks[2]
    assert (frozen.process.pid, frozen.stacks, frozen.failure) == (5001, None, FROZEN)
    assert frozen.unpaused is not None and frozen.unpaused.pid == 5001


def test_render_every_section(examined):
    lines = record.render(examined, "4242").splitlines()
    notes = lines.index("notes:")
    assert lines[:notes] == [
        "nodecheck forensics: job 4242, 2 nodes (node[1-2]), 3 processes, 3 ranks, 3 of 5 flight-recorder dumps read",
        "verdict: a rank missing or dead; culprit ranks 2-3 on node1 (from the flight recorder and the stacks)",
        "evidence:",
        f"  {FR_LINE}",
        "  ranks 0-1 waiting in reduce_scatter",
        f"  rank 2: {FROZEN}",
        "  no process holds rank 3 of the world size 4; rank 3 ran on node1: dead, or on a node not reached",
        "  not reached: node2 (their ranks' stacks and dumps are missing)",
        f"  node1: {WARN_IB}",
        f"  node1: {WARN_CUDA}",
        "last collective completed (flight recorder):",
        "  pg 0 (default_pg): seq 20 on ranks 0-2",
        "stacks (py-spy 0.4.3; 3 processes):",
        "  2 ranks 0-1 (node1 GPU0, node1 GPU1) in wait (distributed_c10d.py:13) \u2190 reduce_scatter "
        "(distributed_c10d.py:21) \u2190 train (training.py:20) \u2190 \u2026 (5 frames) "
        "[native: clock_nanosleep (libc.so.6)]",
        f"  rank 2 (node1 GPU2): {FROZEN}; read without stopping it: "
        "in wait (distributed_c10d.py:13) \u2190 all_reduce "
        "(distributed_c10d.py:17) \u2190 _aggregate_total_loss (engine.py:6) \u2190 \u2026 (6 frames)",
        "nodes:",
        "  node1: GPUs unknown (nodecheck-forensics: 28: nvidia-smi: not found); no Xid; no OOM kill; "
        "2 NCCL WARN lines",
        f"  node2: not read: {UNREACHED}",
        "next step: read the missing ranks' own log and the Xid/OOM lines above; if node1 is at fault, drain it "
        "(scontrol update nodename=node1 state=drain reason='forensics: hung collective, see the record') "
        "and check it: "
        "nodecheck run hosts.yml --nodes 'node1'",
    ]
    assert lines[notes + 1] == f"  node2: not read: {UNREACHED}"
    assert lines[notes + 2].startswith(
        f"  dump {RECORDED_PREFIX}0 on node1: unreadable: {RECORDED_PREFIX}0: not a readable pickle"
    )
    assert lines[notes + 3 :] == [
        f"  dump {RECORDED_PREFIX}1 on node1: not fetched: the file was gone when it was fetched"
    ]


def test_render_other_process_groups_beside_the_verdict():
    reads = [DumpRead("", f"/dumps/nccl_trace_rank_{r}", fr_bytes("built-2.10-ahead-p2p", r)) for r in range(4)]
    f = analysis.examine(None, reads, 3.0)
    text = record.render(f, "dumps:fr")
    assert f.diagnosis.culprit_ranks == (3,)
    assert text.splitlines()[:2] == [
        "nodecheck forensics: job dumps:fr, 4 of 4 flight-recorder dumps read",
        "verdict: a rank missing or dead; culprit rank 3 (from the flight recorder)",
    ]
    assert (
        "other process groups:\n  pg 1: all 2 ranks completed every collective they enqueued (last seq 3); "
        "pending p2p: rank 0 send 0->1 [8x16] (started, p2p seq 5); rank 1 recv 1<-0 [8x16] (started, p2p seq 5)\n"
        in text
    )
    assert "stacks (" not in text and "nodes:" not in text


def test_render_with_nothing_gathered():
    f = analysis.examine(None, [], 3.0)
    assert f.diagnosis.kind == UNDETERMINED
    assert record.render(f, "dumps:empty").splitlines() == [
        "nodecheck forensics: job dumps:empty, 0 of 0 flight-recorder dumps read",
        "verdict: undetermined",
        "next step: nothing gathered names a culprit: enable the flight recorder (TORCH_NCCL_TRACE_BUFFER_SIZE, "
        "TORCH_NCCL_DUMP_ON_TIMEOUT=1) and install py-spy on the nodes, then run forensics again",
        "notes:",
        "  no flight-recorder dump found (TORCH_NCCL_DUMP_ON_TIMEOUT=1 writes them when the watchdog fires; a job "
        "still inside its timeout has none yet)",
    ]


def test_xids_of_the_culprit_node_in_the_evidence_and_the_node_line():
    kernel = capture("node1", "kernel-log", kernel_log(XID119.read_text(), AFTER_119))
    f = analysis.examine(gathered(kernel), dump_reads()[:3], 3.0)
    xids = [e for e in f.diagnosis.evidence if e.startswith("node1: Xid")]
    assert xids == [
        f"node1: Xid 119 (GSP RPC timeout) on GPU 0000:9b:00 at 2025-02-23 {t}Z"
        for t in ("16:24:18", "16:24:24", "16:24:30", "16:27:12", "16:30:13")
    ]
    line = node_line(record.render(f, "4242"), "node1")
    assert line.startswith(
        "  node1: GPUs unknown (nodecheck-forensics: 28: nvidia-smi: not found); Xid 119 (GSP RPC "
        "timeout) on GPU 0000:9b:00 at 2025-02-23 16:24:18Z; "
    )
    assert line.endswith("16:30:13Z; no OOM kill; 2 NCCL WARN lines")


# A kernel log that was not read (the probe timed out) is said so: never "no Xid; no OOM kill".
def test_a_kernel_log_that_was_not_read_is_not_reported_as_clean():
    kernel = capture("node1", "kernel-log", "", Outcome.TIMEOUT, None, "timeout after 20 s")
    f = analysis.examine(gathered(kernel), dump_reads()[:3], 3.0)
    line = node_line(record.render(f, "4242"), "node1")
    assert "no Xid" not in line and "no OOM kill" not in line
    assert "kernel log not read (timeout: timeout after 20 s)" in line
    assert record.to_json(f, "4242", "", "")["nodes"]["node1"]["kernel_log_error"] == "timeout: timeout after 20 s"


def test_to_json_is_a_versioned_record_with_the_diagnosis(examined):
    out = record.to_json(examined, "4242", "2026-12-01T10:00:00Z", "2026-12-01T10:00:09Z")
    back = json.loads(json.dumps(out, default=str))
    assert (back["record_version"], back["kind"], back["job"]) == (1, "forensics", "4242")
    assert set(back["diagnosis"]) == {
        "class",
        "headline",
        "culprit_ranks",
        "culprit_nodes",
        "evidence",
        "next_step",
        "basis",
    }
    d = back["diagnosis"]
    assert (d["class"], d["culprit_ranks"], d["culprit_nodes"]) == (MISSING, [2, 3], ["node1"])
    assert d["headline"] == examined.diagnosis.headline and d["evidence"][0] == FR_LINE
    assert [(g["kind"], g["missing"], g["text"]) for g in back["process_groups"]] == [("missing", [2], FR_LINE)]
    assert [(s["ranks"], s["failure"]) for s in back["stack_groups"]] == [([0, 1], ""), ([2], FROZEN)]
    assert back["stack_groups"][0]["frames"][:2] == [
        "wait (distributed_c10d.py:13)",
        "reduce_scatter (distributed_c10d.py:21)",
    ]
    assert [(p["rank"], p["pid"], p["gpu"]) for p in back["processes"]] == [
        (0, 4999, "0"),
        (1, 5000, "1"),
        (2, 5001, "2"),
    ]
    assert [(x["read"], x["rank"], x["version"], x["format"]) for x in back["dumps"]] == [
        (True, 0, "2.10", "pickle"),
        (True, 1, "2.10", "pickle"),
        (True, 2, "2.10", "pickle"),
        (False, None, None, None),
        (False, None, None, None),
    ]
    assert back["dumps"][4]["error"] == "not fetched: the file was gone when it was fetched"
    assert back["nodes"]["node2"] == {"reached": False, "failure": UNREACHED}
    node1 = back["nodes"]["node1"]
    assert (node1["reached"], node1["gpus"], node1["pyspy"], node1["nccl_warns"]) == (
        True,
        [],
        "py-spy 0.4.3",
        [WARN_IB, WARN_CUDA],
    )
    assert back["notes"] == list(examined.notes) and len(back["notes"]) == 3


def test_files_hold_every_dump_that_parsed_every_stack_and_capture(examined):
    out = record.files(examined, record.to_json(examined, "4242", "s", "f"), "the summary\n")
    reads = dump_reads()
    assert sorted(out) == sorted(
        [
            "forensics.json",
            "summary.txt",
            "captures/node1/forensics-snapshot.txt",
            "captures/node1/forensics-stacks.txt",
            "captures/node2/forensics-snapshot.txt",
            "captures/node1/kernel-log.txt",
            "stacks/node1/pid-4999.txt",
            "stacks/node1/pid-5000.txt",
            "stacks/node1/pid-5001.txt",
            "dumps/node1/000-nccl_trace_rank_0",
            "dumps/node1/001-nccl_trace_rank_1",
            "dumps/node1/002-nccl_trace_rank_2",
        ]
    )
    # the fetched bytes that did not parse are not kept (they are whatever the path held), the one not
    # fetched has no bytes
    assert out["summary.txt"] == "the summary\n"
    assert out["captures/node1/forensics-snapshot.txt"] == SNAPSHOT_TEXT
    assert out["captures/node1/kernel-log.txt"].startswith(f"@@nodecheck clock now={THREE_DAYS_LATER} ")
    for k in range(3):
        path = next(p for p in out if p.startswith(f"dumps/node1/{k:03d}-"))
        assert out[path] == reads[k].data and isinstance(out[path], bytes)
    assert out["stacks/node1/pid-4999.txt"].startswith("Process 4999: /usr/bin/python3 -I ")
    frozen = out["stacks/node1/pid-5001.txt"]
    assert "\n--- py-spy dump --nonblocking (exit 0) ---\nProcess 5001: " in frozen
    assert "    _aggregate_total_loss (engine.py:6)\n" in frozen
    record_json = json.loads(out["forensics.json"])
    assert [x["file"] for x in record_json["dumps"]] == [
        "dumps/node1/000-nccl_trace_rank_0",
        "dumps/node1/001-nccl_trace_rank_1",
        "dumps/node1/002-nccl_trace_rank_2",
        None,
        None,
    ]
    assert [x["not_kept"] for x in record_json["dumps"]] == [
        "",
        "",
        "",
        "its bytes are not kept: they did not parse as a flight-recorder dump",
        "",
    ]


def test_dumps_of_the_same_name_on_two_prefixes_do_not_collide():
    reads = [
        DumpRead("gpu-a07", "/scratch/a/nccl_trace_rank_0", fr_bytes("mismatched", 0)),
        DumpRead("gpu-a07", "/scratch/b/nccl_trace_rank_0", fr_bytes("mismatched", 0)),
        DumpRead("", "/dumps/odd name", b"garbage"),
    ]
    f = analysis.examine(None, reads, 3.0)
    dumps = {k: v for k, v in record.files(f, record.to_json(f, "j", "s", "f"), "").items() if k.startswith("dumps/")}
    assert sorted(dumps) == ["dumps/gpu-a07/000-nccl_trace_rank_0", "dumps/gpu-a07/001-nccl_trace_rank_0"]


GPUS = [GpuSample(i, 0.0 if i == 3 else 100.0, 188.0 + i, 1100.0, 1000.0, 81559.0) for i in range(8)]


def test_gpu_line_common_util_the_odd_gpus_and_the_power_span():
    assert record.gpu_line(GPUS) == "8 GPUs: util 100% (GPU3 0%), power 188-195 W of 1100 W"


def test_gpu_line_two_odd_gpus_and_mixed_power_limits():
    gpus = [GpuSample(i, {2: 35.5, 5: 0.0}.get(i, 97.0), 400.0, 700.0 if i else 500.0, None, None) for i in range(8)]
    assert record.gpu_line(gpus) == "8 GPUs: util 97% (GPU2 35.5%, GPU5 0%), power 400 W"


def test_gpu_line_one_gpu_and_unknown_readings():
    assert record.gpu_line([GpuSample(0, 12.0, 61.5, 300.0, None, None)]) == "1 GPU: util 12%, power 61.5 W of 300 W"
    assert record.gpu_line([GpuSample(k, None, None, None, None, None) for k in range(2)]) == "2 GPUs"


PWNED = (Path("/tmp/nodecheck-fr-pwned-os-system"), Path("/tmp/nodecheck-fr-pwned-eval"))


def test_malicious_dumps_are_refused_among_good_ones():
    for p in PWNED:
        p.unlink(missing_ok=True)
    bad = [FR / "bad" / "malicious-os-system.pkl", FR / "bad" / "malicious-builtins-eval.pkl"]
    reads = [DumpRead("", str(FR / "mismatched" / f"nccl_trace_rank_{r}"), fr_bytes("mismatched", r)) for r in range(8)]
    reads[4:4] = [DumpRead("", str(p), p.read_bytes()) for p in bad]
    f = analysis.examine(None, reads, 3.0)
    assert not any(p.exists() for p in PWNED)
    assert [r.error for r in f.dumps if r.dump is None] == [
        f"unreadable: {bad[0]}: refused to load os.system",
        f"unreadable: {bad[1]}: refused to load builtins.eval",
    ]
    assert f.notes == (
        f"dump {bad[0]}: unreadable: {bad[0]}: refused to load os.system",
        f"dump {bad[1]}: unreadable: {bad[1]}: refused to load builtins.eval",
    )
    d = f.diagnosis
    assert (d.kind, d.culprit_ranks, d.basis) == (MISMATCHED, (3,), "flight recorder")
    text = record.render(f, "dumps:fr")
    assert text.startswith(
        "nodecheck forensics: job dumps:fr, 8 of 10 flight-recorder dumps read\n"
        "verdict: mismatched collectives; culprit rank 3 (from the flight recorder)\n"
    )
    assert f"  dump {bad[0]}: unreadable: {bad[0]}: refused to load os.system\n" in text


def test_a_rank_that_dumped_twice_counts_once():
    reads = [DumpRead("node1", f"/scratch/fr/nccl_trace_rank_{r}", fr_bytes("missing-rank", r)) for r in range(4)]
    reads.append(DumpRead("node1", "/old/fr/nccl_trace_rank_2", fr_bytes("missing-rank", 2)))
    f = analysis.examine(None, reads, 3.0)
    assert len(f.findings) == 1 and f.findings[0].members == (0, 1, 2, 3)
    assert (f.diagnosis.kind, f.diagnosis.culprit_ranks) == (MISSING, (2,))
