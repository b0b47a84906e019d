"""parse_pyspy_dump / pyspy_failure on every recording in tests/data/py-spy, and the
real py-spy against real hung ranks (tests/fakes/hung_rank.py), frozen and stopped ones included."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.pyspy import PyFrame, PyStacks, main_thread, parse_pyspy_dump, pyspy_failure
from tests.fakes import freeze
from tests.helpers import data, data_files

PY_SPY = str(Path(sys.prefix) / "bin" / "py-spy")  # the venv's real py-spy (PyPI wheel)
PYTHON = "/usr/bin/python3"  # the Debian Python the recordings were made with
FAKES = Path(__file__).resolve().parents[1] / "fakes"
HUNG_RANK = FAKES / "hung_rank.py"
DUMP_TIMEOUT_S = 3.0  # the caller's timeout in these tests

# --- recordings -------------------------------------------------------------------------------------

CMD_P1 = (
    "/usr/bin/python3 -I tests/fakes/hung_rank.py train.py --rank 3 --local-rank 3 --collective "
    "all_reduce --via-aggregate --step 42 --threads --pid-file /tmp/p1"
)
CMD_P4 = (
    "/usr/bin/python3 -I tests/fakes/hung_rank.py train.py --collective reduce_scatter "
    "--via-aggregate --step 11 --threads --pid-file /tmp/p4"
)
MODULE = PyFrame("<module>", "hung_rank.py", 80)
WAIT = PyFrame("wait", "distributed_c10d.py", 13)
WATCHDOG = (("watchdog_loop", "distributed_c10d.py", 39), ("Thread._bootstrap", "threading.py", 995))


@dataclass(frozen=True)
class Expect:
    pid: int
    threads: tuple[tuple, ...]  # per thread, in order: (id, name, status, frame count)
    innermost: tuple  # main thread's (function, file, line)
    below: tuple | None  # the main thread's second frame: the collective that waits
    outermost: tuple
    native: int = 0  # native frames over all threads
    command: str | None = None  # checked when given
    watchdog: tuple | None = None  # (innermost, outermost) of the second thread


def _f(frame: PyFrame) -> tuple:
    return (frame.function, frame.file, frame.line)


def _collective(pid, name, line, via_aggregate=False, cmd=None) -> Expect:
    frames = 6 if via_aggregate else 5
    return Expect(
        pid,
        ((str(pid), "MainThread", "idle", frames),),
        _f(WAIT),
        (name, "distributed_c10d.py", line),
        _f(MODULE),
        command=cmd,
    )


TEXT = {
    "recorded-hung-rank-all_reduce-via-aggregate-threads.txt": Expect(
        7389,
        (("7389", "MainThread", "idle", 6), ("7392", "pt_nccl_watchdog", "idle", 4)),
        _f(WAIT),
        ("all_reduce", "distributed_c10d.py", 17),
        _f(MODULE),
        command=CMD_P1,
        watchdog=WATCHDOG,
    ),
    "recorded-full-filenames-hung-rank-all_reduce-via-aggregate-threads.txt": Expect(
        7389,
        (("7389", "MainThread", "idle", 6), ("7392", "pt_nccl_watchdog", "idle", 4)),
        ("wait", "/work/main/tests/fakes/hung_rank_pkg/distributed_c10d.py", 13),
        ("all_reduce", "/work/main/tests/fakes/hung_rank_pkg/distributed_c10d.py", 17),
        ("<module>", "/work/main/tests/fakes/hung_rank.py", 80),
        watchdog=(
            ("watchdog_loop", "/work/main/tests/fakes/hung_rank_pkg/distributed_c10d.py", 39),
            ("Thread._bootstrap", "/usr/lib/python3.11/threading.py", 995),
        ),
    ),
    "recorded-native-hung-rank-all_reduce-via-aggregate-threads.txt": Expect(
        7389,
        (("7389", "MainThread", "idle", 8), ("7392", "pt_nccl_watchdog", "idle", 7)),
        ("clock_nanosleep", "libc.so.6", None),
        _f(WAIT),
        ("0x7f5067f9e24a", "libc.so.6", None),
        native=5,
        watchdog=(("clock_nanosleep", "libc.so.6", None), ("0x7f50680808ec", "libc.so.6", None)),
    ),
    # the same process frozen (State D) or SIGSTOPped, read with --nonblocking: stacks as if running
    "recorded-frozen-nonblocking.txt": Expect(
        7389,
        (("7389", "MainThread", "idle", 6), ("7392", "pt_nccl_watchdog", "idle", 4)),
        _f(WAIT),
        ("all_reduce", "distributed_c10d.py", 17),
        _f(MODULE),
        command=CMD_P1,
        watchdog=WATCHDOG,
    ),
    "recorded-sigstopped-nonblocking.txt": Expect(
        7389,
        (("7389", "MainThread", "idle", 6), ("7392", "pt_nccl_watchdog", "idle", 4)),
        _f(WAIT),
        ("all_reduce", "distributed_c10d.py", 17),
        _f(MODULE),
        watchdog=WATCHDOG,
    ),
    "recorded-hung-rank-reduce_scatter.txt": _collective(7443, "reduce_scatter", 21),
    "recorded-hung-rank-broadcast.txt": _collective(7451, "broadcast", 25),
    "recorded-hung-rank-barrier.txt": _collective(7459, "barrier", 29),
    "recorded-hung-rank-all_gather.txt": _collective(7467, "all_gather", 33),
    "recorded-hung-rank-all_reduce.txt": _collective(
        7483,
        "all_reduce",
        17,
        cmd="/usr/bin/python3 -I tests/fakes/hung_rank.py train.py --collective all_reduce --step 7 --pid-file /tmp/p2",
    ),
    "recorded-hung-rank-broadcast-via-aggregate.txt": _collective(7492, "broadcast", 25, True),
    "recorded-hung-rank-none.txt": Expect(
        7475,
        (("7475", "MainThread", "idle", 5),),
        ("DataLoaderIter._next_data", "dataloader.py", 15),
        ("DataLoaderIter.__next__", "dataloader.py", 10),
        _f(MODULE),
    ),
    # python -c: the command line holds a newline; the main thread has no name (threading not imported)
    "recorded-busy-python-c-multiline-command.txt": Expect(
        7508,
        (("7508", None, "active+gil", 1),),
        ("<module>", "<string>", 2),
        None,
        ("<module>", "<string>", 2),
        command="/usr/bin/python3 -c \nwhile True: pass",
    ),
    # --locals blocks are skipped; under a pty py-spy colours every field and lines end \r\n
    "recorded-locals-hung-rank-reduce_scatter-via-aggregate-threads.txt": Expect(
        7500,
        (("7500", "MainThread", "idle", 6), ("7503", "pt_nccl_watchdog", "idle", 4)),
        _f(WAIT),
        ("reduce_scatter", "distributed_c10d.py", 21),
        _f(MODULE),
        command=CMD_P4,
        watchdog=WATCHDOG,
    ),
    "recorded-tty-colour-hung-rank-reduce_scatter-via-aggregate-threads.txt": Expect(
        7500,
        (("7500", "MainThread", "idle", 6), ("7503", "pt_nccl_watchdog", "idle", 4)),
        _f(WAIT),
        ("reduce_scatter", "distributed_c10d.py", 21),
        _f(MODULE),
        command=CMD_P4,
        watchdog=WATCHDOG,
    ),
}
# py-spy's exit status for each: all its failures exit 1 (recorded in tests/data/py-spy/SOURCES.md)
FAILURES = {
    ("recorded-no-such-pid-exit1.stderr.txt", None): "no such process",
    ("recorded-not-python-sleep-exit1.stderr.txt", None): "not a Python process",
    ("recorded-not-python-sleep-rust-backtrace-exit1.stderr.txt", None): "not a Python process",
    ("recorded-permission-denied-exit1.stderr.txt", None): "permission denied (ptrace)",
    (
        "recorded-already-traced-exit1.stderr.txt",
        "recorded-already-traced-exit1.stdout.txt",
    ): "cannot stop the process for ptrace: EPERM (another tracer attached?)",
    (
        "recorded-sigstopped-exit1.stderr.txt",
        "recorded-sigstopped-exit1.stdout.txt",
    ): "cannot stop the process for ptrace: it is stopped (SIGSTOP/T state)",
}
HEADER_ONLY = (
    "recorded-frozen-timeout-after-5s.stdout.txt",
    "recorded-already-traced-exit1.stdout.txt",
    "recorded-sigstopped-exit1.stdout.txt",
)


def spy(name: str) -> str:
    return data(f"py-spy/{name}")


def test_every_recording_is_covered():
    named = set(TEXT) | set(HEADER_ONLY) | {n for pair in FAILURES for n in pair if n}
    assert sorted(f"py-spy/{n}" for n in named) == [f for f in data_files("py-spy") if not f.endswith(".md")]


def check(stacks: PyStacks, expect: Expect) -> None:
    assert stacks.pid == expect.pid
    assert tuple((t.thread_id, t.name, t.status, len(t.frames)) for t in stacks.threads) == expect.threads
    main = main_thread(stacks)
    assert main is stacks.threads[0]
    assert _f(main.frames[0]) == expect.innermost
    assert (_f(main.frames[1]) if expect.below else None) == expect.below
    assert _f(main.frames[-1]) == expect.outermost
    assert sum(f.native for t in stacks.threads for f in t.frames) == expect.native
    if expect.watchdog:
        dog = stacks.threads[1].frames
        assert (_f(dog[0]), _f(dog[-1])) == expect.watchdog


@pytest.mark.parametrize("name", sorted(TEXT))
def test_text_recording(name):
    stacks = parse_pyspy_dump(spy(name))
    check(stacks, TEXT[name])
    assert (stacks.python, stacks.python_path) == ("3.11.2", "/usr/bin/python3.11")
    if TEXT[name].command:
        assert stacks.command == TEXT[name].command


def test_native_frames_are_marked_and_lineless():
    main = parse_pyspy_dump(spy("recorded-native-hung-rank-all_reduce-via-aggregate-threads.txt")).threads[0]
    assert [(f.function, f.native) for f in main.frames] == [
        ("clock_nanosleep", True),
        ("wait", False),
        ("all_reduce", False),
        ("_aggregate_total_loss", False),
        ("train", False),
        ("main", False),
        ("<module>", False),
        ("0x7f5067f9e24a", True),
    ]
    assert str(main.frames[0]) == "clock_nanosleep (libc.so.6)"
    assert str(main.frames[1]) == "wait (distributed_c10d.py:13)"


@pytest.mark.parametrize("name", HEADER_ONLY)
def test_header_without_stacks_is_a_parse_error(name):
    with pytest.raises(ParseError, match="output ends after the header") as e:
        parse_pyspy_dump(spy(name))
    assert e.value.excerpt.startswith("Process 7389: /usr/bin/python3 -I tests/fakes/hung_rank.py")


@pytest.mark.parametrize(
    "text, reason",
    [
        ("", "empty output"),
        ("\n\n", "empty output"),
        ("Error: Failed to find python version from target process\n", "does not start with 'Process"),
        ("Process 12: python3 train.py\n", "no 'Python v<version>' line"),
        (
            'Process 12: python3 train.py\nPython v3.11.2 (/usr/bin/python3.11)\n\nThread 12 (idle): "MainThread"\n',
            "output ends at thread 12 before any frame",
        ),
        (
            "Process 12: python3 train.py\nPython v3.11.2 (/usr/bin/python3.11)\n\n"
            'Thread 12 (idle): "MainThread"\n    wait (distributed_c1',
            "unreadable line",
        ),
        (
            "Process 12: python3 train.py\nPython v3.11.2 (/usr/bin/python3.11)\n\n    wait (distributed_c10d.py:13)\n",
            "expected 'Thread <id> (<status>)'",
        ),
        (
            "Process 12: python3 train.py\nPython v3.11.2 (/usr/bin/python3.11)\n\n"
            'Thread 12 (sleeping): "MainThread"\n    wait (x.py:1)\n',
            "unreadable thread line",
        ),
        (
            "Process 12: python3 train.py\nPython v3.11.2 (/usr/bin/python3.11)\n\n"
            "Thread 12 (idle)\n    wait (x.py:1)\nProcess 13: python3 x.py\n",
            "more than one process",
        ),
        ("<html><body>502 Bad Gateway</body></html>", "does not start with 'Process"),
    ],
)
def test_text_garbage(text, reason):
    with pytest.raises(ParseError, match=reason.replace("(", r"\(").replace(")", r"\)")) as e:
        parse_pyspy_dump(text)
    assert e.value.tool == "py-spy"
    assert e.value.excerpt or not text.strip()


def test_text_cut_mid_stack_keeps_its_lines_as_excerpt():
    whole = spy("recorded-hung-rank-all_reduce.txt")
    cut = whole[: whole.index("all_reduce (distributed_c10d.py") + 20]
    with pytest.raises(ParseError, match="unreadable line") as e:
        parse_pyspy_dump(cut)
    assert e.value.excerpt.endswith("    all_reduce (distribu")


@pytest.mark.parametrize("names, reason", sorted(FAILURES.items()))
def test_failure_reason(names, reason):
    stderr_name, stdout_name = names
    stdout = spy(stdout_name) if stdout_name else ""
    assert pyspy_failure(stdout, spy(stderr_name), 1) == reason


def test_failure_reasons_without_known_text():
    frozen = spy("recorded-frozen-timeout-after-5s.stdout.txt")
    assert pyspy_failure(frozen, "", None) == "no stacks: py-spy printed the header and was waiting to stop the process"
    assert pyspy_failure("", "", None) == "py-spy did not exit"
    assert (
        pyspy_failure("", "Error: Failed to copy PyThreadState\n\nCaused by:\n    0: EIO\n", 1)
        == "py-spy exit 1: Failed to copy PyThreadState EIO"
    )
    assert pyspy_failure("", "", 0) == "py-spy exited 0 with no output"
    assert pyspy_failure("", "segfault\n", 139) == "py-spy exit 139: segfault"


def test_main_thread_is_named_else_first():
    stacks = parse_pyspy_dump(spy("recorded-hung-rank-all_reduce-via-aggregate-threads.txt"))
    assert main_thread(stacks).name == "MainThread"
    swapped = PyStacks(stacks.pid, stacks.command, stacks.python, stacks.threads[::-1])
    assert main_thread(swapped).name == "MainThread"
    assert main_thread(PyStacks(1, "python3 x.py", "3.11.2", ())) is None


# --- the real py-spy against real hung ranks ---------------------------------------------------------


def marker_line(path: Path, marker: str) -> int:
    """The line of `# <marker>` in a fake's source, so expectations follow edits of the fake."""
    [line] = [i for i, text in enumerate(path.read_text().splitlines(), 1) if text.endswith(f"# {marker}")]
    return line


