"""JSON that a tool printed, read with the limits a judge needs: no integer too long to be a
count (int() of a 5000-digit string raises ValueError, float() of a 400-digit one OverflowError),
and no NaN/Infinity (json accepts them; they compare false with every threshold) unless the caller
checks each number itself and names the field (finite_numbers=False)."""

from __future__ import annotations

import json
from typing import Any

MAX_INT_DIGITS = 30  # 10**30: larger than any byte count, rank or counter


class JsonRefused(ValueError):
    """The text is not JSON a judge can use; the message says why."""


def _no_constant(name: str) -> Any:
    raise JsonRefused(f"non-finite number {name}")


def _bounded_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise JsonRefused(f"integer of {len(digits)} digits")
    return int(digits)


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):  # 1e999 overflows to inf
        raise JsonRefused(f"number {text[:40]} out of range")
    return value


def loads(text: str, *, finite_numbers: bool = True) -> Any:
    """json.loads with the limits above. Raises json.JSONDecodeError (not JSON), JsonRefused (JSON
    nodecheck will not judge) or RecursionError (nested past the interpreter's limit)."""
    if not finite_numbers:
        return json.loads(text, parse_int=_bounded_int)
    return json.loads(text, parse_constant=_no_constant, parse_int=_bounded_int, parse_float=_finite_float)


# a JSON value's Python type in words, for parse errors ("expected a number, got a string")
KIND_WORDS: dict[type, str] = {
    dict: "an object",
    list: "an array",
    str: "a string",
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    type(None): "null",
}


def kind_of(value: Any) -> str:
    """What a JSON value is, in words, for a parse error: "an object", "an array", "null"."""
    return KIND_WORDS.get(type(value), type(value).__name__)
