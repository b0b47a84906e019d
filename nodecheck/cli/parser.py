"""The command line's grammar: every subcommand, its arguments and their help. Parsing only: what a
command does lives in nodecheck.app and the command modules it names."""

from __future__ import annotations

import argparse
import sys

from nodecheck.app.defaults import DEFAULT_FANOUT, MAX_CONNECT_TIMEOUT_S, MAX_DEADLINE_S, MAX_FANOUT
from nodecheck.app.publish import metrics_file
from nodecheck.cli.arguments import drain_on, hostlist, positive_float, positive_int, whole_number

EXIT_CODES = """exit codes:
  0   every node passed
  1   warnings only
  2   at least one failure (a node was judged unfit)
  3   could not judge (error, timeout, unreachable or skipped) and no failure
  64  bad input: inventory, playbook or arguments (nothing was run)"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # bad arguments are bad input: 64, not argparse's 2
        self.print_usage(sys.stderr)
        self.exit(64, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="nodecheck",
        description="Prove GPU cluster nodes are fit to run a distributed "
        "job before it starts, and say which node is not and why.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="store_true", help="print the version and exit")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)
    run = sub.add_parser(
        "run",
        help="run a playbook on the inventory's nodes",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("--playbook", default="default", help="shipped playbook name or a path (default: default)")
    run.add_argument(
        "--pins",
        action="append",
        default=[],
        metavar="FILE",
        help="include this pins file (what `nodecheck baseline` writes) in the playbook; may be given more than once",
    )
    run.add_argument(
        "--format",
        choices=["table", "json", "junit"],
        default="table",
        help="stdout: the human table (default), exactly one JSON document, or JUnit XML "
        "(one testcase per node x check, for CI dashboards)",
    )
    run.add_argument("--output-dir", default="reports", help="where the report directory goes (default: reports/)")
    run.add_argument("--html", action="store_true", help="print the path of the report's report.html")
    run.add_argument(
        "--job-env",
        metavar="FILE",
        help="the environment the job will run with (KEY=VALUE lines, as a job script "
        "sources them): checked by nccl.env and used by the nccl-tests checks; "
        "its values override the playbook's env",
    )
    run.add_argument(
        "--allow-disruptive",
        action="store_true",
        help="let checks the playbook enabled as disruptive run, on idle nodes only (roce.gid_stability "
        "takes RoCE ports down and up; DCGM levels >= 2, gpu.perf and gpu.sdc load the GPUs); without it "
        "they are SKIPPED, never run",
    )
    run.add_argument(
        "--metrics",
        type=metrics_file,
        metavar="FILE",
        help="also write the run as a Prometheus textfile here (node_exporter's textfile collector: a "
        "*.prom file in its --collector.textfile.directory), atomically; the metrics `sweep --metrics` writes",
    )
    _target_args(run)
    facts = sub.add_parser(
        "facts", help="print every node's gathered facts (GPUs, versions, HCAs, image digest) without judging them"
    )
    facts.add_argument(
        "--format",
        choices=["table", "json"],
        default="table",
        help="stdout: one line per node (default) or the full facts as JSON",
    )
    _image_args(facts)
    _target_args(facts)
    base = sub.add_parser(
        "baseline",
        help="print the pins (expect: values) a known-good set of nodes "
        "agrees on, as a YAML file a playbook can include",
        epilog=BASELINE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _image_args(base)
    base.add_argument(
        "--sdc",
        metavar="PLAYBOOK",
        help="also run that playbook's gpu.sdc screen (its workload) and pin the checksum every GPU of a "
        "kind agreed on as gpu.sdc's reference (GPU load: needs --allow-disruptive)",
    )
    base.add_argument("--allow-disruptive", action="store_true", help="let --sdc load the GPUs (idle nodes only)")
    _target_args(base)
    checks = sub.add_parser("checks", help="list every check with its description and parameters")
    checks.add_argument(
        "--format",
        choices=("text", "markdown", "json"),
        default="text",
        help="text (default), markdown (the checks reference docs/checks.md is this output) or json "
        "(every check with its parameters, probes, tools, statuses with examples and sources)",
    )
    explain = sub.add_parser(
        "explain",
        help="one check: what it judges and why, its parameters, the tools it runs on the node, "
        "each status it gives with an example message, and its sources",
    )
    explain.add_argument("check", metavar="CHECK", help="a check's name, e.g. ib.ports (`nodecheck checks` lists them)")
    _gate_parsers(sub)
    _job_parsers(sub)
    _import_nhc_parser(sub)
    _report_parser(sub)
    return p


IMPORT_NHC_EPILOG = """Reads an LBNL NHC configuration (nhc.conf) the way NHC's bash does, never running it, and
writes a playbook: each check under comments naming the NHC lines it came from; every line not
translated listed with its line number and why (at the end of the playbook and on stderr).
Only lines for every host (`* ||`) translate; NHC's repairs (restart, remount, actions) never do.
exit codes: 0 every line translated; 3 the playbook was written, some lines were not translated;
2 no line translated (nothing written); 64 bad input (unreadable, binary or over 1 MiB)"""


def _import_nhc_parser(sub) -> None:
    nhc = sub.add_parser(
        "import-nhc",
        help="translate an LBNL NHC configuration (nhc.conf) into a playbook, listing every line it could not",
        epilog=IMPORT_NHC_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    nhc.add_argument("file", metavar="NHC_CONF", help="the NHC configuration, e.g. /etc/nhc/nhc.conf")
    nhc.add_argument(
        "-o",
        "--output",
        metavar="PLAYBOOK_YML",
        help="write the playbook here (replaced atomically); default: stdout",
    )


REPORT_EPILOG = """Reads an earlier run's report directory (what `run`, `sweep` or `job-check` printed after
`report:`); nothing is re-run.
  show: the table `run` printed (a sweep's diff is in its summary.txt), or with --format the JSON
        document or JUnit XML `run --format json|junit` printed; exits with the report's exit code
        (0 pass, 1 warn, 2 fail, 3 could not judge), as the run did
  html: (re)build report.html in it from report.json and the captures, and print its path
exit codes: show as the stored run; html 0 written; 64 bad input (no such directory, a symbolic link,
no report.json, not a report, a report_version this nodecheck does not read) or, for html, a page that
could not be written (the message says which)"""


def _report_parser(sub) -> None:
    report = sub.add_parser(
        "report",
        help="an earlier run's report again, from its directory: its table, JSON or JUnit, or its report.html rebuilt",
        epilog=REPORT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = report.add_subparsers(dest="report_command", parser_class=_Parser, required=True, metavar="{show,html}")
    show = actions.add_parser("show", help="print the table (or JSON, JUnit) the run printed, from report.json")
    show.add_argument("dir", metavar="DIR", help="the report directory, e.g. reports/20261206T154046Z_demo")
    show.add_argument(
        "--format",
        choices=["table", "json", "junit"],
        default="table",
        help="the human table (default), the JSON document, or JUnit XML: what `run --format` printed",
    )
    html = actions.add_parser("html", help="(re)build DIR/report.html from report.json and the captures")
    html.add_argument("dir", metavar="DIR", help="the report directory, e.g. reports/20261206T154046Z_demo")


JOB_CHECK_EPILOG = """A gate the launcher runs before srun/torchrun, e.g. in the batch script:
  nodecheck job-check job.yml && srun python train.py
Nodes: --slurm-job (default $SLURM_JOB_ID inside an allocation), else an --inventory, else --local.
exit codes: as run (0 pass, 1 warn, 2 an invariant failed: do not launch, 3 could not judge, 64 bad input)"""

WATCH_EPILOG = """Runs on a host outside the job; never touches the job unless --on-hang says so.
verdicts: starting, progressing, checkpointing (quiet); slow, straggler, unresponsive, hung, crashed
(alarms); completed. Each change of verdict is alerted (--alert-command, --alert-url) and recorded
under OUTPUT_DIR with the samples that justify it.
exit codes (the last verdict): 0 completed, starting, progressing or checkpointing; 1 slow, straggler or
unresponsive; 2 hung or crashed; 3 could not watch (no sample came back); 64 bad input; 70 the
watcher itself failed (a bug: see stderr)"""


def _job_parsers(sub) -> None:
    """job-check and watch: the job itself, before it starts and while it runs."""
    jc = sub.add_parser(
        "job-check",
        help="check a job's own invariants before launching it (data balance, "
        "world size, env consistency, timeouts, flight recorder, checkpoints, retries)",
        epilog=JOB_CHECK_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    jc.add_argument("job", metavar="JOB_YML", help="the job's description (see README, 'Job guard')")
    where = jc.add_mutually_exclusive_group()
    where.add_argument(
        "--inventory",
        metavar="HOSTS_YML",
        help="the job's nodes: these inventory nodes (with --slurm-job: how to reach the job's nodes)",
    )
    where.add_argument("--local", action="store_true", help="only this machine, no SSH")
    jc.add_argument(
        "--slurm-job",
        metavar="ID",
        help="the job's allocation: its nodes and GPUs from scontrol (default: $SLURM_JOB_ID when set)",
    )
    jc.add_argument("--nodes", type=hostlist, metavar="HOSTLIST", help="only these inventory nodes")
    jc.add_argument(
        "--format",
        choices=["table", "json", "junit"],
        default="table",
        help="stdout: the table (default), one JSON document, or JUnit XML",
    )
    jc.add_argument("--output-dir", default="reports", help="where the report directory goes (default: reports/)")
    jc.add_argument(
        "--deadline",
        type=positive_float(MAX_DEADLINE_S),
        metavar="SECONDS",
        help="bound on the whole check (default 120)",
    )
    _reach_args(jc)
    watch = sub.add_parser(
        "watch",
        help="watch a running job from outside: progressing, checkpointing, "
        "slow, straggler, hung (the power-deadlock signature), crashed, completed",
        epilog=WATCH_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _job_target_args(
        watch,
        inventory="hosts.yml: watch these nodes (with --match); with --slurm-job: how to "
        "reach the job's nodes (nodes not in it are reached by name)",
        slurm_job="the job: its nodes and state from scontrol",
        match="; default: the config's `match`",
    )
    watch.add_argument(
        "--config",
        metavar="FILE",
        help="watch settings (YAML): progress log and regexes, bounds, alerts; a JOB.yml's `watch:` block works too. "
        "A file not owned by root, or writable by group or others (a user's JOB.yml), may set only the job's "
        "own fields (progress, bounds, interval_s, sample_timeout_s, gpus_per_node): match, alerts, on_hang, "
        "forensics and history come from a root-owned config or these options (exit 64 otherwise)",
    )
    watch.add_argument(
        "--log",
        metavar="PATH",
        help="the job's log on each node ({node} is the node's name); overrides the config's progress.log",
    )
    watch.add_argument(
        "--heartbeat",
        metavar="PATH",
        help="a file the job touches as it progresses (its "
        "modification time is the progress signal); overrides the config's progress.heartbeat",
    )
    watch.add_argument(
        "--interval",
        type=positive_float(3600.0),
        metavar="SECONDS",
        help="seconds between samples (default: the config's interval_s, else 30)",
    )
    watch.add_argument(
        "--alert-command",
        metavar="COMMAND",
        help="run on each change of verdict (split as the shell does, not run by one); the event JSON on its stdin",
    )
    watch.add_argument("--alert-url", metavar="URL", help="POST the event JSON here on each change of verdict")
    watch.add_argument(
        "--on-hang",
        choices=["cancel", "requeue"],
        help="act on a hung job: cancel it "
        "(scancel; with an inventory, SIGTERM to the matched processes) or requeue it "
        "(--slurm-job only). Default: never touch the job",
    )
    watch.add_argument(
        "--forensics",
        action="store_true",
        default=None,
        help="when the job turns hung: run `nodecheck forensics` on its nodes first (every rank's "
        "stack, the flight-recorder dumps, the culprit) and link the record from the incident "
        "and the alert (default: the config's `forensics`)",
    )
    watch.add_argument(
        "--state-dir",
        metavar="DIR",
        help="the watcher's state (it resumes from it after a restart; default OUTPUT_DIR/watch/<job>)",
    )
    watch.add_argument("--output-dir", default="reports", help="where incident records go (default: reports/)")
    watch.add_argument(
        "--once",
        action="store_true",
        help="take one sample, judge it against the state on "
        "disk, exit with the verdict's code (for cron or a monitoring agent)",
    )
    watch.add_argument("--max-samples", type=positive_int(10_000_000), metavar="N", help="stop after N samples")
    watch.add_argument(
        "--duration", type=positive_float(MAX_DEADLINE_S * 365), metavar="SECONDS", help="stop after this long"
    )
    _reach_args(watch)
    _forensics_parser(sub)


FORENSICS_EPILOG = """Run it on a host outside the job when the job is stuck. It reads the flight-recorder dumps
(TORCH_NCCL_DUMP_ON_TIMEOUT=1 writes them per rank when the watchdog fires; default prefix
/tmp/nccl_trace_rank_, or the ranks' TORCH_FR_DUMP_TEMP_FILE), takes every rank's stack with py-spy
(each process paused only for its dump), reads each node's GPUs, Xid/OOM kernel lines and the job
log's NCCL WARN lines, then names the likely class, the culprit ranks and nodes and the next step.
Everything, raw dumps and stacks included, is kept under OUTPUT_DIR/<UTC>_forensics_<job>/.
classes: mismatched collectives; a rank missing or dead; all ranks in the same collective (look
below NCCL, at the network); no collective ever ran (rendezvous or init); undetermined.
exit codes: 0 a class was found; 3 undetermined (nothing gathered tells); 64 bad input;
70 the record could not be written"""


def _forensics_parser(sub) -> None:
    fx = sub.add_parser(
        "forensics",
        help="a hung job: read the flight-recorder dumps and every rank's stack, name the culprit ranks and nodes",
        epilog=FORENSICS_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _job_target_args(
        fx,
        inventory="hosts.yml: the job's nodes (with --match); with --slurm-job: how to reach "
        "them (nodes not in it are reached by name)",
        slurm_job="the job: its nodes from scontrol, its processes those whose environment holds "
        "SLURM_JOB_ID=ID (or --match)",
    )
    fx.add_argument(
        "--dumps",
        metavar="DIR",
        help="read the flight-recorder dumps from DIR (files, or one "
        "directory per node) instead of fetching them; alone, analyse only these",
    )
    fx.add_argument(
        "--dump-prefix",
        metavar="PREFIX",
        help="also list dumps at this prefix on every node "
        "(as TORCH_FR_DUMP_TEMP_FILE; the ranks' own and c10d's default are always listed)",
    )
    fx.add_argument(
        "--log",
        metavar="PATH",
        help="the job's log on each node ({node} is the node's name): its NCCL WARN lines are evidence",
    )
    fx.add_argument(
        "--stack-timeout",
        type=positive_float(600.0),
        default=10.0,
        metavar="SECONDS",
        help="how long py-spy may take for one process (default 10); one that does not answer is reported so",
    )
    fx.add_argument(
        "--no-native",
        action="store_true",
        help="Python frames only (default: native frames too, where py-spy can unwind them)",
    )
    fx.add_argument("--py-spy", metavar="PATH", help="py-spy on the nodes (default: py-spy on the PATH)")
    fx.add_argument(
        "--deadline",
        type=positive_float(MAX_DEADLINE_S),
        metavar="SECONDS",
        help="bound on the whole gathering (default 120)",
    )
    fx.add_argument(
        "--format",
        choices=["text", "json"],
        default="text",
        help="stdout: the summary (default) or the record as one JSON document",
    )
    fx.add_argument("--output-dir", default="reports", help="where the record goes (default: reports/)")
    _reach_args(fx)


def _job_target_args(p: argparse.ArgumentParser, *, inventory: str, slurm_job: str, match: str = "") -> None:
    """Which running job, on which nodes: shared by watch and forensics (each says its own words)."""
    p.add_argument("inventory", nargs="?", help=inventory)
    p.add_argument("--slurm-job", metavar="ID", help=slurm_job)
    p.add_argument(
        "--match",
        metavar="PATTERN",
        help="the job's processes on each node: an extended regular "
        "expression on the command line (as pgrep -f)" + match,
    )
    p.add_argument("--nodes", type=hostlist, metavar="HOSTLIST", help="only these inventory nodes")


def _reach_args(p: argparse.ArgumentParser) -> None:
    """How nodes are reached over SSH: run, facts, baseline, sweep, job-check, watch."""
    p.add_argument(
        "--fanout",
        type=positive_int(MAX_FANOUT),
        default=DEFAULT_FANOUT,
        help=f"nodes contacted at once (default {DEFAULT_FANOUT})",
    )
    p.add_argument(
        "--connect-timeout",
        type=positive_float(MAX_CONNECT_TIMEOUT_S),
        default=10.0,
        metavar="SECONDS",
        help="SSH connect + handshake + auth timeout per node (default 10)",
    )
    p.add_argument(
        "--accept-new-host-keys",
        action="store_true",
        help="trust-on-first-use: accept and record unknown host keys (a changed key is "
        "still refused). Default: strict known_hosts checking",
    )


GATE_EPILOG = """Slurm gate: a node is drained only for a judged failure (or what --drain-on adds), with a
reason nodecheck owns ("nodecheck: <check> <message>"); a node drained by anyone else is never
touched, and only nodecheck's own drains are resumed. Options may also come from the gate config
file (--config; default: nodecheck.yml beside $SLURM_CONF, else /etc/nodecheck/gate.yml)."""

PROLOG_EXITS = """exit codes (Slurm acts on them):
  node Prolog:     0 the job may start (passed, or could not judge: fail open, logged loudly)
                   1 this node failed a check and was drained (Slurm requeues the job)
  --controller:    0 the job may start; 1 blamed nodes were drained (the job is requeued);
                   3 could not judge (breaker tripped): drained nothing, the job is requeued
  --observe:       always 0
  64 bad input (a node Prolog exits 0 instead: a config error must never drain)"""


def _gate_parsers(sub) -> None:
    """prolog, health, sweep, history: the Slurm gate and the fleet sweeps."""
    prolog = sub.add_parser(
        "prolog",
        help="Slurm Prolog: check this node (or, --controller, the job's "
        "nodes) before a job starts; drain a failing node",
        epilog=GATE_EPILOG + "\n\n" + PROLOG_EXITS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    prolog.add_argument(
        "--controller",
        action="store_true",
        help="PrologSlurmctld mode: read SLURM_JOB_NODELIST, check the job's nodes over SSH "
        "(the playbook's cross-node checks), drain only the nodes it blames",
    )
    prolog.add_argument("--playbook", default=None, help="shipped playbook name or a path (default: prolog)")
    prolog.add_argument(
        "--inventory",
        metavar="HOSTS_YML",
        help="--controller: how to reach the job's nodes over SSH (nodes not in it are "
        "reached by name as this user, with ~/.ssh/known_hosts)",
    )
    _gate_args(prolog)
    health = sub.add_parser(
        "health",
        help="Slurm HealthCheckProgram: check this node (or an inventory's); "
        "drain failing nodes, resume nodes nodecheck drained once they pass",
        epilog=GATE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    health.add_argument(
        "inventory", nargs="?", help="hosts.yml: check these nodes over SSH (default: this node, locally)"
    )
    health.add_argument("--nodes", type=hostlist, metavar="HOSTLIST", help="only these inventory nodes")
    health.add_argument("--playbook", default=None, help="shipped playbook name or a path (default: health)")
    _gate_args(health)
    _remediate_parser(sub)
    sweep = sub.add_parser(
        "sweep",
        help="one fleet sweep: run the sweep playbook, keep the report and its "
        "history, print what changed since the last sweep, write metrics",
        epilog=SWEEP_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sweep.add_argument("--playbook", default="sweep", help="shipped playbook name or a path (default: sweep)")
    sweep.add_argument("--pins", action="append", default=[], metavar="FILE", help="as for run")
    sweep.add_argument(
        "--format",
        choices=["table", "json", "junit"],
        default="table",
        help="stdout: the table with the changes (default), one JSON document, or JUnit XML",
    )
    sweep.add_argument("--output-dir", default="reports", help="where the report directory goes (default: reports/)")
    sweep.add_argument("--history", metavar="DB", help="SQLite history file (default: OUTPUT_DIR/history.sqlite)")
    sweep.add_argument(
        "--metrics",
        metavar="FILE",
        help="write a Prometheus textfile here (node_exporter's "
        "textfile collector: a *.prom file in its --collector.textfile.directory), atomically",
    )
    sweep.add_argument(
        "--offender",
        default="3/5",
        metavar="K/N",
        help="flag a node that failed in K of the last N sweeps (default 3/5)",
    )
    sweep.add_argument(
        "--keep",
        type=whole_number(0, 1_000_000),
        default=720,
        metavar="N",
        help="after recording, delete this playbook's sweeps beyond the newest N from the history, "
        "and their report directories (default 720: 30 days hourly; 0 keeps every sweep; "
        "at least --offender's N)",
    )
    sweep.add_argument(
        "--allow-disruptive",
        action="store_true",
        help="let the playbook's disruptive checks run on the nodes that are idle (gpu.dcgm_diag "
        "level >= 2 loads the GPUs for minutes): a node with a Slurm job or GPU processes is "
        "reported 'not tested: busy', never healthy; without it they are SKIPPED",
    )
    sweep.add_argument("--drain", action="store_true", help="drain failing nodes (gate etiquette, as health)")
    sweep.add_argument("--resume", action="store_true", help="resume nodes nodecheck drained that now pass")
    _gate_args(sweep, deadline=False)
    _target_args(sweep)
    _submit_args(sweep)
    history = sub.add_parser(
        "history",
        help="a node's or a check's results, versions, IB and NVLink error counters or bandwidths over past sweeps; "
        "with --show actions what remediation did to each node",
    )
    history.add_argument(
        "--history",
        metavar="DB",
        default="reports/history.sqlite",
        help="SQLite history file (default: reports/history.sqlite)",
    )
    history.add_argument("--node", help="one node")
    history.add_argument(
        "--check",
        help="one check; with --show versions the version's check (nccl.version), "
        "with --show counters a counter (SymbolErrorCounter) or a port (mlx5_0/1), "
        "with --show measurements the check that measured (ib.pairs)",
    )
    history.add_argument(
        "--show",
        choices=["results", "versions", "counters", "measurements", "actions"],
        default="results",
        help="what each sweep kept: statuses and messages (default), the versions the drift "
        "checks read (a change from the sweep before is marked), the IB and NVLink error counters "
        "(rises and resets marked as the sweep's diff says them; unchanged zeros one table row), "
        "or the bandwidths; or, from the remediation action records (not the sweeps), every action "
        "with its outcome, returns and holds, and each node's incidents and mean time between them",
    )
    history.add_argument(
        "--records",
        metavar="DIR",
        help="--show actions: the action records (default: the gate config's remedy.state_dir, "
        "else /var/lib/nodecheck/remedy)",
    )
    history.add_argument(
        "--last",
        type=positive_int(100_000),
        default=10,
        metavar="N",
        help="the last N sweeps (default 10); with --show actions the newest N entries per node",
    )
    history.add_argument("--format", choices=["table", "json"], default="table")
    history.add_argument(
        "--html",
        metavar="FILE",
        help="write the fleet page (status grid per node and sweep, repeat offenders, measurements over "
        "time, what changed) of the latest sweep's playbook to FILE and print its path; '-' for stdout",
    )


REMEDIATE_EPILOG = """the plan per node: act (the next step of its failure's ladder), hold (for a person),
wait (a job on it, the budget full, a reboot under way) or leave (not drained by nodecheck).
Ladders: --ladders FILE, else the gate config's remedy.ladders, else the shipped profile
(nodecheck/config/ladders/default.yml). Budgets: the gate config's remedy: section.
Observe by default: nothing is changed, every step it would take is logged to the gate log;
--act (or remedy.act: true) carries it out: see docs/remediation.md.
exit codes: 0 a plan was made (and, acting, carried out), 1 an action failed or a node did not pass
its re-proof, 3 Slurm's node states could not be read, 64 bad input"""


def _remediate_parser(sub) -> None:
    remediate = sub.add_parser(
        "remediate",
        help="show what nodecheck would do about each unfit node: the next step of its "
        "failure's action ladder (reset a GPU, restart a service, reboot through Slurm) or a hold for a person",
        epilog=REMEDIATE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    remediate.add_argument(
        "inventory", nargs="?", help="hosts.yml: check these nodes over SSH (default: this node, locally)"
    )
    remediate.add_argument("--nodes", type=hostlist, metavar="HOSTLIST", help="only these nodes")
    remediate.add_argument("--playbook", default=None, help="shipped playbook name or a path (default: health)")
    remediate.add_argument(
        "--report",
        metavar="DIR",
        help="plan from a stored report directory instead of checking the nodes now",
    )
    remediate.add_argument("--ladders", metavar="FILE", help="the action ladders (default: the shipped profile)")
    remediate.add_argument("--json", action="store_true", help="print the plan as one JSON document")
    remediate.add_argument(
        "--metrics",
        metavar="FILE",
        help="write a Prometheus textfile: every node's actions by kind and outcome, holds, mean time "
        "between incidents (from the action records) and the plan's counts, atomically",
    )
    remediate.add_argument(
        "--act",
        action="store_true",
        help="carry the plan out (default: observe; the gate config's remedy.act: true acts too); "
        "--observe wins over both",
    )
    _gate_args(remediate)


def _submit_args(sweep: argparse.ArgumentParser) -> None:
    """sweep --slurm-submit (fleet.submit): the sweep as one batch job on the idle nodes."""
    sweep.add_argument(
        "--slurm-submit",
        action="store_true",
        help="submit the sweep as one Slurm batch job (--exclusive) on the inventory's idle nodes (with "
        "--reservation: the reservation's nodes that run no job); the others are reported 'not tested: busy' "
        "or 'not tested: down'; prints the job id and exits 0 (3 when no node is idle: nothing submitted)",
    )
    sweep.add_argument(
        "--wait", action="store_true", help="--slurm-submit: wait for the job, exit with the sweep's code"
    )
    for name, what in (
        ("partition", "the partition"),
        ("reservation", "the reservation (maintenance: see docs/maintenance.md)"),
        ("account", "the account"),
        ("qos", "the QOS"),
    ):
        sweep.add_argument(f"--{name}", metavar="NAME", help=f"--slurm-submit: {what} (default: the config's slurm:)")
    sweep.add_argument("--time", metavar="LIMIT", help="--slurm-submit: the job's time limit, e.g. 2:00:00")
    sweep.add_argument("--slurm-skipped", metavar="FILE", help=argparse.SUPPRESS)  # written by --slurm-submit
    sweep.set_defaults(sweep_options=_option_table(sweep))


def _option_table(p: argparse.ArgumentParser) -> tuple[tuple[str, str, str], ...]:
    """(dest, option string or "" for a positional, kind) of every option: how --slurm-submit writes
    the sweep its batch job runs (fleet.submit.child_argv)."""
    table = []
    for action in p._actions:
        if isinstance(action, argparse._HelpAction) or action.dest == argparse.SUPPRESS:
            continue
        if isinstance(action, (argparse._StoreTrueAction, argparse._StoreConstAction)):
            kind = "flag"
        elif isinstance(action, argparse._AppendAction):
            kind = "append"
        else:
            kind = "value"
        longest = max(action.option_strings, key=len) if action.option_strings else ""
        table.append((action.dest, longest, kind))
    return tuple(table)


SWEEP_EPILOG = """schedule it (one sweep per invocation): the systemd service + timer or the cron line
shipped in nodecheck/deploy/ (see README, "Fleet sweeps").
exit codes: as run (0 pass, 1 warn, 2 fail, 3 could not judge, 64 bad input)"""


def _gate_args(p: argparse.ArgumentParser, deadline: bool = True) -> None:
    p.add_argument(
        "--observe",
        action="store_true",
        default=None,
        help="observe only: judge, log and report what would be drained or resumed; change nothing",
    )
    p.add_argument(
        "--retries",
        type=whole_number(0, 10),
        default=None,
        metavar="N",
        help="re-run failing flaky-prone checks (bandwidth tests) N times before draining "
        "(default: the playbook's gate.retries, else 1)",
    )
    p.add_argument(
        "--drain-on",
        type=drain_on,
        default=None,
        metavar="LIST",
        help="statuses that drain, comma-separated from fail,timeout,unreachable (default: the "
        "playbook's gate.drain_on, else fail,timeout on the node itself (node Prolog, health without an "
        "inventory) and fail over SSH)",
    )
    p.add_argument(
        "--log-file",
        metavar="FILE",
        help="append every drain/resume/breaker event here (default /var/log/nodecheck/gate.log)",
    )
    p.add_argument("--config", metavar="FILE", help="gate config file (YAML; see README, 'Slurm gate')")
    if deadline:
        p.add_argument(
            "--deadline",
            type=positive_float(MAX_DEADLINE_S),
            metavar="SECONDS",
            help="budget for the whole check (default: the playbook's deadline_s; prolog: 20)",
        )
        p.add_argument("--output-dir", default=None, help="where reports go (default /var/lib/nodecheck/reports)")
        p.add_argument(
            "--fanout",
            type=positive_int(MAX_FANOUT),
            default=None,
            help=f"nodes checked at once over SSH (default {DEFAULT_FANOUT})",
        )
        p.add_argument(
            "--connect-timeout",
            type=positive_float(MAX_CONNECT_TIMEOUT_S),
            default=None,
            metavar="SECONDS",
            help="SSH connect timeout per node (default 10)",
        )
        p.add_argument(
            "--accept-new-host-keys",
            action="store_true",
            help="trust-on-first-use for unknown host keys (default: strict known_hosts)",
        )


BASELINE_EPILOG = """example:
  nodecheck baseline hosts.yml --nodes 'gpu[001-016]' --image registry.local/train:24.10 > pins.yml
  # then in the playbook:  include: [pins.yml]
  nodecheck baseline hosts.yml --nodes gpu001 --sdc sweep --allow-disruptive > pins.yml
  # also pins gpu.sdc's reference checksums for the sweep's workload (a lone node or SKU has no peers)
exit codes: 0 every fact agreed and was read on every node; 2 some fact was not pinned (the
nodes disagree or a node could not be read: see the comments in the output and stderr); 64 bad input"""


def _target_args(p: argparse.ArgumentParser) -> None:
    """Which nodes, and how to reach them: shared by run, facts and baseline."""
    p.add_argument("inventory", nargs="?", help="hosts.yml (omit with --local)")
    p.add_argument("--nodes", type=hostlist, metavar="HOSTLIST", help="only these inventory nodes, e.g. 'gpu[001-004]'")
    p.add_argument(
        "--deadline",
        type=positive_float(MAX_DEADLINE_S),
        metavar="SECONDS",
        help="bound on the whole run; overrides the playbook's deadline_s",
    )
    _reach_args(p)
    p.add_argument("--local", action="store_true", help="run on this machine, no SSH (prolog mode)")
    p.add_argument(
        "--slurm-job",
        metavar="ID",
        help="the nodes of this running Slurm job (default: $SLURM_JOB_ID inside an allocation, unless "
        "--local or an inventory with --nodes name the nodes); the inventory, if given, says how to reach them",
    )
    p.add_argument(
        "--transport",
        choices=("auto", "ssh", "srun"),
        default="auto",
        help="how probes reach the nodes: ssh, or srun steps inside the Slurm job's allocation (one step per "
        "probe round, no SSH); auto (default): srun for a Slurm job given without an inventory, else ssh",
    )


def _image_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--image",
        metavar="REF",
        help="also read this container image's digest (registry reference, or a .sqsh/.sif path)",
    )
    p.add_argument(
        "--runtime",
        choices=["auto", "docker", "podman", "enroot", "apptainer"],
        default="auto",
        help="container runtime for --image (default: auto)",
    )
