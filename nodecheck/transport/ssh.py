"""SSH transport over paramiko: strict known_hosts checking, one connection per node, bounded waits.

Host keys are checked against known_hosts under the node's name and its address (either entry
verifies it). An unknown key makes the node UNREACHABLE unless the operator opted into
trust-on-first-use (--accept-new-host-keys); a mismatched key always does. Nothing runs on a node
whose key did not verify. ssh_config (ProxyJump, ProxyCommand, User, Port, IdentityFile, HostName)
is honoured when the inventory names one; its StrictHostKeyChecking is not: strictness is ours.
"""
from __future__ import annotations

import getpass
import logging
import os
import select
import socket
import threading
import time
from pathlib import Path

import paramiko

from nodecheck.model import Capture, Node, Outcome, Probe
from nodecheck.transport import FailedSession, remote_command

DEFAULT_CONNECT_TIMEOUT_S = 10.0
MAX_CAPTURE_BYTES = 16 * 1024 * 1024           # a runaway tool must not exhaust the client's memory
GLOBAL_KNOWN_HOSTS = "/etc/ssh/ssh_known_hosts"
MAX_JUMP_HOPS = 4
DEFAULT_IDENTITIES = ("~/.ssh/id_ed25519", "~/.ssh/id_ecdsa", "~/.ssh/id_rsa")


# paramiko reports connection trouble through logging too; our outcomes carry it instead, and a
# handler keeps Python's last-resort logger from printing it over the report.
logging.getLogger("paramiko").addHandler(logging.NullHandler())


class HostKeyRejected(Exception):
    pass


class HandshakeTimeout(Exception):
    pass


def _server_key(t: paramiko.Transport, timeout_s: float) -> paramiko.PKey:
    """start_client(timeout=…) returns silently when the timeout expires; a session without a
    server key is a handshake that never finished."""
    try:
        return t.get_remote_server_key()
    except paramiko.SSHException:
        raise t.get_exception() or HandshakeTimeout() from None


class SshTransport:
    """Opens one verified, authenticated connection per node; thread-safe, caches parsed files."""

    def __init__(self, *, accept_new_host_keys: bool = False,
                 connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S) -> None:
        self.accept_new = accept_new_host_keys
        self.connect_timeout_s = connect_timeout_s
        self._lock = threading.Lock()
        self._known: dict[str, paramiko.HostKeys] = {}
        self._keys: dict[str, paramiko.PKey] = {}
        self._configs: dict[str, paramiko.SSHConfig] = {}

    def connect(self, node: Node, timeout_s: float) -> "SshSession | FailedSession":
        timeout_s = min(timeout_s, self.connect_timeout_s)
        target = {"node": node, "host": node.address, "port": node.port, "user": node.user}
        try:
            target = self._target(node)
            transport, hops = self._open(target, timeout_s)
        except Exception as e:                 # every connect problem is an outcome, not a crash
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
    def _open(self, target: dict, timeout_s: float, depth: int = 0) -> tuple[paramiko.Transport, list]:
        hops: list = []                        # jump-host transports this connection rides on
        sock = self._socket(target, timeout_s, hops, depth)
        t = paramiko.Transport(sock)
        try:
            t.banner_timeout = t.handshake_timeout = t.auth_timeout = timeout_s
            known = self._known_hosts(target["known_hosts"])
            names = host_key_names(target)
            key_types = _known_key_types(known, names)
            if key_types:                      # ask for the key type we can verify, as OpenSSH does
                t.get_security_options().key_types = key_types
            t.start_client(timeout=timeout_s)
            self._verify_host_key(_server_key(t, timeout_s), known, names, target)
            self._authenticate(t, target)
        except BaseException:
            for h in [t, *reversed(hops)]:
                h.close()
            raise
        return t, hops

    def _socket(self, target: dict, timeout_s: float, hops: list, depth: int):
        if target["proxyjump"] and target["proxyjump"].lower() != "none":
            if depth >= MAX_JUMP_HOPS:
                raise paramiko.SSHException(f"more than {MAX_JUMP_HOPS} ProxyJump hops (a loop?)")
            jump = self._target(_jump_node(target["proxyjump"].split(",")[0], target["node"]))
            jt, jhops = self._open(jump, timeout_s, depth + 1)
            hops.extend(jhops + [jt])
            return jt.open_channel("direct-tcpip", (target["host"], target["port"]), ("127.0.0.1", 0),
                                   timeout=timeout_s)
        if target["proxycommand"] and target["proxycommand"].lower() != "none":
            return paramiko.ProxyCommand(target["proxycommand"])
        return socket.create_connection((target["host"], target["port"]), timeout=timeout_s)

    def _known_hosts(self, path: str) -> paramiko.HostKeys:
        path = os.path.expanduser(path)
        with self._lock:
            if path not in self._known:
                keys = paramiko.HostKeys()
                for f in (GLOBAL_KNOWN_HOSTS, path):
                    if os.path.exists(f):
                        keys.load(f)
                self._known[path] = keys
            return self._known[path]

    def _verify_host_key(self, key: paramiko.PKey, known: paramiko.HostKeys, names: list[str],
                         target: dict) -> None:
        offered = f"{key.get_name()} {key.fingerprint}"
        with self._lock:
            entries = [known.lookup(n) for n in names]
            recorded = [e[key.get_name()] for e in entries if e and key.get_name() in e]
            if any(k == key for k in recorded):
                return
            if recorded:
                raise HostKeyRejected(
                    f"host key MISMATCH for {names[0]}: offered {offered}, {target['known_hosts']} has "
                    f"a different key (reinstalled node or man-in-the-middle); verify it, then update known_hosts")
            if any(entries):
                raise HostKeyRejected(
                    f"host key type {key.get_name()} for {names[0]} not in {target['known_hosts']} "
                    f"(it lists other types); verify and add it")
            if not self.accept_new:
                raise HostKeyRejected(
                    f"host key for {names[0]} not in {target['known_hosts']} (offered {offered}); "
                    f"add a verified key, or opt into trust-on-first-use with --accept-new-host-keys")
            known.add(",".join(names), key.get_name(), key)
            _append_known_host(target["known_hosts"], names, key)

    def _authenticate(self, t: paramiko.Transport, target: dict) -> None:
        tried: list[str] = []
        keys = [(p, self._private_key(p)) for p in target["identities"]]
        if os.environ.get("SSH_AUTH_SOCK"):
            keys += [("ssh-agent", k) for k in paramiko.Agent().get_keys()]
        for label, key in keys:
            try:
                t.auth_publickey(target["user"], key)
                return
            except paramiko.AuthenticationException:
                tried.append(label)
        raise paramiko.AuthenticationException(
            f"authentication failed for {target['user']}@{target['host']} "
            f"(tried {', '.join(tried) or 'no keys: set identity_file'})")

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
            f"identity file {path} is passphrase-protected; load it into ssh-agent") from None
    except (OSError, paramiko.SSHException, ValueError) as e:
        raise paramiko.AuthenticationException(f"cannot use identity file {path}: {e}") from None


