"""The end of a run: the report stored, printed in the asked format, the exit code; and the
progress bar while it runs."""

from __future__ import annotations

import sys
from argparse import Namespace
from collections.abc import Callable, Iterator
from contextlib import contextmanager


def publish(report, args: Namespace) -> int:
    """Store the report, print it in the asked format; the exit code follows the report. A report
    that could not be written (a full or read-only disk) is said on stderr with the directory and
    the reason; the verdicts are still printed, and the run never exits 0 or 1 for it (3 then;
    2 and 3 are kept): a lost report is not a clean bill of health."""
    from nodecheck.report import EXIT_PASS, EXIT_UNKNOWN, EXIT_WARN, table
    from nodecheck.report import json as report_json
    from nodecheck.report.store import store, why

    report = report_json.redacted(report)  # (the runner's reports already are: then this is free)
    summary, as_json = table.render(report), report_json.dumps(report)
    try:
        where = str(store(report, summary, args.output_dir, as_json))
    except OSError as e:
        print(
            f"nodecheck: error: could not write the report under {args.output_dir}: {why(e)}; nothing was left there",
            file=sys.stderr,
        )
        where = None
    code = report.exit_code
    if where is None and code in (EXIT_PASS, EXIT_WARN):
        code = EXIT_UNKNOWN
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
        sys.stdout.write(
            summary + (f"report: {where}\n" if where else f"report: NOT WRITTEN (see the error above); exit {code}\n")
        )
    return code


@contextmanager
def progress(total: int, enabled: bool) -> Iterator[Callable[[object], None] | None]:
    """A tqdm bar on a terminal only: the tick callback for each node done, or None without a bar."""
    if not enabled:
        yield None
        return
    from tqdm import tqdm

    bar = tqdm(total=total, unit="node", file=sys.stderr, leave=False)
    try:
        yield lambda _node: bar.update(1)
    finally:
        bar.close()
