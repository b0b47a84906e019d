"""Which nodes a watched job has now, and its Slurm state: an inventory's fixed nodes, or a Slurm job
re-read each tick (it starts, grows, ends and is requeued).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

from nodecheck.core.errors import ConfigError
from nodecheck.core.model import Node, one_line


@dataclass(frozen=True)
class Target:
    """What one tick watches."""

    nodes: tuple[Node, ...]
    job_state: str | None = None  # Slurm's JobState; None: an inventory, or scontrol failed
    job_reason: str = ""  # Slurm's Reason ("None" when it has none)
    pending: bool = False  # allocated no nodes yet: nothing to sample
    ended: bool = False  # the last tick: judge it, then stop
    note: str = ""  # "job 12 is PENDING (Resources)", "scontrol failed: ..."


class InventoryJob:
    """An inventory's nodes (--nodes selects), the same every tick."""

    def __init__(self, nodes: Sequence[Node]) -> None:
        self.nodes = tuple(nodes)

    def read(self) -> Target:
        return Target(self.nodes)


class SlurmJob:
    """A Slurm job, re-read each tick: its nodes (reached as the inventory, if given, says), its state."""

    def __init__(self, job_id: str, slurm, reach: dict[str, Node]) -> None:
        self.job_id, self.slurm, self.reach = job_id, slurm, reach
        self.last: tuple[Node, ...] = ()
        self.seen = False
        self.user = ""  # the job's user, as squeue says (watch.command.job_user)

    def first(self) -> Target:
        """The first read, at start-up: a job Slurm does not know is bad input (exit 64)."""
        from nodecheck.app.slurm import SlurmError

        try:
            return self._target(self.slurm.job(self.job_id))
        except SlurmError as e:
            if "invalid job id" in str(e).lower():
                raise ConfigError(
                    f"Slurm does not know job {self.job_id}: {e}",
                    file="--slurm-job",
                    hint="squeue -j ID shows the job; a job that ended long ago is purged",
                ) from None
            raise

    def read(self) -> Target:
        from nodecheck.app.slurm import SlurmError

        try:
            return self._target(self.slurm.job(self.job_id))
        except SlurmError as e:
            if "invalid job id" in str(e).lower():
                if self.seen:  # Slurm forgets a finished job after MinJobAge: it ended
                    return Target(
                        self.last,
                        None,
                        ended=True,
                        note=f"job {self.job_id} is no longer known to Slurm (ended and purged)",
                    )
                # never seen (slurmctld was down at the start): an id Slurm does not know, as at the start
                raise ConfigError(
                    f"Slurm does not know job {self.job_id}: {e}",
                    file="--slurm-job",
                    hint="squeue -j ID shows the job; a job that ended long ago is purged",
                ) from None
            return Target(self.last, None, pending=not self.last, note=f"scontrol failed: {one_line(str(e))}")

    def _target(self, job) -> Target:
        self.seen = True
        self.user = getattr(job, "user", "") or self.user
        if job.state == "PENDING" or (not job.nodes and not job.ended):
            why = f" ({job.reason})" if job.reason and job.reason != "None" else ""
            return Target((), job.state, job.reason, pending=True, note=f"job {self.job_id} is {job.state}{why}")
        nodes = tuple(self.reach.get(n) or Node(name=n, address=n) for n in job.nodes)
        self.last = nodes or self.last
        return Target(
            nodes or self.last,
            job.state,
            job.reason,
            ended=job.ended,
            note=f"job {self.job_id} is {job.state}" if job.ended else "",
        )


def first_read(job: SlurmJob) -> Target | None:
    """Slurm mode's first read: an unknown job is bad input; scontrol failing for another reason is
    told, and the loop keeps asking (slurmctld may be restarting)."""
    from nodecheck.app.slurm import SlurmError

    try:
        return job.first()
    except SlurmError as e:
        print(f"nodecheck: warning: {e}; asking again every interval", file=sys.stderr)
        return None
