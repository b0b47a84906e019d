"""Slurm's srun: its options, task placement over the node list, SLURM_* variables, and its
messages when a task launch fails or tasks exit non-zero."""

from __future__ import annotations

import os
import re
import signal

from nccl_tests.launch import Job, RankPlan
from nccl_tests.libc import strtol
from nccl_tests.state import Ctx, write_err


def expand_hostlist(text: str) -> list[str]:
    """Slurm hostlist: "node[1-3,5],gpu[01-02]" -> node1 node2 node3 node5 gpu01 gpu02."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    hosts: list[str] = []
    for part in filter(None, parts):
        m = re.match(r"([^\[]*)\[([^\]]*)\](.*)$", part)
        if not m:
            hosts.append(part)
            continue
        for rng in m.group(2).split(","):
            lo, _, hi = rng.partition("-")
            for n in range(int(lo), int(hi or lo) + 1):
                hosts += [m.group(1) + str(n).zfill(len(lo)) + rest for rest in expand_hostlist(m.group(3)) or [""]]
    return hosts


def fold_ranks(ranks: list[int]) -> str:
    out, start = [], None
    for i, r in enumerate(ranks):
        if start is None:
            start = r
        if i + 1 == len(ranks) or ranks[i + 1] != r + 1:
            out.append(str(start) if start == r else f"{start}-{r}")
            start = None
    return ",".join(out)


SRUN_VALUE_OPTS = {
    "N": "nodes",
    "w": "nodelist",
    "n": "ntasks",
    "t": "time",
    "p": "partition",
    "J": "job-name",
    "c": "cpus-per-task",
    "G": "gpus",
    "o": "output",
    "e": "error",
    "A": "account",
}


SRUN_LONG_VALUE = {
    "nodes",
    "nodelist",
    "ntasks",
    "ntasks-per-node",
    "export",
    "mpi",
    "time",
    "partition",
    "job-name",
    "cpus-per-task",
    "gpus",
    "gpus-per-node",
    "gres",
    "cpu-bind",
    "gpu-bind",
    "output",
    "error",
    "account",
    "distribution",
    "mem",
    "qos",
    "reservation",
    "kill-on-bad-exit",
}


SRUN_FLAGS = {"l": "label", "u": "unbuffered", "v": "verbose", "K": "kill-on-bad-exit"}


SRUN_LONG_FLAGS = {"label", "unbuffered", "verbose", "overlap", "exclusive", "overcommit", "kill-on-bad-exit"}


def srun_main(ctx: Ctx, args: list[str]) -> int:
    values: dict[str, str] = {}
    flags: set[str] = set()
    program: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            program = args[i + 1 :]
            break
        if a.startswith("--"):
            name, eq, val = a[2:].partition("=")
            if name in SRUN_LONG_VALUE and (eq or name != "kill-on-bad-exit"):
                if not eq:
                    if i + 1 >= len(args):
                        write_err(
                            f"srun: option '--{name}' requires an argument\nTry \"srun --help\" for more information\n"
                        )
                        return 1
                    i, val = i + 1, args[i + 1]
                values[name] = val
            elif name in SRUN_LONG_FLAGS:
                flags.add(name)
            else:
                write_err(f"srun: unrecognized option '{a}'\nTry \"srun --help\" for more information\n")
                return 1
        elif a.startswith("-") and len(a) > 1:
            c = a[1]
            if c in SRUN_VALUE_OPTS:
                val = a[2:]
                if not val:
                    if i + 1 >= len(args):
                        write_err(
                            f"srun: option requires an argument -- '{c}'\nTry \"srun --help\" for more information\n"
                        )
                        return 1
                    i, val = i + 1, args[i + 1]
                values[SRUN_VALUE_OPTS[c]] = val
            elif c in SRUN_FLAGS and len(a) == 2:
                flags.add(SRUN_FLAGS[c])
            else:
                write_err(f"srun: invalid option -- '{c}'\nTry \"srun --help\" for more information\n")
                return 1
        else:
            program = args[i:]
            break
        i += 1
    if not program:
        write_err("srun: fatal: No command given to execute.\n")
        return 1
    if "nodelist" in values:
        nodes = expand_hostlist(values["nodelist"])
    elif os.environ.get("SLURM_JOB_NODELIST"):
        nodes = expand_hostlist(os.environ["SLURM_JOB_NODELIST"])
    else:
        nodes = [ctx.node]
    if "nodes" in values:
        want = strtol(values["nodes"].split("-")[0])
        if want > len(nodes):
            write_err("srun: error: Unable to create step for job: Requested node configuration is not available\n")
            return 1
        if "nodelist" not in values:
            nodes = nodes[:want]
    per_node = strtol(values["ntasks-per-node"]) if "ntasks-per-node" in values else None
    ntasks = strtol(values["ntasks"]) if "ntasks" in values else (per_node or 1) * len(nodes)
    if per_node:
        placement = [nodes[r // per_node] for r in range(min(ntasks, per_node * len(nodes)))]
    else:
        base, extra = divmod(ntasks, len(nodes))
        placement = [n for k, n in enumerate(nodes) for _ in range(base + (k < extra))]
    used = list(dict.fromkeys(placement))
    export = values.get("export", "ALL")
    words = [w for w in export.split(",") if w]
    env_common = dict(os.environ) if "ALL" in words else {}
    for w in words:
        k, has, v = w.partition("=")
        if has:
            env_common[k] = v
        elif k not in ("ALL", "NONE") and k in os.environ:
            env_common[k] = os.environ[k]
    nodelist = ",".join(used)
    plan = []
    for rank, host in enumerate(placement):
        env = {
            **env_common,
            "SLURM_PROCID": str(rank),
            "SLURM_NTASKS": str(len(placement)),
            "SLURM_NPROCS": str(len(placement)),
            "SLURM_LOCALID": str(placement[:rank].count(host)),
            "SLURM_NODEID": str(used.index(host)),
            "SLURM_NNODES": str(len(used)),
            "SLURM_STEP_NUM_NODES": str(len(used)),
            "SLURM_STEP_NUM_TASKS": str(len(placement)),
            "SLURM_STEP_NODELIST": nodelist,
            "SLURMD_NODENAME": host,
        }
        env.setdefault("SLURM_JOB_NODELIST", nodelist)
        plan.append(RankPlan(rank, host, env))
    width = len(str(len(placement) - 1))
    prefix = (lambda r, fd: b"%*d: " % (width, r)) if "label" in flags else None
    res = Job(ctx, "srun", plan, program, inherit_env=False, prefix=prefix, stop_on_failure=False).run()
    if res.signalled:
        return 128 + res.signalled if res.signalled != signal.SIGALRM else 1
    if res.daemon_failed:
        write_err(
            "srun: error: Task launch for StepId=1.0 failed on node %s: Communication connection failure\n"
            "srun: error: Application launch failed: Communication connection failure\n"
            "srun: Job step aborted\n" % res.daemon_failed[0]
        )
        return 1
    failed: dict[tuple[str, int], list[int]] = {}
    for rank in sorted(res.exits):
        if res.exits[rank]:
            failed.setdefault((placement[rank], res.exits[rank]), []).append(rank)
    for (host, code), ranks in sorted(failed.items(), key=lambda kv: kv[1][0]):
        write_err(
            "srun: error: %s: task%s %s: Exited with exit code %d\n"
            % (host, "s" if len(ranks) > 1 else "", fold_ranks(ranks), code)
        )
    return max(res.exits.values(), default=1 if res.lost_daemon else 0)
