"""`nodecheck forensics`: from "the job is stuck" to the culprit rank and node in one command.

Which job: --slurm-job ID (its nodes from scontrol; its processes are those whose environment holds
SLURM_JOB_ID=ID, or --match) or an inventory with --match PATTERN; --dumps DIR alone analyses
flight-recorder dumps already copied off the nodes. collect.py gathers, analysis.py judges, record.py
says it and writes the record. Nothing here touches the job: py-spy pauses each process for the
moment of its dump only.
"""

from __future__ import annotations

import os
import sys
import time
from argparse import Namespace
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from nodecheck.core.errors import ConfigError
from nodecheck.core.progress import NULL_PROGRESS, RunProgress

if TYPE_CHECKING:  # imported where used, at run time
    from nodecheck.forensics.analysis import Forensics

DEFAULT_DEADLINE_S = 120.0
DEFAULT_STACK_TIMEOUT_S = 10.0
EXIT_CLASSIFIED = 0  # a class (and, where one shows, the culprits) was found
EXIT_UNDETERMINED = 3  # nothing gathered tells: could not judge
EXIT_INTERNAL = 70


def forensics_command(args: Namespace) -> int:
    from nodecheck.forensics.collect import read_local_dumps
    from nodecheck.forensics.verdict import UNDETERMINED

    plan = _plan(args)
    local = read_local_dumps(args.dumps) if args.dumps else []
    if plan["nodes"] is not None:
        from nodecheck.app.progress_view import terminal_progress, wanted
        from nodecheck.app.signals import stop_on_signals

        with terminal_progress(wanted(args)) as progress, stop_on_signals() as stop:
            done = investigate(
                plan["transport"],
                plan["nodes"],
                plan["where"],
                label=plan["label"],
                key=plan["key"],
                output_dir=args.output_dir,
                fanout=args.fanout,
                deadline_s=args.deadline or DEFAULT_DEADLINE_S,
                stack_timeout_s=args.stack_timeout,
                native=not args.no_native,
                pyspy=args.py_spy,
                local_dumps=local,
                stop=stop,
                progress=progress,
            )
    else:
        done = investigate(
            None,
            None,
            None,
            label=plan["label"],
            key=plan["key"],
            output_dir=args.output_dir,
            stack_timeout_s=args.stack_timeout,
            local_dumps=local,
        )
    if args.format == "json":
        import json

        print(json.dumps(dict(done.record, record=str(done.where) if done.where else None), indent=1, default=str))
    else:
        sys.stdout.write(done.summary)
        print(f"record: {done.where}" if done.where else "record: NOT written (see stderr)")
    if done.where is None:
        return EXIT_INTERNAL
    return EXIT_UNDETERMINED if done.result.diagnosis.kind == UNDETERMINED else EXIT_CLASSIFIED


@dataclass
class Investigation:
    result: Forensics
    summary: str  # what an operator reads (record.render)
    record: dict  # forensics.json's content
    where: Path | None  # the record directory; None when it could not be written


def investigate(
    transport,
    nodes,
    where,
    *,
    label: str,
    key: str,
    output_dir: str | Path,
    fanout: int = 64,
    deadline_s: float = DEFAULT_DEADLINE_S,
    stack_timeout_s: float = DEFAULT_STACK_TIMEOUT_S,
    native: bool = True,
    pyspy: str | None = None,
    local_dumps=(),
    stop=None,
    progress: RunProgress = NULL_PROGRESS,
) -> Investigation:
    """Gather (when nodes are given), judge, write the record; for `nodecheck forensics` and for
    `nodecheck watch --forensics` on a hang. A record that cannot be written is said on stderr."""
    from nodecheck.forensics.analysis import examine
    from nodecheck.forensics.collect import gather
    from nodecheck.forensics.record import files, render, to_json
    from nodecheck.report.store import private, safe_key, stamp, store_files

    started = time.time()
    gathered = None
    if nodes is not None:
        gathered = gather(
            transport,
            nodes,
            where,
            fanout=fanout,
            deadline=time.monotonic() + deadline_s,
            stack_timeout_s=stack_timeout_s,
            native=native,
            pyspy=pyspy,
            fetch=not local_dumps,
            stop=stop,
            progress=progress,
        )
    result = examine(gathered, (gathered.dumps if gathered else []) + list(local_dumps), stack_timeout_s)
    finished = time.time()
    summary = render(result, label)
    iso = lambda t: datetime.fromtimestamp(t, timezone.utc).isoformat()  # noqa: E731
    record = to_json(result, label, iso(started), iso(finished))
    written = None
    try:
        written = store_files(
            f"{stamp(started)}_forensics_{safe_key(key)}", files(result, record, summary), output_dir, private()
        )  # stacks, dumps: 0600/0700
    except (OSError, ValueError) as e:
        print(f"nodecheck: error: the forensics record could not be written under {output_dir}: {e}", file=sys.stderr)
    return Investigation(result, summary, record, written)


