"""The limits probe run here with sh: a process named slurmd in this mount namespace with memlock
64 KiB (what the simulated cluster's fault sets with prlimit), slurm.conf's PropagateResourceLimits,
and the probe's own limits when no slurmd runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from nodecheck.checks.limits import LimitsParams, limits
from nodecheck.core.errors import ParseError
from nodecheck.core.model import Status
from nodecheck.probes.limits import LIMITS, read_limits
from tests.helpers import captures
from tests.probes.fake_daemons import (
    AS_NOBODY,
    NOBODY,
    open_dir,
    real_uid,
    setuid_sleep_as,
    sleep_copy,
    start,
    stop,
)

pytestmark = pytest.mark.skipif(
    shutil.which("prlimit") is None or not os.path.exists("/proc/self/limits"), reason="needs util-linux and /proc"
)


def run(path_dirs=(), **extra_env):
    env = {**os.environ, "PATH": os.pathsep.join([*map(str, path_dirs), os.environ["PATH"]]), **extra_env}
    done = subprocess.run(LIMITS.argv, capture_output=True, text=True, env=env, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return captures(LIMITS, done.stdout)


def slurmd_here() -> bool:
    """A slurmd in this mount namespace (what the probe would find): the simulated nodes' slurmds,
    which the integration tests leave running in the nodes' own namespaces, do not count."""
    mine = os.stat("/proc/self/ns/mnt")
    for comm in Path("/proc").glob("[0-9]*/comm"):
        try:
            if comm.read_text().strip() == "slurmd":
                ns = os.stat(comm.parent / "ns" / "mnt")
                if (ns.st_dev, ns.st_ino) == (mine.st_dev, mine.st_ino):
                    return True
        except OSError:  # gone meanwhile
            continue
    return False


@pytest.fixture
def slurmd(tmp_path):
    """A process named slurmd (a copy of sleep) started with memlock 64 KiB, soft and hard."""
    binary = tmp_path / "slurmd"
    shutil.copy(shutil.which("sleep"), binary)
    process = subprocess.Popen(["prlimit", "--memlock=65536:65536", str(binary), "60"])
    try:
        for _ in range(100):  # until prlimit has exec'd it
            with open(f"/proc/{process.pid}/comm") as f:
                if f.read().strip() == "slurmd":
                    break
            time.sleep(0.05)
        yield process.pid
    finally:
        process.kill()
        process.wait()


def test_slurmd_memlock_64k_fails_naming_slurmd(slurmd):
    out = run()
    facts = read_limits(out)
    assert (facts.slurmd_pid, facts.source) == (slurmd, "slurmd's limits")
    memlock = next(v for v in limits(out, LimitsParams()) if v.subject == "memlock")
    assert memlock.status is Status.FAIL
    assert memlock.message.startswith(
        "memlock 64 KiB (slurmd's limits), expected unlimited (RDMA memory registration fails)"
    )


def test_propagation_from_the_nodes_slurm_conf_is_read(slurmd, tmp_path):
    conf = tmp_path / "slurm.conf"
    # slurm.conf as sites write it: a comment, other settings, the setting in another case
    conf.write_text("# limits\nProctrackType=proctrack/cgroup\npropagateresourcelimitsexcept=MEMLOCK\n")
    out = run(SLURM_CONF=str(conf))
    facts = read_limits(out)
    assert facts.propagation is not None
    assert facts.propagation.text == "PropagateResourceLimits=ALL, PropagateResourceLimitsExcept=MEMLOCK"
    assert not facts.propagation.propagated("memlock") and facts.propagation.propagated("nofile")
    memlock = next(v for v in limits(out, LimitsParams()) if v.subject == "memlock")
    assert memlock.message == (
        "memlock 64 KiB (slurmd's limits), expected unlimited (RDMA memory registration fails); "
        "PropagateResourceLimits=ALL, PropagateResourceLimitsExcept=MEMLOCK: not propagated, a job gets "
        "slurmd's soft limit"
    )


