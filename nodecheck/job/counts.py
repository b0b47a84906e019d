"""The per-rank work counts a job will consume: read from the file JOB.yml names, or printed by its
command (argv only, bounded). Errors name the file or the command (ConfigError, exit 64): a gate that
cannot read the counts must not pass the job.

nodecheck runs as root, and a JOB.yml is its user's: so the counts are run and read as the job's user,
whom the caller names (`user`: job.command's job_user, JOB.yml's owner as it was read unless root,
else the Slurm job's user). The command runs with that user's uid, gid and groups, in its own
session, in JOB.yml's directory, with a clean environment (root's may hold secrets); the file is opened
by a child that has become that user, never through a symbolic link, a regular file of at most
MAX_COUNTS_BYTES. So what a message quotes, that user could read. A user this machine does not know is
refused, never run as root.

With no job's user (root owns JOB.yml and no Slurm job names a user) the JOB.yml is the operator's own
file, as trusted as the command line that named it: its counts run and are read as nodecheck runs, with
nodecheck's environment. Nor does a nodecheck that is not root switch: it has no rights but its caller's."""

from __future__ import annotations

import errno
import os
import pwd
import select
import shlex
import signal
import stat
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from nodecheck.core.errors import ConfigError, ParseError
from nodecheck.core.model import excerpt
from nodecheck.core.reading import read_at_most
from nodecheck.job.spec import DataBalance
from nodecheck.parsers.rankcounts import parse_rank_counts
from nodecheck.transport import children

MAX_COUNTS_BYTES = 64 * 1024 * 1024  # a counts file for a million ranks is ~20 MB
STDERR_KEPT = 4096  # the start of a command's stderr, for the message
AS_USER_TIMEOUT_S = 30.0  # a child that opens the file (or enters the directory) as the user; a hung mount
USER_PATH = "/usr/local/bin:/usr/bin:/bin"  # the job's user's command gets this PATH, not root's
# O_NOFOLLOW: a symbolic link is refused, not followed; O_NONBLOCK: a FIFO with no writer opens (and is
# then refused as not a regular file) instead of holding job-check; O_NOCTTY: a terminal is not taken.
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


@dataclass(frozen=True)
class RankCounts:
    counts: dict[int, int]  # rank -> items (blocks, samples) it will consume
    source: str  # "counts.json" or "command: python count.py"


@dataclass(frozen=True)
class JobAccount:
    """The job's user as this machine knows them: whom the counts are run and read as."""

    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]  # supplementary groups, as login would set them (getgrouplist)
    home: str

    def environment(self) -> dict[str, str]:
        """What the user's command gets: a login's basics, nothing of root's (tokens, SSH agent, ...)."""
        return {
            "PATH": USER_PATH,
            "HOME": self.home,
            "USER": self.name,
            "LOGNAME": self.name,
            "LANG": "C.UTF-8",
        }


class _Refused(Exception):
    """Why a child acting as the job's user could not do its task (strerror-like, never content)."""


def read_counts(want: DataBalance, cwd: Path, *, user: str) -> RankCounts:
    """The counts, run or read as `user` (a uid or a user name; "" = no job's user: the operator's own
    JOB.yml, run and read as nodecheck runs). `cwd`: JOB.yml's directory, where the command runs."""
    field = "counts_file" if want.counts_file is not None else "counts_command"
    account = job_account(user, f"data_balance.{field}")
    if want.counts_file is not None:
        return _from_file(want, Path(want.counts_file), account)
    return _from_command(want, cwd, account)


def job_account(user: str, where: str) -> JobAccount | None:
    """`user` resolved on this machine; None when there is none to switch to: no job's user, root, or
    nodecheck is not root (it can lend no rights but its caller's). An unknown user is a ConfigError:
    their counts are never run or read as root instead."""
    if not user or os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwuid(int(user)) if user.isascii() and user.isdigit() else pwd.getpwnam(user)
    except (KeyError, OverflowError, ValueError):
        raise ConfigError(
            f"the job's user {user} is not a user on this machine: the counts are run and read only as "
            "the job's user (JOB.yml's owner, else the Slurm job's user), never as root",
            file=where,
            hint="run job-check where the job's users are known (as on the login nodes), or fix JOB.yml's owner",
        ) from None
    if entry.pw_uid == 0:
        return None
    groups = tuple(os.getgrouplist(entry.pw_name, entry.pw_gid))
    return JobAccount(entry.pw_name, entry.pw_uid, entry.pw_gid, groups, entry.pw_dir)


def _from_file(want: DataBalance, path: Path, account: JobAccount | None) -> RankCounts:
    as_whom = f" as {account.name}" if account else ""
    try:
        if account is None:
            raw = _read_regular(str(path), follow=True)
        else:
            raw = _as_user(account, lambda: _read_regular(str(path), follow=False), MAX_COUNTS_BYTES + 1)
        text = raw.decode("utf-8-sig")  # a spreadsheet's export starts with a BOM
    except (_Refused, UnicodeDecodeError) as e:
        raise ConfigError(
            f"cannot read the rank counts{as_whom}: {e}",
            file=str(path),
            hint="data_balance.counts_file is relative to JOB.yml's directory"
            + (f", and read as the job's user ({account.name}): a regular file they may read" if account else ""),
        ) from None
    return RankCounts(_parse(text, want, str(path)), path.name)


def _from_command(want: DataBalance, cwd: Path, account: JobAccount | None) -> RankCounts:
    argv = want.argv
    command = shlex.join(argv)
    if account is not None:
        _enter_as(account, cwd)
    out, err = _run(argv, cwd, want.command_timeout_s, command, account)
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


