"""The only module that runs scontrol: read node states, drain and resume nodes, politely.

Etiquette (NHC's): nodecheck owns the drain reasons that start with "nodecheck:". It never
overwrites another drain's reason, never resumes a node it did not drain, and never resumes a
node that is DOWN or FAIL (Slurm's or an admin's call, even if our reason is still on it).
"""
from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
from dataclasses import dataclass
from typing import Mapping, Sequence

from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet, NodeSetException

from nodecheck.errors import ConfigError, ParseError
from nodecheck.inventory import MAX_NODES, size_bound
from nodecheck.model import excerpt, one_line
from nodecheck.parsers.slurm import OWNER, JobRecord, NodeState, parse_show_job, parse_show_node

__all__ = ["MAX_REASON_CHARS", "OWNER", "Change", "JobRecord", "NodeState", "Slurm", "SlurmError", "drain_politely",
           "drain_reason", "expand_hostlist", "is_ours", "resume_politely"]

# Slurm 22.05 keeps a reason of any length (tests/harness measured up to 100,000 characters); a
# drain reason is read in `sinfo -R -o %E` and `scontrol show node`, so nodecheck keeps it short
MAX_REASON_CHARS = 256
KILL_WAIT_S = 2.0               # after SIGKILL, how long to collect what scontrol printed
ELLIPSIS = "…"
# One Slurm node name: a hostlist ("gpu[1-2]", "a,b") given to drain() would change many nodes.
_SINGLE_NODE = re.compile(r"[^\s,\[\]=\"']+")
# One job: "123", an array task "123_4", a heterogeneous component "123+1" (never a list or a name)
_JOB_ID = re.compile(r"\d+(?:_\d+)?(?:\+\d+)?", re.ASCII)


class SlurmError(Exception):
    """scontrol could not be run, failed, timed out or printed what nodecheck cannot read."""

    def __init__(self, message: str, *, argv: Sequence[str] = (), returncode: int | None = None,
                 stderr: str = "") -> None:
        self.argv, self.returncode, self.stderr = tuple(argv), returncode, stderr
        super().__init__(message)


# ---- reasons ------------------------------------------------------------------------------------

def drain_reason(check: str, message: str, max_chars: int = MAX_REASON_CHARS) -> str:
    """'nodecheck: <check> <message>' on one line: control chars/newlines -> space, runs of spaces
    collapsed, cut with '…' to max_chars."""
    if max_chars < len(OWNER) + 2:             # the cut must leave the owner prefix and one character
        raise ValueError(f"max_chars {max_chars} leaves no room for a reason after {OWNER!r}")
    text = f"{OWNER} {check} {message}"
    # str.split() also folds other whitespace (no-break space, ideographic space) into one
    text = " ".join(one_line(text).split())
    if len(text) > max_chars:
        text = text[:max_chars - len(ELLIPSIS)].rstrip() + ELLIPSIS
    return text


def is_ours(reason: str) -> bool:
    """A reason nodecheck set (and so may replace or clear)."""
    return reason.startswith(OWNER)


def expand_hostlist(text: str) -> list[str]:
    """Slurm hostlist "node[1-4,7]" -> ["node1", ..., "node7"], sorted as ClusterShell sorts;
    ConfigError on text that is not a hostlist."""
    size = size_bound(text)
    if size > MAX_NODES:                       # ClusterShell would materialise every name first
        raise ConfigError(f"hostlist {text!r} names {size:,} nodes, more than {MAX_NODES:,}",
                          hint="check the ranges for a typo")
    try:
        # RESOLVER_NOGROUP: "@name" must not run the commands of a local groups.conf
        names = list(NodeSet(text, resolver=RESOLVER_NOGROUP))
    except (NodeSetException, ValueError) as e:
        raise ConfigError(f"bad hostlist {text!r}: {e}", hint="Slurm hostlist syntax, e.g. gpu[001-008,010]") from None
    if not names:
        raise ConfigError(f"empty hostlist {text!r}", hint="name at least one node")
    bad = [n for n in names if n.startswith("@") or any(c.isspace() for c in n)]
    if bad:
        raise ConfigError(f"bad hostlist {text!r}: {bad[0]!r} is not a node name",
                          hint="separate names with ',' ; node groups (@name) are not expanded")
    return names


