"""Out-of-band alerts of the watcher: which verdict changes are alerted, the event JSON, and its delivery
through a command hook (argv, never a shell; the event on stdin) and/or an HTTP POST, each retried with
exponential backoff. Every attempt is logged; what could not be delivered stays pending (the caller keeps
it in the state on disk) and is tried again on later ticks. Delivery runs inside the watcher's tick, so
everything here is bounded in time: each attempt by the timeout, one tick's deliveries by
DELIVERY_BUDGET_S, and a channel that is down is not tried again for every pending alert."""

from __future__ import annotations

import base64
import http.client
import json
import os
import shlex
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Protocol
from urllib.parse import unquote, urlsplit, urlunsplit

from nodecheck.core.model import excerpt, one_line
from nodecheck.core.redact import redact_text
from nodecheck.transport import children
from nodecheck.watch.verdicts import ALARM

EVENT_NAME = "nodecheck.watch"
EVENT_VERSION = 1
# a channel down for days must not grow the state file (and each tick's retries) without bound
MAX_PENDING = 20
KILL_WAIT_S = 2.0  # after killing a hook at its timeout, to reap it
RESPONSE_BYTES = 4096  # of an HTTP error body or a hook's output, for the log
# one tick's deliveries, all channels and pending alerts together: no attempt or backoff starts past it
# (the default 4 attempts x 10 s + 1 + 2 + 4 s of backoff fit); the rest waits for the next tick
DELIVERY_BUDGET_S = 60.0
# of one NODECHECK_* value: Linux refuses to start a program with an environment string over 128 KiB
# (E2BIG), and the message is unbounded; the whole of it is in the JSON on stdin
ENV_CHARS = 4000


def alert_kind(previous: str | None, verdict: str) -> str | None:
    """What a change of verdict is, for the alert: "alarm" (into an alarm, or one alarm to another),
    "resolved" (an alarm back to a quiet verdict), "completed"; None when it is only recorded: no
    change, or quiet to quiet (starting -> progressing, progressing <-> checkpointing: normal work)."""
    if verdict == previous:
        return None
    if verdict in ALARM:
        return "alarm"
    if verdict == "completed":
        return "completed"
    if previous in ALARM:
        return "resolved"
    return None


def iso(epoch: float) -> str:
    """ISO-8601 UTC, to the second: 2026-11-29T14:02:03Z"""
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def build_event(
    *,
    job: str,
    kind: str | None,
    verdict: str,
    previous: str | None,
    at: float,
    since: float,
    message: str,
    nodes: Sequence[str],
    ranks: Sequence[int],
    incident: str | None,
    watcher: str | None = None,
) -> dict:
    """The alert event (a JSON object); the same object goes to the hook's stdin and the POST body."""
    # the message may quote the job's log lines: a token printed there goes no further
    return {
        "event": EVENT_NAME,
        "version": EVENT_VERSION,
        "kind": kind,
        "job": job,
        "verdict": verdict,
        "previous": previous,
        "at": iso(at),
        "since": iso(since),
        "message": redact_text(message),
        "nodes": list(nodes),
        "ranks": list(ranks),
        "incident": incident,
        "watcher": watcher or socket.gethostname(),
    }


class DeliveryFailed(Exception):
    """One attempt did not deliver; the message says why (exit code, HTTP status, connection error)."""


class Channel(Protocol):
    name: str  # "command" or "url": the key in a pending alert's channels

    def send(self, event: Mapping) -> str: ...  # a short "what happened" on success; DeliveryFailed if not


