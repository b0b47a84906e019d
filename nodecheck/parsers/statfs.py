"""Filesystem statistics (statfs(2)) as `stat -f` prints them: the one-line `-c` format the fs probes
ask for (STATFS_FORMAT), `stat -f`'s default text (GNU coreutils, busybox, old coreutils), and the
fs probes' per-path results (answered, or hung and killed)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.parsers.escapes import unescape
from nodecheck.parsers.sections import Sections

# What the probes ask `stat -f -c` for: total blocks, free blocks, blocks available to non-root,
# the block size the counts are in (%S, f_frsize), total inodes, free inodes, the type's magic in
# hex, then the type's name last (GNU prints "UNKNOWN (0x...)" with a space for one it does not know).
STATFS_FORMAT = "%b %f %a %S %c %d %t %T"
_LINE = re.compile(r"^(\d+) (\d+) (\d+) (\d+) (\d+) (\d+) ([0-9a-fA-F]+) (.+)$")
GIB = 1024**3


@dataclass(frozen=True)
class Statfs:
    fstype: str  # "ext2/ext3" (stat's name for the ext magic), "xfs", "nfs", "lustre", "tmpfs"
    block_size: int  # bytes per block of the counts below (f_frsize)
    blocks: int
    bfree: int  # free blocks, including those reserved for root
    bavail: int  # free blocks a non-root job can use
    files: int  # total inodes; 0 where the filesystem has no fixed count (btrfs, many FUSE)
    ffree: int

    @property
    def size_gib(self) -> float:
        return self.blocks * self.block_size / GIB

    @property
    def free_gib(self) -> float:
        """What a job can still write (bavail, as df's Avail): root's reserve does not count."""
        return self.bavail * self.block_size / GIB

    @property
    def free_pct(self) -> float | None:
        """Free space as df computes it: avail / (used + avail), so root's reserve is neither free
        nor counted in the total (df's Use% is 100 minus this, rounded up). None for a size 0."""
        used = self.blocks - self.bfree
        return None if used + self.bavail <= 0 else 100.0 * self.bavail / (used + self.bavail)

    @property
    def inodes_free_pct(self) -> float | None:
        return None if self.files <= 0 else 100.0 * self.ffree / self.files


def parse_statfs_line(text: str) -> Statfs:
    """One line of `stat -f -c STATFS_FORMAT PATH`."""
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    m = _LINE.match(lines[0].strip()) if len(lines) == 1 else None
    if not m:
        raise ParseError("stat -f", "not the line the probe asked stat -f -c for", text)
    blocks, bfree, bavail, bsize, files, ffree = (int(m[i]) for i in range(1, 7))
    if bsize <= 0:
        raise ParseError("stat -f", f"block size {bsize}", text)
    return Statfs(m[8].strip(), bsize, blocks, bfree, bavail, files, ffree)


_FILE = re.compile(r'^\s*File: ["\'`](.*)["\']\s*$', re.MULTILINE)
_TYPE = re.compile(r"Type:\s*(\S.*?)\s*$", re.MULTILINE)
_FUNDAMENTAL = re.compile(r"Fundamental block size:\s*(\d+)")
_BLOCK_SIZE = re.compile(r"(?:^|\n)\s*Block size:\s*(\d+)")
_OLD_SIZE = re.compile(r"\bSize:\s*(\d+)")  # coreutils before 5.3 printed "Size:" after the counts
_BLOCKS = re.compile(r"Blocks:\s*Total:\s*(\d+)\s+Free:\s*(\d+)\s+Available:\s*(\d+)")
_INODES = re.compile(r"Inodes:\s*Total:\s*(\d+)\s+Free:\s*(\d+)")


def parse_stat_f(text: str) -> list[tuple[str, Statfs]]:
    """`stat -f PATH...` in its default form: (the file as printed, its filesystem's statistics)
    per file. Old coreutils may wrap a line ("Available:\\n1876998"); busybox has no
    "Fundamental block size" (its "Block size" is then the one the counts are in)."""
    starts = list(_FILE.finditer(text))
    if not starts:
        raise ParseError("stat -f", 'no "File:" line', text)
    found: list[tuple[str, Statfs]] = []
    for i, start in enumerate(starts):
        part = text[start.end() : starts[i + 1].start() if i + 1 < len(starts) else len(text)]
        kind, blocks, inodes = _TYPE.search(part), _BLOCKS.search(part), _INODES.search(part)
        size = _FUNDAMENTAL.search(part) or _BLOCK_SIZE.search(part) or _OLD_SIZE.search(part)
        if not (kind and blocks and inodes and size):
            raise ParseError("stat -f", f"{start[1]}: Type, block size, Blocks or Inodes missing", part)
        found.append(
            (
                start[1],
                Statfs(
                    kind[1],
                    int(size[1]),
                    int(blocks[1]),
                    int(blocks[2]),
                    int(blocks[3]),
                    int(inodes[1]),
                    int(inodes[2]),
                ),
            )
        )
    return found


# --- the fs probes' per-path results (probes/fs.py: STATFS_FUNCTION) ------------------------------


@dataclass(frozen=True)
class Answered:
    """stat -f ran to the end within the bound."""

    path: str
    rc: int
    text: str  # its output (stdout and stderr)
    took_s: float

    @property
    def error(self) -> str:
        """Why it failed ("No such file or directory"), or "" when it exited 0."""
        if self.rc == 0:
            return ""
        first = next((ln.strip() for ln in self.text.splitlines() if ln.strip()), f"exit {self.rc}")
        return first.rsplit(": ", 1)[-1] if ": " in first else first

    @property
    def missing(self) -> bool:
        return self.rc != 0 and "No such file or directory" in self.text


@dataclass(frozen=True)
class Hung:
    """stat -f did not answer within the bound; it was sent SIGKILL and never waited on."""

    path: str
    pid: int
    state: str  # after the kill: "gone" (it died), "D" (uninterruptible: still there), another letter
    waited_s: float
    earlier: bool = False  # a stat an earlier run left stuck on this path: no new one was started

    @property
    def left_behind(self) -> bool:
        return self.state not in ("gone", "Z", "X")


StatfsResult = Answered | Hung


def read_statfs_results(sections: Sections, tool: str = "stat -f") -> dict[str, StatfsResult]:
    """Every path's result, by path, from the probe's `path.N`, `took.N`/`statfs.N` or `hung.N` lines."""
    results: dict[str, StatfsResult] = {}
    for key, value in sections.facts.items():
        if not key.startswith("path."):
            continue
        index = key[len("path.") :]
        try:
            path = unescape(value)
        except ValueError as e:
            raise ParseError(tool, f"path {index}: {e}", value) from None
        if (hung := sections.facts.get(f"hung.{index}")) is not None:
            parts = hung.split()
            if (
                len(parts) not in (3, 4)
                or not parts[0].isdigit()
                or not parts[2].isdigit()
                or parts[3:] not in ([], ["earlier"])
            ):
                raise ParseError(tool, f"hung.{index}: {hung!r}", hung)
            results[path] = Hung(path, int(parts[0]), parts[1], int(parts[2]) / 100, len(parts) == 4)
            continue
        section = sections.get(f"statfs.{index}")
        took = sections.facts.get(f"took.{index}", "")
        if section is None or section.rc is None or not took.isdigit():
            raise ParseError(tool, f"{path}: no complete result", sections.preamble)
        results[path] = Answered(path, section.rc, section.text, int(took) / 100)
    return results
