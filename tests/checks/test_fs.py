"""fs.mounts and fs.free judged on probe outputs built from recorded fstab, mountinfo, findmnt and
stat -f outputs (captures as the runner hands them over); the params a playbook may give."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from nodecheck.checks.fs import DEFAULT_SHM, DEFAULT_TMP, FsFree, FsMounts, free, free_probes, mounts, mounts_probes
from nodecheck.core.model import Status
from nodecheck.parsers.escapes import unescape
from tests.helpers import captures, data

FAIL, PASS, TIMEOUT, ERROR, WARN = Status.FAIL, Status.PASS, Status.TIMEOUT, Status.ERROR, Status.WARN
C_LINES = data("stat-f/host-coreutils-9.1-c-format-tmpfs-full-proc-ext4.txt").splitlines()
FULL_SHM, SMALL_TMPFS, PROC, EXT4_ROOT = C_LINES
NFS_LINE = "9723683840 9587221309 9587221309 1048576 87003340800 86997535922 6969 nfs"  # cscs-ritom, as -c prints it


def escaped(path: str) -> str:
    out = "".join(c if 32 < ord(c) < 127 and c not in "\\@" else f"\\x{ord(c):02x}" for c in path)
    assert unescape(out) == path
    return out


def statfs_out(results: dict[str, object]) -> str:
    """The probe's per-path lines: a stat -f -c line (answered), ("hung", pid, state) or ("error", text)."""
    out = []
    for i, (path, result) in enumerate(results.items()):
        out.append(f"@@nodecheck path.{i} {escaped(path)}\n")
        if isinstance(result, tuple) and result[0] == "hung":
            out.append(f"@@nodecheck hung.{i} {result[1]} {result[2]} 205\n")
            continue
        rc, text = (1, result[1]) if isinstance(result, tuple) else (0, result)
        out.append(
            f"@@nodecheck took.{i} 3\n@@nodecheck begin statfs.{i}\n{text}\n@@nodecheck end statfs.{i} rc={rc}\n"
        )
    return "".join(out)


def mounts_out(results: dict[str, object], table: str, source: str = "mountinfo", fstab: str | None = None) -> str:
    head = f"@@nodecheck begin fstab\n{fstab}@@nodecheck end fstab rc=0\n" if fstab is not None else ""
    return (
        head
        + statfs_out(results)
        + f"@@nodecheck mounts-from {source}\n@@nodecheck begin mounts\n{table}@@nodecheck end mounts rc=0\n"
    )


def judged_mounts(want: FsMounts, stdout: str) -> list[tuple[Status, str, str]]:
    probe = mounts_probes(want)[0]
    return [(v.status, v.subject, v.message) for v in mounts(captures(probe, stdout), want)]


def judged_free(want: FsFree, stdout: str) -> list[tuple[Status, str]]:
    probe = free_probes(want)[0]
    return [(v.status, v.message) for v in free(captures(probe, stdout), want)]


# --- fs.mounts ------------------------------------------------------------------------------------

NODE_FSTAB = data("fstab/constructed-gpu-node-nfs-lustre-noauto.txt")
NODE_MOUNTINFO = data("mountinfo/constructed-lustre-nfs-hung-node.txt")


def test_every_fstab_entry_judged_on_a_node_with_a_hung_lustre_and_a_disk_remounted_ro():
    results = {
        "/": EXT4_ROOT,
        "/boot/efi": EXT4_ROOT,  # not mounted: its statfs answers for / underneath
        "/local/scratch": EXT4_ROOT,
        "/dev/shm": FULL_SHM,
        "/home": NFS_LINE,
        "/opt/apps": NFS_LINE,
        "/lustre/scratch": ("hung", 31337, "D"),
        "/datasets": ("error", "stat: cannot read file system information for '/datasets': Input/output error"),
        "/mnt/nvme cache": SMALL_TMPFS,
    }
    got = judged_mounts(FsMounts(), mounts_out(results, NODE_MOUNTINFO, fstab=NODE_FSTAB))
    assert got == [
        (PASS, "/", "/: xfs rw from /dev/nvme0n1p2, statfs answered in 0.03 s"),
        (FAIL, "/boot/efi", "/boot/efi not mounted, expected vfat (/etc/fstab line 3)"),
        (FAIL, "/local/scratch", "/local/scratch not mounted, expected xfs (/etc/fstab line 4)"),
        (PASS, "/dev/shm", "/dev/shm: tmpfs rw from tmpfs, statfs answered in 0.03 s"),
        (PASS, "/home", "/home: nfs4 rw from nfs01.cluster:/export/home, statfs answered in 0.03 s"),
        (PASS, "/opt/apps", "/opt/apps: nfs4 ro from nfs01.cluster:/export/apps, statfs answered in 0.03 s"),
        (
            FAIL,  # the check bounded the stat itself: a hung mount is judged, and drains (issue 32, 2.1)
            "/lustre/scratch",
            "/lustre/scratch (lustre rw from 10.10.0.1@o2ib:10.10.0.2@o2ib:/lfs01): statfs did not answer within "
            "2 s; stat of /lustre/scratch stuck in the kernel (D state), pid 31337 left behind: it cannot be killed "
            "until the server answers",
        ),
        (
            FAIL,
            "/datasets",
            "/datasets (lustre rw from 10.10.0.1@o2ib:10.10.0.2@o2ib:/lfs01): statfs failed: Input/output error",
        ),
        (FAIL, "/mnt/nvme cache", "/mnt/nvme cache (ext4 ro from /dev/nvme1n1p1): mounted ro, expected rw"),
    ]


