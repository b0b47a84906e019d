"""`nodecheck report show DIR` and `nodecheck report html DIR`: an earlier run's report again, from
its directory, without re-running anything.

`show` prints what `run` printed: the table (report/table.py, rendered from report.json: a sweep's
summary.txt also holds its diff, which is not the table), the JSON document (report/json.py) or the
JUnit XML (report/junit.py); it exits with the stored report's exit code, as the run did, so a script
can branch on it. `html` (re)builds report.html beside report.json (report/html/files.py).

A report directory is read as untrusted input: DIR must be a directory itself (a symbolic link there
is refused: it may point anywhere), report.json is opened with O_NOFOLLOW relative to it, must be a
regular file no larger than REPORT_MAX_BYTES, and must be a report whose version this nodecheck
reads. Each refusal is a ConfigError (exit 64) naming the path and what to do.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import sys
from argparse import Namespace
from pathlib import Path

from nodecheck.core.errors import ConfigError

REPORT_MAX_BYTES = 1 << 30  # as report/html/files.py: a 1,024-node run with every capture listed is ~100 MB
STDERR_PEEK_BYTES = 1  # junit names a capture's stderr file only when it is non-empty: one byte says so
FIX = "give the directory `nodecheck run` wrote, e.g. reports/<run-id> (the path `run` printed after `report:`)"
EXIT_UNWRITTEN = 70  # report.html could not be written and the writer did not say why as bad input


def report_command(args: Namespace) -> int:
    if args.report_command == "show":
        return show(args.dir, args.format)
    return html(args.dir)


def show(directory: str, fmt: str = "table") -> int:
    """Print the stored report as `run --format FMT` printed it; return its exit code."""
    from nodecheck.report import json as report_json
    from nodecheck.report import junit, table

    if fmt == "json":
        # the stored document as report/json.py's dumps serialized it (key order kept): what `run
        # --format json` printed, byte for byte (a Report rebuilt from it would list cross-node
        # results in another order); checked to be a report first
        doc = load_document(directory)
        sys.stdout.write(json.dumps(doc, sort_keys=False, default=str) + "\n")
        return report_json.from_dict(doc).exit_code
    report = load(directory, with_stderr=fmt == "junit")
    if fmt == "junit":
        sys.stdout.write(junit.render(report))
    else:
        sys.stdout.write(table.render(report))
    return report.exit_code


def html(directory: str) -> int:
    """(Re)build DIR/report.html from report.json and the captures; print its path."""
    os.close(_open_dir(directory))  # the same refusals as show, before anything is written
    try:
        from nodecheck.report.html.files import rebuild  # imported late: only this command needs Jinja2
    except ModuleNotFoundError as e:
        if e.name != "nodecheck.report.html.files":
            raise
        print("nodecheck: error: this build has no report.html writer (nodecheck.report.html.files)", file=sys.stderr)
        return EXIT_UNWRITTEN

    try:
        path = rebuild(Path(directory))
    except OSError as e:
        from nodecheck.report.store import why

        print(f"nodecheck: error: could not write report.html under {directory}: {why(e)}", file=sys.stderr)
        return EXIT_UNWRITTEN
    print(path)
    return 0


def load(directory: str, *, with_stderr: bool = False):
    """The Report stored in `directory`'s report.json (ConfigError when it is not one). Capture texts
    are not read (the table and JSON do not need them); `with_stderr` marks the captures whose
    stderr file is there and non-empty, which is all JUnit says of them."""
    from nodecheck.report import json as report_json

    dir_fd = _open_dir(directory)
    try:
        doc = _read_report_json(directory, dir_fd)
        stderr = _stderr_marks(dir_fd, doc) if with_stderr else None
        return _report(directory, lambda: report_json.from_dict(doc, stderr))
    finally:
        os.close(dir_fd)


def load_document(directory: str) -> dict:
    """report.json's document, checked to be a report this nodecheck reads (ConfigError if not)."""
    from nodecheck.report import json as report_json

    dir_fd = _open_dir(directory)
    try:
        doc = _read_report_json(directory, dir_fd)
    finally:
        os.close(dir_fd)
    _report(directory, lambda: report_json.from_dict(doc))
    return doc


