"""Filesystem statistics (statfs(2)) as `stat -f -c STATFS_FORMAT` prints them (the one line the fs
probes ask for: the same in GNU coreutils and busybox), and the fs probes' per-path results
(answered, or hung and killed). stat -f's default, multi-line text is not read: no probe asks for
it (a stat that ignored -c printed it, and that is refused)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.parsers.counts import TOO_BIG, u64
from nodecheck.parsers.escapes import unescape
from nodecheck.parsers.lines import split_lines
from nodecheck.parsers.sections import Sections

# What the probes ask `stat -f -c` for: total blocks, free blocks, blocks available to non-root,
# the block size the counts are in (%S, f_frsize), total inodes, free inodes, the type's magic in
# hex, then the type's name last (GNU prints "UNKNOWN (0x...)" with a space for one it does not know).
STATFS_FORMAT = "%b %f %a %S %c %d %t %T"
_LINE = re.compile(r"(\d+) (\d+) (\d+) (\d+) (\d+) (\d+) ([0-9a-fA-F]+) (.+)", re.ASCII)
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
    lines = [ln.strip() for ln in split_lines(text) if ln.strip()]
    m = _LINE.fullmatch(lines[0]) if len(lines) == 1 else None
    if not m:
        raise ParseError("stat -f", "not the line the probe asked stat -f -c for", text)
    blocks, bfree, bavail, bsize, files, ffree = (_count(m[i], text) for i in range(1, 7))
    if bsize <= 0:
        raise ParseError("stat -f", f"block size {bsize}", text)
    # more free than there is: not a statfs (an unsigned -1 printed as a count, a mangled line)
    _at_most(bfree, blocks, "free", "blocks", text)
    _at_most(bavail, blocks, "available", "blocks", text)
    if files > 0:  # 0: no fixed inode count (btrfs, many FUSE)
        _at_most(ffree, files, "free", "inodes", text)
    return Statfs(m[8].strip(), bsize, blocks, bfree, bavail, files, ffree)


def _at_most(part: int, whole: int, name: str, of: str, text: str) -> None:
    if part > whole:
        raise ParseError("stat -f", f"{part} {name} of {whole} {of}", text)


def _count(digits: str, text: str) -> int:
    value = u64(digits)
    if value is None:
        raise ParseError("stat -f", f"a count of {len(digits)} digits (a statfs count is {TOO_BIG})", text)
    return value


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
            results[path] = _hung(path, hung, f"hung.{index}", tool)
            continue
        section = sections.get(f"statfs.{index}")
        took = u64(sections.facts.get(f"took.{index}", ""))
        if section is None or section.rc is None or took is None:
            raise ParseError(tool, f"{path}: no complete result", sections.preamble)
        results[path] = Answered(path, section.rc, section.text, took / 100)
    return results


def _hung(path: str, fact: str, key: str, tool: str) -> Hung:
    """ "PID STATE WAITED_CS" with " earlier" for a stat an earlier run left (probes/fs.py)."""
    parts = fact.split()
    pid = u64(parts[0]) if parts else None
    waited = u64(parts[2]) if len(parts) > 2 else None
    if len(parts) not in (3, 4) or pid is None or waited is None or parts[3:] not in ([], ["earlier"]):
        raise ParseError(tool, f"{key}: {fact[:200]!r}", fact)
    return Hung(path, pid, parts[1], waited / 100, len(parts) == 4)
