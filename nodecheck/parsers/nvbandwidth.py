"""Parse the plain-text output of NVIDIA's nvbandwidth (github.com/NVIDIA/nvbandwidth) into typed matrices.

The format, as nvbandwidth's output.cpp and inline_common.h print it (v0.2 to v0.10 read alike):

    nvbandwidth Version: v0.8
    Built from Git version: v0.8
    CUDA Runtime Version: 12060                  (v0.10: "13.2 (13020)")
    CUDA Driver Version: 12060                   (v0.10: "CUDA Driver Version (API): 13.2 (13020)")
    Driver Version: 560.35.05
    Device 0: NVIDIA A100-SXM4-40GB (00000000:99:00)     (before v0.5: no bus id)
    Running host_to_device_memcpy_sm.
    memcpy SM CPU(row) -> GPU(column) bandwidth (GB/s)   <- the title; its last "(...)" is the unit
               0                                         <- column labels
     0     25.13                                         <- row label, then one cell per column ("N/A": none)
                                                         <- blank line
    SUM host_to_device_memcpy_sm 25.13                   <- or "&&&& PERF <key> <sum><unit>" (--perfFormatter)
    COEFFICIENT_OF_VARIATION host_to_device_memcpy_sm 0.00   (v0.10; not kept)

One "Running" test may print several matrices (the bidirectional device-to-device tests print Read1/Read2/Total,
each with its own SUM key: <name>_read1, ...); each matrix is one NvbTest, `key` telling them apart. A waived
test prints "Waived: " without its name since v0.5 ("Waiving <name>." before), so a waived NvbTest may have
name None. A test that printed "Error: ..." or an "ASSERT in expression ..." abort, or nothing at all before
the next test or the end, is an NvbTest with `error` set and no cells. Lines the parser does not know (NOTE,
the host name, warnings, verbose MIN/MAX/AVG) are skipped; everything inside a matrix is strict: a short row, a
non-number, a missing SUM line (the output was cut), a CPU(row) matrix of more than one row (nvbandwidth
prints one) is a ParseError, never a partial matrix.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from nodecheck.core.errors import ParseError
from nodecheck.parsers.lines import split_lines

TOOL = "nvbandwidth"
MAX_TEXT_CHARS = 4 * 1024 * 1024
MAX_DIM = 512  # rows or columns of one matrix: devices (or MPI ranks) on one node, with room to spare
MAX_TEXT_FIELD = 300  # a version, driver, device name or error message is cut here

_VERSION = re.compile(r"nvbandwidth Version: (\S.*)")
_GIT = re.compile(r"Built from Git version: (\S.*)")
# "12040" (to v0.9) or "13.2 (13020)" (v0.10): the integer is what cudaRuntimeGetVersion returned
_CUDA_RUNTIME = re.compile(r"CUDA Runtime Version: (?:\d+\.\d+ \()?(\d{1,9})\)?")
_CUDA_DRIVER = re.compile(r"CUDA Driver Version(?: \(API\))?: (?:\d+\.\d+ \()?(\d{1,9})\)?")
_DRIVER = re.compile(r"Driver Version: (\S+)")
_DEVICE = re.compile(r"Device (\d{1,4}): (.*?)(?: \(([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})\))?")
_RUNNING = re.compile(r"Running (\S+)\.")
_WAIVING = re.compile(r"Waiving (\S+)\.")  # before v0.5
_WAIVED = re.compile(r"Waived:(.*)")  # v0.5 and later: no name
_ERROR = re.compile(r"(?:ERROR|Error): (.*)|(ASSERT in expression .*)")  # ASSERT: nvbandwidth aborts after it
_TITLE = re.compile(r"(\S.*\(row\).*\(column\).*?)\s*\(([^()]+)\)")
_NUMBER = re.compile(r"\d{1,15}(?:\.\d{1,15})?")  # std::fixed, setprecision(2): never a sign or exponent
_SUM = re.compile(r"SUM (\S+) (\S+)")
_PERF = re.compile(r"&&&& PERF (\S+) (\d{1,15}(?:\.\d{1,15})?)\S*")
_LABEL = re.compile(r"\d{1,6}")


@dataclass(frozen=True)
class NvbDevice:
    """One "Device N: name (domain:bus:device)" line."""

    index: int
    name: str
    pci_bus_id: str | None  # as printed, lowercased: "00000000:99:00" (no function); None before v0.5


@dataclass(frozen=True)
class NvbTest:
    """One result matrix (or one waived/failed test) of an nvbandwidth run.

    cells[(row, column)] is the value nvbandwidth printed under those labels; an "N/A" cell (no peer access,
    the diagonal of device-to-device tests) is absent. What row and column mean depends on the test: see
    host_to_device, device_to_host and device_to_device below."""

    name: str | None  # the testcase ("Running <name>."); None for a "Waived:" line, which names no test
    title: str  # "memcpy CE CPU(row) -> GPU(column) bandwidth" (unit cut off)
    unit: str  # "GB/s", or "ns" for the latency tests
    cells: Mapping[tuple[int, int], float]
    sum: float | None  # the SUM line (what nvbandwidth itself adds up, N/A counted as 0)
    waived: bool = False
    key: str = ""  # the SUM line's key: the name, or name + "_read1"/"_write2"/"_total" for bidirectional tests
    error: str = ""  # set for a test that printed an error, or nothing at all, instead of a matrix
    rows: tuple[int, ...] = field(default=())  # row labels, in printed order
    columns: tuple[int, ...] = field(default=())  # column labels, in printed order


@dataclass(frozen=True)
class NvbandwidthRun:
    version: str | None
    tests: tuple[NvbTest, ...]
    git_version: str | None = None
    cuda_runtime: int | None = None  # 12040 = CUDA 12.4
    cuda_driver: int | None = None
    driver: str | None = None
    devices: tuple[NvbDevice, ...] = ()
    errors: tuple[str, ...] = ()  # error lines outside any test ("ERROR: Testcase foo not found!")

    def test(self, key: str) -> NvbTest | None:
        """The matrix printed under this SUM key (for single-matrix tests: the test name), if any."""
        return next((t for t in self.tests if t.key == key and not t.waived), None)


@dataclass
class _Header:
    version: str | None = None
    git: str | None = None
    runtime: int | None = None
    cuda_driver: int | None = None
    driver: str | None = None


def _cut(text: str) -> str:
    return text if len(text) <= MAX_TEXT_FIELD else text[:MAX_TEXT_FIELD] + "…"


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = [line.rstrip() for line in split_lines(text)]
        self.pos = 0

    def fail(self, reason: str, at: int | None = None) -> ParseError:
        at = self.pos if at is None else at
        where = f"line {at + 1}: " if at < len(self.lines) else "at the end: "
        return ParseError(TOOL, where + reason, self.text)

    def run(self) -> NvbandwidthRun:
        header = _Header()
        devices: list[NvbDevice] = []
        tests: list[NvbTest] = []
        errors: list[str] = []
        running: str | None = None  # the test whose "Running" line came last
        running_printed = False  # it has a matrix or an error already
        while self.pos < len(self.lines):
            line = self.lines[self.pos].strip()
            if _is_title(line):
                tests.append(self.matrix(running))
                running_printed = True
                continue
            self.pos += 1
            if match := _RUNNING.fullmatch(line):
                if running is not None and not running_printed:
                    tests.append(_silent(running))
                running, running_printed = match[1], False
            elif match := _WAIVING.fullmatch(line):
                tests.append(NvbTest(match[1], "", "", MappingProxyType({}), None, waived=True, key=match[1]))
            elif match := _WAIVED.fullmatch(line):
                tests.append(
                    NvbTest(None, "", "", MappingProxyType({}), None, waived=True, error=_cut(match[1].strip()))
                )
            elif match := _ERROR.fullmatch(line):
                message = _cut((match[1] if match[1] is not None else match[2]).strip())
                if running is not None and not running_printed:
                    tests.append(NvbTest(running, "", "", MappingProxyType({}), None, key=running, error=message))
                    running_printed = True
                else:
                    errors.append(message)
            elif not tests and not running:
                self.header_line(line, header, devices)
        if running is not None and not running_printed:
            tests.append(_silent(running))
        return NvbandwidthRun(
            version=header.version,
            tests=tuple(tests),
            git_version=header.git,
            cuda_runtime=header.runtime,
            cuda_driver=header.cuda_driver,
            driver=header.driver,
            devices=tuple(devices),
            errors=tuple(errors),
        )

    def header_line(self, line: str, header: _Header, devices: list[NvbDevice]) -> None:
        if match := _VERSION.fullmatch(line):
            header.version = _cut(match[1])
        elif match := _GIT.fullmatch(line):
            header.git = _cut(match[1])
        elif match := _DRIVER.fullmatch(line):
            header.driver = _cut(match[1])
        elif match := _CUDA_RUNTIME.fullmatch(line):
            header.runtime = int(match[1])
        elif match := _CUDA_DRIVER.fullmatch(line):
            header.cuda_driver = int(match[1])
        elif match := _DEVICE.fullmatch(line):
            index = int(match[1])
            if index != len(devices) or index >= MAX_DIM:
                raise self.fail(f"device {index} listed after {len(devices)} device(s)", self.pos - 1)
            bus = match[3].lower() if match[3] else None
            devices.append(NvbDevice(index, _cut(match[2]), bus))

    def matrix(self, running: str | None) -> NvbTest:
        title_match = _TITLE.fullmatch(self.lines[self.pos].strip())
        assert title_match is not None
        title, unit = title_match[1], title_match[2]
        title_at = self.pos
        self.pos += 1
        if self.pos >= len(self.lines):
            raise self.fail(f"matrix {title!r} has no column labels (output cut)")
        columns = self.labels(self.lines[self.pos].split(), "column")
        self.pos += 1
        rows: list[int] = []
        cells: dict[tuple[int, int], float] = {}
        while self.pos < len(self.lines) and self.lines[self.pos].strip():
            tokens = self.lines[self.pos].split()
            if len(tokens) != len(columns) + 1:
                raise self.fail(f"row of {len(tokens) - 1} value(s) under {len(columns)} column(s)")
            (row,) = self.labels(tokens[:1], "row")
            if row in rows:
                raise self.fail(f"row {row} printed twice")
            if len(rows) >= MAX_DIM:
                raise self.fail(f"more than {MAX_DIM} rows")
            rows.append(row)
            for column, token in zip(columns, tokens[1:]):
                if token != "N/A":
                    cells[(row, column)] = self.number(token)
            self.pos += 1
        if not rows:
            raise self.fail(f"matrix {title!r} has no rows")
        if "CPU(row)" in title and rows != [0]:
            # nvbandwidth measures the host as one row 0; anything else is an edited or garbled output, and
            # host_to_device() would have to guess which row to report
            raise self.fail(f"matrix {title!r} has CPU rows {rows}; nvbandwidth prints one, row 0", title_at)
        while self.pos < len(self.lines) and not self.lines[self.pos].strip():
            self.pos += 1
        if self.pos >= len(self.lines):
            raise self.fail(f"matrix {title!r} ends without its SUM line (output cut)")
        line = self.lines[self.pos].strip()
        match = _SUM.fullmatch(line) or _PERF.fullmatch(line)
        if not match:
            raise self.fail(f"expected the SUM line of {title!r}, got {line[:80]!r}")
        key, total = match[1], self.number(match[2])
        if running is not None and not key.startswith(running):
            raise self.fail(f"SUM key {key!r} does not belong to the running test {running!r}")
        self.pos += 1
        return NvbTest(
            name=running if running is not None else key,
            title=title,
            unit=unit,
            cells=MappingProxyType(cells),
            sum=total,
            key=key,
            rows=tuple(rows),
            columns=columns,
        )

    def labels(self, tokens: list[str], what: str) -> tuple[int, ...]:
        if not tokens or len(tokens) > MAX_DIM:
            raise self.fail(f"{len(tokens)} {what} label(s) (1 to {MAX_DIM} expected)")
        if not all(_LABEL.fullmatch(t) for t in tokens):
            raise self.fail(f"{what} labels are not device numbers: {' '.join(tokens)[:80]!r}")
        labels = tuple(int(t) for t in tokens)
        if len(set(labels)) != len(labels):
            raise self.fail(f"repeated {what} label in {' '.join(tokens)[:80]!r}")
        return labels

    def number(self, token: str) -> float:
        if not _NUMBER.fullmatch(token):
            raise self.fail(f"not a non-negative number: {token[:40]!r}")
        value = float(token)
        if not math.isfinite(value):  # pragma: no cover - 15 digits cannot overflow
            raise self.fail(f"number out of range: {token[:40]!r}")
        return value


def _is_title(line: str) -> bool:
    # the length and substring checks first: _TITLE backtracks quadratically on a long line full of "(row)"
    return len(line) <= MAX_TEXT_FIELD and "(row)" in line and "(column)" in line and bool(_TITLE.fullmatch(line))


def _silent(name: str) -> NvbTest:
    """A test that started and printed nothing before the next one (or the end): it crashed or was cut."""
    return NvbTest(name, "", "", MappingProxyType({}), None, key=name, error="printed no result")


def parse_nvbandwidth(text: str) -> NvbandwidthRun:
    """nvbandwidth's stdout -> NvbandwidthRun; ParseError on anything over the bounds or not understood."""
    if len(text) > MAX_TEXT_CHARS:
        raise ParseError(TOOL, f"output of {len(text)} characters (at most {MAX_TEXT_CHARS} read)", text[:2000])
    if not text.strip():
        raise ParseError(TOOL, "empty output", text)
    run = _Parser(text).run()
    if run.version is None and not run.tests:
        raise ParseError(TOOL, "no 'nvbandwidth Version' line and no test: not nvbandwidth output", text)
    return run


