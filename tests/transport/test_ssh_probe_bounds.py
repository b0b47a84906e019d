"""A probe's timeout holds at every blocking SSH step (issue 17, finding 6): against an in-process
paramiko sshd that authenticates and then never answers the session-channel open, never answers
the exec request, or stops sending mid-output, a 2 s probe comes back TIMEOUT in about 2 s, and
no thread is left behind once the session is closed.

And how a probe ended is told apart (the fault suite's "tool killed by a signal", "sshd killed
mid-run", "connection reset mid-output"): an `exit-signal` is the tool killed by that signal, exit
code -N as the local transport reports it; a session that ends with no exit status at all is the
connection lost, UNREACHABLE, never an exit code of -1."""

from __future__ import annotations

import socket
import threading
import time

import paramiko
import pytest

from nodecheck.core.model import Node, Outcome, Probe
from nodecheck.transport.ssh import SshSession, SshTransport

HOST_KEY = paramiko.RSAKey.generate(2048)
CLIENT_KEY = paramiko.RSAKey.generate(2048)


class Server(paramiko.ServerInterface):
    """Accepts the client's key; then behaves as told: "open-mute" (never answers the channel open),
    "exec-mute" (never answers the exec request), "stalls" (prints a line, then nothing, no exit),
    "ok" (prints and exits 0), "signal-KILL"/"signal-SEGV"/... (prints, then sends `exit-signal` as
    sshd does for a tool killed by that signal), "drops" (prints, then the connection is cut),
    "closes" (prints, then closes the channel with no exit status while the connection lives)."""

    def __init__(self, behaviour: str, release: threading.Event) -> None:
        self.behaviour, self.release = behaviour, release
        self.channels: list[paramiko.Channel] = []

    def get_allowed_auths(self, username):
        return "publickey"

    def check_auth_publickey(self, username, key):
        return paramiko.AUTH_SUCCESSFUL if key == CLIENT_KEY else paramiko.AUTH_FAILED

    def check_channel_request(self, kind, chanid):
        if self.behaviour == "open-mute":
            self.release.wait(60)  # the server's transport thread: nothing is answered
        return paramiko.OPEN_SUCCEEDED

    def check_channel_exec_request(self, channel, command):
        if self.behaviour == "exec-mute":
            self.release.wait(60)
            return False
        self.channels.append(channel)
        threading.Thread(target=self._answer, args=(channel,), daemon=True).start()
        return True

    def _answer(self, channel: paramiko.Channel) -> None:
        time.sleep(0.05)
        channel.sendall(b"first line\n")
        if self.behaviour == "stalls":
            self.release.wait(60)
            return
        if self.behaviour == "rekey-stalls":
            # a key re-exchange the node starts and never finishes (see the sshd fixture): the client
            # answers the KEXINIT and waits for a reply that never comes, with every send held
            t = channel.get_transport()
            t._handler_table[paramiko.common.MSG_KEXINIT] = lambda m: self.release.wait(60)
            t._send_kex_init()
            return
        if self.behaviour.startswith("signal-"):
            _send_exit_signal(channel, self.behaviour[len("signal-") :], core_dumped=self.behaviour.endswith("SEGV"))
        elif self.behaviour == "drops":
            channel.get_transport().sock.shutdown(socket.SHUT_RDWR)  # the TCP connection gone mid-output
            return
        elif self.behaviour != "closes":
            channel.send_exit_status(0)
        channel.close()


def _send_exit_signal(channel: paramiko.Channel, name: str, core_dumped: bool) -> None:
    """RFC 4254 6.10, as OpenSSH's sshd sends it (paramiko's server has no call for it)."""
    m = paramiko.Message()
    m.add_byte(paramiko.common.cMSG_CHANNEL_REQUEST)
    m.add_int(channel.remote_chanid)
    m.add_string("exit-signal")
    m.add_boolean(False)
    m.add_string(name)
    m.add_boolean(core_dumped)
    m.add_string("")
    m.add_string("")
    channel.get_transport()._send_user_message(m)


@pytest.fixture
def sshd(tmp_path):
    """make(behaviour) -> a Node that reaches a fresh in-process sshd on 127.0.0.1."""
    release, listeners, transports = threading.Event(), [], []

    def make(behaviour: str) -> Node:
        srv = socket.create_server(("127.0.0.1", 0))
        listeners.append(srv)
        port = srv.getsockname()[1]

        def serve() -> None:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            t = paramiko.Transport(conn)
            transports.append(t)
            t.add_server_key(HOST_KEY)
            t.start_server(server=Server(behaviour, release))

        threading.Thread(target=serve, daemon=True, name="test-sshd-accept").start()
        identity = tmp_path / "id_rsa"
        CLIENT_KEY.write_private_key_file(str(identity))
        known = tmp_path / f"known_hosts_{port}"
        known.write_text(f"[127.0.0.1]:{port},[n1]:{port} ssh-rsa {HOST_KEY.get_base64()}\n")
        return Node("n1", "127.0.0.1", port=port, user="root", identity_file=str(identity), known_hosts=str(known))

    yield make
    release.set()
    for t in transports:
        t.close()
    for s in listeners:
        s.close()


