"""Open MPI 4.x's mpirun: its options, placement of ranks on hosts, and its messages when a daemon
cannot start, is lost, or a rank fails."""

from __future__ import annotations

import os
import re
import signal

from nccl_tests.launch import Job, RankPlan
from nccl_tests.libc import strtol
from nccl_tests.state import Ctx, write_err

ROOT_REFUSED = """--------------------------------------------------------------------------
mpirun has detected an attempt to run as root.
Running at root is *strongly* discouraged as any mistake (e.g., in
defining TMPDIR) or bug can result in catastrophic damage to the OS
file system, leaving your system in an unusable state.

You can override this protection by adding the --allow-run-as-root
option to your cmd line. However, we reiterate our strong advice
against doing so - please do so at your own risk.
--------------------------------------------------------------------------
"""


DASHES = "-" * 74 + "\n"


DAEMON_FAILED = (
    DASHES
    + """ORTE was unable to reliably start one or more daemons.
This usually is caused by:

* not finding the required libraries and/or binaries on
  one or more nodes. Please check your PATH and LD_LIBRARY_PATH
  settings, or configure OMPI with --enable-orterun-prefix-by-default

* lack of authority to execute on one or more specified nodes.
  Please verify your allocation and authorities.

* the inability to write startup files into /tmp (--tmpdir/orte_tmpdir_base).
  Please check with your sys admin to determine the correct location to use.

*  compilation of the orted with dynamic libraries when static are required
  (e.g., on Cray). Please check your configure cmd line and consider using
  one of the contrib/platform definitions for your system type.

* an inability to create a connection back to mpirun due to a
  lack of common network interfaces and/or no route found between
  them. Please check network connectivity (including firewalls
  and network routing requirements).
"""
    + DASHES
)


LOST_DAEMON = (
    DASHES
    + """ORTE has lost communication with a remote daemon.

  HNP daemon   : [[{job},0],0] on node {me}
  Remote daemon: [[{job},0],{vpid}] on node {host}

This is usually due to either a failure of the TCP network
connection to the node, or possibly an internal failure of
the daemon itself. We cannot recover from this failure, and
therefore will terminate the job.
"""
    + DASHES
)


RANK_FAILED = (
    "-" * 55 + "\nPrimary job  terminated normally, but 1 process returned\n"
    "a non-zero exit code. Per user-direction, the job has been aborted.\n"
    + "-" * 55
    + "\n"
    + DASHES
    + "mpirun detected that one or more processes exited with non-zero status, thus causing\n"
    "the job to be terminated. The first process to do so was:\n\n"
    "  Process name: [[{job},1],{rank}]\n  Exit code:    {code}\n" + DASHES
)


NOT_ENOUGH_SLOTS = (
    DASHES
    + """There are not enough slots available in the system to satisfy the {n}
slots that were requested by the application:

  {app}

Either request fewer slots for your application, or make more slots
available for use.
"""
    + DASHES
)


NO_EXECUTABLE = DASHES + "No executable was specified on the mpirun command line.\n\nAborting.\n" + DASHES


MPIRUN_VALUE_OPTS = {
    "np",
    "n",
    "c",
    "H",
    "host",
    "hostfile",
    "machinefile",
    "default-hostfile",
    "N",
    "npernode",
    "map-by",
    "x",
    "bind-to",
    "rank-by",
    "prefix",
    "wdir",
    "wd",
    "output-filename",
    "tmpdir",
    "path",
    "launch-agent",
    "report-uri",
    "ppr",
}


MPIRUN_FLAGS = {
    "allow-run-as-root",
    "tag-output",
    "timestamp-output",
    "oversubscribe",
    "q",
    "quiet",
    "v",
    "verbose",
    "display-map",
    "display-allocation",
    "report-bindings",
    "merge-stderr-to-stdout",
    "nolocal",
    "no-oversubscribe",
    "bind-to-core",
    "bind-to-socket",
    "noprefix",
    "show-progress",
}


