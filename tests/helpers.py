"""Test helpers: read the copied corpus under tests/data and build the captures a judge receives."""

from __future__ import annotations

import selectors
import subprocess
import time
from pathlib import Path

from nodecheck.core.model import Capture, Outcome, Probe
from nodecheck.core.progress import NULL_PROGRESS
from nodecheck.parsers.slurm import reason_mark

DATA = Path(__file__).parent / "data"


def data(path: str) -> str:
    """A file under tests/data, exactly as stored ("ibstat/x.txt"); no newline translation."""
    with open(DATA / path, encoding="utf-8", newline="") as f:
        return f.read()


def data_files(tool: str) -> list[str]:
    """Every file under tests/data/<tool>, as paths relative to tests/data, sorted."""
    return sorted(f"{tool}/{p.name}" for p in (DATA / tool).iterdir() if p.is_file())


def captures(probe: Probe, stdout: str, exit_code: int = 0, node: str = "node001") -> dict[str, Capture]:
    """What the runner hands a judge after `probe` ran to completion on `node`."""
    capture = Capture(
        node=node,
        probe=probe.name,
        argv=probe.argv,
        outcome=Outcome.EXITED,
        exit_code=exit_code,
        stdout=stdout,
        stderr="",
        duration_s=0.0,
    )
    return {probe.name: capture}


def marked_reason(body: str, token: str = "") -> str:
    """The drain reason nodecheck writes for this body: its ownership mark, then the text."""
    return f"nodecheck[{reason_mark(body, token)}]: {body}"


class SerialActiveContext:
    """The parts of an ActiveContext (nodecheck.checks.context) that a unit test of an active check
    rarely varies: steps run one after the other, no stop, the report data kept, undone work listed.
    A test's context sets nodes/captures/order and defines run() (and left() where the deadline matters)."""

    check = ""
    allow_disruptive = False
    parallel = 4
    progress = NULL_PROGRESS

    def __init__(self) -> None:
        self.data = None
        self.undone: list[str] = []

    def left(self) -> float:
        return 600.0

    def stopped(self) -> bool:
        return False

    def each(self, items, step, *, workers=None) -> list:
        return [step(i) for i in items]

    def report(self, data) -> None:
        self.data = data

    def incomplete(self, why: str) -> None:
        self.undone.append(why)


def read_until(proc: subprocess.Popen, needle: str, timeout: float) -> list[str]:
    """stdout lines of a running process (a watcher) until one contains `needle`, that line last; waits on
    the output, not on a number of ticks (a loaded machine's tick may take longer than its interval)."""
    lines, deadline = [], time.monotonic() + timeout
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    while time.monotonic() < deadline:
        if sel.select(timeout=0.2):
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line.rstrip("\n"))
            if needle in line:
                return lines
    raise AssertionError(
        f"no {needle!r} within {timeout} s: {lines}; stderr: {proc.stderr.read() if proc.poll() is not None else ''}"
    )