def test_without_slurmd_the_probes_own_limits_are_judged_and_said():
    if slurmd_here():
        pytest.skip("a slurmd runs here")
    out = run()
    facts = read_limits(out)
    assert facts.slurmd_pid is None
    assert facts.limits.form == "proc"
    verdicts = list(limits(out, LimitsParams(memlock=0, nofile=1, nproc=1, stack=0)))
    assert [v.subject for v in verdicts] == ["memlock", "nofile", "nproc", "stack"]
    assert all(v.status is Status.PASS for v in verdicts)
    assert all("(the probe's own login limits, set by PAM)" in v.message for v in verdicts)
    assert verdicts[0].message.endswith("; no slurmd on this node")


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="starts a process as another uid")
def test_a_users_process_named_slurmd_is_not_taken_for_slurmd(tmp_path):
    # any process may call itself slurmd: a job's user must not choose the limits that are judged
    if slurmd_here():
        pytest.skip("a slurmd runs here")
    binary = tmp_path / "slurmd"
    shutil.copy(shutil.which("sleep"), binary)
    binary.chmod(0o755)
    os.chmod(tmp_path, 0o755)
    process = subprocess.Popen(["setpriv", "--reuid=4242", "--regid=4242", "--clear-groups", str(binary), "60"])
    try:
        for _ in range(100):
            with open(f"/proc/{process.pid}/comm") as f:
                if f.read().strip() == "slurmd":
                    break
            time.sleep(0.05)
        else:
            pytest.fail("the user's slurmd did not start")
        facts = read_limits(run())
        assert (facts.slurmd_pid, facts.source) == (None, "the probe's own login limits, set by PAM")
    finally:
        process.kill()
        process.wait()


# --- which process is slurmd (issue 32, 1.3): real uid 0 and a root-owned slurmd binary -----------------------

as_root_with_setpriv = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None, reason="starts processes as root and as nobody"
)
MEMLOCK_64K = "--memlock=65536:65536"


@pytest.fixture
def no_slurmd_here():
    if slurmd_here():
        pytest.skip("a slurmd runs here")


def memlock_verdict(out):
    return next(v for v in limits(out, LimitsParams()) if v.subject == "memlock")


@as_root_with_setpriv
def test_a_setuid_root_program_run_by_a_user_through_a_symlink_named_slurmd_is_not_slurmd(no_slurmd_here):
    # the finding: comm is the link's name (slurmd), /proc/PID of a setuid process is root's; its
    # 64 KiB memlock read as "FAIL memlock 64 KiB (slurmd's limits)" drained the node
    with open_dir() as d:
        link = setuid_sleep_as(d, "slurmd")
        fake = start(["prlimit", MEMLOCK_64K, *AS_NOBODY, str(link), "60"], "slurmd", setuid=True)
        try:
            assert os.stat(f"/proc/{fake.pid}").st_uid == 0 and real_uid(fake.pid) == NOBODY  # the forgery
            out = run()
        finally:
            stop(fake)
    facts = read_limits(out)
    assert (facts.slurmd_pid, facts.source) == (None, "the probe's own login limits, set by PAM")
    assert facts.not_slurmd == (fake.pid,)
    memlock = memlock_verdict(out)
    assert "slurmd's limits" not in memlock.message
    assert memlock.message.endswith(
        f"; no slurmd on this node (1 process named slurmd, pid {fake.pid}, is not root running a root-owned "
        "slurmd binary: not judged)"
    )


def _linked_to_sleep(d: Path) -> Path:
    # real uid 0, but /proc/PID/exe is sleep: the name is the link's, not the binary's
    (d / "slurmd").symlink_to(shutil.which("sleep") or "/bin/sleep")
    return d / "slurmd"


def _in_a_directory_anyone_may_write(d: Path) -> Path:
    # /tmp-like (1777): anyone could have put that file there
    d.chmod(0o1777)
    return sleep_copy(d, "slurmd")


