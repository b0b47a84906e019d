"""nccl-tests' text output (all_reduce_perf, all_gather_perf, ...) in, an NcclTestRun out.

Formats read: every layout nccl-tests has printed since the NCCL 1 era (NVIDIA/nccl-tests
src/common.cu, src/util.cu), interleaved NCCL_DEBUG lines, the failure lines of common.h's
CUDACHECK/NCCLCHECK/TESTCHECK macros, Open MPI and srun abort messages. The facts are in
nccl_tests_facts.py, the `-J file.json` report's reader in nccl_tests_json.py.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from nodecheck.core.errors import ParseError
from nodecheck.core.model import quote
from nodecheck.parsers.lines import split_lines
from nodecheck.parsers.nccl_tests_facts import (
    NOT_FINITE,
    TOOL,
    TWO_RUNS,
    Failure,
    Measurement,
    NcclLogLine,
    NcclTestRun,
    RankDevice,
    SizeRow,
    TestParams,
    Unreadable,
    avg_busbw_failure,
    int_or_none,
    out_of_bounds_failure,
)

UNKNOWN_MAX = 50  # lines kept in NcclTestRun.unknown; the rest are counted
# NCCL INFO lines kept in NcclTestRun.log (WARN and ERROR lines are all kept): NCCL_DEBUG=INFO from
# thousands of ranks is millions of lines, and memory must not grow with them; the rest are counted
INFO_MAX = 2000


# re.ASCII where numbers are read: a str pattern's \d also matches other scripts' digits.
_LOG = re.compile(
    r"(?P<host>[^\s:]*):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] "
    r"(?:(?P<loc>\S+:\d+) )?NCCL (?P<level>INFO|WARN|ERROR|TRACE|ABORT)(?: (?P<text>.*))?",
    re.ASCII,
)
_VERSION = re.compile(r"NCCL version (\S+).*")
_TESTS_VERSION = re.compile(r"nccl-tests version (\S+)(?: nccl-headers=(\d+))?(?: nccl-library=(\d+))?.*", re.ASCII)
_COMPILED = re.compile(r"NCCL Tests compiled with NCCL (\S+).*")
_COLLECTIVE = re.compile(r"Collective test (starting|concluded): *(\S*).*")
_PARAMS = re.compile(r"#?\s*nThread\s+\d", re.ASCII)
_RANK = re.compile(
    r"Rank\s+(?P<rank>\d+)(?:\s+Group\s+(?P<group>\d+))?(?:\s+Pid\s+(?P<pid>\d+))?"
    r"\s+on\s+(?P<host>\S+)\s+device\s+(?P<device>\d+)\s+\[(?P<bus>[^\]]*)\]\s*(?P<model>.*)",
    re.ASCII,
)
# Linear time on any line: no two adjacent quantifiers may take the same characters (`\s*(OK)?\s*`
# tried every split of a run of spaces, `.*?` before `\s*` rescanned the rest at every step), so
# the optional verdict word needs the whitespace before it, and a lazy tail is cut in code instead.
_OUT_OF_BOUNDS = re.compile(r"Out of bounds values\s*:\s*(\d+)(?:\s+(OK|FAILED))?\s*", re.ASCII)
_AVG_BUSBW = re.compile(r"Avg bus bandwidth\s*:\s*(\S+)(?:\s+(OK|FAILED))?\s*")
_BITWISE = re.compile(r"Bitwise mismatches\s*:\s*(\d+)(?:\s+(OK|FAILED))?\s*", re.ASCII)
_REDUCED = re.compile(r"Reducing maxBytes to (\d+) due to memory limitation.*", re.ASCII)
_JSON_OUTPUT = re.compile(r"Writing JSON output to (.+)")
_LAST_ERROR = re.compile(r"error: (.*)")
# comment lines nccl-tests prints that carry nothing the checks use
_QUIET_COMMENTS = (
    "Using devices",
    "Blocking Enabled",
    "Per-Iteration Report",
    "Parallel Init Enabled",
    "Bitwise Repeatability",
    "Bitwise mismatch (",
    "Testing ",
    "GPU memory usage",
    "skipping json output",
    "Writing results to file",
)
_ROW_START = re.compile(r"\s*\d+\s+\d+\s+[A-Za-z_]\w*(?:\s|$)", re.ASCII)
_INT = re.compile(r"-?\d+", re.ASCII)
_WORD = re.compile(r"[A-Za-z_]\w*", re.ASCII)
_DATE = re.compile(r"\d{4}-\d\d-\d\d", re.ASCII)
_CLOCK = re.compile(r"\d\d:\d\d:\d\d", re.ASCII)
_TIME_COLUMNS = ("time", "cputime")
_PREFIX_NAMES = {
    "size": "size",
    "bytes": "size",
    "count": "count",
    "N": "count",
    "type": "type",
    "redop": "redop",
    "op": "redop",
    "root": "root",
}
_BODY_WIDTHS = (8, 10, 16, 18)  # plain, + #bitdiff, + per-iteration stats, + both

# common.h: CUDACHECK / NCCLCHECK ('%s: Test NCCL failure %s:%d '%s / %s''), the NCCL 1 era's
# 'NCCL failure f:l 'x'' and 'Cuda failure f:l 'x''; the reason's closing quote may be cut off
# (_quoted drops it: a lazy group before `'?\s*` here was quadratic in a long reason)
_CALL_FAILURE = re.compile(
    r"(?:(?P<host>\S+?): )?(?:Test )?(?P<what>NCCL|CUDA|Cuda) failure "
    r"(?P<loc>\S+:\d+) '(?P<msg>.*)",
    re.ASCII,
)
# TESTCHECK's trace, one line per frame: ' .. host pid 123: Test failure common.cu:844'
_STACK = re.compile(r"\s*\.\. (?P<host>\S+?)(?: pid (?P<pid>\d+))?: Test failure (?P<loc>\S+:\d+)\s*", re.ASCII)
_TIMEOUT = re.compile(r"(?:(?P<host>\S+?): )?Test timeout \((?P<secs>\d+)s\) (?P<loc>\S+:\d+)\s*", re.ASCII)
_TEST_FAILED = re.compile(r"(?:(?P<host>\S+?): )?Test FAIL(?:URE|ED)\b.*")
_MPI_RETURNED = re.compile(r"Primary job\s+terminated normally, but (\d+) process(?:es)? returned.*", re.ASCII)
_MPI_DETECTED = re.compile(r"mpirun detected that one or more processes exited with non-zero status.*")
_MPI_SIGNAL = re.compile(
    r"mpirun noticed that process rank (\d+) with PID (\d+) on node (\S+) "
    r"exited on signal (\d+)(?: \(([^)]*)\))?.*",
    re.ASCII,
)
_MPI_IMPROPER = re.compile(
    r"mpirun has exited due to process rank (\d+) with PID (\d+) on\s*node (\S+) "
    r"exiting improperly.*",
    re.ASCII,
)
_MPI_DETECTED_WORDS = "mpirun: a process exited with non-zero status"
_MPI_DETAIL = re.compile(r"(Process name|Exit code):\s*(.*)")
_MPI_DETAIL_KEYS = {"Process name": "process", "Exit code": "exit code"}
_MPI_FILLER = re.compile(
    r"-{3,}|a non-zero exit code\. Per user-direction.*|"
    r"the job to be terminated\. The first process to do so was:.*"
)
_SRUN_TASK = re.compile(r"srun: error: (?P<host>[^:\s]+): tasks? (?P<tasks>[\d,\-\[\]]+): (?P<what>.+)")
_SRUN = re.compile(r"srun: (?:error: )?(?P<what>.+)")
# the reason (" DUE TO TIME LIMIT") runs to the closing ***: found by _stepd_reason, not a lazy group
_STEPD = re.compile(
    r"slurmstepd(?:-\S+)?: error: \*\*\* (?:JOB|STEP) (?P<id>\S+) ON (?P<host>\S+) "
    r"CANCELLED AT (?P<at>[^\s*]+)(?P<rest>.*)"
)


@dataclass(frozen=True)
class _Layout:
    """Where a data row's values are: the prefix columns, then one group per half."""

    prefix: tuple[str, ...]  # canonical: size count type [redop] [root]
    halves: tuple[tuple[str, ...], ...]  # per half: time algbw busbw <check> [extra columns]

    @property
    def width(self) -> int:
        return len(self.prefix) + sum(len(half) for half in self.halves)


