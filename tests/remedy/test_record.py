"""Each node's action record (nodecheck.remedy.record): private, bounded, never read as empty when damaged."""

from __future__ import annotations

import os
import stat
from datetime import datetime, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodecheck.remedy import record
from nodecheck.remedy.model import Entry

AT = datetime(2026, 12, 7, 12, 0, tzinfo=timezone.utc)


def test_entries_come_back_as_written_oldest_first_in_a_private_file(tmp_path):
    state = tmp_path / "remedy"
    first = Entry(
        AT, "action", "reset_gpu", "3", "gpu-row-remap-pending", "gpu.health", "done", "nvidia-smi -r -i 3: ok"
    )
    second = Entry(AT, "returned", detail="re-proven: 16 checks passed")
    record.append(state, "node2", [first])
    record.append(state, "node2", [second])
    assert record.load(state, "node2") == (first, second)
    assert stat.S_IMODE(os.stat(state / "node2.jsonl").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(state).st_mode) == 0o700
    assert record.load(state, "node3") == ()  # no record yet: nothing done to it


def test_a_damaged_record_is_an_error_not_an_empty_history(tmp_path):
    (tmp_path / "node2.jsonl").write_text('{"at": "2026-12-07T12:00:00Z", "event": "action"}\nnot json\n')
    with pytest.raises(record.RecordError, match=r"node2.jsonl: line 2 of the newest is not a record entry"):
        record.load(tmp_path, "node2")
    (tmp_path / "node3.jsonl").write_text('{"at": "2026-12-07T12:00:00Z", "event": "rebooted"}\n')
    records, problems = record.load_many(tmp_path, ["node2", "node3", "node4"])
    assert records == {"node4": ()}
    assert set(problems) == {"node2", "node3"} and "event 'rebooted'" in problems["node3"]


def test_a_symlink_planted_as_a_record_is_not_followed(tmp_path):
    (tmp_path / "secret").write_text('{"at": "2026-12-07T12:00:00Z", "event": "held"}\n')
    (tmp_path / "node2.jsonl").symlink_to(tmp_path / "secret")
    with pytest.raises(record.RecordError):
        record.load(tmp_path, "node2")
    with pytest.raises(OSError):
        record.append(tmp_path, "node2", [Entry(AT, "held")])
    assert (tmp_path / "secret").read_text().count("\n") == 1


def test_a_fifo_planted_as_a_record_is_refused_without_waiting_for_a_writer(tmp_path):
    (tmp_path / "remedy").mkdir()
    os.mkfifo(tmp_path / "remedy" / "node2.jsonl")
    with pytest.raises(record.RecordError, match=r"node2\.jsonl: not a regular file \(EINVAL\)"):
        record.load(tmp_path / "remedy", "node2")


@pytest.mark.parametrize("node", ["../etc/passwd", "..", "a/b", "", "-rf", "x" * 200])
def test_a_node_name_that_is_not_a_plain_name_names_no_file(tmp_path, node):
    with pytest.raises(record.RecordError, match="cannot name a record file"):
        record.path_of(tmp_path, node)


def test_a_long_record_is_read_bounded_and_pruned_on_write(tmp_path):
    many = [
        Entry(AT, "action", "reboot", ladder="x", outcome="done", detail="d" * 100) for _ in range(record.MAX_ENTRIES)
    ]
    record.append(tmp_path, "node2", many)
    kept = record.load(tmp_path, "node2")
    assert len(kept) == record.MAX_ENTRIES // 2  # pruned once it reached the bound
    # a file far over the byte bound: only its newest MAX_BYTES are read, from a whole line
    line = record.dumps(many[0]) + "\n"
    (tmp_path / "node4.jsonl").write_text(line * (record.MAX_BYTES // len(line) * 3))
    assert 0 < len(record.load(tmp_path, "node4")) <= record.MAX_ENTRIES


@settings(
    max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.binary(max_size=2000))
def test_any_bytes_in_a_record_are_read_or_refused_never_a_crash(tmp_path, raw):
    (tmp_path / "node2.jsonl").write_bytes(raw)
    try:
        entries = record.load(tmp_path, "node2")
    except record.RecordError:
        return
    assert all(e.event in ("action", "returned", "held") and e.at.tzinfo is not None for e in entries)
