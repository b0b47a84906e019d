"""Issue 32, 3.2 for the misc slice's parsers: a number no tool prints - 400 or 5,000 digits, a digit
of another script that str.isdigit() takes ("²", "١٢") - is refused with ParseError or read as
nothing, never a crash (int() of 4,300+ digits raises ValueError, int("²") too) and never a value no
judge can weigh (a count of 10**400 errors, an inf clock). Every digit run of every seed is replaced
in turn, so each number the parser reads meets each odd form."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterator, Mapping

import pytest

from nodecheck.core.errors import ParseError
from tests.fuzz.targets import TARGETS as ALL_TARGETS
from tests.fuzz.targets import Target

ODD_DIGITS = ("9" * 5000, "9" * 400, "²", "\u0661\u0662")  # 5000 and 400 digits, superscript two, Arabic-Indic 12
LARGEST = 10**30  # jsonsafe.MAX_INT_DIGITS: larger than any count, size or time a tool prints
RUNS = 40  # digit runs tried per seed, spread over it (CI time)
# tests/fuzz/node_misc.py's targets whose seeds hold a number (tools.missing_tools' have none)
TARGETS = [t for t in ALL_TARGETS if t.owner == "misc" and any(re.search("[0-9]", s) for s in t.seeds[:4])]


def _numbers(value: object, depth: int = 0) -> Iterator[int | float]:
    """Every int and float inside a parser's result (dataclasses, mappings, sequences)."""
    if depth > 12:
        return
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        yield value
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            yield from _numbers(getattr(value, field.name), depth + 1)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _numbers(key, depth + 1)
            yield from _numbers(item, depth + 1)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for item in value:
            yield from _numbers(item, depth + 1)


def _spread(runs: list[re.Match], most: int) -> list[re.Match]:
    step = max(1, len(runs) // most)
    return runs[::step][:most]


def _variants(seed: str) -> Iterator[str]:
    for run in _spread(list(re.finditer(r"[0-9]+", seed)), RUNS):
        for odd in ODD_DIGITS:
            yield seed[: run.start()] + odd + seed[run.end() :]


def _weighable(number: int | float) -> bool:
    # abs() first: math.isinf(10**400) would raise OverflowError itself
    return abs(number) <= LARGEST and not (isinstance(number, float) and math.isinf(number))


@pytest.mark.parametrize("target", TARGETS, ids=[t.name for t in TARGETS])
def test_an_odd_number_is_refused_never_a_crash_or_an_unbounded_value(target: Target):
    tried = 0
    for seed in target.seeds[:4]:
        for text in _variants(seed):
            tried += 1
            try:
                result = target.parse(text)
            except ParseError:
                continue
            except Exception as e:
                raise AssertionError(
                    f"{target.name} raised {type(e).__name__}: {str(e)[:200]}\ninput: {text[:300]!r}…"
                ) from e
            wild = [n for n in _numbers(result) if not _weighable(n)]
            shown = f"{str(wild[0])[:40]}…" if wild else ""
            assert not wild, f"{target.name} read a number no judge can weigh ({shown}) from {text[:300]!r}…"
    assert tried, f"{target.name}: no seed holds a digit"
