"""Stopping a command early: SIGTERM or a first Ctrl-C sets an Event the command's run watches."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from nodecheck.core.model import Cut
from nodecheck.transport.fanout import why_cut

# The words a command says when a stop request ended it: the runner's own (a report's incomplete_reason).
STOPPED = why_cut(Cut.SIGNAL)  # "stopped by a signal"


@contextmanager
def stop_on_signals() -> Iterator[threading.Event]:
    """SIGTERM (Slurm, systemd, timeout(1)) or a first Ctrl-C ends the run early and the partial
    report is still written; a second signal acts as usual."""
    stop = threading.Event()
    signals = (signal.SIGTERM, signal.SIGINT)

    def handler(signum, frame):
        stop.set()
        for s in signals:
            signal.signal(s, previous[s])

    previous = {s: signal.signal(s, handler) for s in signals}
    try:
        yield stop
    finally:
        for s in signals:
            signal.signal(s, previous[s])
