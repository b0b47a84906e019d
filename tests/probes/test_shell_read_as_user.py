"""Files a job names are opened AS THE JOB'S USER, or not at all (issue 32, items 1.4 and 1.7).

nodecheck runs as root. A root-owned file readable by everyone inside a directory only root may enter
(`NCCL_CONF_FILE=/root/private/nccl.conf`) is not the job's to read: checking the file's own owner and
mode, as root, said yes. shell.job_file (NCCL_CONF_FILE) and shell.owned_read (the watcher's progress log
and heartbeat) now have the file opened by a process of the job's user, or of `nobody` (uid 65534, no
group) when no job's user is known. Run for real as root, with `nobody` as the job's user, in a
temporary directory everyone may enter."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from pathlib import Path

import pytest

from nodecheck.checks.nccl_env import NcclEnv, probes
from nodecheck.job.probe import job_probe, parse_job_probe
from nodecheck.job.spec import JobSpec
from nodecheck.parsers.nccl_config import parse_probe
from nodecheck.parsers.watch_sample import parse_sample
from nodecheck.watch.config import WatchConfig
from nodecheck.watch.probe import sample_probe
from tests import everyone_tmp

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("setpriv"),
    reason="switches to the job's user: needs root and util-linux's setpriv",
)
NOBODY = pwd.getpwnam("nobody").pw_uid
SECRET = "s3cr3t-root-only"
PATH = "/usr/bin:/bin:/usr/sbin:/sbin"


open_dir = everyone_tmp.tmp_path  # a directory everyone may enter (pytest's own: root's only)


def public_file_in_a_root_only_directory(base: Path) -> Path:
    """/root/private/nccl.conf: root's, mode 0644, in a 0700 directory of root's."""
    private = base / "private"
    private.mkdir(mode=0o700)
    f = private / "nccl.conf"
    f.write_text(f"NCCL_IB_HCA={SECRET}\n")
    f.chmod(0o644)
    return f


def users_own_private_file(base: Path) -> Path:
    f = base / "own.conf"
    f.write_text("NCCL_IB_HCA=mlx5_1\n")
    os.chown(f, NOBODY, NOBODY)
    f.chmod(0o600)
    return f


def nccl_env_conf(path: Path, user: str, env_path: str = PATH):
    """The nccl.env probe's reading of NCCL_CONF_FILE=path for the job's `user` ("" = not known)."""
    [probe] = probes(NcclEnv(env={"NCCL_CONF_FILE": str(path)}, job_user=user, node_env=False))
    done = subprocess.run(probe.argv, capture_output=True, text=True, timeout=30, env={"PATH": env_path, "HOME": "/"})
    first = parse_probe(done.stdout).conf[0]
    assert first.path == str(path), done.stdout
    return dict(first.settings), first.error, done.stdout


def job_conf(path: Path, user: str):
    """The job check's probe's reading of its JOB.yml's NCCL_CONF_FILE."""
    probe = job_probe(JobSpec(world_size=8, gpus_per_node=8, env={"NCCL_CONF_FILE": str(path)}), job_user=user)
    done = subprocess.run(probe.argv, capture_output=True, text=True, timeout=30, env={"PATH": PATH, "HOME": "/"})
    assert "@@nodecheck end gpus" in done.stdout, done.stderr
    [first, _] = parse_job_probe(done.stdout).conf
    return dict(first.settings), first.error, done.stdout


def watched(path: Path, user: str, env_path: str = PATH):
    """The watcher's sample with `path` as its progress log and heartbeat."""
    cfg = WatchConfig.model_validate({"progress": {"log": str(path), "heartbeat": str(path)}})
    probe = sample_probe(cfg, "node1", user)
    done = subprocess.run(probe.argv, capture_output=True, text=True, timeout=30, env={"PATH": env_path, "HOME": "/"})
    return parse_sample(done.stdout), done.stdout