def test_listed_mounts_with_type_options_and_source_read_from_findmnt_pairs():
    table = data("findmnt/wiki-ubuntu-16.04-vagrant-pairs.txt")
    want = FsMounts(
        from_fstab=False,
        mounts=[
            {"path": "/vagrant", "fstype": ["nfs", "nfs4"], "source": "nfs01:/*"},
            {"path": "/sys/fs/cgroup", "options": ["rw"], "forbidden_options": ["noexec"]},
            {"path": "/var/lib/lxcfs", "fstype": "fuse.*", "options": ["allow_other"], "source": "/^lxc/"},
            {"path": "/dev/shm", "options": ["rw", "nosuid"], "forbidden_options": ["ro"]},
        ],
    )
    results = {
        "/vagrant": SMALL_TMPFS,
        "/sys/fs/cgroup": SMALL_TMPFS,
        "/var/lib/lxcfs": SMALL_TMPFS,
        "/dev/shm": FULL_SHM,
    }
    got = judged_mounts(want, mounts_out(results, table, source="findmnt"))
    assert got == [
        (
            FAIL,
            "/vagrant",
            "/vagrant (vboxsf rw from vagrant): type vboxsf, expected nfs or nfs4; source vagrant, expected nfs01:/*",
        ),
        (
            FAIL,
            "/sys/fs/cgroup",
            "/sys/fs/cgroup (tmpfs ro from tmpfs): mounted ro, expected rw; mounted noexec, which is forbidden",
        ),
        (PASS, "/var/lib/lxcfs", "/var/lib/lxcfs: fuse.lxcfs rw from lxcfs, statfs answered in 0.03 s"),
        (PASS, "/dev/shm", "/dev/shm: tmpfs rw from tmpfs, statfs answered in 0.03 s"),
    ]


def test_a_listed_mount_overrides_its_fstab_entry_and_excluded_entries_are_not_judged():
    want = FsMounts(mounts=[{"path": "/opt/apps", "options": ["rw"]}], exclude=["/lustre/scratch", "/boot/efi"])
    results = dict.fromkeys(
        ["/", "/local/scratch", "/dev/shm", "/home", "/opt/apps", "/datasets", "/mnt/nvme cache"], EXT4_ROOT
    )
    got = {
        subject: (status, message)
        for status, subject, message in judged_mounts(want, mounts_out(results, NODE_MOUNTINFO, fstab=NODE_FSTAB))
    }
    assert "/lustre/scratch" not in got and "/boot/efi" not in got
    assert got["/opt/apps"] == (FAIL, "/opt/apps (nfs4 ro from nfs01.cluster:/export/apps): mounted ro, expected rw")


def test_an_unconfigured_fstab_expects_nothing_and_says_so():
    fstab = data("fstab/host-debian-12-unconfigured.txt")
    got = judged_mounts(FsMounts(), mounts_out({}, NODE_MOUNTINFO, fstab=fstab))
    assert got == [
        (
            WARN,
            "",
            "no mounts judged: /etc/fstab mounts nothing at boot and the playbook lists none (list the mounts "
            "jobs need under mounts:)",
        )
    ]


