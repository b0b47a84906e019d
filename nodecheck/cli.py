"""Command line: parses arguments, calls the runner, prints, sets the exit code. No logic lives here."""
from __future__ import annotations

import argparse
import math
import sys

EXIT_CODES = """exit codes:
  0   every node passed
  1   warnings only
  2   at least one failure (a node was judged unfit)
  3   could not judge (error, timeout, unreachable or skipped) and no failure
  64  bad input: inventory, playbook or arguments (nothing was run)"""

# Bounds on numeric arguments: a typo (1e10, inf) is bad input, not an OverflowError mid-run.
# Kept here, not imported, because --help must not import pydantic; MAX_DEADLINE_S equals
# nodecheck.playbook.MAX_DEADLINE_S (a test holds them together).
MAX_DEADLINE_S = 86_400.0                      # a day: far beyond any pre-job check
MAX_CONNECT_TIMEOUT_S = 600.0                  # an SSH handshake slower than 10 minutes is a dead node
DEFAULT_FANOUT = 64                            # as clush: enough for speed, gentle on sshd MaxStartups
MAX_FANOUT = 4096                              # each node in flight holds a thread and an SSH connection


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):              # bad arguments are bad input: 64, not argparse's 2
        self.print_usage(sys.stderr)
        self.exit(64, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="nodecheck", description="Prove GPU cluster nodes are fit to run a distributed "
                "job before it starts, and say which node is not and why.",
                epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="store_true", help="print the version and exit")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)
    run = sub.add_parser("run", help="run a playbook on the inventory's nodes", epilog=EXIT_CODES,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("--playbook", default="default", help="shipped playbook name or a path (default: default)")
    run.add_argument("--pins", action="append", default=[], metavar="FILE",
                     help="include this pins file (what `nodecheck baseline` writes) in the playbook; "
                          "may be given more than once")
    run.add_argument("--format", choices=["table", "json"], default="table",
                     help="stdout: the human table (default) or exactly one JSON document")
    run.add_argument("--output-dir", default="reports", help="where the report directory goes (default: reports/)")
    run.add_argument("--job-env", metavar="FILE",
                     help="the environment the job will run with (KEY=VALUE lines, as a job script "
                          "sources them): checked by nccl.env and used by the nccl-tests checks; "
                          "its values override the playbook's env")
    run.add_argument("--allow-disruptive", action="store_true",
                     help="let checks the playbook enabled as disruptive run (roce.gid_stability takes "
                          "RoCE ports down and up); without it they are SKIPPED, never run")
    _target_args(run)
    facts = sub.add_parser("facts", help="print every node's gathered facts (GPUs, versions, HCAs, "
                           "image digest) without judging them")
    facts.add_argument("--format", choices=["table", "json"], default="table",
                       help="stdout: one line per node (default) or the full facts as JSON")
    _image_args(facts)
    _target_args(facts)
    base = sub.add_parser("baseline", help="print the pins (expect: values) a known-good set of nodes "
                          "agrees on, as a YAML file a playbook can include", epilog=BASELINE_EPILOG,
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    _image_args(base)
    _target_args(base)
    sub.add_parser("checks", help="list every check with its description and parameters")
    return p


BASELINE_EPILOG = """example:
  nodecheck baseline hosts.yml --nodes 'gpu[001-016]' --image registry.local/train:24.10 > pins.yml
  # then in the playbook:  include: [pins.yml]
exit codes: 0 every fact agreed and was read on every node; 2 some fact was not pinned (the
nodes disagree or a node could not be read: see the comments in the output and stderr); 64 bad input"""


def _target_args(p: argparse.ArgumentParser) -> None:
    """Which nodes, and how to reach them: shared by run, facts and baseline."""
    p.add_argument("inventory", nargs="?", help="hosts.yml (omit with --local)")
    p.add_argument("--nodes", type=_hostlist, metavar="HOSTLIST",
                   help="only these inventory nodes, e.g. 'gpu[001-004]'")
    p.add_argument("--fanout", type=_positive_int(MAX_FANOUT), default=DEFAULT_FANOUT,
                   help=f"nodes checked at once (default {DEFAULT_FANOUT})")
    p.add_argument("--deadline", type=_positive_float(MAX_DEADLINE_S), metavar="SECONDS",
                   help="bound on the whole run; overrides the playbook's deadline_s")
    p.add_argument("--connect-timeout", type=_positive_float(MAX_CONNECT_TIMEOUT_S), default=10.0,
                   metavar="SECONDS", help="SSH connect + handshake + auth timeout per node (default 10)")
    p.add_argument("--accept-new-host-keys", action="store_true",
                   help="trust-on-first-use: accept and record unknown host keys (a changed key is "
                        "still refused). Default: strict known_hosts checking")
    p.add_argument("--local", action="store_true", help="run on this machine, no SSH (prolog mode)")


def _image_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--image", metavar="REF", help="also read this container image's digest "
                   "(registry reference, or a .sqsh/.sif path)")
    p.add_argument("--runtime", choices=["auto", "docker", "podman", "enroot", "apptainer"], default="auto",
                   help="container runtime for --image (default: auto)")


def _positive_int(high: int):
    """An argparse type: a whole number in 1..high."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"must be >= 1, got {text}")
        if value > high:
            raise argparse.ArgumentTypeError(f"must be <= {high}, got {text}")
        return value
    return parse


def _positive_float(high: float):
    """An argparse type: a finite number of seconds in (0, high]; inf and nan are typos, not 'forever'."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number of seconds, got {text}")
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        if value > high:
            raise argparse.ArgumentTypeError(f"must be <= {high:g} seconds, got {text}")
        return value
    return parse


def _hostlist(text: str) -> str:
    """An argparse type: --nodes "" (an unset shell variable) must not mean every node."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must name at least one node, got an empty hostlist")
    return text


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.version:
        from nodecheck import __version__
        print(f"nodecheck {__version__}")
        return 0
    if args.command is None:
        build_parser().print_help()
        return 64
    from nodecheck.errors import ConfigError     # imported late: --help must start fast
    try:
        if args.command == "checks":
            from nodecheck.commands import list_checks
            print(list_checks(), end="")
            return 0
        from nodecheck import commands
        return {"run": commands.run_command, "facts": commands.facts_command,
                "baseline": commands.baseline_command}[args.command](args)
    except ConfigError as e:
        print(f"nodecheck: error: {e}", file=sys.stderr)
        return 64
    except KeyboardInterrupt:
        print("nodecheck: interrupted", file=sys.stderr)
        return 130


def entry() -> None:
    """The console script: main(), then leave without interpreter teardown. A run may leave SSH
    threads stuck past every timeout (reported, not waited for); finalizing the interpreter
    around them costs time and can hang. Output is flushed first; report files are closed."""
    import os
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
