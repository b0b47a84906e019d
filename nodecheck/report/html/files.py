"""(Re)build report.html of a stored run from its directory: report.json and the captures beside
it, read as untrusted input (nodecheck.report.stored: no link followed, every read bounded, a
capture only at a relative path inside the directory)."""

from __future__ import annotations

from pathlib import Path

from nodecheck.core.errors import ConfigError
from nodecheck.report.html.run_page import render_run
from nodecheck.report.html.sections import inside_report as inside
from nodecheck.report.json import from_dict
from nodecheck.report.store import shared, why, write_atomic
from nodecheck.report.stored import capture_reader, read_document


def rebuild(report_dir: str | Path) -> Path:
    """Write report_dir/report.html from report_dir/report.json and its captures; its path.
    ConfigError naming the file and the fix for a missing, unreadable or bad directory."""
    root = Path(report_dir)
    data = read_document(root)
    try:
        report = from_dict(data)
    except (ValueError, KeyError, TypeError, AttributeError, IndexError) as e:
        raise ConfigError(
            f"not a nodecheck report: {type(e).__name__}: {e}",
            file=str(root / "report.json"),
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