def test_no_fstab_warns_and_the_listed_mounts_are_still_judged():
    stdout = "@@nodecheck fstab-missing /etc/fstab\n" + mounts_out({"/": EXT4_ROOT}, NODE_MOUNTINFO)
    got = judged_mounts(FsMounts(mounts=[{"path": "/", "fstype": "xfs"}]), stdout)
    assert got == [
        (WARN, "/etc/fstab", "no /etc/fstab on the node: only the listed mounts are checked"),
        (PASS, "/", "/: xfs rw from /dev/nvme0n1p2, statfs answered in 0.03 s"),
    ]


def test_a_missing_mount_whose_directory_hangs_says_both():
    want = FsMounts(from_fstab=False, mounts=[{"path": "/scratch", "fstype": "lustre"}])
    got = judged_mounts(want, mounts_out({"/scratch": ("hung", 77, "gone")}, NODE_MOUNTINFO))
    assert got == [
        (
            FAIL,
            "/scratch",
            "/scratch not mounted, expected lustre (playbook); statfs did not answer within 2 s (the stat was killed)",
        )
    ]


# --- issue 32, 3.1: a mount whose options did not reach nodecheck is not judged rw ---------------------

LUSTRE_RO = 'TARGET="/lustre/scratch" SOURCE="10.10.0.1@o2ib:/lfs01" FSTYPE="lustre" OPTIONS="ro,flock,lazystatfs"\n'
NVME_LINE = "130 22 259:5 / /mnt/nvme\\040cache rw,relatime shared:90 - ext4 /dev/nvme1n1p1 ro,errors=remount-ro\n"


def test_a_read_only_lustre_whose_findmnt_line_lost_its_options_is_an_error_not_a_pass():
    want = FsMounts(from_fstab=False, mounts=[{"path": "/lustre/scratch", "fstype": "lustre"}])
    results = {"/lustre/scratch": NFS_LINE}
    whole = judged_mounts(want, mounts_out(results, LUSTRE_RO, source="findmnt"))
    assert whole == [
        (FAIL, "/lustre/scratch", "/lustre/scratch (lustre ro from 10.10.0.1@o2ib:/lfs01): mounted ro, expected rw")
    ]
    cut = LUSTRE_RO.split(" OPTIONS=")[0] + "\n"
    assert judged_mounts(want, mounts_out(results, cut, source="findmnt")) == [
        (
            ERROR,
            "/lustre/scratch",
            "/lustre/scratch (lustre, options unknown, from 10.10.0.1@o2ib:/lfs01): cannot judge rw: "
            "findmnt printed no OPTIONS for it",
        )
    ]


def test_an_ext4_whose_mountinfo_line_lost_its_superblock_options_is_an_error_not_a_pass():
    want = FsMounts(from_fstab=False, mounts=[{"path": "/mnt/nvme cache", "fstype": "ext4"}])
    results = {"/mnt/nvme cache": EXT4_ROOT}
    whole = judged_mounts(want, mounts_out(results, NVME_LINE))
    assert whole == [
        (FAIL, "/mnt/nvme cache", "/mnt/nvme cache (ext4 ro from /dev/nvme1n1p1): mounted ro, expected rw")
    ]
    cut = NVME_LINE.split(" ro,errors")[0] + "\n"
    assert judged_mounts(want, mounts_out(results, cut)) == [
        (
            ERROR,
            "/mnt/nvme cache",
            "/mnt/nvme cache (ext4, options unknown, from /dev/nvme1n1p1): cannot judge rw: its mountinfo line has "
            "no superblock options (a superblock remounted ro would not show)",
        )
    ]


def test_unknown_options_are_not_judged_either_way_and_a_missing_type_or_source_is_an_error():
    table = 'TARGET="/scratch" FSTYPE="" OPTIONS="relatime"\n'
    want = FsMounts(
        from_fstab=False,
        mounts=[
            {
                "path": "/scratch",
                "fstype": "xfs",
                "options": ["rw", "flock"],
                "forbidden_options": ["noexec"],
                "source": "/dev/*",
            }
        ],
    )
    assert judged_mounts(want, mounts_out({"/scratch": EXT4_ROOT}, table, source="findmnt")) == [
        (
            ERROR,
            "/scratch",
            "/scratch (?, options unknown, from ?): no type in the mount table, expected xfs; "
            "cannot judge rw, flock, not noexec: neither rw nor ro among its options; "
            "no source in the mount table, expected /dev/*",
        )
    ]