class _NonFinite(Exception):
    """nan or inf where nccl-tests prints a measurement: not a ValueError, so no caller takes the
    line for an unknown one and judges the others."""


class _NotJudgeable(Exception):
    """Output that parses but must not be judged (two runs in one, a NaN measurement); the whole
    parse becomes a ParseError carrying `lines` as its excerpt."""

    def __init__(self, reason: str, lines: str) -> None:
        super().__init__(reason)
        self.reason, self.lines = reason, lines


def parse_nccl_tests(text: str) -> NcclTestRun:
    """Raises ParseError (with the excerpt) when the text is not nccl-tests output at all, or is
    output that must not be judged: two runs in one (a rank listed twice), a measurement printed as
    nan or inf."""
    lines = split_lines(text)
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    reader = _TextReader()
    try:
        for index, line in enumerate(lines):
            reader.feed(index + 1, line.rstrip(), at_end=index == last)
    except _NotJudgeable as why:
        raise ParseError(TOOL, why.reason, why.lines) from None
    if not reader.recognised:
        first = next((line.strip() for line in lines if line.strip()), "")
        reason = (
            "empty output"
            if not first
            else f"no nccl-tests line (parameter line, rank line, data row, failure or NCCL version); "
            f"first line {quote(first)}"
        )
        raise NoNcclTestsOutput(TOOL, reason, text)
    return reader.build()


