"""Parse `scontrol show node` (the multi-line form) into each node's state and drain reason."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Literal

from nodecheck.core.errors import ParseError
from nodecheck.core.hostlist import expand
from nodecheck.core.model import quote
from nodecheck.parsers.lines import split_lines

# Drain ownership. A reason nodecheck sets reads "nodecheck[1a2b3c4d]: <check> <message>": the mark
# in brackets is a hash of the site's drain token and the rest of the reason, so a reason a person
# typed, or copied from nodecheck's and edited ("nodecheck: gpu.health GPU3 held for RMA - do not
# resume"), is not nodecheck's, and nodecheck never resumes it.
OWNER = "nodecheck["  # every drain reason nodecheck sets starts with this
OLD_OWNER = "nodecheck:"  # the reasons of nodecheck before the mark: never resumed
MARK_CHARS = 8
_MARKED = re.compile(r"nodecheck\[([0-9a-f]{%d})\]: (\S.*)" % MARK_CHARS, re.ASCII)
Owner = Literal["ours", "old", "foreign"]


def reason_mark(body: str, token: str = "") -> str:
    """The mark of a reason's body (what follows "nodecheck[mark]: ") for a site's drain token."""
    return hashlib.sha256(f"nodecheck-drain\0{token}\0{body}".encode("utf-8", "surrogatepass")).hexdigest()[:MARK_CHARS]


# What slurmctld itself appends to a node's reason when it reboots it: " : reboot issued" (kept after
# the node is back) and " : reboot timed out" (ResumeTimeout passed). Measured on 22.05.8
# (tests/harness/README.md, "Reboot"). Only these exact words, only at the end, are Slurm's.
SLURM_REBOOT_SUFFIXES = (" : reboot issued", " : reboot timed out")


def _without_slurm_suffixes(reason: str) -> str:
    changed = True
    while changed:
        changed = False
        for suffix in SLURM_REBOOT_SUFFIXES:
            if reason.endswith(suffix):
                reason, changed = reason[: -len(suffix)], True
    return reason


def reason_owner(reason: str, token: str = "") -> Owner:
    """ "ours": a reason nodecheck set with this token (its mark matches its text); "old": the
    "nodecheck: ..." form of earlier versions, which anyone could have typed; else "foreign". What
    Slurm appends when it reboots the node (SLURM_REBOOT_SUFFIXES) is not part of the text marked."""
    m = _MARKED.fullmatch(_without_slurm_suffixes(reason or ""))
    if m and m[1] == reason_mark(m[2], token):
        return "ours"
    return "old" if (reason or "").startswith(OLD_OWNER) else "foreign"


def reason_body(reason: str) -> str:
    """ "<check> <message>" of a marked reason (or of an old-format one); "" otherwise."""
    m = _MARKED.fullmatch(_without_slurm_suffixes(reason or ""))
    if m:
        return m[2]
    return reason[len(OLD_OWNER) :].lstrip() if (reason or "").startswith(OLD_OWNER) else ""


# A nodecheck drain that holds the node for a person: "nodecheck[mark]: <check> needs a person: ...".
# Set by remediation when its ladder is used up (or says hold); nothing of nodecheck's resumes it.
HELD_MARK = "needs a person:"


def held_for_a_person(reason: str) -> bool:
    """Is this a nodecheck reason that holds the node for a person? (Whose it is, is reason_owner's.)"""
    body = reason_body(reason)
    check, _, rest = body.partition(" ")
    return bool(check) and rest.startswith(HELD_MARK)


TOOL = "scontrol show node"

# Flags that mean "taken out of service by someone, with a reason": an admin's or a health
# check's drain, Slurm's own DOWN ("Not responding", "Kill task failed") or FAIL. MAINT is left
# out: it is a reservation's flag, not a decision about the node's health.
UNAVAILABLE_FLAGS = frozenset({"DRAIN", "DRAINED", "DRAINING", "DOWN", "FAIL", "FAILING"})

_NODE_NAME = re.compile(r"NodeName=(\S+)")
_KEY = re.compile(r"([A-Za-z][A-Za-z0-9_]*)=")  # each line of a block starts with Key=
_STATE_FIELD = re.compile(r"(?:^|\s)State=(\S*)")  # not NextState=
# 22.05 prints base+FLAG+FLAG ("DOWN+DRAIN+NOT_RESPONDING"); 20.11 and older mark a node that
# does not respond with '*' on the base ("DOWN*+DRAIN").
_STATE = re.compile(r"[A-Z][A-Z_]*\*?(?:\+[A-Z][A-Z_]*\*?)*")
# " [root@2026-11-29T14:02:03]" that Slurm appends to the first line of a reason. The user may be
# a uid or "user@domain" (sssd): the '@' that counts is the one before the timestamp.
_STAMP = re.compile(r"(.*) \[([^\s\[\]]+)@(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\]\s*", re.ASCII | re.DOTALL)
# Keys whose value is the rest of the line, spaces and '=' included.
_FREE_TEXT = frozenset({"OS", "Reason", "Comment", "Extra"})
_PARTITION = re.compile(r"[A-Za-z0-9_.:+-]{1,128}", re.ASCII)
# Slurm prints each further line of a multi-line reason after the block's 3-space indent and 7
# more spaces (node_info.c: line_end + "       ").
_REASON_MORE = " " * 10
_NO_NODES = "No nodes in the system"  # what scontrol prints for a cluster without nodes


@dataclass(frozen=True)
class NodeState:
    name: str
    state: str  # raw State= value: "IDLE+DRAIN", "DOWN+NOT_RESPONDING"
    flags: frozenset[str]  # its words, '*' stripped: {"IDLE", "DRAIN"}
    reason: str  # without the " [user@timestamp]" suffix; "" if none
    reason_user: str = ""  # "root"
    reason_time: str = ""  # "2026-11-29T14:00:00", as Slurm printed it
    not_responding: bool = False  # '*' in State (20.11 and older) or +NOT_RESPONDING (22.05)
    partitions: tuple[str, ...] = ()  # Partitions=gpu,debug (a node in none prints no such field)

    @property
    def drained(self) -> bool:
        """Out of service with a reason someone set: DRAIN, DOWN or FAIL (Slurm's own DOWN included)."""
        return bool(self.flags & UNAVAILABLE_FLAGS)

    def owner(self, token: str = "") -> Owner:
        """Whose the reason is: reason_owner(reason, token)."""
        return reason_owner(self.reason, token)


@dataclass
class _Block:
    name: str
    first_line: int  # index into the lines, for the excerpt
    state: str | None = None
    reason: list[str] | None = None  # the reason's lines, suffix removed
    reason_user: str = ""
    reason_time: str = ""
    partitions: tuple[str, ...] = ()


def parse_show_node(text: str) -> dict[str, NodeState]:
    """Every node block of `scontrol show node [names]`, by name in output order.

    Raises ParseError for text that is not that output: empty text, a line before the first
    NodeName=, a line in a block that is not Key=..., a block without State=, a node twice."""
    lines = split_lines(text)
    if not any(line.strip() for line in lines):
        raise ParseError(TOOL, "empty output", text)
    if [line.strip() for line in lines if line.strip()] == [_NO_NODES]:
        return {}
    blocks: list[_Block] = []
    current: _Block | None = None
    in_reason = False  # the previous line was the reason or more of it
    for i, line in enumerate(lines):
        if not line.strip():
            current, in_reason = None, False  # a blank line ends a block
            continue
        if current is not None and in_reason and line.startswith(_REASON_MORE):
            assert current.reason is not None  # in_reason: this block's Reason line came before
            current.reason.append(line[len(_REASON_MORE) :])
            continue
        stripped = line.strip()
        match = _NODE_NAME.match(stripped)
        if match:
            current, in_reason = _Block(match[1], i), False
            blocks.append(current)
            _fields(current, stripped, text)
            continue
        if current is None:
            raise ParseError(TOOL, f"expected a line like NodeName=<name> ..., got {quote(stripped)}", text)
        if not _KEY.match(stripped):
            # indentation may be lost (a forum post), but every line still starts with Key=
            raise ParseError(TOOL, f"node {current.name}: unexpected line {quote(stripped)}", text)
        in_reason = _fields(current, line.lstrip(), text)
    return _states(blocks, lines, text)


def _fields(block: _Block, line: str, text: str) -> bool:
    """Read the fields nodecheck needs from one line of a block; True if it was the Reason line."""
    starts = _KEY.match(line)
    assert starts is not None  # the caller matched _KEY (or NodeName=) on this line
    key = starts[1]
    if key in _FREE_TEXT:
        if key == "Reason":
            if block.reason is not None:
                raise ParseError(TOOL, f"node {block.name}: two Reason= lines", text)
            _reason(block, line[len("Reason=") :])
            return True
        return False
    if key == "Partitions":
        names = line[len("Partitions=") :].split()
        if len(names) != 1 or not all(_PARTITION.fullmatch(p) for p in names[0].split(",")):
            raise ParseError(
                TOOL, f"node {block.name}: Partitions={' '.join(names)[:80]} is not a partition list", text
            )
        block.partitions = tuple(names[0].split(","))
    match = _STATE_FIELD.search(line)
    if match:
        if block.state is not None:
            raise ParseError(TOOL, f"node {block.name}: two State= fields", text)
        if not _STATE.fullmatch(match[1]):
            raise ParseError(TOOL, f"node {block.name}: State={match[1]} is not a Slurm state", text)
        block.state = match[1]
    return False


def _reason(block: _Block, value: str) -> None:
    stamp = _STAMP.fullmatch(value)
    if stamp:
        block.reason = [stamp[1]]
        block.reason_user, block.reason_time = stamp[2], stamp[3]
    else:  # no reason_time recorded: Slurm prints the text alone
        block.reason = [value]


def _states(blocks: list[_Block], lines: list[str], text: str) -> dict[str, NodeState]:
    states: dict[str, NodeState] = {}
    for block in blocks:
        if block.state is None:  # cut off, or not scontrol's block
            raise ParseError(
                TOOL, f"node {block.name}: no State= field (output cut off?)", "\n".join(lines[block.first_line :])
            )
        if block.name in states:
            raise ParseError(TOOL, f"node {block.name} appears twice", text)
        words = block.state.split("+")
        flags = frozenset(word.rstrip("*") for word in words)
        states[block.name] = NodeState(
            name=block.name,
            state=block.state,
            flags=flags,
            reason="\n".join(block.reason or ()),
            reason_user=block.reason_user,
            reason_time=block.reason_time,
            not_responding="*" in block.state or "NOT_RESPONDING" in flags,
            partitions=block.partitions,
        )
    return states


# ---- a job ---------------------------------------------------------------------------------------

# JobState values after which the job will not run again on its own (Slurm's job_state_string)
ENDED_STATES = frozenset(
    {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "PREEMPTED"}
)
_INVALID_JOB = "Invalid job id specified"
# bounded: a count of more digits is none Slurm prints (and int() of 4,300 digits raises)
_GRES_GPU = re.compile(r"(?:^|,)gres/gpu=(\d{1,9})(?:,|$)", re.ASCII)
_NULL = ("", "(null)", "None", "N/A")


@dataclass(frozen=True)
class JobRecord:
    """One job, from `squeue -O` (parse_squeue_job); for an array or a heterogeneous job, its first
    record. Not from `scontrol show job`: it prints the job's name, which the job's owner chooses,
    unquoted, and a name can forge the fields after it (app/slurm.py, Slurm.job)."""

    job_id: str
    state: str  # "RUNNING", "PENDING", "COMPLETED", ...; a trailing '+' stripped
    reason: str  # "None", "BeginTime", "NonZeroExitCode", ...
    node_list: str  # "node[1-3]"; "" while pending
    nodes: tuple[str, ...]  # node_list expanded
    num_nodes: int | None
    num_tasks: int | None
    gpus: int | None  # gres/gpu=N of the allocated TRES; None: no GPU in it
    requeue: bool | None  # Requeue=1: Slurm requeues the job after a node failure
    user: str  # "root"
    batch_host: str
    raw: str

    @property
    def ended(self) -> bool:
        return self.state in ENDED_STATES

    @property
    def running(self) -> bool:
        return self.state == "RUNNING"


def _nodes(node_list: str, job_id: str, text: str, tool: str) -> tuple[str, ...]:
    try:
        return tuple(expand(node_list)) if node_list else ()
    except Exception as e:  # ConfigError: not a hostlist
        raise ParseError(tool, f"job {job_id}: NodeList={node_list} is not a hostlist: {e}", text) from None


def _gpus(tres: str) -> int | None:
    gpu = _GRES_GPU.search(tres)
    return int(gpu[1]) if gpu else None


# ---- squeue: the job's facts where its owner cannot write ------------------------------------------

SQUEUE_TOOL = "squeue"
# squeue -O fields, each ended by the ASCII unit separator. The job's name is not asked for: it is the
# one field the job's owner writes (any bytes, newlines and separators included), so no field, line or
# record of this output is the owner's. Reason goes last (the rest of the line), being free text that
# slurmctld or an admin may write.
SQUEUE_SEP = "\x1f"
SQUEUE_FIELDS = (
    "JobArrayID",
    "JobID",
    "State",
    "NodeList",
    "UserName",
    "Requeue",
    "NumNodes",
    "NumTasks",
    "tres-alloc",
    "BatchHost",
    "Reason",
)
SQUEUE_FORMAT = ",".join(f"{f}:{SQUEUE_SEP}" for f in SQUEUE_FIELDS[:-1]) + f",{SQUEUE_FIELDS[-1]}:"
_ARRAY_ID = re.compile(r"(\d+)(?:_(?:\d+|\[[\d,\-%]+\]))?(?:\+\d+)?", re.ASCII)
_WORD = re.compile(r"[A-Z][A-Z_]*", re.ASCII)
_USER = re.compile(r"[^\s:/]+")
_BOOL = {"0": False, "1": True}


def parse_squeue_job(text: str, job_id: str) -> JobRecord:
    """`squeue -h -t all -j ID -O SQUEUE_FORMAT` -> JobRecord of job ID (an array's first task, as
    scontrol). ParseError on no line (Slurm does not know the job), a line without exactly the fields
    asked for, a field not in its form, or a first line of another job."""
    lines = [line for line in split_lines(text) if line.strip()]
    if not lines:
        raise ParseError(SQUEUE_TOOL, f"no such job ({_INVALID_JOB!r}: squeue listed nothing for {job_id})", text)
    values = lines[0].split(SQUEUE_SEP)
    if len(values) != len(SQUEUE_FIELDS):
        raise ParseError(
            SQUEUE_TOOL,
            f"job {job_id}: {len(values)} fields, expected {len(SQUEUE_FIELDS)} ({', '.join(SQUEUE_FIELDS)})",
            text,
        )
    f = dict(zip(SQUEUE_FIELDS, (v.strip() for v in values)))
    array_id = _ARRAY_ID.fullmatch(f["JobArrayID"])
    if array_id is None or not f["JobID"].isdigit() or not f["JobID"].isascii():
        raise ParseError(
            SQUEUE_TOOL,
            f"job {job_id}: JobArrayID={quote(f['JobArrayID'])} JobID={quote(f['JobID'])} are not job ids",
            text,
        )
    asked = re.split(r"[_+]", job_id)[0]
    if asked not in (array_id[1], f["JobID"]):
        raise ParseError(
            SQUEUE_TOOL, f"asked for job {job_id}, squeue answered with job {quote(f['JobArrayID'])}", text
        )
    for key, form in (("State", _WORD), ("UserName", _USER)):
        if not form.fullmatch(f[key]):
            raise ParseError(SQUEUE_TOOL, f"job {job_id}: {key}={quote(f[key])} is not a Slurm {key.lower()}", text)
    if f["Requeue"] not in _BOOL:
        raise ParseError(SQUEUE_TOOL, f"job {job_id}: Requeue={quote(f['Requeue'])} is not 0 or 1", text)
    node_list = "" if f["NodeList"] in _NULL else f["NodeList"]
    batch_host = "" if f["BatchHost"] in (*_NULL, "n/a") else f["BatchHost"]
    return JobRecord(
        # an array task keeps its "4_2" form; a pending array's "4_[1-2]" is its job id
        job_id=f["JobArrayID"] if _JOB_ID_FORM.fullmatch(f["JobArrayID"]) else f["JobID"],
        state=f["State"].rstrip("+"),
        reason=f["Reason"],
        node_list=node_list,
        nodes=_nodes(node_list, job_id, text, SQUEUE_TOOL),
        num_nodes=_count(f["NumNodes"]),
        num_tasks=_count(f["NumTasks"]),
        gpus=_gpus(f["tres-alloc"]),
        requeue=_BOOL[f["Requeue"]],
        user=f["UserName"],
        batch_host=batch_host,
        raw=lines[0] + "\n",
    )


_JOB_ID_FORM = re.compile(r"\d+(?:_\d+)?(?:\+\d+)?", re.ASCII)


def _count(value: str | None) -> int | None:
    """ "3" -> 3; "1-1" (a pending job's range) -> 1; absent, "N/A" or not a count Slurm prints -> None."""
    m = re.fullmatch(r"(\d{1,9})(?:-\d{1,9})?", value or "", re.ASCII)
    return int(m[1]) if m else None


# ---- sweep --slurm-submit: reservations, sbatch ---------------------------------------------------

RESERVATION_TOOL = "scontrol show reservation"
SBATCH_TOOL = "sbatch --parsable"
_RES_NODES = re.compile(r"(?:^|\s)Nodes=(\S*)")
_RES_NAME = re.compile(r"ReservationName=(\S+)")
_PARSABLE = re.compile(r"(\d{1,12})(?:;[A-Za-z0-9_.-]{1,64})?", re.ASCII)


def parse_reservation_nodes(text: str, name: str) -> tuple[str, ...]:
    """`scontrol show reservation -o NAME` -> the reservation's nodes, expanded. ParseError on empty
    output, "Reservation NAME not found", another reservation's record, several records, or a Nodes=
    that is not a hostlist. A reservation of no nodes (Nodes=(null)) is ()."""
    lines = [line.strip() for line in split_lines(text) if line.strip()]
    if not lines:
        raise ParseError(RESERVATION_TOOL, "empty output", text)
    if len(lines) != 1:
        raise ParseError(RESERVATION_TOOL, f"expected one record for {quote(name)}, got {len(lines)} lines", text)
    found = _RES_NAME.match(lines[0])
    if found is None:
        raise ParseError(RESERVATION_TOOL, f"expected ReservationName={quote(name)} ..., got {quote(lines[0])}", text)
    if found[1] != name:
        raise ParseError(RESERVATION_TOOL, f"asked for reservation {quote(name)}, got {quote(found[1])}", text)
    nodes = _RES_NODES.findall(lines[0])
    if len(nodes) != 1:
        raise ParseError(RESERVATION_TOOL, f"reservation {quote(name)}: {len(nodes)} Nodes= fields, expected 1", text)
    if nodes[0] in _NULL:
        return ()
    try:
        return tuple(expand(nodes[0]))
    except Exception as e:  # ConfigError: not a hostlist
        raise ParseError(RESERVATION_TOOL, f"reservation {quote(name)}: Nodes={quote(nodes[0])}: {e}", text) from None


def parse_sbatch_parsable(text: str) -> str:
    """`sbatch --parsable` -> the job id ("4242", or "4242;cluster" -> "4242"). ParseError otherwise."""
    lines = [line.strip() for line in split_lines(text) if line.strip()]
    if len(lines) != 1 or not (m := _PARSABLE.fullmatch(lines[0])):
        raise ParseError(SBATCH_TOOL, "expected one line holding the job id (JOBID[;CLUSTER])", text)
    return m[1]
