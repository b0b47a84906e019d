"""Transports: quoting in one place; the local transport's outcomes (exit, missing tool, timeout)."""
import os
import shlex
import time

from nodecheck.model import Node, Outcome, Probe
from nodecheck.transport import FailedSession, remote_command
from nodecheck.transport.local import LocalTransport

NODE = Node("here", "localhost")


def test_every_argument_reaches_the_remote_shell_quoted():
    hostile = "x'; rm -rf / #"
    cmd = remote_command(Probe("p", ("echo", hostile, "$(id)", "a b"), 10), 10)
    assert shlex.split(cmd) == ["env", "LC_ALL=C", "timeout", "-k", "2", "15", "echo", hostile, "$(id)", "a b"]


def run_local(probe, timeout_s=5.0):
    session = LocalTransport().connect(NODE, 10)
    return session.run(probe, timeout_s)


def test_local_exit_code_stdout_stderr_and_stdin():
    c = run_local(Probe("p", ("sh", "-c", "cat; echo err >&2; exit 4"), 5, stdin="hello\n"))
    assert (c.outcome, c.exit_code, c.stdout, c.stderr) == (Outcome.EXITED, 4, "hello\n", "err\n")


def test_local_missing_tool_is_exit_127_not_an_exception():
    c = run_local(Probe("p", ("no-such-tool-xyz",), 5))
    assert (c.outcome, c.exit_code) == (Outcome.EXITED, 127)
    assert "command not found" in c.stderr


def test_local_timeout_kills_the_tool_and_its_children(tmp_path):
    pidfile = tmp_path / "child.pid"
    started = time.monotonic()
    c = run_local(Probe("p", ("sh", "-c", f"sleep 60 & echo $! > {pidfile}; wait"), 5), timeout_s=0.5)
    assert c.outcome is Outcome.TIMEOUT and c.exit_code is None
    assert time.monotonic() - started < 3
    child = int(pidfile.read_text())
    time.sleep(0.2)
    assert not os.path.exists(f"/proc/{child}") or "Z" in open(f"/proc/{child}/status").read().split("State:")[1][:5]


def test_a_failed_session_reports_every_probe_unreachable_with_its_reason():
    c = FailedSession(NODE, "connection refused").run(Probe("p", ("x",), 1), 1)
    assert (c.outcome, c.detail, c.exit_code) == (Outcome.UNREACHABLE, "connection refused", None)


def test_local_output_is_capped_and_the_cut_is_said(monkeypatch):
    import nodecheck.transport.local as local
    monkeypatch.setattr(local, "MAX_CAPTURE_BYTES", 10)
    c = run_local(Probe("p", ("sh", "-c", "printf '%030d' 0"), 5))
    assert (len(c.stdout), c.exit_code) == (10, 0)
    assert c.detail.startswith("stdout cut at")
