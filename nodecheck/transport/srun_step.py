"""One srun step of the srun transport, as text: the script every task runs, and its output read back.

Every task of a step runs the same script, delivered on stdin (`srun --input=all ... /bin/sh -s`):
it says which node it is on, then runs that node's probes one after the other, as an SSH session
would. For each probe it says which one starts, sends the command's stdout and stderr base64-encoded
(each line marked o or e, written a line at a time so the two streams cannot tear each other's
lines), then the exit status. The framing is the script's own: a tool's bytes reach the client only
inside base64, so no output can forge a node's name, a probe's start or its exit status. base64
holds a partial block until the command ends: a hung tool's output arrives once the remote `timeout`
has ended it.

The nodes need POSIX sh, coreutils (env, timeout, base64) and GNU sed (-u), as Slurm's own nodes do.
Pure: text in, text out. transport/srun.py runs the step.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from nodecheck.core.model import Probe
from nodecheck.transport import CappedBuffer, remote_command

NODE_MARK = "NODECHECK-NODE "  # the task's first line: the node it runs on ($SLURMD_NODENAME)
PROBE_MARK = "NODECHECK-PROBE "  # a probe starts: its index in the node's list
RC_MARK = "NODECHECK-RC "  # the probe ended: its exit status
B64_WIDTH = 76
MAX_SRUN_MESSAGE_CHARS = 64 * 1024  # srun's own words (not a task's) kept for the report
MAX_LINE_BYTES = 1 << 20  # a "line" without a newline is cut here (a hostile task's stderr)
_LABEL = re.compile(rb"^\s*(\d{1,7}): ?(.*)$", re.S)
_LAUNCH_FAILED = re.compile(r"failed on node (\S+?):\s*(.*)$")
# Slurm's one line per task that ended with an error status: the exit status already travels in
# the task's own frame, so these say nothing new
_TASK_EXIT = re.compile(r"^srun: error: \S+: tasks? [\d,-]+: (Exited with exit code \d+|Killed|Terminated)")
# a node's own root PATH as sshd gives it: the same tools as over SSH
NODE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def node_command(probe: Probe, timeout_s: float) -> str:
    """The shell text that runs `probe` on a node, bounded like an SSH command (remote_command),
    with its stdin (base64 in the script: exact bytes, no here-document delimiter to collide with)."""
    command = remote_command(probe, timeout_s)
    if not probe.stdin:
        return f"{command} </dev/null"
    encoded = base64.b64encode(probe.stdin.encode()).decode()
    return f"printf %s {encoded} | base64 -d | {command}"


def step_script(commands: Mapping[str, Sequence[str]], hold_s: float = 0.0) -> str:
    """The script of one step: {node name: the shell texts it runs, in order}. Each distinct command
    is one shell function and nodes with the same list share a case branch, so a thousand nodes
    running the same probes cost a few lines. `hold_s`: after the last exit status the task stays
    (and with it the step and what the commands left running) that long."""
    functions: dict[str, str] = {}
    lists: dict[tuple[str, ...], list[str]] = {}
    for node, texts in commands.items():
        names = tuple(functions.setdefault(t, f"c{len(functions)}") for t in texts)
        lists.setdefault(names, []).append(node)
    defs = "\n".join(f"{name}() {{ {text}; }}" for text, name in functions.items())
    branches = "\n".join(
        f"  {'|'.join(shlex.quote(n) for n in nodes)}) set -- {' '.join(names)} ;;" for names, nodes in lists.items()
    )
    hold = f"exec sleep {math.ceil(hold_s)}\n" if hold_s > 0 else ""
    return f"""PATH={NODE_PATH}; export PATH
LC_ALL=C; export LC_ALL
cd / || exit 1
node=${{SLURMD_NODENAME:-}}
printf '{NODE_MARK}%s\\n' "$node"
{defs}
case $node in
{branches}
  *) echo "nodecheck: no command for node $node" >&2; exit 125 ;;
esac
exec 3>&1
i=0
for f in "$@"; do
  printf '{PROBE_MARK}%s\\n' "$i"
  rc=$( {{ {{ {{ "$f" 3>&- 4>&- 5>&-; printf '%s' "$?" >&4; }} 2>&1 1>&5 5>&- \\
    | base64 -w {B64_WIDTH} | sed -u 's/^/e/' >&3; }} 5>&1 | base64 -w {B64_WIDTH} | sed -u 's/^/o/' >&3; }} 4>&1 )
  printf '{RC_MARK}%s\\n' "$rc"
  i=$((i + 1))
