"""The probe of a custom check (`command.<label>` in a playbook): a site's own command, run on the
node without a shell unless the playbook says `shell: true`, its output bounded and its exit code
reported in band, so a failing command is judged, not mistaken for a broken probe."""

from __future__ import annotations

from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.core.model import Probe

OUTPUT_MAX = 65536  # bytes of the command's output (stdout and stderr together) that are kept
DEFAULT_TIMEOUT_S = 10.0  # a health check that needs longer belongs in a sweep, with its own timeout_s
EXIT_MARK = "\n@@nodecheck exit "

# $1: how many bytes to keep; the rest of the arguments are the command, exec'd as given ("$@"): no
# value of the playbook is ever part of this text. stdin is /dev/null (a command that reads a terminal
# must not wait for one). head keeps OUTPUT_MAX + 1 bytes (one more says "cut"), and cat drains the
# rest so the command is not killed by SIGPIPE and its own exit code is the one reported. The exit
# code leaves through fd 5, which the command cannot write to
# (fds 4 and 5 are closed for it): it is the last line printed.
COMMAND_SCRIPT = r"""
keep=$1; shift
exec 4>&1
rc=$( { { "$@" 2>&1 </dev/null 4>&- 5>&-; echo "$?" >&5; } | { head -c "$keep" >&4; cat >/dev/null; }; } 5>&1 )
printf '\n@@nodecheck exit %s\n' "$rc"
exit 0
"""


def command_probe(argv: tuple[str, ...], timeout_s: float = DEFAULT_TIMEOUT_S) -> Probe:
    """The probe that runs `argv` on a node. The playbook renames it per label (command:<label>)."""
    return Probe(
        "command", ("sh", "-c", COMMAND_SCRIPT, "nodecheck-command", str(OUTPUT_MAX + 1), *argv), timeout_s=timeout_s
    )


@dataclass(frozen=True)
class CommandRun:
    exit_code: int
    output: str  # at most OUTPUT_MAX characters
    cut: bool  # the command printed more than OUTPUT_MAX bytes


def parse_command_output(text: str) -> CommandRun:
    """The command's output and exit code from what the probe printed; ParseError when the exit
    line is missing (the probe was cut off) or unreadable."""
    body, mark, tail = text.rpartition(EXIT_MARK)
    if not mark:
        raise ParseError("command", "no exit code line: the probe's output was cut off", text[-2000:])
    code = tail.strip()
    if not code.isdigit():
        raise ParseError("command", f"unreadable exit code {code[:40]!r}", text[-2000:])
    cut = len(body.encode("utf-8", "surrogateescape")) > OUTPUT_MAX
    return CommandRun(int(code), body[:OUTPUT_MAX] if cut else body, cut)
