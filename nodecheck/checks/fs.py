"""Filesystems: the mounts a job needs are there, of the right type and writable, and answer
(fs.mounts); the paths a job writes to have room (fs.free: /dev/shm, /tmp, and any listed).

A hung Lustre or NFS client is the classic "the job hangs" node fault: every rank blocks in open()
and nothing fails. Both checks statfs each path in its own killable process under a short bound
(nodecheck/probes/fs.py says how, and why a process can be left behind); a path that does not
answer within the bound FAILs naming it: the check did judge (it bounded the stat itself, and the
mount did not answer), and every rank of the next job would block in open() there.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from nodecheck.core.errors import ParseError
from nodecheck.core.model import Probe, Status, Verdict, excerpt, worst
from nodecheck.core.registry import Captures, check
from nodecheck.core.thresholds import Floor, fmt
from nodecheck.parsers.findmnt import Mount, last_mount, mount_of, parse_findmnt, parse_mountinfo
from nodecheck.parsers.fstab import FstabEntry, parse_fstab
from nodecheck.parsers.sections import Sections, split_sections
from nodecheck.parsers.statfs import Answered, Hung, StatfsResult, parse_statfs_line, read_statfs_results
from nodecheck.probes.fs import free_probe, mounts_probe

MAX_PATHS = 256  # paths one probe stat's at once (each is a process on the node)
PATH_MAX = 4096


def _abs_path(value: str) -> str:
    """A path that reaches the node: absolute, one line, no NUL, without "." or ".." parts (the
    mount table names canonical paths, and a path is compared with it as written)."""
    if not value.startswith("/") or len(value) > PATH_MAX or any(c in value for c in "\0\n\r"):
        raise ValueError(f"not an absolute path: {value[:80]!r}")
    value = value.rstrip("/") or "/"
    if any(part in (".", "..") for part in value.split("/")) or "//" in value:
        raise ValueError(f"not a canonical path (no //, . or .. parts): {value[:80]!r}")
    return value


AbsPath = Annotated[str, AfterValidator(_abs_path)]
# one mount option as the mount table shows it: "rw", "noexec", "vers=4.2", "flock"
MountOption = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.:=@+/-]+$", max_length=256)]
# a filesystem type, or a glob of them: "lustre", "nfs4", "fuse.*"
FsType = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.+*?-]+$", max_length=64)]


def _one_or_many(value: Any) -> Any:
    return (value,) if isinstance(value, str) else value


def _floor_shorthand(value: Any) -> Any:
    # `free_gib: 1` is `free_gib: {fail_below: 1}` (bool is not a number here)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return {"fail_below": value}
    return value


FloorArg = Annotated[Floor, BeforeValidator(_floor_shorthand)]


def source_matches(pattern: str, source: str) -> bool:
    """A `source` pattern: "/REGEX/" is searched for, anything else is a shell glob matched whole
    (NHC's convention, which `nodecheck import-nhc` keeps)."""
    if len(pattern) > 2 and pattern.startswith("/") and pattern.endswith("/"):
        return re.search(pattern[1:-1], source) is not None
    return fnmatch.fnmatchcase(source, pattern)


# --- fs.mounts ----------------------------------------------------------------------------------


class MountSpec(BaseModel):
    """One mount the node must have."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    path: AbsPath = Field(..., description="the mount point, as the mount table shows it (/lustre/scratch)")
    fstype: Annotated[tuple[FsType, ...], BeforeValidator(_one_or_many)] = Field(
        (), description="the type, or a list it must be one of (globs allowed: fuse.*); empty: any"
    )
    options: tuple[MountOption, ...] = Field(
        ("rw",), description="options it must be mounted with (rw: not read-only; ro: read-only)"
    )
    forbidden_options: tuple[MountOption, ...] = Field((), description="options it must not have (ro, noexec)")
    source: str = Field(
        "",
        max_length=4096,
        description='what must be mounted there: a glob ("10.0.0.1@o2ib:/scratch", "nfs01:/home*") '
        'or a "/regular expression/"; empty: any',
    )

    @field_validator("source")
    @classmethod
    def _source(cls, value: str) -> str:
        if any(c in value for c in "\0\n\r"):
            raise ValueError("a source pattern is one line")
        if len(value) > 2 and value.startswith("/") and value.endswith("/"):
            try:
                re.compile(value[1:-1])
            except re.error as e:
                raise ValueError(f"not a regular expression: {e}") from None
        return value


class FsMounts(BaseModel):
    """Which mounts must be there, and how long a statfs of one may take."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    mounts: tuple[MountSpec, ...] = Field(
        (), description="mounts to check: [{path, fstype, options, forbidden_options, source}]"
    )
    from_fstab: bool = Field(
        True,
        description="also every /etc/fstab entry mounted at boot (not noauto, not swap), with its type "
        "(auto and bind mounts: any) and rw unless fstab says ro; a listed mount overrides its entry",
    )
    exclude: tuple[AbsPath, ...] = Field(
        (), description="fstab mount points not to check (never stat'ed: a known-dead one stays untouched)"
    )
    stat_timeout_s: float = Field(
        2.0,
        gt=0,
        le=60,
        description="how long a statfs of one mount may take; all run at once, so N hung mounts cost one "
        "bound (a healthy Lustre/NFS client answers in milliseconds)",
    )

    @model_validator(mode="after")
    def _something(self) -> FsMounts:
        if not self.mounts and not self.from_fstab:
            raise ValueError("nothing to check: list mounts, or set from_fstab: true")
        paths = [m.path for m in self.mounts]
        if len(set(paths)) != len(paths):
            raise ValueError("a mount point is listed twice")
        if len(paths) + len(self.exclude) > MAX_PATHS:
            raise ValueError(f"at most {MAX_PATHS} mounts and exclusions")
        return self