def _report(directory: str, build):
    """build(), a malformed document's error said as bad input naming the file."""
    try:
        return build()
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
        raise ConfigError(
            f"not a nodecheck report: {type(e).__name__}: {e}",
            file=os.path.join(directory, "report.json"),
            hint="it was changed after `run` wrote it",
        ) from None


def _open_dir(directory: str) -> int:
    """A descriptor of DIR, which must be a directory and not a symbolic link."""
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
        return os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:  # swapped for a link since the lstat, or unreadable
        raise ConfigError(f"cannot open it: {e.strerror}", file=directory, hint=FIX) from None


def _read_report_json(directory: str, dir_fd: int) -> dict:
    from nodecheck.report import json as report_json

    where = os.path.join(directory, "report.json")
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open("report.json", flags, dir_fd=dir_fd)
    except FileNotFoundError:
        raise ConfigError("no report.json here: not a report directory", file=directory, hint=FIX) from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise ConfigError(
                "is a symbolic link: not ours, not followed", file=where, hint="a report directory nodecheck wrote"
            ) from None
        raise ConfigError(f"cannot open it: {e.strerror}", file=where, hint="run as a user who may read it") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError("not a regular file", file=where, hint=FIX)
        if st.st_size > REPORT_MAX_BYTES:
            raise ConfigError(
                f"{st.st_size} bytes, more than the {REPORT_MAX_BYTES} a report may be",
                file=where,
                hint="not a report nodecheck wrote; give the directory `run` printed",
            )
        data = _read_at_most(fd, REPORT_MAX_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > REPORT_MAX_BYTES:  # it grew after the fstat
        raise ConfigError(
            f"more than the {REPORT_MAX_BYTES} bytes a report may be",
            file=where,
            hint="not a report nodecheck wrote; give the directory `run` printed",
        )
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ConfigError(f"not JSON: {e}", file=where, hint="a report.json that `run` wrote, whole") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"not a report: a JSON {type(doc).__name__}, not an object", file=where, hint=FIX)
    version = doc.get("report_version")
    if version not in report_json.READS:
        wrote = doc.get("nodecheck_version") or "another version"
        raise ConfigError(
            f"report_version {version!r}, this nodecheck reads {', '.join(map(str, report_json.READS))}",
            file=where,
            hint=f"read it with the nodecheck that wrote it ({wrote})",
        )
    return doc


def _read_at_most(fd: int, limit: int) -> bytes:
    chunks, left = [], limit
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _stderr_marks(dir_fd: int, doc: dict) -> dict[tuple[str, str], tuple[str, str]]:
    """{(node, probe): ("", first byte of its stderr file)} for each capture whose stderr file is a
    non-empty regular file (store writes one only for a capture with stderr)."""
    from nodecheck.report import capture_relpath

    marks = {}
    for c in doc.get("captures", []):
        node, probe = c["node"], c["probe"]
        first = _peek(dir_fd, capture_relpath(node, probe, "stderr"))
        if first:
            marks[(node, probe)] = ("", first)
    return marks


def _peek(dir_fd: int, relpath: str) -> str:
    """The first bytes of a file under the report directory, "" when it is not a regular file there
    (missing, or a symbolic link on the way: refused, not followed)."""
    fds = [dir_fd]
    try:
        parts = relpath.split("/")
        for part in parts[:-1]:
            fds.append(os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fds[-1]))
        fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fds[-1])
    except OSError:
        return ""
    finally:
        for fd_ in fds[1:]:
            os.close(fd_)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        return os.read(fd, STDERR_PEEK_BYTES).decode("utf-8", "replace")
    finally:
        os.close(fd)