@pytest.mark.parametrize("user", [str(NOBODY), "nobody", ""], ids=["uid", "name", "no-user-known"])
def test_a_public_root_file_in_a_root_only_directory_is_not_read_for_a_job(open_dir, user):
    conf = public_file_in_a_root_only_directory(open_dir)
    for read in (nccl_env_conf, job_conf):
        settings, error, out = read(conf, user)
        assert SECRET not in out and settings == {}
        assert error.startswith("not read: ") and "cannot" in error and "Permission denied" in error, error
    sample, out = watched(conf, user)
    assert SECRET not in out
    assert (
        sample.log_error.startswith(f"nodecheck-watch: {conf}: not read: ") and "Permission denied" in sample.log_error
    )
    assert sample.heartbeat_error == sample.log_error
    assert (sample.log_size, sample.heartbeat_mtime, sample.log_tail) == (None, None, "")
    # the same file once everyone may enter its directory: read, for every one of them
    conf.parent.chmod(0o755)
    assert nccl_env_conf(conf, user)[:2] == ({"NCCL_IB_HCA": SECRET}, "")
    assert job_conf(conf, user)[:2] == ({"NCCL_IB_HCA": SECRET}, "")
    sample, _ = watched(conf, user)
    assert (sample.log_error, sample.heartbeat_error, sample.log_size) == ("", "", conf.stat().st_size)
    assert SECRET in sample.log_tail and sample.heartbeat_mtime == pytest.approx(conf.stat().st_mtime, abs=1e-3)


def test_the_jobs_own_private_file_is_still_read_as_the_job_and_as_its_owner_when_no_user_is_known(open_dir):
    own = users_own_private_file(open_dir)
    for user in (str(NOBODY), "nobody"):
        assert nccl_env_conf(own, user)[:2] == ({"NCCL_IB_HCA": "mlx5_1"}, "")
        assert job_conf(own, user)[:2] == ({"NCCL_IB_HCA": "mlx5_1"}, "")
    for user in (str(NOBODY), ""):  # an operator's watch (no job's user known): read as the log's owner
        sample, _ = watched(own, user)
        assert (sample.log_error, sample.log_tail) == ("", "NCCL_IB_HCA=mlx5_1\n")
    # the job's own file, behind a directory its user cannot enter: not the user's to read either
    private = open_dir / "private"
    private.mkdir(mode=0o700)
    hidden = users_own_private_file(private)
    settings, error, out = nccl_env_conf(hidden, str(NOBODY))
    assert (settings, "mlx5_1" in out) == ({}, False) and "Permission denied" in error
    sample, out = watched(hidden, "")
    assert "mlx5_1" not in out and "Permission denied" in sample.log_error


def test_a_root_private_file_is_refused_in_the_jobs_users_words_and_never_copied(open_dir):
    shadow = open_dir / "shadow"
    shadow.write_text(f"root:$6${SECRET}:19000::::::\n")
    shadow.chmod(0o600)
    for user in (str(NOBODY), ""):
        settings, error, out = nccl_env_conf(shadow, user)
        assert SECRET not in out and settings == {} and error.startswith("not read: "), error
        sample, out = watched(shadow, user)
        assert SECRET not in out and sample.log_error.startswith(f"nodecheck-watch: {shadow}: not read: ")


def test_without_setpriv_or_runuser_nothing_is_read_as_root_in_anyones_place(open_dir):
    """A node that cannot switch users refuses with the reason; root never reads in the job's place,
    nor in everyone's (a file root may read is no proof that everyone may)."""
    bin_dir = open_dir / "bin"
    bin_dir.mkdir()
    for tool in ("sh", "id", "stat", "head", "tail", "date", "env", "timeout", "awk", "cat", "mktemp", "rm", "df"):
        if shutil.which(tool, path=PATH):
            (bin_dir / tool).symlink_to(shutil.which(tool, path=PATH))
    public = open_dir / "public.conf"
    public.write_text("NCCL_IB_HCA=mlx5_2\n")
    public.chmod(0o644)
    why = "neither setpriv nor runuser (util-linux) is on this node"
    for user in (str(NOBODY), ""):
        settings, error, _ = nccl_env_conf(public, user, env_path=str(bin_dir))
        assert settings == {} and error.startswith("not read: not checked as ") and error.endswith(why), error
        sample, out = watched(public, user, env_path=str(bin_dir))
        assert "mlx5_2" not in out and sample.log_error.endswith(why), sample.log_error


