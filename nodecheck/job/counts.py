"""The per-rank work counts a job will consume: read from the file JOB.yml names, or printed by its
command (run here, argv only, bounded). Errors name the file or the command (ConfigError, exit 64):
a gate that cannot read the counts must not pass the job."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

from nodecheck.core.errors import ConfigError, ParseError
from nodecheck.core.model import excerpt
from nodecheck.job.spec import DataBalance
from nodecheck.parsers.rankcounts import parse_rank_counts

MAX_COUNTS_BYTES = 64 * 1024 * 1024  # a counts file for a million ranks is ~20 MB
STDERR_KEPT = 4096  # the start of a command's stderr, for the message


@dataclass(frozen=True)
class RankCounts:
    counts: dict[int, int]  # rank -> items (blocks, samples) it will consume
    source: str  # "counts.json" or "command: python count.py"


def read_counts(want: DataBalance, cwd: Path) -> RankCounts:
    if want.counts_file is not None:
        path = Path(want.counts_file)
        try:
            if path.stat().st_size > MAX_COUNTS_BYTES:
                raise ConfigError(
                    f"{path.stat().st_size:,} bytes, more than a counts file holds",
                    file=str(path),
                    hint="is data_balance.counts_file the right file?",
                )
            text = path.read_text(encoding="utf-8-sig")  # a spreadsheet's export starts with a BOM
        except (OSError, UnicodeDecodeError) as e:
            why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            raise ConfigError(
                f"cannot read the rank counts: {why}",
                file=str(path),
                hint="data_balance.counts_file is relative to JOB.yml's directory",
            ) from None
        return RankCounts(_parse(text, want, str(path)), path.name)
    argv = want.argv
    command = shlex.join(argv)
    out, err = _run(argv, cwd, want.command_timeout_s, command)
    where = f"data_balance.counts_command ({command})"
    return RankCounts(
        _parse(out, want, where, f"; its stderr: {excerpt(err.strip(), 500)}" if err.strip() else ""),
        f"command: {command}",
    )


def _parse(text: str, want: DataBalance, where: str, said: str = "") -> dict[int, int]:
    try:
        return parse_rank_counts(text, want.format)
    except ParseError as e:
        raise ConfigError(
            f"cannot read the rank counts: {e.reason}{said}",
            file=where,
            hint='JSON {"0": 30871, ...} or [30871, ...], or CSV rank,count lines',
        ) from None


def _run(argv: list[str], cwd: Path, timeout_s: float, command: str) -> tuple[str, str]:
    """(stdout, the start of stderr). Both pipes are read as they fill, stdout up to MAX_COUNTS_BYTES:
    a command that prints without end is killed, not held in memory (communicate() would)."""
    where = "data_balance.counts_command"
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as e:
        raise ConfigError(
            f"cannot run {command}: {e.strerror or e}",
            file=where,
            hint="an argv list or a command line (run without a shell), in JOB.yml's directory",
        ) from None
    out, err = bytearray(), bytearray()
    too_much = threading.Event()

    def read(pipe, into: bytearray, limit: int, overflow: threading.Event | None) -> None:
        while chunk := pipe.read1(65536):
            if len(into) < limit:
                into += chunk[: limit - len(into)]
            elif overflow is not None:
                overflow.set()
                _kill(proc)
                break
        pipe.close()

    readers = [
        threading.Thread(target=read, args=(proc.stdout, out, MAX_COUNTS_BYTES + 1, too_much), daemon=True),
        threading.Thread(target=read, args=(proc.stderr, err, STDERR_KEPT, None), daemon=True),
    ]
    for r in readers:
        r.start()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill(proc)
        proc.wait()
        raise ConfigError(
            f"{command} printed no counts within {timeout_s:g} s; killed",
            file=where,
            hint="raise data_balance.command_timeout_s, or write the counts to a file",
        ) from None
    finally:
        for r in readers:  # a grandchild that keeps a pipe open must not hold us
            r.join(timeout=5)
    if too_much.is_set() or len(out) > MAX_COUNTS_BYTES:
        raise ConfigError(
            f"{command} printed more than {MAX_COUNTS_BYTES:,} bytes; killed",
            file=where,
            hint="is data_balance.counts_command the right command?",
        )
    text, said = (bytes(b).decode("utf-8", "replace") for b in (out, err))
    if proc.returncode != 0:
        said = said.strip() or text.strip() or "(no output)"
        raise ConfigError(f"{command} exited {proc.returncode}: {excerpt(said, 500)}", file=where)
    return text, said


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
