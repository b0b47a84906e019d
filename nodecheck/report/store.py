"""Write a run's report directory atomically: reports/<UTC>_<playbook>/{report.json,summary.txt,captures/};
remove old ones (sweep retention) only where they are exactly what this module wrote."""
from __future__ import annotations

import os
import re
import shutil
import stat
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterable, Mapping

from nodecheck.report import Report, capture_relpath
from nodecheck.report.json import dumps

TMP_PREFIX = ".tmp-"
STALE_TMP_S = 3600                             # a temporary this old is a killed run's leftover


def store(report: Report, summary_text: str, output_dir: str | Path, report_json: str | None = None) -> Path:
    """Everything is written into a hidden temporary directory, synced to disk, then renamed into
    place: a reader, a crash or a power cut never sees a half-written report. `report_json`, when
    the caller has already rendered it, saves rendering a large report twice."""
    def write(tmp: Path) -> None:
        _write(tmp / "report.json", report_json or dumps(report))
        _write(tmp / "summary.txt", summary_text)
        for c in report.captures:
            _write(tmp / capture_relpath(c.node, c.probe), c.stdout)
            if c.stderr:
                _write(tmp / capture_relpath(c.node, c.probe, "stderr"), c.stderr)
    return _store_dir(report.run_id, write, output_dir)


def store_files(run_id: str, files: Mapping[str, str | bytes], output_dir: str | Path) -> Path:
    """Any record directory (a watcher's incident: incident.json, samples.jsonl, summary.txt), written
    as store() writes a report: into a hidden temporary, synced, renamed to <output_dir>/<run_id>
    (-2, -3 … when that name is taken). `files` maps a relative path inside it to its text (or bytes:
    a forensics record keeps the flight-recorder dumps as they were read)."""
    if not _SAFE_RUN_ID.fullmatch(run_id):
        raise ValueError(f"run id {run_id!r}: letters, digits, '.', '_' and '-', not starting with '.'")

    def write(tmp: Path) -> None:
        for relpath, text in files.items():
            target = (tmp / relpath).resolve()
            if tmp.resolve() not in target.parents:    # "../x" or "/x" would write outside the record
                raise ValueError(f"{relpath!r} is not a path inside the record")
            _write(target, text)
    return _store_dir(run_id, write, output_dir)


def _store_dir(run_id: str, write: Callable[[Path], None], output_dir: str | Path) -> Path:
    """The directory `write` fills, made atomically: a hidden temporary, its files and entries synced,
    renamed into place. Files 0644 and directories 0755 whatever the umask: a report or record holds
    tool output and the job's log lines, never writable by others."""
    root = Path(output_dir)
    root.mkdir(mode=0o755, parents=True, exist_ok=True)
    _remove_stale_temporaries(root)
    tmp = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{run_id}-", dir=root))
    try:
        write(tmp)
        for folder in [*(p for p in tmp.rglob("*") if p.is_dir()), tmp]:
            _fsync_dir(folder)                 # the entries, not just the bytes, must be on disk
        os.chmod(tmp, 0o755)                   # mkdtemp makes it 0700
        final = _publish(tmp, root, run_id)
        _fsync_dir(root)
        return final
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


_SAFE_RUN_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")   # never hidden, never ".."


def _write(path: Path, text: str | bytes) -> None:
    missing = [d for d in (path.parent, *path.parent.parents) if not d.exists()]
    for folder in reversed(missing):           # mkdir(parents=True) gives the parents 0777 - umask
        folder.mkdir(mode=0o755, exist_ok=True)
    mode = "wb" if isinstance(text, bytes) else "w"
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644), mode) as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_stale_temporaries(root: Path) -> None:
    cutoff = time.time() - STALE_TMP_S
    for leftover in root.glob(f"{TMP_PREFIX}*"):
        try:
            if leftover.is_dir() and leftover.stat().st_mtime < cutoff:
                shutil.rmtree(leftover, ignore_errors=True)
        except OSError:                        # another run removed it first
            pass


def _publish(tmp: Path, root: Path, run_id: str) -> Path:
    """Rename to the run id; two runs in the same second get -2, -3 … rather than overwriting."""
    for n in range(1, 1000):
        final = root / (run_id if n == 1 else f"{run_id}-{n}")
        try:
            os.rename(tmp, final)              # atomic; fails if final exists and is not empty
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
        if not report_dir:                     # its report could not be written
            continue
        path = Path(report_dir)
        try:
            why = _not_its_report_dir(path, run_id, root)
        except FileNotFoundError:              # removed by hand, or by an overlapping sweep
            continue
        except OSError as e:
            why = f"cannot look at it: {e.strerror or e}"
        if why:
            warnings.append(f"retention: left {path} in place: {why}")
            continue
        failed: list[str] = []
        _rmtree(path, lambda p, e: failed.append(f"{p}: {getattr(e, 'strerror', None) or e}"))
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
