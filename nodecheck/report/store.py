"""Write a run's report directory atomically: reports/<UTC>_<playbook>/{report.json,summary.txt,captures/};
remove old ones (sweep retention) only where they are exactly what this module wrote.

Who may read what nodecheck writes (README, "Files and permissions"): reports, captures, incident
records, the history database, the watcher's state and logs hold tool output, job log lines and node
facts, so they are files 0640 in directories 0750, owned by the operators' group when
NODECHECK_REPORT_GROUP names one (else the process's own group: root's, for a root run). Forensics
records hold every rank's stack, environment and flight-recorder dumps: 0600/0700, the owner alone.
The modes are set explicitly, whatever the umask; an existing directory nodecheck did not create
now is never widened (nor changed)."""

from __future__ import annotations

import errno
import grp
import os
import re
import shutil
import stat
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from nodecheck.core.redact import redact_text
from nodecheck.report import Report, capture_relpath
from nodecheck.report.json import dumps

TMP_PREFIX = ".tmp-"
STALE_TMP_S = 3600  # a temporary this old is a killed run's leftover
SYNC_THREADS = 16  # fsyncs in flight while a record directory is synced
GROUP_ENV = "NODECHECK_REPORT_GROUP"  # the operators' group: a name or a numeric gid


@dataclass(frozen=True)
class Access:
    """The mode of what is written, files and directories, and the group that owns them (-1: the
    process's own)."""

    file_mode: int
    dir_mode: int
    gid: int = -1


def shared() -> Access:
    """Reports, captures, incidents, history, watch state, logs: the owner writes, the operators'
    group reads, others nothing."""
    return Access(0o640, 0o750, report_gid())


def private() -> Access:
    """Forensics records (stacks, environments, dumps): the owner alone."""
    return Access(0o600, 0o700)


_warned: set[str] = set()
_warned_lock = threading.Lock()


def _warn_once(text: str) -> None:
    with _warned_lock:
        if text in _warned:
            return
        _warned.add(text)
    print(f"nodecheck: warning: {text}", file=sys.stderr)


def report_gid() -> int:
    """The gid NODECHECK_REPORT_GROUP names, or -1 (unset, or unknown: said once on stderr; the files
    then keep the process's group, which is narrower, never wider)."""
    name = os.environ.get(GROUP_ENV, "").strip()
    if not name:
        return -1
    try:
        return int(name) if name.isdigit() else grp.getgrnam(name).gr_gid
    except KeyError:
        _warn_once(f"{GROUP_ENV}={name}: no such group; reports keep the process's own group")
        return -1


def _own(fd_or_path, access: Access) -> None:
    """The access's group, then its mode (chmod after chown: a chown may clear mode bits)."""
    if access.gid >= 0:
        try:
            if isinstance(fd_or_path, int):
                os.fchown(fd_or_path, -1, access.gid)
            else:
                os.chown(fd_or_path, -1, access.gid, follow_symlinks=False)
        except PermissionError:  # not root and not in the group: narrower, never wider
            _warn_once(
                f"cannot give files to group {access.gid} ({GROUP_ENV}): not a member; "
                "they keep the process's own group"
            )
    if isinstance(fd_or_path, int):
        os.fchmod(fd_or_path, access.file_mode)
    else:  # a directory this process has just made
        os.chmod(fd_or_path, access.dir_mode)


def make_dirs(path: str | Path, access: Access | None = None) -> None:
    """mkdir -p: each directory made here gets the access's mode and group (Path.mkdir would give the
    parents 0777 - umask); the ones already there are left as they are."""
    access = access or shared()
    path = Path(path)
    missing = []
    while not os.path.lexists(path):
        missing.append(path)
        path = path.parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, 0o700)  # closed until its mode and group are set
        except FileExistsError:  # another run made it meanwhile: theirs, as it is
            continue
        _own(folder, access)


def create(
    path: str | Path, access: Access | None = None, *, append: bool = False, read: bool = False, keep: bool = False
) -> int:
    """Open a file for writing (and reading, `read`), truncated unless `append` or `keep` (its bytes
    left as they are: a database nodecheck is about to open). A new file gets the
    access's mode and group; an existing one is narrowed to at most that mode, never widened.
    O_NOFOLLOW: a symbolic link planted where nodecheck writes is refused, not followed. Returns the
    descriptor."""
    access = access or shared()
    flags = (os.O_RDWR if read else os.O_WRONLY) | os.O_CLOEXEC | os.O_NOFOLLOW
    try:  # 0600 until its mode and group are set
        fd, new = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o600), True
    except FileExistsError:
        fd, new = os.open(path, flags | (os.O_APPEND if append else 0 if keep else os.O_TRUNC)), False
    try:
        if new:
            _own(fd, access)
        else:
            mode = stat.S_IMODE(os.fstat(fd).st_mode)
            if mode & ~access.file_mode:
                os.fchmod(fd, mode & access.file_mode)
    except BaseException:
        os.close(fd)
        raise
    return fd