# ---- scontrol -----------------------------------------------------------------------------------

class Slurm:
    """scontrol, run as an argv list (never a shell), every call bounded by `timeout_s`."""

    def __init__(self, scontrol: str = "scontrol", timeout_s: float = 10.0,
                 env: Mapping[str, str] | None = None, scancel: str | None = None) -> None:
        self.scontrol, self.timeout_s = scontrol, timeout_s
        # scancel beside the scontrol given (a wrapper or a test's fake), else the one on PATH
        self.scancel = scancel or (os.path.join(os.path.dirname(scontrol), "scancel")
                                   if os.path.dirname(scontrol) else "scancel")
        self.env = dict(os.environ if env is None else env)
        # Reason timestamps as "2026-11-29T14:02:03" whatever the caller's SLURM_TIME_FORMAT:
        # the parser strips the " [user@time]" suffix only in that form.
        self.env["SLURM_TIME_FORMAT"] = "standard"

    def nodes(self, names: Sequence[str] = ()) -> dict[str, NodeState]:
        """`scontrol show node` [names joined by ','] -> parse_show_node; () = every node"""
        argv = [self.scontrol, "show", "node"] + ([",".join(names)] if names else [])
        out = self._run(argv)
        try:
            return parse_show_node(out)
        except ParseError as e:
            raise SlurmError(f"{shlex.join(argv)}: {e}", argv=argv) from e

    def drain(self, node: str, reason: str) -> None:
        """scontrol update NodeName=<node> State=DRAIN Reason=<reason> (the reason one argument)."""
        self._run([self.scontrol, "update", f"NodeName={_single(node)}", "State=DRAIN", f"Reason={reason}"])

    def resume(self, node: str) -> None:
        """scontrol update NodeName=<node> State=RESUME"""
        self._run([self.scontrol, "update", f"NodeName={_single(node)}", "State=RESUME"])

    def job(self, jobid: str) -> JobRecord:
        """`scontrol show job ID` -> JobRecord. SlurmError when scontrol fails; an unknown job id is a
        SlurmError whose returncode is scontrol's (1) and whose message contains "Invalid job id"."""
        argv = [self.scontrol, "show", "job", _job_id(jobid)]
        out = self._run(argv)
        try:
            return parse_show_job(out)
        except ParseError as e:
            raise SlurmError(f"{shlex.join(argv)}: {e}", argv=argv) from e

    def cancel(self, jobid: str) -> None:
        """scancel ID: Slurm signals every step, then ends the job."""
        self._run([self.scancel, _job_id(jobid)])

    def requeue(self, jobid: str) -> None:
        """scontrol requeue ID: the job goes back to the queue (Restarts+1) and starts again when
        Slurm allocates it; a job submitted with --no-requeue is refused by Slurm (SlurmError)."""
        self._run([self.scontrol, "requeue", _job_id(jobid)])

    def _run(self, argv: list[str]) -> str:
        command = shlex.join(argv)
        try:
            # a new session, so a timeout kills scontrol and anything a wrapper script started
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, env=self.env, start_new_session=True,
                                    text=True, encoding="utf-8", errors="replace")
        except OSError as e:                   # not found, not executable
            raise SlurmError(f"{command}: cannot run {argv[0]!r}: {e.strerror or e}", argv=argv) from None
        try:
            out, err = proc.communicate(timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            try:                               # a child that left the group may hold the pipes open
                _, err = proc.communicate(timeout=KILL_WAIT_S)
            except subprocess.TimeoutExpired:
                err = ""
            raise SlurmError(f"{command}: no answer within {self.timeout_s:g} s; killed"
                             + (f"; stderr: {excerpt(err.strip(), 500)!r}" if err.strip() else ""),
                             argv=argv, stderr=err) from None
        if proc.returncode != 0:
            # scontrol prints some failures on stdout ("Node x not found")
            said = err.strip() or out.strip() or "(no output)"
            raise SlurmError(f"{command}: exit {proc.returncode}: {excerpt(said, 500)}", argv=argv,
                             returncode=proc.returncode, stderr=err)
        return out


def _job_id(jobid: str) -> str:
    jobid = str(jobid).strip()
    if not _JOB_ID.fullmatch(jobid):
        raise SlurmError(f"{jobid!r} is not a Slurm job id (digits, e.g. 4242 or 4242_7)", argv=())
    return jobid


def _single(node: str) -> str:
    if not _SINGLE_NODE.fullmatch(node):
        raise SlurmError(f"refusing to change {node!r}: not one node name", argv=())
    return node


# ---- etiquette ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Change:
    """What was done (or not) to one node, for the log and the result line."""
    node: str
    action: str                                # "drain" | "resume" | "left" (not touched) | "failed"
    reason: str                                # drain: the reason set; resume: the reason cleared;
                                               # left/failed: why
    before: NodeState | None                   # the state read right before acting; None if unread


def drain_politely(slurm: Slurm, node: str, reason: str) -> Change:
    """Re-read the node's state right before acting. Drain unless it is already drained/down with a
    reason that is not ours (then 'left', quoting the foreign reason). Already drained by us: update
    the reason (ours), or 'kept' when it is the same reason. SlurmError -> 'failed'."""
    before, failed = _read(slurm, node)
    if failed:
        return failed
    if before.drained and not before.ours:
        return Change(node, "left", f"already {before.state}, {_foreign(before)}; not nodecheck's to change",
                      before)
    if before.drained and before.reason == reason.rstrip('"'):   # (scontrol drops a trailing quote)
        # the same drain again (every health run, every sweep): no call, so Slurm keeps the reason's
        # time, which says since when, and the cluster breaker does not count it as fresh
        return Change(node, "kept", reason, before)
    try:
        slurm.drain(node, reason)
    except SlurmError as e:
        return Change(node, "failed", str(e), before)
    return Change(node, "drain", reason, before)


def resume_politely(slurm: Slurm, node: str) -> Change:
    """Resume only a node drained with our reason (flags DRAIN, reason ours); never one that is DOWN
    for another reason, never a foreign drain ('left'). SlurmError -> 'failed'."""
    before, failed = _read(slurm, node)
    if failed:
        return failed
    if not before.drained:
        return Change(node, "left", f"not drained ({before.state})", before)
    if not before.ours:
        return Change(node, "left", f"{before.state}, {_foreign(before)}; only nodecheck's drains are resumed",
                      before)
    down = sorted(before.flags & {"DOWN", "FAIL", "FAILING"})
    if down:
        # Slurm (not responding, a failed epilog) or an admin took it down after our drain
        return Change(node, "left", f"{before.state}: {'/'.join(down)} is not nodecheck's drain; "
                                    f"resume it by hand once fixed", before)
    try:
        slurm.resume(node)
    except SlurmError as e:
        return Change(node, "failed", str(e), before)
    return Change(node, "resume", before.reason, before)


def _read(slurm: Slurm, node: str) -> tuple[NodeState | None, Change | None]:
    """The node's state now, or the 'failed' Change saying why it could not be read."""
    try:
        states = slurm.nodes([_single(node)])
    except SlurmError as e:
        return None, Change(node, "failed", f"cannot read its state: {e}", None)
    if node not in states:
        return None, Change(node, "failed", f"scontrol show node {node} did not list it "
                                            f"(listed: {', '.join(states) or 'nothing'})", None)
    return states[node], None


def _foreign(state: NodeState) -> str:
    if not state.reason:
        return "with no reason"
    by = f" (set by {state.reason_user} at {state.reason_time})" if state.reason_user else ""
    return f"reason {state.reason!r}{by}"
