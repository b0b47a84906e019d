"""Stopping a command early: SIGTERM, SIGHUP or a first Ctrl-C sets an Event the command's run watches.

Whatever way the command ends, nothing it started on this machine keeps running: when the command
returns (its partial report written) the process groups still running are ended, TERM then KILL
(transport.children); a second signal ends them at once and then acts as it usually does."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from nodecheck.core.model import Cut
from nodecheck.transport import children
from nodecheck.transport.fanout import why_cut

# The words a command says when a stop request ended it: the runner's own (a report's incomplete_reason).
STOPPED = why_cut(Cut.SIGNAL)  # "stopped by a signal"
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)  # Slurm/systemd/timeout(1), Ctrl-C, a closed terminal


@contextmanager
def stop_on_signals() -> Iterator[threading.Event]:
    """SIGTERM, SIGHUP or a first Ctrl-C ends the run early and the partial report is still written;
    a second signal ends every child process group, then acts as usual (Ctrl-C: KeyboardInterrupt;
    SIGTERM/SIGHUP: the process dies of it)."""
    stop = threading.Event()

    def handler(signum, frame):
        if not stop.is_set():
            stop.set()
            return
        children.end_all()
        for s in caught:
            signal.signal(s, previous[s])
        os.kill(os.getpid(), signum)  # now with the usual action

    # a signal someone chose to ignore (nohup: SIGHUP) stays ignored
    caught = [s for s in STOP_SIGNALS if signal.getsignal(s) is not signal.SIG_IGN]
    previous = {s: signal.signal(s, handler) for s in caught}
    children.guard()  # watching before the first probe starts: SIGKILL may come at any moment
    try:
        yield stop
    finally:
        for s in caught:
            signal.signal(s, previous[s])
        children.end_all()