def _host_row(run: NvbandwidthRun, name: str) -> dict[int, float]:
    test = run.test(name)
    if test is None or test.error:
        return {}
    return {column: value for (_, column), value in test.cells.items()}


def host_to_device(run: NvbandwidthRun) -> dict[int, float]:
    """GPU index -> GB/s of host_to_device_memcpy_ce (pinned host memory copied to each GPU by its copy
    engine, one GPU at a time). Empty when the run has no such test or it failed; a GPU whose cell is N/A is
    absent. Never raises: parse_nvbandwidth already refused a host matrix of other than one row."""
    return _host_row(run, "host_to_device_memcpy_ce")


def device_to_host(run: NvbandwidthRun) -> dict[int, float]:
    """GPU index -> GB/s of device_to_host_memcpy_ce; as host_to_device."""
    return _host_row(run, "device_to_host_memcpy_ce")


D2D_TESTS = ("device_to_device_memcpy_write_ce", "device_to_device_memcpy_read_ce")


def device_to_device(run: NvbandwidthRun, name: str | None = None) -> dict[tuple[int, int], float]:
    """(source GPU, destination GPU) -> GB/s, from `name` (one of D2D_TESTS) or, by default, the first of them
    the run has. Empty if neither is there.

    Direction, from nvbandwidth's testcases_ce.cpp and its test descriptions: in both tests the row is the
    "target" GPU whose context issues the copy and the column the peer. write_ce: "a copy from the target
    device to the peer" - cell (row, column) moved data row -> column, so (src, dst) = (row, column).
    read_ce: "a copy from the peer device to the target" - data moved column -> row, so (src, dst) =
    (column, row). The diagonal is N/A (no copy to itself) and so is a pair without peer access: absent."""
    names = (name,) if name is not None else D2D_TESTS
    if name is not None and name not in D2D_TESTS:
        raise ValueError(f"{name!r} is not one of {D2D_TESTS}")
    for candidate in names:
        test = run.test(candidate)
        if test is None or test.error:
            continue
        if candidate.endswith("_write_ce"):
            return {(row, column): value for (row, column), value in test.cells.items()}
        return {(column, row): value for (row, column), value in test.cells.items()}
    return {}
