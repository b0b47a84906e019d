"""The facts one nccl-tests run's output holds (NcclTestRun and its parts), what both readers share.

API fixed for the checks (nodecheck/checks/nccl_allreduce.py): parse_nccl_tests (nccl_tests.py, the
text output) and parse_nccl_tests_json (nccl_tests_json.py, the `-J file.json` report) fill it in.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from nodecheck.core.model import quote

TOOL = "nccl-tests"


@dataclass(frozen=True)
class TestParams:
    """The parameter line: '# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) ...'."""

    __test__ = False  # not a pytest test class despite the name

    n_threads: int | None = None
    n_gpus: int | None = None
    min_bytes: int | None = None
    max_bytes: int | None = None
    step: str | None = None  # "2(factor)", "1048576(bytes)"
    warmup_iters: int | None = None
    iters: int | None = None
    agg_iters: int | None = None
    validation: bool | None = None  # -c: False means #wrong is never checked (N/A)
    graph: int | None = None
    extra: dict[str, str] = field(default_factory=dict)  # keys this parser does not name ("unalign")

    @property
    def step_factor(self) -> int | None:
        """2 from "2(factor)"; None for a byte step or an unreadable one."""
        return _step_number(self.step, "factor")

    @property
    def step_bytes(self) -> int | None:
        """1048576 from "1048576(bytes)"."""
        return _step_number(self.step, "bytes")


@dataclass(frozen=True)
class RankDevice:
    """'#  Rank  3 Group  0 Pid   6902 on ztan-mig-235z device  3 [0000:0c:00] NVIDIA H100 80GB HBM3'
    (and the older forms without Group, and without Pid)."""

    rank: int
    host: str
    device: int  # CUDA device index on that host
    bus_id: str  # "0000:0c:00" or the old short "0x07"
    model: str  # "NVIDIA H100 80GB HBM3"
    pid: int | None = None
    group: int | None = None


@dataclass(frozen=True)
class Measurement:
    """One half of a data row (out-of-place or in-place)."""

    time_us: float | None
    algbw_gbs: float | None  # GB/s as nccl-tests prints it (1e9 bytes/s)
    busbw_gbs: float | None
    wrong: int | None = None  # '#wrong' (None: N/A, validation off, or old format)
    error: float | None = None  # the older 'error' column (max error), None: N/A/absent


@dataclass(frozen=True)
class SizeRow:
    size: int  # bytes
    count: int  # elements
    dtype: str  # "float", "int8"
    redop: str | None  # "sum", "none"; None in layouts without the column
    root: int | None  # -1 for rootless collectives; None when absent
    out_of_place: Measurement | None
    in_place: Measurement | None
    line: int = 0  # 1-based line number in the text (0 for JSON)

    @property
    def wrong(self) -> int:
        """#wrong of both halves together; 0 when neither half was checked."""
        return sum(m.wrong or 0 for m in (self.out_of_place, self.in_place) if m is not None)


@dataclass(frozen=True)
class NcclLogLine:
    """'host:pid:tid [dev] NCCL INFO|WARN text' interleaved with the test output."""

    host: str
    pid: int | None
    device: int | None
    level: str  # "INFO", "WARN", "ERROR", "TRACE"
    text: str
    location: str | None = None  # "misc/ibvwrap.cc:63" in 'host:p:t [0] misc/ibvwrap.cc:63 NCCL WARN'


@dataclass(frozen=True)
class Failure:
    """A failure line: 'Test NCCL failure common.cu:959 'internal error'', 'NCCL failure ...',
    'Test CUDA failure ...', 'Cuda failure ...', 'Test FAILURE', an mpirun/srun abort."""

    kind: str  # "nccl", "cuda", "test", "timeout", "launcher"
    message: str  # the quoted reason, or the launcher's words
    host: str | None = None
    location: str | None = None  # "common.cu:959"
    line: str = ""  # the raw line

    def __str__(self) -> str:
        where = f" at {self.location}" if self.location else ""
        host = f" on {self.host}" if self.host else ""
        return f"{self.kind} failure{where}{host}: {self.message}"


