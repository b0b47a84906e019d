"""Gather what forensics judges, in two fan-outs over the job's nodes: first each node's snapshot (GPUs,
the job's processes and their ranks, dump files, NCCL warnings) and kernel log; then, on every node at
once, py-spy on every rank and the fetch of every dump file. Or the dumps from a local directory.

Nothing here judges: it returns captures and parsed facts; a node that cannot be read carries its
failure. Every probe has its timeout and the whole gathering one deadline (transport.fanout).
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from nodecheck.core.errors import ParseError
from nodecheck.core.model import Capture, Node, Outcome, one_line
from nodecheck.core.progress import NULL_PROGRESS, RunProgress
from nodecheck.core.redact import redact_text
from nodecheck.forensics.probe import FETCH_PREFIX, fetch_probe, snapshot_probe, stacks_probe
from nodecheck.forensics.ranks import RankProcess, rank_processes
from nodecheck.parsers.forensics import NodeSnapshot, StackResult, parse_fetch, parse_snapshot, parse_stacks
from nodecheck.probes.kernel_log import KERNEL_LOG

SNAPSHOT_TIMEOUT_S = 20.0
FETCH_TIMEOUT_S = 60.0
# a dump is the last TORCH_NCCL_TRACE_BUFFER_SIZE entries with their frames: a few MB; past this it is
# not sent through one SSH capture (16 MiB of base64), the operator copies it and uses --dumps
MAX_FETCH_BYTES = 10 * 1024 * 1024
MAX_LOCAL_DUMP_BYTES = 256 * 1024 * 1024
MAX_DUMPS_PER_NODE = 256  # a prefix shared with other jobs' files must not fetch thousands


@dataclass(frozen=True)
class Where:
    """How forensics finds the job's processes on a node."""

    mode: str  # "match": pgrep -f pattern; "slurm": SLURM_JOB_ID in their environment
    what: str  # the pattern or the job id
    log: str | None = None  # the job's log on each node ({node} replaced)
    dump_prefix: str | None = None  # an extra flight-recorder prefix to list
    user: str = ""  # the job's user, who reads its log (probe.py SNAPSHOT_SCRIPT); "" not known


@dataclass(frozen=True)
class DumpRead:
    node: str  # "" when read from --dumps without a node directory
    path: str
    data: bytes | None
    note: str = ""  # why it was not read, or what to know about it


@dataclass
class Gathered:
    nodes: list[str]
    snapshots: dict[str, NodeSnapshot] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)  # node -> why it has no snapshot
    kernel: dict[str, Capture] = field(default_factory=dict)
    processes: list[RankProcess] = field(default_factory=list)
    stack_results: dict[tuple[str, int], StackResult] = field(default_factory=dict)
    stack_failures: dict[str, str] = field(default_factory=dict)  # node -> why no stack was taken there
    pyspy: dict[str, str | None] = field(default_factory=dict)  # node -> py-spy version (None: missing)
    dumps: list[DumpRead] = field(default_factory=list)
    captures: list[Capture] = field(default_factory=list)
    incomplete: str = ""


