"""/etc/fstab (fstab(5)): which filesystems the node mounts at boot, as fs.mounts' `from_fstab` reads
them. The probe's shell picks the same entries to statfs (probes/fs.py: FSTAB_AWK): keep them in step."""

from __future__ import annotations

from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.parsers.findmnt import unoctal
from nodecheck.parsers.lines import split_lines

# fstab types that are not a mounted filesystem to expect in the mount table
NOT_MOUNTED_TYPES = frozenset({"swap", "ignore"})


@dataclass(frozen=True)
class FstabEntry:
    source: str  # "UUID=...", "/dev/sda1", "server:/export", "10.0.0.1@o2ib:/scratch", "tmpfs"
    target: str  # the mount point, unescaped ("\\040" is a space)
    fstype: str  # "xfs", "nfs", "lustre", "auto", "none" (a bind mount)
    options: tuple[str, ...]  # ("defaults",) when the field is missing
    line: int  # 1-based line number in the file

    @property
    def auto_mounted(self) -> bool:
        """Mounted at boot (and by `mount -a`): not noauto, not swap, a real mount point. What
        `from_fstab: true` expects in the mount table."""
        return (
            "noauto" not in self.options
            and self.fstype not in NOT_MOUNTED_TYPES
            and self.target.startswith("/")
            and "\n" not in self.target
        )

    @property
    def read_only(self) -> bool:
        return "ro" in self.options

    @property
    def bind(self) -> bool:
        """A bind mount: the mount table shows the type of the filesystem bound, not fstab's."""
        return "bind" in self.options or "rbind" in self.options


def parse_fstab(text: str) -> tuple[FstabEntry, ...]:
    """Every entry of an fstab; comments (a first non-blank "#") and blank lines skipped, a field
    starting with "#" later on a line starts a comment too (as in recorded files). An empty or all-comment file is
    an empty tuple. A line with fewer than 3 fields is not an entry mount(8) could use: ParseError."""
    found: list[FstabEntry] = []
    for number, line in enumerate(split_lines(text), 1):
        fields = line.split()
        # a field that starts with "#" starts a comment ("0 0  # note"); a "#" inside a field is
        # data (the old FUSE form "sshfs#user@host:/dir")
        fields = fields[: next((i for i, f in enumerate(fields) if f.startswith("#")), len(fields))]
        if not fields:
            continue
        if len(fields) < 3:
            raise ParseError("/etc/fstab", f"line {number}: {len(fields)} field(s), expected 4 to 6", line)
        options = tuple(o for o in (fields[3] if len(fields) > 3 else "defaults").split(",") if o)
        found.append(FstabEntry(unoctal(fields[0]), unoctal(fields[1]), fields[2], options, number))
    return tuple(found)
