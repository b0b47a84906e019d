"""Freeze processes in a cgroup v1 freezer so that `py-spy dump` (which ptrace-stops its target)
hangs on them: the "rank that does not answer within the timeout" of the forensics tests.

Why the freezer: a frozen task sits in the kernel's refrigerator (State "D") and never reaches the
ptrace stop py-spy waits for, so py-spy prints its two header lines and then blocks until killed.
SIGSTOP and an already-attached tracer (strace -p) do not do this: py-spy fails at once with exit 1
("Failed to suspend process"). Recorded in tests/data/py-spy/SOURCES.md.

Standard library only; needs root and the v1 freezer hierarchy (Debian 12 CI and the dev machine
mount it at /sys/fs/cgroup/freezer). Anything missing raises FreezerUnavailable naming what.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable

FREEZER_ROOT = "/sys/fs/cgroup/freezer"
_SETTLE_S = 5.0  # FREEZING -> FROZEN takes milliseconds; seconds means something is wrong


class FreezerUnavailable(RuntimeError):
    """The cgroup v1 freezer cannot be used here; the message says why."""


def freeze(pids: Iterable[int], name: str, root: str = FREEZER_ROOT) -> str:
    """Move each process (all its threads) into cgroup <root>/<name> and freeze it; returns the path."""
    _require(root)
    path = os.path.join(root, name)
    os.makedirs(path, exist_ok=True)
    for pid in pids:
        # cgroup.procs moves every thread of the process; tasks would move one thread only
        _write(os.path.join(path, "cgroup.procs"), str(pid))
    _write(os.path.join(path, "freezer.state"), "FROZEN")
    _settle(path, "FROZEN")
    return path


def thaw(path: str, root: str = FREEZER_ROOT) -> None:
    """Thaw the cgroup, move its processes back to the root cgroup and remove it.

    Thaw before signalling a frozen process: in cgroup v1 even SIGKILL waits until it is thawed."""
    if not os.path.isdir(path):
        return
    _write(os.path.join(path, "freezer.state"), "THAWED")
    _settle(path, "THAWED")
    for pid in _read(os.path.join(path, "cgroup.procs")).split():
        try:
            _write(os.path.join(root, "cgroup.procs"), pid)
        except ProcessLookupError:
            pass  # exited meanwhile: nothing to move
    os.rmdir(path)


def state(pid: int) -> str:
    """The process's State line from /proc ("D (disk sleep)" while frozen)."""
    for line in _read(f"/proc/{pid}/status").splitlines():
        if line.startswith("State:"):
            return line.split(":", 1)[1].strip()
    raise RuntimeError(f"/proc/{pid}/status has no State line")


def _require(root: str) -> None:
    if os.geteuid() != 0:
        raise FreezerUnavailable(f"freezing needs root (euid is {os.geteuid()})")
    mounts = _read("/proc/mounts").splitlines()
    # a v1 freezer mount reads "cgroup <root> cgroup rw,...,freezer 0 0"
    if not any(
        f" {root} cgroup " in f" {m} " and "freezer" in m.split()[3].split(",") for m in mounts if len(m.split()) >= 4
    ):
        raise FreezerUnavailable(
            f"no cgroup v1 freezer mounted at {root} (see /proc/mounts); "
            f"mount one: mkdir -p {root} && mount -t cgroup -o freezer freezer {root}"
        )


def _settle(path: str, want: str) -> None:
    deadline = time.monotonic() + _SETTLE_S
    while (got := _read(os.path.join(path, "freezer.state")).strip()) != want:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{path}: freezer.state is {got}, expected {want} after {_SETTLE_S} s")
        time.sleep(0.01)


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def _write(path: str, value: str) -> None:
    # one write() per value: cgroup files take one pid / one state per write
    with open(path, "w") as f:
        f.write(value)
