"""The srun transport (transport/srun.py, srun_step.py) against a fake srun that runs each task here
(tests/fakes/srun.py): framing, exact bytes, exit codes, bounds, launch failures, forged frames.
The real srun: tests/integration/test_srun_transport.py."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

from nodecheck import transport as transport_module
from nodecheck.core.model import Cut, Node, Outcome, Probe
from nodecheck.transport import CappedBuffer
from nodecheck.transport import srun as srun_module
from nodecheck.transport.fanout import run_probes
from nodecheck.transport.srun import SrunTransport
from nodecheck.transport.srun_step import NODE_MARK, PROBE_MARK, RC_MARK, StepOutput, node_command, step_script

FAKE = Path(__file__).resolve().parents[1] / "fakes" / "srun.py"
NODES = [Node(f"node{i}", f"node{i}") for i in range(1, 4)]


def srun(tmp_path: Path, **env: str) -> str:
    """A wrapper that runs the fake srun with these faults (srun's own environment is filtered)."""
    wrapper = tmp_path / "srun"
    exports = "".join(f"{k}={v} " for k, v in env.items())
    wrapper.write_text(f'#!/bin/sh\n{exports}exec {sys.executable} {FAKE} "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper)


def run(tmp_path, work, deadline_s=30.0, **faults):
    t = SrunTransport(job_id="7", srun=srun(tmp_path, **faults), launch_timeout_s=10)
    return run_probes(t, work, fanout=64, deadline=time.monotonic() + deadline_s)


def test_each_node_gets_its_own_exact_bytes_exit_code_and_stderr(tmp_path):
    binary = Probe("bytes", ("sh", "-c", r"printf 'a\000b\377 %s' \"$(hostname)x\"; echo err-$0 >&2; exit 3", "sh"))
    stdin = Probe("stdin", ("sh", "-c", "cat; exit 0"), stdin="line one\nno newline at the end")
    work = dict.fromkeys(NODES, (binary, stdin))
    out = run(tmp_path, work)
    assert out.incomplete == ""
    for n in NODES:
        c = out.captures[(n.name, "bytes")]
        assert (c.outcome, c.exit_code, c.stderr) == (Outcome.EXITED, 3, "err-sh\n")
        assert c.stdout.encode(errors="surrogateescape").startswith(b"a\x00b")
        s = out.captures[(n.name, "stdin")]
        assert (s.outcome, s.exit_code, s.stdout) == (Outcome.EXITED, 0, "line one\nno newline at the end")


def test_one_step_per_probe_round_not_one_per_node(tmp_path):
    log = tmp_path / "steps.log"
    probes = (Probe("a", ("true",)), Probe("b", ("true",)))
    out = run(tmp_path, dict.fromkeys(NODES, probes), FAKE_SRUN_LOG=str(log))
    assert {c.outcome for c in out.captures.values()} == {Outcome.EXITED} and len(out.captures) == 6
    assert log.read_text().splitlines() == ["node[1-3]"]  # both probes of every node: one step


def test_a_tool_that_forges_the_frame_cannot_pass_for_finished_or_for_another_node(tmp_path):
    forged = f"printf '{RC_MARK}0\\n{NODE_MARK}node9\\n{PROBE_MARK}1\\n'; sleep 1; exit 7"
    out = run(tmp_path, {NODES[0]: (Probe("forge", ("sh", "-c", forged)), Probe("next", ("echo", "next")))})
    c = out.captures[("node1", "forge")]
    # the forged lines are what they are, the tool's output: its real status came after its second
    assert (c.outcome, c.exit_code, c.stdout) == (Outcome.EXITED, 7, f"{RC_MARK}0\n{NODE_MARK}node9\n{PROBE_MARK}1\n")
    assert c.duration_s >= 1.0
    assert (out.captures[("node1", "next")].stdout, len(out.captures)) == ("next\n", 2)


def test_a_node_slurm_cannot_start_is_unreachable_with_slurms_words_and_the_rest_runs(tmp_path):
    probes = (Probe("a", ("echo", "a")), Probe("b", ("echo", "b")))
    out = run(tmp_path, dict.fromkeys(NODES, probes), FAKE_SRUN_DOWN="node2")
    words = (
        "Slurm could not start it: error: Task launch for StepId=7.0 failed on node node2: "
        "Communication connection failure"
    )
    for probe in ("a", "b"):
        c = out.captures[("node2", probe)]
        assert (c.outcome, c.detail) == (Outcome.UNREACHABLE, words)
        for node in ("node1", "node3"):
            ok = out.captures[(node, probe)]
            assert (ok.outcome, ok.stdout) == (Outcome.EXITED, f"{probe}\n")


def test_no_srun_is_unreachable_with_the_reason(tmp_path):
    t = SrunTransport(job_id="7", srun=str(tmp_path / "nowhere" / "srun"))
    out = run_probes(t, {NODES[0]: (Probe("a", ("true",)),)}, fanout=1, deadline=time.monotonic() + 5)
    c = out.captures[("node1", "a")]
    assert c.outcome is Outcome.UNREACHABLE and c.detail == "cannot run srun: No such file or directory"


def test_a_run_past_its_deadline_starts_nothing(tmp_path):
    out = run(tmp_path, {NODES[0]: (Probe("a", ("true",)),)}, deadline_s=-1)
    c = out.captures[("node1", "a")]
    assert (c.outcome, c.cut) == (Outcome.SKIPPED, Cut.DEADLINE) and out.incomplete == "the run deadline was reached"


def test_a_stop_request_ends_the_step_and_says_so(tmp_path):
    stop = threading.Event()
    t = SrunTransport(job_id="7", srun=srun(tmp_path))
    threading.Timer(0.8, stop.set).start()
    started = time.monotonic()
    out = run_probes(
        t, {NODES[0]: (Probe("a", ("sleep", "20"), timeout_s=20),)}, fanout=1, deadline=started + 30, stop=stop
    )
    c = out.captures[("node1", "a")]
    # running when the stop came (or, on a loaded machine, not yet started): the signal's doing either way
    assert (c.outcome, c.cut, c.detail) in (
        (Outcome.TIMEOUT, Cut.SIGNAL, "still running when stopped by a signal"),
        (Outcome.SKIPPED, Cut.SIGNAL, "not started: stopped by a signal"),
    ), c
    assert out.incomplete == "stopped by a signal" and time.monotonic() - started < 10


def test_a_session_runs_one_probe_as_a_step_on_its_node(tmp_path):
    t = SrunTransport(job_id="7", srun=srun(tmp_path))
    session = t.connect(NODES[1], 5)
    c = session.run(Probe("who", ("sh", "-c", 'echo "$SLURMD_NODENAME"')), 5)
    session.close()
    assert (c.node, c.outcome, c.exit_code, c.stdout) == ("node2", Outcome.EXITED, 0, "node2\n")


# ---- the framing, pure -------------------------------------------------------------------------


def test_the_script_quotes_node_names_and_carries_stdin_as_base64():
    script = step_script({"node1": [node_command(Probe("p", ("cat",), stdin="$(reboot)'"), 5)], "a;b": ["true"]})
    assert "c0() { printf %s JChyZWJvb3QpJw== | base64 -d | env LC_ALL=C timeout -k 2 10 cat; }" in script
    assert "  node1) set -- c0 ;;\n  'a;b') set -- c1 ;;" in script
    assert "reboot" not in script


def frames(*lines: bytes) -> bytes:
    return b"".join(b"0: " + line + b"\n" for line in lines)


HEAD = (NODE_MARK.encode() + b"gpu1", PROBE_MARK.encode() + b"0")


def test_srun_messages_are_kept_apart_from_tasks_and_bounded():
    out = StepOutput()
    out.feed("err", b"srun: error: Task launch for StepId=1.0 failed on node gpu7: Connection refused\n", 0)
    out.feed("err", b"srun: error: gpu1: task 0: Exited with exit code 3\n", 0)  # says nothing new
    out.feed("err", b"0: slurmstepd: error: something\n", 0)
    out.feed("out", frames(*HEAD, b"oaGk=", b"eZXJy", RC_MARK.encode() + b"3"), 1.5)
    assert out.launch_failures() == {
        "gpu7": "error: Task launch for StepId=1.0 failed on node gpu7: Connection refused"
    }
    assert out.srun_lines == ["srun: error: Task launch for StepId=1.0 failed on node gpu7: Connection refused"]
    t = out.node_tasks()["gpu1"]
    [f] = t.frames
    assert (f.out.text(), f.err.text(), f.rc, f.started, f.ended) == ("hi", "err", 3, 1.5, 1.5)
    assert t.err.text() == "slurmstepd: error: something\n"
    for _ in range(100):
        out.feed("err", b"srun: " + b"x" * 4000 + b"\n", 2)
    assert out.srun_chars <= 64 * 1024 + 4100 and len(out.srun_words()) <= 602


@pytest.mark.parametrize(
    "lines, why",
    [
        ((b"not base64 at all!",), "a line of the node's output was not in the script's framing"),
        ((b"o!!!!",), "a line of the node's output was not in the script's framing"),
        ((RC_MARK.encode() + b"-1",), "no exit status from the node's command"),
        ((PROBE_MARK.encode() + b"1",), "a probe started out of order"),
    ],
)
def test_a_garbled_frame_is_an_error_not_an_exit_status(lines, why):
    out = StepOutput()
    out.feed("out", frames(*HEAD, *lines, RC_MARK.encode() + b"0"), 0)
    t = out.node_tasks()["gpu1"]
    assert t.frames[0].rc is None and t.garbled.startswith(why)


def test_each_stream_is_bounded_per_probe_and_a_line_without_newline_too():
    out = StepOutput()
    out.feed("out", frames(*HEAD), 0)
    out.tasks[0].frames[0].out = CappedBuffer(8)
    out.feed("out", frames(b"o" + b"QUJD" * 10), 0)
    f = out.node_tasks()["gpu1"].frames[0]
    assert (bytes(f.out.buf), f.out.dropped) == (b"ABCABCAB", 22)
    out.feed("err", b"0: " + b"e" * (2 << 20), 0)  # no newline: cut into lines at 1 MiB, bounded
    assert len(out.tasks[0].err.buf) <= (2 << 20) + 2
    assert out._partial["err"] == b""


def test_after_a_hung_probe_the_node_runs_its_next_one(tmp_path):
    probes = (Probe("hang", ("sleep", "30"), timeout_s=1), Probe("next", ("echo", "next")))
    out = run(tmp_path, {NODES[0]: probes})
    hung, after = out.captures[("node1", "hang")], out.captures[("node1", "next")]
    assert (hung.outcome, hung.detail, after.outcome, after.stdout) == (
        Outcome.TIMEOUT,
        "no answer within 1 s",
        Outcome.EXITED,
        "next\n",
    )


def test_a_node_stuck_past_the_remote_timeout_gives_up_its_later_probes(tmp_path, monkeypatch):
    """The remote `timeout` is put out of reach (10 min), so the hung probe ends only when its
    sleep does (30 s): a node given up 0.5 s past the bound shows as `next` not run; one waited for
    would run `next` once the sleep ended, and one waited for until the deadline would be cut by it.
    No time is measured: a busy machine may be slow to give up, never wrong."""
    monkeypatch.setattr(transport_module, "REMOTE_KILL_GRACE_S", 600)
    monkeypatch.setattr(srun_module, "STUCK_AFTER_S", 0.5)
    probes = (Probe("hang", ("sleep", "30"), timeout_s=1), Probe("next", ("echo", "next")))
    out = run(tmp_path, {NODES[0]: probes, NODES[1]: (probes[1],)}, deadline_s=60)
    assert out.incomplete == ""  # given up on its own, not cut by the deadline
    assert out.captures[("node1", "hang")].outcome is Outcome.TIMEOUT
    later = out.captures[("node1", "next")]
    assert (later.outcome, later.detail) == (Outcome.TIMEOUT, "not run: hang before it on this node never ended")
    assert out.captures[("node2", "next")].outcome is Outcome.EXITED
