"""The launchers' side, shared by mpirun and srun: the coordinator the ranks meet at, a job that
starts one agent per host (ssh for the other nodes) and relays the ranks' output and exit codes,
and the agent itself (orted / slurmstepd), which forks its host's ranks."""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

from nccl_tests.state import AGENT_FLAG, COORD_ENV, HARD_CAP_S, Ctx, die_with_parent, entry_script


class Coordinator:
    """The rendezvous the ranks of one job meet at (what MPI's runtime does for nccl-tests)."""

    def __init__(self, address: str, nprocs: int, abort_on_loss: bool) -> None:
        self.nprocs, self.abort_on_loss = nprocs, abort_on_loss
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.bind((address, 0))
        self.listener.listen(512)
        self.address = "%s:%d" % self.listener.getsockname()
        self.lock = threading.Lock()
        self.hellos: dict[int, dict] = {}
        self.conns: dict[int, tuple[socket.socket, threading.Lock]] = {}
        self.barriers: dict[str, dict[int, object]] = {}
        self.finished: set[int] = set()
        self.agents: set[socket.socket] = set()
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _send(self, proc: int, obj: dict) -> None:
        sock, lock = self.conns[proc]
        with lock:
            try:
                sock.sendall(json.dumps(obj).encode() + b"\n")
            except OSError:
                pass

    def _serve(self, conn: socket.socket) -> None:
        proc = None
        rfile = conn.makefile("rb")
        try:
            for line in rfile:
                msg = json.loads(line)
                op = msg.get("op")
                if op == "agent":
                    with self.lock:
                        self.agents.add(conn)
                    continue
                proc = msg["proc"]
                with self.lock:
                    if op == "hello":
                        self.conns[proc] = (conn, threading.Lock())
                        self.hellos[proc] = msg
                        if len(self.hellos) == self.nprocs:
                            registry = {"procs": [self.hellos[p] for p in sorted(self.hellos)]}
                            for p in self.conns:
                                self._send(p, registry)
                    elif op == "barrier":
                        waiting = self.barriers.setdefault(msg["tag"], {})
                        waiting[proc] = msg.get("value")
                        if len(waiting) == self.nprocs:
                            go = {"op": "go", "tag": msg["tag"], "values": [waiting[p] for p in sorted(waiting)]}
                            del self.barriers[msg["tag"]]
                            for p in self.conns:
                                self._send(p, go)
                    elif op == "bye":
                        self.finished.add(proc)
        except (OSError, ValueError, KeyError):
            pass
        finally:
            with self.lock:
                self.agents.discard(conn)
                lost = proc is not None and proc not in self.finished and not self.closed
            conn.close()
            if lost and self.abort_on_loss:
                self.close_ranks()

    def close_ranks(self) -> None:
        """Drop every rank's connection: ranks waiting on a barrier (or hung) exit."""
        with self.lock:
            self.closed = True
            conns = [c for c, _ in self.conns.values()]
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def agents_gone(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            with self.lock:
                if not self.agents:
                    return
            time.sleep(0.01)

    def close(self) -> None:
        self.close_ranks()
        try:
            self.listener.close()
        except OSError:
            pass


@dataclass
class RankPlan:
    rank: int
    host: str
    env: dict[str, str]


@dataclass
class AgentHandle:
    host: str
    ranks: list[int]
    proc: subprocess.Popen
    ready: bool = False
    readers: list[threading.Thread] = field(default_factory=list)


@dataclass
class JobResult:
    exits: dict[int, int] = field(default_factory=dict)
    daemon_failed: tuple[str, int] | None = None  # (host, the ssh exit code)
    lost_daemon: str | None = None
    signalled: int = 0
    first_bad: tuple[int, int] | None = None  # (rank, exit code) of the first failing rank


class Job:
    """One launch: an agent per host, a coordinator, the relay of every rank's output."""

    def __init__(
        self,
        ctx: Ctx,
        mode: str,
        plan: list[RankPlan],
        argv: list[str],
        inherit_env: bool,
        prefix,
        stop_on_failure: bool,
        cwd: str | None = None,
    ) -> None:
        self.ctx, self.mode, self.plan, self.argv = ctx, mode, plan, argv
        self.cwd = cwd or os.getcwd()
        self.inherit_env, self.prefix, self.stop_on_failure = inherit_env, prefix, stop_on_failure
        self.events: list[tuple] = []
        self.cv = threading.Condition()
        self.agents: list[AgentHandle] = []
        self.signalled = 0
        self.partial: dict[tuple[int, int], bytes] = {}
        self.out_lock = threading.Lock()

    # events from the reader threads
    def _post(self, *event) -> None:
        with self.cv:
            self.events.append(event)
            self.cv.notify()

    def _next(self, timeout: float):
        with self.cv:
            if not self.events:
                self.cv.wait(timeout)
            return self.events.pop(0) if self.events else None

    def _read_agent(self, a: AgentHandle) -> None:
        for line in a.proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if "ready" in msg:
                self._post("ready", a)
            elif "exit" in msg:
                self._post("exit", msg["r"], msg["exit"])
            else:
                self._post("out", msg["r"], msg["fd"], base64.b64decode(msg["b"]))
        self._post("eof", a)

    def _read_stderr(self, a: AgentHandle) -> None:
        for chunk in iter(lambda: a.proc.stderr.read1(65536), b""):
            self._write(2, chunk)

    def _write(self, fd: int, data: bytes) -> None:
        with self.out_lock:
            stream = sys.stdout.buffer if fd == 1 else sys.stderr.buffer
            try:
                stream.write(data)
                stream.flush()
            except OSError:
                pass

    def _relay(self, rank: int, fd: int, data: bytes, final: bool = False) -> None:
        if self.prefix is None:
            if data:
                self._write(fd, data)
            return
        buf = self.partial.pop((rank, fd), b"") + data
        *lines, rest = buf.split(b"\n")
        out = b"".join(self.prefix(rank, fd) + ln + b"\n" for ln in lines)
        if final and rest:
            out += self.prefix(rank, fd) + rest + b"\n"
        elif rest:
            self.partial[(rank, fd)] = rest
        if out:
            self._write(fd, out)

    def _spawn(self, host: str, ranks: list[RankPlan]) -> AgentHandle:
        if self.ctx.is_me(host):
            cmd = [
                sys.executable,
                "-I",
                entry_script(),
                self.ctx.node,
                self.ctx.address,
                self.ctx.net,
                self.ctx.state_path,
                self.mode,
                self.mode,
                AGENT_FLAG,
            ]
        else:
            cmd = ["ssh", "-F", self.ctx.ssh_config, "-o", "BatchMode=yes", "-x", host, f"{self.mode} {AGENT_FLAG}"]
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        spec = {
            "coord": self.coord.address,
            "argv": self.argv,
            "inherit": self.inherit_env,
            "cwd": self.cwd,
            "ranks": [{"rank": r.rank, "env": r.env} for r in ranks],
        }
        try:
            proc.stdin.write(json.dumps(spec).encode() + b"\n")
            proc.stdin.flush()
        except OSError:
            pass
        a = AgentHandle(host, [r.rank for r in ranks], proc)
        for target in (self._read_agent, self._read_stderr):
            a.readers.append(threading.Thread(target=target, args=(a,), daemon=True))
            a.readers[-1].start()
        return a

    def _on_signal(self, signum, frame) -> None:
        self.signalled = signum
        with self.cv:
            self.cv.notify()

    def run(self) -> JobResult:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGALRM):
            signal.signal(sig, self._on_signal)
        signal.alarm(HARD_CAP_S)
        self.coord = Coordinator(self.ctx.address, len(self.plan), abort_on_loss=not self.stop_on_failure)
        hosts: dict[str, list[RankPlan]] = {}
        for r in self.plan:
            r.env[COORD_ENV] = self.coord.address  # how a rank finds the rendezvous
            hosts.setdefault(r.host, []).append(r)
        res = JobResult()
        for host, ranks in hosts.items():
            self.agents.append(self._spawn(host, ranks))
        eofs, grace_until = 0, None
        while eofs < len(self.agents):
            if self.signalled:
                res.signalled = self.signalled
                break
            if grace_until is not None and time.monotonic() >= grace_until:
                break
            ev = self._next(0.05)
            if ev is None:
                continue
            kind = ev[0]
            if kind == "ready":
                ev[1].ready = True
                if all(a.ready for a in self.agents):
                    for a in self.agents:
                        try:
                            a.proc.stdin.write(b"go\n")
                            a.proc.stdin.flush()
                        except OSError:
                            pass
            elif kind == "out":
                self._relay(ev[1], ev[2], ev[3])
            elif kind == "exit":
                rank, code = ev[1], ev[2]
                for fd in (1, 2):
                    self._relay(rank, fd, b"", final=True)
                res.exits[rank] = code
                if code != 0 and res.first_bad is None:
                    res.first_bad = (rank, code)
                    if self.stop_on_failure:  # what the ranks already wrote still arrives
                        grace_until = time.monotonic() + 0.3
            elif kind == "eof":
                a, eofs = ev[1], eofs + 1
                rc = a.proc.wait()
                if not a.ready:
                    res.daemon_failed = (a.host, rc)
                    break
                if grace_until is None and any(r not in res.exits for r in a.ranks):
                    res.lost_daemon = a.host
                    break
        self.shutdown()
        return res

    def shutdown(self) -> None:
        """End every rank: close the agents' sessions (they kill their ranks), drop the ranks'
        coordinator links, wait for the agents (also those whose ssh client is already gone), then
        kill what is left."""
        for a in self.agents:
            try:
                a.proc.stdin.close()
            except OSError:
                pass
        self.coord.close_ranks()
        deadline = time.monotonic() + 5.0
        for a in self.agents:
            try:
                a.proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        self.coord.agents_gone(deadline)
        for a in self.agents:
            if a.proc.poll() is None:
                a.proc.kill()
                a.proc.wait()
        self.coord.close()
        for a in self.agents:  # what is still in the pipes is relayed
            for t in a.readers:
                t.join(1.0)
        while True:
            ev = self._next(0)
            if ev is None:
                break
            if ev[0] == "out":
                self._relay(ev[1], ev[2], ev[3])