def mpirun_main(ctx: Ctx, args: list[str]) -> int:
    hosts: list[tuple[str, int]] = []
    np = npernode = cwd = None
    by_node = allow_root = tag = oversubscribe = False
    exports: dict[str, str] = {}
    mca: dict[str, str] = {}
    program: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            program = args[i + 1 :]
            break
        if not a.startswith("-") or a == "-":
            program = args[i:]
            break
        name, eq, inline = a.lstrip("-").partition("=")
        if name in ("mca", "gmca"):
            if i + 2 >= len(args):
                write_err(f'mpirun: Error: option "{a}" did not have enough parameters (2)\n')
                return 1
            mca[args[i + 1]] = args[i + 2]
            i += 3
            continue
        if name in MPIRUN_VALUE_OPTS:
            if not eq:
                if i + 1 >= len(args):
                    write_err(f'mpirun: Error: option "{a}" did not have enough parameters (1)\n')
                    return 1
                i, inline = i + 1, args[i + 1]
            if name in ("np", "n", "c"):
                np = strtol(inline)
            elif name in ("H", "host"):
                for entry in inline.split(","):
                    h, _, slots = entry.partition(":")
                    hosts.append((h, int(slots) if slots.isdigit() else 1))
            elif name in ("hostfile", "machinefile", "default-hostfile"):
                try:
                    with open(inline) as f:
                        for ln in f:
                            words = ln.split("#", 1)[0].split()
                            if words:
                                slots = next(
                                    (int(w[6:]) for w in words[1:] if w.startswith("slots=")), os.cpu_count() or 1
                                )
                                hosts.append((words[0], slots))
                except OSError:
                    write_err(
                        DASHES + f"Open RTE was unable to open the hostfile:\n    {inline}\n"
                        "Check to make sure the path and filename are correct.\n" + DASHES
                    )
                    return 1
            elif name in ("N", "npernode"):
                npernode = strtol(inline)
            elif name == "map-by":
                m = re.match(r"ppr:(\d+):node", inline)
                if m:
                    npernode = int(m.group(1))
                by_node = inline.split(":")[0] == "node"
            elif name in ("wdir", "wd"):
                cwd = inline
            elif name == "x":
                k, has, v = inline.partition("=")
                if has:
                    exports[k] = v
                elif k in os.environ:
                    exports[k] = os.environ[k]
            i += 1
            continue
        if name in MPIRUN_FLAGS:
            allow_root |= name == "allow-run-as-root"
            tag |= name == "tag-output"
            oversubscribe |= name == "oversubscribe"
            i += 1
            continue
        write_err(f"mpirun: Error: unknown option \"{a}\"\nType 'mpirun --help' for usage.\n")
        return 1
    if (
        os.geteuid() == 0
        and not allow_root
        and not (
            os.environ.get("OMPI_ALLOW_RUN_AS_ROOT") == "1" and os.environ.get("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM") == "1"
        )
    ):
        write_err(ROOT_REFUSED)
        return 1
    if not program:
        write_err(NO_EXECUTABLE)
        return 1
    merged: dict[str, int] = {}
    for h, s in hosts or [(ctx.node, os.cpu_count() or 1)]:
        merged[h] = merged.get(h, 0) + s
    order = list(merged)
    if npernode:
        total = npernode * len(order)
        np = np or total
        placement = [order[r // npernode] for r in range(min(np, total))]
    else:
        total = sum(merged.values())
        np = np or total
        if by_node:
            placement, left = [], dict(merged)
            while len(placement) < min(np, total):
                for h in order:
                    if left[h] and len(placement) < np:
                        placement.append(h)
                        left[h] -= 1
        else:
            placement = [h for h in order for _ in range(merged[h])][:np]
    if np > total and not oversubscribe:
        write_err(NOT_ENOUGH_SLOTS.format(n=np, app=program[0]))
        return 1
    while len(placement) < np:  # oversubscribed: round-robin on
        placement.append(order[len(placement) % len(order)])
    job = (os.getpid() * 7919) % 60000 + 1000
    plan = []
    for rank, host in enumerate(placement):
        local = placement[:rank].count(host)
        env = {
            **exports,
            **{f"OMPI_MCA_{k}": v for k, v in mca.items()},
            "OMPI_COMM_WORLD_SIZE": str(np),
            "OMPI_COMM_WORLD_RANK": str(rank),
            "OMPI_COMM_WORLD_LOCAL_RANK": str(local),
            "OMPI_COMM_WORLD_LOCAL_SIZE": str(placement.count(host)),
            "OMPI_COMM_WORLD_NODE_RANK": str(local),
            "OMPI_UNIVERSE_SIZE": str(np),
            "PMIX_RANK": str(rank),
        }
        plan.append(RankPlan(rank, host, env))
    prefix = (lambda r, fd: b"[1,%d]<%s>:" % (r, b"stdout" if fd == 1 else b"stderr")) if tag else None
    res = Job(ctx, "mpirun", plan, program, inherit_env=True, prefix=prefix, stop_on_failure=True, cwd=cwd).run()
    if res.signalled:
        return 128 + res.signalled if res.signalled != signal.SIGALRM else 1
    if res.daemon_failed:
        write_err(DAEMON_FAILED)
        return res.daemon_failed[1] or 1
    if res.first_bad:
        rank, code = res.first_bad
        write_err(RANK_FAILED.format(job=job, rank=rank, code=code))
        return code
    if res.lost_daemon:
        hosts_order = list(dict.fromkeys(placement))
        write_err(
            LOST_DAEMON.format(job=job, me=ctx.node, vpid=hosts_order.index(res.lost_daemon) + 1, host=res.lost_daemon)
        )
        return 1
    return 0
