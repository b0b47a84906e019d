"""Watcher alerts: which verdict changes are alerted, the event JSON, delivery through a command hook
(argv, JSON on stdin, NODECHECK_* env, timeout) and an HTTP POST (a real local http.server), retries with
exponential backoff, every attempt logged, undelivered alerts kept pending."""

from __future__ import annotations

import base64
import json
import os
import shlex
import signal
import socket
import sys
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from nodecheck.watch.alerts import (
    DELIVERY_BUDGET_S,
    MAX_PENDING,
    CommandHook,
    Deliverer,
    DeliveryFailed,
    HttpPost,
    alert_kind,
    build_event,
    channels_of,
    hook_env,
)
from nodecheck.watch.config import Alerts

AT = 1_764_424_923.0  # 2025-11-29T14:02:03Z
EVENT = build_event(
    job="1234",
    kind="alarm",
    verdict="hung",
    previous="progressing",
    at=AT,
    since=AT - 120,
    message="hung: power-deadlock signature for 40 s: rank 3 (node1 GPU3) at 0%",
    nodes=["node1"],
    ranks=[3],
    incident="/reports/20251129T140203Z_watch_1234_hung",
    watcher="watchhost",
)


# ---- which changes are alerted ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "previous, verdict, kind",
    [
        (None, "starting", None),
        (None, "progressing", None),  # a fresh watcher's first verdict
        ("starting", "progressing", None),
        ("progressing", "checkpointing", None),
        ("checkpointing", "progressing", None),  # quiet to quiet: recorded only
        ("progressing", "progressing", None),
        ("progressing", "hung", "alarm"),
        ("checkpointing", "slow", "alarm"),
        (None, "crashed", "alarm"),
        ("slow", "hung", "alarm"),
        ("hung", "crashed", "alarm"),  # one alarm to another
        ("hung", "progressing", "resolved"),
        ("unresponsive", "checkpointing", "resolved"),
        ("progressing", "completed", "completed"),
        ("slow", "completed", "completed"),
        (None, "completed", "completed"),
    ],
)
def test_only_alarms_recoveries_and_completion_are_alerted(previous, verdict, kind):
    assert alert_kind(previous, verdict) == kind


def test_the_event_carries_the_contract_fields():
    assert EVENT == {
        "event": "nodecheck.watch",
        "version": 1,
        "kind": "alarm",
        "job": "1234",
        "verdict": "hung",
        "previous": "progressing",
        "at": "2025-11-29T14:02:03Z",
        "since": "2025-11-29T14:00:03Z",
        "message": "hung: power-deadlock signature for 40 s: rank 3 (node1 GPU3) at 0%",
        "nodes": ["node1"],
        "ranks": [3],
        "incident": "/reports/20251129T140203Z_watch_1234_hung",
        "watcher": "watchhost",
    }
    assert json.loads(json.dumps(EVENT)) == EVENT


# ---- the command hook ------------------------------------------------------------------------------

HOOK = textwrap.dedent("""
    import json, os, sys
    event = json.load(sys.stdin)
    env = {k: v for k, v in os.environ.items() if k.startswith("NODECHECK_")}
    with open(sys.argv[1], "a") as f:
        f.write(json.dumps({"argv": sys.argv[2:], "event": event, "env": env}) + "\\n")
    sys.exit(int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2].isdigit() else 0)
""")


def hook(tmp_path, *extra: str) -> tuple[str, object]:
    (tmp_path / "hook.py").write_text(HOOK)
    out = tmp_path / "calls.jsonl"
    words = [sys.executable, str(tmp_path / "hook.py"), str(out), *extra]
    return " ".join(f"'{w}'" for w in words), out


