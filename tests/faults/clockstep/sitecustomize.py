"""A wall-clock step inside one nodecheck process (tests/faults/test_fault_run.py), as NTP or an
operator stepping the clock mid-run would make it: with NODECHECK_FAULT_CLOCK_STEP="AFTER_S:OFFSET_S"
in the environment and this directory on PYTHONPATH, time.time(), time.time_ns() and
datetime.now()/utcnow() jump by OFFSET_S seconds AFTER_S seconds after start-up. The monotonic
clock does not move, as a real step leaves CLOCK_MONOTONIC alone.

What is simulated: only the wall clock as this Python process reads it (libfaketime, the real
thing, makes CPython's clock_nanosleep fail with EINVAL when it fakes an offset). The nodes' clocks
and the kernel's are untouched."""

import datetime as _dt
import os
import threading
import time as _time

_spec = os.environ.get("NODECHECK_FAULT_CLOCK_STEP")
if _spec:
    _after, _offset = (float(x) for x in _spec.split(":"))
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
    _timer = threading.Timer(_after, lambda: _shift.__setitem__(0, _offset))
    _timer.daemon = True
    _timer.start()
