"""Processes that carry a daemon's name, for the probes that pick a daemon among /proc (limits,
services): a genuine-looking one (a root-owned copy of sleep named like the daemon, in a root-owned
directory) and the forgeries a job's user can make (a setuid-root program reached through a symlink
of the daemon's name, started as `nobody`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

NOBODY = 65534
AS_NOBODY = ("setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups")


@contextmanager
def open_dir() -> Iterator[Path]:
    """A root-owned directory everyone may enter and no one else may write (pytest's tmp_path lies
    under a root-only one, which nobody cannot enter)."""
    path = Path(tempfile.mkdtemp(prefix="nodecheck-fake-daemon-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def sleep_copy(directory: Path, name: str, mode: int = 0o755) -> Path:
    """A root-owned copy of sleep called `name` in `directory`."""
    binary = directory / name
    shutil.copy(shutil.which("sleep") or "/bin/sleep", binary)
    binary.chmod(mode)
    return binary


def setuid_sleep_as(directory: Path, name: str) -> Path:
    """What a job's user can run: a setuid-root program (a copy of sleep, 4755) reached through a
    symlink called `name`; its comm is the link's name and /proc/PID of a setuid process is root's."""
    target = sleep_copy(directory, "sleep", 0o4755)
    link = directory / name
    link.symlink_to(target)
    return link


def start(argv: Sequence[str], comm: str, *, setuid: bool = False, timeout: float = 10.0) -> subprocess.Popen:
    """Start `argv` and wait until the process has exec'd the program called `comm` (and, for a
    setuid one, until /proc/PID is root's: the forgery is in place)."""
    process = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open(f"/proc/{process.pid}/comm") as f:
                named = f.read().strip() == comm
            ready = named and (not setuid or os.stat(f"/proc/{process.pid}").st_uid == 0)
        except OSError:
            ready = False
        if ready:
            return process
        if process.poll() is not None or time.monotonic() > deadline:
            stop(process)
            raise AssertionError(f"{argv} did not start as {comm!r} (exit {process.returncode})")
        time.sleep(0.01)


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.kill()
    process.wait(timeout=10)


def real_uid(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Uid:"):
                return int(line.split()[1])
    raise AssertionError(f"no Uid: line in /proc/{pid}/status")
