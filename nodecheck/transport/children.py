"""Every process group nodecheck starts on this machine, so that none outlives it.

Each local probe, Slurm command, alert hook and counts command runs in its own session (its own
process group), so a timeout can end the tool and everything it started. The same groups must end
when nodecheck ends for any other reason: a first Ctrl-C or SIGTERM (the run stops, the report is
written, then the groups still running are ended), a second one, an exception, a normal exit whose
deadline left a probe running. `end_all` does it, TERM then KILL; app.signals and atexit call it.

SIGKILL of nodecheck itself cannot be caught, and Slurm sends it to a Prolog 10 ms after SIGTERM.
For that path a guardian (`/bin/sh`, one per nodecheck process, in a session of its own so Slurm's
killpg of the Prolog's group does not reach it) is told each group as it starts and ends, over a
pipe only nodecheck holds the write end of; when that pipe closes however nodecheck died, the
guardian ends the groups it was told about, TERM then KILL, and exits.
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import threading
import time

END_GRACE_S = 1.0  # between TERM and KILL: a tool may flush what it has, a stuck one may not delay us
_POLL_S = 0.02

_lock = threading.Lock()
_live: dict[int, subprocess.Popen] = {}  # pgid -> its leader (started with start_new_session)


# The guardian. `read` ends at EOF (nodecheck gone, by any means); the list is kept without forking.
_GUARDIAN = r"""
trap '' INT TERM HUP
groups=' '
while read -r op pg; do
  case $op$pg in *[!0-9+-]*|'') continue ;; esac
  case $op in
    +) groups="$groups$pg " ;;
    -) case $groups in *" $pg "*) groups="${groups%% $pg *} ${groups#* $pg }" ;; esac ;;
  esac
done
[ -z "${groups# }" ] && exit 0
for pg in $groups; do kill -TERM "-$pg" 2>/dev/null; done
sleep 1
for pg in $groups; do kill -KILL "-$pg" 2>/dev/null; done
exit 0
"""
_guardian: dict[str, int] = {}  # "fd": the write end of the guardian's pipe, "pid": its pid


def started(proc: subprocess.Popen) -> None:
    """Keep a child started with start_new_session=True: its pid is its process group."""
    with _lock:
        _live[proc.pid] = proc
        _tell_guardian(f"+ {proc.pid}")


def forget(proc: subprocess.Popen) -> None:
    """Stop keeping a child its owner has ended its own way (srun: a step is cancelled by SIGINT)."""
    with _lock:
        if _live.pop(proc.pid, None) is not None:
            _tell_guardian(f"- {proc.pid}")


def guard() -> None:
    """Start the guardian now, before the first child: started lazily, it would start between that
    child's exec and its registration, and a SIGKILL of nodecheck in that window (its start-up, long
    on a busy machine) would leave the child running unknown to it."""
    with _lock:
        _start_guardian()


def _tell_guardian(line: str) -> None:
    """Under _lock. Start the guardian on first use; a guardian that is gone is not restarted (the
    in-process paths still end every group), and never a reason for a probe to fail."""
    _start_guardian()
    if _guardian["fd"] < 0:
        return
    try:
        os.write(_guardian["fd"], (line + "\n").encode())
    except OSError:
        os.close(_guardian["fd"])
        _guardian["fd"] = -1


def _start_guardian() -> None:
    """Under _lock: the guardian, once per process (fd -1 if it could not be started)."""
    if "fd" not in _guardian:
        _guardian["fd"] = -1
        try:
            read_end, write_end = os.pipe()  # not inherited by any other child: O_CLOEXEC
            proc = subprocess.Popen(
                ["/bin/sh", "-c", _GUARDIAN, "nodecheck-guardian"],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"},
                start_new_session=True,
            )
            os.close(read_end)
            _guardian.update(fd=write_end, pid=proc.pid)
            _guardians.append(proc)  # reaped at exit, never a zombie
        except OSError:
            return


_guardians: list[subprocess.Popen] = []


def ended(proc: subprocess.Popen, grace_s: float = END_GRACE_S) -> None:
    """The leader is done (or given up on): end whatever is left of its group (a tool it started in
    the background, a pipeline's other half), TERM then KILL, and forget it."""
    end_group(proc, grace_s)
    forget(proc)


def end_group(proc: subprocess.Popen, grace_s: float = END_GRACE_S) -> bool:
    """TERM the leader's group, wait up to `grace_s` for it to be gone, then KILL what is left.
    True if the group was gone before KILL was needed. The leader is reaped on the way, never a
    zombie; a process the kernel holds (state D on a hung mount) may outlive even the KILL."""
    pgid = proc.pid
    if not _signal(pgid, signal.SIGTERM):
        proc.poll()
        return True
    end = time.monotonic() + grace_s
    while time.monotonic() < end:
        proc.poll()  # reap the leader: a zombie still counts as a member of its group
        if not _signal(pgid, 0):
            return True
        time.sleep(_POLL_S)
    _signal(pgid, signal.SIGKILL)
    proc.poll()
    return False


def end_all(grace_s: float = END_GRACE_S) -> int:
    """End every group still running: TERM all at once, one shared grace, then KILL. Returns how many
    there were. Safe to call from any thread, more than once."""
    with _lock:
        procs = list(_live.values())
    if not procs:
        return 0
    for proc in procs:
        _signal(proc.pid, signal.SIGTERM)
    end = time.monotonic() + grace_s
    left = procs
    while left and time.monotonic() < end:
        for proc in left:
            proc.poll()
        left = [p for p in left if _signal(p.pid, 0)]
        if left:
            time.sleep(_POLL_S)
    for proc in left:
        _signal(proc.pid, signal.SIGKILL)
        proc.poll()
    for proc in procs:
        forget(proc)
    return len(procs)


def live() -> list[int]:
    """The process groups being kept (for tests and the log)."""
    with _lock:
        return sorted(_live)


def _signal(pgid: int, signum: int) -> bool:
    """Send `signum` to the group; False when the group is gone."""
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return False
    except PermissionError:  # a member changed user (setuid): still there, and not ours to signal
        return True
    return True


atexit.register(end_all)