@as_root_with_setpriv
@pytest.mark.parametrize("forge", [_linked_to_sleep, _in_a_directory_anyone_may_write], ids=["symlink", "1777-dir"])
def test_a_root_process_named_slurmd_whose_binary_anyone_could_have_placed_is_not_slurmd(no_slurmd_here, forge):
    with open_dir() as d:
        fake = start(["prlimit", MEMLOCK_64K, str(forge(d)), "60"], "slurmd")
        try:
            facts = read_limits(run())
        finally:
            stop(fake)
    assert facts.slurmd_pid is None
    assert facts.not_slurmd == (fake.pid,)


@as_root_with_setpriv
def test_two_processes_that_could_each_be_slurmd_are_an_error_not_a_judged_value(no_slurmd_here, tmp_path):
    conf = tmp_path / "slurm.conf"
    conf.write_text(f"SlurmdPidFile={tmp_path}/none-such.pid\n")  # no pid file to tell them apart
    with open_dir() as d:
        binary = sleep_copy(d, "slurmd")
        first = start(["prlimit", MEMLOCK_64K, str(binary), "60"], "slurmd")
        second = start([str(binary), "60"], "slurmd")
        try:
            out = run(SLURM_CONF=str(conf))
        finally:
            stop(first)
            stop(second)
    pids = ", ".join(map(str, sorted((first.pid, second.pid))))
    with pytest.raises(ParseError, match=f"^limits probe: 2 processes could be slurmd: pids {pids} "):
        read_limits(out)
    with pytest.raises(ParseError):
        list(limits(out, LimitsParams()))


@as_root_with_setpriv
def test_a_root_owned_pid_file_tells_two_slurmd_apart_and_a_writable_one_does_not(no_slurmd_here, tmp_path):
    pid_file = tmp_path / "slurmd.pid"
    conf = tmp_path / "slurm.conf"
    conf.write_text(f"# Slurm\nslurmdpidfile = {pid_file}   # the node daemon's\n")
    with open_dir() as d:
        binary = sleep_copy(d, "slurmd")
        first = start([str(binary), "60"], "slurmd")
        second = start(["prlimit", MEMLOCK_64K, str(binary), "60"], "slurmd")
        try:
            pid_file.write_text(f"{second.pid}\n")
            pid_file.chmod(0o644)
            trusted = read_limits(run(SLURM_CONF=str(conf)))
            pid_file.chmod(0o664)  # group-writable: anyone in that group could name any process
            untrusted = run(SLURM_CONF=str(conf))
        finally:
            stop(first)
            stop(second)
    assert (trusted.slurmd_pid, trusted.found_by) == (second.pid, f"the pid file {pid_file}")
    assert trusted.limits.limits["memlock"].soft == 65536
    with pytest.raises(ParseError, match=r"^limits probe: 2 processes could be slurmd"):
        read_limits(untrusted)


@as_root_with_setpriv
def test_a_forked_child_of_slurmd_is_not_a_second_slurmd(no_slurmd_here):
    # slurmd forks before it execs slurmstepd or a Prolog: for a moment its child is named slurmd too
    with open_dir() as d:
        shell = d / "slurmd"
        shutil.copy("/bin/sh", shell)
        shell.chmod(0o755)
        parent = start([str(shell), "-c", "(sleep 60; :) & wait"], "slurmd")
        try:
            _wait_for_child_named(parent.pid, "slurmd")
            facts = read_limits(run())
        finally:
            _kill_tree(parent.pid)
            stop(parent)
    assert (facts.slurmd_pid, facts.found_by) == (parent.pid, "its binary")


