"""Run a parser in a forked child under a wall-clock bound: a quadratic regex on a 10 MB line cannot
be interrupted in-process (the re engine does not check signals), and must not hang the suite.
The time reported is the child's CPU time, not wall time: a busy machine (a CI box shared with
other jobs) stretches wall time by however long the child waits for a core, never its CPU time."""

from __future__ import annotations

import multiprocessing
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nodecheck.core.errors import ParseError

_FORK = multiprocessing.get_context("fork")


@dataclass(frozen=True)
class Run:
    seconds: float | None  # CPU seconds, the fastest of the runs; None: over the wall-clock bound, killed
    error: str = ""  # an exception other than ParseError, with its traceback


def run_bounded(parse: Callable[[Any], Any], data: Any, limit_s: float, *, runs: int = 1, enough_s: float = 0.0) -> Run:
    """The fastest of up to `runs` parses of `data` (stopping once one takes <= enough_s), in a
    child killed after limit_s in all. ParseError is a normal end; any other exception is reported."""
    receive, send = _FORK.Pipe(duplex=False)

    def child() -> None:
        best, error = None, ""
        for _ in range(runs):
            start = time.process_time()
            try:
                parse(data)
            except ParseError:
                pass
            except BaseException as e:  # noqa: BLE001 (reported to the parent, with the trace)
                error = f"{type(e).__name__}: {str(e)[:300]}\n{traceback.format_exc()[-1500:]}"
            took = time.process_time() - start
            best = took if best is None else min(best, took)
            if error or best <= enough_s:
                break
        send.send((best, error))

    process = _FORK.Process(target=child, daemon=True)
    process.start()
    send.close()
    try:
        if receive.poll(limit_s):
            seconds, error = receive.recv()
            return Run(seconds, error)
        return Run(None)
    except EOFError:  # the child died (killed for memory, os._exit)
        process.join(5)
        return Run(None, f"the parser's process died (exit code {process.exitcode})")
    finally:
        if process.is_alive():
            process.kill()
        process.join()
        receive.close()
