"""SSH transport over paramiko: strict known_hosts checking, one connection per node, bounded waits.

Host keys are checked against known_hosts (known_hosts.py): the node's name decides, its address
only when nothing is recorded under the name. An unknown key makes the node UNREACHABLE unless the
operator opted into trust-on-first-use (--accept-new-host-keys); a changed or revoked key always
does. Nothing runs on a node whose key did not verify. ssh_config (ProxyJump, ProxyCommand, User, Port,
IdentityFile, HostName) is honoured when the inventory names one; its StrictHostKeyChecking is not:
strictness is ours.
"""

from __future__ import annotations

import getpass
import ipaddress
import logging
import os
import re
import select
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

import paramiko

from nodecheck.core.model import Capture, Cut, Node, Outcome, Probe, excerpt, one_line
from nodecheck.transport import CappedBuffer, FailedSession, cut_details, remote_command
from nodecheck.transport.known_hosts import KnownHosts, node_names
from nodecheck.transport.known_hosts import Verdict as KeyVerdict

DEFAULT_CONNECT_TIMEOUT_S = 10.0
GLOBAL_KNOWN_HOSTS = "/etc/ssh/ssh_known_hosts"
MAX_JUMP_HOPS = 4
DEFAULT_IDENTITIES = ("~/.ssh/id_ed25519", "~/.ssh/id_ecdsa", "~/.ssh/id_rsa")


# paramiko reports connection trouble through logging too; our outcomes carry it instead, and a
# handler keeps Python's last-resort logger from printing it over the report.
logging.getLogger("paramiko").addHandler(logging.NullHandler())


EXIT_SIGNAL = "_nodecheck_exit_signal"  # the Channel attribute _handle_channel_request sets


def _private(obj: object) -> Any:
    """`obj`, for reaching paramiko's private attributes, which its type stubs leave out: its public API
    has no way to hear `exit-signal` or to bound the wait for an exec request's answer. Every use
    falls back (or fails safe) where paramiko's internals moved."""
    return obj


def _handle_channel_request(chan: paramiko.Channel, m: paramiko.Message) -> None:
    """paramiko's client ignores `exit-signal` (RFC 4254 6.10): a tool killed by a signal then reads
    as exit status -1, the same as a connection that died. On the nodes `timeout` re-raises its
    child's signal, so sshd reports a killed tool this way. Recorded here (name, core dumped,
    message) and the status event set, as paramiko does for `exit-status`; everything else is
    paramiko's own handling."""
    start = m.packet.tell()
    if m.get_text() != "exit-signal":
        m.packet.seek(start)
        return _private(paramiko.Channel)._handle_request(chan, m)
    want_reply = m.get_boolean()
    name, core_dumped, message = m.get_text(), m.get_boolean(), m.get_text()
    setattr(chan, EXIT_SIGNAL, (name, core_dumped, message))
    chan.status_event.set()
    if want_reply:  # the RFC says false; answered anyway, as paramiko answers
        reply = paramiko.Message()
        reply.add_byte(paramiko.common.cMSG_CHANNEL_SUCCESS)
        reply.add_int(chan.remote_chanid)
        _private(chan.transport)._send_user_message(reply)


class _SendBound(threading.local):
    """The monotonic time by which this thread's sends must be out (None: paramiko's own bound)."""

    end: float | None = None


_SEND_BOUND = _SendBound()


class SendTimeout(paramiko.SSHException):
    """A send held past the probe's end: the node began a key exchange and never finished it."""


class _Transport(paramiko.Transport):
    """paramiko's client transport, hearing `exit-signal` too (_handle_channel_request). The
    handler table is paramiko's documented-by-code dispatch; without it (paramiko's internals
    moved) a killed tool still never passes: it reads as the connection lost.

    And its sends bounded by the probe: while a key exchange runs, paramiko holds every user message
    (a channel open, an exec request, stdin, EOF, a channel close) for clear_to_send_timeout, 30 s,
    whatever the caller's bound. A node that starts a re-key and never finishes it held a 3 s probe
    for 33 s. Here a send made by a thread inside SshSession.run waits at most until that probe's end
    (_SEND_BOUND, per thread: probes of one node may share the connection), then raises SendTimeout."""

    if isinstance(getattr(paramiko.Transport, "_channel_handler_table", None), dict):
        _channel_handler_table = {
            **_private(paramiko.Transport)._channel_handler_table,
            paramiko.common.MSG_CHANNEL_REQUEST: _handle_channel_request,
        }

    def _send_user_message(self, data) -> None:
        end = _SEND_BOUND.end
        lock, clear = getattr(self, "clear_to_send_lock", None), getattr(self, "clear_to_send", None)
        if end is None or lock is None or clear is None:  # (paramiko's internals moved: its own wait)
            return _private(super())._send_user_message(data)
        while True:  # paramiko's loop, with the probe's end for its 30 s
            clear.wait(min(0.1, max(0.0, end - time.monotonic())))
            if not _private(self).active:
                return  # paramiko drops a message for a dead connection, and so do we
            lock.acquire()
            if clear.is_set():
                break
            lock.release()
            if time.monotonic() >= end:
                raise SendTimeout("the node began a key exchange and never finished it")
        try:
            _private(self)._send_message(data)
        finally:
            lock.release()


