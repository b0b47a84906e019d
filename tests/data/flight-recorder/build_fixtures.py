"""Build the hand-made flight-recorder fixtures (run by hand: python3 build_fixtures.py).

The recorded gloo dumps (record.py) cannot show NCCL's states ("started"/"completed"), p2p
entries, reduce_scatter, wrapped ring buffers of 2000 entries or older schema versions, so
these are written to the documented schema (FlightRecorder.hpp keys, the docs' example dump) as
plain dicts: pickle protocol 2 (what torch's C++ pickler writes) and JSON the way dump_json
writes it (no frames, absent timestamps as 0, pg_status values as strings). Deterministic: same
bytes on every run. Also writes the hostile and broken files under bad/.
"""

from __future__ import annotations

import json
import pickle
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
PREFIX = "nccl_trace_rank_"
T0 = 1_760_000_000_000_000_000
FRAME = [
    {"name": "train_step", "filename": "/opt/job/train.py", "line": 211},
    {"name": "<module>", "filename": "/opt/job/train.py", "line": 340},
]


def entry(
    version: str,
    rid: int,
    seq: int,
    name: str,
    state: str,
    insz,
    outsz,
    *,
    pg=("0", "default_pg"),
    pg_id=0,
    p2p_seq=0,
    is_p2p=False,
    dtype="Float",
) -> dict:
    done = state == "completed"
    e = {
        "record_id": rid,
        "pg_id": pg_id,
        "process_group": pg,
        "collective_seq_id": seq,
        "p2p_seq_id": p2p_seq,
        "op_id": rid + 1,
        "profiling_name": name,
        "time_created_ns": T0 + rid * 1_000_000,
        "input_sizes": insz,
        "input_dtypes": [dtype] * len(insz),
        "output_sizes": outsz,
        "output_dtypes": [dtype] * len(outsz),
        "state": state,
        "time_discovered_started_ns": None if state == "scheduled" else T0 + rid * 1_000_000 + 10_000,
        "time_discovered_completed_ns": T0 + rid * 1_000_000 + 90_000 if done else None,
        "retired": done,
        "timeout_ms": 600000,
        "is_p2p": is_p2p,
        "frames": FRAME,
    }
    if version == "2.2":  # the minimal 2.x entry: no is_p2p, no retired, no time_discovered_*
        for k in ("is_p2p", "retired", "time_discovered_started_ns", "time_discovered_completed_ns"):
            del e[k]
    if version == "2.10":
        e.update(thread_id="140201", thread_name="pt_main_thread")
    return e


def dump(version: str, entries: list, ranks: list, *, status: dict | None, groups: dict | None = None) -> dict:
    groups = groups or {"0": {"name": "0", "desc": "default_pg", "ranks": str(ranks)}}
    d = {"version": version, "pg_config": groups, "entries": entries}
    if status is not None:
        d["pg_status"] = status
    if version == "2.10":
        d["comm_lib_version"] = "2.26.2"
    return d


def status(enq: int, started: int, completed: int) -> dict:
    return {"last_enqueued_collective": enq, "last_started_collective": started, "last_completed_collective": completed}


def as_json(d: dict) -> bytes:
    j = json.loads(json.dumps(d))
    for e in j["entries"]:
        e.pop("frames", None)
        for k in ("time_discovered_started_ns", "time_discovered_completed_ns"):
            if k in e and e[k] is None:
                e[k] = 0
    for s in j.get("pg_status", {}).values():
        for k in s:
            s[k] = str(s[k])
    if not j["entries"]:
        del j["entries"]
    return json.dumps(j, separators=(",", ":"), sort_keys=True).encode()


def write(scenario: str, rank: int, d: dict) -> None:
    for sub, blob in (("", pickle.dumps(d, protocol=2)), ("json", as_json(d))):
        target = HERE / scenario / sub / f"{PREFIX}{rank}"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(blob)


def mismatched_24() -> None:
    """16 ranks, ring buffer holding the last 5; seq 3851: rank 3 in all_reduce [1], the rest in
    reduce_scatter [2048x4096] (the epoch-end deadlock)."""
    ranks = list(range(16))
    for r in ranks:
        es = [
            entry("2.4", 9000 + i, 3847 + i, "nccl:reduce_scatter", "completed", [[2048, 4096]], [[128, 4096]])
            for i in range(4)
        ]
        if r == 3:
            es.append(entry("2.4", 9004, 3851, "nccl:all_reduce", "started", [[1]], [[1]]))
        else:
            es.append(entry("2.4", 9004, 3851, "nccl:reduce_scatter", "started", [[2048, 4096]], [[128, 4096]]))
        write("built-2.4-mismatched", r, dump("2.4", es, ranks, status={"0": status(3851, 3851, 3850)}))


def missing_22() -> None:
    """4 ranks, 2.2-style minimal dump without pg_status: rank 2 never joined seq 42."""
    ranks = [0, 1, 2, 3]
    for r in ranks:
        es = [entry("2.2", 40 + i, 40 + i, "nccl:all_reduce", "completed", [[1024]], [[1024]]) for i in range(2)]
        if r != 2:
            es.append(entry("2.2", 42, 42, "nccl:all_reduce", "started", [[1024]], [[1024]]))
        write("built-2.2-missing-rank", r, dump("2.2", es, ranks, status=None))


