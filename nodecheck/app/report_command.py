"""`nodecheck report show DIR` and `nodecheck report html DIR`: an earlier run's report again, from
its directory, without re-running anything.

`show` prints what `run` printed: the table (report/table.py, rendered from report.json: a sweep's
summary.txt also holds its diff, which is not the table), the JSON document (report/json.py) or the
JUnit XML (report/junit.py); it exits with the stored report's exit code, as the run did, so a script
can branch on it. `html` (re)builds report.html beside report.json (report/html/files.py).

A report directory is read as untrusted input (nodecheck.report.stored: the directory not a symbolic
link, report.json opened relative to it without following one, a regular file of bounded size, a
report whose version this nodecheck reads); each refusal is a ConfigError (exit 64) naming the path
and what to do.
"""

from __future__ import annotations

import json
import os
import sys
from argparse import Namespace
from pathlib import Path

from nodecheck.core.errors import ConfigError
from nodecheck.report.stored import open_dir, read_document, read_under

STDERR_PEEK_BYTES = 1  # junit names a capture's stderr file only when it is non-empty: one byte says so


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
    from nodecheck.report.html.files import rebuild  # imported late: only this command needs Jinja2

    print(rebuild(Path(directory)))
    return 0


def load(directory: str, *, with_stderr: bool = False):
    """The Report stored in `directory`'s report.json (ConfigError when it is not one). Capture texts
    are not read (the table and JSON do not need them); `with_stderr` marks the captures whose
    stderr file is there and non-empty, which is all JUnit says of them."""
    from nodecheck.report import json as report_json

    doc = read_document(directory)
    stderr = _stderr_marks(directory, doc) if with_stderr else None
    return _report(directory, lambda: report_json.from_dict(doc, stderr))


def load_document(directory: str) -> dict:
    """report.json's document, checked to be a report this nodecheck reads (ConfigError if not)."""
    from nodecheck.report import json as report_json

    doc = read_document(directory)
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


def _stderr_marks(directory: str, doc: dict) -> dict[tuple[str, str], tuple[str, str]]:
    """{(node, probe): ("", first byte of its stderr file)} for each capture whose stderr file is a
    non-empty regular file (store writes one only for a capture with stderr)."""
    from nodecheck.report import capture_relpath

    marks = {}
    dir_fd = open_dir(directory)
    try:
        for c in doc.get("captures", []):
            node, probe = c["node"], c["probe"]
            first = read_under(dir_fd, capture_relpath(node, probe, "stderr"), STDERR_PEEK_BYTES)
            if first:
                marks[(node, probe)] = ("", first.decode("utf-8", "replace"))
    finally:
        os.close(dir_fd)
    return marks
