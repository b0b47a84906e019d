"""Per-rank work counts (how many packed blocks / samples each rank will consume) -> {rank: count}.

Accepted, as a data pipeline writes them:
  JSON object  {"0": 30871, "1": 30850, ...}     (rank keys as decimal strings)
  JSON array   [30871, 30850, ...]                (index = rank)
  CSV          rank,count lines, with or without a header line (any names), blank lines ignored
Anything else (a negative or non-integer count, a rank twice, a rank that is not a decimal number)
is a ParseError: a count nodecheck misreads would make the balance verdict wrong either way.
"""

from __future__ import annotations

import csv
import json
import re
import reprlib
from typing import Literal

from nodecheck.core.errors import ParseError

TOOL = "rank counts"
_DECIMAL = re.compile(r"(?:0|[1-9][0-9]*)", re.ASCII)
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def parse_rank_counts(text: str, fmt: Literal["auto", "json", "csv"] = "auto") -> dict[int, int]:
    """{rank: count}, ranks ascending."""
    if not text.strip():
        raise ParseError(TOOL, "empty: no rank counts", text)
    if fmt == "auto":
        fmt = "json" if text.lstrip()[:1] in ("{", "[") else "csv"
    counts = _json(text) if fmt == "json" else _csv(text)
    if not counts:
        raise ParseError(TOOL, "no rank counts in it", text)
    return dict(sorted(counts.items()))


def _json(text: str) -> dict[int, int]:
    def pairs(items: list[tuple[str, object]]) -> dict:
        seen: dict = {}
        for key, value in items:
            if key in seen:
                raise ParseError(TOOL, f"rank {_shown(key)} appears twice", text)
            seen[key] = value
        return seen

    try:
        data = json.loads(text, object_pairs_hook=pairs)
    except json.JSONDecodeError as e:
        raise ParseError(TOOL, f"not JSON: {e.msg} at line {e.lineno} column {e.colno}", text) from None
    except RecursionError:  # json's C decoder stops at the interpreter's depth limit
        raise ParseError(TOOL, "not rank counts: JSON nested too deeply", text) from None
    if isinstance(data, list):
        return {rank: _count(value, rank, text) for rank, value in enumerate(data)}
    if not isinstance(data, dict):
        raise ParseError(TOOL, f'expected a JSON object {{"rank": count}} or an array, got {type(data).__name__}', text)
    counts: dict[int, int] = {}
    for key, value in data.items():
        rank = _rank(key.strip(), text)
        if rank in counts:  # "1" and " 1"
            raise ParseError(TOOL, f"rank {rank} appears twice", text)
        counts[rank] = _count(value, rank, text)
    return counts


def _csv(text: str) -> dict[int, int]:
    counts: dict[int, int] = {}
    rows = [(n, [c.strip() for c in row]) for n, row in _csv_rows(text) if any(c.strip() for c in row)]
    for i, (line, row) in enumerate(rows):
        if len(row) != 2:
            raise ParseError(
                TOOL, f"line {line}: expected rank,count, got {len(row)} fields: {_shown(','.join(row))}", text
            )
        if i == 0 and not _DECIMAL.fullmatch(row[0]) and not row[0].lstrip("-").isdigit():
            continue  # a header: rank,count / rank,blocks / ...
        rank = _rank(row[0], text, line)
        if rank in counts:
            raise ParseError(TOOL, f"line {line}: rank {rank} appears twice", text)
        counts[rank] = _count(row[1], rank, text, line, csv_text=True)
    return counts


def _csv_rows(text: str) -> list[tuple[int, list[str]]]:
    """(line number, fields) per line. Lines end at \n, \r\n or a bare \r (csv.reader over the
    whole text raised csv.Error on a bare \r); a rank,count line holds no quoted line break, and
    quoting that does not close on its line is a ParseError, as is a field over csv's size limit."""
    rows = []
    for number, line in enumerate(_LINE_BREAK.split(text), 1):  # not splitlines: \x0c is no line break
        try:
            rows.append((number, next(csv.reader([line], strict=True), [])))
        except csv.Error as e:
            raise ParseError(TOOL, f"line {number}: not rank,count CSV ({e}): {_shown(line)}", text) from None
    return rows


def _shown(value: object) -> str:
    """A value for a message, bounded: a counts command's output may be anything, of any size."""
    return reprlib.repr(value)


def _rank(key: str, text: str, line: int | None = None) -> int:
    where = f"line {line}: " if line else ""
    if not _DECIMAL.fullmatch(key):
        raise ParseError(TOOL, f"{where}rank {_shown(key)} is not a rank (0, 1, 2, ...)", text)
    return int(key)


def _count(value: object, rank: int, text: str, line: int | None = None, csv_text: bool = False) -> int:
    where = f"line {line}: " if line else ""
    if csv_text:
        if not isinstance(value, str) or not re.fullmatch(r"-?[0-9]+", value, re.ASCII):
            raise ParseError(TOOL, f"{where}rank {rank}: count {_shown(value)} is not an integer", text)
        value = int(value)
    elif isinstance(value, bool) or not isinstance(value, int):
        raise ParseError(TOOL, f"{where}rank {rank}: count {_shown(value)} is not an integer", text)
    if value < 0:
        raise ParseError(TOOL, f"{where}rank {rank}: count {value} is negative", text)
    return value