def calls(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_the_hook_gets_the_event_json_on_stdin_and_the_fields_in_env(tmp_path, monkeypatch):
    for name in [k for k in os.environ if k.startswith("NODECHECK_")]:  # tests/run_all.sh sets some
        monkeypatch.delenv(name)
    command, out = hook(tmp_path, "a b", "; rm -rf /")  # split as a shell would, run without one
    assert CommandHook(command, timeout_s=10).send(EVENT) == "exit 0"
    [call] = calls(out)
    assert call["argv"] == ["a b", "; rm -rf /"]
    assert call["event"] == EVENT
    assert call["env"] == {
        "NODECHECK_EVENT": "alarm",
        "NODECHECK_JOB": "1234",
        "NODECHECK_VERDICT": "hung",
        "NODECHECK_PREVIOUS": "progressing",
        "NODECHECK_MESSAGE": EVENT["message"],
        "NODECHECK_NODES": "node1",
        "NODECHECK_AT": "2025-11-29T14:02:03Z",
        "NODECHECK_INCIDENT": "/reports/20251129T140203Z_watch_1234_hung",
    }


def test_hook_env_keeps_the_message_on_one_line():
    event = {**EVENT, "message": "hung:\nrank 3\u2028x", "previous": None, "nodes": ["a", "b"]}
    env = hook_env(event)
    assert (env["NODECHECK_MESSAGE"], env["NODECHECK_PREVIOUS"], env["NODECHECK_NODES"]) == (
        "hung: rank 3 x",
        "",
        "a,b",
    )


def test_a_hook_that_exits_non_zero_or_hangs_or_is_missing_failed(tmp_path):
    command, _ = hook(tmp_path, "7")
    with pytest.raises(DeliveryFailed, match=r"^exit 7$"):
        CommandHook(command, timeout_s=10).send(EVENT)
    with pytest.raises(DeliveryFailed, match=r"^no exit within 0.3 s; killed$"):
        CommandHook("sleep 30", timeout_s=0.3).send(EVENT)
    with pytest.raises(DeliveryFailed, match=r"^cannot run '/no/such/hook': No such file or directory$"):
        CommandHook("/no/such/hook --page", timeout_s=1).send(EVENT)
    with pytest.raises(DeliveryFailed, match=r"^exit 3: boom$"):
        CommandHook(f"{sys.executable} -c 'import sys; sys.stderr.write(\"boom\\n\"); sys.exit(3)'", 5).send(EVENT)


# ---- the HTTP POST ---------------------------------------------------------------------------------


class Receiver:
    """A local http.server: answers each POST with the next status of `statuses` (then 200)."""

    def __init__(self, statuses=(), headers=None) -> None:
        self.statuses, self.bodies, self.types, self.auths = list(statuses), [], [], []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.bodies.append(json.loads(body))
                receiver.types.append(self.headers["Content-Type"])
                receiver.auths.append(self.headers["Authorization"])
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                self.send_response(status)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                text = b"try later" if status >= 400 else b"ok"
                self.send_header("Content-Length", str(len(text)))
                self.end_headers()
                self.wfile.write(text)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver_factory():
    made = []

    def make(*args, **kw):
        made.append(Receiver(*args, **kw))
        return made[-1]

    yield make
    for r in made:
        r.close()


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch):
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)


