"""The progress line on a terminal (nodecheck/app/progress_view.py): what it says for a state, that it
fits the terminal, that a real run under a pseudo-terminal shows it and then prints its table intact,
and that a pipe, JSON output and the Prolog/health gates never get it."""

from __future__ import annotations

import ast
import errno
import fcntl
import io
import os
import select
import struct
import subprocess
import sys
import termios
import time
from argparse import Namespace
from pathlib import Path

from nodecheck.app.progress_view import ERASE, TerminalView, age, render, terminal_progress, wanted
from nodecheck.core.progress import NULL_PROGRESS, Out, State, Tracker

ROOT = Path(__file__).resolve().parents[2]
# a custom check that takes 2 s on this machine: long enough for the line to be drawn a few times
SLOW_BOOK = """\
version: 1
deadline_s: 60
checks:
  command.slow:
    sh: sleep 2; echo ok
    shell: true
    match: ok
    timeout_s: 20
"""


def state(**kw) -> State:
    base = dict(
        step=2, steps=5, phase="ib.pairs", sub="round 1 of 2", done=14, total=16, unit="node", out=(), elapsed_s=3.0
    )
    return State(**{**base, **kw})


def test_the_line_says_the_phase_the_counts_and_the_oldest_items_out_with_their_ages():
    line = render(state(out=(Out("node7", 41.2), Out("node9", 41.0))), 120)
    assert line == "[2/5 ib.pairs: round 1 of 2] 14/16 nodes · out: node7 (41 s), node9 (41 s)"


def test_more_items_out_than_shown_are_counted_and_a_phase_with_none_out_shows_its_time():
    out = tuple(Out(f"node{i}", 200.0 - i) for i in range(5))
    assert render(state(sub="", out=out), 200) == (
        "[2/5 ib.pairs] 14/16 nodes · out: node0 (3 min), node1 (3 min), node2 (3 min) +2 more"
    )
    assert render(state(steps=0, sub="", total=0, elapsed_s=7.9), 80) == "[ib.pairs] · 7 s"
    assert render(state(phase="", sub=""), 80) == ""  # nothing begun: nothing drawn


def test_one_item_is_singular_and_ages_grow_coarser():
    assert render(state(steps=1, step=1, phase="probes", sub="", done=0, total=1), 80) == "[1/1 probes] 0/1 node · 3 s"
    assert [age(s) for s in (0, 119.9, 120, 7199, 7200, 7500)] == [
        "0 s",
        "119 s",
        "2 min",
        "119 min",
        "2 h 0 min",
        "2 h 5 min",
    ]


def test_the_line_fits_the_terminal_and_says_it_was_cut():
    out = tuple(Out(f"gpu{i:04d}.a-very-long-domain.example", 10.0) for i in range(3))
    line = render(state(out=out), 60)
    assert len(line) == 59 and line.endswith("…") and line.startswith("[2/5 ib.pairs: round 1 of 2] 14/16")
    assert render(state(out=out), 60, ascii_only=True).endswith("...")


def test_a_node_name_cannot_move_the_cursor_or_clear_the_screen():
    line = render(state(out=(Out("evil\x1b[2J\rname", 1.0),)), 120)
    assert "\x1b" not in line and "\r" not in line and "evil?[2J?name (1 s)" in line


def test_a_terminal_without_unicode_gets_plain_ascii():
    line = render(state(out=(Out("nöde1", 1.0),)), 120, ascii_only=True)
    assert line == "[2/5 ib.pairs: round 1 of 2] 14/16 nodes - out: n?de1 (1 s)" and line.isascii()


class Tty(io.StringIO):
    encoding = "utf-8"


