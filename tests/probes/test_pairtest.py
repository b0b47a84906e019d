"""The pair-test scripts themselves (nodecheck/probes/pairtest.py), run under dash on this machine
with a small stand-in for ib_write_bw: a server that listens and either answers or hangs. The
integration tests run them over SSH; these pin what dash does with them (kill of a process
group, readiness by a listener of the server's own session, cleanup)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nodecheck.parsers.pairtest import made_directory
from nodecheck.parsers.sections import split_sections
from nodecheck.probes import pairtest
from tests.helpers import DATA

pytestmark = pytest.mark.skipif(
    shutil.which("dash") is None or shutil.which("setsid") is None, reason="needs dash and setsid"
)

STAND_IN = """#!{python}
import socket, sys, time
FOREIGN = "import socket, sys, time; s = socket.socket(); s.bind(('127.0.0.1', int(sys.argv[1])))"
FOREIGN += "; s.listen(1); time.sleep(600)"
args = sys.argv[1:]
port = int(args[args.index("-p") + 1])
recording = open({recording!r}).read()
if args[-2] != "-p":                       # client: ... -p PORT HOST
    s = socket.create_connection((args[-1], port), timeout=5)
    s.recv(16)
    print(recording, end="")
    sys.exit(0)
if {foreign!r}:                            # another process, not of this session, takes the port first
    import subprocess
    other = subprocess.Popen([sys.executable, "-c", FOREIGN, str(port)], start_new_session=True)
    open({foreign_pid!r}, "w").write(str(other.pid))
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    time.sleep({own_after!r})                 # what start sees meanwhile: only the other listener
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(({address!r}, port)); srv.listen(1)
print("* Waiting for client to connect... *", flush=True)
if {hang!r}:
    time.sleep(600)
conn, _ = srv.accept(); conn.sendall(b"go"); print(recording, end="")
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tool(tmp_path: Path, hang: bool, foreign: bool = False, own_after: float = 0, address: str = "127.0.0.1") -> dict:
    """`foreign`: the server first starts a listener on its port in another session (pid in
    tmp_path/foreign.pid) and listens itself `own_after` s later, on `address`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "ib_write_bw"
    fake.write_text(
        STAND_IN.format(
            python=sys.executable,
            hang=hang,
            foreign=foreign,
            foreign_pid=str(tmp_path / "foreign.pid"),
            own_after=own_after,
            address=address,
            recording=str(DATA / "perftest/dgx-spark-ib_write_bw-rdma-cm-force-link-ib-4qp-report-gbits.txt"),
        )
    )
    fake.chmod(0o755)
    return dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", TMPDIR=str(tmp_path))


def run(probe, env) -> subprocess.CompletedProcess:
    return subprocess.run(["dash", *probe.argv[1:]], env=env, capture_output=True, text=True, timeout=probe.timeout_s)


def alive(pgid: int) -> bool:
    """Whether a live (not zombie) process of the group is left."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


SHAPE = pairtest.TestShape(duration_s=1, size=65536, qps=1, timeout_s=5)


def test_start_waits_for_the_listener_the_client_gets_the_result_and_collect_cleans_up(tmp_path):
    env = tool(tmp_path, hang=False)
    rail = pairtest.Rail("mlx5_0", 1, 2, free_port())
    start = run(pairtest.start_servers("s", "t1", [rail], SHAPE), env)
    assert start.returncode == 0, start.stderr
    facts = split_sections(start.stdout).facts
    made = made_directory(start.stdout)
    assert facts["dir"] == made and made.startswith(f"{tmp_path}/nodecheck-pairtest.t1.")
    assert len(made) == len(f"{tmp_path}/nodecheck-pairtest.t1.") + 6  # mktemp's XXXXXX
    assert os.stat(made).st_mode & 0o777 == 0o700
    assert facts["ready"].startswith(f"mlx5_0 {rail.tcp_port} ")
    client = run(pairtest.run_clients("c", [(rail, rail.tcp_port)], "127.0.0.1", SHAPE), env)
    section = split_sections(client.stdout).get("client:mlx5_0")
    assert section.rc == 0 and "111.71" in section.text
    collect = run(pairtest.collect_servers("x", "t1", made), env)
    server = split_sections(collect.stdout).get("server:mlx5_0")
    assert server.rc == 0 and "111.71" in server.text
    assert not os.path.exists(made)


