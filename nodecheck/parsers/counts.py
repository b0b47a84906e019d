"""Decimal counts as the kernel and its tools print them, bounded to what a counter can hold.

Every count nodecheck reads from /proc, sysfs, lscpu or ps is at most a 64-bit unsigned value
(20 digits). A longer run of digits is no such count, and carrying it into a judge fails there
instead: float arithmetic on a 400-digit int raises OverflowError ("internal error"), and int() of
more than 4300 digits raises ValueError (Python's int max str digits). So the digits are checked
before int() is called, and the caller refuses the value with ParseError, naming it.
"""

from __future__ import annotations

U64_MAX = 2**64 - 1
U64_DIGITS = len(str(U64_MAX))  # 20
TOO_BIG = "at most 2^64-1"  # said in every refusal: what a count may be


def u64(text: str) -> int | None:
    """The value of `text` when it is 1 to 20 ASCII digits and fits 64 bits; None otherwise
    (a sign, a space, another script's digits, or more than a counter holds)."""
    if not 0 < len(text) <= U64_DIGITS or not text.isascii() or not text.isdigit():
        return None
    value = int(text)
    return value if value <= U64_MAX else None
