"""What nccl.env's reachability steps (nodecheck/probes/reachability.py) print about themselves: the
`@@nodecheck` lines of the listener's start ("dir PATH", "port N listening|busy|error WHY", "ready",
"nopython", "exited N", "notready"), of its stop ("alive", "exited ...", "nodir", "refused ...") and
of the connect step ("conn I RESULT DETAIL"). Pure."""

from __future__ import annotations

import re

from nodecheck.parsers.pairtest import made_directory

# a TCP port is 5 digits at most and a target's index a few: a longer run is not the step's line (and
# int() of 4,300 digits raises)
_PORT_LINE = re.compile(r"^@@nodecheck port (\d{1,5}) (listening|busy|error) ?(.*)$", re.M | re.ASCII)
_CONN_LINE = re.compile(r"^@@nodecheck conn (\d{1,6}) (\S+) ?(.*)$", re.M | re.ASCII)


def listener_made(start_stdout: str) -> str:
    """The private directory the start step made ("" when it printed none)."""
    return made_directory(start_stdout)


def listened_ports(text: str) -> dict[int, str]:
    """The start step's port lines: port -> "listening", "busy: <why>" or "error: <why>"."""
    return {
        int(m.group(1)): m.group(2) if m.group(2) == "listening" else f"{m.group(2)}: {m.group(3)}"
        for m in _PORT_LINE.finditer(text)
    }


def connection_results(text: str) -> dict[int, tuple[str, str]]:
    """The connect step's result lines: the target's index -> (result, detail); result is ok, refused,
    timeout, unreachable, other, silent or error."""
    return {int(m.group(1)): (m.group(2), m.group(3)) for m in _CONN_LINE.finditer(text)}


def listener_said_nopython(start_stdout: str) -> bool:
    """The start step found no python3 to run the listener with."""
    return "@@nodecheck nopython" in start_stdout


def listener_ready(start_stdout: str) -> bool:
    """The listener bound its ports and said so ("@@nodecheck ready" at the start of a line)."""
    return "\n@@nodecheck ready" in "\n" + start_stdout


def listener_start_state(start_stdout: str) -> str:
    """How a listener that never said ready ended: "exited N", "notready", or "gave no state"."""
    return next(
        (
            ln[len("@@nodecheck ") :]
            for ln in start_stdout.splitlines()
            if ln.startswith(("@@nodecheck exited", "@@nodecheck notready"))
        ),
        "gave no state",
    )


def listener_alive(stop_stdout: str) -> bool:
    """The stop step found the listener still listening (and killed it)."""
    return "@@nodecheck alive" in stop_stdout


def listener_stop_state(stop_stdout: str) -> str:
    """How a listener the stop step did not find alive had ended: "exited ...", "nodir", "refused ...",
    or "gone" when the step said nothing of it."""
    return next(
        (
            ln[len("@@nodecheck ") :]
            for ln in stop_stdout.splitlines()
            if ln.startswith(("@@nodecheck exited", "@@nodecheck nodir", "@@nodecheck refused"))
        ),
        "gone",
    )
