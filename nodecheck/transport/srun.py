"""Slurm as the transport: probes run by `srun` inside a job's allocation, no SSH.

A probe round (every node's probes of one phase of the run) is ONE step: `srun --overlap
--nodelist=... -N n --ntasks-per-node=1`, the script of srun_step.py on every task's stdin. Each
task runs its node's probes in order, as an SSH session does; each probe's stdout, stderr and exit
status come back apart and bounded (a CappedBuffer per probe and stream), so the runner and the
checks see the Captures an SSH session would give:

* a node on which Slurm cannot start the task is UNREACHABLE with Slurm's words, and the rest of
  the round runs again without it (srun aborts a whole step when one node's launch fails);
* a probe that outlives its bound is TIMEOUT (the bound counts from the moment it started: a slow
  step launch is not the node's fault); the node's next probe runs once the remote `timeout` ended
  it; a node stuck past that too ends its round there (its later probes are TIMEOUT, not run);
* the run's deadline and a stop request cancel the step (two SIGINTs: srun cancels it and
  slurmstepd kills every task); what never started is SKIPPED, as over SSH.

Active checks use sessions (connect/run): each command is a step on one node, kept alive while
what it left running is needed (Probe.hold_s: the pair test's servers).
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from nodecheck.core.hostlist import fold
from nodecheck.core.model import Capture, Cut, Node, Outcome, Probe
from nodecheck.transport import REMOTE_KILL_GRACE_S, children, cut_details
from nodecheck.transport.fanout import FanoutResult, cut_at_deadline, not_started, why_cut
from nodecheck.transport.srun_step import Frame, StepOutput, TaskOutput, node_command, step_script

LAUNCH_TIMEOUT_S = 30.0  # how long a task may take to start (Slurm's MessageTimeout is 10 s by default)
ABORT_GRACE_S = 5.0  # after the step is cancelled, how long srun may take to exit before SIGKILL
LAUNCH_ATTEMPTS = 3  # a round runs again without the nodes Slurm could not start it on
POLL_S = 0.2
LOOK_EVERY_S = 0.05  # how often the nodes' states are looked at while output streams in
DRAIN_S = 2.0  # once every node answered, how long srun may take to pass on the rest and exit
# past its bound, how long a probe may take to be ended by the remote `timeout` (its -k 2 included)
# before the node counts as stuck and its later probes are given up
STUCK_AFTER_S = REMOTE_KILL_GRACE_S + 2 + 8
# srun reads SLURM_* from its environment (an allocation's SLURM_NTASKS, SLURM_CPUS_PER_TASK, ...):
# the step is described by its arguments alone
KEEP_ENV = ("SLURM_CONF", "PATH", "HOME", "LANG", "TZ", "MUNGE_SOCKET")

Work = Mapping[Node, Sequence[Probe]]


@dataclass(frozen=True)
class SrunTransport:
    """Steps of one job (`job_id`), launched by the `srun` on this machine's PATH."""

    job_id: str
    srun: str = "srun"
    launch_timeout_s: float = LAUNCH_TIMEOUT_S

    def connect(self, node: Node, timeout_s: float) -> SrunSession:
        return SrunSession(self, node)

    def run_rounds(
        self,
        work: Work,
        *,
        deadline: float,
        on_node_done: Callable[[str], None] | None = None,
        stop: threading.Event | None = None,
    ) -> FanoutResult:
        """Every node's probes in one step (fanout's run_probes for this transport)."""
        captures = self.run_step(work, deadline=deadline, stop=stop or threading.Event())
        if on_node_done:
            for node in work:
                on_node_done(node.name)
        cuts = [c.cut for c in captures.values() if c.cut is not None]
        return FanoutResult(captures, why_cut(cuts[0]) if cuts else "")

    def run_step(
        self,
        work: Work,
        *,
        deadline: float,
        stop: threading.Event,
        held: list[subprocess.Popen] | None = None,
    ) -> dict[tuple[str, str], Capture]:
        """Each node's probes, in one step; again for the nodes whose part srun aborted because
        Slurm could not start the task elsewhere. A step whose probes hold (Probe.hold_s) and that
        answered is left running, in `held`."""
        done: dict[tuple[str, str], Capture] = {}
        todo = {n: list(p) for n, p in work.items() if p}
        for _ in range(LAUNCH_ATTEMPTS):
            if not todo:
                break
            done.update(_Step(self, todo, deadline, stop, held).run())
            todo = {n: [p for p in ps if (n.name, p.name) not in done] for n, ps in todo.items()}
            todo = {n: ps for n, ps in todo.items() if ps}
        for node, probes in todo.items():  # aborted again and again by other nodes' launch failures
            for probe in probes:
                done[(node.name, probe.name)] = _capture(
                    node,
                    probe,
                    Outcome.UNREACHABLE,
                    f"srun aborted the step {LAUNCH_ATTEMPTS} times before it ran here",
                )
        return done

    def command(self, nodes: Sequence[Node]) -> list[str]:
        n = len(nodes)
        return [
            self.srun,
            f"--jobid={self.job_id}",
            "--overlap",  # beside the job's own steps, on resources it already holds
            f"--nodelist={fold(node.name for node in nodes)}",
            f"--nodes={n}",
            f"--ntasks={n}",
            "--ntasks-per-node=1",
            "--label",  # every line carries its task id: the nodes' outputs stay apart
            "--input=all",  # the script to every task
            "--export=NONE",  # the operator's environment stays here
            "--chdir=/",
            "--kill-on-bad-exit=0",  # a failing check on one node does not end the others
            "--wait=0",
            "--job-name=nodecheck",
            "/bin/sh",
            "-s",
        ]