class HostKeyRejected(Exception):
    pass


class HandshakeTimeout(Exception):
    pass


def _try_key(t: paramiko.Transport, user: str, key: paramiko.PKey, end: float) -> bool:
    t.auth_timeout = _left(end)  # each attempt gets what is left, not a fresh bound
    try:
        t.auth_publickey(user, key)
        return True
    except paramiko.AuthenticationException:
        return False


def _left(end: float) -> float:
    """Seconds left before `end`; none left is a timeout, whichever stage we are at."""
    left = end - time.monotonic()
    if left <= 0:
        raise TimeoutError("connect timeout")
    return left


def _tcp_connect(host: str, port: int, end: float) -> socket.socket:
    """socket.create_connection, but name resolution is bounded too: getaddrinfo has no timeout
    and a slow resolver would otherwise hold a fan-out worker far past the connect timeout."""
    last: OSError = OSError(f"no address for {host}")
    for family, kind, proto, _, address in _resolve(host, port, end):
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(_left(end))
            sock.connect(address)
            return sock
        except OSError as e:
            sock.close()
            last = e
    raise last


class ResolveTimeout(socket.timeout):
    """The name lookup outlived the connect timeout (getaddrinfo has no timeout of its own)."""


def _resolve(host: str, port: int, end: float) -> list:
    try:
        ipaddress.ip_address(host)  # a literal address needs no resolver
        return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except ValueError:
        pass
    answer: dict = {}

    def lookup() -> None:
        try:
            answer["infos"] = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as e:
            answer["error"] = e

    worker = threading.Thread(target=lookup, daemon=True, name="nodecheck-resolve")
    worker.start()
    worker.join(_left(end))
    if "error" in answer:
        raise answer["error"]
    if "infos" not in answer:
        raise ResolveTimeout(f"resolving {host} took longer than the connect timeout")
    return answer["infos"]


def _server_key(t: paramiko.Transport) -> paramiko.PKey:
    """start_client(timeout=…) returns silently when the timeout expires; a session without a
    server key is a handshake that never finished."""
    try:
        return t.get_remote_server_key()
    except paramiko.SSHException:
        raise t.get_exception() or HandshakeTimeout() from None


