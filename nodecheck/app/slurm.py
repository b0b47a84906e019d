"""The only module that runs scontrol (and squeue): read node states and jobs, drain and resume
nodes, politely.

Etiquette (NHC's): nodecheck owns the drain reasons it marked, "nodecheck[<mark>]: <check> ...",
the mark a hash of the site's drain token and the reason's text (parsers.slurm.reason_owner): a
reason a person typed or edited never carries it. It never overwrites another drain's reason,
never resumes a node it did not drain (the unmarked "nodecheck: ..." reasons of earlier versions
included: resumed by hand), and never resumes a node that is DOWN or FAIL (Slurm's or an admin's
call, even if our reason is still on it). Every call is bounded by the Slurm object's timeout.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.core.model import excerpt, one_line
from nodecheck.parsers.slurm import (
    MARK_CHARS,
    OLD_OWNER,
    OWNER,
    SQUEUE_FORMAT,
    JobRecord,
    NodeState,
    parse_reservation_nodes,
    parse_sbatch_parsable,
    parse_show_node,
    parse_squeue_job,
    reason_mark,
    reason_owner,
)
from nodecheck.transport import children

__all__ = [
    "MAX_REASON_CHARS",
    "OLD_OWNER",
    "OWNER",
    "Change",
    "JobRecord",
    "NodeState",
    "Slurm",
    "SlurmError",
    "drain_politely",
    "drain_reason",
    "is_ours",
    "resume_politely",
]

# Slurm 22.05 keeps a reason of any length (tests/harness measured up to 100,000 characters); a
# drain reason is read in `sinfo -R -o %E` and `scontrol show node`, so nodecheck keeps it short
MAX_REASON_CHARS = 256
KILL_WAIT_S = 2.0  # after SIGKILL, how long to collect what scontrol printed
RUN_CHARS = 1 << 20  # what any Slurm command may print before it is cut off (a job, a drain: bytes)
ELLIPSIS = "…"
# One Slurm node name: a hostlist ("gpu[1-2]", "a,b") given to drain() would change many nodes.
_SINGLE_NODE = re.compile(r"[^\s,\[\]=\"']+")
# One job: "123", an array task "123_4", a heterogeneous component "123+1" (never a list or a name)
_JOB_ID = re.compile(r"\d+(?:_\d+)?(?:\+\d+)?", re.ASCII)


class SlurmError(Exception):
    """scontrol could not be run, failed, timed out or printed what nodecheck cannot read."""

    def __init__(
        self, message: str, *, argv: Sequence[str] = (), returncode: int | None = None, stderr: str = ""
    ) -> None:
        self.argv, self.returncode, self.stderr = tuple(argv), returncode, stderr
        super().__init__(message)


# ---- reasons ------------------------------------------------------------------------------------


def drain_reason(check: str, message: str, max_chars: int = MAX_REASON_CHARS, token: str = "") -> str:
    """'nodecheck[<mark>]: <check> <message>' on one line: control chars/newlines -> space, runs of
    spaces collapsed, cut with '…' to max_chars; the mark (reason_mark) is of the final text and the
    site's drain token, so only nodecheck's own, unedited reasons carry it."""
    head = len(OWNER) + MARK_CHARS + len("]: ")
    if max_chars < head + 1:  # the cut must leave the owner's mark and one character
        raise ValueError(f"max_chars {max_chars} leaves no room for a reason after {OWNER}<mark>]:")
    # str.split() also folds other whitespace (no-break space, ideographic space) into one
    body = " ".join(one_line(f"{check} {message}").split())
    if len(body) > max_chars - head:
        body = body[: max_chars - head - len(ELLIPSIS)].rstrip() + ELLIPSIS
    # scontrol drops a trailing '"' from a reason: the text Slurm keeps must be the text marked
    body = body.rstrip('" ') or check
    return f"{OWNER}{reason_mark(body, token)}]: {body}"


def is_ours(reason: str, token: str = "") -> bool:
    """A reason nodecheck set with this drain token (and so may replace or clear)."""
    return reason_owner(reason, token) == "ours"


# ---- scontrol -----------------------------------------------------------------------------------


class Slurm:
    """scontrol, run as an argv list (never a shell), every call bounded by `timeout_s`."""

    def __init__(
        self,
        scontrol: str = "scontrol",
        timeout_s: float = 10.0,
        env: Mapping[str, str] | None = None,
        scancel: str | None = None,
        squeue: str | None = None,
    ) -> None:
        self.scontrol, self.timeout_s = scontrol, timeout_s
        # scancel and squeue beside the scontrol given (a wrapper or a test's fake), else those on PATH
        self.scancel = scancel or _beside(scontrol, "scancel")
        self.squeue = squeue or _beside(scontrol, "squeue")
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

    def reboot(self, node: str, reason: str) -> None:
        """scontrol reboot reason=<reason> <node>: no ASAP and no nextstate, so a node that is drained
        stays drained after it boots (Slurm 22.05-24.05 take nextstate=RESUME or DOWN only) and the
        re-proof decides whether it returns. Slurm issues the reboot once the node is idle and runs
        the site's RebootProgram; a node not back within ResumeTimeout is set DOWN."""
        self._run([self.scontrol, "reboot", f"reason={reason}", _single(node)])

    def job(self, jobid: str) -> JobRecord:
        """`squeue -h -t all -j ID -O <fields>` -> JobRecord. SlurmError when squeue fails; an unknown
        job id is a SlurmError whose message contains "Invalid job id" (returncode squeue's 1, or None
        for an array task squeue does not list).

        Not `scontrol show job`: it prints the job's name, which the job's owner chooses, unquoted on
        the first line, and a name like "x NodeList=gpu[001-064] JobState=COMPLETED" (or one with a
        newline) reads as the job's nodes and state there. squeue prints only the fields asked for,
        none of them the owner's; `squeue --json` (22.05) ignores -j and lists every job."""
        jobid = _job_id(jobid)
        argv = [self.squeue, "-h", "-t", "all", "-j", jobid, "-O", SQUEUE_FORMAT]
        shown = f"{shlex.quote(self.squeue)} -j {jobid}"  # (the field list's separators unprintable)
        out = self._run(argv, shown)
        try:
            return parse_squeue_job(out, jobid)
        except ParseError as e:
            raise SlurmError(f"{shown}: {e}", argv=argv) from e

    def cancel(self, jobid: str) -> None:
        """scancel ID: Slurm signals every step, then ends the job."""
        self._run([self.scancel, _job_id(jobid)])

    def requeue(self, jobid: str) -> None:
        """scontrol requeue ID: the job goes back to the queue (Restarts+1) and starts again when
        Slurm allocates it; a job submitted with --no-requeue is refused by Slurm (SlurmError)."""
        self._run([self.scontrol, "requeue", _job_id(jobid)])

    # ---- sweep --slurm-submit (fleet.submit) -----------------------------------------------------

    def node_states(self, names: Sequence[str], max_chars: int | None = None) -> dict[str, NodeState]:
        """`scontrol show node a,b,...` for these nodes only, its output bounded (max_chars, default
        64 KiB a node): SlurmError for more, for a name that is not one node, or for a node listed
        that was not asked for. A node Slurm does not know is missing from the result (scontrol
        lists the others) or, when it knows none of them, the whole call fails (SlurmError)."""
        names = [_single(n) for n in names]
        if not names:
            return {}
        argv = [self.scontrol, "show", "node", ",".join(names)]
        out = self._run(argv, max_chars=max_chars or NODE_STATE_CHARS * len(names))
        for line in out.split("\n"):  # a name or a state with control characters in it: not Slurm's
            if _CONTROL.search(line) and not line.lstrip().startswith(_FREE) and not line.startswith(" " * 10):
                raise SlurmError(
                    f"scontrol show node: control characters in {excerpt(line.encode('unicode_escape').decode(), 120)}",
                    argv=argv,
                )
        try:
            states = parse_show_node(out)
        except ParseError as e:
            raise SlurmError(f"scontrol show node ({len(names)} nodes): {e}", argv=argv) from e
        strangers = [n for n in states if n not in set(names)]
        if strangers:
            raise SlurmError(
                f"scontrol show node listed {len(strangers)} node(s) not asked for, e.g. {strangers[0][:80]!r}",
                argv=argv,
            )
        return states

    def reservation_nodes(self, name: str) -> tuple[str, ...]:
        """`scontrol show reservation -o NAME` -> its nodes (parse_reservation_nodes)."""
        if not _SLURM_WORD.fullmatch(name):
            raise SlurmError(f"{name!r} is not a Slurm reservation name", argv=())
        argv = [self.scontrol, "show", "reservation", "-o", name]
        out = self._run(argv, max_chars=RESERVATION_CHARS)
        try:
            return parse_reservation_nodes(out, name)
        except ParseError as e:
            raise SlurmError(f"{shlex.join(argv)}: {e}", argv=argv) from e

    def submit(self, options: Sequence[str], script: str, sbatch: str | None = None) -> str:
        """`sbatch --parsable OPTIONS SCRIPT` -> the job id. The options are sbatch's own, each one
        argv word ("--nodelist=a,b"); nothing goes through a shell."""
        argv = [sbatch or _beside(self.scontrol, "sbatch"), "--parsable", *options, script]
        out = self._run(argv, max_chars=4096)
        try:
            return parse_sbatch_parsable(out)
        except ParseError as e:
            raise SlurmError(f"sbatch: {e}", argv=argv) from e

    def _run(self, argv: list[str], shown: str | None = None, max_chars: int = RUN_CHARS) -> str:
        """stdout of argv; SlurmError (its message starting with `shown`, default argv) if it cannot
        run, fails, outlives timeout_s (then killed with what it started, in its own session) or
        prints more than max_chars (64 KiB of stderr): read no further, never held in memory whole."""
        command = shown or (shlex.join(argv) if len(argv) < 8 else shlex.join(argv[:3]) + f" ... ({len(argv)} words)")
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self.env,
                start_new_session=True,
            )
        except OSError as e:
            raise SlurmError(f"{command}: cannot run {argv[0]!r}: {e.strerror or e}", argv=argv) from None
        children.started(proc)
        try:
            return self._answer(proc, argv, command, max_chars)
        finally:
            children.ended(proc)

    def _answer(self, proc: subprocess.Popen, argv: list[str], command: str, max_chars: int) -> str:
        import threading

        assert proc.stdout is not None and proc.stderr is not None
        out_box: list[bytes] = []
        err_box: list[bytes] = []
        readers = [
            threading.Thread(target=lambda: out_box.append(_read_capped(proc.stdout, max_chars)), daemon=True),
            threading.Thread(target=lambda: err_box.append(_read_capped(proc.stderr, 65536)), daemon=True),
        ]
        for reader in readers:
            reader.start()
        # bounded by time too: a child that left the session may hold the pipes open for ever
        readers[0].join(self.timeout_s)
        expired = readers[0].is_alive()
        out = out_box[0] if out_box else b""
        too_much = len(out) > max_chars
        if expired or too_much:
            _kill_group(proc.pid)
        try:
            proc.wait(timeout=KILL_WAIT_S if expired or too_much else self.timeout_s)
        except subprocess.TimeoutExpired:
            expired = True
            _kill_group(proc.pid)
            try:
                proc.wait(timeout=KILL_WAIT_S)
            except subprocess.TimeoutExpired:
                pass
        for reader, stream in zip(readers, (proc.stdout, proc.stderr)):
            reader.join(KILL_WAIT_S)
            if not reader.is_alive():
                stream.close()
        out = out_box[0] if out_box else out
        err = (err_box[0] if err_box else b"").decode("utf-8", "replace")
        text = out.decode("utf-8", "replace")
        if too_much:
            raise SlurmError(f"{command}: more than {max_chars} bytes of output; not read", argv=argv, stderr=err)
        if expired:
            raise SlurmError(
                f"{command}: no answer within {self.timeout_s:g} s; killed"
                + (f"; stderr: {excerpt(err.strip(), 500)!r}" if err.strip() else ""),
                argv=argv,
                stderr=err,
            )
        if proc.returncode != 0:
            # scontrol prints some failures on stdout ("Node x not found")
            said = err.strip() or text.strip() or "(no output)"
            raise SlurmError(
                f"{command}: exit {proc.returncode}: {excerpt(said, 500)}",
                argv=argv,
                returncode=proc.returncode,
                stderr=err,
            )
        return text


