"""Run probes on this machine with no SSH (prolog mode, --local); same interface as the SSH transport."""

from __future__ import annotations

import importlib
import os
import select
import shutil
import signal
import subprocess
import threading
import time
import traceback

from nodecheck.core.model import Capture, Node, Outcome, Probe
from nodecheck.transport import CappedBuffer, children, cut_details

KILL_WAIT_S = 2.0  # after SIGKILL, how long to collect what was printed
TERM_GRACE_S = 0.5  # a timed-out tool gets TERM, then KILL this much later (the Prolog's deadline is short)
CHUNK = 65536


# A node's probes run side by side on this machine (transport.fanout), at most this many at once:
# the Prolog waits for its slowest probe, not for their sum. Each is one small process; a node with
# the cores for a GPU job has the cores for eight of them.
PROBES_AT_ONCE = 8

SHELL = "/bin/sh"
# A probe's process exists before nodecheck can tell the SIGKILL guardian of its group
# (transport.children): killed in between, nodecheck would leave the tool running unknown to
# anyone. So the process waits for GO_LINE on its stdin, written only after the guardian was told,
# and exits unrun at EOF (nodecheck gone). `read` takes the line byte by byte from the pipe, so
# the probe's own stdin follows it intact; a probe without stdin gets /dev/null, as before.
GO_LINE = b"go\n"
AFTER_GO = 'IFS= read -r go && [ "$go" = go ] || exit 125; exec "$@"'
AFTER_GO_NO_STDIN = 'IFS= read -r go && [ "$go" = go ] || exit 125; exec "$@" </dev/null'


def _not_runnable(program: str, path: str) -> tuple[int, str] | None:
    """(exit code, why) as a shell would answer for a program it cannot run (127: not found, 126:
    not executable), or None: the shell's exec would find it. Told apart here, before the spawn,
    so the capture says it as plainly as before the go handshake."""
    if "/" in program:
        if not os.path.exists(program):
            return 127, "command not found"
        if os.path.isdir(program) or not os.access(program, os.X_OK):
            return 126, "Permission denied"
        return None
    if shutil.which(program, path=path) is None:
        return 127, "command not found"
    return None


class LocalTransport:
    def connect(self, node: Node, timeout_s: float) -> LocalSession:
        return LocalSession(node)