done
{hold}"""


@dataclass
class Frame:
    """One probe on one node: when it started and ended (the caller's clock), what it said, its status."""

    started: float
    out: CappedBuffer = field(default_factory=CappedBuffer)
    err: CappedBuffer = field(default_factory=CappedBuffer)
    rc: int | None = None
    ended: float | None = None


@dataclass
class TaskOutput:
    """What one task sent back: its node, a frame per probe it started, its stray stderr."""

    node: str | None = None
    frames: list[Frame] = field(default_factory=list)
    err: CappedBuffer = field(default_factory=CappedBuffer)  # stderr outside the frames (slurmstepd's)
    garbled: str = ""  # why its output could not be read (a line not in the framing, a bad status)

    def current(self) -> Frame | None:
        return self.frames[-1] if self.frames and self.frames[-1].rc is None else None


@dataclass
class StepOutput:
    """A step's output as it arrives: per task id, and srun's own words."""

    tasks: dict[int, TaskOutput] = field(default_factory=dict)
    srun_lines: list[str] = field(default_factory=list)
    srun_chars: int = 0
    _partial: dict[str, bytes] = field(default_factory=dict)

    def feed(self, stream: str, data: bytes, now: float) -> None:
        """Bytes from srun's stdout ("out") or stderr ("err") at time `now`."""
        buf = self._partial.get(stream, b"") + data
        *lines, rest = buf.split(b"\n")
        if len(rest) > MAX_LINE_BYTES:
            lines.append(rest)
            rest = b""
        self._partial[stream] = rest
        for line in lines:
            self._line(stream, line, now)

    def close(self, now: float) -> None:
        """srun's streams ended: a last line without a newline counts too."""
        for stream, rest in list(self._partial.items()):
            if rest:
                self._line(stream, rest, now)
        self._partial.clear()

    def task(self, tid: int) -> TaskOutput:
        return self.tasks.setdefault(tid, TaskOutput())

    def node_tasks(self) -> dict[str, TaskOutput]:
        """Task outputs by the node each said it runs on (a task that never said: left out)."""
        return {t.node: t for t in self.tasks.values() if t.node is not None}

    def launch_failures(self) -> dict[str, str]:
        """{node: srun's words} for every node on which srun said the task could not start."""
        failed: dict[str, str] = {}
        for line in self.srun_lines:
            m = _LAUNCH_FAILED.search(line)
            if m:
                failed.setdefault(m.group(1), line.removeprefix("srun: ").strip())
        return failed

    def srun_words(self, limit: int = 600) -> str:
        """srun's own messages, in one line, bounded (for a detail)."""
        words = "; ".join(line.removeprefix("srun: ").strip() for line in self.srun_lines if line.strip())
        return words if len(words) <= limit else words[:limit] + " …"

    def _line(self, stream: str, raw: bytes, now: float) -> None:
        m = _LABEL.match(raw)
        if m is None:  # srun's own message (not a task's): kept, bounded
            text = raw.decode(errors="replace").rstrip("\r")
            if not _TASK_EXIT.match(text) and self.srun_chars < MAX_SRUN_MESSAGE_CHARS:
                self.srun_lines.append(text[: MAX_SRUN_MESSAGE_CHARS - self.srun_chars])
                self.srun_chars += len(text)
            return
        t = self.task(int(m.group(1)))
        if stream == "err":  # only what the script did not frame: the shell's, slurmstepd's
            t.err.add(m.group(2) + b"\n")
        elif not t.garbled:
            t.garbled = _frame(t, m.group(2), now)


def _frame(t: TaskOutput, body: bytes, now: float) -> str:
    """One stdout line of a task into its frames; returns why it cannot be read ("" when it can)."""
    text = body.decode(errors="replace")
    if t.node is None:
        name = text[len(NODE_MARK) :].strip() if text.startswith(NODE_MARK) else ""
        if not name:
            return f"the task's first line was not its node's name: {text[:80]!r}"
        t.node = name
        return ""
    frame = t.current()
    if text.startswith(PROBE_MARK):
        if frame is not None or text[len(PROBE_MARK) :].strip() != str(len(t.frames)):
            return f"a probe started out of order: {text[:80]!r}"
        t.frames.append(Frame(started=now))
        return ""
    if frame is None:
        return f"output outside any probe: {text[:80]!r}"
    if text.startswith(RC_MARK):
        status = text[len(RC_MARK) :].strip()
        if not (status.isdigit() and len(status) <= 3):
            return f"no exit status from the node's command ({status[:40]!r})"
        frame.rc, frame.ended = int(status), now
        return ""
    kind, payload = body[:1], body[1:]
    if kind not in (b"o", b"e"):
        return f"a line of the node's output was not in the script's framing: {text[:80]!r}"
    try:
        (frame.out if kind == b"o" else frame.err).add(base64.b64decode(payload, validate=True))
    except (binascii.Error, ValueError):
        return f"a line of the node's output was not in the script's framing: {text[:80]!r}"
    return ""
