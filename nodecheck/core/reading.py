"""One bounded read of an open file, for every reader of a file someone else may have made (a config,
a stored report, a job's counts file): at most `limit` bytes, whatever the file's size said when it
was stat-ed (it may grow between the fstat and the read)."""

from __future__ import annotations

import os

CHUNK = 1 << 20


def read_at_most(fd: int, limit: int) -> bytes:
    """The first `limit` bytes of `fd` (fewer at its end). Callers read limit + 1 to tell "too big"."""
    chunks, left = [], limit
    while left > 0:
        chunk = os.read(fd, min(left, CHUNK))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