def mounts_probes(want: FsMounts) -> list[Probe]:
    return [mounts_probe([m.path for m in want.mounts], want.from_fstab, want.stat_timeout_s, want.exclude)]


@dataclass(frozen=True)
class Expected:
    path: str
    fstypes: tuple[str, ...]  # globs; () = any
    options: tuple[str, ...]
    forbidden: tuple[str, ...]
    source: str  # a pattern; "" = any
    origin: str  # "playbook", "/etc/fstab line 12"


def _from_fstab(e: FstabEntry) -> Expected:
    # fstab's type as the mount table will show it: "nfs" mounts as nfs4 when NFSv4 is negotiated;
    # "auto" and bind mounts take the type of what is found or bound; "fuse" with the old
    # "sshfs#host:/dir" source mounts as fuse.sshfs
    if e.bind or e.fstype in ("auto", "none"):
        types: tuple[str, ...] = ()
    elif e.fstype == "nfs":
        types = ("nfs", "nfs4")
    elif e.fstype == "fuse":
        types = ("fuse", "fuse.*")
    else:
        types = (e.fstype,)
    return Expected(e.target, types, ("ro",) if e.read_only else ("rw",), (), "", f"/etc/fstab line {e.line}")


def _from_spec(m: MountSpec) -> Expected:
    return Expected(m.path, m.fstype, m.options, m.forbidden_options, m.source, "playbook")


def _has_option(mount: Mount, option: str) -> bool | None:
    """Whether the mount has `option` (rw: not read-only); None when the mount table's line does not
    say (options cut off): unknown is neither rw nor ro (issue 32, 3.1)."""
    if option in ("rw", "ro"):
        read_only = mount.read_only
        return None if read_only is None else read_only == (option == "ro")
    return option in mount.options if mount.options_known else None


def _option_problems(exp: Expected, mount: Mount) -> list[tuple[Status, str]]:
    """A FAIL per option seen wrong; one ERROR naming the options the line cannot tell."""
    problems: list[tuple[Status, str]] = []
    unknown: list[str] = []
    for option in exp.options:
        has = _has_option(mount, option)
        if has is None:
            unknown.append(option)
        elif not has:
            seen = "ro" if option == "rw" else "rw" if option == "ro" else "without " + option
            problems.append((Status.FAIL, f"mounted {seen}, expected {option}"))
    for option in exp.forbidden:
        has = _has_option(mount, option)
        if has is None:
            unknown.append("not " + option)
        elif has:
            problems.append((Status.FAIL, f"mounted {option}, which is forbidden"))
    if unknown:
        problems.append((Status.ERROR, f"cannot judge {', '.join(unknown)}: {mount.why_unknown}"))
    return problems


