"""Test helpers: read the copied corpus under tests/data and build the captures a judge receives."""

from __future__ import annotations

import selectors
import subprocess
import threading
import time
from collections.abc import Callable
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
    on_this_host = False
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


def wait_until(ready: Callable[[], object], timeout: float, what: str = "the condition") -> None:
    """Poll `ready()` until it is true: a test waits on state, never a fixed sleep; AssertionError after
    `timeout` s (an upper bound only: a loaded machine gets there later, a quiet one at once)."""
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:g} s")
        time.sleep(0.02)


class Streamed:
    """A started process whose stdout and stderr are read as they come (a thread each), so a test waits
    on what it printed (until), not on a number of seconds or ticks; stop() ends it with SIGTERM."""

    def __init__(self, argv: list[str], **popen) -> None:
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)
        self.lines: list[str] = []
        self.errors: list[str] = []
        self._matched = 0  # lines before this index were passed by an earlier until()
        self._changed = threading.Condition()
        self._readers = [
            threading.Thread(target=self._read, args=(stream, into), daemon=True)
            for stream, into in ((self.proc.stdout, self.lines), (self.proc.stderr, self.errors))
        ]
        for reader in self._readers:
            reader.start()

    def _read(self, stream, into: list[str]) -> None:
        for line in stream:
            with self._changed:
                into.append(line.rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    @property
    def stderr(self) -> str:
        return "\n".join(self.errors)

    def until(self, needle: str, timeout: float) -> str:
        """The first line after the last one until() returned that contains `needle`."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for i in range(self._matched, len(self.lines)):
                    if needle in self.lines[i]:
                        self._matched = i + 1
                        return self.lines[i]
                left = deadline - time.monotonic()
                ended = not self._readers[0].is_alive()
                if ended or left <= 0:
                    why = f"it exited {self.proc.poll()}" if ended else f"not within {timeout:g} s"
                    raise AssertionError(f"no {needle!r} ({why}): {self.lines}; stderr: {self.stderr}")
                self._changed.wait(min(left, 0.5))

    def finish(self, timeout: float) -> tuple[int, list[str], str]:
        """(exit code, stdout lines, stderr) once it has ended by itself; killed after `timeout` s."""
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"still running after {timeout:g} s: {self.lines}; stderr: {self.stderr}") from None
        for reader in self._readers:
            reader.join(timeout=10)
        return code, list(self.lines), self.stderr

    def stop(self, timeout: float = 60) -> tuple[int, list[str], str]:
        """SIGTERM (if it still runs), then finish()."""
        if self.proc.poll() is None:
            self.proc.terminate()
        return self.finish(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
