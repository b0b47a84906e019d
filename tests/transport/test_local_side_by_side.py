"""On this machine (the node Prolog, `health`, `run --local`) a node's probes run side by side, each
its own process with its own timeout: the node's time is its slowest probe's, not their sum (issue
34, 7). What each probe returns, and every deadline rule, stay as they were one after the other.

No test here times anything: overlap is proved by a rendezvous (every probe waits, bounded, for its
siblings to have started), so a busy machine slows them but cannot fail them."""

from __future__ import annotations

import threading
import time

from nodecheck.core.model import Cut, Node, Outcome, Probe
from nodecheck.transport.fanout import run_probes
from nodecheck.transport.local import PROBES_AT_ONCE, LocalTransport

NODE = Node("here", "localhost")


def rendezvous(tmp_path, name: str, count: int, wait_s: int = 30) -> Probe:
    """A probe that says it started, then waits until `count` probes have (or gives up: exit 3)."""
    here = tmp_path / "started"
    here.mkdir(exist_ok=True)
    script = (
        f'touch "{here}/{name}"; n=0; '
        f'while [ "$(ls "{here}" | wc -l)" -lt {count} ]; do '
        f'n=$((n + 1)); [ "$n" -gt {wait_s * 20} ] && exit 3; sleep 0.05; done; echo "{name} met"'
    )
    return Probe(name, ("sh", "-c", script), timeout_s=wait_s + 30)


def run(work, deadline_s=120.0, stop=None):
    return run_probes(LocalTransport(), work, fanout=1, deadline=time.monotonic() + deadline_s, stop=stop)


def test_a_nodes_probes_run_side_by_side(tmp_path):
    probes = [rendezvous(tmp_path, f"p{i}", 4) for i in range(4)]
    out = run({NODE: probes})
    got = {name: (c.outcome, c.exit_code, c.stdout) for (_, name), c in out.captures.items()}
    # one after the other, the first would wait for siblings that start only once it ended: exit 3
    assert got == {f"p{i}": (Outcome.EXITED, 0, f"p{i} met\n") for i in range(4)}
    assert out.incomplete == ""


def test_captures_come_back_in_the_order_of_the_work_whatever_order_the_probes_ended_in(tmp_path):
    # the last probe ends first: the report is the same document however the probes raced
    slow = Probe("slow", ("sh", "-c", f'while [ ! -e "{tmp_path}/fast-done" ]; do sleep 0.05; done; echo s'), 60)
    fast = Probe("fast", ("sh", "-c", f'echo f; touch "{tmp_path}/fast-done"'), 60)
    out = run({NODE: [slow, fast]})
    assert [name for _, name in out.captures] == ["slow", "fast"]
    assert [c.stdout for c in out.captures.values()] == ["s\n", "f\n"]


def test_a_probe_that_hangs_is_timeout_alone_while_its_siblings_come_back(tmp_path):
    hang = Probe("hang", ("sh", "-c", "echo partial; exec sleep 60"), timeout_s=2)
    probes = [hang, rendezvous(tmp_path, "a", 2), rendezvous(tmp_path, "b", 2)]
    out = run({NODE: probes})
    c = out.captures[("here", "hang")]
    assert (c.outcome, c.stdout, c.cut) == (Outcome.TIMEOUT, "partial\n", None)  # its own timeout: the node's
    assert [out.captures[("here", n)].stdout for n in ("a", "b")] == ["a met\n", "b met\n"]


def test_no_more_than_the_cap_run_at_once(tmp_path):
    running, most = tmp_path / "running", tmp_path / "most"
    running.mkdir()
    # each probe counts the probes running beside it, keeps the highest count seen, then lingers
    script = f'touch "{running}/$1"; n=$(ls "{running}" | wc -l); echo "$n" >> "{most}"; sleep 0.3; rm "{running}/$1"'
    probes = [Probe(f"p{i}", ("sh", "-c", script, "sh", f"p{i}"), 60) for i in range(PROBES_AT_ONCE + 4)]
    out = run({NODE: probes})
    assert {c.exit_code for c in out.captures.values()} == {0}
    counts = [int(x) for x in most.read_text().split()]
    assert len(counts) == PROBES_AT_ONCE + 4 and max(counts) <= PROBES_AT_ONCE


def test_the_run_deadline_cuts_side_by_side_probes_as_the_deadlines_doing(tmp_path):
    probes = [Probe(f"long{i}", ("sleep", "60"), timeout_s=60) for i in range(3)]
    out = run({NODE: probes}, deadline_s=3.0)  # the probes are running by then, however busy
    for c in out.captures.values():
        assert c.outcome is Outcome.TIMEOUT and c.cut is Cut.DEADLINE, c
    assert out.incomplete == "the run deadline was reached"


def test_probes_queued_behind_the_cap_when_the_deadline_passes_are_skipped(tmp_path):
    probes = [Probe(f"long{i}", ("sleep", "60"), timeout_s=60) for i in range(PROBES_AT_ONCE + 2)]
    out = run({NODE: probes}, deadline_s=3.0)  # the probes are running by then, however busy
    outcomes = [c.outcome for c in out.captures.values()]
    assert outcomes.count(Outcome.TIMEOUT) == PROBES_AT_ONCE
    assert outcomes.count(Outcome.SKIPPED) == 2
    assert {c.cut for c in out.captures.values()} == {Cut.DEADLINE}


def test_a_stop_request_ends_side_by_side_probes_early(tmp_path):
    stop = threading.Event()
    probes = [Probe(f"long{i}", ("sleep", "60"), timeout_s=60) for i in range(3)]
    threading.Timer(0.5, stop.set).start()
    started = time.monotonic()
    out = run({NODE: probes}, stop=stop)
    assert time.monotonic() - started < 30  # not the probes' 60 s
    assert out.incomplete == "stopped by a signal"
    assert all(c.outcome in (Outcome.TIMEOUT, Outcome.SKIPPED) for c in out.captures.values())


def test_a_measurement_runs_once_the_others_are_done_with_nothing_beside_it(tmp_path):
    # nccl-tests on the node's GPUs (Probe.alone): a probe beside it would take its CPU and PCIe
    running = tmp_path / "running"
    running.mkdir()
    seen = tmp_path / "seen"
    script = (
        f'touch "{running}/$1"; sleep 0.3; ls "{running}" | tr "\\n" " " >> "{seen}"; '
        f'echo >> "{seen}"; rm "{running}/$1"'
    )
    quick = [Probe(f"q{i}", ("sh", "-c", script, "sh", f"q{i}"), 60) for i in range(3)]
    measure = Probe("measure", ("sh", "-c", script, "sh", "measure"), 60, alone=True)
    out = run({NODE: [quick[0], measure, *quick[1:]]})
    assert {c.exit_code for c in out.captures.values()} == {0}
    assert [name for _, name in out.captures] == ["q0", "measure", "q1", "q2"]  # the work's order
    lines = seen.read_text().splitlines()
    assert "measure " in lines and lines[-1] == "measure "  # last, and alone in the running set


def test_the_nccl_tests_probes_are_measurements():
    from nodecheck.checks.nccl_allreduce import NcclSingle, single_probes

    assert all(p.alone for p in single_probes(NcclSingle()))
