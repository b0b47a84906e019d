"""transport.children: every process group nodecheck starts ends with it, TERM then KILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from nodecheck.transport import children


def _group(script: str) -> subprocess.Popen:
    proc = subprocess.Popen(["/bin/sh", "-c", script], start_new_session=True, stdout=subprocess.DEVNULL)
    children.started(proc)
    return proc


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _wait_started(path, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def test_end_group_gives_term_first_and_a_tool_that_exits_on_it_is_not_killed(tmp_path):
    said = tmp_path / "said"
    proc = _group(f"trap 'echo term > {said}; exit 0' TERM; touch {tmp_path}/up; while :; do sleep 0.05; done")
    _wait_started(tmp_path / "up")
    assert children.end_group(proc, grace_s=30) is True
    assert said.read_text() == "term\n"
    assert proc.returncode is not None and not _group_alive(proc.pid)
    children.forget(proc)


def test_end_group_kills_what_ignores_term_once_the_grace_is_over(tmp_path):
    proc = _group(f"trap '' TERM; touch {tmp_path}/up; sleep 300 & wait")
    _wait_started(tmp_path / "up")
    started = time.monotonic()
    assert children.end_group(proc, grace_s=0.3) is False
    assert time.monotonic() - started >= 0.3
    proc.wait(30)
    assert proc.returncode == -signal.SIGKILL
    deadline = time.monotonic() + 30
    while _group_alive(proc.pid):  # the background sleep went with it
        assert time.monotonic() < deadline
        time.sleep(0.02)
    children.forget(proc)


def test_end_all_ends_every_kept_group_and_forgets_them(tmp_path):
    procs = [_group(f"touch {tmp_path}/up{i}; sleep 300 & wait") for i in range(3)]
    for i in range(3):
        _wait_started(tmp_path / f"up{i}")
    assert set(children.live()) >= {p.pid for p in procs}
    assert children.end_all(grace_s=5) >= 3
    for proc in procs:
        proc.wait(30)
        assert not _group_alive(proc.pid)
    assert not set(children.live()) & {p.pid for p in procs}


def test_ended_after_a_normal_exit_ends_what_the_tool_left_in_the_background(tmp_path):
    proc = _group(f"(sleep 300; echo never > {tmp_path}/late) & echo $! > {tmp_path}/bg")
    proc.wait(30)
    _wait_started(tmp_path / "bg")
    background = int((tmp_path / "bg").read_text())
    assert _group_alive(proc.pid)  # the leader is gone, its background child is not
    children.ended(proc, grace_s=5)
    deadline = time.monotonic() + 30
    while _group_alive(proc.pid):
        assert time.monotonic() < deadline, f"pid {background} still running"
        time.sleep(0.02)
    assert proc.pid not in children.live()


# nodecheck SIGKILLed after a probe's process exists and before the guardian is told of it: the
# probe must not run. A child process stands in for nodecheck; its registration is where it dies.
_DIES_BEFORE_REGISTERING = """
import os, signal, sys
from nodecheck.core.model import Node, Probe
from nodecheck.transport import children
from nodecheck.transport.local import LocalSession

children.started = lambda proc: os.kill(os.getpid(), signal.SIGKILL)
LocalSession(Node(name="here", address="localhost")).run(Probe(name="p", argv=tuple(sys.argv[1:])), 60)
"""


def _cmdlines_holding(word: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if word.encode() in f.read():
                        found.append(int(entry))
            except OSError:  # gone meanwhile
                pass
    return found


def test_a_probe_whose_nodecheck_died_before_registering_it_never_runs(tmp_path):
    ran = tmp_path / "ran"
    tool = tmp_path / "tool-never-run"
    tool.write_text(f"#!/bin/sh\ntouch {ran}\nsleep 30\n")  # its shell, named by path, lives 30 s
    tool.chmod(0o755)
    nodecheck = subprocess.run(
        [sys.executable, "-c", _DIES_BEFORE_REGISTERING, str(tool)], capture_output=True, timeout=120
    )
    assert nodecheck.returncode == -signal.SIGKILL, nodecheck.stderr
    # what started for the probe ends by itself (the tool would sleep 30 s): wait for that state
    deadline = time.monotonic() + 60
    while _cmdlines_holding(str(tool)):
        assert time.monotonic() < deadline, f"the probe is still running: {_cmdlines_holding(str(tool))}"
        time.sleep(0.05)
    assert not ran.exists()
