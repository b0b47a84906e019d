"""Run probes on this machine with no SSH (prolog mode, --local); same interface as the SSH transport."""
from __future__ import annotations

import importlib
import os
import signal
import subprocess
import threading
import time
import traceback

from nodecheck.model import Capture, Node, Outcome, Probe
from nodecheck.transport import MAX_CAPTURE_BYTES

KILL_WAIT_S = 2.0                              # after SIGKILL, how long to collect what was printed


class LocalTransport:
    def connect(self, node: Node, timeout_s: float) -> "LocalSession":
        return LocalSession(node)


class LocalSession:
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

        def call() -> None:
            try:
                module, _, name = probe.local_call.partition(":")
                box["out"] = getattr(importlib.import_module(module), name)()
            except RunArgvInstead as e:
                box["instead"] = str(e)
            except Exception:                  # reported as nodecheck's own failure, never a pass
                box["error"] = traceback.format_exc()
        # a daemon thread: a call stuck in the driver (a GPU fallen off the bus) cannot block exit
        worker = threading.Thread(target=call, name=f"local-{probe.name}", daemon=True)
        worker.start()
        worker.join(timeout_s)
        if worker.is_alive():
            return self._capture(probe, Outcome.TIMEOUT, None, "", "", started,
                                 f"in-process {probe.local_call} gave no answer within {timeout_s:g} s")
        if "instead" in box:
            return None
        if "error" in box:
            return self._capture(probe, Outcome.FAILED, None, "", box["error"], started,
                                 f"in-process {probe.local_call} failed: "
                                 f"{box['error'].strip().splitlines()[-1]}")
        return self._capture(probe, Outcome.EXITED, 0, box["out"], "", started)

    def _spawn(self, probe: Probe, timeout_s: float) -> Capture:
        started = time.monotonic()
        env = dict(os.environ, LC_ALL="C")
        try:
            # a new session, so a timeout can kill the tool and everything it started
            proc = subprocess.Popen(probe.argv, stdin=subprocess.PIPE if probe.stdin else subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                    start_new_session=True, text=True, errors="replace")
        except FileNotFoundError:
            return self._capture(probe, Outcome.EXITED, 127, "", f"{probe.argv[0]}: command not found", started)
        except PermissionError as e:
            return self._capture(probe, Outcome.EXITED, 126, "", f"{probe.argv[0]}: {e.strerror}", started)
        try:
            out, err = proc.communicate(probe.stdin, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            try:                               # a child that left the group may hold the pipes open
                out, err = proc.communicate(timeout=KILL_WAIT_S)
            except subprocess.TimeoutExpired:
                out, err = "", ""
            return self._capture(probe, Outcome.TIMEOUT, None, out, err, started,
                                 f"no answer within {timeout_s:g} s; killed")
        return self._capture(probe, Outcome.EXITED, proc.returncode, out, err, started)

    def _capture(self, probe: Probe, outcome: Outcome, code: int | None, out: str, err: str,
                 started: float, detail: str = "") -> Capture:
        # the same cap as over SSH, so a report never depends on which transport ran the probe
        cut = [f"{name} cut at {MAX_CAPTURE_BYTES >> 20} MiB" for name, text in (("stdout", out), ("stderr", err))
               if len(text) > MAX_CAPTURE_BYTES]
        return Capture(self.node.name, probe.name, probe.argv, outcome, code, out[:MAX_CAPTURE_BYTES],
                       err[:MAX_CAPTURE_BYTES], time.monotonic() - started,
                       "; ".join([d for d in (detail, *cut) if d]))

    def close(self) -> None:
        pass
