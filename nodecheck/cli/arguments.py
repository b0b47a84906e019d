"""argparse types for nodecheck's arguments: a bad value is bad input (exit 64) before anything runs.

Kept free of nodecheck's heavier modules: `nodecheck --help` must not import pydantic."""

from __future__ import annotations

import argparse
import math


def whole_number(low: int, high: int):
    """An argparse type: a whole number in low..high."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {text}")
        if value > high:
            raise argparse.ArgumentTypeError(f"must be <= {high}, got {text}")
        return value

    return parse


def positive_int(high: int):
    """An argparse type: a whole number in 1..high."""
    return whole_number(1, high)


def positive_float(high: float):
    """An argparse type: a finite number of seconds in (0, high]; inf and nan are typos, not 'forever'."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number of seconds, got {text}")
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        if value > high:
            raise argparse.ArgumentTypeError(f"must be <= {high:g} seconds, got {text}")
        return value

    return parse


DRAIN_ON = ("fail", "timeout", "unreachable")  # = config.gate_settings.DrainOn (a test holds them together)


def drain_on(text: str) -> tuple[str, ...]:
    words = tuple(w.strip() for w in text.split(",") if w.strip())
    bad = [w for w in words if w not in DRAIN_ON]
    if bad or not words:
        raise argparse.ArgumentTypeError(f"must be a comma-separated list of {', '.join(DRAIN_ON)}; got {text!r}")
    return words


def hostlist(text: str) -> str:
    """An argparse type: --nodes "" (an unset shell variable) must not mean every node."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must name at least one node, got an empty hostlist")
    return text