def dead_url() -> str:
    """A local port nobody listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"


class Waits:
    """A stop event that records the backoff waits instead of sleeping them."""

    def __init__(self) -> None:
        self.waits: list[float] = []
        self.set_now = False

    def wait(self, seconds: float) -> bool:
        self.waits.append(seconds)
        return False

    def is_set(self) -> bool:
        return self.set_now


class Log:
    def __init__(self) -> None:
        self.lines: list[tuple[str, dict]] = []

    def __call__(self, action: str, **fields) -> None:
        self.lines.append((action, fields))

    def attempts(self) -> list[tuple[str, str, str]]:
        return [(action, f["channel"], f["attempt"]) for action, f in self.lines if "attempt" in f]


def test_a_post_that_fails_twice_then_is_accepted_took_exactly_three_attempts(receiver_factory):
    receiver = receiver_factory([503, 500])
    log, waits = Log(), Waits()
    d = Deliverer([HttpPost(receiver.url, timeout_s=5)], retries=3, backoff_s=0.5, log=log, stop=waits)
    assert d.flush(d.enqueue([], EVENT)) == []
    assert receiver.bodies == [EVENT, EVENT, EVENT]
    assert receiver.types == ["application/json"] * 3
    assert log.attempts() == [
        ("alert-failed", "url", "1/4"),
        ("alert-failed", "url", "2/4"),
        ("alert-delivered", "url", "3/4"),
    ]
    assert [f["detail"] for _, f in log.lines] == [
        "HTTP 503 Service Unavailable: try later",
        "HTTP 500 Internal Server Error: try later",
        "HTTP 200",
    ]
    assert waits.waits == [0.5, 1.0]  # exponential: backoff_s x 2^(n-1)


def test_a_dead_url_keeps_the_alert_pending_after_every_attempt(receiver_factory):
    log, waits = Log(), Waits()
    d = Deliverer([HttpPost(dead_url(), timeout_s=2)], retries=2, backoff_s=0.25, log=log, stop=waits)
    pending = d.enqueue([], EVENT)
    assert d.flush(pending) == [{"event": EVENT, "channels": ["url"], "attempts": 3}]
    assert log.attempts() == [
        ("alert-failed", "url", "1/3"),
        ("alert-failed", "url", "2/3"),
        ("alert-failed", "url", "3/3"),
    ]
    assert all(f["detail"].startswith("cannot connect: [Errno 111] Connection refused") for _, f in log.lines)
    assert waits.waits == [0.25, 0.5]  # no wait after the last attempt
    # the next tick tries again; a receiver that came back takes it
    receiver = receiver_factory()
    d.channels = [HttpPost(receiver.url, timeout_s=2)]
    assert d.flush(pending) == [] and receiver.bodies == [EVENT]


def test_a_redirect_is_a_failed_delivery_not_a_get(receiver_factory):
    receiver = receiver_factory([302], headers={"Location": "http://127.0.0.1:9/elsewhere"})
    with pytest.raises(DeliveryFailed, match=r"^HTTP 302 Found"):
        HttpPost(receiver.url, timeout_s=5).send(EVENT)
    assert len(receiver.bodies) == 1


def test_only_http_urls_are_posted_to():
    with pytest.raises(ValueError, match="only http:// and https://"):
        HttpPost("file:///etc/passwd", timeout_s=1)


def test_each_channel_keeps_its_own_pending_state(tmp_path, receiver_factory):
    receiver = receiver_factory()
    command, out = hook(tmp_path, "9")  # this hook always fails
    log = Log()
    d = Deliverer([CommandHook(command, 5), HttpPost(receiver.url, 5)], retries=1, backoff_s=0, log=log, stop=Waits())
    left = d.flush(d.enqueue([], EVENT))
    assert left == [{"event": EVENT, "channels": ["command"], "attempts": 3}]  # the POST went through once
    assert receiver.bodies == [EVENT] and len(calls(out)) == 2
    left = d.flush(left)  # not again; the hook, once on a later tick
    assert receiver.bodies == [EVENT] and len(calls(out)) == 3


def test_a_stop_request_ends_retrying_and_keeps_the_alert(receiver_factory):
    log, stop = Log(), threading.Event()
    stop.set()
    d = Deliverer([HttpPost(dead_url(), timeout_s=1)], retries=5, backoff_s=10, log=log, stop=stop)
    pending = d.enqueue([], EVENT)
    assert d.flush(pending) == pending and log.lines == []


def test_pending_alerts_are_bounded_oldest_dropped_and_logged():
    log = Log()
    d = Deliverer([HttpPost(dead_url(), timeout_s=1)], retries=0, backoff_s=0, log=log, stop=Waits())
    pending = []
    for n in range(MAX_PENDING + 2):
        pending = d.enqueue(pending, {**EVENT, "message": f"m{n}"})
    left = d.flush(pending)
    assert [p["event"]["message"] for p in left] == [f"m{n}" for n in range(2, MAX_PENDING + 2)]
    assert [a for a, _ in log.lines].count("alert-dropped") == 2


def test_a_channel_gone_from_the_config_is_dropped_not_retried_forever():
    log = Log()
    d = Deliverer([], retries=0, backoff_s=0, log=log, stop=Waits())
    assert d.flush([{"event": EVENT, "channels": ["url"]}]) == []
    assert log.lines == [
        (
            "alert-dropped",
            {
                "channel": "url",
                "verdict": "hung",
                "at": "2025-11-29T14:02:03Z",
                "detail": "this channel is no longer configured",
            },
        )
    ]
    assert d.enqueue([], EVENT) == []  # nothing configured: nothing queued


def test_channels_come_from_the_alerts_block():
    assert [c.name for c in channels_of(Alerts())] == []
    both = channels_of(Alerts(command="/bin/page -x", url="https://h.example/n", timeout_s=4))
    assert [(c.name, c.timeout_s) for c in both] == [("command", 4), ("url", 4)]
    assert both[0].argv == ["/bin/page", "-x"] and both[1].url == "https://h.example/n"


# ---- hostile endpoints and hooks (review) -----------------------------------------------------------


class RawServer:
    """A TCP server that answers every connection with `reply(conn)`: for what http.server will not do
    (garbage, a trickle, an endless body)."""

    def __init__(self, reply) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/hook"
        self.reply, self.closed = reply, threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.closed.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn) -> None:
        try:
            self._read_request(conn)
            self.reply(conn, self.closed)
        except OSError:
            pass
        finally:
            conn.close()

    @staticmethod
    def _read_request(conn) -> None:
        """The whole request, headers and body: closing a socket with unread bytes sends a reset,
        and the client would see "connection reset" instead of the answer under test."""
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = next(
            (
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            ),
            0,
        )
        while len(body) < length:
            chunk = conn.recv(65536)
            if not chunk:
                return
            body += chunk

    def close(self) -> None:
        self.closed.set()
        self.sock.close()


@pytest.fixture
def raw_server():
    made = []

    def make(reply):
        made.append(RawServer(reply))
        return made[-1]

    yield make
    for s in made:
        s.close()


@pytest.mark.parametrize(
    "answer, said",
    [
        (b"HELLO THERE\r\n\r\n", "BadStatusLine"),  # not HTTP at all
        (b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-%d: y\r\n" % n for n in range(150)) + b"\r\n", "more than 100 headers"),
        (b"HTTP/1.1 200 OK\r\nX-Big: " + b"y" * 70_000 + b"\r\n\r\n", "LineTooLong"),
    ],
)
def test_a_garbage_answer_is_a_failed_delivery_not_a_crash(raw_server, answer, said):
    server = raw_server(lambda conn, closed: conn.sendall(answer))
    with pytest.raises(DeliveryFailed, match=said):
        HttpPost(server.url, timeout_s=5).send(EVENT)


def test_a_server_that_trickles_its_answer_is_cut_at_the_timeout(raw_server):
    def trickle(conn, closed):
        conn.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
        for _ in range(100):  # a byte every 0.2 s: each read is well within the timeout
            if closed.wait(0.2):
                return
            conn.sendall(b"y")

    server = raw_server(trickle)
    started = time.monotonic()
    with pytest.raises(DeliveryFailed, match=r"^no answer within 1 s$"):
        HttpPost(server.url, timeout_s=1).send(EVENT)
    assert time.monotonic() - started < 2.5


def test_an_endless_body_is_not_read(raw_server):
    def endless(conn, closed, status=b"200 OK"):
        conn.sendall(b"HTTP/1.1 " + status + b"\r\nContent-Length: 100000000000\r\n\r\n")
        while not closed.is_set():
            conn.sendall(b"x" * 65536)

    started = time.monotonic()
    assert HttpPost(raw_server(endless).url, timeout_s=3).send(EVENT) == "HTTP 200"
    with pytest.raises(DeliveryFailed) as e:
        HttpPost(raw_server(lambda c, s: endless(c, s, b"500 Oops")).url, timeout_s=3).send(EVENT)
    assert str(e.value).startswith("HTTP 500 Oops: xxx") and len(str(e.value)) < 400
    assert time.monotonic() - started < 3


def test_credentials_in_the_url_are_sent_as_basic_auth_and_never_said(receiver_factory):
    receiver = receiver_factory()
    url = receiver.url.replace("http://", "http://alice:s3cr%40t@")
    post = HttpPost(url, timeout_s=5)
    assert post.send(EVENT) == "HTTP 200" and receiver.bodies == [EVENT]
    assert receiver.auths == ["Basic " + base64.b64encode(b"alice:s3cr@t").decode()]
    assert "s3cr" not in repr(post) + post.url and post.shown == receiver.url.replace("http://", "http://alice:***@")
    dead = dead_url().replace("http://", "http://alice:s3cr%40t@")
    with pytest.raises(DeliveryFailed) as e:
        HttpPost(dead, timeout_s=1).send(EVENT)
    assert "s3cr" not in str(e.value) and str(e.value).startswith("cannot connect: ")
    with pytest.raises(ValueError) as bad:
        HttpPost("ftp://alice:s3cret@h/x", timeout_s=1)
    assert "s3cret" not in str(bad.value)


def test_a_hook_that_leaves_a_daemon_holding_its_output_delivered_at_its_exit(tmp_path):
    pidfile = tmp_path / "daemon.pid"
    script = (
        "import os, sys, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"  # out of the hook's process group: it outlives a kill
        f"    open({str(pidfile)!r}, 'w').write(str(os.getpid()))\n"
        "    time.sleep(30)\n"
        "    os._exit(0)\n"
        "sys.stdin.read()\n"
    )
    started = time.monotonic()
    try:
        assert CommandHook(f"{sys.executable} -c {shlex.quote(script)}", timeout_s=5).send(EVENT) == "exit 0"
        assert time.monotonic() - started < 3
    finally:
        for _ in range(50):
            if pidfile.exists() and pidfile.read_text():
                os.kill(int(pidfile.read_text()), signal.SIGKILL)
                break
            time.sleep(0.05)


def test_a_hook_that_never_reads_a_large_event_and_one_that_floods_stderr(tmp_path):
    big = {**EVENT, "message": "m" * 1_000_000}  # far past a pipe's buffer
    assert CommandHook("true", timeout_s=5).send(big) == "exit 0"
    flood = f'{sys.executable} -c \'import sys; sys.stderr.write("e" * 20_000_000 + "the end"); sys.exit(4)\''
    with pytest.raises(DeliveryFailed) as e:
        CommandHook(flood, timeout_s=10).send(EVENT)
    assert str(e.value).startswith("exit 4: ") and str(e.value).endswith("the end") and len(str(e.value)) < 400


class CountingChannel:
    """A channel that always fails and counts its attempts; each attempt costs `cost_s` on `clock`."""

    name = "url"

    def __init__(self, clock=None, cost_s: float = 0.0) -> None:
        self.sends, self.clock, self.cost_s = 0, clock, cost_s

    def send(self, event):
        self.sends += 1
        if self.clock is not None:
            self.clock.now += self.cost_s
        raise DeliveryFailed("HTTP 503 Service Unavailable")


class FakeClock(Waits):
    """A monotonic clock and a stop event whose waits pass on that clock instead of sleeping."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def wait(self, seconds: float) -> bool:
        self.now += seconds
        return super().wait(seconds)