class NoNcclTestsOutput(ParseError):
    """Not one nccl-tests line (empty output, or only a launcher's or a shell's words): nothing ran
    that can be judged, unlike nccl-tests lines that cannot be judged as one run."""


class _TextReader:
    """One pass over the lines; state is what has been seen so far."""

    def __init__(self) -> None:
        self.fields: dict[str, Any] = {}
        self.params: TestParams | None = None
        self.devices: list[RankDevice] = []
        self.versions: dict[str, None] = {}  # dicts: a membership test per line stays O(1)
        self.rank_lines: dict[int, tuple[str, str]] = {}  # rank -> (host, its line)
        self.layout: _Layout | None = None
        self.columns: tuple[str, ...] = ()
        self.rows: list[SizeRow] = []
        self.log: list[NcclLogLine] = []
        self.log_count = 0
        self.info_kept = 0
        self.version_hosts: dict[str, dict[str, None]] = {}
        self.failures: list[Failure] = []
        self.unknown: list[str] = []
        self.unknown_count = 0
        self.mpirun_detected: int | None = None  # index in failures of 'mpirun detected ...'
        self.mpirun_details: dict[str, str] = {}
        self.line = ""  # the line being read, stripped

    @property
    def recognised(self) -> bool:
        return bool(self.params or self.devices or self.rows or self.failures or self.versions)

    def build(self) -> NcclTestRun:
        return NcclTestRun(
            params=self.params,
            devices=tuple(self.devices),
            nccl_version=next(iter(self.versions), None),
            nccl_versions=tuple(self.versions),
            columns=self.columns,
            rows=tuple(self.rows),
            log=tuple(self.log),
            failures=tuple(self.failures),
            unknown=tuple(self.unknown),
            unknown_count=self.unknown_count,
            log_count=self.log_count,
            nccl_version_hosts=tuple((v, tuple(h)) for v, h in self.version_hosts.items()),
            **self.fields,
        )

    def feed(self, number: int, line: str, *, at_end: bool) -> None:
        stripped = self.line = line.strip()
        if not stripped:
            return
        if " NCCL " in line and self._log_line(stripped):
            return
        if stripped.startswith("#"):
            understood = self._comment(stripped, stripped[1:].strip())
        elif _PARAMS.match(stripped):  # the NCCL 1 era printed it without '#'
            understood = self._params(stripped)
        elif version := _VERSION.fullmatch(stripped):
            understood = self._version(version[1])
        elif _ROW_START.match(line):
            understood = self._row(number, line, at_end)
        else:
            understood = self._failure(stripped) or self._launcher(stripped)
            if not understood and at_end and _INT.match(stripped):
                self.fields["cut_row"] = line  # cut before the row's type column
        if not understood:
            self._unknown(line)

    def _unknown(self, line: str) -> None:
        self.unknown_count += 1
        if len(self.unknown) < UNKNOWN_MAX:
            self.unknown.append(line)

    def _version(self, version: str) -> bool:
        self.versions.setdefault(version)
        return True

    def _log_line(self, line: str) -> bool:
        match = _LOG.fullmatch(line)
        if not match:
            return False
        text = match["text"] or ""
        self.log_count += 1
        if match["level"] not in ("INFO", "TRACE") or self.info_kept < INFO_MAX:
            self.info_kept += match["level"] in ("INFO", "TRACE")
            self.log.append(
                NcclLogLine(match["host"], int(match["pid"]), int(match["dev"]), match["level"], text, match["loc"])
            )
        version = _VERSION.fullmatch(text)
        if version:
            self._version(version[1])
            self.version_hosts.setdefault(version[1], {}).setdefault(match["host"])
        return True

    # -- '#' lines ----------------------------------------------------------------------------

    def _comment(self, line: str, body: str) -> bool:
        if not body or body.startswith(_QUIET_COMMENTS):
            return True
        if body.startswith("nThread"):
            return self._params(line)
        if body.startswith("Rank"):
            return self._rank(body)
        for pattern, handler in self._COMMENT_HANDLERS:
            match = pattern.fullmatch(body)
            if match:
                return handler(self, match)
        return self._table_header(body)

    def _tests_version(self, match: re.Match) -> bool:
        self.fields.update(
            tests_version=match[1], nccl_headers=int_or_none(match[2]), nccl_library=int_or_none(match[3])
        )
        return True

    def _compiled(self, match: re.Match) -> bool:
        self.fields["compiled_with_nccl"] = match[1]
        return True

    def _collective(self, match: re.Match) -> bool:
        if match[2]:
            self.fields["collective"] = match[2]
        if match[1] == "concluded":
            self.fields["concluded"] = True
        return True

    def _out_of_bounds(self, match: re.Match) -> bool:
        count = int(match[1])
        ok = None if match[2] is None else match[2] == "OK"
        self.fields.update(out_of_bounds=count, out_of_bounds_ok=ok if ok is not None else count == 0)
        if count or ok is False:
            self.failures.append(out_of_bounds_failure(count, self.line))
        return True

    def _avg_busbw(self, match: re.Match) -> bool:
        try:
            value = _float(match[1])
        except Unreadable:
            return False
        except _NonFinite:  # nccl-tests averages zero rows to nan (0/0)
            raise _NotJudgeable(f"Avg bus bandwidth {match[1]}: {NOT_FINITE}", self.line) from None
        ok = None if match[2] is None else match[2] == "OK"
        self.fields.update(avg_busbw_gbs=value, avg_busbw_ok=ok)
        if ok is False:
            self.failures.append(avg_busbw_failure(value, self.line))
        return True

    def _bitwise(self, match: re.Match) -> bool:
        self.fields["bitwise_mismatches"] = int(match[1])
        if int(match[1]):
            self.failures.append(
                Failure("test", f"{match[1]} bitwise mismatches between repeated runs", line=self.line)
            )
        return True

    def _reduced(self, match: re.Match) -> bool:
        self.fields["max_bytes_reduced_to"] = int(match[1])
        return True

    def _json_output(self, match: re.Match) -> bool:
        self.fields["json_output"] = match[1].strip()
        return True

    def _last_error(self, match: re.Match) -> bool:
        self.fields["nccl_last_error"] = match[1].strip()
        return True

    _COMMENT_HANDLERS: tuple[tuple[re.Pattern, Callable[[_TextReader, re.Match], bool]], ...] = (
        (_TESTS_VERSION, _tests_version),
        (_COMPILED, _compiled),
        (_COLLECTIVE, _collective),
        (_OUT_OF_BOUNDS, _out_of_bounds),
        (_AVG_BUSBW, _avg_busbw),
        (_BITWISE, _bitwise),
        (_REDUCED, _reduced),
        (_JSON_OUTPUT, _json_output),
        (_LAST_ERROR, _last_error),
    )

    def _params(self, line: str) -> bool:
        self.params = _parse_params(line.lstrip("#").split())
        return True

    def _rank(self, body: str) -> bool:
        match = _RANK.fullmatch(body)
        if not match:
            return False
        rank = int(match["rank"])
        if rank in self.rank_lines:
            # ranks are numbered across the whole job (common.cu: proc*nThreads*nGpus+i), so a rank
            # listed twice is two runs: a launcher that started two independent jobs, each with
            # its own rank 0. Counted together they would pass for one run of all their ranks.
            host, line = self.rank_lines[rank]
            raise _NotJudgeable(
                f"rank {rank} is listed twice (on {host} and {match['host']}): {TWO_RUNS}", f"{line}\n{self.line}"
            )
        self.rank_lines[rank] = (match["host"], self.line)
        self.devices.append(
            RankDevice(
                rank=int(match["rank"]),
                host=match["host"],
                device=int(match["device"]),
                bus_id=match["bus"],
                model=match["model"].strip(),
                pid=int_or_none(match["pid"]),
                group=int_or_none(match["group"]),
            )
        )
        return True

    def _table_header(self, body: str) -> bool:
        if "out-of-place" in body or body.startswith("(B)"):
            return True  # the banner above the columns and the units below
        layout = _layout_from_header(body.split())
        if layout is None:
            return False
        self.layout, self.columns = layout, tuple(body.split()[: len(layout.prefix)])
        return True

    # -- data rows ----------------------------------------------------------------------------

    def _row(self, number: int, line: str, at_end: bool) -> bool:
        tokens = line.split()
        layout = self.layout or _guess_layout(tokens)
        if layout is None or len(tokens) < layout.width:
            if at_end:  # the run (or the excerpt) stopped inside this row
                self.fields["cut_row"] = line
            return False
        try:
            self.rows.append(_size_row(tokens, layout, number))
        except ValueError:  # Unreadable, or a header too short to map values
            return False
        except _NonFinite as why:
            raise _NotJudgeable(f"line {number}: {why}: {NOT_FINITE}", line) from None
        if not self.columns:
            self.columns = layout.prefix
        return True

    # -- failures -------------------------------------------------------------------------------

    def _failure(self, line: str) -> bool:
        match = _CALL_FAILURE.fullmatch(line)
        if match:
            kind = "nccl" if match["what"] == "NCCL" else "cuda"
            self.failures.append(Failure(kind, _reason(_quoted(match["msg"])), match["host"], match["loc"], line))
            return True
        match = _STACK.fullmatch(line)
        if match:
            self.failures.append(Failure("test", "Test failure", match["host"], match["loc"], line))
            return True
        match = _TIMEOUT.fullmatch(line)
        if match:
            self.failures.append(
                Failure("timeout", f"Test timeout ({match['secs']}s)", match["host"], match["loc"], line)
            )
            return True
        match = _TEST_FAILED.fullmatch(line)
        if match:
            self.failures.append(Failure("test", line, match["host"], None, line))
            return True
        return False

    def _launcher(self, line: str) -> bool:
        if _MPI_FILLER.fullmatch(line):
            return True
        detail = _MPI_DETAIL.fullmatch(line)
        if detail:
            return self._mpirun_detail(detail[1], detail[2].strip())
        failure = _launcher_failure(line)
        if failure is None:
            return False
        if _MPI_DETECTED.fullmatch(line):
            self.mpirun_detected, self.mpirun_details = len(self.failures), {}
        self.failures.append(failure)
        return True

    def _mpirun_detail(self, name: str, value: str) -> bool:
        """'Process name: [[6918,1],1]' / 'Exit code: 3' under 'mpirun detected that ...'."""
        if self.mpirun_detected is None:
            return False
        if name in _MPI_DETAIL_KEYS and _MPI_DETAIL_KEYS[name] in self.mpirun_details:
            return True  # said once; joining every repeat was quadratic
        self.mpirun_details[_MPI_DETAIL_KEYS[name]] = value
        index, said = self.mpirun_detected, ", ".join(f"{k} {v}" for k, v in self.mpirun_details.items())
        before = self.failures[index]
        self.failures[index] = replace(
            before, message=f"{_MPI_DETECTED_WORDS} ({said})", line=f"{before.line}\n{self.line}"
        )
        return True