@as_root_with_setpriv
def test_debians_slurmd_wlm_behind_its_alternatives_link_is_slurmd(no_slurmd_here):
    # Debian and Ubuntu: /usr/sbin/slurmd -> /etc/alternatives/slurmd -> /usr/sbin/slurmd-wlm (comm slurmd)
    with open_dir() as d:
        binary = sleep_copy(d, "slurmd-wlm")
        (d / "slurmd").symlink_to(binary)
        process = start([str(d / "slurmd"), "60"], "slurmd")
        try:
            facts = read_limits(run())
        finally:
            stop(process)
    assert (facts.slurmd_pid, facts.found_by) == (process.pid, "its binary")


@as_root_with_setpriv
def test_a_slurmd_whose_binary_was_replaced_by_an_upgrade_is_still_slurmd(no_slurmd_here):
    # a package upgrade replaces /usr/sbin/slurmd under the running daemon: exe reads "... (deleted)"
    with open_dir() as d:
        binary = sleep_copy(d, "slurmd")
        process = start(["prlimit", MEMLOCK_64K, str(binary), "60"], "slurmd")
        try:
            binary.unlink()
            assert os.readlink(f"/proc/{process.pid}/exe").endswith("/slurmd (deleted)")
            out = run()
        finally:
            stop(process)
    facts = read_limits(out)
    assert (facts.slurmd_pid, facts.source) == (process.pid, "slurmd's limits")
    assert memlock_verdict(out).status is Status.FAIL


def _children(pid: int) -> list[int]:
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            text = status.read_text()
        except OSError:
            continue
        if f"\nPPid:\t{pid}\n" in text:
            found.append(int(status.parent.name))
    return found


def _wait_for_child_named(pid: int, comm: str, timeout: float = 10.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for child in _children(pid):
            try:
                if Path(f"/proc/{child}/comm").read_text().strip() == comm:
                    return child
            except OSError:
                continue
        time.sleep(0.01)
    raise AssertionError(f"pid {pid} has no child named {comm}")


def _kill_tree(pid: int) -> None:
    for child in _children(pid):
        _kill_tree(child)
        try:
            os.kill(child, 9)
        except ProcessLookupError:
            pass


@as_root_with_setpriv
@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux unshare")
def test_systemds_main_pid_names_slurmd_among_several(tmp_path):
    # systemd as init (a /run/systemd/system of a private mount namespace, where both slurmd run too)
    # and a systemctl that says MainPID: the process systemd started, not "ambiguous"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text(
        '#!/bin/sh\n[ "$*" = "show -p MainPID slurmd.service" ] || exit 2\necho "MainPID=$(cat "$MAIN_PID_FILE")"\n'
    )
    (bin_dir / "systemctl").chmod(0o755)
    pids = tmp_path / "pids"
    inside = (
        "mount -t tmpfs nodecheck-test /run && mkdir -p /run/systemd/system || exit 9\n"
        '"$1" 60 </dev/null >/dev/null 2>&1 & echo $! >> "$2"\n'
        '"$1" 60 </dev/null >/dev/null 2>&1 & echo $! >> "$2"; echo $! > "$MAIN_PID_FILE"\n'
        'for p in $(cat "$2"); do while [ "$(cat /proc/$p/comm)" != slurmd ]; do :; done; done\n'
        'shift 2; exec "$@"'
    )
    with open_dir() as d:
        binary = sleep_copy(d, "slurmd")
        env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "MAIN_PID_FILE": str(tmp_path / "main")}
        try:
            done = subprocess.run(
                ["unshare", "-m", "--propagation", "private", "sh", "-c", inside, "sh", str(binary), str(pids),
                 *LIMITS.argv],
                capture_output=True, text=True, env=env, timeout=60, check=False,
            )  # fmt: skip
        finally:
            started = [int(p) for p in pids.read_text().split()] if pids.exists() else []
            for pid in started:
                try:
                    os.kill(pid, 9)
                except ProcessLookupError:
                    pass
    assert done.returncode == 0, done.stderr
    assert len(started) == 2
    facts = read_limits(captures(LIMITS, done.stdout))
    assert (facts.slurmd_pid, facts.found_by) == (started[1], "systemd's MainPID of slurmd.service")
