"""The decoder of what the probes' `escaped` / `env_matching` shell functions print (probes/shell.py:
every byte outside printable ASCII, "\\" and "@" as \\xHH)."""

from __future__ import annotations

import re

_ESCAPE = re.compile(r"\\x([0-9a-fA-F]{2})")


def unescape(text: str) -> str:
    """What `escaped` printed -> the value (UTF-8; an undecodable byte stays visible as \\xHH).
    ValueError for text no escaping function prints (non-ASCII: an older or foreign probe)."""
    if not text.isascii():
        raise ValueError(f"not escaped: {text[:60]!r}")
    raw = _ESCAPE.sub(lambda m: chr(int(m[1], 16)), text).encode("latin-1")
    return raw.decode("utf-8", "backslashreplace")
