"""One memory and time budget across all the flight-recorder dumps of a forensics run (issue 32, 1.5):
each dump had its own 30 s and nothing bounded their sum, so 512 ranks' slow dumps held the run for
hours and every parsed dump was kept at once. Past the run's budget, a dump is not read, and says why."""

from __future__ import annotations

import pickle

from nodecheck.forensics import analysis
from nodecheck.forensics.collect import DumpRead
from tests.forensics.test_record import fr_bytes


def test_the_dumps_share_one_time_budget(monkeypatch):
    reads = [DumpRead("", f"/dumps/nccl_trace_rank_{r}", fr_bytes("built-2.10-ahead-p2p", r)) for r in range(4)]
    limits: list[float] = []
    real = analysis.parse_dump

    def parse(data, source="", time_limit_s=30.0):
        limits.append(time_limit_s)
        return real(data, source=source, time_limit_s=time_limit_s)

    monkeypatch.setattr(analysis, "parse_dump", parse)
    clock = iter([0.0, 0.0, 50.0, 95.0, 120.0])  # the start, then before each dump
    monkeypatch.setattr(analysis, "_now", lambda: next(clock))
    f = analysis.examine(None, reads, 3.0, dumps_budget_s=120.0)
    # each dump gets what is left of the run's 120 s, at most its own 30 s
    assert limits[:3] == [30.0, 30.0, 25.0]
    read = [r for r in f.dumps if r.dump is not None]
    skipped = [r.error for r in f.dumps if r.dump is None]
    assert len(read) == 3
    assert skipped == ["not read: the run's 120 s for reading dumps was spent on the 3 read before it"]


def test_the_dumps_share_one_memory_budget():
    small = fr_bytes("built-2.10-ahead-p2p", 0)
    reads = [DumpRead("", f"/dumps/nccl_trace_rank_{r}", fr_bytes("built-2.10-ahead-p2p", r)) for r in range(4)]
    budget = sum(len(r.data or b"") for r in reads[:2]) + 1
    f = analysis.examine(None, reads, 3.0, dumps_budget_bytes=budget)
    assert [r.dump is not None for r in f.dumps] == [True, True, False, False]
    assert f.dumps[2].error.startswith("not read: the run's dumps are past ")
    assert "bytes read" in f.dumps[2].error
    assert pickle.loads(small)["version"]  # the recorded dump itself is sound
