"""The watcher's state directory: state.json round-trips and is replaced atomically, the flock makes a
second watcher of the same job refuse (naming the holder's pid), a corrupt state file (or a field of the
wrong type) is moved aside and reported, nothing is writable by others whatever the umask, a full disk
keeps the last state, and the config fingerprint ignores where alerts go. Incident records: atomic,
bounded in size, not writable by others."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from nodecheck.core.errors import ConfigError
from nodecheck.watch.config import WatchConfig, apply_overrides
from nodecheck.watch.state import STATE_FILE, StateDir, WatchState, config_fingerprint

PENDING = [{"event": {"event": "nodecheck.watch", "verdict": "hung"}, "channels": ["url"]}]


def full_state() -> WatchState:
    return WatchState(
        job="1234",
        fingerprint="0123456789abcdef",
        nodes=["node1", "node2"],
        tracker={"ticks": [[1.0, 2]], "since": 5.5},
        verdict="hung",
        since=1_764_424_803.25,
        message="hung: no step since 3854",
        pending=PENDING,
        hang_actions=1,
        hang_acted=True,
        probed_ticks=40,
        sampled_ticks=39,
        incident="/r/20251129T140203Z_watch_1234_hung",
    )


def test_the_state_round_trips_through_the_file(tmp_path):
    d = StateDir(tmp_path / "w")
    d.lock()
    d.save(full_state())
    back, note = d.load()
    assert note == ""
    want = full_state()
    want.updated = back.updated
    assert back == want
    assert back.updated > 1_700_000_000
    saved = json.loads((tmp_path / "w" / STATE_FILE).read_text())
    assert saved["state_version"] == 1 and saved["pending"] == PENDING
    assert sorted(p.name for p in (tmp_path / "w").iterdir()) == ["alerts.log", "lock", "state.json"]  # no temporary


def test_no_state_file_is_a_fresh_start(tmp_path):
    d = StateDir(tmp_path)
    assert d.load() == (None, "")


def test_a_second_watcher_of_the_same_job_refuses_naming_the_holder(tmp_path):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import sys, time; from nodecheck.watch.state import StateDir\n"
                f"d = StateDir({str(tmp_path)!r}); d.lock(); print('locked', flush=True); time.sleep(60)"
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline() == "locked\n"
        with pytest.raises(ConfigError) as e:
            StateDir(tmp_path).lock()
        assert str(e.value) == (
            f"--state-dir: another watcher holds {tmp_path} (pid {holder.pid}); hint: one watcher "
            "per job: stop the other one, or give this one its own --state-dir"
        )
    finally:
        holder.kill()
        holder.wait()
    StateDir(tmp_path).lock()  # the lock died with its holder (even by SIGKILL)
    assert (tmp_path / "lock").read_text() == f"{os.getpid()}\n"


def test_the_lock_is_also_exclusive_within_one_process_until_released(tmp_path):
    first = StateDir(tmp_path)
    first.lock()
    with pytest.raises(ConfigError, match=rf"another watcher holds {tmp_path} \(pid {os.getpid()}\)"):
        StateDir(tmp_path).lock()
    first.unlock()
    StateDir(tmp_path).lock()


@pytest.mark.parametrize(
    "text, why",
    [
        (b'{"state_version": 1, "job": "1234", "verdi', "Unterminated string"),
        (b"\xff\xfe garbage", "Expecting value: line 1 column 1 (char 0)"),
        (b'{"state_version": 99, "job": "1234"}', "not a version-1 watcher state"),
        (b"[1, 2]", "not a version-1 watcher state"),
        (b'{"state_version": 1, "job": "1234", "colour": "red"}', "unexpected keyword argument 'colour'"),
        (b'{"state_version": 1, "job": "1234", "pending": "none"}', "pending: str 'none', not list"),
    ],
)
def test_a_corrupt_state_file_is_moved_aside_and_reported_not_fatal(tmp_path, text, why):
    (tmp_path / STATE_FILE).write_bytes(text)
    d = StateDir(tmp_path)
    state, note = d.load()
    assert state is None
    [aside] = [p for p in tmp_path.iterdir() if p.name.startswith("state.json.corrupt-")]
    assert aside.read_bytes() == text and not (tmp_path / STATE_FILE).exists()
    assert note.startswith(f"{tmp_path / STATE_FILE} was unreadable (") and why in note
    assert note.endswith(f"); moved to {aside.name}; starting afresh")
    d.save(WatchState(job="1234"))  # and the watcher goes on writing a fresh one
    assert d.load()[0].job == "1234"


def test_a_state_directory_that_cannot_be_made_is_bad_input(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match=r"^--state-dir: cannot use the state directory .*/file/w: Not a directory"):
        StateDir(tmp_path / "file" / "w").lock()


def test_the_fingerprint_follows_judging_not_alerting():
    base = apply_overrides(WatchConfig(), log="/x/train.log", match="train")
    alerted = apply_overrides(base, alert_url="https://hooks.example/n", alert_command="/bin/page", on_hang="cancel")
    assert config_fingerprint(base) == config_fingerprint(alerted)
    assert len(config_fingerprint(base)) == 16
    assert config_fingerprint(apply_overrides(base, interval_s=5)) != config_fingerprint(base)
    assert config_fingerprint(apply_overrides(base, log="/y/train.log")) != config_fingerprint(base)


# ---- review: permissions, fields of the wrong type, a full disk ------------------------------------------


@pytest.fixture
def umask0():
    """The most permissive umask a service can run with: what the files get is then their own mode."""
    old = os.umask(0)
    yield
    os.umask(old)


def test_state_files_are_not_readable_by_others_whatever_the_umask(tmp_path, umask0):
    d = StateDir(tmp_path / "reports" / "watch" / "1234")
    d.lock()
    d.save(full_state())
    modes = {p.name: p.stat().st_mode & 0o777 for p in [d.path, *d.path.iterdir()]}
    assert modes == {"1234": 0o750, "lock": 0o640, "state.json": 0o640, "alerts.log": 0o640}
    assert {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / "reports", tmp_path / "reports" / "watch")} == {
        "reports": 0o750,
        "watch": 0o750,
    }  # the parents nodecheck made: closed too
    # a corrupt state moved aside keeps its mode; a fresh one is written as above
    (d.path / STATE_FILE).write_text("{")
    assert d.load()[0] is None
    d.save(full_state())
    assert (d.path / STATE_FILE).stat().st_mode & 0o777 == 0o640


@pytest.mark.parametrize(
    "field, value",
    [
        ("since", "yesterday"),
        ("verdict", 5),
        ("nodes", ["node1", 2]),
        ("hang_actions", "1"),
        ("hang_acted", 1),
        ("updated", None),
        ("message", None),
        ("fingerprint", 7),
        ("incident", 3),
        ("probed_ticks", 1.5),
        ("pending", [{"event": {"verdict": "hung"}}]),  # no channels
        ("pending", [{"event": "hung", "channels": ["url"]}]),
        ("pending", [{"event": {"verdict": "hung"}, "channels": "url"}]),
    ],
)
def test_a_state_with_a_field_of_the_wrong_type_is_moved_aside_not_a_crash_later(tmp_path, field, value):
    data = {**full_state().to_json(), field: value}
    (tmp_path / STATE_FILE).write_text(json.dumps(data))
    state, note = StateDir(tmp_path).load()
    assert state is None and "moved to state.json.corrupt-" in note and field in note


def test_a_full_disk_keeps_the_last_state_and_leaves_no_temporary(tmp_path, monkeypatch):
    import errno

    d = StateDir(tmp_path)
    d.lock()
    d.save(full_state())

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    newer = full_state()
    newer.verdict = "crashed"
    with pytest.raises(OSError, match="No space left"):
        d.save(newer)
    monkeypatch.undo()
    assert d.load()[0].verdict == "hung"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alerts.log", "lock", "state.json"]


# ---- incident records --------------------------------------------------------------------------------


def big_tick(k: int, nodes: int, tail: int = 64 * 1024) -> dict:
    """A tick record as incident.tick_record makes it for `nodes` 8-GPU nodes: ~3 KB of numbers and a
    raw output with a full 64 KiB log tail per node."""
    gpus = [
        {
            "index": i,
            "util_pct": 100.0,
            "power_w": 612.45,
            "power_limit_w": 700.0,
            "mem_used_mib": 71234.0,
            "mem_total_mib": 81559.0,
        }
        for i in range(8)
    ]
    procs = [
        {
            "pid": 48212 + i,
            "state": "Rl",
            "elapsed_s": 3724,
            "args": f"/usr/bin/python3 -u train.py --job.config_file llama3_8b.toml --rank {i}",
        }
        for i in range(9)
    ]
    entry = {
        "failure": "",
        "outcome": "exited",
        "exit_code": 0,
        "seconds": 0.2,
        "detail": "",
        "sample": {"clock": 1.0, "gpus": gpus, "processes": procs, "log_size": 1843922},
        "progress": {"step": k, "throughput": 5400.0, "rank_seconds": {str(r): 0.13 for r in range(8)}},
        "raw": {"stdout": "@@nodecheck begin log_tail\n" + "x" * tail, "stderr": ""},
    }
    return {
        "at": f"2026-01-01T00:{k // 60:02d}:{k % 60:02d}.000Z",
        "at_epoch": 1767225600.0 + k,
        "job_state": None,
        "nodes": {f"node{n:03d}": {**entry, "raw": dict(entry["raw"])} for n in range(nodes)},
    }


def test_the_ticks_kept_for_an_incident_are_bounded_in_bytes_newest_first():
    from nodecheck.watch.incident import RAW_BYTES, RAW_TICKS, SAMPLES_BYTES, TickHistory

    history = TickHistory(240)
    for k in range(240):  # 64 nodes x 240 ticks: ~95 MiB of samples.jsonl unbounded
        history.add(big_tick(k, 64))
    ticks = list(history)
    lines = [json.dumps(t) for t in ticks]
    with_raw = [t for t in ticks if all("raw" in e for e in t["nodes"].values())]
    assert with_raw and with_raw[-1] is ticks[-1]  # the newest tick's raw output, always
    assert all(all("raw" not in e and e["raw_dropped"] for e in t["nodes"].values()) for t in ticks[: -len(with_raw)])
    raw = sum(len(e["raw"]["stdout"]) for t in with_raw[:-1] for e in t["nodes"].values())
    assert raw <= RAW_BYTES and len(with_raw) <= RAW_TICKS
    assert sum(map(len, lines)) <= SAMPLES_BYTES + RAW_BYTES + 64 * (64 * 1024 + 200)
    # the oldest go first, the ticks kept are the newest and follow each other; how many went is told
    assert [t["nodes"]["node000"]["progress"]["step"] for t in ticks] == list(range(240 - len(ticks), 240))
    assert history.dropped == 240 - len(ticks) > 0
    # a small job keeps every tick, raw output on the last RAW_TICKS
    small = TickHistory(240)
    for k in range(240):
        small.add(big_tick(k, 2))
    assert len(small) == 240 and small.dropped == 0
    assert sum("raw" in t["nodes"]["node000"] for t in small) == RAW_TICKS


def incident(tmp_path, at=1_767_225_600.0, verdict="hung"):
    from nodecheck.watch.incident import write_incident
    from nodecheck.watch.verdicts import Assessment

    a = Assessment(verdict, f"{verdict}: no step since 3854", ("node001",), (3,), at - 60, {"step": 3854})
    event = {"job": "1234", "previous": "progressing", "at": "2026-01-01T00:00:00Z", "verdict": verdict}
    return write_incident(tmp_path, event=event, assessment=a, ticks=[big_tick(0, 2, tail=10)], job_key="1234", at=at)


def test_incident_records_are_complete_unique_and_not_readable_by_others(tmp_path, umask0):
    first, second = incident(tmp_path), incident(tmp_path)  # the same second, the same verdict
    assert (first.name, second.name) == ("20260101T000000Z_watch_1234_hung", "20260101T000000Z_watch_1234_hung-2")
    assert sorted(p.name for p in tmp_path.iterdir()) == [first.name, second.name]  # no temporary left
    modes = {p.name: p.stat().st_mode & 0o777 for p in [first, *first.iterdir()]}
    assert modes == {first.name: 0o750, "incident.json": 0o640, "samples.jsonl": 0o640, "summary.txt": 0o640}
    doc = json.loads((first / "incident.json").read_text())
    assert doc["samples"] == {
        "ticks": 1,
        "first": "2026-01-01T00:00:00.000Z",
        "last": "2026-01-01T00:00:00.000Z",
        "raw_ticks": 1,
        "dropped_for_size": 0,
    }