def _read_regular(path: str, *, follow: bool) -> bytes:
    """The file's bytes, at most MAX_COUNTS_BYTES: a regular file (checked on the file as opened), and
    with follow=False not a symbolic link. _Refused says why not."""
    try:
        fd = os.open(path, _OPEN_FLAGS | (0 if follow else os.O_NOFOLLOW))
    except OSError as e:
        if e.errno == errno.ELOOP and not follow:
            raise _Refused("it is a symbolic link: name the file it points to") from None
        raise _Refused(e.strerror or str(e)) from None
    try:
        size = os.fstat(fd)
        if not stat.S_ISREG(size.st_mode):
            raise _Refused("not a regular file")
        if size.st_size > MAX_COUNTS_BYTES:
            raise _Refused(f"{size.st_size:,} bytes, more than a counts file holds")
        data = read_at_most(fd, MAX_COUNTS_BYTES + 1)
        if len(data) > MAX_COUNTS_BYTES:  # it grew after the fstat
            raise _Refused(f"more than {MAX_COUNTS_BYTES:,} bytes, more than a counts file holds")
        return data
    except OSError as e:
        raise _Refused(e.strerror or str(e)) from None
    finally:
        os.close(fd)


def _enter_as(account: JobAccount, cwd: Path) -> None:
    """Can the user enter JOB.yml's directory? Popen changes into `cwd` before it drops to the user, so
    the answer is asked here, as them, for a clear message (root's chdir lends them nothing: every
    lookup from there is still checked against their rights)."""

    def enter() -> bytes:
        try:
            os.chdir(cwd)
        except OSError as e:
            raise _Refused(e.strerror or str(e)) from None
        return b""

    try:
        _as_user(account, enter, 0)
    except _Refused as e:
        raise ConfigError(
            f"{account.name} cannot enter {cwd} (JOB.yml's directory, where the command runs): {e}",
            file="data_balance.counts_command",
            hint="the command runs as JOB.yml's owner (the job's user): let them enter its directory",
        ) from None


def _as_user(account: JobAccount, task: Callable[[], bytes], limit: int) -> bytes:
    """task() run in a forked child that has become `account` (groups, then gid, then uid: only root may
    set the first two), its bytes (at most `limit`) sent back through a pipe. The child never execs
    and calls only os functions (no import, no lock a thread could hold). _Refused: what the task, the
    switch or AS_USER_TIMEOUT_S refused."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: it ends in os._exit, whatever happens
        code = 2
        try:
            os.close(read_end)
            os.setgroups(list(account.groups))
            os.setresgid(account.gid, account.gid, account.gid)
            os.setresuid(account.uid, account.uid, account.uid)
            code = 3  # switched: what fails now is the task's
            try:
                payload, code = task(), 0
            except _Refused as e:
                payload, code = str(e).encode(), 1
            view = memoryview(payload)
            while view:
                view = view[os.write(write_end, view) :]
        finally:
            os._exit(code)
    os.close(write_end)
    try:
        got = _drain(read_end, limit + STDERR_KEPT, time.monotonic() + AS_USER_TIMEOUT_S)
    except BaseException:  # Ctrl-C, SIGTERM: the child goes too
        _stop(pid)
        raise
    finally:
        os.close(read_end)
    if got is None:
        _stop(pid)
        raise _Refused(f"no answer within {AS_USER_TIMEOUT_S:g} s (a hung filesystem?); stopped")
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code == 1:
        raise _Refused(got.decode("utf-8", "replace"))
    if code == 2:
        raise _Refused(f"could not switch to {account.name} (uid {account.uid})")
    if code != 0:
        raise _Refused(f"failed as {account.name} (exit {code})")
    return got


def _stop(pid: int) -> None:
    """Kill the child; it is reaped when it can die (a read stuck on a hung mount dies when that returns)."""
    os.kill(pid, signal.SIGKILL)
    threading.Thread(target=os.waitpid, args=(pid, 0), daemon=True).start()


def _drain(fd: int, limit: int, deadline: float) -> bytes | None:
    """What the pipe holds until its end (at most `limit` bytes kept); None past the deadline."""
    got = bytearray()
    while (left := deadline - time.monotonic()) > 0:
        if not select.select([fd], [], [], left)[0]:
            break
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return bytes(got)
        got += chunk[: max(0, limit - len(got))]
    return None


def _run(argv: list[str], cwd: Path, timeout_s: float, command: str, account: JobAccount | None) -> tuple[str, str]:
    """(stdout, the start of stderr), run as `account` (None: as nodecheck runs). Both pipes are read as
    they fill, stdout up to MAX_COUNTS_BYTES: a command that prints without end is killed, not held in
    memory (communicate() would)."""
    where = "data_balance.counts_command"
    as_user: dict = {}
    if account is not None:
        as_user = dict(
            user=account.uid, group=account.gid, extra_groups=list(account.groups), env=account.environment()
        )
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group: _kill reaches whatever it started
            **as_user,
        )
    except OSError as e:
        raise ConfigError(
            f"cannot run {command}{f' as {account.name}' if account else ''}: {e.strerror or e}",
            file=where,
            hint="an argv list or a command line (run without a shell), in JOB.yml's directory"
            + (f", as the job's user; PATH is {USER_PATH}" if account else ""),
        ) from None
    children.started(proc)
    try:
        return _answer(proc, command, timeout_s)
    finally:
        children.ended(proc)


def _answer(proc: subprocess.Popen, command: str, timeout_s: float) -> tuple[str, str]:
    where = "data_balance.counts_command"
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