class SshSession:
    def __init__(self, node: Node, transport: paramiko.Transport, hops: list) -> None:
        self.node, self.t, self.hops = node, transport, hops

    def run(self, probe: Probe, timeout_s: float) -> Capture:
        started = time.monotonic()
        try:
            chan = self.t.open_session(timeout=timeout_s)
        except Exception as e:                 # the connection died between probes
            return self._capture(probe, Outcome.UNREACHABLE, None, b"", b"", started,
                                 f"connection lost before {probe.name}: {e or type(e).__name__}")
        try:
            return self._exec(chan, probe, timeout_s, started)
        except (OSError, EOFError, paramiko.SSHException) as e:
            return self._capture(probe, Outcome.UNREACHABLE, None, b"", b"", started,
                                 f"connection lost during {probe.name}: {e or type(e).__name__}")
        finally:
            chan.close()

    def _exec(self, chan: paramiko.Channel, probe: Probe, timeout_s: float, started: float) -> Capture:
        end = started + timeout_s
        chan.settimeout(timeout_s)
        chan.exec_command(remote_command(probe, timeout_s))
        if probe.stdin:
            chan.sendall(probe.stdin.encode())
        chan.shutdown_write()
        out, err = bytearray(), bytearray()
        while True:
            while chan.recv_ready():
                _append(out, chan.recv(65536))
            while chan.recv_stderr_ready():
                _append(err, chan.recv_stderr(65536))
            if chan.exit_status_ready() and (chan.eof_received or chan.closed) \
                    and not chan.recv_ready() and not chan.recv_stderr_ready():
                return self._capture(probe, Outcome.EXITED, chan.recv_exit_status(), out, err, started)
            remaining = end - time.monotonic()
            if remaining <= 0:
                return self._capture(probe, Outcome.TIMEOUT, None, out, err, started,
                                     f"no answer within {timeout_s:g} s")
            select.select([chan], [], [], min(remaining, 0.25))

    def _capture(self, probe: Probe, outcome: Outcome, code: int | None, out: bytes, err: bytes,
                 started: float, detail: str = "") -> Capture:
        return Capture(self.node.name, probe.name, probe.argv, outcome, code,
                       out.decode(errors="replace"), err.decode(errors="replace"),
                       time.monotonic() - started, detail)

    def close(self) -> None:
        for t in [self.t, *reversed(self.hops)]:
            t.close()


def _append(buf: bytearray, data: bytes) -> None:
    room = MAX_CAPTURE_BYTES - len(buf)
    if room > 0:
        buf.extend(data[:room])


def host_key_names(target: dict) -> list[str]:
    """known_hosts names that may vouch for this node: its name and its address, OpenSSH-style."""
    hosts = dict.fromkeys([target["node"].name, target["host"]])
    port = target["port"]
    return [h if port == 22 else f"[{h}]:{port}" for h in hosts]


def _known_key_types(known: paramiko.HostKeys, names: list[str]) -> list[str]:
    supported = paramiko.Transport._preferred_keys
    types = {t for n in names for t in (known.lookup(n) or {})}
    return [t for t in supported if t in types]


def _append_known_host(path: str, names: list[str], key: paramiko.PKey) -> None:
    path = os.path.expanduser(path)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "a") as f:
        f.write(f"{','.join(names)} {key.get_name()} {key.get_base64()}\n")


def _jump_node(spec: str, via: Node) -> Node:
    """A ProxyJump hop '[user@]host[:port]', resolved through the same ssh_config and verified
    against the same known_hosts as the node behind it."""
    user, _, hostport = spec.rpartition("@")
    host, _, port = hostport.partition(":")
    return Node(name=host, address=host, port=int(port or 22), user=user or None,
                identity_file=via.identity_file, known_hosts=via.known_hosts, ssh_config=via.ssh_config)


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
    return isinstance(e, paramiko.SSHException) and "protocol banner" in str(e) \
        and isinstance(e.__context__, (socket.timeout, TimeoutError))
