"""Parse `py-spy dump` output for one process into threads and frames, and name its failures.

Formats as py-spy 0.4.3 prints them (recordings in tests/data/py-spy/, see SOURCES.md there):

    Process 6757: /usr/bin/python3 -I train.py --rank 3      (the command may run over several lines)
    Python v3.11.2 (/usr/bin/python3.11)
                                                                 (blank)
    Thread 6757 (idle): "MainThread"                             (no `: "name"` for unnamed threads)
        wait (distributed_c10d.py:13)                            (innermost frame first)
            Arguments:                                           (--locals only; skipped)
                on_blocked: <function at 0x7f48015d9080>
        clock_nanosleep (libc.so.6)                              (--native: a native frame, no line)

The text format is the one nodecheck runs (`py-spy dump --pid P`): unlike `--json` it carries the
command line and the Python version, and it is the capture a person reads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.core.model import one_line
from nodecheck.parsers.lines import split_lines

TOOL = "py-spy"

# py-spy colours through the `console` crate when stdout is a terminal (ssh -t, script): SGR codes
# around every field, and the pty turns \n into \r\n. Both are removed before reading.
_SGR = re.compile(r"\x1b\[[0-9;]*m")
_PROCESS = re.compile(r"Process (\d+): (.*)", re.ASCII)
_PYTHON = re.compile(r"Python v(\d+\.\d+\.\d+\S*)(?: \((.*)\))?", re.ASCII)
# the id is the OS thread id in decimal, or `{:#X}` of the pthread id where py-spy has no OS id
_THREAD = re.compile(r'Thread (\d+|0x[0-9A-F]+) \((idle|active|active\+gil|gil)\)(?:: "(.*)")?', re.ASCII)
# a file cannot hold parentheses here: the last "(...)" on the line is the location, so C++ names
# with parentheses ("operator()") stay in the function; the line is absent when py-spy knows none
_FRAME = re.compile(r"    (\S.*?) \(([^()]+?)(?::(\d+))?\)", re.ASCII)
_LOCALS_HEADER = re.compile(r"        (Arguments|Locals):")
_LOCAL = re.compile(r"            \S.*")
# Python frames name a source file or a pseudo-file ("<string>", "<frozen runpy>"); a native frame
# names a library ("libc.so.6") or a C/Cython source when it has debug info
_PYTHON_FILE = re.compile(r".*\.pyw?|<.*>")


@dataclass(frozen=True)
class PyFrame:
    function: str  # "all_reduce"; Python >= 3.11 qualifies methods: "Thread.run"
    file: str  # as py-spy shows it: short filename ("distributed_c10d.py") or path
    line: int | None  # None: py-spy printed no line (native frames, line 0)
    native: bool = False  # a native (C/C++) frame from --native

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{self.function} ({where})"


@dataclass(frozen=True)
class PyThread:
    thread_id: str  # as py-spy shows it: the OS thread id "6757", or "0x7F..." without one
    name: str | None  # "MainThread"; None for a thread `threading` does not know
    status: str  # "idle", "active" or "active+gil" ("gil" in py-spy's short form)
    frames: tuple[PyFrame, ...]  # innermost first, as py-spy prints


@dataclass(frozen=True)
class PyStacks:
    pid: int
    command: str  # the command line as py-spy prints it
    python: str  # "3.11.2"
    # in the text's order: py-spy prints CPython's thread list reversed, so the main thread, the
    # oldest, comes first
    threads: tuple[PyThread, ...]
    python_path: str | None = None  # "/usr/bin/python3.11" when printed


def parse_pyspy_dump(text: str) -> PyStacks:
    """One process's `py-spy dump` text; ParseError on empty, cut-off, foreign or multi-process text."""
    lines = _SGR.sub("", text).replace("\r\n", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final newline, not an empty last line
    if not any(line.strip() for line in lines):
        raise ParseError(TOOL, "empty output", text)
    head = _PROCESS.fullmatch(lines[0])
    if not head:
        raise ParseError(TOOL, "does not start with 'Process <pid>: <command>'", _around(lines, 0))
    version_at = next((i for i, line in enumerate(lines) if _PYTHON.fullmatch(line)), None)
    if version_at is None:
        raise ParseError(TOOL, "no 'Python v<version>' line after the command", text)
    # python's argv may hold newlines (python -c '...'): everything up to the version line is command
    command = "\n".join([head[2], *lines[1:version_at]])
    version = _PYTHON.fullmatch(lines[version_at])
    assert version is not None  # version_at is the line it matched
    threads = _threads(lines, version_at + 1, text)
    return PyStacks(pid=int(head[1]), command=command, python=version[1], threads=threads, python_path=version[2])


def pyspy_failure(stdout: str, stderr: str, exit_code: int | None) -> str:
    """One line saying why py-spy gave no stacks, from its own error text (timeouts: the caller's)."""
    error, causes = _error(stderr) or _error(stdout) or ("", ())
    told = " ".join((error, *causes))
    if "Failed to get process executable name" in error and "No such file or directory" in told:
        return "no such process"  # /proc/<pid>/exe is gone
    if error.startswith("Permission Denied"):
        return "permission denied (ptrace)"  # py-spy's own wording; needs CAP_SYS_PTRACE/root
    if "Failed to find python version" in error:
        return "not a Python process"  # or a Python py-spy cannot read
    if "Failed to suspend process" in told:
        # PTRACE_SEIZE fails with EPERM when another tracer (strace, gdb) holds the process;
        # a SIGSTOPped process answers the interrupt with a group-stop py-spy does not expect
        if "EPERM" in told:
            return "cannot stop the process for ptrace: EPERM (another tracer attached?)"
        if "SIGSTOP" in told:
            return "cannot stop the process for ptrace: it is stopped (SIGSTOP/T state)"
        return one_line(f"cannot stop the process for ptrace: {told}")
    if error:
        return one_line(f"py-spy exit {exit_code}: {told}")
    if exit_code is None:
        # killed by the caller's timeout: how far stdout got says where py-spy was waiting
        if _PROCESS.match(_SGR.sub("", stdout)) and "\nThread " not in stdout:
            return "no stacks: py-spy printed the header and was waiting to stop the process"
        return "py-spy did not exit"
    if exit_code == 0:
        return "py-spy exited 0" + ("" if stdout.strip() else " with no output")
    return one_line(f"py-spy exit {exit_code}" + (f": {stderr.strip()}" if stderr.strip() else ""))


def main_thread(stacks: PyStacks) -> PyThread | None:
    """The thread that matters for grouping: the one named MainThread, else the first (the oldest)."""
    named = [t for t in stacks.threads if t.name == "MainThread"]
    return named[0] if named else (stacks.threads[0] if stacks.threads else None)


def _threads(lines: list[str], start: int, text: str) -> tuple[PyThread, ...]:
    threads: list[PyThread] = []
    header: re.Match | None = None
    frames: list[PyFrame] = []
    in_locals = False
    for i in range(start, len(lines)):
        line = lines[i]
        if not line.strip():
            continue  # after the header; between threads in some builds
        if m := _THREAD.fullmatch(line):
            if header:
                threads.append(_thread(header, frames))
            header, frames, in_locals = m, [], False
        elif line.startswith("Thread "):
            raise ParseError(TOOL, "unreadable thread line (an unknown status?)", _around(lines, i))
        elif _PROCESS.fullmatch(line):
            raise ParseError(TOOL, "more than one process (--subprocesses?); one pid per call", _around(lines, i))
        elif header is None:
            raise ParseError(TOOL, "expected 'Thread <id> (<status>)' after the header", _around(lines, i))
        elif m := _FRAME.fullmatch(line):
            frames.append(_frame(m[1], m[2], int(m[3]) if m[3] else None))
            in_locals = False
        elif frames and _LOCALS_HEADER.fullmatch(line):
            in_locals = True  # --locals: values are not facts nodecheck uses
        elif in_locals and _LOCAL.fullmatch(line):
            continue
        else:
            raise ParseError(TOOL, "unreadable line in a thread's stack", _around(lines, i))
    if header is None:
        # a frozen or D-state target: py-spy prints the header, then waits to stop it
        raise ParseError(TOOL, "output ends after the header: no thread stacks", text)
    if not frames:
        # a cut between a thread line and its first frame; no thread of a running Python is empty
        raise ParseError(TOOL, f"output ends at thread {header[1]} before any frame", text)
    threads.append(_thread(header, frames))
    return tuple(threads)


def _thread(header: re.Match, frames: list[PyFrame]) -> PyThread:
    return PyThread(thread_id=header[1], name=header[3], status=header[2], frames=tuple(frames))


def _frame(function: str, file: str, line: int | None) -> PyFrame:
    return PyFrame(function=function, file=file, line=line, native=not _PYTHON_FILE.fullmatch(file))


def _error(text: str) -> tuple[str, tuple[str, ...]] | None:
    """py-spy's anyhow error: 'Error: X' (or 'Permission Denied: ...'), then numbered causes."""
    lines = [line.strip() for line in split_lines(_SGR.sub("", text))]
    for i, line in enumerate(lines):
        if line.startswith(("Error: ", "Permission Denied")):
            causes = []
            for cause in lines[i + 1 :]:
                if cause.startswith("Stack backtrace:"):
                    break  # RUST_BACKTRACE=1: frames of py-spy itself
                if m := re.fullmatch(r"\d+: (.*)", cause, re.ASCII):
                    causes.append(m[1])
            return line.removeprefix("Error: "), tuple(causes)
    return None


def _around(lines: list[str], i: int) -> str:
    return "\n".join(lines[max(0, i - 2) : i + 3])