def _mount_table(sections: Sections) -> tuple[Mount, ...]:
    source = sections.facts.get("mounts-from", "findmnt")
    tool = "findmnt" if source == "findmnt" else "/proc/self/mountinfo"
    section = sections.require("mounts", tool)
    if section.rc is None:
        raise ParseError(tool, "output cut off", section.text)
    if section.rc != 0:
        first = next((ln for ln in section.text.splitlines() if ln.strip()), "no output")
        raise ParseError(tool, f"exited {section.rc}: {first}", section.text)
    if "mounts-truncated" in sections.facts:
        raise ParseError(tool, f"mount table longer than {sections.facts['mounts-truncated']} bytes", "")
    return parse_findmnt(section.text) if source == "findmnt" else parse_mountinfo(section.text)


@check("fs.mounts", probes=mounts_probes, params=FsMounts)
def mounts(out: Captures, want: FsMounts) -> Iterator[Verdict]:
    """Expected mounts (listed, or every /etc/fstab entry mounted at boot) are there with the expected
    type, options (rw) and source, and answer a statfs within a short bound: a hung Lustre/NFS/FUSE
    mount FAILs naming it (each statfs is its own killable process; one stuck in the kernel is
    named with its PID, never waited on), so the gate drains the node."""
    probe = mounts_probes(want)[0]
    sections = split_sections(out[probe.name].stdout, "fs.mounts probe")
    if error := sections.facts.get("error"):
        yield Verdict(Status.ERROR, f"fs.mounts probe: {error}")
        return
    table = _mount_table(sections)
    results = read_statfs_results(sections)
    expected: dict[str, Expected] = {}
    if want.from_fstab:
        if "fstab-missing" in sections.facts:
            yield Verdict(
                Status.WARN,
                "no /etc/fstab on the node: only the listed mounts are checked",
                "/etc/fstab",
                {"fstab": "missing"},
            )
        else:
            section = sections.require("fstab", "/etc/fstab")
            for entry in parse_fstab(section.text):
                if entry.auto_mounted and entry.target not in want.exclude:
                    expected[entry.target] = _from_fstab(entry)
    for spec in want.mounts:
        expected[spec.path] = _from_spec(spec)
    if not expected:  # nothing judged is not a pass: a node whose fstab is empty is itself odd
        yield Verdict(
            Status.WARN,
            "no mounts judged: /etc/fstab mounts nothing at boot and the playbook lists none "
            "(list the mounts jobs need under mounts:)",
            observed={"expected_mounts": 0},
        )
        return
    for path, exp in expected.items():
        yield judge_mount(exp, last_mount(table, path), results.get(path), want.stat_timeout_s)


def _no_answer(path: str, hung: Hung, bound_s: float) -> str:
    if hung.earlier:
        return (
            f"a stat of {path} from an earlier run is still stuck in the kernel (D state), pid {hung.pid}: "
            "not stat'ed again; it cannot be killed until the server answers"
        )
    text = f"statfs did not answer within {bound_s:g} s"
    if hung.state == "D":
        return (
            f"{text}; stat of {path} stuck in the kernel (D state), pid {hung.pid} left behind: "
            "it cannot be killed until the server answers"
        )
    if hung.left_behind:
        return f"{text}; stat of {path} still there after SIGKILL (state {hung.state}), pid {hung.pid} left behind"
    return f"{text} (the stat was killed)"


# statfs errors that mean the mount itself is broken (a dead FUSE daemon, a server that lost the
# export), not that nodecheck could not look
_BROKEN = (
    "Transport endpoint is not connected",
    "Stale file handle",
    "Input/output error",
    "Host is down",
    "No such device",
    "Communication error on send",
    "No route to host",
    "Connection timed out",
)


