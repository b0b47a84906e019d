"""`nodecheck report show DIR` on a planted report directory (issue 32, 1.9): DIR is untrusted input
read by root. A report.json of tiny nested lists (150 MB cost 3.8 GiB and 24 s) is refused before it
is parsed, in little memory; and text in it that would drive the terminal (ESC/OSC sequences, bidi
overrides) is printed escaped, as a live run prints it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from nodecheck.core.model import Status
from nodecheck.report import json as report_json
from nodecheck.report import table
from nodecheck.report.store import store
from tests.report.test_report import result, sample

ROOT = Path(__file__).resolve().parents[2]

# the child's peak memory, measured in a fresh process so that no earlier child of the test run counts
PEAK = r"""
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
print(done.returncode)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)  # KiB
sys.stderr.write(done.stderr[-2000:])
"""


def test_a_report_json_of_tiny_nested_lists_is_refused_unparsed_in_little_memory(tmp_path):
    directory = tmp_path / "planted"
    directory.mkdir()
    body = b"[]," * 12_000_000  # 36 MB: 12 million lists once parsed (~1 GB)
    (directory / "report.json").write_bytes(b'{"report_version": 3, "nodes": [' + body + b"[]]}")
    done = subprocess.run(
        [sys.executable, "-c", PEAK, sys.executable, "-m", "nodecheck", "report", "show", str(directory)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    code, peak_kib = (int(x) for x in done.stdout.split())
    assert code == 64, done.stderr
    assert "report.json" in done.stderr and "not a nodecheck report" in done.stderr, done.stderr
    assert peak_kib < 250 * 1024, f"peak {peak_kib / 1024:.0f} MiB"


def test_terminal_control_sequences_in_a_stored_report_are_printed_escaped(tmp_path, capsys):
    from nodecheck.cli import main

    hostile = "mlx5_3/1: Down \x1b]0;pwned\x07\x1b[2J\u202eevil\x9b31m"
    report = sample()
    report = report.__class__(**{**report.__dict__, "results": (result("gpu005", Status.FAIL, hostile),)})
    where = store(report_json.redacted(report), "", tmp_path / "reports")
    assert "\x1b" in (where / "report.json").read_text(encoding="utf-8") or "\\u001b" in (
        where / "report.json"
    ).read_text(encoding="utf-8")
    code = main(["report", "show", str(where)])
    out = capsys.readouterr().out
    assert code == 2
    for raw in ("\x1b", "\x07", "\u202e", "\x9b"):
        assert raw not in out, repr(raw)
    assert "\\x1b]0;pwned\\x07\\x1b[2J\\u202eevil\\x9b31m" in out
    assert table.render(report).count("\n") == out.count("\n")


def test_a_real_report_is_still_shown(tmp_path, capsys):
    from nodecheck.cli import main

    where = store(report_json.redacted(sample()), "", tmp_path / "reports")
    assert main(["report", "show", str(where)]) == 2
    assert "mlx5_3/1: Down/Polling" in capsys.readouterr().out
    assert json.loads((where / "report.json").read_text())["report_version"] >= 3