class SrunSession:
    """One node as a session: each probe is a step on that node alone (the active checks' way)."""

    def __init__(self, transport: SrunTransport, node: Node) -> None:
        self.transport, self.node = transport, node
        self.held: list[subprocess.Popen] = []  # steps kept for what their command left running

    def run(self, probe: Probe, timeout_s: float) -> Capture:
        # the probe's bound is what the caller gave; the step's launch gets its own allowance
        bounded = replace(probe, timeout_s=max(timeout_s, 0.001))
        deadline = time.monotonic() + timeout_s + self.transport.launch_timeout_s
        got = self.transport.run_step({self.node: [bounded]}, deadline=deadline, stop=threading.Event(), held=self.held)
        return replace(got[(self.node.name, probe.name)], probe=probe.name, argv=probe.argv)

    def close(self) -> None:
        """The session's held steps end (and what they kept running with them)."""
        held, self.held = self.held, []
        for proc in held:
            if proc.poll() is None:
                _abort(proc)
            children.forget(proc)
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()


class _Step:
    """One srun step: start it, read it, bound it, and turn what came back into Captures."""

    def __init__(
        self,
        transport: SrunTransport,
        work: Mapping[Node, list[Probe]],
        deadline: float,
        stop: threading.Event,
        held: list[subprocess.Popen] | None = None,
    ) -> None:
        self.t, self.work, self.deadline, self.stop, self.held = transport, dict(work), deadline, stop, held
        # what the commands leave running must outlive them (Probe.hold_s): only a session keeps a step
        holds = [p.hold_s for ps in self.work.values() for p in ps]
        self.hold_s = max(holds, default=0.0) if held is not None else 0.0
        self.out = StepOutput()
        self.budgets: dict[str, list[float]] = {}

    def run(self) -> dict[tuple[str, str], Capture]:
        begin = time.monotonic()
        if self.stop.is_set() or self.deadline - begin <= 0:
            cut = Cut.SIGNAL if self.stop.is_set() else Cut.DEADLINE
            return {(n.name, p.name): not_started(n, p, cut) for n, ps in self.work.items() for p in ps}
        left = self.deadline - begin
        self.budgets = {n.name: [min(p.timeout_s, left) for p in ps] for n, ps in self.work.items()}
        script = step_script(
            {n.name: [node_command(p, b) for p, b in zip(ps, self.budgets[n.name])] for n, ps in self.work.items()},
            self.hold_s,
        )
        try:
            proc = subprocess.Popen(
                self.t.command(list(self.work)),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env={k: v for k, v in os.environ.items() if k in KEEP_ENV},
                start_new_session=True,  # a Ctrl-C at the terminal is nodecheck's to handle
            )
        except OSError as e:
            detail = f"cannot run srun: {e.strerror or e}"
            return {
                (n.name, p.name): _capture(n, p, Outcome.UNREACHABLE, detail) for n, ps in self.work.items() for p in ps
            }
        children.started(proc)  # a held step too: ended with nodecheck, whatever way it ends
        _feed_stdin(proc, script.encode())
        why_ended = self._read(proc, begin)
        if self.hold_s and why_ended == "" and self.held is not None:
            self.held.append(proc)  # answered, and holds what its commands left running
            return self._settle(begin, why_ended)
        try:
            proc.wait(DRAIN_S if why_ended == "" else 0.0)
        except subprocess.TimeoutExpired:
            pass
        if proc.poll() is None:
            _abort(proc)
        children.forget(proc)
        self.out.close(time.monotonic())
        return self._settle(begin, why_ended, proc.returncode)

    def _read(self, proc: subprocess.Popen, begin: float) -> str:
        """Read until every node has settled or srun ended; returns why reading stopped: "" (srun
        ended, or every node answered), "deadline", "signal", or "bound" (some node did not)."""
        sel = selectors.DefaultSelector()
        assert proc.stdout is not None and proc.stderr is not None
        sel.register(proc.stdout, selectors.EVENT_READ, "out")
        sel.register(proc.stderr, selectors.EVENT_READ, "err")
        open_streams = 2
        launch_by = min(begin + self.t.launch_timeout_s, self.deadline)
        drain_until: float | None = None
        looked = 0.0
        try:
            while open_streams:
                now = time.monotonic()
                if self.stop.is_set():
                    return "signal"
                if now >= self.deadline:
                    return "deadline"
                if drain_until is None and now - looked >= LOOK_EVERY_S:  # a pass over every node
                    looked = now
                    settled = self._settled(now, launch_by)
                    if settled == "stuck":
                        return "bound"
                    if settled == "answered":  # the rest of srun's words, unless the step holds
                        drain_until = now + (0.0 if self.hold_s else DRAIN_S)
                if drain_until is not None and now >= drain_until:
                    return ""
                for key, _ in sel.select(timeout=POLL_S):
                    data = os.read(key.fileobj.fileno(), 65536)  # type: ignore[union-attr]
                    if not data:
                        sel.unregister(key.fileobj)
                        open_streams -= 1
                    else:
                        self.out.feed(key.data, data, time.monotonic())
            return ""
        finally:
            sel.close()

    def _settled(self, now: float, launch_by: float) -> str:
        """ "answered": every node ran all its probes; "stuck": every node answered, never started
        within the launch allowance, or is stuck in a probe past its bound; "" otherwise."""
        tasks = self.out.node_tasks()
        answered = True
        for node, probes in self.work.items():
            task = tasks.get(node.name)
            if task is not None and (task.garbled or _all_ran(task, len(probes))):
                continue
            answered = False
            if task is None:
                if now < launch_by:
                    return ""
                continue
            if not _stuck(task, self.budgets[node.name], now):
                return ""
        return "answered" if answered else "stuck"

    def _settle(self, begin: float, why_ended: str, code: int | None = None) -> dict[tuple[str, str], Capture]:
        tasks = self.out.node_tasks()
        failed = self.out.launch_failures()
        results: dict[tuple[str, str], Capture] = {}
        cut = {"signal": Cut.SIGNAL, "deadline": Cut.DEADLINE}.get(why_ended)
        for node, probes in self.work.items():
            task = tasks.get(node.name)
            if task is None:
                if node.name in failed:
                    why = f"Slurm could not start it: {failed[node.name]}"
                elif failed:  # srun aborted the step for another node's launch failure: run it again
                    continue
                elif cut is not None:
                    results.update({(node.name, p.name): not_started(node, p, cut) for p in probes})
                    continue
                elif why_ended == "bound":
                    why = f"srun: the task did not start within {self.t.launch_timeout_s:g} s" + (
                        f" ({self.out.srun_words()})" if self.out.srun_lines else ""
                    )
                else:
                    why = f"srun: {self.out.srun_words() or f'srun exited {code} without the task output'}"
                results.update({(node.name, p.name): _capture(node, p, Outcome.UNREACHABLE, why) for p in probes})
                continue
            for k, probe in enumerate(probes):
                capture = self._probe(node, probe, k, task, cut, failed)
                if capture is not None:
                    results[(node.name, probe.name)] = capture
        return results

    def _probe(
        self, node: Node, probe: Probe, k: int, task: TaskOutput, cut: Cut | None, failed: dict[str, str]
    ) -> Capture | None:
        """The capture of node's k-th probe, or None when it should run again (aborted by others)."""
        budget = self.budgets[node.name][k]
        now = time.monotonic()
        if k < len(task.frames):
            frame = task.frames[k]
            took = (frame.ended if frame.ended is not None else now) - frame.started
            if frame.rc is not None and took <= budget:
                return _from_frame(node, probe, Outcome.EXITED, frame, took, "")
            if frame.rc is None and task.garbled:
                return _from_frame(node, probe, Outcome.FAILED, frame, took, f"srun task: {task.garbled}", task)
            if cut is not None and frame.rc is None:
                if cut is Cut.DEADLINE:
                    timed_out = _from_frame(node, probe, Outcome.TIMEOUT, frame, took, "")
                    return cut_at_deadline(timed_out, min(took, budget), probe)
                return _from_frame(
                    node, probe, Outcome.TIMEOUT, frame, took, f"still running when {why_cut(cut)}", cut=cut
                )
            if frame.rc is None and took < budget:
                return (
                    None
                    if failed
                    else _from_frame(
                        node, probe, Outcome.FAILED, frame, took, "srun: the step ended before the probe did", task=task
                    )
                )
            timed_out = _from_frame(
                node, probe, Outcome.TIMEOUT, frame, min(took, budget), f"no answer within {budget:g} s"
            )
            return cut_at_deadline(timed_out, budget, probe) if budget < probe.timeout_s else timed_out
        if task.garbled:
            return _capture(node, probe, Outcome.FAILED, f"srun task: {task.garbled}")
        if cut is not None:
            return not_started(node, probe, cut)
        if failed:
            return None
        earlier = self.work[node][len(task.frames) - 1].name if task.frames else "the node's shell"
        return _capture(node, probe, Outcome.TIMEOUT, f"not run: {earlier} before it on this node never ended")