def _statfs_problem(path: str, result: StatfsResult | None, bound_s: float) -> tuple[Status, str] | None:
    """What is wrong with a path's statfs, or None when it answered."""
    if result is None:
        return Status.ERROR, "no statfs result from the probe"
    if isinstance(result, Hung):  # judged: the bound is the check's own, the mount did not answer it
        return Status.FAIL, _no_answer(path, result, bound_s)
    if result.rc == 0:
        return None
    if result.missing:
        return Status.FAIL, "does not exist (No such file or directory)"
    broken = any(b in result.text for b in _BROKEN)
    return (Status.FAIL if broken else Status.ERROR), f"statfs failed: {result.error}"


def _statfs_observed(result: StatfsResult | None) -> dict[str, object]:
    if isinstance(result, Hung):
        return {"statfs": "no answer", "waited_s": result.waited_s, "stat_pid": result.pid, "stat_state": result.state}
    if isinstance(result, Answered):
        return {"statfs": "answered" if result.rc == 0 else result.error, "statfs_s": result.took_s}
    return {"statfs": "not run"}


def _described(exp: Expected) -> str:
    what = " or ".join(exp.fstypes) if exp.fstypes else "a filesystem"
    return what + (f" from {exp.source}" if exp.source else "")


def _seen(mount: Mount) -> str:
    """The mount as the table shows it: "lustre rw from 10.0.0.1@o2ib:/lfs01"."""
    if mount.read_only is None:
        return f"{mount.fstype or '?'}, options unknown, from {mount.source or '?'}"
    return f"{mount.fstype or '?'} {'ro' if mount.read_only else 'rw'} from {mount.source or '?'}"


def judge_mount(exp: Expected, mount: Mount | None, result: StatfsResult | None, bound_s: float) -> Verdict:
    """One expected mount: present as expected, and answering."""
    path = exp.path
    expected: dict[str, object] = {
        "fstype": list(exp.fstypes),
        "options": list(exp.options),
        "forbidden_options": list(exp.forbidden),
        "source": exp.source,
        "from": exp.origin,
    }
    observed = _statfs_observed(result)
    if mount is None:
        problem = f"{path} not mounted, expected {_described(exp)} ({exp.origin})"
        if isinstance(result, Hung):  # the directory underneath does not answer either
            problem += f"; {_no_answer(path, result, bound_s)}"
        return Verdict(Status.FAIL, problem, path, {"mounted": False, **observed}, expected)
    problems: list[tuple[Status, str]] = []
    if exp.fstypes and not any(fnmatch.fnmatchcase(mount.fstype, t) for t in exp.fstypes):
        wanted = " or ".join(exp.fstypes)
        # a type or source the table does not show is not evidence of a wrong one
        problems.append(
            (Status.FAIL, f"type {mount.fstype}, expected {wanted}")
            if mount.fstype
            else (Status.ERROR, f"no type in the mount table, expected {wanted}")
        )
    problems += _option_problems(exp, mount)
    if exp.source and not source_matches(exp.source, mount.source):
        problems.append(
            (Status.FAIL, f"source {mount.source}, expected {exp.source}")
            if mount.source
            else (Status.ERROR, f"no source in the mount table, expected {exp.source}")
        )
    if (answer := _statfs_problem(path, result, bound_s)) is not None:
        problems.append(answer)
    observed = {
        "mounted": True,
        "fstype": mount.fstype,
        "source": mount.source,
        "options": ",".join(mount.options),
        **observed,
    }
    if problems:
        return Verdict(
            worst(s for s, _ in problems),
            f"{path} ({_seen(mount)}): " + "; ".join(p for _, p in problems),
            path,
            observed,
            expected,
        )
    took = result.took_s if isinstance(result, Answered) else 0.0
    return Verdict(
        Status.PASS,
        f"{path}: {_seen(mount)}, statfs answered in {took:.2f} s",
        path,
        observed,
        expected,
    )


# --- fs.free ------------------------------------------------------------------------------------