class SshTransport:
    """Opens one verified, authenticated connection per node; thread-safe, caches parsed files."""

    def __init__(
        self, *, accept_new_host_keys: bool = False, connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
    ) -> None:
        self.accept_new = accept_new_host_keys
        self.connect_timeout_s = connect_timeout_s
        self._lock = threading.Lock()
        self._known: dict[str, KnownHosts] = {}
        self._keys: dict[str, paramiko.PKey] = {}
        self._configs: dict[str, paramiko.SSHConfig] = {}

    def connect(self, node: Node, timeout_s: float) -> SshSession | FailedSession:
        """One bound for everything a connection takes: name resolution, every ProxyJump hop,
        TCP, banner, key exchange and authentication share the same end time."""
        timeout_s = min(timeout_s, self.connect_timeout_s)
        end = time.monotonic() + timeout_s
        target = {"node": node, "host": node.address, "port": node.port, "user": node.user}
        try:
            target = self._target(node)
            transport, hops = self._open(target, end)
        except Exception as e:  # every connect problem is an outcome, not a crash
            return FailedSession(node, describe_connect_error(e, target, timeout_s))
        return SshSession(node, transport, hops)

    # -- resolution -----------------------------------------------------------------------------
    def _target(self, node: Node) -> dict:
        """Inventory values win; ssh_config fills what the inventory left unset."""
        cfg = self._ssh_config(node.ssh_config).lookup(node.name) if node.ssh_config else {}
        identities = [node.identity_file] if node.identity_file else cfg.get("identityfile", [])
        port = node.port if node.port != 22 or "port" not in cfg else int(cfg["port"])
        return {
            "node": node,
            "host": node.address if node.address != node.name else cfg.get("hostname", node.name),
            "port": port,
            "user": node.user or cfg.get("user") or getpass.getuser(),
            "identities": identities or [p for p in DEFAULT_IDENTITIES if Path(p).expanduser().exists()],
            "known_hosts": node.known_hosts or (cfg.get("userknownhostsfile") or "~/.ssh/known_hosts").split()[0],
            "proxyjump": cfg.get("proxyjump"),
            "proxycommand": cfg.get("proxycommand"),
        }

    def _ssh_config(self, path: str) -> paramiko.SSHConfig:
        with self._lock:
            if path not in self._configs:
                self._configs[path] = paramiko.SSHConfig.from_path(os.path.expanduser(path))
            return self._configs[path]

    # -- connection -----------------------------------------------------------------------------
    def _open(self, target: dict, end: float, depth: int = 0) -> tuple[paramiko.Transport, list]:
        hops: list = []  # jump-host transports this connection rides on
        sock = self._socket(target, end, hops, depth)
        t = _Transport(sock)
        try:
            t.banner_timeout = t.handshake_timeout = t.auth_timeout = _left(end)
            known = self._known_hosts(target["known_hosts"])
            names = node_names(target["node"].name, target["host"], target["port"])
            key_types = known.key_types_for(names)
            if key_types:  # ask for the key type we can verify, as OpenSSH does
                t.get_security_options().key_types = key_types
            t.start_client(timeout=_left(end))
            self._verify_host_key(_server_key(t), known, names, target)
            self._authenticate(t, target, end)
        except BaseException:
            for h in [t, *reversed(hops)]:
                h.close()
            raise
        return t, hops

    def _socket(self, target: dict, end: float, hops: list, depth: int):
        if target["proxyjump"] and target["proxyjump"].lower() != "none":
            if depth >= MAX_JUMP_HOPS:
                raise paramiko.SSHException(f"more than {MAX_JUMP_HOPS} ProxyJump hops (a loop?)")
            jump = self._target(_jump_node(target["proxyjump"].split(",")[0], target["node"]))
            jt, jhops = self._open(jump, end, depth + 1)
            hops.extend(jhops + [jt])
            return jt.open_channel(
                "direct-tcpip", (target["host"], target["port"]), ("127.0.0.1", 0), timeout=_left(end)
            )
        if target["proxycommand"] and target["proxycommand"].lower() != "none":
            return paramiko.ProxyCommand(target["proxycommand"])
        return _tcp_connect(target["host"], target["port"], end)

    def _known_hosts(self, path: str) -> KnownHosts:
        """One parsed store per known_hosts file (plus the system-wide one), shared by all nodes."""
        path = os.path.expanduser(path)
        with self._lock:
            if path not in self._known:
                self._known[path] = KnownHosts([GLOBAL_KNOWN_HOSTS, path], writable=path)
            return self._known[path]

    def _verify_host_key(self, key: paramiko.PKey, known: KnownHosts, names: list[list[str]], target: dict) -> None:
        """Nothing runs on a node until this passes: a revoked or changed key never does; an
        unknown one only with trust-on-first-use, which records it."""
        result = known.check(names, key)
        if result.verdict is KeyVerdict.MATCH:
            return
        if result.verdict is KeyVerdict.UNKNOWN and self.accept_new:
            known.add([n for group in names for n in group], key)
            return
        hint = (
            "; add a verified key, or opt into trust-on-first-use with --accept-new-host-keys"
            if result.verdict is KeyVerdict.UNKNOWN
            else ""
        )
        raise HostKeyRejected(result.detail + hint)

    def warnings(self) -> list[str]:
        """What the operator should know about the files read: unusable known_hosts lines, …"""
        with self._lock:
            return [w for store in self._known.values() for w in store.warnings]

    def _authenticate(self, t: paramiko.Transport, target: dict, end: float) -> None:
        """Identity files first, then the ssh-agent's keys; every attempt within the connect bound."""
        tried: list[str] = []
        for path in target["identities"]:
            if _try_key(t, target["user"], self._private_key(path), end):
                return
            tried.append(path)
        if os.environ.get("SSH_AUTH_SOCK"):
            # one agent connection per node: paramiko's agent socket is not safe to share between
            # threads (concurrent signing requests interleave and hang)
            agent = paramiko.Agent()
            try:
                if any(_try_key(t, target["user"], key, end) for key in agent.get_keys()):
                    return
                tried.append("ssh-agent")
            finally:
                agent.close()
        raise paramiko.AuthenticationException(
            f"authentication failed for {target['user']}@{target['host']} "
            f"(tried {', '.join(tried) or 'no keys: set identity_file or run an ssh-agent'})"
        )

    def _private_key(self, path: str) -> paramiko.PKey:
        path = os.path.expanduser(path)
        with self._lock:
            if path not in self._keys:
                self._keys[path] = _load_key(path)
            return self._keys[path]


