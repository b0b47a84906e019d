"""Parse perftest output (ib_write_bw, ib_send_bw, ib_read_bw and the ib_*_lat tests) into one run's facts.

perftest prints a test-info block, the QP address lines, then a result table between two lines of
dashes. A failed run prints its own error lines instead and exits 1; that is a run with `error` set,
not a ParseError: the pair check turns it into a failed pair. Output with no perftest structure at
all (a shell error, another tool) is a ParseError. Formats: /work/shared/context/formats.md §3.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

from nodecheck.core.errors import ParseError
from nodecheck.core.model import quote
from nodecheck.parsers.lines import split_lines

TOOL = "ib_write_bw"
# perftest's own lines are under 200 characters; longer ones are kept (cut) as notes, not matched
MAX_LINE_CHARS = 4096
# perftest's "MB/sec" (before 24.07) and "MiB/sec" labels both mean 2^20 bytes/s; only the label changed
MIB_PER_S_IN_GBPS = 2**20 * 8 / 1e9
_TO_GBPS = {"Gb/sec": 1.0, "MiB/sec": MIB_PER_S_IN_GBPS, "MB/sec": MIB_PER_S_IN_GBPS}

# re.ASCII where numbers are read: a str pattern's \d also matches other scripts' digits.
_RESULT_LINE = re.compile(r"-{3,}")  # RESULT_LINE is 87 dashes; a cut one is still one
_TITLE = re.compile(r"[A-Za-z][\w ]*? (BW|Latency) Test", re.ASCII)  # "Send Bidirectional BW Test"
_BANNER = re.compile(
    r"\*+|\* Waiting for client to connect\.\.\. \*|"
    r"Waiting for client rdma_cm QP to connect"
)
# "Mtu             : 4096[B]", "rdma_cm QPs\t : OFF". Linear time on any line: a key is words joined
# by single runs of spaces (a lazy key of spaces next to `\s*` tried every split of a long run of
# spaces), and fields are separated by whitespace (a value could otherwise end anywhere inside a
# long token and the next key start there)
_KEY = r"[A-Za-z][\w.*/-]*(?: +[\w.*/-]+)*"
_FIELD_PATTERN = rf"({_KEY})\s*:\s*(\S+)"
_FIELD = re.compile(_FIELD_PATTERN, re.ASCII)
_FIELDS_LINE = re.compile(rf"{_FIELD_PATTERN}(?:\s+{_FIELD_PATTERN})*", re.ASCII)  # one or two fields
_HEX = r"(?:0x)?[0-9a-fA-F]+"  # "%#04x" prints 0 as "0000", others as "0x04"
_ADDRESS = re.compile(rf"(local|remote) address: LID ({_HEX}) QPN ({_HEX}) PSN ({_HEX})(?:\s.*)?", re.ASCII)
_GID = re.compile(r"GID: (\d{1,3}(?::\d{1,3}){15})", re.ASCII)  # 16 bytes in decimal (PERF_GID_FMT)
_HEADER_START = "#bytes"
_BW_HEADER = re.compile(
    r"#bytes\s+#iterations\s+BW peak\[(Gb/sec|MiB/sec|MB/sec)\]\s+BW average\[\1\]\s+"
    r"MsgRate\[Mpps\](\s+CPU_Util\[%\])?"
)
_LAT_HEADER = re.compile(
    r"#bytes\s+#iterations\s+t_min\[(usec|cycles)\]\s+t_max\[\1\]\s+t_typical\[\1\]"
    r"(\s+t_avg\[\1\]\s+t_stdev\[\1\]\s+99% percentile\[\1\]"
    r"\s+99\.9% percentile\[\1\])?"
)
_LAT_DURATION_HEADER = re.compile(r"#bytes\s+#iterations\s+t_avg\[(usec|cycles)\]\s+tps average")
# BW numbers have 2 decimals (6 in inc_accuracy rows); MsgRate always 6 (REPORT_FMT), so a row cut
# inside its last number does not pass for a whole one
_BW_ROW = re.compile(r"(\d+)\s+(\d+)\s+(\d+\.\d+)\s+(\d+\.\d+)\s+(\d+\.\d{6})(?:\s+(\d+\.\d+))?", re.ASCII)
_LAT_ROW = re.compile(r"(\d+)\s+(\d+)((?:\s+\d+\.\d+)+)", re.ASCII)
_LAT_COLUMNS = ("t_min", "t_max", "t_typical")
_LAT_EXT_COLUMNS = ("t_avg", "t_stdev", "p99", "p999")
_LAT_DURATION_COLUMNS = ("t_avg", "tps_average")

# First match wins; anchored at the line's start (after stripping). The specific kinds come from
# perftest's own strings (formats.md §3); "other" catches the rest of its fprintf(stderr) wording.
_ERRORS: tuple[tuple[re.Pattern, str], ...] = (
    (re.compile(r"Couldn't connect to \S+"), "connect_failed"),
    # pre-#228 perftest ran these two messages together on one line
    (
        re.compile(r"Unable to (?:open file descriptor for socket connection|init the socket connection)"),
        "connect_failed",
    ),
    (re.compile(r"Couldn't listen to port"), "listen_failed"),
    (
        re.compile(
            r"Did not detect devices|If device exists, check if driver is up|"
            r"Unable to find the Infiniband/RoCE device|Couldn't get context for the device|"
            r"No IB devices found|IB device \S+ not found"
        ),
        "no_device",
    ),
    (re.compile(r"Failed to modify QP \S+ to RTR"), "qp_rtr_failed"),
    (re.compile(r"Unable to Connect the HCA's through the link"), "link_unreachable"),
    (re.compile(r"Completion with error|Failed status \d+"), "completion_error"),
    (
        re.compile(r"Found Incompatibility issue with GID types|Please Try to use a different IP version"),
        "gid_type_mismatch",
    ),
    (re.compile(r"Failed to exchange data between server and clients"), "exchange_failed"),
    (re.compile(r"(?:Couldn't|Unable to|Failed|Cannot|Error|ERROR)\b"), "other"),
)
ERROR_KINDS = frozenset(kind for _, kind in _ERRORS)
_COMPLETION_SIDE = re.compile(r"Completion with error at (client|server)")
# CPU-frequency notes make latency and message-rate numbers less trustworthy; kept for the report
_WARNING = re.compile(r"Conflicting CPU frequency values detected|Using sampled CPU speed|WARNING|Warning")


@dataclass(frozen=True)
class BwRow:
    bytes: int
    iterations: int
    peak: float  # in the run's unit, as printed; 0.00 in duration mode
    average: float  # bidirectional runs print local + remote summed
    msg_rate_mpps: float
    cpu_util: float | None  # only with --cpu_util
    peak_gbps: float  # normalized: MiB/s x 2^20*8/1e9, Gb/s as is
    average_gbps: float


@dataclass(frozen=True)
class LatRow:
    """One latency row; columns the header did not have are None (old perftest prints only three)."""

    bytes: int
    iterations: int
    t_min: float | None = None  # in the run's unit: "usec" (or "cycles" with -C)
    t_max: float | None = None
    t_typical: float | None = None
    t_avg: float | None = None
    t_stdev: float | None = None
    p99: float | None = None
    p999: float | None = None
    tps_average: float | None = None  # duration mode (-D) only


@dataclass(frozen=True)
class QpAddress:
    side: str  # "local" or "remote"
    lid: int  # 0 on RoCE
    qpn: int
    psn: int
    gid: str | None  # as printed, decimal bytes; None when no GID line

    @property
    def gid_ip(self) -> ipaddress.IPv6Address | None:
        """The GID as an address: all zeros means the GID index named no valid GID."""
        if self.gid is None:
            return None
        return ipaddress.IPv6Address(bytes(int(b) for b in self.gid.split(":")))


@dataclass(frozen=True)
class PerftestError:
    kind: str  # one of ERROR_KINDS
    message: str  # the tool's own line(s), stripped, joined by newlines


@dataclass(frozen=True)
class PerftestRun:
    test: str | None  # "RDMA_Write BW Test"; None when the output has no title
    kind: str | None  # "bw" | "lat"
    bidirectional: bool
    role: str | None  # "server" | "client" | None when the output does not say
    device: str | None
    link_type: str | None  # "IB" | "Ethernet" (as printed; --force-link can override)
    transport: str | None  # "IB", "Unknown" (EFA)
    connection_type: str | None  # "RC", "UD", "SRD"
    gid_index: int | None
    qps: int | None
    mtu: int | None  # bytes
    rdma_cm: bool | None
    unit: str | None  # "Gb/sec" | "MB/sec" | "MiB/sec" | "usec" | "cycles"
    rows: tuple[BwRow, ...]
    lat_rows: tuple[LatRow, ...]
    addresses: tuple[QpAddress, ...]
    error: PerftestError | None
    truncated: bool
    warnings: tuple[str, ...]
    notes: tuple[str, ...]  # lines read but not interpreted ("Connected: <date>")
    cut_line: str | None  # a last line the capture cut mid-row, left out of rows
    exit_code: int | None
    info: dict[str, str] = field(default_factory=dict)  # the whole test-info block, as printed
    raw: str = ""

    @property
    def best_average_gbps(self) -> float | None:
        """The highest average bandwidth in Gb/s over the rows of a finished BW table.

        For a single-size run that is its one row; for an -a sweep it is the best size (the plateau
        at large messages), not the largest size's row, which can dip by a few Gb/s run to run.
        Bidirectional runs print local + remote summed, so thresholds must be for both directions.
        None when there is nothing to judge: an error, a cut-off table, or a latency test.
        """
        if self.error is not None or self.truncated or not self.rows:
            return None
        return max(row.average_gbps for row in self.rows)


@dataclass
class _Table:
    shape: str  # "bw" | "lat" | "lat_duration"
    unit: str
    columns: tuple[str, ...]  # lat value columns, in order
    cpu_util: bool
    closed: bool = False


def parse_perftest(text: str, exit_code: int | None = None, *, tool: str = TOOL) -> PerftestRun:
    """One perftest run's facts; an error run has `error` set; non-perftest output raises ParseError."""
    lines = split_lines(text)
    terminated = text.endswith(("\n", "\r"))
    if not any(line.strip() for line in lines):
        raise ParseError(tool, "empty output", text)
    test: str | None = None
    info: dict[str, str] = {}
    info_open = waiting = False
    table: _Table | None = None
    rows: list[BwRow] = []
    lat_rows: list[LatRow] = []
    addresses: list[QpAddress] = []
    error_lines: list[tuple[str, str]] = []  # (kind, line)
    warnings: list[str] = []
    notes: list[str] = []
    roles: list[str] = []
    cut_line: str | None = None
    for i, line in enumerate(lines):
        s = line.strip()
        if not s:
            continue
        # a last line without its newline may be cut; only table and info lines are judged on it
        maybe_cut = i == len(lines) - 1 and not terminated
        if _RESULT_LINE.fullmatch(s):
            info_open = False
            if table is not None:
                table.closed = True
            continue
        if table is not None and not table.closed and s[0].isdigit():
            if maybe_cut:
                cut_line = line
                continue
            if table.shape == "bw":
                rows.append(_bw_row(s, table, tool, text))
            else:
                lat_rows.append(_lat_row(s, table, tool, text))
            continue
        if len(s) > MAX_LINE_CHARS:  # no title, info, address or error line is this long
            (
                error_lines.append(("", s[:MAX_LINE_CHARS] + "…"))
                if error_lines
                else notes.append(s[:MAX_LINE_CHARS] + "…")
            )
            continue
        kind = _error_kind(s)
        if kind is not None:
            error_lines.append((kind, s))
            roles += _error_roles(s, kind)
            continue
        if _WARNING.match(s):
            warnings.append(s)
            continue
        if _BANNER.fullmatch(s):
            waiting = True
            continue
        if _TITLE.fullmatch(s):
            if test is not None:
                raise ParseError(tool, f"a second test title {quote(s)}: two runs in one output", text)
            test, info_open = s, True
            continue
        address = _ADDRESS.fullmatch(s)
        if address:
            info_open = False
            side, lid, qpn, psn = address.groups()
            addresses.append(QpAddress(side, int(lid, 16), int(qpn, 16), int(psn, 16), None))
            continue
        gid = _GID.fullmatch(s)
        if gid and addresses and addresses[-1].gid is None:
            _check_gid_bytes(gid[1], s, tool, text)
            last = addresses[-1]
            addresses[-1] = QpAddress(last.side, last.lid, last.qpn, last.psn, gid[1])
            continue
        if s.startswith(_HEADER_START):
            info_open = False
            if table is not None:
                # --report-both prints a local and a remote table; summing or picking one is a guess
                raise ParseError(tool, "more than one result table", text)
            table = _table(s)
            if table is None:
                if maybe_cut:
                    cut_line = line
                    continue
                raise ParseError(tool, f"result table of unknown shape {quote(s)}", text)
            continue
        if info_open and _FIELDS_LINE.fullmatch(s):
            if maybe_cut:
                cut_line = line
                continue
            info.update((m[1], m[2]) for m in _FIELD.finditer(s))
            continue
        if error_lines:
            error_lines.append(("", s))  # detail printed after the error ("scnt=1, ccnt=1")
        else:
            notes.append(s)

    specific = [kind for kind, _ in error_lines if kind and kind != "other"]
    recognized = test or table or addresses or waiting or specific
    if not recognized:
        raise ParseError(tool, "no perftest test title, result table or known perftest error", text)
    error = None
    if error_lines:
        error = PerftestError(specific[0] if specific else "other", "\n".join(s for _, s in error_lines))
    elif exit_code not in (None, 0):
        error = PerftestError("other", f"exit code {exit_code} and no error line")
    finished = table is not None and table.closed and (rows or lat_rows)
    if waiting:
        roles.insert(0, "server")
    return PerftestRun(
        test=test,
        kind=_kind(test, table),
        bidirectional=bool(test and "Bidirectional" in test),
        role=roles[0] if roles else None,
        device=info.get("Device"),
        link_type=info.get("Link type"),
        transport=info.get("Transport type"),
        connection_type=info.get("Connection type"),
        gid_index=_int_field(info, "GID index", tool, text),
        qps=_int_field(info, "Number of qps", tool, text),
        mtu=_int_field(info, "Mtu", tool, text, suffix="[B]"),
        rdma_cm=_on_off(info.get("rdma_cm QPs")),
        unit=table.unit if table else None,
        rows=tuple(rows),
        lat_rows=tuple(lat_rows),
        addresses=tuple(addresses),
        error=error,
        truncated=error is None and not finished,  # an error explains a missing end; a cut does not
        warnings=tuple(warnings),
        notes=tuple(notes),
        cut_line=cut_line,
        exit_code=exit_code,
        info=info,
        raw=text,
    )


