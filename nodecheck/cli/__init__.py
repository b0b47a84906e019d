"""Command line: parses arguments (cli.parser), calls the command, prints its errors, sets the exit
code; the console scripts' entry points. No logic lives here."""

from __future__ import annotations

import sys

from nodecheck.cli.parser import build_parser

__all__ = ["build_parser", "entry", "health_entry", "main", "prolog_entry", "prolog_slurmctld_entry"]


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.version:
        from nodecheck import __version__

        print(f"nodecheck {__version__}")
        return 0
    if args.command is None:
        build_parser().print_help()
        return 64
    from nodecheck.core.errors import ConfigError  # imported late: --help must start fast

    try:
        if args.command == "checks":
            from nodecheck.app.checks_command import list_checks

            print(list_checks(args.format), end="")
            return 0
        if args.command == "explain":
            from nodecheck.app.checks_command import explain_check

            print(explain_check(args.check), end="")
            return 0
        if args.command == "prolog":
            from nodecheck.gate import command as gatecmd

            return gatecmd.gate_command(args)
        if args.command == "health":  # the gate's health run, then the repair pass (remedy.hooks)
            from nodecheck.remedy.hooks import health_command

            return health_command(args)
        if args.command == "remediate":
            from nodecheck.remedy.command import remediate_command

            return remediate_command(args)
        if args.command == "sweep":
            from nodecheck.fleet.sweep import sweep_command

            return sweep_command(args)
        if args.command == "job-check":
            from nodecheck.job.command import job_check_command

            return job_check_command(args)
        if args.command == "watch":
            from nodecheck.watch.command import watch_command

            return watch_command(args)
        if args.command == "forensics":
            from nodecheck.forensics.command import forensics_command

            return forensics_command(args)
        if args.command == "history":
            from nodecheck.fleet.history_command import history_command

            return history_command(args)
        if args.command == "report":
            from nodecheck.app.report_command import report_command

            return report_command(args)
        if args.command == "import-nhc":
            from nodecheck.app.nhc_import import import_nhc_command

            return import_nhc_command(args)
        if args.command == "run":
            from nodecheck.app.run_command import run_command

            return run_command(args)
        from nodecheck.app.facts_command import baseline_command, facts_command

        return {"facts": facts_command, "baseline": baseline_command}[args.command](args)
    except ConfigError as e:
        print(f"nodecheck: error: {e}", file=sys.stderr)
        return 64
    except KeyboardInterrupt:
        print("nodecheck: interrupted", file=sys.stderr)
        return 130


def entry(argv: list[str] | None = None) -> None:
    """The console script: main(), then leave without interpreter teardown. A run may leave SSH
    threads stuck past every timeout (reported, not waited for); finalizing the interpreter
    around them costs time and can hang. Output is flushed first; report files are closed."""
    import os

    _narrow_umask()
    code = main(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _narrow_umask() -> None:
    """Nothing the process creates is readable by others: the umask keeps its bits and gains 027
    (a log opened for appending, what a hook or a tool started here writes). nodecheck's own files
    get their modes explicitly anyway (report.store: 0640/0750, forensics 0600/0700)."""
    import os

    os.umask(os.umask(0o027) | 0o027)


# slurm.conf names a program without arguments (Prolog=, PrologSlurmctld=, HealthCheckProgram=):
# these console scripts are that program; their options come from the gate config file.
def prolog_entry() -> None:
    """Under slurmd (SLURM_SCRIPT_CONTEXT=prolog_slurmd) a non-zero exit drains the node, and only a
    judged failure may: every exit but 1 (this node failed and nodecheck drained it) becomes 0,
    bad arguments and nodecheck's own crashes included (they are on stderr, which slurmd logs)."""
    import os
    import traceback

    _narrow_umask()
    try:
        code = main(["prolog", *sys.argv[1:]])
    except SystemExit as e:  # argparse
        code = e.code if isinstance(e.code, int) else 64
    except BaseException:
        traceback.print_exc()
        code = 3
    if os.environ.get("SLURM_SCRIPT_CONTEXT") == "prolog_slurmd" and code != 1:
        code = 0
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def prolog_slurmctld_entry() -> None:
    entry(["prolog", "--controller", *sys.argv[1:]])


def health_entry() -> None:
    entry(["health", *sys.argv[1:]])