def test_collect_kills_a_hung_server_and_its_whole_process_group(tmp_path):
    env = tool(tmp_path, hang=True)
    rail = pairtest.Rail("mlx5_3", 1, 1, free_port())
    start = run(pairtest.start_servers("s", "t2", [rail], SHAPE), env)
    pid = int(split_sections(start.stdout).facts["ready"].split()[2])
    assert alive(pid)
    started = time.monotonic()
    collect = run(pairtest.collect_servers("x", "t2", made_directory(start.stdout)), env)
    assert "@@nodecheck killed mlx5_3" in collect.stdout
    assert split_sections(collect.stdout).get("server:mlx5_3").rc == 137
    deadline = time.monotonic() + 5
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(pid), "the server's process group outlived collect"
    assert time.monotonic() - started < pairtest.COLLECT_WAIT_S + 5


@pytest.fixture
def foreign_listener(tmp_path):
    """Stops the other session's listener a stand-in started (tool(foreign=True))."""
    yield
    pid_file = tmp_path / "foreign.pid"
    if pid_file.exists():
        try:
            os.kill(int(pid_file.read_text()), 9)
        except ProcessLookupError:
            pass


def test_a_listener_of_another_process_on_the_port_is_not_the_server_being_ready(
    tmp_path, monkeypatch, foreign_listener
):
    """Another process listening on the port after the busy check (another service, or another
    node's server where nodes share a network namespace) while the server never listens: not ready."""
    monkeypatch.setattr(pairtest, "READY_WAIT_S", 2)
    env = tool(tmp_path, hang=True, foreign=True, own_after=600)
    rail = pairtest.Rail("mlx5_0", 1, 1, free_port())
    start = run(pairtest.start_servers("s", "t8", [rail], SHAPE), env)
    assert (tmp_path / "foreign.pid").exists(), start.stdout + start.stderr
    assert f"@@nodecheck notready mlx5_0 {rail.tcp_port}" in start.stdout
    assert "ready" not in split_sections(start.stdout).facts
    collect = run(pairtest.collect_servers("x", "t8", made_directory(start.stdout), wait_s=0), env)
    assert "@@nodecheck killed mlx5_0" in collect.stdout


def test_the_servers_own_listener_is_ready_beside_another_on_the_same_port(tmp_path, foreign_listener):
    """The other listener first (127.0.0.1), the server's own a second later on another address and
    the same port: ready on that port, and the client reaches it."""
    env = tool(tmp_path, hang=False, foreign=True, own_after=1, address="127.0.0.2")
    rail = pairtest.Rail("mlx5_0", 1, 2, free_port())
    start = run(pairtest.start_servers("s", "t9", [rail], SHAPE), env)
    assert split_sections(start.stdout).facts["ready"].startswith(f"mlx5_0 {rail.tcp_port} "), start.stdout
    client = run(pairtest.run_clients("c", [(rail, rail.tcp_port)], "127.0.0.2", SHAPE), env)
    assert split_sections(client.stdout).get("client:mlx5_0").rc == 0
    collect = run(pairtest.collect_servers("x", "t9", made_directory(start.stdout)), env)
    assert split_sections(collect.stdout).get("server:mlx5_0").rc == 0


def test_a_port_busy_before_the_start_moves_on_by_1000(tmp_path):
    env = tool(tmp_path, hang=False)
    with socket.socket() as busy, socket.socket() as spare:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        try:
            spare.bind(("127.0.0.1", port + 1000))  # the port it moves to: free (else skip)
        except OSError:
            pytest.skip(f"port {port + 1000} in use here")
        spare.close()
        rail = pairtest.Rail("mlx5_0", 1, 2, port)
        start = run(pairtest.start_servers("s", "t10", [rail], SHAPE), env)
    assert split_sections(start.stdout).facts["ready"].startswith(f"mlx5_0 {port + 1000} "), start.stdout
    client = run(pairtest.run_clients("c", [(rail, port + 1000)], "127.0.0.1", SHAPE), env)
    assert split_sections(client.stdout).get("client:mlx5_0").rc == 0
    run(pairtest.collect_servers("x", "t10", made_directory(start.stdout)), env)


def test_collect_without_a_start_says_so_and_a_missing_tool_is_exit_127(tmp_path):
    env = dict(os.environ, TMPDIR=str(tmp_path), PATH="/usr/bin:/bin")
    collect = run(pairtest.collect_servers("x", "never", ""), env)
    assert collect.returncode == 0 and "the start step never ran" in collect.stdout
    start = run(pairtest.start_servers("s", "t3", [pairtest.Rail("mlx5_0", 1, 1, free_port())], SHAPE), env)
    assert start.returncode == 127 and "ib_write_bw not found (perftest not installed)" in start.stderr


@pytest.mark.parametrize("bad", ["-oProxyCommand=x", "a b", "node;rm", ""])
def test_values_that_are_not_names_never_reach_a_node(bad):
    with pytest.raises(ValueError):
        pairtest.run_clients("c", [(pairtest.Rail("mlx5_0", 1, 1, 18515), 18515)], bad, SHAPE)
    with pytest.raises(ValueError):
        pairtest.start_servers("s", "t", [pairtest.Rail(bad or "-", 1, 1, 18515)], SHAPE)


