"""Progress a person can follow on a terminal: one line on stderr, redrawn in place.

    [2/5 ib.pairs: round 1 of 2] 14/16 pairs · out: node7+node9 (41 s), node3+node4 (41 s)

The phase (its number of the run's), items done of the total, and the oldest items still out with
their ages; redrawn at most 4 times a second, only when the line changed, and erased at the end so
the table that follows is clean. Shown only to a person: stderr a terminal and the table format
(`wanted`); the Prolog and health gates never ask for it. The model is nodecheck.core.progress.

Not a tqdm bar (what the first runs drew): a bar shows how much is done, and the line that helps a
person waiting on a fleet says what is still out and for how long; tqdm's bar_format does not fit
or sanitize a free-text postfix to the terminal, so the line is drawn here.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from nodecheck.core.progress import NULL_PROGRESS, RunProgress, State, Tracker

INTERVAL_S = 0.25  # at most 4 redraws a second
SHOWN_OUT = 3  # the oldest items still out that the line names
ERASE = "\r\x1b[K"  # back to the line's start, clear to its end
DEFAULT_WIDTH = 80


def wanted(args) -> bool:
    """A person is watching: the table format and stderr a terminal (json/junit keep stdout one
    document, and a pipe or a log gets no control characters)."""
    return getattr(args, "format", "table") == "table" and sys.stderr.isatty()


def age(seconds: float) -> str:
    """'41 s', '3 min', '2 h 5 min': the coarser the longer, so the line does not jitter."""
    s = int(seconds)
    if s < 120:
        return f"{s} s"
    if s < 7200:
        return f"{s // 60} min"
    return f"{s // 3600} h {s % 3600 // 60} min"


def render(state: State, width: int, ascii_only: bool = False) -> str:
    """The line for a state, at most width - 1 characters (the last column would wrap some terminals).
    `ascii_only`: for a terminal whose encoding has no "·" or "…" (LANG=C)."""
    dot, cut = (" - ", "...") if ascii_only else (" · ", "…")
    if not state.phase:
        return ""
    number = f"{state.step}/{state.steps} " if state.steps else ""
    sub = f": {state.sub}" if state.sub else ""
    line = f"[{number}{state.phase}{sub}]"
    if state.total:
        unit = state.unit if state.total == 1 else f"{state.unit}s"
        line += f" {min(state.done, state.total)}/{state.total} {unit}"
    if state.out:
        shown = ", ".join(f"{o.item} ({age(o.age_s)})" for o in state.out[:SHOWN_OUT])
        more = f" +{len(state.out) - SHOWN_OUT} more" if len(state.out) > SHOWN_OUT else ""
        line += f"{dot}out: {shown}{more}"
    else:
        line += f"{dot}{age(state.elapsed_s)}"
    # node names are not ours to trust: no control characters, and only what the terminal can show
    line = "".join(c if c.isprintable() and (c.isascii() or not ascii_only) else "?" for c in line)
    limit = max(len(cut), width - 1)
    return line if len(line) <= limit else line[: limit - len(cut)] + cut


def _width(stream: TextIO) -> int:
    """The terminal's columns; 80 where it does not say (a pseudo-terminal nobody sized reads 0)."""
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError, AttributeError):
        columns = 0
    return columns if columns > 0 else DEFAULT_WIDTH


def _shows_unicode(stream: TextIO) -> bool:
    try:
        "·…".encode(getattr(stream, "encoding", None) or "ascii")
    except (LookupError, UnicodeEncodeError):
        return False
    return True


class TerminalView:
    """A thread that redraws the tracker's line on `stream` until stopped, then erases it."""

    def __init__(self, tracker: Tracker, stream: TextIO, interval_s: float = INTERVAL_S) -> None:
        self.tracker, self.stream, self.interval_s = tracker, stream, interval_s
        self._stop = threading.Event()
        self._shown = ""
        self._thread = threading.Thread(target=self._loop, daemon=True, name="nodecheck-progress")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """The last state drawn once (a phase that ended between two redraws is seen ended), then erased."""
        self._stop.set()
        if self._thread.ident is not None:  # (started)
            self._thread.join(timeout=2 * self.interval_s + 1)
        try:
            self.draw()
            if self._shown:
                self._write(ERASE)
        except (OSError, ValueError):
            pass

    def draw(self) -> None:
        line = render(self.tracker.snapshot(), _width(self.stream), not _shows_unicode(self.stream))
        if line != self._shown:
            self._write(ERASE + line)
            self._shown = line

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.draw()
            except (OSError, ValueError):  # the terminal went away: the run goes on without a line
                return
            self._stop.wait(self.interval_s)

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()


@contextmanager
def terminal_progress(enabled: bool, stream: TextIO | None = None) -> Iterator[RunProgress]:
    """A Tracker drawn on `stream` (stderr) while the block runs, or NULL_PROGRESS when not enabled."""
    if not enabled:
        yield NULL_PROGRESS
        return
    tracker = Tracker()
    view = TerminalView(tracker, stream or sys.stderr)
    view.start()
    try:
        yield tracker
    finally:
        view.stop()