def _all_ran(task: TaskOutput, count: int) -> bool:
    return len(task.frames) == count and task.frames[-1].rc is not None


def _stuck(task: TaskOutput, budgets: list[float], now: float) -> bool:
    """The node's current probe ran past its bound and, with probes still to run after it, the
    remote `timeout` has not ended it; or nothing followed a probe that ended (the shell stopped).
    Past the bound of its last probe a node is waited for no longer: nothing would follow."""
    if not task.frames:
        return False
    k, frame = len(task.frames) - 1, task.frames[-1]
    if frame.rc is None:
        return now - frame.started > budgets[k] + (STUCK_AFTER_S if k < len(budgets) - 1 else 0.0)
    return frame.ended is not None and now - frame.ended > STUCK_AFTER_S


def _feed_stdin(proc: subprocess.Popen, data: bytes) -> None:
    def feed() -> None:
        try:
            assert proc.stdin is not None
            proc.stdin.write(data)
            proc.stdin.close()
        except OSError:  # srun gone before reading it: its stderr says why
            pass

    threading.Thread(target=feed, daemon=True, name="nodecheck-srun-stdin").start()


def _abort(proc: subprocess.Popen) -> None:
    """Cancel the step: srun's abort is a second SIGINT within a second; SIGKILL if it lingers."""
    try:
        proc.send_signal(signal.SIGINT)
        time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        proc.wait(ABORT_GRACE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    except ProcessLookupError:
        pass


def _from_frame(
    node: Node,
    probe: Probe,
    outcome: Outcome,
    frame: Frame,
    took: float,
    detail: str,
    task: TaskOutput | None = None,
    cut: Cut | None = None,
) -> Capture:
    err = frame.err
    if task is not None and task.err.buf and not frame.err.buf:  # slurmstepd's words, where they belong
        err = task.err
    details = [d for d in (detail, *cut_details(frame.out, err)) if d]
    return Capture(
        node.name,
        probe.name,
        probe.argv,
        outcome,
        frame.rc if outcome is Outcome.EXITED else None,
        frame.out.text(),
        err.text(),
        max(0.0, took),
        "; ".join(details),
        cut,
    )


def _capture(node: Node, probe: Probe, outcome: Outcome, detail: str) -> Capture:
    return Capture(node.name, probe.name, probe.argv, outcome, None, "", "", 0.0, detail)