class Stage(Enum):
    """How far a run's output got; a run that stopped (hang, kill) is classified by it."""

    NOTHING = "nothing"  # no nccl-tests line at all
    HEADER = "header"  # parameter line, no rank lines
    DEVICES = "devices"  # rank lines, no NCCL version line, no data row
    INIT = "init"  # NCCL version or table header seen, no data row
    SWEEP = "sweep"  # data rows, no summary (stopped mid-sweep)
    DONE = "done"  # 'Avg bus bandwidth' or 'Collective test concluded'


@dataclass(frozen=True)
class NcclTestRun:
    tests_version: str | None = None  # "2.17.9" from '# nccl-tests version 2.17.9 ...'
    nccl_headers: int | None = None  # 22902 (nccl-headers=)
    nccl_library: int | None = None
    compiled_with_nccl: str | None = None  # "1.0" ('# NCCL Tests compiled with NCCL 1.0')
    collective: str | None = None  # "all_reduce_perf" from '# Collective test starting: ...'
    params: TestParams | None = None
    devices: tuple[RankDevice, ...] = ()
    nccl_version: str | None = None  # "2.19.3+cuda12.2" (bare line or NCCL INFO form)
    columns: tuple[str, ...] = ()  # the prefix columns of the table: size count type redop root
    rows: tuple[SizeRow, ...] = ()
    out_of_bounds: int | None = None  # '# Out of bounds values : 0 OK'
    out_of_bounds_ok: bool | None = None
    avg_busbw_gbs: float | None = None  # '# Avg bus bandwidth    : 70.742'
    concluded: bool = False  # '# Collective test concluded: ...'
    log: tuple[NcclLogLine, ...] = ()  # interleaved NCCL INFO/WARN lines (INFO: the first INFO_MAX)
    log_count: int = 0  # every NCCL log line seen, kept or not
    failures: tuple[Failure, ...] = ()
    unknown: tuple[str, ...] = ()  # lines not understood (bounded; for the report)
    from_json: bool = False
    # additions to the fixed API
    nccl_versions: tuple[str, ...] = ()  # every distinct NCCL version line, in order (ranks can differ)
    # (version, hosts that printed it) from NCCL INFO version lines (NCCL_DEBUG=INFO: every rank says)
    nccl_version_hosts: tuple[tuple[str, tuple[str, ...]], ...] = ()
    avg_busbw_ok: bool | None = None  # 'OK'/'FAILED' after the average (NCCL_TESTS_MIN_BW set)
    bitwise_mismatches: int | None = None  # '# Bitwise mismatches : N' (newest nccl-tests, -B)
    max_bytes_reduced_to: int | None = None  # '# Reducing maxBytes to N due to memory limitation'
    json_output: str | None = None  # '# Writing JSON output to PATH'
    nccl_last_error: str | None = None  # '# error: ...' / JSON "errors": ncclGetLastError at exit
    cut_row: str | None = None  # a data row the text ends inside (hang or kill mid-row)
    unknown_count: int = 0  # all lines not understood; `unknown` keeps the first 50

    @property
    def stage(self) -> Stage:
        if self.avg_busbw_gbs is not None or self.concluded:
            return Stage.DONE
        if self.rows:
            return Stage.SWEEP
        # nccl-tests prints the table header after NCCL init returned (common.cu run())
        if self.nccl_version is not None or self.columns:
            return Stage.INIT
        if self.devices:
            return Stage.DEVICES
        if self.params is not None or self.tests_version or self.collective or self.compiled_with_nccl:
            return Stage.HEADER
        return Stage.NOTHING

    @property
    def complete(self) -> bool:
        return self.stage is Stage.DONE

    @property
    def wrong_rows(self) -> tuple[SizeRow, ...]:
        """Rows whose data check found wrong elements (in either half)."""
        return tuple(row for row in self.rows if row.wrong > 0)

    @property
    def max_bytes(self) -> int | None:
        """Where the sweep ends: maxBytes, or what nccl-tests reduced it to for lack of memory."""
        if self.max_bytes_reduced_to is not None:
            return self.max_bytes_reduced_to
        return self.params.max_bytes if self.params else None

    def next_size(self) -> int | None:
        """The size the sweep would have run after the last row; None when it was the last one or
        the step is unknown."""
        if not self.rows or self.params is None:
            return None
        last = self.rows[-1].size
        factor, step = self.params.step_factor, self.params.step_bytes
        following = last * factor if factor else last + step if step else None
        if following is None or following == last:
            return None
        limit = self.max_bytes
        return None if limit is not None and following > limit else following

    def stopped_at(self, failures: bool = True) -> str:
        """Where a run that did not finish stopped, in words: 'after the rank list, before NCCL
        init completed (no NCCL version line)', 'mid-sweep after 2097152 B (2 MiB), the last row'."""
        where = _STOPPED_AT[self.stage](self)
        if failures and self.stage is not Stage.DONE and self.failures:
            where += f"; first failure: {self.failures[0]}"
        return where


