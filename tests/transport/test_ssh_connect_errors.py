"""SSH connect failures become UNREACHABLE sessions with a precise reason, never an exception."""

import socket
import threading
import time

import pytest

from nodecheck.core.model import Node, Outcome, Probe
from nodecheck.transport import FailedSession
from nodecheck.transport.ssh import SshTransport


@pytest.fixture
def listener():
    servers = []

    def make(behaviour):
        srv = socket.create_server(("127.0.0.1", 0))
        servers.append(srv)

        def serve():
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            if behaviour == "close":
                conn.close()
            else:  # "mute": hold the connection, say nothing
                servers.append(conn)

        threading.Thread(target=serve, daemon=True).start()
        return srv.getsockname()[1]

    yield make
    for s in servers:
        s.close()


def connect(port, connect_timeout_s=1.0):
    started = time.monotonic()
    session = SshTransport(connect_timeout_s=connect_timeout_s).connect(Node("n1", "127.0.0.1", port=port), 30)
    return session, time.monotonic() - started


def test_a_port_that_never_speaks_ssh_times_out_at_the_connect_timeout(listener):
    port = listener("mute")
    session, took = connect(port)
    assert isinstance(session, FailedSession)
    assert session.detail == (
        f"127.0.0.1:{port}: no SSH handshake within 1 s (something listens there but does not speak SSH)"
    )
    assert 0.9 <= took < 3


def test_a_server_that_hangs_up_before_its_banner(listener):
    session, _ = connect(listener("close"))
    assert "closed the connection before its SSH banner" in session.detail


def test_a_closed_port_is_refused_and_every_probe_reports_it():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    session, _ = connect(port)
    assert session.detail == f"connection refused by 127.0.0.1:{port} (no sshd listening)"
    capture = session.run(Probe("ibstat", ("ibstat",), 5), 5)
    assert (capture.outcome, capture.exit_code) == (Outcome.UNREACHABLE, None)


def test_a_name_that_does_not_resolve():
    session = SshTransport().connect(Node("ghost", "no-such-host.invalid"), 5)
    assert session.detail.startswith("cannot resolve no-such-host.invalid")


def test_a_slow_resolver_is_bounded_by_the_connect_timeout(monkeypatch):
    def slow_getaddrinfo(*args, **kwargs):
        time.sleep(5)
        raise socket.gaierror("never")

    monkeypatch.setattr(socket, "getaddrinfo", slow_getaddrinfo)
    started = time.monotonic()
    session = SshTransport(connect_timeout_s=0.5).connect(Node("n1", "slow.example"), 30)
    assert time.monotonic() - started < 1.5
    assert session.detail == "resolving slow.example took longer than the connect timeout (0.5 s)"