def test_the_view_draws_in_place_only_when_the_line_changed_and_erases_itself_at_the_end():
    tracker = Tracker(lambda: 0.0)  # a clock that stands still: ages do not change the line
    stream = Tty()
    view = TerminalView(tracker, stream)
    tracker.steps(1)
    tracker.phase("probes", 2)
    view.draw()
    view.draw()  # the same line: not drawn again
    tracker.started("n1")
    view.draw()
    view.stop()  # (never started: stop draws the last state once and erases it)
    assert stream.getvalue() == (
        f"{ERASE}[1/1 probes] 0/2 nodes · 0 s{ERASE}[1/1 probes] 0/2 nodes · out: n1 (0 s){ERASE}"
    )


def test_progress_is_wanted_for_the_table_on_a_terminal_only(monkeypatch):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    assert wanted(Namespace(format="table")) and not wanted(Namespace(format="json"))
    assert not wanted(Namespace(format="junit"))
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    assert not wanted(Namespace(format="table"))
    with terminal_progress(False) as progress:
        assert progress is NULL_PROGRESS


def test_the_prolog_and_health_gates_never_ask_for_a_progress_view():
    """Every run_gated call in the gate's own commands leaves `progress` out (NULL_PROGRESS), and the
    gate never imports the view: a Prolog's output is Slurm's log, not a person's terminal."""
    source = (ROOT / "nodecheck" / "gate" / "command.py").read_text()
    tree = ast.parse(source)
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "run_gated"
    ]
    assert len(calls) >= 3  # the node prolog, the controller prolog, health
    assert all("progress" not in {k.arg for k in call.keywords} for call in calls)
    assert "progress_view" not in source


def _run_on_a_pty(args: list[str], cwd: Path) -> bytes:
    """`nodecheck ARGS` with stdout and stderr on one pseudo-terminal 120 columns wide; all it wrote."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "nodecheck", *args],
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
        cwd=cwd,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
    )
    os.close(slave)
    chunks: list[bytes] = []
    end = time.monotonic() + 30
    try:
        while time.monotonic() < end:
            ready, _, _ = select.select([master], [], [], 0.5)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError as e:  # EIO: the child closed its side
                if e.errno != errno.EIO:
                    raise
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(master)
        proc.wait(timeout=30)
    assert proc.returncode == 0, b"".join(chunks).decode(errors="replace")
    return b"".join(chunks)


def test_a_run_on_a_terminal_shows_the_progress_line_then_its_table_intact(tmp_path):
    book = tmp_path / "slow.yml"
    book.write_text(SLOW_BOOK)
    out = _run_on_a_pty(["run", "--local", "--playbook", str(book), "--output-dir", str(tmp_path / "r")], tmp_path)
    text = out.decode().replace("\r\n", "\n")
    assert "[1/1 probes] 0/1 node · out: " in text  # the node out, with its age
    assert "[1/1 probes] 1/1 node" in text  # and back
    table = text.split(ERASE)[-1]  # after the line was erased: the table, nothing else
    assert table.startswith("nodecheck ") and "\r" not in table and "\x1b" not in table
    lines = table.splitlines()
    assert any(ln.split()[1:3] == ["pass", "command.slow"] for ln in lines if len(ln.split()) >= 3)
    assert "1 node: 1 pass. Status PASS (exit 0)." in lines and lines[-1].startswith("report: ")


def test_a_run_whose_stderr_is_a_pipe_or_whose_format_is_json_writes_no_progress(tmp_path):
    book = tmp_path / "slow.yml"
    book.write_text(SLOW_BOOK)
    piped = subprocess.run(
        [
            sys.executable,
            "-m",
            "nodecheck",
            "run",
            "--local",
            "--playbook",
            str(book),
            "--output-dir",
            str(tmp_path / "r"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert piped.returncode == 0, piped.stderr
    assert "\r" not in piped.stderr and "\x1b" not in piped.stderr and "probes]" not in piped.stderr
    assert "command.slow" in piped.stdout
    json_out = _run_on_a_pty(
        ["run", "--local", "--playbook", str(book), "--format", "json", "--output-dir", str(tmp_path / "j")], tmp_path
    )
    assert b"probes]" not in json_out and b"\x1b[K" not in json_out
