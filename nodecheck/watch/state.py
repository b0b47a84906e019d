"""The watcher's state on disk, so a restart resumes where it stopped: the tracker's history, the verdict
and since when, alerts not yet delivered, whether --on-hang already acted. One directory per job:

  state.json   rewritten atomically every tick (temporary file, fsync, rename, fsync of the directory)
  lock         flock'ed while a watcher runs (it holds that watcher's pid): a second one refuses
  alerts.log   every delivery attempt, one line each (appended by the command)

A state file that cannot be read, or holds a field of the wrong type, is moved aside and reported,
never fatal: the watcher starts afresh. The state and the alert log carry the job's log lines (in
messages): the directory and its files are made 0750/0640 whatever the umask (report.store.shared():
the operators' group reads them, others nothing; an existing file is narrowed, never widened).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from nodecheck.core.errors import ConfigError
from nodecheck.report.store import create, make_dirs, shared, write_atomic
from nodecheck.watch.verdicts import VERDICTS

STATE_VERSION = 1
STATE_FILE = "state.json"
LOCK_FILE = "lock"
ALERT_LOG = "alerts.log"


@dataclass
class WatchState:
    job: str  # "1234" or "inventory:train\.py"
    fingerprint: str = ""  # of the settings that judging depends on (config_fingerprint)
    nodes: list[str] = field(default_factory=list)  # the nodes the tracker was built for, in rank order
    tracker: dict | None = None  # Tracker.to_json()
    verdict: str | None = None  # the current verdict: a restart alerts only a change from it
    since: float | None = None  # epoch seconds
    message: str = ""
    pending: list[dict] = field(default_factory=list)  # alerts not yet delivered (alerts.Deliverer.flush)
    hang_actions: int = 0  # --on-hang attempts during the current hang (0 once it ends)
    hang_acted: bool = False  # --on-hang succeeded for the current hang: never again for it
    probed_ticks: int = 0  # ticks that tried to sample nodes
    sampled_ticks: int = 0  # ticks where at least one node answered with a sample
    incident: str | None = None  # the last incident record written
    updated: float = 0.0

    def to_json(self) -> dict:
        return {"state_version": STATE_VERSION, **asdict(self)}

    @classmethod
    def from_json(cls, data: dict) -> WatchState:
        """ValueError when `data` is not a state this version wrote."""
        if not isinstance(data, dict) or data.get("state_version") != STATE_VERSION:
            raise ValueError(f"not a version-{STATE_VERSION} watcher state")
        fields = {k: v for k, v in data.items() if k != "state_version"}
        try:
            state = cls(**fields)
        except TypeError as e:  # unknown or missing keys
            raise ValueError(str(e)) from None
        for name, want in _TYPES.items():
            value = getattr(state, name)
            if not _is(value, want):
                raise ValueError(f"{name}: {type(value).__name__} {_short(repr(value))}, not {_words(want)}")
        if not all(isinstance(n, str) for n in state.nodes):
            raise ValueError("nodes: not all names")
        if state.verdict is not None and state.verdict not in VERDICTS:
            raise ValueError(f"verdict: {state.verdict!r} is not one")
        for item in state.pending:  # as alerts.Deliverer.flush reads them
            if not (
                isinstance(item, dict)
                and isinstance(item.get("event"), dict)
                and "verdict" in item["event"]
                and isinstance(item.get("channels"), list)
                and all(isinstance(c, str) for c in item["channels"])
                and _is(item.get("attempts", 0), int)
            ):
                raise ValueError(f"pending: {_short(repr(item))} is not an alert")
        return state


# what from_json accepts of each field: a value read back is used unchecked later (a "since" that is
# text would crash the start line, a pending alert without channels the first delivery)
_TYPES: dict[str, tuple] = {
    "job": (str,),
    "fingerprint": (str,),
    "nodes": (list,),
    "tracker": (dict, None),
    "verdict": (str, None),
    "since": (float, int, None),
    "message": (str,),
    "pending": (list,),
    "hang_actions": (int,),
    "hang_acted": (bool,),
    "probed_ticks": (int,),
    "sampled_ticks": (int,),
    "incident": (str, None),
    "updated": (float, int),
}


def _is(value, want) -> bool:
    want = want if isinstance(want, tuple) else (want,)
    if value is None:
        return None in want
    if isinstance(value, bool):  # JSON true is not a count
        return bool in want
    return isinstance(value, tuple(t for t in want if t is not None))


def _words(want: tuple) -> str:
    return " or ".join("null" if t is None else t.__name__ for t in want)


def config_fingerprint(cfg) -> str:
    """What judging depends on (progress, bounds, match, interval, gpus, history), not where alerts go:
    a restart with another alert URL is the same watch."""
    judged = cfg.model_dump(mode="json", exclude={"alerts", "on_hang", "forensics", "sample_timeout_s"})
    return hashlib.sha256(json.dumps(judged, sort_keys=True).encode()).hexdigest()[:16]


class StateDir:
    """A job's state directory; `lock()` first, then `load()` / `save()`."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock_fd: int | None = None

    @property
    def state_file(self) -> Path:
        return self.path / STATE_FILE

    @property
    def alert_log(self) -> Path:
        return self.path / ALERT_LOG

    def lock(self) -> None:
        """Hold the directory for this process (released when it exits, even by SIGKILL); ConfigError
        when another watcher holds it."""
        try:
            make_dirs(self.path, shared())
            fd = create(self.path / LOCK_FILE, shared(), read=True, keep=True)
            # made here with its mode: the command's log appends to it as any file, with the umask's
            os.close(create(self.alert_log, shared(), append=True))
        except OSError as e:
            raise ConfigError(
                f"cannot use the state directory {self.path}: {e.strerror or e}",
                file="--state-dir",
                hint="a writable directory (default OUTPUT_DIR/watch/<job>)",
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            holder = _read_pid(fd)
            os.close(fd)
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise ConfigError(
                    f"cannot lock {self.path / LOCK_FILE}: {e.strerror or e}", file="--state-dir"
                ) from None
            raise ConfigError(
                f"another watcher holds {self.path} (pid {holder or 'unknown'})",
                file="--state-dir",
                hint="one watcher per job: stop the other one, or give this one its own --state-dir",
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock_fd = fd

    def unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the descriptor releases the flock
            self._lock_fd = None

    def load(self) -> tuple[WatchState | None, str]:
        """(the saved state or None, a note for the operator: "" when there was nothing to say).
        An unreadable state file is renamed state.json.corrupt-<UTC stamp> and the note says so."""
        try:
            raw = self.state_file.read_bytes()
        except FileNotFoundError:
            return None, ""
        except OSError as e:
            return None, f"cannot read {self.state_file}: {e.strerror or e}; starting afresh"
        try:
            return WatchState.from_json(json.loads(raw)), ""
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            aside = self.path / f"{STATE_FILE}.corrupt-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
            try:
                os.replace(self.state_file, aside)
            except OSError as moved:
                return (
                    None,
                    f"{self.state_file} is unreadable ({_short(e)}) and could not be moved aside "
                    f"({moved.strerror or moved}); starting afresh",
                )
            return None, f"{self.state_file} was unreadable ({_short(e)}); moved to {aside.name}; starting afresh"

    def save(self, state: WatchState) -> None:
        """Write state.json atomically: a crash leaves the previous state or this one, never half."""
        state.updated = time.time()
        write_atomic(self.state_file, json.dumps(state.to_json(), separators=(",", ":")), shared())


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        return int(text) if text.isdigit() else None
    except OSError:
        return None


def _short(e: BaseException | str) -> str:
    text = str(e) or type(e).__name__
    return text if len(text) <= 200 else text[:199] + "…"