class CommandHook:
    """The operator's command, split as the shell splits words but never run by one: the event JSON
    on its stdin, the main fields in NODECHECK_* variables; exit 0 = delivered."""

    name = "command"

    def __init__(self, command: str, timeout_s: float) -> None:
        self.argv, self.timeout_s = shlex.split(command), timeout_s
        if not self.argv:
            raise ValueError("the alert command is empty")

    def send(self, event: Mapping) -> str:
        env = {**os.environ, **hook_env(event)}
        # its stdout and stderr go to a file, not a pipe: the hook's exit is the answer, even when it
        # leaves a daemon holding its output open (reading a pipe to its end would wait for that daemon),
        # and a hook that floods its output costs disk, not the watcher's memory; the tail is read back
        with tempfile.TemporaryFile() as output:
            try:
                # a new session, so a timeout kills the hook and whatever it started
                proc = subprocess.Popen(
                    self.argv, stdin=subprocess.PIPE, stdout=output, stderr=output, env=env, start_new_session=True
                )
            except OSError as e:
                raise DeliveryFailed(f"cannot run {self.argv[0]!r}: {e.strerror or e}") from None
            children.started(proc)
            try:
                # the JSON, then stdin closed; a hook that exits without reading it is fine (EPIPE ignored)
                proc.communicate(json.dumps(event).encode() + b"\n", timeout=self.timeout_s)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                raise DeliveryFailed(f"no exit within {self.timeout_s:g} s; killed") from None
            finally:
                children.forget(proc)  # a daemon it left behind is the hook's business (see above)
            said = _tail(output).strip()
        if proc.returncode != 0:
            how = f"exit {proc.returncode}" if proc.returncode > 0 else f"killed by signal {-proc.returncode}"
            # logged in alerts.log: a hook that echoes its credentials must not leave them there
            raise DeliveryFailed(how + (f": {_last(one_line(redact_text(said)), 300)}" if said else ""))
        return "exit 0"


def hook_env(event: Mapping) -> dict[str, str]:
    """The variables a hook gets besides the JSON (for a one-line `mail -s "$NODECHECK_VERDICT"`)."""
    env = {
        "NODECHECK_EVENT": str(event.get("kind") or ""),
        "NODECHECK_JOB": str(event["job"]),
        "NODECHECK_VERDICT": str(event["verdict"]),
        "NODECHECK_PREVIOUS": str(event.get("previous") or ""),
        "NODECHECK_MESSAGE": one_line(str(event["message"])),
        "NODECHECK_NODES": ",".join(event["nodes"]),
        "NODECHECK_INCIDENT": str(event.get("incident") or ""),
        "NODECHECK_AT": str(event["at"]),
    }
    return {k: v if len(v) <= ENV_CHARS else v[: ENV_CHARS - 1] + "…" for k, v in env.items()}


def _kill_group(proc: subprocess.Popen) -> None:
    assert proc.stdin is not None  # started with stdin=PIPE (the event)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        proc.stdin.close()
    except OSError:  # the unread rest of the event: nobody will read it now
        pass
    try:
        proc.wait(timeout=KILL_WAIT_S)
    except subprocess.TimeoutExpired:  # unkillable (D state): reaped by a later wait or at exit
        pass


def _tail(f) -> str:
    """The last RESPONSE_BYTES of a hook's output file."""
    size = f.seek(0, os.SEEK_END)
    f.seek(max(0, size - RESPONSE_BYTES))
    return f.read().decode("utf-8", "replace")


def _last(text: str, chars: int) -> str:
    return text if len(text) <= chars else "…" + text[-(chars - 1) :]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirected POST would be re-sent as a GET without its body: a 3xx is a failed delivery."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


class _Deadline:
    """The whole attempt's bound. A socket timeout bounds each read, not the answer: a server (or a
    proxy) that trickles a byte every few seconds would hold the tick forever. At the deadline the
    connection's socket is shut down, which ends any read in progress. (Name resolution happens before
    there is a socket; the resolver's own timeouts bound it.)"""

    def __init__(self, seconds: float) -> None:
        self.expired = False
        self.sock: socket.socket | None = None
        self.lock = threading.Lock()
        self.timer = threading.Timer(seconds, self._expire)
        self.timer.daemon = True

    def attach(self, sock: socket.socket) -> None:
        with self.lock:
            self.sock = sock
            if self.expired:
                _shut(sock)

    def _expire(self) -> None:
        with self.lock:
            self.expired = True
            if self.sock is not None:
                _shut(self.sock)


def _shut(sock) -> None:
    try:  # the plain socket's shutdown: an SSL socket's own one
        socket.socket.shutdown(sock, socket.SHUT_RDWR)  # would tear its state down under the reader
    except OSError:
        pass


def _bounded(base: type, deadline: _Deadline) -> type[http.client.HTTPConnection]:
    """`base` (HTTPConnection or HTTPSConnection) whose socket the deadline bounds once connected."""

    class Connection(base):
        def connect(self):
            super().connect()
            deadline.attach(self.sock)

    return Connection


