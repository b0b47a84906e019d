"""How a command reaches its nodes: this machine, or SSH as the arguments say; and the open files
a fan-out over SSH needs."""

from __future__ import annotations

import socket
from argparse import Namespace

from nodecheck.core.errors import ConfigError
from nodecheck.core.model import Node
from nodecheck.transport import Transport

# Per node in flight: the TCP socket, paramiko's wake-up pipe pair for the channel, and headroom.
FDS_PER_CONNECTION = 4
FDS_RESERVED = 64  # stdio, report files, libraries


def this_node() -> Node:
    """This machine, as a node reached without SSH (--local)."""
    name = socket.gethostname().split(".")[0]
    return Node(name=name, address="localhost")


def local_transport() -> Transport:
    from nodecheck.transport.local import LocalTransport

    return LocalTransport()


def ssh_transport(args: Namespace) -> Transport:
    """SSH with the arguments' host-key policy and connect timeout."""
    from nodecheck.transport.ssh import SshTransport

    return SshTransport(accept_new_host_keys=args.accept_new_host_keys, connect_timeout_s=args.connect_timeout)


def srun_transport(job_id: str) -> Transport:
    """srun steps inside Slurm job `job_id` (one step per probe round)."""
    from nodecheck.transport.srun import SrunTransport

    return SrunTransport(job_id=job_id)


def ensure_open_files(fanout: int) -> None:
    """Running out of file descriptors would turn healthy nodes UNREACHABLE; raise the soft
    limit if we may, else refuse the fan-out before anything runs."""
    import resource

    need = fanout * FDS_PER_CONNECTION + FDS_RESERVED
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= need:
        return
    if hard != resource.RLIM_INFINITY and hard < need:
        fits = max(1, (hard - FDS_RESERVED) // FDS_PER_CONNECTION)
        raise ConfigError(
            f"--fanout {fanout} needs about {need} open files, but the hard limit is {hard}",
            file="arguments",
            hint=f"lower --fanout to {fits} or raise `ulimit -Hn`",
        )
    resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
