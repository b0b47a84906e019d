"""What the pair test's steps (nodecheck/probes/pairtest.py) print about themselves: the `@@nodecheck`
lines of the server start ("dir PATH", "ready DEV PORT PID", "exited DEV PORT rc=N", "notready DEV
PORT"). Pure; the tools' own output between them is perftest's (nodecheck.parsers.perftest)."""

from __future__ import annotations

import re

# the path of a directory a start step made, as collect gets it back: absolute, one printable line
MADE_DIR = re.compile(r"^/[^\x00-\x1f\x7f]*$")
# a TCP port is 5 digits at most: a longer run is not the step's line (and int() of 4,300 digits raises)
_READY = re.compile(r"^@@nodecheck ready (\S+) (\d{1,5})(?!\d)", re.M | re.ASCII)
_STATE = re.compile(r"^@@nodecheck (ready|exited|notready) (\S+)")


def made_directory(start_stdout: str) -> str:
    """The directory a start step made ("" when it printed none: it failed before, or its output was
    lost, and collect then looks for it by its prefix)."""
    for line in start_stdout.splitlines():
        if line.startswith("@@nodecheck dir "):
            path = line[len("@@nodecheck dir ") :]
            return path if MADE_DIR.match(path) else ""
    return ""


def ready_servers(start_stdout: str) -> dict[str, int]:
    """{device: TCP port} of the servers that listen, whatever became of the start step afterwards."""
    return {m.group(1): int(m.group(2)) for m in _READY.finditer(start_stdout)}


def start_state(start_stdout: str, device: str) -> tuple[str, str]:
    """("ready" | "exited" | "notready" | "missing", the server's output when it exited early)."""
    state, lines, mine = "missing", [], False
    for line in start_stdout.splitlines():
        m = _STATE.match(line)
        if m or line.startswith("@@nodecheck "):
            mine = m is not None and m.group(2) == device
            if m is not None and mine:
                state = m.group(1)
            continue
        if mine:
            lines.append(line)
    return state, "\n".join(lines)
