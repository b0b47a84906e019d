"""The end of a run: the report stored, printed in the asked format, the exit code (the progress
line while it runs: app/progress_view.py)."""

from __future__ import annotations

import sys
from argparse import Namespace


def metrics_file(path: str) -> str:
    """`run --metrics FILE`, checked before anything runs (an argparse type: a bad one exits 64):
    node_exporter's textfile collector reads only *.prom files, from a directory that exists."""
    from argparse import ArgumentTypeError
    from pathlib import Path

    target = Path(path)
    if target.suffix != ".prom":
        raise ArgumentTypeError(
            f"{path}: node_exporter's textfile collector reads only *.prom files (e.g. {target.with_suffix('.prom')})"
        )
    if not target.parent.is_dir():
        raise ArgumentTypeError(f"{path}: no directory {target.parent} (give the collector's textfile directory)")
    return path


def write_metrics(report, path: str | None, problems: int = 0) -> str:
    """The run as a Prometheus textfile (report/metrics.py, the metrics a sweep writes: statuses per
    node and check, the measurements), replaced atomically so node_exporter never reads half of it.
    Why it could not be written, said on stderr too; "" when written or not asked for."""
    if not path:
        return ""
    from nodecheck.report import metrics
    from nodecheck.report.diff import snapshot
    from nodecheck.report.store import why

    try:
        metrics.write_atomic(path, metrics.render(snapshot(report), problems=problems, run=True))
    except OSError as e:
        return _said(f"could not write the metrics file {path}: {why(e)}")
    return ""


def _said(problem: str) -> str:
    print(f"nodecheck: error: {problem}", file=sys.stderr)
    return problem


def publish(report, args: Namespace) -> int:
    """Store the report, print it in the asked format; the exit code follows the report. A report
    that could not be written (a full or read-only disk) is said on stderr with the directory and
    the reason; the verdicts are still printed, and the run never exits 0 or 1 for it (3 then;
    2 and 3 are kept): a lost report is not a clean bill of health. The same holds for the
    metrics file (`--metrics`) when one was asked for and could not be written. The table's status
    line then says the exit the command gives, and why (summary.txt keeps the report's own)."""
    from nodecheck.report import exit_code_with, table
    from nodecheck.report import json as report_json
    from nodecheck.report.html.run_page import page_or_none
    from nodecheck.report.store import store, why

    report = report_json.redacted(report)  # (the runner's reports already are: then this is free)
    summary, as_json = table.render(report), report_json.dumps(report)
    html = page_or_none(report, lambda why_not: print(f"nodecheck: warning: {why_not}", file=sys.stderr))
    problems: list[str] = []
    try:
        where = str(store(report, summary, args.output_dir, as_json, html=html))
    except OSError as e:
        problems.append(_said(f"could not write the report under {args.output_dir}: {why(e)}; nothing was left there"))
        where = None
    metrics_problem = write_metrics(report, getattr(args, "metrics", None), problems=int(where is None))
    problems += [metrics_problem] if metrics_problem else []
    code = exit_code_with(report, problems)
    if args.format in ("json", "junit"):  # stdout is one document; the rest goes to stderr
        if args.format == "junit":
            from nodecheck.report import junit

            sys.stdout.write(junit.render(report))
        else:
            sys.stdout.write(as_json)
        print(
            f"report: {where}" if where else f"report: NOT WRITTEN (see the error above); exit {code}", file=sys.stderr
        )
    else:
        printed = table.render(report, problems) if problems else summary  # rendered again only then
        sys.stdout.write(
            printed + (f"report: {where}\n" if where else f"report: NOT WRITTEN (see the error above); exit {code}\n")
        )
    if getattr(args, "html", False) and where and html is not None:
        sys.stdout.flush()  # after the report line, whichever stream that went to
        print(f"report.html: {where}/report.html", file=sys.stderr)
    return code
