"""Transports: quoting in one place; the local transport's outcomes (exit, missing tool, timeout)."""

import os
import shlex
import time

from nodecheck.core.model import Node, Outcome, Probe
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
    if os.path.exists(f"/proc/{child}"):
        with open(f"/proc/{child}/status") as f:
            assert "Z" in f.read().split("State:")[1][:5]


def test_a_failed_session_reports_every_probe_unreachable_with_its_reason():
    c = FailedSession(NODE, "connection refused").run(Probe("p", ("x",), 1), 1)
    assert (c.outcome, c.detail, c.exit_code) == (Outcome.UNREACHABLE, "connection refused", None)


def test_local_output_is_capped_and_the_cut_is_said(monkeypatch):
    import nodecheck.transport as transport

    monkeypatch.setattr(transport, "MAX_CAPTURE_BYTES", 10)
    c = run_local(Probe("p", ("sh", "-c", "printf '%030d' 0; printf '%012d' 0 >&2"), 5))
    assert (c.stdout, c.stderr, c.exit_code) == ("0" * 10, "0" * 10, 0)
    assert c.detail == "stdout cut at 10 bytes (20 bytes dropped); stderr cut at 10 bytes (2 bytes dropped)"


# a child Python: run the local transport on a tool that prints `mb` MB, print the capture's facts and
# how much the peak RSS grew (ru_maxrss, KiB on Linux)
_RSS_PROBE = """
import json, resource, sys
from nodecheck.core.model import Node, Probe
from nodecheck.transport.local import LocalTransport
mb = int(sys.argv[1])
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
c = LocalTransport().connect(Node("here", "localhost"), 10).run(
    Probe("p", ("sh", "-c", f"head -c {mb}000000 /dev/zero; echo done >&2"), 60), 60)
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
print(json.dumps({"outcome": c.outcome.value, "code": c.exit_code, "stdout": len(c.stdout), "stderr": c.stderr,
                  "detail": c.detail, "grown_mib": grown / 1024}))
"""


def test_local_output_is_read_as_it_comes_and_memory_stays_bounded():
    """Issue 17, finding 9: 400 MB of output took 1.16 GB RSS (all read, then cut)."""
    import json
    import subprocess
    import sys

    from nodecheck.transport import MAX_CAPTURE_BYTES

    r = subprocess.run([sys.executable, "-c", _RSS_PROBE, "200"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert (got["outcome"], got["code"], got["stdout"], got["stderr"]) == ("exited", 0, MAX_CAPTURE_BYTES, "done\n")
    assert got["detail"] == f"stdout cut at 16 MiB ({200_000_000 - MAX_CAPTURE_BYTES} bytes dropped)"
    # the kept 16 MiB (bytes, then its text) and the pipe chunks; not the 200 MB
    assert got["grown_mib"] < 80, got


def test_local_timeout_with_endless_output_is_bounded_and_reaped():
    started = time.monotonic()
    c = run_local(Probe("p", ("sh", "-c", "yes"), 5), timeout_s=1)
    assert c.outcome is Outcome.TIMEOUT and c.exit_code is None
    assert time.monotonic() - started < 4
    assert c.detail.startswith("no answer within 1 s; killed; stdout cut at 16 MiB (")
    assert len(c.stdout) == 16 << 20


def test_local_stdin_larger_than_a_pipe_and_a_tool_that_never_reads_it():
    big = "x" * 300_000 + "\n"
    c = run_local(Probe("p", ("sh", "-c", "wc -c"), 5, stdin=big))
    assert (c.outcome, c.exit_code, c.stdout.strip()) == (Outcome.EXITED, 0, "300001")
    c = run_local(Probe("p", ("true",), 5, stdin=big))
    assert (c.outcome, c.exit_code) == (Outcome.EXITED, 0)


def test_a_tool_killed_by_a_signal_is_named_so_whichever_transport_ran_it():
    """Locally a killed tool's exit code is -N (subprocess's convention); the SSH transport maps an
    `exit-signal` to the same (test_ssh_probe_bounds.py). The judged message names the signal, as
    the fault suite's "tool killed by a signal" asserts: "ibstat killed by SIGSEGV", never
    "exited -11" (or, before the SSH fix, "exited -1: no stderr")."""
    from pathlib import Path

    from nodecheck.config.playbook import load_playbook
    from nodecheck.core.model import Capture, Status
    from nodecheck.run.runner import run
    from tests.replay import ReplayTransport

    c = run_local(Probe("p", ("sh", "-c", "echo half; kill -SEGV $$"), 5))
    assert (c.outcome, c.exit_code, c.stdout) == (Outcome.EXITED, -11, "half\n")
    book = load_playbook(str(Path(__file__).resolve().parents[1] / "data" / "playbooks" / "ib-only.yml"))
    p = book.checks[0].probes[0]
    answers = {
        ("n1", p.name): Capture("n1", p.name, p.argv, Outcome.EXITED, -9, "CA 'mlx5_0'\n", "", 0.1),
        ("n2", p.name): Capture(
            "n2",
            p.name,
            p.argv,
            Outcome.EXITED,
            -11,
            "",
            "timeout: the monitored command dumped core\n",
            0.1,
            "killed by SIGSEGV (core dumped)",
        ),
        # a signal the operator's host has no number for (OpenSSH's "SIG@openssh.com")
        ("n3", p.name): Capture(
            "n3", p.name, p.argv, Outcome.EXITED, None, "", "", 0.1, "killed by signal XCPU2@openssh.com"
        ),
    }
    report = run(book, [Node(n, n) for n in ("n1", "n2", "n3")], ReplayTransport(answers), fanout=3)
    got = {n: [(r.verdict.status, r.verdict.message) for r in report.results_for(n)] for n in report.node_names}
    assert got == {
        "n1": [(Status.ERROR, "ibstat killed by SIGKILL")],
        "n2": [(Status.ERROR, "ibstat killed by SIGSEGV: timeout: the monitored command dumped core")],
        "n3": [(Status.ERROR, "ibstat killed by signal XCPU2@openssh.com")],
    }