def agent_main(ctx: Ctx) -> int:
    """Start this host's ranks, relay their output and exit codes as JSON lines on stdout, and kill
    them when stdin (the ssh session) closes, the coordinator goes away, or a signal comes."""
    die_with_parent()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGALRM):
        signal.signal(sig, lambda *_: stop.set())
    signal.alarm(HARD_CAP_S)
    line = sys.stdin.buffer.readline()
    if not line:
        return 1
    spec = json.loads(line)
    out_lock = threading.Lock()

    def emit(obj: dict) -> None:
        with out_lock:
            try:
                sys.stdout.buffer.write(json.dumps(obj).encode() + b"\n")
                sys.stdout.buffer.flush()
            except OSError:
                stop.set()

    control = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        host, _, port = spec["coord"].rpartition(":")
        control.bind((ctx.address, 0))
        control.connect((host, int(port)))
        control.sendall(b'{"op": "agent"}\n')
    except OSError:
        return 1

    def watch(read) -> None:
        try:
            while read():
                pass
        except OSError:
            pass
        stop.set()

    # like orted: report in, and start the ranks only when every daemon of the job has reported
    emit({"ready": ctx.node})
    if sys.stdin.buffer.readline().strip() != b"go":
        return 0
    threading.Thread(target=watch, args=(lambda: sys.stdin.buffer.read1(4096),), daemon=True).start()
    threading.Thread(target=watch, args=(lambda: control.recv(4096),), daemon=True).start()

    children: list[tuple[int, subprocess.Popen, list[threading.Thread]]] = []
    for r in spec["ranks"]:
        env = dict(os.environ) if spec["inherit"] else {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        env.update(r["env"])
        try:
            # the launcher's working directory where the node has it (as orted and slurmstepd do)
            cwd = spec["cwd"] if os.path.isdir(spec["cwd"]) else os.environ.get("HOME", "/")
            child = subprocess.Popen(
                spec["argv"],
                env=env,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as e:
            emit(
                {"r": r["rank"], "fd": 2, "b": base64.b64encode(f"{spec['argv'][0]}: {e.strerror}\n".encode()).decode()}
            )
            emit({"r": r["rank"], "exit": 127})
            continue
        pumps = []
        for fd, pipe in ((1, child.stdout), (2, child.stderr)):

            def pump(rank=r["rank"], fd=fd, pipe=pipe) -> None:
                for chunk in iter(lambda: pipe.read1(65536), b""):
                    emit({"r": rank, "fd": fd, "b": base64.b64encode(chunk).decode()})

            t = threading.Thread(target=pump, daemon=True)
            t.start()
            pumps.append(t)
        children.append((r["rank"], child, pumps))

    running = list(children)
    while running and not stop.is_set():
        for item in list(running):
            rank, child, pumps = item
            code = child.poll()
            if code is not None:
                for t in pumps:
                    t.join(2)
                emit({"r": rank, "exit": code if code >= 0 else 128 - code})
                running.remove(item)
        time.sleep(0.01)
    if running:  # the session or the coordinator went away
        for _, child, _ in running:
            _signal_group(child, signal.SIGTERM)
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline and any(c.poll() is None for _, c, _ in running):
            time.sleep(0.01)
        for rank, child, pumps in running:
            _signal_group(child, signal.SIGKILL)
            code = child.wait()
            for t in pumps:
                t.join(0.5)
            emit({"r": rank, "exit": code if code >= 0 else 128 - code})
    # exit with the coordinator link still open: the kernel closes it after this process's memory is
    # gone, so whoever waits for the link to close (mpirun after a signal) sees no agent left behind
    try:
        sys.stdout.flush()
    except OSError:
        pass
    os._exit(0)


def _signal_group(child: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(child.pid, sig)
    except OSError:
        pass