PKG = FAKES / "hung_rank_pkg"


def expected_stack(collective: str, via_aggregate: bool) -> list[tuple]:
    if collective == "none":
        loader = PKG / "dataloader.py"
        inner = [
            ("DataLoaderIter._next_data", "dataloader.py", marker_line(loader, "BLOCKED: _next_data")),
            ("DataLoaderIter.__next__", "dataloader.py", marker_line(loader, "CALL: __next__")),
            ("train", "training.py", marker_line(PKG / "training.py", "CALL: train none")),
        ]
    else:
        c10d = PKG / "distributed_c10d.py"
        inner = [
            ("wait", "distributed_c10d.py", marker_line(c10d, "BLOCKED: wait")),
            (collective, "distributed_c10d.py", marker_line(c10d, f"CALL: {collective}")),
        ]
        if via_aggregate:
            inner += [
                ("_aggregate_total_loss", "engine.py", marker_line(PKG / "engine.py", "CALL: _aggregate_total_loss")),
                ("train", "training.py", marker_line(PKG / "training.py", "CALL: train via-aggregate")),
            ]
        else:
            how = "barrier" if collective == "barrier" else "direct"
            inner += [("train", "training.py", marker_line(PKG / "training.py", f"CALL: train {how}"))]
    return inner + [
        ("main", "hung_rank.py", marker_line(HUNG_RANK, "CALL: main")),
        ("<module>", "hung_rank.py", marker_line(HUNG_RANK, "CALL: <module>")),
    ]


