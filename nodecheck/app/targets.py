"""Which nodes a command runs on, from its arguments (an inventory and --nodes, or --local), and the
transport that reaches them."""

from __future__ import annotations

import os
from argparse import Namespace
from dataclasses import dataclass

from nodecheck.app import transports
from nodecheck.core.errors import ConfigError
from nodecheck.core.hostlist import fold
from nodecheck.core.model import Node
from nodecheck.transport import Transport


def reach(args: Namespace) -> tuple[list[Node], Transport]:
    """The nodes named by the arguments and the transport that reaches them: a Slurm job's nodes
    (--slurm-job, or $SLURM_JOB_ID inside an allocation), an inventory's, or this machine."""
    from nodecheck.config.inventory import load_inventory, select

    transport = getattr(args, "transport", "ssh")
    if args.local:
        if args.inventory or args.nodes or getattr(args, "slurm_job", None) or transport == "srun":
            raise ConfigError(
                "--local runs on this machine only: give no inventory, --nodes, --slurm-job or --transport srun",
                file="arguments",
            )
        return [transports.this_node()], transports.local_transport()
    job = job_target(args)
    args.job_target = job  # what the command does with the job: its own job (the idle guard), a sweep's busy nodes
    if job is not None:
        known = {n.name: n for n in load_inventory(args.inventory)} if args.inventory else {}
        nodes = [known.get(name) or Node(name=name, address=name) for name in job.nodes]
        if transport == "srun" or (transport == "auto" and not args.inventory):
            return nodes, transports.srun_transport(job.job_id)
        return nodes, transports.ssh_transport(args)
    if transport == "srun":
        raise ConfigError(
            "--transport srun runs inside a Slurm job's allocation: give --slurm-job ID, or run inside "
            "the allocation ($SLURM_JOB_ID)",
            file="--transport",
            hint="salloc -N 64 nodecheck run --transport srun   or   nodecheck run --slurm-job 4242",
        )
    if not args.inventory:
        raise ConfigError(
            "an inventory (hosts.yml) is required unless --local or --slurm-job",
            file="arguments",
            hint=f"nodecheck {args.command} hosts.yml",
        )
    return select(load_inventory(args.inventory), args.nodes), transports.ssh_transport(args)


@dataclass(frozen=True)
class JobTarget:
    job_id: str
    nodes: tuple[str, ...]  # the allocation's nodes, as Slurm names them, in its order
    record: object  # app.slurm.JobRecord: the job's state, user, ... (job-check's context)


def job_target(args: Namespace) -> JobTarget | None:
    """The Slurm job whose nodes a command runs on: --slurm-job ID, else $SLURM_JOB_ID when the
    command runs inside an allocation and the arguments name no nodes of their own (--local, or an
    inventory with --nodes); None when there is none. A job that ended or holds no nodes yet is bad
    input: its nodes may be running someone else's job by now."""
    flag = getattr(args, "slurm_job", None)
    implicit = not (flag or args.local or (args.inventory and args.nodes))
    job_id = flag or (os.environ.get("SLURM_JOB_ID") or None if implicit else None)
    if job_id is None:
        return None
    where = "--slurm-job" if flag else "SLURM_JOB_ID"
    if args.nodes:
        raise ConfigError(
            "--nodes picks inventory nodes; with a Slurm job the nodes are the allocation's",
            file="--nodes",
            hint="drop --nodes (or --slurm-job)",
        )
    record = read_job(job_id, implicit=not flag)
    if record.ended:
        raise ConfigError(
            f"Slurm job {record.job_id} has ended ({record.state}): its nodes may run another job by now, "
            "and nodecheck judges a job's nodes inside its allocation",
            file=where,
            hint="give the id of a running job (squeue --me)",
        )
    if not record.nodes:
        raise ConfigError(
            f"Slurm job {record.job_id} is {record.state} (reason {record.reason}) and holds no nodes yet",
            file=where,
            hint="run nodecheck inside the allocation (before srun), once the job runs",
        )
    return JobTarget(record.job_id, tuple(record.nodes), record)


def select_targets(args: Namespace, playbook) -> tuple[list[Node], list[Node], Transport]:
    """The nodes to run on, those the playbook leaves out, and the transport that reaches them."""
    from nodecheck.config.playbook import split_selected

    nodes, transport = reach(args)
    nodes, excluded = split_selected(playbook, nodes)
    if args.nodes and excluded:  # asked for by name: leaving them out would hide them
        raise ConfigError(
            f"{fold(n.name for n in excluded)} lack the labels {sorted(playbook.select_labels)} "
            f"that playbook {playbook.name} selects",
            file="--nodes",
            hint="drop them from --nodes, or use a playbook that selects them",
        )
    if not nodes:
        raise ConfigError(
            f"no selected node has the labels {sorted(playbook.select_labels)} that playbook {playbook.name} selects",
            file=playbook.path,
        )
    return nodes, excluded, transport


def own_job(args: Namespace) -> str | None:
    """The Slurm job the command runs its nodes' tests in (the one reach() resolved), or None."""
    job = getattr(args, "job_target", None)
    return job.job_id if job is not None else None


def read_job(job_id: str, implicit: bool = False):
    """Slurm's record of the job (app.slurm.Slurm.job: squeue); bad input (ConfigError) when Slurm
    cannot say. `implicit`: the id came from $SLURM_JOB_ID."""
    from nodecheck.app.slurm import Slurm, SlurmError

    try:
        return Slurm().job(job_id)
    except SlurmError as e:
        raise ConfigError(
            f"cannot read Slurm job {job_id}" + (" (from $SLURM_JOB_ID)" if implicit else "") + f": {e}",
            file="SLURM_JOB_ID" if implicit else "--slurm-job",
            hint="is the id right, and are squeue and scontrol on PATH with SLURM_CONF set?"
            + (" Outside the job, give an inventory and --nodes" if implicit else ""),
        ) from None
