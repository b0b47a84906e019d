"""Parse one `nodecheck watch` sample of a node, and read the job's progress from its log tail.

The probe (nodecheck/watch/probe.py) prints, in one round trip, sections framed as in sections.py:
    clock      `date +%s.%N`: the node's clock
    gpus       nvidia-smi --query-gpu=index,utilization.gpu,power.draw,power.limit,memory.used,memory.total
               --format=csv,noheader,nounits
    procs      the job's processes: "PID PPID STAT ELAPSED_S ARGS" (ps), the probe itself excluded
    log_stat   the log's size (bytes) and mtime (epoch seconds)
    heartbeat  the heartbeat file's mtime
    log_tail   the log's last TAIL_BYTES bytes; always the LAST section, read by its position (from
               its begin line to the final end line) so a log line that looks like a marker cannot
               end it early; the probe adds one newline before the end line, removed here.
A section the watcher did not ask for is a fact line (`@@nodecheck log unwatched`). A node without
nvidia-smi, log or heartbeat is a condition of that section (its rc and error line), not a failed
sample; only output without a readable clock (not the probe's output at all) is a ParseError.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.parsers.nvidia_smi_csv import parse_query_gpu
from nodecheck.parsers.sections import split_sections

TOOL = "watch sample"
TAIL_BYTES = 64 * 1024
# the regexes see at most this much of a line: a progress line is a few hundred characters, and the
# users' regexes (".*step (?P<step>\d+)") are quadratic on a 64 KiB line of binary or a printed tensor
LINE_CHARS = 2048
GPU_FIELDS: tuple[str, ...] = ("index", "utilization.gpu", "power.draw", "power.limit", "memory.used", "memory.total")

_TAIL_BEGIN = "@@nodecheck begin log_tail\n"
_TAIL_END = re.compile(r"\n@@nodecheck end log_tail rc=(\d+)\n?\Z")
_NUMBER = re.compile(r"(-?\d+(?:\.\d+)?)(?: ?(?:%|W|MiB))?", re.ASCII)
_PROC = re.compile(r"\s*(\d+)\s+(\d+)\s+(\S+)\s+(\d+)\s+(.*)", re.ASCII)
_CLOCK = re.compile(r"\d+(?:\.\d+)?", re.ASCII)
_DIGITS = re.compile(r"\d+", re.ASCII)


@dataclass(frozen=True)
class GpuSample:
    index: int
    util_pct: float | None
    power_w: float | None
    power_limit_w: float | None
    mem_used_mib: float | None
    mem_total_mib: float | None


@dataclass(frozen=True)
class Proc:
    pid: int
    state: str  # ps STAT: "Sl", "R+", "Z" (a zombie is gone, not running)
    elapsed_s: int | None
    args: str
    ppid: int | None = None

    @property
    def alive(self) -> bool:
        return not self.state.startswith(("Z", "X"))


@dataclass(frozen=True)
class NodeSample:
    clock: float  # the node's clock (epoch s) when sampled
    gpus: tuple[GpuSample, ...]
    gpu_error: str  # "" when nvidia-smi answered; else its error line
    processes: tuple[Proc, ...]
    log_size: int | None
    log_mtime: float | None
    log_tail: str  # whole lines only: a line cut by the 64 KiB window is dropped
    log_error: str
    heartbeat_mtime: float | None
    heartbeat_error: str
    procs_error: str = ""  # pgrep/ps failed: the processes are unknown, not absent
    procs_watched: bool = True  # False: no --match, processes not sampled
    log_watched: bool = True
    heartbeat_watched: bool = True

    @property
    def processes_known(self) -> bool:
        return self.procs_watched and not self.procs_error

    @property
    def alive(self) -> tuple[Proc, ...]:
        return tuple(p for p in self.processes if p.alive)


@dataclass(frozen=True)
class ProgressReading:
    step: int | None  # the last step the log shows
    throughput: float | None  # from the last line that carried one
    rank_seconds: Mapping[int, float]  # rank -> step time from that rank's LAST line
    done: bool  # done_regex matched at or after the last step line
    checkpointing: bool  # checkpoint_regex matched at or after the last step line
    last_line: str  # the last non-empty line (for messages)
    step_line: str = ""  # the line the step came from


def parse_sample(text: str) -> NodeSample:
    head, tail, tail_rc = _split_tail(text)
    parts = split_sections(head, TOOL)
    clock = _clock(parts.require("clock", TOOL).text, text)

    gpus, gpu_error = read_gpus(parts.get("gpus"))
    processes, procs_error, procs_watched = _procs(parts, text)

    log_watched = parts.facts.get("log") != "unwatched"
    log_size = log_mtime = None
    log_error = ""
    log_tail = ""
    if log_watched:
        stat = parts.get("log_stat")
        if stat is None:
            log_error = "no log_stat section (output cut off)"
        elif stat.rc != 0:
            log_error = _first_line(stat.text) or f"stat exited {stat.rc}"
        else:
            log_size, log_mtime = _log_stat(stat.text, text)
        if tail is None:
            log_error = log_error or "no log tail (output cut off)"
        elif tail_rc is not None and tail_rc != 0:
            log_error = log_error or _first_line(tail) or f"tail exited {tail_rc}"
        elif not log_error:
            log_tail = _whole_lines(tail, log_size, cut_off=tail_rc is None)

    heartbeat_watched = parts.facts.get("heartbeat") != "unwatched"
    heartbeat_mtime = None
    heartbeat_error = ""
    if heartbeat_watched:
        beat = parts.get("heartbeat")
        if beat is None:
            heartbeat_error = "no heartbeat section (output cut off)"
        elif beat.rc != 0:
            heartbeat_error = _first_line(beat.text) or f"date -r exited {beat.rc}"
        else:
            heartbeat_mtime = _clock(beat.text, text, what="heartbeat mtime")

    return NodeSample(
        clock=clock,
        gpus=gpus,
        gpu_error=gpu_error,
        processes=processes,
        log_size=log_size,
        log_mtime=log_mtime,
        log_tail=log_tail,
        log_error=log_error,
        heartbeat_mtime=heartbeat_mtime,
        heartbeat_error=heartbeat_error,
        procs_error=procs_error,
        procs_watched=procs_watched,
        log_watched=log_watched,
        heartbeat_watched=heartbeat_watched,
    )


def _split_tail(text: str) -> tuple[str, str | None, int | None]:
    """(everything before the log tail, the tail or None when absent, its rc or None when cut off)."""
    if text.startswith(_TAIL_BEGIN):
        at = 0
    else:
        at = text.find("\n" + _TAIL_BEGIN)
        if at < 0:
            return text, None, None
        at += 1
    head, rest = text[:at], text[at + len(_TAIL_BEGIN) :]
    end = _TAIL_END.search(rest)
    if end is None:
        return head, rest, None
    return head, rest[: end.start()], int(end.group(1))


def _whole_lines(tail: str, size: int | None, *, cut_off: bool) -> str:
    """The tail without a first line the window cut (the file is longer than the window) and
    without a last line the output cut (a timeout in mid-transfer)."""
    if size is not None and size > TAIL_BYTES:
        _, newline, tail = tail.partition("\n")
        if not newline:
            return ""
    if cut_off:
        tail = tail[: tail.rfind("\n") + 1]
    return tail


def _clock(section: str, text: str, what: str = "clock") -> float:
    value = section.strip()
    if not _CLOCK.fullmatch(value):
        raise ParseError(TOOL, f"{what} {value[:60]!r} is not epoch seconds", text)
    return float(value)


def _log_stat(section: str, text: str) -> tuple[int, float]:
    lines = section.split()
    if len(lines) != 2 or not lines[0].isdigit() or not _CLOCK.fullmatch(lines[1]):
        raise ParseError(TOOL, f"log_stat {section.strip()[:60]!r} is not 'SIZE\\nMTIME'", text)
    return int(lines[0]), float(lines[1])


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def read_gpus(section) -> tuple[tuple[GpuSample, ...], str]:
    """GPU readings, or the reason there are none. nvidia-smi missing, failing or printing something
    unreadable is reported on the node (gpu_error), never taken for "no GPUs"."""
    if section is None:
        return (), "no gpus section (output cut off)"
    if section.rc != 0:
        return (), _first_line(section.text) or f"nvidia-smi exited {section.rc}"
    try:
        rows = parse_query_gpu(section.text, GPU_FIELDS)
        gpus = tuple(_gpu(position, row) for position, row in enumerate(rows))
    except ParseError as e:
        return (), f"unreadable nvidia-smi output: {e.reason}"
    indexes = [g.index for g in gpus]
    if len(set(indexes)) != len(indexes):
        return (), "unreadable nvidia-smi output: a GPU index appears twice"
    return gpus, ""


def _gpu(position: int, row: Mapping[str, str | None]) -> GpuSample:
    index = _number(row, "index")
    return GpuSample(
        index=int(index) if index is not None else position,
        util_pct=_number(row, "utilization.gpu"),
        power_w=_number(row, "power.draw"),
        power_limit_w=_number(row, "power.limit"),
        mem_used_mib=_number(row, "memory.used"),
        mem_total_mib=_number(row, "memory.total"),
    )


def _number(row: Mapping[str, str | None], name: str) -> float | None:
    value = row.get(name)
    if value is None:
        return None
    match = _NUMBER.fullmatch(value)
    if not match:
        raise ParseError("nvidia-smi --query-gpu", f"{name} {value[:60]!r} is not a number", value)
    return float(match.group(1))


def _procs(parts, text: str) -> tuple[tuple[Proc, ...], str, bool]:
    if parts.facts.get("procs") == "unwatched":
        return (), "", False
    section = parts.get("procs")
    if section is None:
        return (), "no procs section (output cut off)", True
    if section.rc != 0:
        return (), _first_line(section.text) or f"pgrep exited {section.rc}", True
    return read_procs(section.text, TOOL, text), "", True


def read_procs(lines: str, tool: str, text: str) -> tuple[Proc, ...]:
    """`ps -o pid=,ppid=,stat=,etimes=,args=` lines -> Procs; ParseError (with `text`) for any other line."""
    procs = []
    for line in lines.splitlines():
        if not line.strip():
            continue
        match = _PROC.fullmatch(line)
        if not match:
            raise ParseError(tool, f"process line {line[:80]!r} is not 'PID PPID STAT ELAPSED ARGS'", text)
        pid, ppid, state, elapsed, args = match.groups()
        procs.append(Proc(pid=int(pid), state=state, elapsed_s=int(elapsed), args=args, ppid=int(ppid)))
    return tuple(procs)


# == progress from the log tail ===================================================================


def read_progress(log_tail: str, src) -> ProgressReading:
    """The job's progress from its log tail, by the regexes of `src` (a watch.config.ProgressSource):
    the LAST match of each; per-rank times from each rank's last line; each line cut at LINE_CHARS.
    A regex group that does not hold a number raises ParseError with the line (the regex is wrong,
    not the job)."""
    step_re, tput_re, rank_re = (
        src.compiled("step_regex"),
        src.compiled("throughput_regex"),
        src.compiled("rank_time_regex"),
    )
    done_re, ckpt_re = src.compiled("done_regex"), src.compiled("checkpoint_regex")
    lines = [line[:LINE_CHARS] for line in log_tail.splitlines()]
    step = throughput = None
    step_at = done_at = ckpt_at = -1
    step_line = last_line = ""
    rank_seconds: dict[int, float] = {}
    for at in range(len(lines) - 1, -1, -1):
        line = lines[at]
        if not last_line and line.strip():
            last_line = line.strip()
        if step is None and (m := _last(step_re, line)):
            step, step_at, step_line = _int(m.group("step"), "step", line), at, line.strip()
        if throughput is None and tput_re is not None and (m := _last(tput_re, line)):
            throughput = _float(m.group("throughput"), "throughput", line)
        if done_at < 0 and done_re is not None and done_re.search(line):
            done_at = at
        if ckpt_at < 0 and ckpt_re is not None and ckpt_re.search(line):
            ckpt_at = at
        if rank_re is not None:
            for m in rank_re.finditer(line):
                rank = _int(m.group("rank"), "rank", line)
                if rank not in rank_seconds:  # walking backwards: the first seen is the last line
                    rank_seconds[rank] = _float(m.group("seconds"), "seconds", line)
    return ProgressReading(
        step=step,
        throughput=throughput,
        rank_seconds=dict(sorted(rank_seconds.items())),
        done=done_at >= 0 and done_at >= step_at,
        checkpointing=ckpt_at >= 0 and ckpt_at >= step_at,
        last_line=last_line[:300],
        step_line=step_line[:300],
    )


def _last(pattern: re.Pattern, line: str) -> re.Match | None:
    found = None
    for found in pattern.finditer(line):  # noqa: B007 - keeps the last match
        pass
    return found


def _int(value: str | None, what: str, line: str) -> int:
    text = (value or "").replace(",", "").strip()
    if not _DIGITS.fullmatch(text):
        raise ParseError("watch log", f"the {what} group captured {value!r}, not a whole number", line)
    return int(text)


def _float(value: str | None, what: str, line: str) -> float:
    text = (value or "").replace(",", "").strip()
    try:
        number = float(text)
    except ValueError:
        raise ParseError("watch log", f"the {what} group captured {value!r}, not a number", line) from None
    if number != number or number in (float("inf"), float("-inf")):
        raise ParseError("watch log", f"the {what} group captured {value!r}, not a finite number", line)
    return number
