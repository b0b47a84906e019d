"""job-check's counts run and are read as the job's user, never as root (issue 32, item 1.2): a user's
JOB.yml whose `counts_command` wrote `id` got uid=0(root), and `counts_file: /etc/shadow` printed a
shadow line in the error. Run for real as root, with `nobody` as the JOB.yml's owner."""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nodecheck.core.errors import ConfigError
from nodecheck.job.counts import read_counts
from nodecheck.job.spec import base_dir, load_job_spec
from tests import everyone_tmp

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="switches to the job's user: needs root")
NOBODY = pwd.getpwnam("nobody")
REPO = Path(__file__).resolve().parents[2]
SECRET = "root-only-secret-line-7f3a"  # a root-only file's content: must never reach a message
UNKNOWN_UID = 3_999_999  # no user on this machine has it


tmp_path = everyone_tmp.tmp_path  # a directory everyone may enter (pytest's own: root's only)


@pytest.fixture
def mine(tmp_path) -> Path:
    """nobody's own directory: where their JOB.yml, counts and proof files lie."""
    d = tmp_path / "job"
    d.mkdir(mode=0o755)
    os.chown(d, NOBODY.pw_uid, NOBODY.pw_gid)
    return d


def owned(path: Path, text: str, mode: int = 0o644, uid: int = NOBODY.pw_uid) -> Path:
    path.write_text(text)
    path.chmod(mode)
    os.chown(path, uid, NOBODY.pw_gid if uid == NOBODY.pw_uid else 0)
    return path


def root_only(tmp_path: Path) -> Path:
    """A 0600 root file in the shared directory (nobody may enter it but not read the file): it parses
    as a counts file whose line 2 fails, so a read as root would quote that line."""
    return owned(tmp_path / "private.csv", f"0,5\n{SECRET}\n", mode=0o600, uid=0)


def job_yml(d: Path, balance: str, uid: int = NOBODY.pw_uid) -> Path:
    return owned(d / "job.yml", f"world_size: 2\ngpus_per_node: 2\ndata_balance: {balance}\n", uid=uid)


def counts_as_nobody(d: Path, balance: str):
    spec = load_job_spec(job_yml(d, balance))
    return read_counts(spec.data_balance, base_dir(spec), user=str(NOBODY.pw_uid))


