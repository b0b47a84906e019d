"""`nodecheck sweep`: one fleet sweep per invocation (a systemd timer or cron runs it; no daemon).

Run the playbook over SSH, store the report, compare with the last sweep of the same playbook,
keep the sweep in the history database, flag repeat offenders, write the Prometheus textfile, then
(with --drain/--resume) apply the Slurm gate. The exit code is the report's, as for `run`; a sweep
whose report, history or metrics could not be kept never exits 0 or 1.
"""
from __future__ import annotations

import json
import sqlite3
import sys
from argparse import Namespace
from dataclasses import replace
from pathlib import Path

from nodecheck.errors import ConfigError

MAX_OFFENDER_WINDOW = 1000                     # sweeps; hourly, that is six weeks


def parse_offender(text: str) -> tuple[int, int]:
    """--offender K/N -> (k, n), 1 <= k <= n."""
    try:
        k, n = (int(part) for part in text.split("/"))
    except ValueError:
        raise ConfigError(f"--offender must be K/N, e.g. 3/5, got {text!r}", file="arguments") from None
    if not 1 <= k <= n <= MAX_OFFENDER_WINDOW:
        raise ConfigError(f"--offender {text}: need 1 <= K <= N <= {MAX_OFFENDER_WINDOW}", file="arguments",
                          hint="3/5 flags a node that failed in 3 of the last 5 sweeps")
    return k, n


def history_path(args: Namespace) -> Path:
    return Path(args.history) if args.history else Path(args.output_dir) / "history.sqlite"


def _check_metrics_path(path: str) -> None:
    """Before anything runs: node_exporter reads *.prom files only, from a directory that exists."""
    target = Path(path)
    if target.suffix != ".prom":
        raise ConfigError(f"--metrics {path}: node_exporter's textfile collector reads only *.prom files",
                          file="arguments", hint=f"--metrics {target.with_suffix('.prom')}")
    if not target.parent.is_dir():
        raise ConfigError(f"--metrics {path}: no directory {target.parent}", file="arguments",
                          hint="give node_exporter's --collector.textfile.directory")


def sweep_command(args: Namespace) -> int:
    from nodecheck import gatecmd
    from nodecheck.commands import _ensure_open_files, _progress, _stop_on_signals, _targets
    from nodecheck.history import History
    from nodecheck.playbook import load_playbook

    k, n = parse_offender(args.offender)
    if args.metrics:
        _check_metrics_path(args.metrics)
    if args.drain or args.resume:
        # the gate config before anything runs: an error in it must not surface after a fleet-wide
        # sweep (its output lost, exit 64), and its retries and drain_on are the run's, not only the drain's
        from nodecheck import gateconfig
        gateconfig.apply(args, gateconfig.load(gateconfig.config_path(args.config), "sweep")[0])
    playbook = load_playbook(args.playbook, tuple(args.pins))
    nodes, excluded, transport = _targets(args, playbook)
    if not args.local:
        _ensure_open_files(min(args.fanout, len(nodes)))
    with History.open(history_path(args)) as history:      # a history we cannot write: nothing runs
        # a progress bar only for a person at a terminal; the timer's sweep prints none
        with _progress(len(nodes), enabled=args.format == "table" and sys.stderr.isatty()) as tick, \
                _stop_on_signals() as stop:
            report = gatecmd.run_gated(playbook, nodes, transport, fanout=args.fanout, deadline_s=args.deadline,
                                       inventory=args.inventory, stop=stop, excluded=[x.name for x in excluded],
                                       retries=args.retries, drain_on=args.drain_on, on_node_done=tick)
        for warning in getattr(transport, "warnings", lambda: [])():
            print(f"nodecheck: warning: {warning}", file=sys.stderr)
        return _keep_and_publish(report, playbook, args, history, k, n)


def _keep_and_publish(report, playbook, args: Namespace, history, k: int, n: int) -> int:
    from nodecheck import __version__, gatecmd
    from nodecheck.report import EXIT_PASS, EXIT_UNKNOWN, EXIT_WARN
    from nodecheck.report import diff as D
    from nodecheck.report import json as report_json
    from nodecheck.report import metrics, table
    from nodecheck.report.store import store

    problems: list[str] = []
    snap = D.snapshot(report)
    try:
        previous = history.baseline(report.playbook, snap)
        rows = history.node_sweeps(report.playbook, n - 1)
    except (sqlite3.Error, ValueError) as e:   # a damaged history must not lose this sweep's report
        problems.append(f"could not read the sweep history {history.path}: {e}")
        previous, rows = None, []
    changes = D.diff(previous, snap)
    if problems:                               # not "first sweep": there were sweeps, unreadable
        changes = replace(changes, unread=problems[0])
    # this sweep is not in the history yet: it comes after the n - 1 sweeps read from it
    found = D.offenders(rows + D.node_sweeps(snap, max((r.sweep for r in rows), default=-1) + 1), k, n)
    # the report's summary.txt keeps every change; the terminal gets SECTION_MAX_LINES a section
    outcomes = table.render(report) + "\n"
    kept = outcomes + D.render(changes, found, k, n, report.started, max_lines=None)
    summary = outcomes + D.render(changes, found, k, n, report.started)
    as_json = report_json.dumps(report)
    report_dir = None
    try:
        report_dir = str(store(report, kept, args.output_dir, as_json))
    except OSError as e:
        problems.append(f"could not write the report under {args.output_dir}: {e}")
    try:
        history.record(snap, report_dir, __version__)
    except sqlite3.Error as e:
        problems.append(f"could not record the sweep in {history.path}: {e}")
    if args.metrics:
        try:
            metrics.write_atomic(args.metrics, metrics.render(snap, found, problems=len(problems)))
        except OSError as e:
            problems.append(f"could not write the metrics file {args.metrics}: {e}")
    gate = gatecmd.sweep_gate(report, playbook, args, report_dir) if args.drain or args.resume else []
    for problem in problems:
        print(f"nodecheck: error: {problem}", file=sys.stderr)
    # what could not be kept is not a clean bill of health: monitoring must not read "fine"
    code = report.exit_code
    if problems and code in (EXIT_PASS, EXIT_WARN):
        code = EXIT_UNKNOWN
    _print(args, report, summary, report_dir, gate, lambda: {
        **report_json.to_dict(report),
        "sweep": {"history": str(history.path), "report_dir": report_dir, "metrics": args.metrics,
                  "changes": D.to_dict(changes, found, k, n), "gate": gate, "problems": problems}})
    return code


def _print(args: Namespace, report, summary: str, report_dir: str | None, gate: list[str], document) -> None:
    """stdout holds exactly one thing: the table with the changes, one JSON document (the gate's
    lines inside it), or the JUnit XML (the gate's lines on stderr)."""
    written = f"report: {report_dir}" if report_dir else "report: NOT WRITTEN (see the error above)"
    if args.format == "json":
        sys.stdout.write(json.dumps(document(), indent=2, sort_keys=False, default=str) + "\n")
        print(written, file=sys.stderr)
    elif args.format == "junit":
        from nodecheck.report import junit
        sys.stdout.write(junit.render(report))
        print("\n".join([*gate, written]), file=sys.stderr)
    else:
        sys.stdout.write(summary + "".join(f"{line}\n" for line in gate) + written + "\n")
