"""The mount table: `findmnt` output (the -P pairs the fs.mounts probe asks for, and the -J, -l, -r
and default tree forms people record) and /proc/self/mountinfo, the fallback where findmnt is absent.

Reading the table never touches the mounts themselves: findmnt (libmount) and mountinfo are the
kernel's list, so a dead NFS server cannot hang this part; only a statfs of the mount point can.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.parsers.lines import split_lines


@dataclass(frozen=True)
class Mount:
    target: str  # the mount point, unescaped: "/mnt/my dir"
    source: str  # "/dev/sda1", "10.0.0.1@o2ib:/scratch", "server:/export", "tmpfs"
    fstype: str  # "ext4", "nfs4", "lustre", "fuse.sshfs"
    options: tuple[str, ...]  # VFS and superblock options together, in order: ("rw", "relatime", ...)

    @property
    def read_only(self) -> bool:
        """Mounted read-only: "ro" among the mount's or the superblock's options (either makes it so)."""
        return "ro" in self.options


def last_mount(mounts: tuple[Mount, ...], target: str) -> Mount | None:
    """The mount a path sees: the last one on that target (a later mount over the same point hides
    the earlier ones: an automount's autofs entry, then the real filesystem on top)."""
    found = None
    for m in mounts:
        if m.target == target:
            found = m
    return found


def mount_of(mounts: tuple[Mount, ...], path: str) -> Mount | None:
    """The mount a path lies on: the last mount on the longest target that is the path or one of its
    parent directories (/tmp on a root filesystem that has no mount of its own: the root's). By
    the path's text, as the probe stat'ed it (a symlink on the way is not resolved)."""
    best: Mount | None = None
    for m in mounts:
        target = m.target.rstrip("/") or "/"
        inside = path == target or target == "/" or path.startswith(target + "/")
        if inside and (best is None or len(target) >= len(best.target.rstrip("/") or "/")):
            best = m
    return best


# --- findmnt ------------------------------------------------------------------------------------

# findmnt hex-escapes unsafe characters (-P, -r, and non-raw output alike): "\x20" for a space
_HEX = re.compile(r"\\x([0-9a-fA-F]{2})")
_PAIR = re.compile(r'([A-Z][A-Z0-9_:%.-]*)="((?:[^"\\]|\\.)*)"')
# the tree's drawing: "├─", "└─", "│ " and with -a "|-", "`-", "| "
_TREE = re.compile(r"^[\s│├└─|`-]*")
_COLUMNS = ("TARGET", "SOURCE", "FSTYPE", "OPTIONS")


def _unhex(text: str) -> str:
    raw = _HEX.sub(lambda m: chr(int(m[1], 16)), text)
    try:
        return raw.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return raw


def _mount(fields: dict[str, str], raw: str) -> Mount:
    target = fields.get("TARGET", "")
    if not target.startswith("/"):
        raise ParseError("findmnt", f"not a mount point: {target[:80]!r}", raw)
    options = fields.get("OPTIONS", "")
    return Mount(
        _unhex(target),
        _unhex(fields.get("SOURCE", "")),
        _unhex(fields.get("FSTYPE", "")),
        tuple(o for o in options.split(",") if o),
    )


def parse_findmnt(text: str) -> tuple[Mount, ...]:
    """findmnt's output in any of its forms: JSON (-J), pairs (-P), a table with a header (the
    default tree, -l, -a), raw (-r, with or without its header). A table needs the TARGET column;
    SOURCE, FSTYPE and OPTIONS are read where present."""
    body = text.strip()
    if not body:
        raise ParseError("findmnt", "no output", text)
    if body.startswith("{"):
        return _parse_json(body)
    lines = [ln for ln in split_lines(text) if ln.strip()]
    if _PAIR.match(lines[0].strip()):
        return tuple(_parse_pairs(ln) for ln in lines)
    return _parse_table(lines, text)


def _parse_pairs(line: str) -> Mount:
    fields = dict(_PAIR.findall(line))
    if "TARGET" not in fields:
        raise ParseError("findmnt -P", "a line without TARGET", line)
    return _mount(fields, line)


def _parse_json(body: str) -> tuple[Mount, ...]:
    try:
        data = json.loads(body)
    except json.JSONDecodeError:
        # util-linux before 2.28 printed a comma after the last child ("},\n ]"): drop it and retry
        try:
            data = json.loads(re.sub(r",(\s*[\]}])", r"\1", body))
        except json.JSONDecodeError as e:
            raise ParseError("findmnt -J", f"not JSON: {e}", body) from None
    if not isinstance(data, dict) or not isinstance(data.get("filesystems"), list):
        raise ParseError("findmnt -J", "no 'filesystems' list", body)
    found: list[Mount] = []

    def walk(items: list) -> None:
        for item in items:
            if not isinstance(item, dict):
                raise ParseError("findmnt -J", "a filesystem that is not an object", body)
            fields = {k.upper(): str(v) for k, v in item.items() if k != "children" and v is not None}
            found.append(_mount(fields, json.dumps(item)[:300]))
            children = item.get("children", [])
            if not isinstance(children, list):
                raise ParseError("findmnt -J", "'children' is not a list", body)
            walk(children)

    walk(data["filesystems"])
    return tuple(found)


_TOKEN = re.compile(r"\S+")
_RULE = re.compile(r"[│|]+")  # a tree's vertical rule standing alone between two cells


def _parse_table(lines: list[str], text: str) -> tuple[Mount, ...]:
    header = lines[0].split()
    if "TARGET" in header and all(re.fullmatch(r"[A-Z][A-Z0-9_:%.-]*", h) for h in header):
        columns, rows = header, lines[1:]
        starts = [m.start() for m in _TOKEN.finditer(lines[0])]
    elif _TREE.sub("", lines[0]).startswith("/"):  # raw or list output with --noheadings
        columns, rows, starts = list(_COLUMNS), lines, []
    else:
        raise ParseError("findmnt", "neither findmnt's pairs, JSON nor a table with a TARGET column", text)
    at = columns.index("TARGET")
    # a TARGET cell starts before the next column does; a row with none (a long SOURCE findmnt wrapped,
    # one of several SOURCES) continues the row above
    limit = starts[at + 1] if at + 1 < len(starts) else None
    found: list[Mount] = []
    for line in rows:
        tokens = [m for m in _TOKEN.finditer(line) if not _RULE.fullmatch(m[0])]
        cells = [m[0] for m in tokens]
        if at < len(cells):
            cells[at] = _TREE.sub("", cells[at])
        own = at < len(cells) and cells[at].startswith("/") and (limit is None or tokens[at].start() < limit)
        if not own:
            if not found:
                raise ParseError("findmnt", f"a row without a mount point: {line[:80]!r}", text)
            found[-1] = _continued(found[-1], columns, cells)
            continue
        if len(cells) > len(columns):  # only the last column may hold spaces (none of ours do)
            cells = cells[: len(columns) - 1] + [" ".join(cells[len(columns) - 1 :])]
        fields = dict(zip(columns, cells, strict=False))
        found.append(_mount(fields, line))
    if not found:
        raise ParseError("findmnt", "a header and no mounts", text)
    return tuple(found)


def _continued(above: Mount, columns: list[str], cells: list[str]) -> Mount:
    """A row whose TARGET cell is empty carries the cells the row above could not fit (findmnt
    wraps a long SOURCE when the terminal is narrow; SOURCES lists one device a line): fill the
    columns the row above left empty, in order; a continued column this parser does not read
    (SOURCES) changes nothing."""
    missing = [c for c in ("SOURCE", "FSTYPE", "OPTIONS") if c in columns and not getattr(above, c.lower())]
    values = dict(zip(missing, cells, strict=False))
    return Mount(
        above.target,
        above.source or _unhex(values.get("SOURCE", "")),
        above.fstype or _unhex(values.get("FSTYPE", "")),
        above.options or tuple(o for o in values.get("OPTIONS", "").split(",") if o),
    )


# --- /proc/self/mountinfo -----------------------------------------------------------------------

# mountinfo octal-escapes space, tab, newline and backslash (\040 \011 \012 \134) in paths
_OCTAL = re.compile(r"\\([0-7]{3})")


def unoctal(text: str) -> str:
    """A path as the kernel (mountinfo) and fstab write it: "\\040" is a space."""
    raw = _OCTAL.sub(lambda m: chr(int(m[1], 8)), text)
    try:
        return raw.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return raw


def parse_mountinfo(text: str) -> tuple[Mount, ...]:
    """/proc/self/mountinfo (proc(5)): ID PARENT MAJ:MIN ROOT MOUNT-POINT MOUNT-OPTIONS [OPTIONAL...]
    - FSTYPE SOURCE SUPER-OPTIONS. The options are the mount's and then the superblock's."""
    found: list[Mount] = []
    for line in split_lines(text):
        if not line.strip():
            continue
        left, sep, right = line.partition(" - ")
        head, tail = left.split(), right.split()
        if not sep or len(head) < 6 or not tail or not head[0].isdigit():
            raise ParseError("/proc/self/mountinfo", f"not a mountinfo line: {line[:80]!r}", text)
        # the superblock's options may be missing from a line cut short (or an empty field)
        fstype, source = tail[0], tail[1] if len(tail) > 1 else ""
        options = head[5].split(",") + (tail[2].split(",") if len(tail) > 2 else [])
        unique = tuple(dict.fromkeys(o for o in options if o))  # "rw" is in both lists
        found.append(Mount(unoctal(head[4]), unoctal(source), fstype, unique))
    if not found:
        raise ParseError("/proc/self/mountinfo", "no mounts", text)
    return tuple(found)
