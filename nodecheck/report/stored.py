"""A stored report directory read back (`nodecheck report show|html`): untrusted input. It may have
been copied around, unpacked from an archive or tampered with, and nodecheck reads it as root, so:
the directory itself must not be a symbolic link; every file in it is opened relative to it, one
path component at a time, never following a link and never leaving it (no "..", no absolute
path); only regular files are read (a FIFO would block, a device never end), and at most so many
bytes. Each refusal of the directory or its report.json is a ConfigError naming the path and the
fix; a capture that cannot be read is None (the page says it is missing)."""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Callable
from pathlib import Path

from nodecheck.core.errors import ConfigError
from nodecheck.core.reading import read_at_most

REPORT_JSON_MAX = 1 << 30  # bytes; a 1,024-node run with every capture listed is ~40 MB
# Parsing JSON costs memory per value, not per byte: 150 MB of "[]," is 50 million lists (3.8 GiB).
# A report nodecheck wrote holds ~134 bytes per object or list (the demo's report.json; the
# 16,000-node report of docs/scale.md, 565 MB, ~4.2 million). So before it is parsed, a report.json
# with more than one object or list per STRUCTURE_MIN_BYTES bytes, or more than STRUCTURES_MAX in all,
# is refused: memory then stays near what a real report of that size costs. (Brackets inside strings
# count too: that only makes a real report look denser, well inside the margin.)
STRUCTURE_MIN_BYTES = 32
STRUCTURES_MAX = 16_000_000
CAPTURE_MAX = 8 << 20  # bytes of one capture read for the page (nccl-tests output is kilobytes)
FIX = "give the directory a run wrote (reports/<run-id>, the path `run` printed after `report:`)"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def open_dir(directory: str | Path) -> int:
    """A descriptor of DIR, which must be a directory and not a symbolic link (ConfigError)."""
    directory = str(directory)
    try:
        st = os.lstat(directory)
    except FileNotFoundError:
        raise ConfigError("no such report directory", file=directory, hint=FIX) from None
    except OSError as e:
        raise ConfigError(f"cannot read it: {e.strerror}", file=directory, hint=FIX) from None
    if stat.S_ISLNK(st.st_mode):
        raise ConfigError(
            "is a symbolic link: not followed (it may point anywhere)",
            file=directory,
            hint=f"give the directory it points to: {os.path.realpath(directory)}",
        )
    if not stat.S_ISDIR(st.st_mode):
        raise ConfigError("not a directory", file=directory, hint=FIX)
    try:
        return os.open(directory, _DIR_FLAGS)
    except OSError as e:  # swapped for a link since the lstat, or unreadable
        raise ConfigError(f"cannot open it: {e.strerror}", file=directory, hint=FIX) from None


def read_document(directory: str | Path) -> dict:
    """DIR/report.json's document, checked to be a report this nodecheck reads (ConfigError if not)."""
    from nodecheck.report.json import READS

    where = os.path.join(str(directory), "report.json")
    dir_fd = open_dir(directory)
    try:
        data = _read_file(dir_fd, "report.json", where)
    finally:
        os.close(dir_fd)
    structures = data.count(b"[") + data.count(b"{")
    if structures > STRUCTURES_MAX or structures * STRUCTURE_MIN_BYTES > max(len(data), 1 << 16):
        raise ConfigError(
            f"not a nodecheck report: {structures:,} objects and lists in {len(data):,} bytes "
            f"(a report has at most one per {STRUCTURE_MIN_BYTES} bytes, {STRUCTURES_MAX:,} in all); not parsed",
            file=where,
            hint=FIX,
        )
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ConfigError(f"not JSON: {e}", file=where, hint="a report.json that `run` wrote, whole") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"not a report: a JSON {type(doc).__name__}, not an object", file=where, hint=FIX)
    version = doc.get("report_version")
    if version not in READS:
        wrote = doc.get("nodecheck_version") or "another version"
        raise ConfigError(
            f"report_version {version!r}, this nodecheck reads {', '.join(map(str, READS))}",
            file=where,
            hint=f"read it with the nodecheck that wrote it ({wrote})",
        )
    return doc


def _read_file(dir_fd: int, name: str, where: str) -> bytes:
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        raise ConfigError("no report.json here: not a report directory", file=where, hint=FIX) from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise ConfigError(
                "is a symbolic link: not ours, not followed", file=where, hint="a report directory nodecheck wrote"
            ) from None
        raise ConfigError(f"cannot open it: {e.strerror}", file=where, hint="run as a user who may read it") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ConfigError("not a regular file", file=where, hint=FIX)
        data = read_at_most(fd, REPORT_JSON_MAX + 1)
    finally:
        os.close(fd)
    if len(data) > REPORT_JSON_MAX:
        raise ConfigError(
            f"more than the {REPORT_JSON_MAX} bytes a report may be",
            file=where,
            hint="not a report nodecheck wrote; give the directory `run` printed",
        )
    return data


def read_under(dir_fd: int, relpath: str, limit: int) -> bytes | None:
    """At most `limit` bytes of the regular file at `relpath` under the directory `dir_fd`, or None:
    a path that is absolute, empty or has "." / ".." components, a symbolic link on the way (not
    followed), a missing or unreadable file, or anything but a regular file."""
    parts = relpath.split("/")
    if not relpath or relpath.startswith("/") or any(p in ("", ".", "..") for p in parts):
        return None
    fds: list[int] = []
    try:
        at = dir_fd
        for part in parts[:-1]:
            at = os.open(part, _DIR_FLAGS, dir_fd=at)
            fds.append(at)
        fd = os.open(parts[-1], _FILE_FLAGS, dir_fd=at)
    except OSError:
        return None
    finally:
        for opened in fds:
            os.close(opened)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return read_at_most(fd, limit)
    except OSError:
        return None
    finally:
        os.close(fd)


def capture_reader(directory: str | Path, limit: int = CAPTURE_MAX) -> Callable[[str], str | None]:
    """read_capture for the page: a capture's text by its path relative to the report directory
    (read_under's refusals give None), its first `limit` bytes (a chart needs the table only)."""

    def read(relpath: str) -> str | None:
        try:
            dir_fd = open_dir(directory)
        except ConfigError:
            return None
        try:
            data = read_under(dir_fd, relpath, limit)
        finally:
            os.close(dir_fd)
        return None if data is None else data.decode("utf-8", errors="replace")

    return read