def sizes_210() -> None:
    """4 ranks, seq 7: rank 1 all_reduce [32x32], the others all_reduce [64x32]."""
    ranks = [0, 1, 2, 3]
    for r in ranks:
        es = [entry("2.10", i, i + 1, "nccl:all_reduce", "completed", [[64, 32]], [[64, 32]]) for i in range(6)]
        shape = [[32, 32]] if r == 1 else [[64, 32]]
        es.append(entry("2.10", 6, 7, "nccl:all_reduce", "started", shape, shape))
        write("built-2.10-mismatched-sizes", r, dump("2.10", es, ranks, status={"0": status(7, 7, 6)}))


def ahead_p2p_210() -> None:
    """4 ranks, two groups. pg 0: ranks 0-2 completed seq 10 and are in seq 11; rank 3 is still in
    seq 10. pg 1 ("pp", ranks 0,1): collective seq 3 completed, then a send/recv pair pending whose
    entries carry collective_seq_id 3 too (NCCL stamps p2p ops with the current collective seq)."""
    ranks = [0, 1, 2, 3]
    groups = {
        "0": {"name": "0", "desc": "default_pg", "ranks": str(ranks)},
        "1": {"name": "1", "desc": "pp", "ranks": "[0, 1]"},
    }
    for r in ranks:
        es = [entry("2.10", 100 + i, 8 + i, "nccl:all_reduce", "completed", [[4096]], [[4096]]) for i in range(2)]
        if r == 3:
            es.append(entry("2.10", 102, 10, "nccl:all_reduce", "started", [[4096]], [[4096]]))
            st = {"0": status(10, 10, 9)}
        else:
            es.append(entry("2.10", 102, 10, "nccl:all_reduce", "completed", [[4096]], [[4096]]))
            es.append(entry("2.10", 103, 11, "nccl:all_reduce", "started", [[4096]], [[4096]]))
            st = {"0": status(11, 11, 10)}
        if r in (0, 1):
            pp = ("1", "pp")
            es.append(entry("2.10", 104, 3, "nccl:all_reduce", "completed", [[16]], [[16]], pg=pp, pg_id=1))
            op = "nccl:send 0->1" if r == 0 else "nccl:recv 1<-0"
            es.append(
                entry("2.10", 105, 3, op, "started", [[8, 16]], [[8, 16]], pg=pp, pg_id=1, p2p_seq=5, is_p2p=True)
            )
            st["1"] = status(3, 3, 3)
        write("built-2.10-ahead-p2p", r, dump("2.10", es, ranks, status=st, groups=groups))


def odd() -> None:
    """A newer, unknown version with keys this parser has never seen: must still parse."""
    d = dump(
        "2.10",
        [entry("2.10", 0, 1, "xccl:all_reduce", "completed", [[8]], [[8]])],
        [0, 1],
        status={"0": status(1, 1, 1)},
    )
    d["version"] = "3.1"
    d["future_top_level"] = {"x": 1}
    d["entries"][0]["future_entry_key"] = [1, 2]
    target = HERE / "odd" / f"{PREFIX}1"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(as_json(d))


def bad() -> None:
    out = HERE / "bad"
    out.mkdir(exist_ok=True)
    # protocol 0: GLOBAL os.system, then REDUCE with the command; the unpickler must never call it
    (out / "malicious-os-system.pkl").write_bytes(b"cos\nsystem\n(S'touch /tmp/nodecheck-fr-pwned-os-system'\ntR.")
    # protocol 4: STACK_GLOBAL builtins.eval, then REDUCE
    code = b"open('/tmp/nodecheck-fr-pwned-eval', 'w')"
    (out / "malicious-builtins-eval.pkl").write_bytes(
        b"\x80\x04\x8c\x08builtins\x8c\x04eval\x93\x8c" + bytes([len(code)]) + code + b"\x85R."
    )
    real = (HERE / "missing-rank" / f"{PREFIX}0").read_bytes()
    (out / "truncated.pkl").write_bytes(real[: len(real) * 6 // 10])
    (out / "list.pkl").write_bytes(pickle.dumps([1, 2, 3], protocol=2))
    (out / "garbage.bin").write_bytes(random.Random(7).randbytes(512))
    good = dump(
        "2.10",
        [entry("2.10", i, i + 1, "nccl:all_reduce", "completed", [[8]], [[8]]) for i in range(3)],
        [0, 1],
        status={"0": status(3, 3, 3)},
    )
    good["entries"][1]["collective_seq_id"] = "two"
    (out / "wrong-type-entry.json").write_bytes(as_json(good))
    (out / "no-version.pkl").write_bytes(pickle.dumps({"entries": [], "pg_config": {}}, protocol=2))
    (out / "no-entries.pkl").write_bytes(pickle.dumps({"version": "2.10", "pg_config": {}}, protocol=2))


if __name__ == "__main__":
    mismatched_24()
    missing_22()
    sizes_210()
    ahead_p2p_210()
    odd()
    bad()