def _plan(args: Namespace) -> dict:
    """Validate before anything runs; ConfigError (exit 64) names the option and the fix."""
    from nodecheck.config.inventory import load_inventory, select

    if not (args.slurm_job or args.inventory or args.dumps):
        raise ConfigError(
            "which job? give --slurm-job ID, or an inventory (hosts.yml) and --match PATTERN, or --dumps DIR",
            file="arguments",
            hint="nodecheck forensics --slurm-job 1234   or   nodecheck forensics hosts.yml --match 'train\\.py'",
        )
    if args.inventory and not args.slurm_job and not args.match:
        raise ConfigError(
            "an inventory needs --match PATTERN: the job's processes on each node (as pgrep -f)",
            file="--match",
            hint="e.g. --match 'train\\.py'",
        )
    if args.nodes and not args.inventory:
        raise ConfigError(
            "--nodes selects inventory nodes: give the inventory too",
            file="--nodes",
            hint="nodecheck forensics hosts.yml --nodes 'gpu[01-04]' --match PATTERN",
        )
    if args.slurm_job and args.nodes:
        raise ConfigError(
            "--nodes with --slurm-job: the job's nodes come from Slurm", file="--nodes", hint="drop --nodes"
        )
    if args.match is not None and not args.match.strip():
        raise ConfigError(
            "--match is empty: it would match every process", file="--match", hint="e.g. --match 'train\\.py'"
        )
    if args.dumps and not os.path.isdir(args.dumps):
        raise ConfigError(
            f"--dumps {args.dumps}: not a directory",
            file="--dumps",
            hint="a directory holding the dump files (or one directory per node)",
        )
    if args.dump_prefix and not args.dump_prefix.startswith("/"):
        raise ConfigError(
            f"--dump-prefix {args.dump_prefix!r} is not an absolute path",
            file="--dump-prefix",
            hint="as TORCH_FR_DUMP_TEMP_FILE: e.g. /scratch/fr/trace_rank_",
        )
    if not (args.slurm_job or args.inventory):
        return {"nodes": None, "label": f"dumps:{Path(args.dumps).name}", "key": Path(args.dumps).name or "dumps"}
    from nodecheck.app.transports import ensure_open_files, ssh_transport
    from nodecheck.forensics.collect import Where

    inventory = load_inventory(args.inventory) if args.inventory else []
    user = ""  # who reads --log on the nodes: the Slurm job's user; none known: probe.py SNAPSHOT_SCRIPT
    if args.slurm_job:
        (nodes, user), label = _slurm_nodes(args.slurm_job.strip(), inventory), args.slurm_job.strip()
        where = Where("match", args.match) if args.match else Where("slurm", label)
        key = label
    else:
        nodes = select(inventory, args.nodes)
        if not nodes:
            raise ConfigError(f"{args.inventory} names no node", file=args.inventory)
        where, label = Where("match", args.match), f"inventory:{args.match}"
        key = Path(args.inventory).stem
    where = Where(where.mode, where.what, args.log, args.dump_prefix, user)
    ensure_open_files(min(args.fanout, len(nodes)))
    return {"nodes": nodes, "where": where, "label": label, "key": key, "transport": ssh_transport(args)}


def _slurm_nodes(job_id: str, inventory) -> tuple[list, str]:
    """The job's nodes (the inventory's entry where it has one) and its user (app.job_user.job_user_of:
    squeue's UserName; "" for root or none)."""
    from nodecheck.app.job_user import job_user_of
    from nodecheck.app.slurm import Slurm, SlurmError
    from nodecheck.core.model import Node

    if not job_id.replace("_", "").isdigit():
        raise ConfigError(
            f"--slurm-job {job_id!r} is not a job id",
            file="--slurm-job",
            hint="a number, or ARRAYJOB_TASK such as 1234_7",
        )
    try:
        job = Slurm().job(job_id)
    except SlurmError as e:
        raise ConfigError(
            f"cannot read Slurm job {job_id}: {e}",
            file="--slurm-job",
            hint="squeue -j ID shows the job; a job that ended long ago is purged",
        ) from None
    if not job.nodes:
        raise ConfigError(
            f"Slurm job {job_id} has no nodes (it is {job.state})",
            file="--slurm-job",
            hint="forensics looks at a running job's processes; --dumps DIR reads dumps alone",
        )
    reach = {n.name: n for n in inventory}
    return [reach.get(n) or Node(name=n, address=n) for n in job.nodes], job_user_of(None, job.user)