def _launcher_failure(line: str) -> Failure | None:
    """One-line messages for Open MPI's and Slurm's abort banners."""
    match = _MPI_RETURNED.fullmatch(line)
    if match:
        return Failure(
            "launcher", f"mpirun: {match[1]} process returned a non-zero exit code; the job was aborted", line=line
        )
    if _MPI_DETECTED.fullmatch(line):
        return Failure("launcher", _MPI_DETECTED_WORDS, line=line)
    match = _MPI_SIGNAL.fullmatch(line)
    if match:
        name = f" ({match[5]})" if match[5] else ""
        return Failure(
            "launcher",
            f"mpirun: rank {match[1]} (pid {match[2]}) exited on signal {match[4]}{name}",
            host=match[3],
            line=line,
        )
    match = _MPI_IMPROPER.fullmatch(line)
    if match:
        return Failure(
            "launcher", f"mpirun: rank {match[1]} (pid {match[2]}) exited improperly", host=match[3], line=line
        )
    match = _SRUN_TASK.fullmatch(line)
    if match:
        return Failure(
            "launcher", f"srun: task {match['tasks']}: {match['what'].strip()}", host=match["host"], line=line
        )
    match = _STEPD.fullmatch(line)
    reason = _stepd_reason(match["rest"]) if match else None
    if match and reason is not None:
        why = f" due to {reason.lower()}" if reason else ""
        return Failure(
            "launcher", f"slurm cancelled {match['id']} at {match['at']}{why}", host=match["host"], line=line
        )
    if line.startswith(("srun: error:", "srun: Job step aborted")):
        srun = _SRUN.fullmatch(line)
        assert srun is not None  # _SRUN matches every line with either prefix
        return Failure("launcher", f"srun: {srun['what'].strip()}", line=line)
    return None


