"""A wall-clock step inside one nodecheck process (tests/faults/test_fault_run.py), as NTP or an
operator stepping the clock mid-run would make it: with NODECHECK_FAULT_CLOCK_STEP="TRIGGER:OFFSET_S"
in the environment and this directory on PYTHONPATH, time.time(), time.time_ns() and
datetime.now()/utcnow() jump by OFFSET_S seconds once the file TRIGGER exists; then TRIGGER.stepped
is created. The monotonic clock does not move, as a real step leaves CLOCK_MONOTONIC alone.

The step waits on state, not on a delay after start-up: a probe creates TRIGGER and waits for
TRIGGER.stepped, so the step falls inside that probe (its timeout and the run's deadline running)
however slowly a loaded machine starts the interpreter.

What is simulated: only the wall clock as this Python process reads it (libfaketime, the real
thing, makes CPython's clock_nanosleep fail with EINVAL when it fakes an offset). The nodes' clocks
and the kernel's are untouched."""

import datetime as _dt
import os
import threading
import time as _time

_spec = os.environ.get("NODECHECK_FAULT_CLOCK_STEP")
if _spec:
    _trigger, _, _offset_text = _spec.rpartition(":")
    _offset = float(_offset_text)
    _shift = [0.0]
    _real_time, _real_time_ns = _time.time, _time.time_ns
    _time.time = lambda: _real_time() + _shift[0]
    _time.time_ns = lambda: _real_time_ns() + int(_shift[0] * 1e9)

    class _SteppedDatetime(_dt.datetime):
        @classmethod
        def now(cls, tz=None):
            return super().now(tz) + _dt.timedelta(seconds=_shift[0])

        @classmethod
        def utcnow(cls):
            return super().utcnow() + _dt.timedelta(seconds=_shift[0])

    _dt.datetime = _SteppedDatetime

    def _step_when_asked() -> None:
        while not os.path.exists(_trigger):
            _time.sleep(0.01)  # time.sleep runs on the monotonic clock: the step cannot move it
        _shift[0] = _offset
        with open(_trigger + ".stepped", "w"):
            pass

    threading.Thread(target=_step_when_asked, name="clock-step", daemon=True).start()
