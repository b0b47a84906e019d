"""Mutations of real outputs, as hypothesis strategies; and the fuzz settings every property uses.

A mutation is drawn as a few small operations (cut here, drop that line, ...) applied to a seed in
plain Python: hypothesis draws positions and choices, never the whole text, so a 40 KB corpus file
costs no more to mutate than a short one, and a failure shrinks to the fewest, simplest operations.

Text reaches a parser the way the transports hand it over: bytes decoded as UTF-8 with
errors="replace" (transport/ssh.py, transport/local.py), so a non-UTF-8 byte arrives as U+FFFD.
"""

from __future__ import annotations

import os
import re

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

# NODECHECK_FUZZ_EXAMPLES=2000 runs every property longer (tests/fuzz/README.md)
EXAMPLES = int(os.environ.get("NODECHECK_FUZZ_EXAMPLES", "50"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=EXAMPLES <= 50,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def decoded(raw: bytes) -> str:
    """What a transport makes of the bytes a tool printed."""
    return raw.decode("utf-8", errors="replace")


# characters str.splitlines() splits on that a tool's own line reader does not: a key-value line
# with one of them inside becomes two lines, the second starting mid-line (issue 17: parse_q)
LINE_BREAKERS = ("\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")
ODD_NUMBERS = (
    "nan",
    "NaN",
    "inf",
    "-inf",
    "Infinity",
    "-1",
    "-0",
    "0",
    "1e309",
    "18446744073709551616",
    "9" * 400,
    "0x7fffffff",
    "1,000",
    "1.2.3",
    "",
    " ",
    "N/A",
    "[N/A]",
    "\u0661\u0662",
    "\uff11",
)
GARBAGE = (
    "\x00",
    "\ufffd",
    "\ufffd\ufffd\ufffd",
    "\x1b[31m",
    "\t",
    "  ",
    ":",
    "=",
    "@@nodecheck ",
    "@@nodecheck end x rc=0",
    "\\",
    '"',
    "{",
    "[",
    "(",
    "#",
    "\u200b",
    "\U0001f600",
    "é",
)
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def _lines(text: str) -> list[str]:
    return text.split("\n")


def _cut(text: str, at: float) -> str:
    return text[: int(len(text) * at)]


def _drop(text: str, i: int) -> str:
    lines = _lines(text)
    del lines[i % len(lines)]
    return "\n".join(lines)


def _duplicate(text: str, i: int) -> str:
    lines = _lines(text)
    i %= len(lines)
    lines.insert(i, lines[i])
    return "\n".join(lines)


def _swap(text: str, i: int, j: int) -> str:
    lines = _lines(text)
    i, j = i % len(lines), j % len(lines)
    lines[i], lines[j] = lines[j], lines[i]
    return "\n".join(lines)


def _insert(text: str, at: float, what: str) -> str:
    position = int(len(text) * at)
    return text[:position] + what + text[position:]


def _number(text: str, i: int, replacement: str) -> str:
    found = list(_NUMBER.finditer(text))
    if not found:
        return text
    match = found[i % len(found)]
    return text[: match.start()] + replacement + text[match.end() :]


def _all_numbers(text: str, replacement: str) -> str:
    return _NUMBER.sub(replacement, text)


def _bytes_in(text: str, at: float, raw: bytes) -> str:
    """Bytes that are not UTF-8 inside the output, as the transport decodes them."""
    data = text.encode("utf-8")
    position = int(len(data) * at)
    return decoded(data[:position] + raw + data[position:])


def _spaces_to_tabs(text: str) -> str:
    return re.sub(r" {2,}", "\t", text)


_position = st.floats(min_value=0.0, max_value=1.0)
_index = st.integers(min_value=0, max_value=10_000)
_operation = st.one_of(
    st.tuples(st.just(_cut), _position),
    st.tuples(st.just(_drop), _index),
    st.tuples(st.just(_duplicate), _index),
    st.tuples(st.just(_swap), _index, _index),
    st.tuples(st.just(_insert), _position, st.sampled_from(LINE_BREAKERS + GARBAGE)),
    st.tuples(st.just(_insert), _position, st.text(max_size=12)),
    st.tuples(st.just(_number), _index, st.sampled_from(ODD_NUMBERS)),
    st.tuples(st.just(_all_numbers), st.sampled_from(ODD_NUMBERS)),
    st.tuples(st.just(_bytes_in), _position, st.binary(min_size=1, max_size=8)),
    st.just((str.replace, "\n", "\r\n")),
    st.just((str.replace, "\n", "\r")),
    st.just((_spaces_to_tabs,)),
    st.just((str.strip,)),
    st.just((str.upper,)),
)


def _apply(text: str, operations) -> str:
    for operation, *args in operations:
        text = operation(text, *args)
    return text


@st.composite
def mutated(draw, seeds: tuple):
    """A seed changed by one to four operations; str seeds stay str, bytes seeds stay bytes."""
    seed = draw(st.sampled_from(seeds))
    binary = isinstance(seed, bytes)
    text = seed.decode("latin-1") if binary else seed  # latin-1: every byte one character, reversible
    operations = draw(st.lists(_operation, min_size=1, max_size=4))
    result = _apply(text, operations)
    return result.encode("latin-1", errors="replace") if binary else result


def wholly_odd(binary: bool = False):
    """Outputs with nothing of the tool's in them: empty, whitespace, separators, binary garbage."""
    text = st.one_of(
        st.just(""),
        st.text(alphabet=" \t\n\r\v\f", max_size=40),
        st.text(alphabet="".join(LINE_BREAKERS) + " x:=", max_size=40),
        st.binary(max_size=300).map(decoded),
        st.text(max_size=200),
    )
    if binary:
        return st.one_of(text.map(str.encode), st.binary(max_size=300))
    return text