NODE_STATE_CHARS = 65536  # what `scontrol show node` may print per node asked for (about 1 KiB is usual)
RESERVATION_CHARS = 1 << 20
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_FREE = ("Reason=", "Comment=", "Extra=", "OS=")  # free text (a reason may hold anything): not judged here
_SLURM_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:+-]{0,127}", re.ASCII)


def _read_capped(stream, limit: int) -> bytes:
    """Up to limit + 1 bytes of a stream (one more than allowed tells the caller it was too much)."""
    chunks, size = [], 0
    while size <= limit:
        chunk = stream.read1(min(65536, limit + 1 - size)) if hasattr(stream, "read1") else stream.read(65536)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _beside(scontrol: str, tool: str) -> str:
    return os.path.join(os.path.dirname(scontrol), tool) if os.path.dirname(scontrol) else tool


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
    action: str  # "drain" | "resume" | "left" (not touched) | "failed"
    reason: str  # drain: the reason set; resume: the reason cleared;
    # left/failed: why
    before: NodeState | None  # the state read right before acting; None if unread


def drain_politely(slurm: Slurm, node: str, reason: str, token: str = "") -> Change:
    """Re-read the node's state right before acting. Drain unless it is already drained/down with a
    reason that is not ours (then 'left', quoting the foreign reason). Already drained by us: update
    the reason (ours), or 'kept' when it is the same reason. SlurmError -> 'failed'."""
    before, failed = _read(slurm, node)
    if failed:
        return failed
    assert before is not None  # _read gives the state or the failure
    if before.drained and before.owner(token) != "ours":
        return Change(
            node, "left", f"already {before.state}, {_foreign(before, token)}; not nodecheck's to change", before
        )
    if before.drained and before.reason == reason.rstrip('"'):  # (scontrol drops a trailing quote)
        # the same drain again (every health run, every sweep): no call, so Slurm keeps the reason's
        # time, which says since when, and the cluster breaker does not count it as fresh
        return Change(node, "kept", reason, before)
    try:
        slurm.drain(node, reason)
    except SlurmError as e:
        return Change(node, "failed", str(e), before)
    return Change(node, "drain", reason, before)