@pytest.mark.parametrize(
    "stdout, message",
    [
        (
            "@@nodecheck error cannot write a temporary file in any of /tmp /dev/shm /run /var/tmp\n",
            "fs.mounts probe: cannot write a temporary file in any of /tmp /dev/shm /run /var/tmp",
        ),
    ],
)
def test_a_probe_that_could_not_start_is_an_error(stdout, message):
    assert judged_mounts(FsMounts(), stdout) == [(ERROR, "", message)]


def test_an_unreadable_mount_table_is_a_parse_error_the_runner_reports():
    from nodecheck.core.errors import ParseError

    stdout = "@@nodecheck mounts-from findmnt\n@@nodecheck begin mounts\nfindmnt: oops\n@@nodecheck end mounts rc=1\n"
    with pytest.raises(ParseError, match="exited 1: findmnt: oops"):
        judged_mounts(FsMounts(mounts=[{"path": "/"}], from_fstab=False), stdout)


@pytest.mark.parametrize(
    "params",
    [
        {"from_fstab": False},
        {"mounts": [{"path": "relative/dir"}]},
        {"mounts": [{"path": "/a\nb"}]},
        {"mounts": [{"path": "/a/../b"}]},
        {"mounts": [{"path": "/a"}, {"path": "/a/"}]},
        {"mounts": [{"path": "/a", "options": ["rw,noexec"]}]},
        {"mounts": [{"path": "/a", "source": "/[unclosed/"}]},
        {"stat_timeout_s": 0},
        {"exclude": ["tmp"]},
        {"timeout": 3},
    ],
)
def test_mounts_params_refused(params):
    with pytest.raises(ValidationError):
        FsMounts.model_validate(params)


def test_mounts_params_normalise_and_reach_the_probe_as_arguments():
    want = FsMounts.model_validate({"mounts": [{"path": "/lustre/scratch/", "fstype": "lustre"}], "exclude": ["/x"]})
    assert want.mounts[0].path == "/lustre/scratch" and want.mounts[0].fstype == ("lustre",)
    argv = mounts_probes(want)[0].argv
    assert argv[3:] == ("nodecheck-fs-mounts", "200", "1", "1", "/lustre/scratch", "/x")


# --- fs.free --------------------------------------------------------------------------------------


def test_defaults_judge_dev_shm_and_tmp():
    want = FsFree()
    assert want.floors == {"/dev/shm": DEFAULT_SHM, "/tmp": DEFAULT_TMP}
    got = judged_free(want, statfs_out({"/dev/shm": FULL_SHM, "/tmp": EXT4_ROOT}))
    assert got == [
        (FAIL, "/dev/shm size 0.25 GiB, expected >= 1 GiB; tmpfs"),
        (FAIL, "/dev/shm free 0 GiB, expected >= 1 GiB; 2.3% free, 0.25 GiB tmpfs"),
        (PASS, "/tmp free 77.93 GiB (>= 1 GiB); 76.8% free, 251.97 GiB ext2/ext3"),
        (PASS, "/tmp free 76.8 % (>= 5 %); 77.93 GiB available, 251.97 GiB ext2/ext3"),
        (PASS, "/tmp inodes free 97.1 % (>= 1 %); 16302665 of 16777216 inodes free, ext2/ext3"),
    ]


def test_the_filesystem_is_named_as_the_mount_table_names_it_not_by_statfs_magic():
    """Issue 32, 2.4: statfs's magic says "ext2/ext3" for an ext4; the probe now sends the mount table
    and the path's mount (the longest target above it, / for a /tmp without its own) names it."""
    table = (
        'TARGET="/" SOURCE="/dev/nvme0n1p2" FSTYPE="ext4" OPTIONS="rw,relatime,errors=remount-ro"\n'
        'TARGET="/dev/shm" SOURCE="tmpfs" FSTYPE="tmpfs" OPTIONS="rw,nosuid,nodev"\n'
        'TARGET="/tmpfiles" SOURCE="/dev/sdb1" FSTYPE="xfs" OPTIONS="rw"\n'
    )
    stdout = statfs_out({"/dev/shm": FULL_SHM, "/tmp": EXT4_ROOT}) + (
        f"@@nodecheck mounts-from findmnt\n@@nodecheck begin mounts\n{table}@@nodecheck end mounts rc=0\n"
    )
    got = judged_free(FsFree(shm=None), stdout)
    assert got == [
        (PASS, "/tmp free 77.93 GiB (>= 1 GiB); 76.8% free, 251.97 GiB ext4"),
        (PASS, "/tmp free 76.8 % (>= 5 %); 77.93 GiB available, 251.97 GiB ext4"),
        (PASS, "/tmp inodes free 97.1 % (>= 1 %); 16302665 of 16777216 inodes free, ext4"),
    ]
    # a table cut off names nothing: statfs's own word stands, and nothing is judged on the table
    cut = stdout.replace("@@nodecheck end mounts rc=0\n", "")
    first = judged_free(FsFree(shm=None), cut)[0]
    assert first == (PASS, "/tmp free 77.93 GiB (>= 1 GiB); 76.8% free, 251.97 GiB ext2/ext3")


