"""Write a run's report directory atomically: reports/<UTC>_<playbook>/{report.json,summary.txt,captures/}."""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from nodecheck.report import Report, capture_relpath
from nodecheck.report.json import dumps

TMP_PREFIX = ".tmp-"
STALE_TMP_S = 3600                             # a temporary this old is a killed run's leftover


def store(report: Report, summary_text: str, output_dir: str | Path, report_json: str | None = None) -> Path:
    """Everything is written into a hidden temporary directory, synced to disk, then renamed into
    place: a reader, a crash or a power cut never sees a half-written report. `report_json`, when
    the caller has already rendered it, saves rendering a large report twice."""
    root = Path(output_dir)
    root.mkdir(parents=True, exist_ok=True)
    _remove_stale_temporaries(root)
    tmp = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{report.run_id}-", dir=root))
    try:
        _write(tmp / "report.json", report_json or dumps(report))
        _write(tmp / "summary.txt", summary_text)
        for c in report.captures:
            _write(tmp / capture_relpath(c.node, c.probe), c.stdout)
            if c.stderr:
                _write(tmp / capture_relpath(c.node, c.probe, "stderr"), c.stderr)
        for folder in [*(p for p in tmp.rglob("*") if p.is_dir()), tmp]:
            _fsync_dir(folder)                 # the entries, not just the bytes, must be on disk
        os.chmod(tmp, 0o755)                   # mkdtemp makes it 0700
        final = _publish(tmp, root, report.run_id)
        _fsync_dir(root)
        return final
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
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