class _Http(urllib.request.HTTPHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self.deadline = deadline

    def http_open(self, req):
        return self.do_open(_bounded(http.client.HTTPConnection, self.deadline), req)


class _Https(urllib.request.HTTPSHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self.deadline = deadline

    def https_open(self, req):
        # HTTPSHandler keeps the SSL context it was given in _context, which typeshed leaves out
        context = self._context  # type: ignore[attr-defined]
        return self.do_open(_bounded(http.client.HTTPSConnection, self.deadline), req, context=context)


class HttpPost:
    """POST the event JSON (Content-Type: application/json); any 2xx = delivered; another status, a
    redirect, an answer that is not HTTP or a connection error is a failure. Proxies come from the
    environment, as curl's. Credentials in the URL (https://user:token@host/...) are sent as Basic
    authentication and appear nowhere else: `url` is without them, `shown` masks the password."""

    name = "url"

    def __init__(self, url: str, timeout_s: float) -> None:
        parts = urlsplit(url)
        hostport = parts.netloc.rpartition("@")[2]
        # a lone user name may be the token itself (https://TOKEN@host/)
        masked = f"{parts.username}:***@" if parts.password is not None else "***@" if parts.username else ""
        self.shown = urlunsplit(parts._replace(netloc=masked + hostport))
        if parts.scheme.lower() not in ("http", "https") or not hostport:
            raise ValueError(f"alert url {self.shown!r}: only http:// and https:// are posted to")
        self.url, self.timeout_s = urlunsplit(parts._replace(netloc=hostport)), timeout_s
        secret = parts.password if parts.password is not None else parts.username
        self.secrets = sorted({w for w in (secret, unquote(secret or "")) if w}, key=len, reverse=True)
        self.authorization = None
        if parts.username is not None:
            pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
            self.authorization = "Basic " + base64.b64encode(pair.encode()).decode()

    def __repr__(self) -> str:
        return f"HttpPost({self.shown!r})"

    def send(self, event: Mapping) -> str:
        try:
            return self._send(event)
        except DeliveryFailed as e:  # whatever a library said, never the URL's password
            text = str(e)
            for secret in self.secrets:
                text = text.replace(secret, "***")
            raise DeliveryFailed(text) from None

    def _send(self, event: Mapping) -> str:
        from nodecheck import __version__

        body = json.dumps(event).encode()
        headers = {"Content-Type": "application/json", "User-Agent": f"nodecheck/{__version__}"}
        if self.authorization:
            headers["Authorization"] = self.authorization
        req = urllib.request.Request(self.url, data=body, method="POST", headers=headers)
        deadline = _Deadline(self.timeout_s)
        opener = urllib.request.build_opener(_NoRedirect, _Http(deadline), _Https(deadline))
        deadline.timer.start()
        try:
            with opener.open(req, timeout=self.timeout_s) as resp:
                status = resp.status  # the body is never read: a huge one costs nothing
        except urllib.error.HTTPError as e:
            try:
                text = e.read(RESPONSE_BYTES).decode("utf-8", "replace").strip() if e.fp else ""
            except (OSError, http.client.HTTPException):
                text = ""
            e.close()
            raise DeliveryFailed(
                f"HTTP {e.code} {e.reason}" + (f": {one_line(excerpt(redact_text(text), 300))}" if text else "")
            ) from None
        except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as e:
            if deadline.expired or isinstance(e, TimeoutError) or isinstance(getattr(e, "reason", None), TimeoutError):
                raise DeliveryFailed(f"no answer within {self.timeout_s:g} s") from None
            if isinstance(e, urllib.error.URLError):
                raise DeliveryFailed(f"cannot connect: {e.reason}") from None
            # a reset, a bad URL, an answer that is not HTTP (http.client's BadStatusLine, LineTooLong ...)
            raise DeliveryFailed(one_line(excerpt(f"{type(e).__name__}: {e}", 300))) from None
        finally:
            deadline.timer.cancel()
        if deadline.expired:  # the shutdown can read as the end of the headers
            raise DeliveryFailed(f"no answer within {self.timeout_s:g} s")
        if not 200 <= status < 300:
            raise DeliveryFailed(f"HTTP {status}")
        return f"HTTP {status}"


def channels_of(cfg) -> list[Channel]:
    """The configured channels of an `alerts:` block (watch.config.Alerts)."""
    out: list[Channel] = []
    if cfg.command:
        out.append(CommandHook(cfg.command, cfg.timeout_s))
    if cfg.url:
        out.append(HttpPost(cfg.url, cfg.timeout_s))
    return out


@dataclass
class Deliverer:
    """Delivers events over the channels: a new alert with up to 1 + `retries` attempts and backoff_s,
    2 x backoff_s, ... between them; one already tried on an earlier tick, one attempt per tick.
    `log(action, **fields)` gets every attempt; `stop` (set by SIGTERM) ends the waiting between
    attempts, so a shutdown is never held up by a dead webhook."""

    channels: Sequence[Channel]
    retries: int
    backoff_s: float
    log: Callable[..., object]  # log(action: str, **fields)
    stop: threading.Event | None = None
    clock: Callable[[], float] = time.monotonic

    def deliver(
        self, event: Mapping, channel: Channel, attempts: int | None = None, deadline: float | None = None
    ) -> tuple[bool, int]:
        """(delivered, attempts made). No backoff starts that would end past `deadline`."""
        stop = self.stop or threading.Event()
        attempts = attempts or 1 + self.retries
        for n in range(1, attempts + 1):
            started = self.clock()
            try:
                said = channel.send(event)
            except DeliveryFailed as e:
                self.log(
                    "alert-failed",
                    channel=channel.name,
                    attempt=f"{n}/{attempts}",
                    verdict=event["verdict"],
                    previous=event.get("previous"),
                    detail=str(e),
                    seconds=f"{self.clock() - started:.2f}",
                )
                wait = self.backoff_s * 2 ** (n - 1)
                if n == attempts or (deadline is not None and self.clock() + wait >= deadline) or stop.wait(wait):
                    return False, n
                continue
            self.log(
                "alert-delivered",
                channel=channel.name,
                attempt=f"{n}/{attempts}",
                verdict=event["verdict"],
                previous=event.get("previous"),
                detail=said,
                seconds=f"{self.clock() - started:.2f}",
            )
            return True, n
        return False, attempts

    def flush(self, pending: list[dict]) -> list[dict]:
        """Try the pending alerts ({"event": {...}, "channels": [names not yet delivered], "attempts": n
        made so far}), oldest first; returns those still undelivered on some channel (the delivered
        channels removed). A channel that fails is not tried again in this flush (it is down: the
        newer alerts stay pending behind it, in order), nothing starts past DELIVERY_BUDGET_S, and a
        channel no longer configured (the config changed across a restart) is dropped, logged."""
        by_name = {c.name: c for c in self.channels}
        deadline = self.clock() + DELIVERY_BUDGET_S
        down: set[str] = set()
        left: list[dict] = []
        for item in pending:
            todo, before = [], item.get("attempts", 0)
            made = before
            for name in item["channels"]:
                channel = by_name.get(name)
                if channel is None:
                    self.log(
                        "alert-dropped",
                        channel=name,
                        verdict=item["event"]["verdict"],
                        at=item["event"].get("at"),
                        detail="this channel is no longer configured",
                    )
                    continue
                if name in down or (self.stop and self.stop.is_set()) or self.clock() >= deadline:
                    todo.append(name)
                    continue
                ok, n = self.deliver(item["event"], channel, 1 if before else None, deadline)
                made += n
                if not ok:
                    todo.append(name)
                    down.add(name)
            if todo:
                left.append({"event": item["event"], "channels": todo, **({"attempts": made} if made else {})})
        if len(left) > MAX_PENDING:
            for item in left[:-MAX_PENDING]:
                self.log(
                    "alert-dropped",
                    channel=",".join(item["channels"]),
                    verdict=item["event"]["verdict"],
                    at=item["event"].get("at"),
                    attempts=item.get("attempts", 0),
                    detail=f"more than {MAX_PENDING} alerts pending; the oldest are given up",
                )
            left = left[-MAX_PENDING:]
        return left

    def enqueue(self, pending: list[dict], event: dict) -> list[dict]:
        """A new alert joins the pending ones for every configured channel (none: nothing to send)."""
        if not self.channels:
            return pending
        return [*pending, {"event": event, "channels": [c.name for c in self.channels]}]