def _load_key(path: str) -> paramiko.PKey:
    try:
        return paramiko.PKey.from_path(path)
    except paramiko.PasswordRequiredException:
        raise paramiko.AuthenticationException(
            f"identity file {path} is passphrase-protected; load it into ssh-agent"
        ) from None
    except (OSError, paramiko.SSHException, ValueError) as e:
        raise paramiko.AuthenticationException(f"cannot use identity file {path}: {e}") from None


class ProbeTimeout(Exception):
    """A step of a probe (channel open, exec request, stdin) got no answer before the probe's bound."""


class SshSession:
    """Every blocking step of a probe shares the probe's one bound: opening the channel, the exec
    request (paramiko's exec_command waits for the answer without a timeout: an sshd that never
    answers would hold the worker for ever), sending stdin, reading the output and closing."""

    def __init__(self, node: Node, transport: paramiko.Transport, hops: list) -> None:
        self.node, self.t, self.hops = node, transport, hops

    def run(self, probe: Probe, timeout_s: float) -> Capture:
        """The probe's capture; never raises (every send, the close included, ends by the probe's end)."""
        started = time.monotonic()
        _SEND_BOUND.end = started + timeout_s
        try:
            return self._run(probe, timeout_s, started)
        except Exception as e:  # noqa: BLE001 - whatever paramiko raises is this node's outcome, not a crash
            return self._lost(probe, started, f"connection lost during {probe.name}: {e or type(e).__name__}")
        finally:
            _SEND_BOUND.end = None

    def _run(self, probe: Probe, timeout_s: float, started: float) -> Capture:
        end = started + timeout_s
        try:
            chan = self.t.open_session(timeout=timeout_s)
        except Exception as e:  # the connection died between probes, or never answered
            if time.monotonic() >= end and self.t.is_active():
                return self._capture(
                    probe,
                    Outcome.TIMEOUT,
                    None,
                    CappedBuffer(),
                    CappedBuffer(),
                    started,
                    f"no answer within {timeout_s:g} s (the node never opened the session channel)",
                )
            return self._lost(probe, started, f"connection lost before {probe.name}: {e or type(e).__name__}")
        try:
            return self._exec(chan, probe, timeout_s, started)
        except ProbeTimeout as e:
            return self._capture(
                probe,
                Outcome.TIMEOUT,
                None,
                CappedBuffer(),
                CappedBuffer(),
                started,
                f"no answer within {timeout_s:g} s ({e})",
            )
        except (OSError, EOFError, paramiko.SSHException) as e:
            if isinstance(e, socket.timeout) or time.monotonic() >= end:
                return self._capture(
                    probe,
                    Outcome.TIMEOUT,
                    None,
                    CappedBuffer(),
                    CappedBuffer(),
                    started,
                    f"no answer within {timeout_s:g} s (sending its input)",
                )
            return self._lost(probe, started, f"connection lost during {probe.name}: {e or type(e).__name__}", cut=None)
        finally:
            _close(chan)

    def _exec(self, chan: paramiko.Channel, probe: Probe, timeout_s: float, started: float) -> Capture:
        end = started + timeout_s
        _exec_request(chan, remote_command(probe, timeout_s), end)
        if probe.stdin:
            chan.settimeout(max(0.001, end - time.monotonic()))  # a full window waits at most what is left
            chan.sendall(probe.stdin.encode())
        chan.shutdown_write()
        out, err = CappedBuffer(), CappedBuffer()
        while True:
            while chan.recv_ready():
                out.add(chan.recv(65536))
            while chan.recv_stderr_ready():
                err.add(chan.recv_stderr(65536))
            if (
                chan.exit_status_ready()
                and (chan.eof_received or chan.closed)
                and not chan.recv_ready()
                and not chan.recv_stderr_ready()
            ):
                return self._ended(chan, probe, out, err, started)
            remaining = end - time.monotonic()
            if remaining <= 0:
                return self._capture(
                    probe, Outcome.TIMEOUT, None, out, err, started, f"no answer within {timeout_s:g} s"
                )
            _wait_readable(chan, min(remaining, 0.25))

    def _ended(
        self, chan: paramiko.Channel, probe: Probe, out: CappedBuffer, err: CappedBuffer, started: float
    ) -> Capture:
        """How the remote command ended: an exit status, a signal, or neither (the connection or
        the session gone before either came: never an exit code, whatever paramiko's -1 says)."""
        killed = getattr(chan, EXIT_SIGNAL, None)
        if killed is not None:
            code, detail = _signal_exit(*killed)
            return self._capture(probe, Outcome.EXITED, code, out, err, started, detail)
        code = chan.recv_exit_status()
        if code == -1:  # paramiko's "none came": a real exit status is unsigned
            return self._capture(
                probe,
                Outcome.UNREACHABLE,
                None,
                out,
                err,
                started,
                f"connection lost during {probe.name}: {self._why_lost()}",
            )
        return self._finished(probe, code, out, err, started)

    def _why_lost(self) -> str:
        e = self.t.get_exception()
        if e is not None and str(e):
            return str(e)
        if e is not None or not self.t.is_active():
            return "the connection closed before the command's exit status"
        return "the node closed the session without an exit status"

    def _finished(self, probe: Probe, code: int, out: CappedBuffer, err: CappedBuffer, started: float) -> Capture:
        stderr = err.text()
        if code == 127 and _wrapper_missing(stderr):
            return self._capture(
                probe,
                Outcome.FAILED,
                code,
                out,
                err,
                started,
                f"the node lacks coreutils `env`/`timeout`, which bound every remote command: {stderr.strip()[:200]}",
            )
        return self._capture(probe, Outcome.EXITED, code, out, err, started)

    def _lost(self, probe: Probe, started: float, detail: str, cut: Cut | None = Cut.CONNECTION_LOST) -> Capture:
        """UNREACHABLE with nothing read: the connection went before or during the probe."""
        return self._capture(probe, Outcome.UNREACHABLE, None, CappedBuffer(), CappedBuffer(), started, detail, cut=cut)

    def _capture(
        self,
        probe: Probe,
        outcome: Outcome,
        code: int | None,
        out: CappedBuffer,
        err: CappedBuffer,
        started: float,
        detail: str = "",
        cut: Cut | None = None,
    ) -> Capture:
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
            cut,
        )

    def close(self) -> None:
        for t in [self.t, *reversed(self.hops)]:
            t.close()