def _settled(baseline: set[threading.Thread], wait_s: float = 3.0) -> list[str]:
    """The threads started since `baseline` that are still alive after up to wait_s (test server's aside)."""
    deadline = time.monotonic() + wait_s
    while True:
        left = [
            t.name
            for t in threading.enumerate()
            if t not in baseline and t.is_alive() and not t.name.startswith("test-sshd")
        ]
        ours = [
            t
            for t in threading.enumerate()
            if t not in baseline and t.is_alive() and isinstance(t, paramiko.Transport) and not t.server_mode
        ]
        if (not ours and not [n for n in left if "nodecheck" in n]) or time.monotonic() > deadline:
            return [t.name for t in ours] + [n for n in left if "nodecheck" in n]
        time.sleep(0.05)


def _probe_run(node: Node, timeout_s: float = 2.0):
    session = SshTransport(connect_timeout_s=5).connect(node, 5)
    assert isinstance(session, SshSession), getattr(session, "detail", session)
    started = time.monotonic()
    capture = session.run(Probe("ibstat", ("ibstat",), timeout_s), timeout_s)
    took = time.monotonic() - started
    session.close()
    return capture, took


@pytest.mark.parametrize(
    "behaviour, detail",
    [
        ("exec-mute", "no answer within 2 s (the node never answered the exec request)"),
        ("open-mute", "no answer within 2 s (the node never opened the session channel)"),
        ("stalls", "no answer within 2 s"),
    ],
)
def test_a_probe_times_out_at_its_bound_at_every_ssh_step_and_leaves_no_thread(sshd, behaviour, detail):
    node = sshd(behaviour)
    baseline = set(threading.enumerate())
    capture, took = _probe_run(node)
    assert (capture.outcome, capture.exit_code, capture.detail) == (Outcome.TIMEOUT, None, detail)
    assert 1.9 <= took < 3.0, took
    if behaviour == "stalls":
        assert capture.stdout == "first line\n"  # what came before the stall is kept
    assert _settled(baseline) == []


def test_a_server_that_answers_still_runs_the_probe(sshd):
    baseline = set(threading.enumerate())
    capture, took = _probe_run(sshd("ok"))
    assert (capture.outcome, capture.exit_code, capture.stdout) == (Outcome.EXITED, 0, "first line\n")
    assert took < 2
    assert _settled(baseline) == []


@pytest.mark.parametrize(
    "behaviour, code, detail",
    [
        ("signal-KILL", -9, "killed by SIGKILL"),
        ("signal-SEGV", -11, "killed by SIGSEGV (core dumped)"),
        ("signal-TERM", -15, "killed by SIGTERM"),
        ("signal-NOSUCH@openssh.com", None, "killed by signal NOSUCH@openssh.com"),
    ],
)
def test_a_tool_killed_by_a_signal_exits_with_that_signal_as_the_local_transport_says(sshd, behaviour, code, detail):
    capture, took = _probe_run(sshd(behaviour))
    assert (capture.outcome, capture.exit_code, capture.detail) == (Outcome.EXITED, code, detail)
    assert capture.stdout == "first line\n" and took < 2


@pytest.mark.parametrize(
    "behaviour, detail",
    [
        ("drops", "connection lost during ibstat: "),
        ("closes", "connection lost during ibstat: the node closed the session without an exit status"),
    ],
)
def test_a_session_that_ends_without_an_exit_status_is_the_connection_lost(sshd, behaviour, detail):
    baseline = set(threading.enumerate())
    capture, took = _probe_run(sshd(behaviour))
    assert (capture.outcome, capture.exit_code) == (Outcome.UNREACHABLE, None), capture
    assert capture.detail.startswith(detail), capture.detail
    assert capture.stdout == "first line\n" and took < 2  # what came before is kept
    assert _settled(baseline) == []


def test_a_key_exchange_the_node_never_finishes_holds_no_send_or_close_past_the_bound(sshd):
    """Issue 32, 1.6: paramiko holds every send (stdin, EOF, the channel's close) while a key exchange
    runs, for its own 30 s: a 3 s probe came back after 33 s, as "internal error: SSHException". Every
    send and close is bounded by the probe's end, and run() never raises."""
    node = sshd("rekey-stalls")
    session = SshTransport(connect_timeout_s=5).connect(node, 5)
    assert isinstance(session, SshSession), getattr(session, "detail", session)
    try:
        started = time.monotonic()
        first = session.run(Probe("ibstat", ("ibstat",), 2.0), 2.0)
        took = time.monotonic() - started
        assert first.outcome is Outcome.TIMEOUT, first
        assert took < 4.0, took
        # the next probe on the stalled connection: its channel open and its exec are sends too
        started = time.monotonic()
        second = session.run(Probe("perfquery", ("perfquery",), 2.0, stdin="x" * 100), 2.0)
        took = time.monotonic() - started
        assert second.outcome is Outcome.TIMEOUT, second
        assert took < 4.0, took
    finally:
        session.close()
