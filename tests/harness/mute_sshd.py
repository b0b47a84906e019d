"""An SSH server that authenticates the client, opens its session channel, then never answers the
exec request (tests/faults): a node whose sshd is stuck after login (a hung PAM session module, a
full /var/log that blocks sshd's logging, a wedged shell startup).

    with MuteSshd("127.0.3.200") as mute:          # listens on an ephemeral port
        mute.known_hosts_line                      # "[127.0.3.200]:PORT ecdsa-sha2-nistp256 AAAA..."
        ... point nodecheck at mute.address, mute.port ...
        mute.exec_requests                         # how many exec requests it swallowed

Real paramiko, real SSH protocol: key exchange, host key, public-key auth (any key is accepted),
channel open; only the reply to `exec` never comes (the request's handler blocks until stop()).
"""

from __future__ import annotations

import socket
import threading

import paramiko


class _Server(paramiko.ServerInterface):
    def __init__(self, owner: MuteSshd) -> None:
        self.owner = owner

    def get_allowed_auths(self, username: str) -> str:
        return "publickey"

    def check_auth_publickey(self, username: str, key: paramiko.PKey) -> int:
        return paramiko.AUTH_SUCCESSFUL

    def check_channel_request(self, kind: str, chanid: int) -> int:
        return paramiko.OPEN_SUCCEEDED if kind == "session" else paramiko.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED

    def check_channel_exec_request(self, channel, command) -> bool:
        with self.owner.lock:
            self.owner.exec_requests += 1
        self.owner.released.wait()  # the reply never comes while the test runs
        return False


class MuteSshd:
    def __init__(self, address: str, port: int = 0) -> None:
        self.host_key = paramiko.ECDSAKey.generate()  # paramiko cannot generate ed25519 keys
        self.sock = socket.create_server((address, port))
        self.address, self.port = address, self.sock.getsockname()[1]
        self.lock = threading.Lock()
        self.exec_requests = 0
        self.released = threading.Event()
        self.transports: list[paramiko.Transport] = []
        self.thread = threading.Thread(target=self._serve, daemon=True, name="mute-sshd")

    @property
    def known_hosts_line(self) -> str:
        return f"[{self.address}]:{self.port} {self.host_key.get_name()} {self.host_key.get_base64()}"

    def __enter__(self) -> MuteSshd:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _serve(self) -> None:
        while not self.released.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:  # stop() closed the listening socket
                return
            t = paramiko.Transport(conn)
            t.add_server_key(self.host_key)
            self.transports.append(t)
            try:
                t.start_server(server=_Server(self))
            except (paramiko.SSHException, EOFError, OSError):
                t.close()

    def stop(self) -> None:
        self.released.set()
        self.sock.close()
        for t in self.transports:
            t.close()
        self.thread.join(5)
