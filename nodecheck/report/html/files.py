"""(Re)build report.html of a stored run from its directory: report.json and the captures beside
it. A report directory may have been copied around, unpacked from an archive or tampered with, so
every read is bounded, a symbolic link in it is refused (never followed), and a capture is read
only at a relative path inside the directory."""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Callable
from pathlib import Path

from nodecheck.core.errors import ConfigError
from nodecheck.report.html.run_page import render_run
from nodecheck.report.html.sections import inside_report as inside
from nodecheck.report.json import from_dict
from nodecheck.report.store import shared, why, write_atomic

REPORT_JSON_MAX = 1 << 30  # bytes; a 1,024-node run with every capture listed is ~100 MB
CAPTURE_MAX = 8 << 20  # bytes of one capture read for the page (nccl-tests output is kilobytes)
HINT = "give the directory a run wrote (reports/<run-id>/, the one holding report.json)"


def rebuild(report_dir: str | Path) -> Path:
    """Write report_dir/report.html from report_dir/report.json and its captures; its path.
    ConfigError naming the file and the fix for a missing, unreadable or bad directory."""
    root = Path(report_dir)
    if not root.is_dir():
        raise ConfigError("not a report directory (no such directory)", file=str(root), hint=HINT)
    source = root / "report.json"
    data = _read_report_json(source)
    try:
        report = from_dict(data)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise ConfigError(
            f"not a nodecheck report: {type(e).__name__}: {e}",
            file=str(source),
            hint="a report.json written by nodecheck run/sweep/gate (report_version 2 or 3)",
        ) from None
    stderr_paths = [
        c["stderr"]
        for c in data.get("captures") or []
        if isinstance(c, dict) and isinstance(c.get("stderr"), str) and inside(c["stderr"])
    ]
    html = render_run(report, capture_reader(root), stderr_paths=stderr_paths)
    target = root / "report.html"
    try:
        write_atomic(target, html, shared())
    except OSError as e:
        raise ConfigError(
            f"cannot write report.html: {why(e)}",
            file=str(target),
            hint="check the directory's permissions and free space",
        ) from None
    return target


def _read_report_json(path: Path) -> dict:
    try:
        text = read_bounded(path, REPORT_JSON_MAX)
    except _Symlink:
        raise ConfigError(
            "is a symbolic link: nodecheck does not follow links in a report directory",
            file=str(path),
            hint="replace the link with the report file itself",
        ) from None
    except _TooBig:
        raise ConfigError(f"larger than {REPORT_JSON_MAX} bytes: not read", file=str(path), hint=HINT) from None
    except FileNotFoundError:
        raise ConfigError("no report.json in this directory", file=str(path), hint=HINT) from None
    except OSError as e:
        raise ConfigError(f"cannot read: {why(e)}", file=str(path), hint="check its permissions") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"not JSON: {e.msg} at line {e.lineno}", file=str(path), hint=HINT) from None
    if not isinstance(data, dict):
        raise ConfigError("not a nodecheck report (not a JSON object)", file=str(path), hint=HINT)
    return data


def capture_reader(root: str | Path, limit: int = CAPTURE_MAX) -> Callable[[str], str | None]:
    """read_capture for render_run: a capture's text by its relative path, or None when the path is
    not inside the directory (absolute, "..", a link leading out), is a link, is missing, or is
    unreadable. At most `limit` bytes are read (the rest dropped: a chart needs the table only)."""
    base = Path(root).resolve()

    def read(rel: str) -> str | None:
        if not inside(rel):
            return None
        path = base / rel
        try:
            if not path.resolve().is_relative_to(base):  # a directory link leading out
                return None
            return read_bounded(path, limit, cut=True)
        except (OSError, _Symlink, _TooBig, RuntimeError):
            return None

    return read


class _Symlink(Exception):
    pass


class _TooBig(Exception):
    pass


def read_bounded(path: Path, limit: int, *, cut: bool = False) -> str:
    """A regular file's text, opened with O_NOFOLLOW (a link: _Symlink), at most `limit` bytes
    (more: _TooBig, or the first `limit` when `cut`); invalid UTF-8 replaced."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise _Symlink(str(path)) from None
        raise
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):  # a FIFO or device would block or never end
            raise OSError(errno.EINVAL, "not a regular file")
        data = f.read(limit + 1)
    if len(data) > limit:
        if not cut:
            raise _TooBig(str(path))
        data = data[:limit]
    return data.decode("utf-8", errors="replace")