class Rank:
    """A started hung_rank.py whose stack is in place (its pid file exists)."""

    def __init__(self, tmp_path: Path, collective: str, *extra: str, rank: int = 5, local_rank: int = 1):
        self.pid_file = tmp_path / f"rank-{uuid.uuid4().hex}.pid"
        env = {"PATH": "/usr/bin:/bin", "RANK": str(rank), "LOCAL_RANK": str(local_rank), "WORLD_SIZE": "16"}
        argv = [
            PYTHON,
            "-I",
            str(HUNG_RANK),
            "train.py",
            "--rank",
            "0",
            "--local-rank",
            "0",
            "--collective",
            collective,
            "--pid-file",
            str(self.pid_file),
            *extra,
        ]
        self.proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 10
        while not self.pid_file.exists():
            if self.proc.poll() is not None:
                raise AssertionError(f"hung_rank.py exited {self.proc.returncode}: {self.proc.stderr.read()}")
            assert time.monotonic() < deadline, "hung_rank.py wrote no pid file within 10 s"
            time.sleep(0.01)
        assert int(self.pid_file.read_text()) == self.proc.pid

    def threads(self) -> dict[str, str]:
        """{thread id: its state letter in /proc (S sleeping, R running, t traced, T stopped)}."""
        states = {}
        for task in Path(f"/proc/{self.proc.pid}/task").iterdir():
            try:
                stat = (task / "stat").read_text()
            except OSError:  # the thread ended meanwhile
                continue
            states[task.name] = stat[stat.rindex(")") + 2]
        return states

    def wait_asleep(self, timeout: float = 10) -> None:
        """Until every thread sleeps in its wait again, or the rank has ended."""
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            states = self.threads()
            if set(states.values()) <= {"S"}:
                return
            assert time.monotonic() < deadline, f"the rank's threads did not go back to sleep: {states}"
            time.sleep(0.01)

    def dump(self, *args: str, timeout: float = DUMP_TIMEOUT_S) -> subprocess.CompletedProcess:
        # RUST_BACKTRACE unset, as on a node: errors are py-spy's lines only
        env = {k: v for k, v in os.environ.items() if k != "RUST_BACKTRACE"}
        return subprocess.run(
            [PY_SPY, "dump", "--pid", str(self.proc.pid), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)  # a SIGSTOPped rank takes SIGTERM only once continued
            # a thread just let go by py-spy's ptrace (or continued) runs once more with a signal
            # pending: a SIGTERM sent then goes to another thread, and the main thread sleeps on
            self.wait_asleep()
            self.proc.terminate()
        try:
            return self.proc.wait(timeout=5)
        finally:
            self.proc.stdout.close()
            self.proc.stderr.close()


@pytest.fixture
def ranks(tmp_path):
    started: list[Rank] = []

    def start(collective: str, *extra: str, **kw) -> Rank:
        started.append(Rank(tmp_path, collective, *extra, **kw))
        return started[-1]

    yield start
    for rank in started:
        if rank.proc.poll() is None:
            rank.proc.kill()
            rank.proc.wait()


@pytest.mark.parametrize(
    "collective, via_aggregate",
    [
        ("all_reduce", True),
        ("reduce_scatter", False),
        ("broadcast", True),
        ("barrier", False),
        ("all_gather", False),
        ("none", False),
    ],
)
def test_real_pyspy_sees_the_collective_the_rank_blocks_in(ranks, collective, via_aggregate):
    rank = ranks(collective, *(["--via-aggregate"] if via_aggregate else []), "--threads", "--step", "9")
    done = rank.dump()
    assert done.returncode == 0, done.stderr
    stacks = parse_pyspy_dump(done.stdout)
    assert stacks.pid == rank.proc.pid and stacks.python.startswith("3.")
    assert f"--collective {collective}" in stacks.command and "train.py" in stacks.command
    main = main_thread(stacks)
    assert (main.name, main.status) == ("MainThread", "idle")
    assert [_f(f) for f in main.frames] == expected_stack(collective, via_aggregate)
    [dog] = [t for t in stacks.threads if t is not main]
    assert (dog.name, _f(dog.frames[0])) == (
        "pt_nccl_watchdog",
        ("watchdog_loop", "distributed_c10d.py", marker_line(PKG / "distributed_c10d.py", "BLOCKED: watchdog_loop")),
    )
    assert rank.stop() == 0 and not rank.pid_file.exists()


def test_a_rank_with_a_second_thread_stops_cleanly_right_after_each_dump(ranks):
    """py-spy lets go of a rank's threads as it exits; a thread let go of runs once more with a signal
    pending, and a SIGTERM sent then is taken by the other thread: the main thread sleeps on in its
    collective and the rank never ends (1 in 4 beside a CPU hog, issue 32, 2.5). Stopping waits until
    every thread sleeps again: on state, not on time."""
    for _ in range(20):
        rank = ranks("none", "--threads")
        assert rank.dump().returncode == 0
        assert rank.stop() == 0 and not rank.pid_file.exists()


def test_real_pyspy_native_frames(ranks):
    rank = ranks("all_reduce")
    done = rank.dump("--native")
    assert done.returncode == 0, done.stderr
    main = main_thread(parse_pyspy_dump(done.stdout))
    python_frames = [_f(f) for f in main.frames if not f.native]
    assert python_frames == expected_stack("all_reduce", False)
    assert main.frames[0].native and main.frames[0].line is None  # the sleep's libc call, innermost
    assert rank.stop() == 0


def test_the_rank_reads_its_rank_from_the_launcher_env_and_pgrep_finds_it(ranks):
    rank = ranks("barrier", rank=11, local_rank=3)
    environ = Path(f"/proc/{rank.proc.pid}/environ").read_bytes().split(b"\0")
    assert b"RANK=11" in environ and b"LOCAL_RANK=3" in environ
    found = subprocess.run(["pgrep", "-f", r"train\.py"], capture_output=True, text=True).stdout.split()
    assert str(rank.proc.pid) in found
    locals_dump = rank.dump("--locals")
    assert "            rank: 11" in locals_dump.stdout  # env RANK wins over --rank 0
    assert rank.stop() == 0


def test_frozen_rank_makes_pyspy_hang_until_the_callers_timeout(ranks):
    rank = ranks("broadcast", "--via-aggregate", "--threads")
    path = freeze.freeze([rank.proc.pid], f"nodecheck-test-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        assert freeze.state(rank.proc.pid).startswith("D")
        started = time.monotonic()
        with pytest.raises(subprocess.TimeoutExpired) as e:
            rank.dump(timeout=DUMP_TIMEOUT_S)
        assert DUMP_TIMEOUT_S <= time.monotonic() - started < DUMP_TIMEOUT_S + 2
        stdout = e.value.stdout.decode() if isinstance(e.value.stdout, bytes) else (e.value.stdout or "")
        assert stdout.startswith(f"Process {rank.proc.pid}: ")  # the header, then nothing
        with pytest.raises(ParseError, match="output ends after the header"):
            parse_pyspy_dump(stdout)
        assert pyspy_failure(stdout, "", None).startswith("no stacks: py-spy printed the header")
        # --nonblocking reads the memory without stopping the process: it answers even frozen
        nonblocking = rank.dump("--nonblocking")
        assert nonblocking.returncode == 0, nonblocking.stderr
        assert [_f(f) for f in main_thread(parse_pyspy_dump(nonblocking.stdout)).frames] == expected_stack(
            "broadcast", True
        )
    finally:
        freeze.thaw(path)
    assert not os.path.exists(path)
    assert rank.dump().returncode == 0  # thawed, it answers again (py-spy left no trace)
    assert rank.stop() == 0


def test_stopped_rank_makes_pyspy_fail_at_once(ranks):
    rank = ranks("all_gather")
    rank.proc.send_signal(signal.SIGSTOP)
    deadline = time.monotonic() + 5
    while not freeze.state(rank.proc.pid).startswith("T"):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    started = time.monotonic()
    done = rank.dump()
    assert time.monotonic() - started < DUMP_TIMEOUT_S
    assert done.returncode == 1
    assert (
        pyspy_failure(done.stdout, done.stderr, done.returncode)
        == "cannot stop the process for ptrace: it is stopped (SIGSTOP/T state)"
    )
    assert rank.stop() == 0


def test_no_such_pid_and_not_python_live():
    env = {k: v for k, v in os.environ.items() if k != "RUST_BACKTRACE"}
    gone = subprocess.Popen(["/bin/true"])
    gone.wait()
    done = subprocess.run(
        [PY_SPY, "dump", "--pid", str(gone.pid)], env=env, capture_output=True, text=True, timeout=DUMP_TIMEOUT_S
    )
    assert (done.returncode, pyspy_failure(done.stdout, done.stderr, done.returncode)) == (1, "no such process")
    with subprocess.Popen(["/bin/sleep", "30"]) as sleeper:
        try:
            time.sleep(0.05)
            done = subprocess.run(
                [PY_SPY, "dump", "--pid", str(sleeper.pid)],
                env=env,
                capture_output=True,
                text=True,
                timeout=DUMP_TIMEOUT_S,
            )
        finally:
            sleeper.kill()
    assert (done.returncode, pyspy_failure(done.stdout, done.stderr, done.returncode)) == (1, "not a Python process")