def _quoted(text: str) -> str:
    """The reason inside 'NCCL failure f:l '...'': without its closing quote (which may be cut off)."""
    text = text.rstrip()
    return text[:-1] if text.endswith("'") else text


def _stepd_reason(rest: str) -> str | None:
    """After 'CANCELLED AT <time>': '' for ' ***', 'TIME LIMIT' for ' DUE TO TIME LIMIT ***', None
    when there is no closing *** or something else stands before it."""
    head, stars, _ = rest.partition("***")
    if not stars:
        return None
    if not head.strip():
        return ""
    return head.strip()[len("DUE TO ") :].strip() if head.startswith(" DUE TO ") else None


def _reason(quoted: str) -> str:
    """'internal error - please report ... / ' -> without the empty ncclGetLastError part."""
    reason = quoted.strip()
    return reason[:-1].rstrip() if reason.endswith("/") else reason


def _parse_params(tokens: Sequence[str]) -> TestParams:
    """'nThread 1 nGpus 8 ... step: 2(factor) warmup iters: 5 ...': keys of one or more words, with
    or without ':', each followed by one value token."""
    pairs: dict[str, str] = {}
    words: list[str] = []
    for token in tokens:
        if words and re.match(r"-?\d", token):
            pairs[" ".join(words).rstrip(":")] = token
            words = []
        else:
            words.append(token)
    if words:
        pairs[" ".join(words).rstrip(":")] = ""
    named = {
        "nThread": "n_threads",
        "nGpus": "n_gpus",
        "minBytes": "min_bytes",
        "maxBytes": "max_bytes",
        "warmup iters": "warmup_iters",
        "iters": "iters",
        "agg iters": "agg_iters",
        "graph": "graph",
    }
    values: dict[str, Any] = {attribute: int_or_none(pairs.pop(key, None)) for key, attribute in named.items()}
    validation = int_or_none(pairs.pop("validation", None))
    return TestParams(
        step=pairs.pop("step", None), validation=None if validation is None else validation > 0, extra=pairs, **values
    )