def spying_stat(open_dir: Path, then: str = "") -> tuple[Path, Path]:
    """A bin directory whose `stat` first notes, one line a call, who runs it, its environment and its open
    file descriptors, then runs `then` (shell), then the real stat."""
    bin_dir, notes = open_dir / "spybin", open_dir / "notes"
    bin_dir.mkdir()
    notes.touch()
    notes.chmod(0o666)
    tools = ("sh", "id", "head", "tail", "date", "env", "timeout", "setpriv", "awk", "cat", "ls", "tr", "kill", "mv")
    for tool in tools:
        if shutil.which(tool, path=PATH):
            (bin_dir / tool).symlink_to(shutil.which(tool, path=PATH))
    spy = bin_dir / "stat"
    spy.write_text(
        f"#!{shutil.which('sh', path=PATH)}\n"
        f'echo "uid=$(id -u) fds=$(ls /proc/$$/fd | tr "\\n" ,) env=$(env | tr "\\n" ,)" >>{notes}\n'
        f"{then}\n"
        f'exec {shutil.which("stat", path=PATH)} "$@"\n'
    )
    spy.chmod(0o755)
    return bin_dir, notes


def test_the_reading_process_gets_no_environment_and_no_file_of_roots(open_dir):
    """The reader runs as the user, who may look into its /proc: it must hold no descriptor root had open
    (reopening /proc/PID/fd/N skips the directories' permissions) and none of root's environment."""
    bin_dir, notes = spying_stat(open_dir)
    conf = public_file_in_a_root_only_directory(open_dir)
    conf.parent.chmod(0o755)
    [probe] = probes(NcclEnv(env={"NCCL_CONF_FILE": str(conf)}, job_user=str(NOBODY), node_env=False))
    held_open = ("sh", "-c", 'f=$1; shift; exec 7<"$f"; exec "$@"', "hold", str(conf))  # root's probe holds fd 7
    done = subprocess.run(
        [*held_open, *probe.argv],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": str(bin_dir), "HOME": "/", "ROOTS_TOKEN": "hunter2"},
    )
    assert parse_probe(done.stdout).conf[0].settings == {"NCCL_IB_HCA": SECRET}
    calls = notes.read_text().splitlines()
    assert any(c.startswith("uid=0 ") and "ROOTS_TOKEN=hunter2" in c and ",7," in c for c in calls), calls  # root's
    [reader] = [c for c in calls if c.startswith(f"uid={NOBODY} ")]
    fds = reader.split(" fds=")[1].split(" env=")[0].strip(",").split(",")
    # 3: the file the reader opened itself; 4 and 10: this note's own $(...) pipe and dash's saved fd
    assert "7" not in fds and set(fds) <= {"0", "1", "2", "3", "4", "10"}, reader
    names = {kv.split("=", 1)[0] for kv in reader.split(" env=")[1].strip(",").split(",")}
    assert names <= {"PATH", "LC_ALL", "PWD"} and f"PATH={bin_dir}," in reader, reader  # PWD: dash's own


def test_a_reading_process_that_is_stopped_is_killed_within_its_bound_and_nothing_is_read(open_dir):
    """The job's user can stop their own process (SIGSTOP) or swap a FIFO in after the check: the read
    is bounded (shell.READ_SECONDS, by root's `timeout`) and a read that did not finish is no read."""
    from nodecheck.probes.shell import READ_SECONDS

    bin_dir, _ = spying_stat(open_dir, then='[ "$(id -u)" = 0 ] || kill -STOP $$')
    own = users_own_private_file(open_dir)
    sample, out = watched(own, str(NOBODY), env_path=str(bin_dir))
    assert "mlx5_1" not in out
    assert sample.log_error == (
        f"nodecheck-watch: {own}: not read: the read as nobody did not answer within {READ_SECONDS} s"
    )


def test_a_path_swapped_after_the_users_open_is_refused_by_roots_own_look(open_dir):
    """The reading process answers for the file it opened; root then checks the path still names that very
    file (not followed): one swapped in between is refused, the content of neither is taken."""
    jobs_dir = open_dir / "job"
    jobs_dir.mkdir()
    os.chown(jobs_dir, NOBODY, NOBODY)
    own = users_own_private_file(jobs_dir)
    swap = f'[ "$(id -u)" = 0 ] || {{ mv -f {own} {own}.old && echo NCCL_IB_HCA=swapped >{own}; }}'
    bin_dir, _ = spying_stat(open_dir, then=swap)
    settings, error, out = nccl_env_conf(own, str(NOBODY), env_path=str(bin_dir))
    assert (settings, error) == ({}, "not read: it changed while it was read") and "mlx5_1" not in out