def _check_gid_bytes(gid: str, line: str, tool: str, text: str) -> None:
    """perftest prints each GID byte with %02d of a uint8: 953 is garbage, and an address of it
    cannot be built (QpAddress.gid_ip would raise)."""
    big = next((part for part in gid.split(":") if int(part) > 255), None)
    if big is not None:
        raise ParseError(tool, f"GID byte {big} is not a byte (0-255): {quote(line)}", text)


def _kind(test: str | None, table: _Table | None) -> str | None:
    """ "bw" or "lat", from the title ("... BW Test") or else the table's header."""
    if test is not None:
        return "bw" if test.endswith(" BW Test") else "lat"
    if table is not None:
        return "bw" if table.shape == "bw" else "lat"
    return None


def _error_kind(line: str) -> str | None:
    for pattern, kind in _ERRORS:
        if pattern.match(line):
            return kind
    return None


def _error_roles(line: str, kind: str) -> list[str]:
    """Which side printed an error line, where the line says so."""
    if kind == "connect_failed":
        return ["client"]  # only a client dials the server
    if kind == "listen_failed":
        return ["server"]
    side = _COMPLETION_SIDE.match(line)
    return [side[1]] if side else []


def _table(header: str) -> _Table | None:
    bw = _BW_HEADER.fullmatch(header)
    if bw:
        return _Table("bw", bw[1], (), cpu_util=bool(bw[2]))
    lat = _LAT_HEADER.fullmatch(header)
    if lat:
        return _Table("lat", lat[1], _LAT_COLUMNS + (_LAT_EXT_COLUMNS if lat[2] else ()), cpu_util=False)
    duration = _LAT_DURATION_HEADER.fullmatch(header)
    if duration:
        return _Table("lat_duration", duration[1], _LAT_DURATION_COLUMNS, cpu_util=False)
    return None