def gather(
    transport,
    nodes: Sequence[Node],
    where: Where,
    *,
    fanout: int,
    deadline: float,
    stack_timeout_s: float,
    native: bool,
    pyspy: str | None,
    fetch: bool,
    stop: threading.Event | None = None,
    progress: RunProgress = NULL_PROGRESS,
) -> Gathered:
    from nodecheck.transport.fanout import run_probes

    out = Gathered([n.name for n in nodes])
    first = {
        n: [
            snapshot_probe(
                where.mode,
                where.what,
                n.name,
                _for_node(where.log, n.name),
                where.dump_prefix,
                SNAPSHOT_TIMEOUT_S,
                where.user,
            ),
            KERNEL_LOG,
        ]
        for n in nodes
    }
    progress.steps(2)  # a person watching sees "collect", then "stacks" where a node has any
    progress.phase("collect", len(first))
    done = run_probes(transport, first, fanout=fanout, deadline=deadline, stop=stop, progress=progress)
    out.incomplete = done.incomplete
    for n in nodes:
        snap = done.captures[(n.name, first[n][0].name)]
        out.captures.append(_redacted(snap))
        out.kernel[n.name] = done.captures[(n.name, KERNEL_LOG.name)]
        out.captures.append(out.kernel[n.name])
        _read_snapshot(out, n.name, snap)
    second = {}
    wanted: dict[str, list[int]] = {}
    for p in targets(out.processes):
        wanted.setdefault(p.node, []).append(p.pid)
    for n in nodes:
        probes = []
        snapshot = out.snapshots.get(n.name)
        if snapshot is None:
            continue
        pids = wanted.get(n.name, [])
        if pids:
            probes.append(stacks_probe(pids, stack_timeout_s, native, pyspy))
        if fetch:
            probes += [
                fetch_probe(k, d.path, d.owner, MAX_FETCH_BYTES, FETCH_TIMEOUT_S)
                for k, d in enumerate(snapshot.dumps[:MAX_DUMPS_PER_NODE])
            ]
        if probes:
            second[n] = probes
    if second and not (stop is not None and stop.is_set()):
        progress.phase("stacks", len(second))
        done = run_probes(transport, second, fanout=fanout, deadline=deadline, stop=stop, progress=progress)
        out.incomplete = out.incomplete or done.incomplete
        for n, probes in second.items():
            for probe in probes:
                c = done.captures[(n.name, probe.name)]
                if probe.name.startswith(FETCH_PREFIX):
                    path = out.snapshots[n.name].dumps[int(probe.name[len(FETCH_PREFIX) :])].path
                    out.dumps.append(_read_fetch(n.name, path, c))
                else:
                    c = _redacted(c)  # py-spy prints each rank's command line
                    out.captures.append(c)
                    _read_stacks(out, n.name, c)
    return out


def _redacted(c: Capture) -> Capture:
    """A capture as the record may keep it: secrets in command lines and log lines masked
    (a rank started with --hf-token X or WANDB_API_KEY=X on its command line)."""
    return replace(c, stdout=redact_text(c.stdout), stderr=redact_text(c.stderr))


def _for_node(log: str | None, node: str) -> str | None:
    return log.replace("{node}", node) if log else None


def _targets(processes: Sequence[RankProcess]) -> list[RankProcess]:
    """Whose stack is taken: the ranks; on a node where no process has a rank (a launcher that does
    not set RANK), every matched process."""
    ranked = [p for p in processes if p.rank is not None]
    return ranked or list(processes)


def targets(processes: Sequence[RankProcess]) -> list[RankProcess]:
    """_targets over every node: per node, its ranks, else all of its processes."""
    by_node: dict[str, list[RankProcess]] = {}
    for p in processes:
        by_node.setdefault(p.node, []).append(p)
    return [p for node in sorted(by_node) for p in _targets(by_node[node])]


def _read_snapshot(out: Gathered, node: str, c: Capture) -> None:
    if c.outcome is not Outcome.EXITED:
        out.failures[node] = one_line(f"{c.outcome.value}: {c.detail or c.stderr.strip()}")
        return
    try:
        snap = parse_snapshot(c.stdout)
    except ParseError as e:
        out.failures[node] = one_line(
            redact_text(f"unreadable snapshot (exit {c.exit_code}): {e.reason}; output {e.excerpt[:200]!r}")
        )
        return
    snap = replace(snap, nccl_warns=tuple(redact_text(w) for w in snap.nccl_warns))
    out.snapshots[node] = snap
    out.processes += rank_processes(node, snap.processes)  # their command lines redacted
    # files the listing would not read (a symbolic link, another user's file): said, never fetched
    out.dumps += [DumpRead(node, path, None, f"refused: {why}") for path, why in snap.refused]


