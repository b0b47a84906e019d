"""`nodecheck sweep`: one fleet sweep per invocation (a systemd timer or cron runs it; no daemon).

Run the playbook over SSH, store the report, compare with the last sweep of the same playbook,
keep the sweep in the history database, flag repeat offenders, write the Prometheus textfile, then
(with --drain/--resume) apply the Slurm gate, and last (--keep) delete the playbook's oldest sweeps
and their report directories. The exit code is the report's, as for `run`; a sweep whose report,
history or metrics could not be kept never exits 0 or 1. Retention that could not be done is a
warning: this sweep was kept.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from argparse import Namespace
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from nodecheck.core.errors import ConfigError

MAX_OFFENDER_WINDOW = 1000  # sweeps; hourly, that is six weeks


def parse_offender(text: str) -> tuple[int, int]:
    """--offender K/N -> (k, n), 1 <= k <= n."""
    try:
        k, n = (int(part) for part in text.split("/"))
    except ValueError:
        raise ConfigError(f"--offender must be K/N, e.g. 3/5, got {text!r}", file="arguments") from None
    if not 1 <= k <= n <= MAX_OFFENDER_WINDOW:
        raise ConfigError(
            f"--offender {text}: need 1 <= K <= N <= {MAX_OFFENDER_WINDOW}",
            file="arguments",
            hint="3/5 flags a node that failed in 3 of the last 5 sweeps",
        )
    return k, n


def check_keep(keep: int, k: int, n: int) -> None:
    """--keep N (0: every sweep) must leave repeat-offender detection the N sweeps it looks back on."""
    if keep and keep < n:
        raise ConfigError(
            f"--keep {keep} keeps fewer sweeps than --offender {k}/{n} looks back on",
            file="arguments",
            hint=f"--keep {n} or more (0 keeps every sweep), or a shorter --offender window",
        )


@dataclass(frozen=True)
class Retention:
    """What --keep deleted after this sweep."""

    keep: int
    removed: tuple[str, ...]  # the deleted sweeps' run ids, oldest first
    older_than: str  # the run id of the oldest sweep left
    report_dirs: int  # report directories removed
    left: int  # sweeps beyond --keep left for the next sweeps

    def line(self) -> str:
        k, m = len(self.removed), self.report_dirs
        line = (
            f"retention: removed {k} sweep{'s' * (k != 1)} older than {self.older_than} "
            f"({m} report director{'y' if m == 1 else 'ies'})"
        )
        return line + (f"; {self.left} more beyond --keep {self.keep} go with the next sweeps" if self.left else "")


def retire(
    history, playbook: str, recorded: int, keep: int, output_dir: str | Path
) -> tuple[Retention | None, list[str]]:
    """--keep: delete the playbook's sweeps beyond the newest `keep` from the history, then their
    report directories (report.store.remove_reports). Returns what was done and the warnings."""
    if not keep:
        return None, []
    try:
        pruned = history.prune(playbook, keep, recorded)
    except sqlite3.Error as e:
        return None, [f"retention: could not delete old sweeps from {history.path}: {e}"]
    from nodecheck.report.store import remove_reports

    if pruned is None:
        return None, []
    removed, warnings = remove_reports(((r.run_id, r.report_dir) for r in pruned.removed), output_dir)
    return Retention(keep, tuple(s.run_id for s in pruned.removed), pruned.older_than, removed, pruned.left), warnings


def history_path(args: Namespace) -> Path:
    return Path(args.history) if args.history else Path(args.output_dir) / "history.sqlite"


def _check_metrics_path(path: str) -> None:
    """Before anything runs: node_exporter reads *.prom files only, from a directory that exists."""
    target = Path(path)
    if target.suffix != ".prom":
        raise ConfigError(
            f"--metrics {path}: node_exporter's textfile collector reads only *.prom files",
            file="arguments",
            hint=f"--metrics {target.with_suffix('.prom')}",
        )
    if not target.parent.is_dir():
        raise ConfigError(
            f"--metrics {path}: no directory {target.parent}",
            file="arguments",
            hint="give node_exporter's --collector.textfile.directory",
        )


def sweep_command(args: Namespace) -> int:
    from nodecheck.app.progress_view import terminal_progress, wanted
    from nodecheck.app.signals import stop_on_signals
    from nodecheck.app.targets import own_job, select_targets
    from nodecheck.app.transports import ensure_open_files
    from nodecheck.config.playbook import load_playbook
    from nodecheck.fleet.history import History
    from nodecheck.gate import command as gatecmd

    k, n = parse_offender(args.offender)
    check_keep(args.keep, k, n)
    if args.metrics:
        _check_metrics_path(args.metrics)
    if getattr(args, "slurm_submit", False):  # submit the sweep as a batch job on the idle nodes (fleet.submit)
        from nodecheck.fleet.submit import submit_command

        return submit_command(args)
    given = [f"--{k}" for k in ("wait", "partition", "reservation", "account", "qos", "time") if getattr(args, k, None)]
    if given:
        raise ConfigError(f"{', '.join(given)}: only with --slurm-submit", file="arguments")
    if args.drain or args.resume:
        # the gate config before anything runs: an error in it must not surface after a fleet-wide
        # sweep (its output lost, exit 64), and its retries and drain_on are the run's, not only the drain's
        from nodecheck.gate import config as gateconfig

        gateconfig.apply(args, gateconfig.load(gateconfig.config_path(args.config), "sweep")[0])
    playbook = load_playbook(args.playbook, tuple(args.pins))
    nodes, excluded, transport = select_targets(args, playbook)
    if not args.local:
        ensure_open_files(min(args.fanout, len(nodes)))
    history = _open_history(history_path(args))
    try:
        # a progress line only for a person at a terminal; the timer's sweep prints none
        with (
            terminal_progress(wanted(args)) as progress,
            stop_on_signals() as stop,
        ):
            report = gatecmd.run_gated(
                playbook,
                nodes,
                transport,
                fanout=args.fanout,
                deadline_s=args.deadline,
                inventory=args.inventory,
                stop=stop,
                excluded=[x.name for x in excluded],
                retries=args.retries,
                drain_on=args.drain_on,
                progress=progress,
                allow_disruptive=args.allow_disruptive,
                own_job=own_job(args),
            )
        for warning in getattr(transport, "warnings", list)():
            print(f"nodecheck: warning: {warning}", file=sys.stderr)
        # inside a Slurm job (--slurm-job, $SLURM_JOB_ID): the inventory's other nodes were not
        # tested, SKIPPED "not tested: busy (...)", never healthy (fleet.submit)
        from nodecheck.fleet.submit import not_tested, with_skipped

        skipped = not_tested(args, playbook, [*nodes, *excluded])
        report = with_skipped(report, [c.spec.name for c in playbook.checks], skipped, {})
        return _keep_and_publish(report, playbook, args, history, k, n, (nodes, transport))
    finally:
        if isinstance(history, History):
            history.close()


def _open_history(path: Path):
    """The open history, or why it cannot be used (a str). A corrupt, locked, foreign or unwritable
    database must not cost the fleet its sweep: the sweep runs, reports and says why it was not
    recorded; the file is left exactly as it is (never deleted, never moved: it may be evidence, or
    another program's), and the exit code is never 0 or 1."""
    from nodecheck.fleet.history import History

    try:
        return History.open(path)
    except ConfigError as e:
        return (
            f"{e.message} ({path}); this sweep is not compared or recorded; the file was left as it is "
            "(move it aside: the next sweep starts a new history there)"
        )


def _keep_and_publish(report, playbook, args: Namespace, history, k: int, n: int, reach=((), None)) -> int:
    """Record the sweep, publish its report, then its gate step and repair pass. `reach`: (the nodes,
    the transport) the sweep ran on, which the repair pass acts through."""
    from nodecheck import __version__
    from nodecheck.fleet.perf_history import with_history_warnings
    from nodecheck.gate import command as gatecmd
    from nodecheck.report import diff as D
    from nodecheck.report import exit_code_with, metrics, table
    from nodecheck.report import json as report_json
    from nodecheck.report.html.run_page import page_or_none
    from nodecheck.report.store import store, why

    problems: list[str] = []
    # what the history, the diff, the metrics and the output keep: secrets masked, as in the report
    report = report_json.redacted(report)  # (the runner's reports already are: then this is free)
    if not isinstance(history, str):
        try:  # a figure below the node's own recent median: a WARN, before anything is kept
            report = with_history_warnings(report, playbook, history)
        except (sqlite3.Error, ValueError) as e:
            problems.append(f"could not read the GPU figures of the sweep history {history.path}: {e}")
    snap = D.snapshot(report)
    previous, rows = None, []
    if isinstance(history, str):  # it could not even be opened: _open_history said why
        problems.append(history)
    else:
        try:
            previous = history.baseline(report.playbook, snap)
            rows = history.node_sweeps(report.playbook, n - 1)
        except (sqlite3.Error, ValueError) as e:  # a damaged history must not lose this sweep's report
            problems.append(f"could not read the sweep history {history.path}: {e}")
            previous, rows = None, []
    changes = D.diff(previous, snap)
    if problems:  # not "first sweep": there were sweeps, unreadable
        changes = replace(changes, unread=problems[0])
    # this sweep is not in the history yet: it comes after the n - 1 sweeps read from it
    found = D.offenders(rows + D.node_sweeps(snap, max((r.sweep for r in rows), default=-1) + 1), k, n)
    # the report's summary.txt keeps every change; the terminal gets SECTION_MAX_LINES a section
    outcomes = table.render(report) + "\n"
    kept = outcomes + D.render(changes, found, k, n, report.started, max_lines=None)
    summary = outcomes + D.render(changes, found, k, n, report.started)
    as_json = report_json.dumps(report)
    html = page_or_none(report, lambda why_not: print(f"nodecheck: warning: {why_not}", file=sys.stderr))
    report_dir = None
    try:
        report_dir = str(store(report, kept, args.output_dir, as_json, html=html))
    except OSError as e:
        problems.append(f"could not write the report under {args.output_dir}: {why(e)}; nothing was left there")
    recorded = None
    if not isinstance(history, str):
        try:
            # absolute: retention finds the directory whatever the working directory of a later sweep
            recorded = history.record(snap, report_dir and os.path.abspath(report_dir), __version__)
        except sqlite3.Error as e:  # "database is locked": another process held it past the timeout
            problems.append(f"could not record the sweep in {history.path}: {e}")
    if args.metrics:
        try:
            metrics.write_atomic(args.metrics, metrics.render(snap, found, problems=len(problems)))
        except OSError as e:
            problems.append(f"could not write the metrics file {args.metrics}: {why(e)}")
    gate = gatecmd.sweep_gate(report, playbook, args, report_dir) if args.drain or args.resume else []
    if args.drain or args.resume:  # then the repair pass, where the gate config has a remedy: section
        from nodecheck.fleet.memory import rises_in
        from nodecheck.remedy.hooks import repair_after_sweep

        rises = None if isinstance(history, str) else rises_in(history)  # (an unopened history: no memory of it)
        nodes, transport = reach
        gate += repair_after_sweep(report, playbook, args, report_dir, nodes, transport, rises_of=rises)
    # last: the gate acts on this sweep first. A sweep that was not recorded deletes nothing.
    retention, warnings = (
        retire(history, snap.playbook, recorded, args.keep, args.output_dir) if recorded is not None else (None, [])
    )
    page = None
    if recorded is not None and report_dir is not None:  # fleet.html reads this sweep from the history
        from nodecheck.fleet.fleet_page import write_sweep_page

        text = D.render(changes, found, k, n, report.started, max_lines=None)
        page, why_not = write_sweep_page(history, snap.playbook, report_dir, text, args.keep, len(snap.nodes))
        warnings = [*warnings, why_not] if why_not else warnings
    for problem in problems:
        print(f"nodecheck: error: {problem}", file=sys.stderr)
    for warning in warnings:
        print(f"nodecheck: warning: {warning}", file=sys.stderr)
    # what could not be kept is not a clean bill of health: monitoring must not read "fine"; the
    # printed status line says that exit and why (summary.txt, written before, keeps the report's)
    code = exit_code_with(report, problems)
    if problems:
        summary = table.render(report, problems) + "\n" + D.render(changes, found, k, n, report.started)
    kept_line = [retention.line()] if retention else []
    if page and args.format == "table":  # above the retention and report lines, which end the output
        kept_line.insert(0, f"fleet page: {page}")
    _print(
        args,
        report,
        summary,
        report_dir,
        gate,
        kept_line,
        lambda: {
            **report_json.to_dict(report),
            "sweep": {
                "history": str(history_path(args)),
                "report_dir": report_dir,
                "metrics": args.metrics,
                "changes": D.to_dict(changes, found, k, n),
                "gate": gate,
                "problems": problems,
                "retention": asdict(retention) if retention else None,
            },
        },
    )
    return code


def _print(
    args: Namespace, report, summary: str, report_dir: str | None, gate: list[str], retention: list[str], document
) -> None:
    """stdout holds exactly one thing: the table with the changes, one JSON document (the gate's
    lines inside it), or the JUnit XML (the gate's lines on stderr). The retention line goes with
    the report line."""
    written = f"report: {report_dir}" if report_dir else "report: NOT WRITTEN (see the error above)"
    if args.format == "json":
        sys.stdout.write(json.dumps(document(), indent=2, sort_keys=False, default=str) + "\n")
        print("\n".join([*retention, written]), file=sys.stderr)
    elif args.format == "junit":
        from nodecheck.report import junit

        sys.stdout.write(junit.render(report))
        print("\n".join([*gate, *retention, written]), file=sys.stderr)
    else:
        sys.stdout.write(summary + "".join(f"{line}\n" for line in [*gate, *retention]) + written + "\n")