def _bw_row(line: str, table: _Table, tool: str, text: str) -> BwRow:
    match = _BW_ROW.fullmatch(line)
    if not match or bool(match[6]) != table.cpu_util:
        raise ParseError(tool, f"unreadable result row {quote(line)}", text)
    peak, average = float(match[3]), float(match[4])
    factor = _TO_GBPS[table.unit]
    return BwRow(
        int(match[1]),
        int(match[2]),
        peak,
        average,
        float(match[5]),
        float(match[6]) if match[6] else None,
        peak * factor,
        average * factor,
    )


def _lat_row(line: str, table: _Table, tool: str, text: str) -> LatRow:
    match = _LAT_ROW.fullmatch(line)
    values = match[3].split() if match else []
    if match is None or len(values) != len(table.columns):  # (a latency table always has columns)
        raise ParseError(tool, f"unreadable latency row {quote(line)}", text)
    return LatRow(int(match[1]), int(match[2]), **dict(zip(table.columns, map(float, values))))


def _int_field(info: dict[str, str], key: str, tool: str, text: str, suffix: str = "") -> int | None:
    value = info.get(key)
    if value is None:
        return None
    digits = value[: -len(suffix)] if suffix and value.endswith(suffix) else value
    if not digits.isascii() or not digits.isdigit():
        raise ParseError(tool, f"{key} {quote(value)} is not a number", text)
    return int(digits)


def _on_off(value: object) -> bool | None:
    return {"ON": True, "OFF": False}.get(value) if isinstance(value, str) else None