def test_warn_bands_no_inode_count_and_a_size_zero_fs():
    want = FsFree(
        shm=None,
        tmp=None,
        paths={
            "/ritom/scratch": {"free_pct": {"fail_below": 50, "warn_below": 99}, "inodes_free_pct": 5},
            "/proc": {"inodes_free_pct": 1, "free_pct": 1},
        },
    )
    got = judged_free(want, statfs_out({"/ritom/scratch": NFS_LINE, "/proc": PROC}))
    assert got == [
        (WARN, "/ritom/scratch free 98.5 %, expected >= 99 %; 9362520.8 GiB available, 9495785 GiB nfs"),
        (PASS, "/ritom/scratch inodes free 99.9 % (>= 5 %); 86997535922 of 87003340800 inodes free, nfs"),
        (ERROR, "/proc: size 0 (proc): no free % to judge"),
        (PASS, "/proc: proc has no fixed inode count (0 reported): no inode limit to run out of"),
    ]


def test_a_hung_path_fails_naming_it_and_a_failed_statfs_says_why():
    want = FsFree(tmp=None, paths={"/scratch": {"free_gib": 1}, "/secret": {"free_gib": 1}, "/gone": {"free_gib": 1}})
    results = {
        "/dev/shm": ("hung", 99, "D"),
        "/scratch": (
            "error",
            "stat: cannot read file system information for '/scratch': Transport endpoint is not connected",
        ),
        "/secret": ("error", "stat: cannot read file system information for '/secret': Permission denied"),
        "/gone": ("error", "stat: cannot read file system information for '/gone': No such file or directory"),
    }
    got = judged_free(want, statfs_out(results))
    assert got == [
        (
            FAIL,
            "/dev/shm: statfs did not answer within 2 s; stat of /dev/shm stuck in the kernel (D state), pid 99 "
            "left behind: it cannot be killed until the server answers",
        ),
        (FAIL, "/scratch: statfs failed: Transport endpoint is not connected"),
        (ERROR, "/secret: statfs failed: Permission denied"),
        (FAIL, "/gone: does not exist (No such file or directory)"),
    ]


def test_a_path_the_probe_did_not_report_is_an_error():
    got = judged_free(FsFree(shm=None), statfs_out({}))
    assert got == [(ERROR, "/tmp: no statfs result from the probe")]


@pytest.mark.parametrize(
    "params",
    [
        {"shm": None, "tmp": None},
        {"paths": {"relative": {"free_gib": 1}}},
        {"paths": {"/x": {}}},
        {"paths": {"/x": {"free_gib": {"fail_below": 2, "warn_below": 1}}}},
        {"paths": {"/x": {"free_gib": True}}},
        {"stat_timeout_s": 61},
    ],
)
def test_free_params_refused(params):
    with pytest.raises(ValidationError):
        FsFree.model_validate(params)


def test_free_paths_override_the_defaults_and_a_number_is_a_fail_floor():
    want = FsFree.model_validate({"paths": {"/dev/shm/": {"free_gib": 64}, "/local/scratch": {"free_pct": 10}}})
    assert want.floors["/dev/shm"].free_gib is not None and want.floors["/dev/shm"].free_gib.fail_below == 64
    assert want.floors["/dev/shm"].size_gib is None
    assert list(want.floors) == ["/dev/shm", "/tmp", "/local/scratch"]
    assert free_probes(want)[0].argv[4:] == ("200", "/dev/shm", "/tmp", "/local/scratch")


def test_a_400_digit_count_is_an_error_naming_the_path_not_an_overflow():
    line = "1" * 400 + " 5 5 4096 100 50 ef53 ext2/ext3"  # float(blocks * bsize) overflowed: "internal error"
    got = judged_free(FsFree(shm=None), statfs_out({"/tmp": line}))
    said = "a count of 400 digits (a statfs count is at most 2^64-1)"
    assert got == [(ERROR, f"/tmp: cannot read stat -f output: {said}")]