def job_check(job: Path, out: Path, **env: str) -> subprocess.CompletedProcess:
    """`python -m nodecheck job-check JOB.yml --local` as a child, as an operator runs it (as root)."""
    return subprocess.run(
        [sys.executable, "-m", "nodecheck", "job-check", str(job), "--local", "--format", "json"]
        + ["--output-dir", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={**os.environ, **env},
    )


# --- through the real CLI ---------------------------------------------------------------------------


def test_job_check_runs_a_users_counts_command_as_that_user_with_a_clean_environment(tmp_path, mine):
    """The issue's proof, through `nodecheck job-check`: the command writes its uid, groups, working
    directory and environment into nobody's directory. As root it wrote 0 and root's environment."""
    command = "id -u > uid; id -G > groups; pwd > cwd; env > env; echo '[5, 5]'"
    job = job_yml(mine, f'{{counts_command: [/bin/sh, -c, "{command}"], per_step: 1}}')
    done = job_check(job, tmp_path / "reports", NODECHECK_TEST_SECRET="root-env-secret")
    assert done.returncode != 64, done.stderr  # the counts were read: job-check judged the job
    assert (mine / "uid").read_text().split() == [str(NOBODY.pw_uid)]
    groups = {int(g) for g in (mine / "groups").read_text().split()}
    assert groups == set(os.getgrouplist("nobody", NOBODY.pw_gid)) and 0 not in groups
    assert (mine / "cwd").read_text().strip() == str(mine)
    env = dict(line.split("=", 1) for line in (mine / "env").read_text().splitlines() if "=" in line)
    assert "NODECHECK_TEST_SECRET" not in env  # root's environment stays root's
    assert (env["PATH"], env["HOME"], env["USER"], env["LOGNAME"]) == (
        "/usr/local/bin:/usr/bin:/bin",
        NOBODY.pw_dir,
        "nobody",
        "nobody",
    )


def test_job_check_refuses_a_users_counts_file_they_cannot_read_and_quotes_none_of_it(tmp_path, mine):
    private = root_only(tmp_path)
    for path in (str(private), "/etc/shadow"):
        job = job_yml(mine, f"{{counts_file: {path}, per_step: 1}}")
        done = job_check(job, tmp_path / "reports")
        assert done.returncode == 64, done.stderr
        assert done.stderr.startswith(f"nodecheck: error: {path}: cannot read the rank counts as nobody: "), done.stderr
        assert "Permission denied" in done.stderr
        said = done.stdout + done.stderr
        assert SECRET not in said and "root:" not in said and ":99999:" not in said


def test_job_check_of_a_job_yml_whose_owner_is_no_user_here_is_refused_at_its_line(tmp_path, mine):
    job = job_yml(mine, "{counts_command: [/bin/sh, -c, 'id -u > uid'], per_step: 1}", uid=UNKNOWN_UID)
    done = job_check(job, tmp_path / "reports")
    assert done.returncode == 64
    assert done.stderr.startswith(
        f"nodecheck: error: {job}:3: data_balance.counts_command: the job's user {UNKNOWN_UID} is not a user "
        "on this machine"
    ), done.stderr
    assert not (mine / "uid").exists()  # nothing ran, as root or anyone


# --- read_counts, with the job's user given -------------------------------------------------------------


def test_the_counts_command_runs_as_the_user_in_its_own_session(mine):
    command = "id -u > uid; read -r _ _ _ _ _ sid _ < /proc/$$/stat; echo $sid > sid; echo [1, 2]"
    got = counts_as_nobody(mine, f"{{counts_command: [/bin/sh, -c, '{command}']}}")
    assert got.counts == {0: 1, 1: 2}
    assert (mine / "uid").read_text().split() == [str(NOBODY.pw_uid)]
    assert int((mine / "sid").read_text()) != os.getsid(0)  # start_new_session: killpg reaches all of it


def test_a_command_that_writes_where_only_root_may_fails_as_the_user(tmp_path, mine):
    (tmp_path / "root-dir").mkdir(mode=0o755)
    with pytest.raises(ConfigError) as e:
        counts_as_nobody(mine, f"{{counts_command: [/bin/sh, -c, 'id -u > {tmp_path}/root-dir/uid']}}")
    assert "Permission denied" in str(e.value)
    assert not (tmp_path / "root-dir" / "uid").exists()


def test_a_root_only_counts_file_is_refused_and_none_of_it_is_quoted(tmp_path, mine):
    private = root_only(tmp_path)
    with pytest.raises(ConfigError) as e:
        counts_as_nobody(mine, f"{{counts_file: {private}}}")
    assert str(e.value).startswith(f"{private}: cannot read the rank counts as nobody: Permission denied")
    assert SECRET not in str(e.value) and "5" not in e.value.message


def test_a_symbolic_link_to_a_root_only_file_is_refused(tmp_path, mine):
    private = root_only(tmp_path)
    link = mine / "counts.csv"
    link.symlink_to(private)
    os.lchown(link, NOBODY.pw_uid, NOBODY.pw_gid)
    with pytest.raises(ConfigError) as e:
        counts_as_nobody(mine, "{counts_file: counts.csv}")
    assert str(e.value).startswith(f"{link}: cannot read the rank counts as nobody: it is a symbolic link")
    assert SECRET not in str(e.value)


def test_the_users_own_private_counts_file_is_read(mine):
    owned(mine / "counts.json", '{"0": 7, "1": 8}', mode=0o600)
    got = counts_as_nobody(mine, "{counts_file: counts.json}")
    assert (got.counts, got.source) == ({0: 7, 1: 8}, "counts.json")


def test_the_users_own_bad_counts_file_is_quoted_to_them(mine):
    """What the user could read is theirs: the message may show it (here, to find the bad line)."""
    owned(mine / "counts.csv", "0,5\nnot-a-count\n", mode=0o600)
    with pytest.raises(ConfigError) as e:
        counts_as_nobody(mine, "{counts_file: counts.csv}")
    assert "not-a-count" in str(e.value)


def test_a_fifo_or_a_directory_is_refused_without_waiting(mine):
    """A FIFO with no writer is opened without blocking and refused (a blocked open would end in the
    reader's timeout, a different message), as is a directory."""
    os.mkfifo(mine / "counts.csv")
    os.chown(mine / "counts.csv", NOBODY.pw_uid, NOBODY.pw_gid)
    (mine / "dir.csv").mkdir()
    for name in ("counts.csv", "dir.csv"):
        with pytest.raises(ConfigError) as e:
            counts_as_nobody(mine, f"{{counts_file: {name}}}")
        assert str(e.value).startswith(f"{mine / name}: cannot read the rank counts as nobody: not a regular file")


def test_a_read_that_hangs_is_stopped_at_its_bound_and_the_reader_killed(mine, monkeypatch):
    """A hung mount, played by a FIFO opened without O_NONBLOCK: the child reading as the user is
    killed at AS_USER_TIMEOUT_S, and job-check says so."""
    import nodecheck.job.counts as counts

    forked: list[int] = []
    real_fork = os.fork

    def fork() -> int:
        pid = real_fork()
        if pid:
            forked.append(pid)
        return pid

    monkeypatch.setattr(counts, "_OPEN_FLAGS", counts._OPEN_FLAGS & ~os.O_NONBLOCK)
    monkeypatch.setattr(counts, "AS_USER_TIMEOUT_S", 0.5)
    monkeypatch.setattr(os, "fork", fork)
    os.mkfifo(mine / "counts.csv")
    os.chown(mine / "counts.csv", NOBODY.pw_uid, NOBODY.pw_gid)
    with pytest.raises(ConfigError) as e:
        counts_as_nobody(mine, "{counts_file: counts.csv}")
    assert "cannot read the rank counts as nobody: no answer within 0.5 s (a hung filesystem?); stopped" in str(e.value)
    [pid] = forked
    deadline = time.monotonic() + 60  # the state, not a sleep: killed and reaped
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{pid}")


def test_an_oversized_counts_file_is_refused_unread(mine, monkeypatch):
    import nodecheck.job.counts as counts

    monkeypatch.setattr(counts, "MAX_COUNTS_BYTES", 10)
    owned(mine / "counts.csv", "0,5\n" * 10)
    with pytest.raises(ConfigError) as e:
        counts_as_nobody(mine, "{counts_file: counts.csv}")
    assert "more than a counts file holds" in str(e.value)


def test_a_directory_the_user_cannot_enter_is_a_clear_error(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o700)  # root's: nobody cannot enter it
    job = job_yml(locked, "{counts_command: [/bin/sh, -c, 'id -u > /tmp/never']}")
    spec = load_job_spec(job)
    with pytest.raises(ConfigError) as e:
        read_counts(spec.data_balance, base_dir(spec), user=str(NOBODY.pw_uid))
    assert str(e.value).startswith(
        f"data_balance.counts_command: nobody cannot enter {locked} (JOB.yml's directory, where the command runs): "
        "Permission denied"
    )


@pytest.mark.parametrize("user", [str(UNKNOWN_UID), "no-such-user-x"])
def test_a_job_user_who_is_not_a_user_here_is_refused_not_run_as_root(mine, user):
    for balance, field in (("{counts_command: 'id -u'}", "counts_command"), ("{counts_file: c.csv}", "counts_file")):
        spec = load_job_spec(job_yml(mine, balance))
        with pytest.raises(ConfigError) as e:
            read_counts(spec.data_balance, base_dir(spec), user=user)
        assert str(e.value).startswith(f"data_balance.{field}: the job's user {user} is not a user on this machine")


def test_with_no_jobs_user_an_operators_own_file_is_read_as_root(tmp_path):
    """A root-owned JOB.yml handed by an operator, no Slurm job: the operator's own file, trusted."""
    job = job_yml(tmp_path, "{counts_file: c.csv}", uid=0)
    owned(tmp_path / "c.csv", "0,5\n1,6\n", mode=0o600, uid=0)
    spec = load_job_spec(job)
    assert read_counts(spec.data_balance, base_dir(spec), user="").counts == {0: 5, 1: 6}


def test_the_job_yml_owner_is_the_file_read_not_what_lies_at_its_path_later(tmp_path, mine, monkeypatch, capsys):
    """The job's user is the owner of the JOB.yml as it was read. Stat'ed again later, the path could
    name a root-owned file the user put there in the meantime (they own the directory), and the
    counts_command read from their file would run as root."""
    from nodecheck.cli import main
    from nodecheck.job import command

    job = job_yml(mine, "{counts_command: [/bin/sh, -c, 'id -u > uid; echo [5, 5]'], per_step: 1}")
    roots = owned(tmp_path / "roots.yml", "world_size: 2\ngpus_per_node: 2\n", uid=0)
    find_nodes = command._nodes

    def swapped_then_nodes(args):  # runs after JOB.yml was read, before its counts
        os.replace(roots, job)
        return find_nodes(args)

    monkeypatch.setattr(command, "_nodes", swapped_then_nodes)
    code = main(["job-check", str(job), "--local", "--format", "json", "--output-dir", str(tmp_path / "reports")])
    assert code != 64, capsys.readouterr().err
    assert (mine / "uid").read_text().split() == [str(NOBODY.pw_uid)]