def resume_politely(slurm: Slurm, node: str, token: str = "") -> Change:
    """Resume only a node drained with our marked reason (flags DRAIN, reason ours for `token`);
    never one that is DOWN for another reason, never a foreign or old-format drain ('left').
    SlurmError -> 'failed'."""
    before, failed = _read(slurm, node)
    if failed:
        return failed
    assert before is not None  # _read gives the state or the failure
    if not before.drained:
        return Change(node, "left", f"not drained ({before.state})", before)
    if before.owner(token) != "ours":
        return Change(
            node, "left", f"{before.state}, {_foreign(before, token)}; only nodecheck's drains are resumed", before
        )
    down = sorted(before.flags & {"DOWN", "FAIL", "FAILING"})
    if down:
        # Slurm (not responding, a failed epilog) or an admin took it down after our drain
        return Change(
            node,
            "left",
            f"{before.state}: {'/'.join(down)} is not nodecheck's drain; resume it by hand once fixed",
            before,
        )
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
        return None, Change(
            node,
            "failed",
            f"scontrol show node {node} did not list it (listed: {', '.join(states) or 'nothing'})",
            None,
        )
    return states[node], None


def _foreign(state: NodeState, token: str = "") -> str:
    if not state.reason:
        return "with no reason"
    by = f" (set by {state.reason_user} at {state.reason_time})" if state.reason_user else ""
    old = (
        (" (an unmarked, old-format nodecheck reason: anyone could have typed it, so it is resumed by hand)")
        if state.owner(token) == "old"
        else ""
    )
    return f"reason {excerpt(state.reason, 300)!r}{by}{old}"