class PathFloors(BaseModel):
    """The floors for one path; a bare number is {fail_below: N}."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    free_gib: FloorArg | None = Field(None, description="free space a job can use (df's Avail), GiB")
    free_pct: FloorArg | None = Field(None, description="free space in % (df's 100 - Use%)")
    inodes_free_pct: FloorArg | None = Field(
        None, description="free inodes in % (not judged where the fs has no count)"
    )
    size_gib: FloorArg | None = Field(None, description="the filesystem's size, GiB (/dev/shm's tmpfs size=)")

    @model_validator(mode="after")
    def _some(self) -> PathFloors:
        if all(v is None for v in (self.free_gib, self.free_pct, self.inodes_free_pct, self.size_gib)):
            raise ValueError("set at least one of free_gib, free_pct, inodes_free_pct, size_gib")
        return self


# /dev/shm: NCCL's SHM transport and PyTorch's DataLoader workers put their buffers there. Docker's
# default of 64 MiB breaks both: NCCL's troubleshooting guide ("Docker": run with --shm-size=1g
# --ulimit memlock=-1) and PyTorch's README (DataLoader "the default shared memory segment size that
# container runs with is not enough", use --ipc=host or --shm-size). A bare-metal node's tmpfs is
# half the RAM, so 1 GiB is a floor no healthy node misses; less free means a leftover of a past job.
DEFAULT_SHM = PathFloors(size_gib=Floor(fail_below=1), free_gib=Floor(fail_below=1))
# /tmp: a full /tmp fails compilers (Triton, torch.compile caches), NCCL's and Slurm's temp files.
# 1% free fails, as a site's published nhc.conf has it (`check_fs_free /tmp 1%`); under 5% warns;
# at least 1 GiB; inodes as space.
DEFAULT_TMP = PathFloors(
    free_gib=Floor(fail_below=1), free_pct=Floor(fail_below=1, warn_below=5), inodes_free_pct=Floor(fail_below=1)
)


class FsFree(BaseModel):
    """Floors per path."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    shm: PathFloors | None = Field(
        DEFAULT_SHM, description="floors for /dev/shm (NCCL SHM transport, DataLoader); null: not checked"
    )
    tmp: PathFloors | None = Field(DEFAULT_TMP, description="floors for /tmp; null: not checked")
    paths: dict[AbsPath, PathFloors] = Field(
        {}, description="more paths and their floors (/, /var, /local/scratch); over shm/tmp for the same path"
    )
    stat_timeout_s: float = Field(2.0, gt=0, le=60, description="how long a statfs of one path may take")

    @model_validator(mode="after")
    def _some(self) -> FsFree:
        if not self.floors:
            raise ValueError("no path to check: set shm, tmp or paths")
        if len(self.floors) > MAX_PATHS:
            raise ValueError(f"at most {MAX_PATHS} paths")
        return self

    @property
    def floors(self) -> dict[str, PathFloors]:
        found = {p: f for p, f in (("/dev/shm", self.shm), ("/tmp", self.tmp)) if f is not None}
        found.update(self.paths)
        return found


def free_probes(want: FsFree) -> list[Probe]:
    return [free_probe(list(want.floors), want.stat_timeout_s)]


def _down(value: float, places: int) -> float:
    """Rounded toward the floor: a value shown as meeting a floor does meet it."""
    scale = 10**places
    return math.floor(value * scale) / scale


@check("fs.free", probes=free_probes, params=FsFree)
def free(out: Captures, want: FsFree) -> Iterator[Verdict]:
    """Free space and free inodes per path (GiB and % floors) and the filesystem's size: /dev/shm
    (NCCL's shared-memory transport and DataLoader workers need it; Docker's 64 MiB default breaks
    both) and /tmp by default; a path that does not answer a statfs FAILs naming it (a hung mount).
    The filesystem is named as the mount table names it (ext4), not by statfs's magic number."""
    probe = free_probes(want)[0]
    sections = split_sections(out[probe.name].stdout, "fs.free probe")
    if error := sections.facts.get("error"):
        yield Verdict(Status.ERROR, f"fs.free probe: {error}")
        return
    results = read_statfs_results(sections)
    table = _free_mount_table(sections)
    for path, floors in want.floors.items():
        yield from judge_free(path, floors, results.get(path), want.stat_timeout_s, table)


