"""`nodecheck job-check JOB.yml [--slurm-job ID | --inventory hosts.yml | --local]`: the job's invariants,
run as `nodecheck run` runs a playbook (same report, table, JSON, JUnit and exit codes)."""

from __future__ import annotations

import sys
from argparse import Namespace
from pathlib import Path

from nodecheck.core.errors import ConfigError
from nodecheck.core.model import Node

DEFAULT_DEADLINE_S = 120.0


def job_check_command(args: Namespace) -> int:
    from nodecheck.app.progress_view import terminal_progress, wanted
    from nodecheck.app.publish import publish
    from nodecheck.app.signals import stop_on_signals
    from nodecheck.app.transports import ensure_open_files
    from nodecheck.config.playbook import PlannedCheck, Playbook
    from nodecheck.job.invariants import JobContext, specs
    from nodecheck.job.spec import load_job_spec
    from nodecheck.run import runner as runner

    spec = load_job_spec(args.job)
    nodes, transport, record = _nodes(args)
    user = job_user(spec, record)  # the counts need it too: their command runs as the job's user
    counts = _counts(spec, args.job, user) if spec.data_balance is not None else None
    ctx = JobContext(spec=spec, order=tuple(n.name for n in nodes), counts=counts, slurm=record)
    checks = tuple(PlannedCheck(s, ctx, s.probes_for(ctx)) for s in specs(spec, user))
    playbook = Playbook(
        name=f"job-check-{Path(args.job).stem}",
        path=str(Path(args.job)),
        sha256=spec.sha256,
        description=f"job-check of {args.job}",
        deadline_s=DEFAULT_DEADLINE_S,
        select_labels=frozenset(),
        checks=checks,
    )
    if not args.local:
        ensure_open_files(min(args.fanout, len(nodes)))
    with terminal_progress(wanted(args)) as progress, stop_on_signals() as stop:
        report = runner.run(
            playbook,
            nodes,
            transport,
            fanout=args.fanout,
            deadline_s=args.deadline,
            inventory=args.inventory,
            stop=stop,
            progress=progress,
        )
    for warning in getattr(transport, "warnings", list)():
        print(f"nodecheck: warning: {warning}", file=sys.stderr)
    return publish(report, args)


def job_user(spec, record) -> str:
    """Whose files JOB.yml's paths (its NCCL_CONF_FILE, its counts file) are read as, and whom its
    counts_command runs as: app.job_user.job_user_of (JOB.yml's owner as it was read, unless root;
    else the Slurm job's user; "" = none)."""
    from nodecheck.app.job_user import job_user_of

    return job_user_of(spec.owner_uid, record.user if record is not None else "")


def _counts(spec, job: str, user: str):
    """The rank counts, run or read as `user` (job/counts.py: "" = the operator's own JOB.yml). An
    error about a JOB.yml field (data_balance.counts_command failed, the job's user is unknown) is
    placed at that field's line of JOB.yml; a counts file that fails names that file (and its line)."""
    from nodecheck.config.yaml_source import load_file
    from nodecheck.job.counts import read_counts
    from nodecheck.job.spec import base_dir

    try:
        return read_counts(spec.data_balance, base_dir(spec), user=user)
    except ConfigError as e:
        field = (e.file or "").split(" ")[0]
        if field not in ("data_balance.counts_command", "data_balance.counts_file"):
            raise
        line = load_file(job).line(tuple(field.split(".")))
        raise ConfigError(f"{e.file}: {e.message}", file=job, line=line, hint=e.hint) from None


def _nodes(args: Namespace):
    """(the job's nodes in rank order, the transport, the Slurm job record or None)."""
    from nodecheck.app.targets import job_target
    from nodecheck.app.transports import local_transport, ssh_transport, this_node
    from nodecheck.config.inventory import load_inventory, select

    if args.local:
        if args.nodes or args.slurm_job:
            raise ConfigError("--local checks this machine only: give no --nodes and no --slurm-job", file="arguments")
        return [this_node()], local_transport(), None
    job = job_target(args)  # --slurm-job, or $SLURM_JOB_ID unless an inventory and --nodes name the nodes
    if job is None:
        if not args.inventory:
            raise ConfigError(
                "which nodes? give --slurm-job ID (default $SLURM_JOB_ID inside an allocation), "
                "--inventory hosts.yml or --local",
                file="arguments",
                hint="nodecheck job-check job.yml --slurm-job 4242",
            )
        return select(load_inventory(args.inventory), args.nodes), ssh_transport(args), None
    known = {n.name: n for n in load_inventory(args.inventory)} if args.inventory else {}
    return [known.get(name) or Node(name=name, address=name) for name in job.nodes], ssh_transport(args), job.record