def _layout_from_header(tokens: Sequence[str]) -> _Layout | None:
    """'size count type redop root time algbw busbw #wrong time algbw busbw #wrong [timestamp]'."""
    times = [i for i, token in enumerate(tokens) if token in _TIME_COLUMNS]
    if not times or not tokens or tokens[0] not in ("size", "bytes"):
        return None
    prefix = tuple(_PREFIX_NAMES.get(token, token) for token in tokens[: times[0]])
    ends = times[1:] + [len(tokens)]
    halves = tuple(tuple(t for t in tokens[start:end] if t != "timestamp") for start, end in zip(times, ends))
    if any(len(half) < 4 for half in halves):  # time algbw busbw and the check column, at least
        return None
    return _Layout(prefix, halves)


def _guess_layout(tokens: Sequence[str]) -> _Layout | None:
    """A row seen before any column header (an excerpt that starts mid-table): the prefix is size,
    count, type, then redop (a word) and root (an integer) when the count of values says so."""
    values = list(tokens)
    if len(values) >= 2 and _DATE.fullmatch(values[-2]) and _CLOCK.fullmatch(values[-1]):
        values = values[:-2]
    prefix = ["size", "count", "type"]
    rest = values[3:]
    if rest and _WORD.fullmatch(rest[0]):
        prefix.append("redop")
        rest = rest[1:]
    if rest and _INT.fullmatch(rest[0]) and len(rest) - 1 in _BODY_WIDTHS:
        prefix.append("root")
        rest = rest[1:]
    if len(rest) not in _BODY_WIDTHS:
        return None if len(rest) > 8 else _Layout(tuple(prefix), (("?",) * 8,))  # too short: cut
    half = ("time", "algbw", "busbw", "check") + ("?",) * (len(rest) // 2 - 4)
    return _Layout(tuple(prefix), (half, half))


def _size_row(tokens: Sequence[str], layout: _Layout, number: int) -> SizeRow:
    prefix = dict(zip(layout.prefix, tokens))
    if not {"size", "count", "type"} <= prefix.keys():
        raise Unreadable("the table has no size/count/type columns")
    position = len(layout.prefix)
    halves: list[Measurement | None] = []
    for names in layout.halves:
        halves.append(_measurement(names, tokens[position : position + len(names)]))
        position += len(names)
    halves += [None, None]
    return SizeRow(
        size=_int(prefix["size"]),
        count=_int(prefix["count"]),
        dtype=prefix["type"],
        redop=prefix.get("redop"),
        root=_int(prefix["root"]) if "root" in prefix else None,
        out_of_place=halves[0],
        in_place=halves[1],
        line=number,
    )


def _measurement(names: Sequence[str], values: Sequence[str]) -> Measurement:
    time, algbw, busbw = (_number(value, name) for value, name in zip(values[:3], ("time", "algbw", "busbw")))
    check_name = names[3] if len(names) > 3 else ""
    check = values[3] if len(values) > 3 else "N/A"
    wrong = error = None
    if check_name == "#wrong" or (check_name == "check" and _INT.fullmatch(check)):
        wrong = _count(check)
    elif check_name in ("error", "res", "check"):
        error = _number(check, check_name)
    return Measurement(time, algbw, busbw, wrong=wrong, error=error)


def _number(value: str, name: str = "value") -> float | None:
    return None if value == "N/A" else _float(value, name)


def _float(value: str, name: str = "value") -> float:
    """A printed number; nan and inf (%g prints them for 0/0 and x/0) raise _NonFinite: NaN passes
    every floor, since nothing compares below it."""
    try:
        number = float(value)
    except ValueError:
        raise Unreadable(f"not a number: {quote(value)}") from None
    if not math.isfinite(number):
        raise _NonFinite(f"{name} {quote(value, 20)[1:-1]}")
    return number


def _count(value: str) -> int | None:
    """'#wrong' is printed with %6g: 951005, but 1.23457e+06 from a million wrong elements on."""
    if value == "N/A":
        return None
    if _INT.fullmatch(value):
        return int(value)
    return round(_float(value, "#wrong"))


def _int(value: str) -> int:
    if not _INT.fullmatch(value):
        raise Unreadable(f"not an integer: {quote(value)}")
    return int(value)