def append_synced(path: str | Path, text: str, access: Access | None = None) -> None:
    """Append text to a file (created as `create` does: never through a symlink), then fsync it:
    an action record's line is on disk before the action it announces is taken."""
    fd = create(path, access, append=True)
    with os.fdopen(fd, "a", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def write_atomic(path: str | Path, data: str | bytes, access: Access | None = None) -> None:
    """Replace one file whole: a temporary beside it (same filesystem; hidden, ".<name>.<random>.tmp"),
    written, synced, given the access's mode and group, renamed over the file, the directory synced.
    A crash, a full disk or a reader never sees half a file; a failure leaves the old file and no
    temporary."""
    path = Path(path)
    access = access or shared()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            _own(f.fileno(), access)
            f.write(data if isinstance(data, bytes) else data.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(path.parent)  # the rename itself survives a power cut


def read_newest(path: str | Path, max_bytes: int) -> tuple[str, os.stat_result] | None:
    """The newest `max_bytes` of one of nodecheck's own state files (a log, a record), from its first
    whole line, and the file's stat (for the caller's owner and mode checks); None when there is no
    such file. Never through a symbolic link (ELOOP), never blocking on a FIFO, and never anything but
    a regular file: OSError, which why() words."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        if st.st_size > max_bytes:
            f.seek(st.st_size - max_bytes)
            f.readline()  # the first line read may be cut: start at the next whole one
        return f.read(max_bytes).decode("utf-8", errors="replace"), st


def why(e: OSError) -> str:
    """An OSError as an operator reads it: "No space left on device (ENOSPC)"; the temporary's path
    an error names is nodecheck's business, not theirs."""
    code = errno.errorcode.get(e.errno or 0)
    text = e.strerror or str(e)
    return f"{text} ({code})" if code else text


def store(
    report: Report,
    summary_text: str,
    output_dir: str | Path,
    report_json: str | None = None,
    html: str | None = None,
) -> Path:
    """Everything is written into a hidden temporary directory, synced to disk, then renamed into
    place: a reader, a crash, a power cut or a full disk never sees a half-written report. Secrets
    are masked in what is written (report.json by its renderer; the summary and the captures here:
    a capture is raw tool output, and a tool may echo a token). `report_json`, when the caller has
    already rendered it (with report.json.dumps), saves rendering a large report twice. `html`: the
    run's page (nodecheck.report.html.run_page), written as report.html beside report.json."""

    def write(tmp: Path, access: Access) -> None:
        _write(tmp / "report.json", report_json or dumps(report), access)
        _write(tmp / "summary.txt", redact_text(summary_text), access)
        if html is not None:
            _write(tmp / "report.html", redact_text(html), access)
        for c in report.captures:
            _write(tmp / capture_relpath(c.node, c.probe), redact_text(c.stdout), access)
            if c.stderr:
                _write(tmp / capture_relpath(c.node, c.probe, "stderr"), redact_text(c.stderr), access)

    return _store_dir(report.run_id, write, output_dir, shared())


def stamp(epoch: float) -> str:
    """A record directory's UTC time, as its name starts: "20250102T030405Z"."""
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def safe_key(text: str) -> str:
    """A key (a job, a node, a file name) as one path component: "1234", "1234_7", "hosts-3f2a9c1e"."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", text).lstrip(".") or "_"


def store_files(
    run_id: str, files: Mapping[str, str | bytes], output_dir: str | Path, access: Access | None = None
) -> Path:
    """Any record directory (a watcher's incident: incident.json, samples.jsonl, summary.txt), written
    as store() writes a report: into a hidden temporary, synced, renamed to <output_dir>/<run_id>
    (-2, -3 … when that name is taken). `files` maps a relative path inside it to its text (or bytes:
    a forensics record keeps the flight-recorder dumps as they were read). `access`: shared() unless
    given (forensics records are private())."""
    if not _SAFE_RUN_ID.fullmatch(run_id):
        raise ValueError(f"run id {run_id!r}: letters, digits, '.', '_' and '-', not starting with '.'")

    def write(tmp: Path, access: Access) -> None:
        for relpath, text in files.items():
            target = (tmp / relpath).resolve()
            if tmp.resolve() not in target.parents:  # "../x" or "/x" would write outside the record
                raise ValueError(f"{relpath!r} is not a path inside the record")
            _write(target, text, access)

    return _store_dir(run_id, write, output_dir, access or shared())


def _store_dir(run_id: str, write: Callable[[Path, Access], None], output_dir: str | Path, access: Access) -> Path:
    """The directory `write` fills, made atomically: a hidden temporary, its files and entries synced,
    renamed into place, with the access's modes and group whatever the umask. Whatever fails (a full
    disk, a read-only one), the temporary is removed: no half-written record is ever left."""
    root = Path(output_dir)
    make_dirs(root, shared())  # reports/ itself, when nodecheck makes it
    _remove_stale_temporaries(root)
    tmp = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{run_id}-", dir=root))  # 0700 while filled
    try:
        write(tmp, access)
        _sync_tree(tmp)  # every file's bytes, then every directory's entries, on disk before the rename
        _own(tmp, access)
        final = _publish(tmp, root, run_id)
        _fsync_dir(root)
        return final
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


_SAFE_RUN_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")  # never hidden, never ".."


def _write(path: Path, text: str | bytes, access: Access) -> None:
    make_dirs(path.parent, access)
    fd = create(path, access)
    with open(fd, "wb" if isinstance(text, bytes) else "w") as f:
        f.write(text)  # synced by _sync_tree, with all the record's files, before it is published


def _sync_tree(top: Path) -> None:
    """fsync every file under top, then every directory (top last), several at a time: fsync releases
    the GIL and the filesystem's journal commits concurrent ones together. A report holds one capture
    per node and probe (32,000 files at 2,000 nodes): one fsync after another, 20 s to minutes."""
    files: list[Path] = []
    dirs: list[Path] = []
    for path in top.rglob("*"):
        (dirs if path.is_dir() else files).append(path)
    with ThreadPoolExecutor(max_workers=SYNC_THREADS, thread_name_prefix="nodecheck-fsync") as pool:
        list(pool.map(_fsync_file, files))  # list(): the first error is raised here
        list(pool.map(_fsync_dir, dirs))
    _fsync_dir(top)


def _fsync(path: Path, kind: int) -> None:
    fd = os.open(path, os.O_RDONLY | kind)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_file(path: Path) -> None:
    _fsync(path, os.O_NOFOLLOW)


def _fsync_dir(path: Path) -> None:
    _fsync(path, os.O_DIRECTORY)


def _remove_stale_temporaries(root: Path) -> None:
    cutoff = time.time() - STALE_TMP_S
    for leftover in root.glob(f"{TMP_PREFIX}*"):
        try:
            if leftover.is_dir() and leftover.stat().st_mtime < cutoff:
                shutil.rmtree(leftover, ignore_errors=True)
        except OSError:  # another run removed it first
            pass


def _publish(tmp: Path, root: Path, run_id: str) -> Path:
    """Rename to the run id; two runs in the same second get -2, -3 … rather than overwriting."""
    for n in range(1, 1000):
        final = root / (run_id if n == 1 else f"{run_id}-{n}")
        try:
            os.rename(tmp, final)  # atomic; fails if final exists and is not empty
            return final
        except OSError:
            if not final.exists():
                raise
    raise FileExistsError(f"too many reports named {run_id} in {root}")


def remove_reports(reports: Iterable[tuple[str, str | None]], output_dir: str | Path) -> tuple[int, list[str]]:
    """Remove report directories, given as (run id, directory) (sweep retention), each only if it is
    what store() made of that run: a directory, not a symbolic link, right inside output_dir, named
    after the run id (or run id-2, -3 ... as _publish names them), with a report.json file in it.
    Anything else is left in place and warned about; one already gone is not. Returns (removed,
    warnings)."""
    root = os.path.realpath(output_dir)
    removed, warnings = 0, []
    for run_id, report_dir in reports:
        if not report_dir:  # its report could not be written
            continue
        path = Path(report_dir)
        try:
            why = _not_its_report_dir(path, run_id, root)
        except FileNotFoundError:  # removed by hand, or by an overlapping sweep
            continue
        except OSError as e:
            why = f"cannot look at it: {e.strerror or e}"
        if why:
            warnings.append(f"retention: left {path} in place: {why}")
            continue
        failed: list[str] = []
        _rmtree(path, lambda p, e: failed.append(f"{p}: {getattr(e, 'strerror', None) or e}"))  # noqa: B023 - called here
        if failed:
            more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
            warnings.append(f"retention: could not remove the report directory {path}: {failed[0]}{more}")
        else:
            removed += 1
    return removed, warnings


def _not_its_report_dir(path: Path, run_id: str, root: str) -> str:
    """Why `path` is not a report directory retention may remove ("" when it is); raises
    FileNotFoundError when there is nothing there. lstat throughout: no symbolic link is followed."""
    mode = os.lstat(path).st_mode
    if os.path.realpath(path.parent) != root:
        return f"not in the --output-dir {root}"
    if path.name != run_id and not re.fullmatch(re.escape(run_id) + r"-[0-9]+", path.name):
        return f"not named after the sweep's run id {run_id}"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if not stat.S_ISDIR(mode):
        return "not a directory"
    try:
        if not stat.S_ISREG(os.lstat(path / "report.json").st_mode):
            return "its report.json is not a file"
    except FileNotFoundError:
        return "no report.json in it"
    return ""


def _rmtree(path: Path, failed) -> None:
    """shutil.rmtree, each failure to `failed(path, exception)`; on Linux it neither follows nor
    removes through symbolic links inside (rmtree.avoids_symlink_attacks)."""
    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=lambda func, p, e: failed(p, e))
    else:
        shutil.rmtree(path, onerror=lambda func, p, info: failed(p, info[1]))