def test_a_dead_channel_is_tried_once_per_flush_not_once_per_pending_alert():
    channel, log = CountingChannel(), Log()
    d = Deliverer([channel], retries=2, backoff_s=1, log=log, stop=Waits())
    pending = []
    for n in range(5):
        pending = d.enqueue(pending, {**EVENT, "message": f"m{n}"})
    left = d.flush(pending)
    assert [p["event"]["message"] for p in left] == ["m0", "m1", "m2", "m3", "m4"]  # all kept, in order
    assert channel.sends == 3  # m0's 3 attempts; the channel is down for m1..m4
    # on a later tick an alert already tried gets one attempt, no backoff: the tick is not held up
    waits = Waits()
    d.stop = waits
    assert len(d.flush(left)) == 5 and channel.sends == 4 and waits.waits == []


def test_a_new_alert_gets_its_retries_on_every_channel_whichever_answered_first(receiver_factory):
    receiver, channel = receiver_factory(), CountingChannel()
    channel.name = "command"
    d = Deliverer([HttpPost(receiver.url, 5), channel], retries=2, backoff_s=0, log=Log(), stop=Waits())
    assert d.flush(d.enqueue([], EVENT)) == [{"event": EVENT, "channels": ["command"], "attempts": 4}]
    assert len(receiver.bodies) == 1 and channel.sends == 3


def test_one_flush_is_bounded_in_time_whatever_the_retry_settings():
    clock = FakeClock()
    channel = CountingChannel(clock, cost_s=10)
    d = Deliverer([channel], retries=100, backoff_s=1, log=Log(), stop=clock, clock=clock)
    assert len(d.flush(d.enqueue([], EVENT))) == 1
    # no attempt starts past the budget (the last one may run its own timeout past it)
    assert 3 <= channel.sends < 101 and clock.now - 1000 <= DELIVERY_BUDGET_S + 10
    # a backoff that would run past the budget ends this tick's attempts: the alert waits for the next
    clock, log = FakeClock(), Log()
    channel = CountingChannel(clock, cost_s=10)
    d = Deliverer([channel], retries=100, backoff_s=3600, log=log, stop=clock, clock=clock)
    assert len(d.flush(d.enqueue([], EVENT))) == 1
    assert (channel.sends, clock.waits, clock.now - 1000) == (1, [], 10)