class LocalSession:
    probes_at_once = PROBES_AT_ONCE  # every probe is its own process (or thread): they may overlap

    def __init__(self, node: Node) -> None:
        self.node = node

    def run(self, probe: Probe, timeout_s: float) -> Capture:
        if probe.local_call:
            capture = self._call(probe, timeout_s)
            if capture is not None:
                return capture
        return self._spawn(probe, timeout_s)

    def _call(self, probe: Probe, timeout_s: float) -> Capture | None:
        """Run the probe's in-process function in a thread bounded by the timeout; None: it asked
        for the command instead (e.g. NVML is not importable here, so nvidia-smi must answer)."""
        from nodecheck.transport import RunArgvInstead

        started, box = time.monotonic(), {}
        target = probe.local_call
        assert target is not None  # run() calls this only for a probe that has one

        def call() -> None:
            try:
                module, _, name = target.partition(":")
                box["out"] = getattr(importlib.import_module(module), name)()
            except RunArgvInstead as e:
                box["instead"] = str(e)
            except Exception:  # reported as nodecheck's own failure, never a pass
                box["error"] = traceback.format_exc()

        # a daemon thread: a call stuck in the driver (a GPU fallen off the bus) cannot block exit
        worker = threading.Thread(target=call, name=f"local-{probe.name}", daemon=True)
        worker.start()
        worker.join(timeout_s)
        if worker.is_alive():
            return self._capture(
                probe,
                Outcome.TIMEOUT,
                None,
                "",
                "",
                started,
                f"in-process {probe.local_call} gave no answer within {timeout_s:g} s",
            )
        if "instead" in box:
            return None
        if "error" in box:
            return self._capture(
                probe,
                Outcome.FAILED,
                None,
                "",
                box["error"],
                started,
                f"in-process {probe.local_call} failed: {box['error'].strip().splitlines()[-1]}",
            )
        return self._capture(probe, Outcome.EXITED, 0, box["out"], "", started)

    def _spawn(self, probe: Probe, timeout_s: float) -> Capture:
        started = time.monotonic()
        env = dict(os.environ, LC_ALL="C")
        missing = _not_runnable(probe.argv[0], env.get("PATH", os.defpath))
        if missing is not None:
            rc, why = missing
            return self._capture(probe, Outcome.EXITED, rc, "", f"{probe.argv[0]}: {why}", started)
        try:
            # a new session, so a timeout can kill the tool and everything it started; the tool
            # itself starts only once the guardian knows its group (AFTER_GO)
            proc = subprocess.Popen(
                [SHELL, "-c", AFTER_GO if probe.stdin else AFTER_GO_NO_STDIN, "nodecheck-probe", *probe.argv],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                start_new_session=True,
            )
        except OSError as e:  # no /bin/sh: nothing local can run
            return self._capture(probe, Outcome.EXITED, 126, "", f"{SHELL}: {e.strerror}", started)
        children.started(proc)  # ended below on every path; by children.end_all if we are stopped first
        out, err = CappedBuffer(), CappedBuffer()
        try:
            go = GO_LINE + (probe.stdin or "").encode()
            finished = _pump(proc, go, out, err, started + timeout_s)
            if not finished:
                children.end_group(proc, TERM_GRACE_S)
                # what it printed before the kill; a child that left the group may hold the pipes open
                _pump(proc, b"", out, err, time.monotonic() + KILL_WAIT_S)
                return self._capture(
                    probe, Outcome.TIMEOUT, None, out, err, started, f"no answer within {timeout_s:g} s; killed"
                )
            return self._capture(probe, Outcome.EXITED, proc.wait(), out, err, started)
        finally:
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
            try:  # reaped, never a zombie (killed above if it outlived us)
                proc.wait(KILL_WAIT_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            # nothing it started outlives the probe: a tool left in the background, a pipeline's other half
            children.ended(proc, TERM_GRACE_S)

    def _capture(
        self,
        probe: Probe,
        outcome: Outcome,
        code: int | None,
        out: CappedBuffer | str,
        err: CappedBuffer | str,
        started: float,
        detail: str = "",
    ) -> Capture:
        # the same cap and words as over SSH, so a report never depends on which transport ran the probe
        out, err = (_buffer(x) for x in (out, err))
        return Capture(
            self.node.name,
            probe.name,
            probe.argv,
            outcome,
            code,
            out.text(),
            err.text(),
            time.monotonic() - started,
            "; ".join([d for d in (detail, *cut_details(out, err)) if d]),
        )

    def close(self) -> None:
        pass


def _buffer(x: CappedBuffer | str) -> CappedBuffer:
    if isinstance(x, CappedBuffer):
        return x
    b = CappedBuffer()
    b.add(x.encode(errors="replace"))
    return b


def _pump(proc: subprocess.Popen, stdin: bytes, out: CappedBuffer, err: CappedBuffer, end: float) -> bool:
    """Feed stdin and read both streams as they come (at most the cap kept, the rest counted), until
    both reach EOF and the process exited (True) or `end` passes (False). Never holds more than the
    cap and one chunk, however much the tool prints."""
    assert proc.stdout is not None and proc.stderr is not None  # spawned with stdout=PIPE, stderr=PIPE
    streams = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    poller = select.poll()
    for fd in streams:
        poller.register(fd, select.POLLIN)
    if proc.stdin is not None and not proc.stdin.closed:
        if stdin:
            os.set_blocking(proc.stdin.fileno(), False)
            poller.register(proc.stdin.fileno(), select.POLLOUT)
        else:
            proc.stdin.close()
    open_fds = set(streams)
    while open_fds or proc.poll() is None:
        left = end - time.monotonic()
        if left <= 0:
            return False
        if not open_fds:  # both streams closed: wait for the exit alone
            try:
                proc.wait(min(left, 0.25))
            except subprocess.TimeoutExpired:
                pass
            continue
        for fd, _ in poller.poll(min(left, 0.25) * 1000):
            if fd in streams:
                data = os.read(fd, CHUNK)
                if data:
                    streams[fd].add(data)
                else:
                    poller.unregister(fd)
                    open_fds.discard(fd)
            else:  # stdin writable
                try:
                    stdin = stdin[os.write(fd, stdin[:CHUNK]) :]
                except (BrokenPipeError, BlockingIOError) as e:
                    stdin = b"" if isinstance(e, BrokenPipeError) else stdin
                if not stdin:
                    assert proc.stdin is not None  # its fd is the only one polled for POLLOUT
                    poller.unregister(fd)
                    proc.stdin.close()
    return True