def _read_stacks(out: Gathered, node: str, c: Capture) -> None:
    if c.outcome is not Outcome.EXITED:
        out.stack_failures[node] = one_line(f"the stacks probe {c.outcome.value}: {c.detail or c.stderr.strip()}")
        return
    try:
        parsed = parse_stacks(c.stdout)
    except ParseError as e:
        out.stack_failures[node] = one_line(f"unreadable stacks probe output (exit {c.exit_code}): {e.reason}")
        return
    out.pyspy[node] = parsed.pyspy
    if parsed.pyspy is None:
        out.stack_failures[node] = "py-spy is not installed on the node (pip install py-spy)"
    for pid, result in parsed.results.items():
        out.stack_results[(node, pid)] = result


def _read_fetch(node: str, path: str, c: Capture) -> DumpRead:
    if c.outcome is not Outcome.EXITED or c.exit_code != 0:
        return DumpRead(
            node,
            path,
            None,
            one_line(f"not fetched: {c.outcome.value} (exit {c.exit_code}): {c.detail or c.stderr.strip()}"),
        )
    try:
        fetched = parse_fetch(c.stdout, MAX_FETCH_BYTES)
    except ParseError as e:
        return DumpRead(node, path, None, f"not fetched: {e.reason}")
    if fetched.refused:
        return DumpRead(node, path, None, fetched.note)
    if fetched.data is None:
        size = f" ({fetched.size} bytes; copy it and pass --dumps)" if fetched.size else ""
        return DumpRead(node, path, None, f"not fetched: {fetched.note}{size}")
    return DumpRead(node, path, fetched.data, fetched.note)


def read_local_dumps(directory: str) -> list[DumpRead]:
    """--dumps DIR: every regular file in DIR (node "") and in DIR/<node>/ (that node), not deeper. A
    symbolic link is listed, never followed (a link out of DIR would copy whatever it names into the
    record), and so is a file past MAX_LOCAL_DUMP_BYTES; each file is opened once (O_NOFOLLOW) and
    checked as opened."""
    found: list[DumpRead] = []
    top = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)  # DIR itself is the operator's choice
    try:
        for name in sorted(os.listdir(top)):
            kind = _kind(top, name)
            if kind == "directory":
                found += _node_dir(top, name, Path(directory) / name)
            elif kind is not None:
                found.append(_local("", top, name, Path(directory) / name, kind))
    finally:
        os.close(top)
    return found


def _node_dir(top: int, name: str, path: Path) -> list[DumpRead]:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=top)
    except OSError as e:
        return [DumpRead(name, str(path), None, f"not read: {e.strerror or e}")]
    try:
        return [
            _local(name, fd, f, path / f, kind)
            for f in sorted(os.listdir(fd))
            if (kind := _kind(fd, f)) not in (None, "directory")
        ]
    finally:
        os.close(fd)


def _kind(fd: int, name: str) -> str | None:
    """ "file", "directory", "link", "other"; None when it is gone."""
    try:
        mode = os.lstat(name, dir_fd=fd).st_mode
    except OSError:
        return None
    return (
        "link"
        if stat.S_ISLNK(mode)
        else "directory"
        if stat.S_ISDIR(mode)
        else "file"
        if stat.S_ISREG(mode)
        else "other"
    )


def _local(node: str, dir_fd: int, name: str, path: Path, kind: str) -> DumpRead:
    if kind == "link":
        return DumpRead(node, str(path), None, "not read: a symbolic link, not followed")
    if kind != "file":
        return DumpRead(node, str(path), None, "not read: not a regular file")
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY, dir_fd=dir_fd)
    except OSError as e:
        return DumpRead(node, str(path), None, f"not read: {e.strerror or e}")
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return DumpRead(node, str(path), None, "not read: not a regular file")
        if st.st_size > MAX_LOCAL_DUMP_BYTES:
            return DumpRead(node, str(path), None, f"not read: {st.st_size} bytes, more than {MAX_LOCAL_DUMP_BYTES}")
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(MAX_LOCAL_DUMP_BYTES + 1)
        if len(data) > MAX_LOCAL_DUMP_BYTES:
            return DumpRead(node, str(path), None, f"not read: it grew past {MAX_LOCAL_DUMP_BYTES} bytes while read")
        return DumpRead(node, str(path), data)
    except OSError as e:
        return DumpRead(node, str(path), None, f"not read: {e.strerror or e}")
    finally:
        os.close(fd)