def _close(chan: paramiko.Channel) -> None:
    """Send the channel's close, by the probe's end: a close that cannot be sent (the connection
    stalled in a key exchange, or gone) is abandoned; the remote `timeout` still ends the command."""
    try:
        chan.close()
    except (OSError, EOFError, paramiko.SSHException):
        pass


def _exec_request(chan: paramiko.Channel, command: str, end: float) -> None:
    """Channel.exec_command with its wait for the server's answer bounded by `end`: the request is
    sent as paramiko sends it, then the channel's event is waited on with a timeout (paramiko's own
    wait has none). ProbeTimeout when no answer came; paramiko's SSHException when refused."""
    try:
        m = paramiko.Message()
        m.add_byte(paramiko.common.cMSG_CHANNEL_REQUEST)
        m.add_int(chan.remote_chanid)
        m.add_string("exec")
        m.add_boolean(True)
        m.add_string(command)
        _private(chan)._event_pending()
        pending = chan.event
    except AttributeError:  # paramiko's internals moved: its own call, abandoned at the bound
        return _exec_in_thread(chan, command, end)
    _private(chan.transport)._send_user_message(m)
    if not pending.wait(max(0.0, end - time.monotonic())):
        raise ProbeTimeout("the node never answered the exec request")
    _private(chan)._wait_for_event()  # answered: returns, or raises the refusal / the closed channel