def human_bytes(size: int) -> str:
    """'2097152 B (2 MiB)'; sizes under 1 KiB are just '512 B'."""
    units = ("KiB", "MiB", "GiB", "TiB", "PiB")
    if size < 1024:
        return f"{size} B"
    value, unit = float(size), "B"
    for unit in units:  # noqa: B007 - the unit the loop stops at is read after it
        value /= 1024
        if value < 1024:
            break
    return f"{size} B ({f'{value:.2f}'.rstrip('0').rstrip('.')} {unit})"


def _stopped_sweep(run: NcclTestRun) -> str:
    last = run.rows[-1]
    where = f"mid-sweep after {human_bytes(last.size)}, the last of {len(run.rows)} rows"
    following = run.next_size()
    if following is not None:
        where += f"; the next size {human_bytes(following)} never came"
    elif run.max_bytes is not None and last.size >= run.max_bytes:
        where += " (the sweep's largest size); the summary lines never came"
    if run.cut_row is not None:
        where += f"; the text ends inside a row: {quote(run.cut_row.strip(), 200)}"
    return where


def _stopped_init(run: NcclTestRun) -> str:
    if run.columns:
        return "after the table header, before the first data row (the first collective never finished)"
    return f"during NCCL init: 'NCCL version {run.nccl_version}' printed, no table header and no data row"


def _stopped_devices(run: NcclTestRun) -> str:
    return (
        f"after the rank list ({len(run.devices)} ranks), before NCCL init completed "
        "(no NCCL version line, no table header)"
    )


_STOPPED_AT: dict[Stage, Callable[[NcclTestRun], str]] = {
    Stage.NOTHING: lambda run: "before any nccl-tests output (no parameter line)",
    Stage.HEADER: lambda run: "after the parameter line, before the rank list",
    Stage.DEVICES: _stopped_devices,
    Stage.INIT: _stopped_init,
    Stage.SWEEP: _stopped_sweep,
    Stage.DONE: lambda run: "did not stop: the run finished (summary printed)",
}


def _step_number(step: str | None, unit: str) -> int | None:
    match = re.fullmatch(r"(\d+)\((\w+)\)", step or "", re.ASCII)
    return int(match[1]) if match and match[2] == unit else None


# ---------------------------------------------------------------------------------------------
# Shared by the text and the JSON reader


class Unreadable(ValueError):
    """A value that cannot be read; the line holding it becomes an unknown line."""


NOT_FINITE = "nccl-tests printed a number that is not finite; the run cannot be judged"
TWO_RUNS = "two runs in one output, not one run of their ranks together"
_INT = re.compile(r"-?\d+", re.ASCII)


def int_or_none(value: str | None) -> int | None:
    return int(value) if value is not None and _INT.fullmatch(value) else None


def out_of_bounds_failure(count: int, line: str = "") -> Failure:
    # nccl-tests' own verdict on the data check (common.cu: errors[0] -> 'FAILED', exit status 5)
    return Failure("test", f"Out of bounds values: {count} FAILED (the data check found wrong elements)", line=line)


def avg_busbw_failure(value: float, line: str = "") -> Failure:
    return Failure("test", f"Avg bus bandwidth {value:g} GB/s FAILED (below 0.9 x NCCL_TESTS_MIN_BW)", line=line)
