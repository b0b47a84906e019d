"""`nodecheck forensics --dumps DIR` (the real CLI, as a subprocess) on a directory of hostile dumps next
to good ones (issue 17, finding 4): each hostile dump is that dump's error in the record, the good ones
still give the verdict, a record is written, nothing crashes or stalls; and a dump that did not parse
is not copied into the record (finding 1). Every hostile dump is CONSTRUCTED here."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

from tests.helpers import DATA

HEAD = b"\x80\x02}q\x00(X\x07\x00\x00\x00versionX\x04\x00\x00\x002.10X\x07\x00\x00\x00entries"
KEY = 2**61 - 1


def hostile() -> dict[str, bytes]:
    n = 100_000
    big = b"X" + struct.pack("<I", 2**20) + b"a" * 2**20 + b"q\x01"
    keys = b"".join(
        b"\x8a" + bytes([len(b)]) + b + b"N"
        for b in (
            (k * KEY).to_bytes(((k * KEY).bit_length() + 8) // 8, "little", signed=True) for k in range(1, 80_001)
        )
    )
    return {
        "deep": HEAD + b"]" * n + b"a" * (n - 1) + b"u.",
        "memo": b"\x80\x02Nr" + struct.pack("<I", 100_000_000) + b".",
        "refs": HEAD + b"](" + big + b"h\x01" * 4999 + b"eu.",
        "keys": HEAD + b"]" + keys + b"u.",
        "deep-json": b'{"version": "2.10", "entries": ' + b"[" * 200_000 + b"]" * 200_000 + b"}",
    }


def test_hostile_dumps_are_each_an_error_and_the_record_is_written(tmp_path):
    dumps = tmp_path / "dumps"
    (dumps / "gpu-a07").mkdir(parents=True)
    for f in (DATA / "flight-recorder" / "mismatched").glob("nccl_trace_rank_*"):
        shutil.copyfile(f, dumps / "gpu-a07" / f.name)
    for name, data in hostile().items():
        (dumps / f"evil-{name}").write_bytes(data)
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "nodecheck",
            "forensics",
            "--dumps",
            str(dumps),
            "--output-dir",
            str(tmp_path / "reports"),
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert time.monotonic() - started < 60
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    doc = json.loads(done.stdout)
    assert doc["diagnosis"]["class"] == "mismatched collectives" and doc["diagnosis"]["culprit_ranks"] == [3]
    errors = {Path(d["path"]).name: d["error"] for d in doc["dumps"] if not d["read"]}
    where = str(dumps)
    assert errors == {
        "evil-deep": f"unreadable: {where}/evil-deep: refused: nested more than 32 deep",
        "evil-memo": f"unreadable: {where}/evil-memo: refused: LONG_BINPUT stores memo index 100000000, beyond the "
        "0 values stored before it",
        "evil-refs": f"unreadable: {where}/evil-refs: refused: expands past 268435456 bytes (a value used again "
        "through the memo counts each time)",
        "evil-keys": f"unreadable: {where}/evil-keys: refused: a dict key is a number, not a string",
        "evil-deep-json": f"unreadable: {where}/evil-deep-json: not readable JSON (RecursionError: maximum recursion "
        "depth exceeded while decoding a JSON array from a unicode string)",
    }
    record = Path(doc["record"])
    kept = sorted(p.name for p in (record / "dumps").rglob("*") if p.is_file())
    assert len(kept) == 8 and not any("evil" in k for k in kept)  # bytes that did not parse: not copied
    assert all(
        d["not_kept"] == "its bytes are not kept: they did not parse as a flight-recorder dump"
        for d in doc["dumps"]
        if not d["read"]
    )