def _exec_in_thread(chan: paramiko.Channel, command: str, end: float) -> None:
    box: dict = {}

    def call() -> None:
        try:
            chan.exec_command(command)
        except BaseException as e:  # handed to the caller's thread
            box["error"] = e

    worker = threading.Thread(target=call, daemon=True, name="nodecheck-exec")
    worker.start()
    worker.join(max(0.0, end - time.monotonic()))
    if worker.is_alive():
        chan.close()  # (the session's close ends the transport, and the thread with it)
        raise ProbeTimeout("the node never answered the exec request")
    if "error" in box:
        raise box["error"]


def _signal_exit(name: str, core_dumped: bool, message: str) -> tuple[int | None, str]:
    """An exit-signal as the local transport reports a killed tool: exit code -N (subprocess's
    convention; N this host's number for the name: the protocol sends names, not numbers) and
    "killed by SIGKILL". A name this host does not know (OpenSSH sends "SIG@openssh.com" for a
    signal outside the RFC's list) has no number: exit code None, the name in the detail."""
    bare = name.removeprefix("SIG")
    number = getattr(signal.Signals, f"SIG{bare}", None) if bare.isalnum() else None
    what = f"SIG{bare}" if number is not None else f"signal {excerpt(one_line(name), 40)}"
    detail = f"killed by {what}" + (" (core dumped)" if core_dumped else "")
    if message.strip():
        detail += f": {excerpt(one_line(message.strip()), 200)}"
    return (-int(number) if number is not None else None), detail


def _wait_readable(chan: paramiko.Channel, timeout_s: float) -> None:
    """poll(), not select(): with a large fan-out, descriptors pass 1023 and select() refuses them."""
    poller = select.poll()
    poller.register(chan.fileno(), select.POLLIN)
    poller.poll(timeout_s * 1000)


def _wrapper_missing(stderr: str) -> bool:
    """Exit 127 from `env`/`timeout` themselves, not from the tool they were asked to run
    (coreutils timeout says "failed to run command 'ibstat'" when the tool is missing)."""
    return "failed to run command" not in stderr and re.search(r"\b(env|timeout)\b", stderr) is not None


def _jump_node(spec: str, via: Node) -> Node:
    """A ProxyJump hop '[user@]host[:port]', resolved through the same ssh_config and verified
    against the same known_hosts as the node behind it."""
    user, _, hostport = spec.rpartition("@")
    host, _, port = hostport.partition(":")
    return Node(
        name=host,
        address=host,
        port=int(port or 22),
        user=user or None,
        identity_file=via.identity_file,
        known_hosts=via.known_hosts,
        ssh_config=via.ssh_config,
    )


def describe_connect_error(e: BaseException, target: dict, timeout_s: float) -> str:
    where = f"{target['host']}:{target['port']}"
    if isinstance(e, HostKeyRejected):
        return str(e)
    if isinstance(e, HandshakeTimeout) or _banner_timeout(e):
        return f"{where}: no SSH handshake within {timeout_s:g} s (something listens there but does not speak SSH)"
    if isinstance(e, paramiko.BadHostKeyException):
        return f"host key MISMATCH for {target['node'].name}: {e}"
    if isinstance(e, paramiko.SSHException) and "protocol banner" in str(e):
        return f"{where} closed the connection before its SSH banner (sshd MaxStartups or a TCP wrapper?)"
    if isinstance(e, ResolveTimeout):
        return f"{e} ({timeout_s:g} s)"
    if isinstance(e, (socket.timeout, TimeoutError)):
        return f"connect timeout after {timeout_s:g} s to {where}"
    if isinstance(e, ConnectionRefusedError):
        return f"connection refused by {where} (no sshd listening)"
    if isinstance(e, paramiko.AuthenticationException):
        return str(e) or f"authentication failed for {target['user']}@{where}"
    if isinstance(e, socket.gaierror):
        return f"cannot resolve {target['host']}: {e.strerror}"
    if isinstance(e, OSError):
        return f"cannot connect to {where}: {e.strerror or e}"
    if isinstance(e, EOFError):
        return f"{where} closed the connection during the SSH handshake"
    if isinstance(e, paramiko.SSHException):
        return f"SSH error with {where}: {e}"
    return f"cannot connect to {where}: {type(e).__name__}: {e}"


def _banner_timeout(e: BaseException) -> bool:
    """paramiko's banner reader raises 'Error reading SSH protocol banner' for a timeout and for
    a closed connection alike; the exception it was handling tells them apart."""
    return (
        isinstance(e, paramiko.SSHException)
        and "protocol banner" in str(e)
        and isinstance(e.__context__, (socket.timeout, TimeoutError))
    )