# --- a local user who gets to /tmp first (issue 17, finding 2) -----------------------------------------


@pytest.fixture
def victim():
    """A process of its own group, as a stranger's would be: collect must never signal it."""
    proc = subprocess.Popen(["sleep", "600"], start_new_session=True)
    yield proc
    proc.kill()
    proc.wait()


def planted(directory: Path, pid: int, secret: Path, mode: int = 0o700) -> None:
    """What a local user leaves for a round: a pid file naming someone else's process group and a
    server output that is a symlink to a file only root may read."""
    directory.mkdir()
    directory.chmod(mode)
    (directory / "mlx5_0.pid").write_text(f"{pid}\n")
    (directory / "mlx5_0.out").symlink_to(secret)


@pytest.fixture
def secret(tmp_path) -> Path:
    path = tmp_path / "shadow"
    path.write_text("root:$6$s3cr3t-hash:19000:0:99999:7:::\n")
    path.chmod(0o600)
    return path


def test_a_round_directory_made_before_the_start_step_is_neither_used_nor_trusted(tmp_path, victim, secret):
    """The old round directory's name (nodecheck-pairtest.<name>) made first by someone else: start
    makes its own private directory; collect, run even when start failed, signals nobody and shows
    nothing of what was planted."""
    env = tool(tmp_path, hang=False)
    planted(tmp_path / "nodecheck-pairtest.t5", victim.pid, secret)
    rail = pairtest.Rail("mlx5_0", 1, 2, free_port())
    start = run(pairtest.start_servers("s", "t5", [rail], SHAPE), env)
    made = made_directory(start.stdout)
    assert made != f"{tmp_path}/nodecheck-pairtest.t5" and os.stat(made).st_mode & 0o777 == 0o700
    client = run(pairtest.run_clients("c", [(rail, rail.tcp_port)], "127.0.0.1", SHAPE), env)
    assert split_sections(client.stdout).get("client:mlx5_0").rc == 0
    for given in (made, ""):  # what start printed, and nothing (start's output lost)
        collect = run(pairtest.collect_servers("x", "t5", given), env)
        assert "s3cr3t" not in collect.stdout + collect.stderr
        assert victim.poll() is None, "collect signalled a process group it did not start"
    assert (tmp_path / "nodecheck-pairtest.t5" / "mlx5_0.out").is_symlink()  # left alone


@pytest.mark.parametrize("pid", ["1", "VICTIM", "-1", "0", "1 2", "$(id)"])
def test_collect_signals_no_process_nodecheck_did_not_start(tmp_path, victim, secret, pid):
    """A directory of the new form (prefix + six characters, 0700, ours: as root a stranger cannot
    make one, but a process of the same user could): the pid must still lead a group whose argv names
    this directory, and an output that is a symlink is not shown."""
    planted(tmp_path / "nodecheck-pairtest.t6.AbC123", victim.pid, secret)
    (tmp_path / "nodecheck-pairtest.t6.AbC123" / "mlx5_0.pid").write_text(pid.replace("VICTIM", str(victim.pid)))
    env = dict(os.environ, TMPDIR=str(tmp_path))
    for given in (f"{tmp_path}/nodecheck-pairtest.t6.AbC123", ""):
        collect = run(pairtest.collect_servers("x", "t6", given, wait_s=0), env)
        assert collect.returncode == 0, collect.stderr
        assert "@@nodecheck killed" not in collect.stdout and "s3cr3t" not in collect.stdout
        assert victim.poll() is None
        if given:  # (collect removes the directory it collected)
            planted(tmp_path / "nodecheck-pairtest.t6.AbC123", victim.pid, secret)


@pytest.mark.parametrize("kind", ["symlink", "mode 0755", "other prefix"])
def test_collect_refuses_a_directory_that_is_not_the_private_one_start_made(tmp_path, victim, secret, kind):
    elsewhere = tmp_path / "elsewhere.AbC123"
    planted(elsewhere, victim.pid, secret)
    given = tmp_path / "nodecheck-pairtest.t7.AbC123"
    if kind == "symlink":
        given.symlink_to(elsewhere)
    elif kind == "mode 0755":
        elsewhere.rename(given)
        given.chmod(0o755)
    else:
        given = elsewhere
    env = dict(os.environ, TMPDIR=str(tmp_path))
    collect = run(pairtest.collect_servers("x", "t7", str(given), wait_s=0), env)
    assert "@@nodecheck refused" in collect.stdout and "begin server" not in collect.stdout
    assert "s3cr3t" not in collect.stdout and victim.poll() is None
    assert (given / "mlx5_0.pid").exists()  # not removed either