def _free_mount_table(sections: Sections) -> tuple[Mount, ...] | None:
    """fs.free's mount table, only to name each path's filesystem: without it (an older probe, a cut
    table) statfs's own name stands; nothing is judged on it."""
    if "mounts" not in sections.sections:
        return None
    try:
        return _mount_table(sections)
    except ParseError:
        return None


def judge_free(
    path: str,
    floors: PathFloors,
    result: StatfsResult | None,
    bound_s: float,
    table: tuple[Mount, ...] | None = None,
) -> Iterator[Verdict]:
    """One path's verdicts: one per floor set, or one saying why it could not be measured."""
    if (problem := _statfs_problem(path, result, bound_s)) is not None:
        status, text = problem
        yield Verdict(status, f"{path}: {text}", path, _statfs_observed(result))
        return
    assert isinstance(result, Answered)
    try:
        fs = parse_statfs_line(result.text)
    except ParseError as e:
        yield Verdict(Status.ERROR, f"{path}: cannot read stat -f output: {e.reason}", path, excerpt=excerpt(e.excerpt))
        return
    if table is not None and (mount := mount_of(table, path)) is not None:
        fs = dataclasses.replace(fs, fstype=mount.fstype)
    size, free_gib, pct = _down(fs.size_gib, 2), _down(fs.free_gib, 2), fs.free_pct
    where = f"{_num(size)} GiB {fs.fstype}"
    if floors.size_gib is not None:
        yield _floor(floors.size_gib, size, path, "size", "GiB", f"; {fs.fstype}", {"size_gib": size})
    if floors.free_gib is not None:
        share = f"{_down(pct, 1):g}% free, " if pct is not None else ""
        yield _floor(floors.free_gib, free_gib, path, "free", "GiB", f"; {share}{where}", {"free_gib": free_gib})
    if floors.free_pct is not None:
        if pct is None:
            yield Verdict(Status.ERROR, f"{path}: size 0 ({fs.fstype}): no free % to judge", path, {"size_gib": 0})
        else:
            value = _down(pct, 1)
            yield _floor(
                floors.free_pct,
                value,
                path,
                "free",
                "%",
                f"; {_num(free_gib)} GiB available, {where}",
                {"free_pct": value},
            )
    if floors.inodes_free_pct is not None:
        ipct = fs.inodes_free_pct
        if ipct is None:
            yield Verdict(
                Status.PASS,
                f"{path}: {fs.fstype} has no fixed inode count (0 reported): no inode limit to run out of",
                path,
                {"inodes_total": 0},
            )
        else:
            value = _down(ipct, 1)
            context = f"; {fs.ffree} of {fs.files} inodes free, {fs.fstype}"
            yield _floor(floors.inodes_free_pct, value, path, "inodes free", "%", context, {"inodes_free_pct": value})


def _num(value: float) -> str:
    """A measured amount for a message: at most 2 decimals, never an exponent (a Lustre's PiB in GiB)."""
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _floor(
    band: Floor, value: float, path: str, what: str, unit: str, context: str, observed: dict[str, object]
) -> Verdict:
    """The band's verdict on `value`, worded with the path, plain numbers and what else was measured."""
    verdict = band.judge(value, what=what, unit=unit, subject=path)
    seen = f"{path} {what} {_num(value)} {unit}"
    if verdict.status in (Status.FAIL, Status.WARN):
        limit = band.fail_below if verdict.status == Status.FAIL else band.warn_below
        message = f"{seen}, expected >= {fmt(limit)} {unit}"
    elif verdict.status == Status.PASS:
        message = f"{seen} (>= {fmt(band.warn_below or band.fail_below)} {unit})"
    else:  # not a finite number: the band says so
        message = f"{path} {verdict.message}"
    return dataclasses.replace(verdict, message=message + context, observed=observed)
