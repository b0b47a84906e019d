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
from nodecheck.parsers import jsonsafe
from nodecheck.parsers.jsonsafe import JsonRefused
from nodecheck.parsers.lines import split_lines


@dataclass(frozen=True)
class Mount:
    target: str  # the mount point, unescaped: "/mnt/my dir"
    source: str  # "/dev/sda1", "10.0.0.1@o2ib:/scratch", "server:/export", "tmpfs"; "" not shown
    fstype: str  # "ext4", "nfs4", "lustre", "fuse.sshfs"; "" not shown
    options: tuple[str, ...]  # VFS and superblock options together, in order: ("rw", "relatime", ...)
    # why the options are not all there ("" when nothing says so): a line that lost them must not read
    # as rw (issue 32, 3.1)
    lost: str = ""

    @property
    def options_known(self) -> bool:
        """The options are all there: nothing was lost, and rw or ro is among them (the kernel always
        says one; a list with neither is a cut one)."""
        return not self.lost and ("rw" in self.options or "ro" in self.options)

    @property
    def why_unknown(self) -> str:
        return self.lost or "neither rw nor ro among its options"

    @property
    def read_only(self) -> bool | None:
        """Mounted read-only: "ro" among the mount's or the superblock's options (either makes it so);
        None when the options are not known in full (never read as rw)."""
        if "ro" in self.options:
            return True
        return False if self.options_known else None


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
# one KEY="value" pair, read at a given position (match, never findall: a findall retries the key
# pattern from every letter of a long uppercase run, quadratic in the line: 53 s at 80 KB)
_KEY = re.compile(r'([A-Z][A-Z0-9_:%.-]*)="')
_VALUE = re.compile(r'((?:[^"\\]|\\.)*)"')
_GAP = re.compile(r"[ \t]+")
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
    options = fields.get("OPTIONS")
    return Mount(
        _unhex(target),
        _unhex(fields.get("SOURCE", "")),
        _unhex(fields.get("FSTYPE", "")),
        tuple(o for o in (options or "").split(",") if o),
        "" if options is not None else "findmnt printed no OPTIONS for it",
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
    if _KEY.match(lines[0].lstrip()):
        return tuple(_parse_pairs(ln) for ln in lines)
    return _parse_table(lines, text)


def _parse_pairs(line: str) -> Mount:
    """One line of `findmnt -P`: KEY="value" pairs separated by blanks, nothing else (each character
    is read once: linear in the line)."""
    fields: dict[str, str] = {}
    at = len(line) - len(line.lstrip())
    while at < len(line):
        key = _KEY.match(line, at)
        value = _VALUE.match(line, key.end()) if key else None
        if key is None or value is None:
            raise ParseError("findmnt -P", f'not a KEY="value" pair at column {at + 1}', line[:300])
        if key[1] in fields:
            raise ParseError("findmnt -P", f"{key[1]} twice in one line", line[:300])
        fields[key[1]] = value[1]
        gap = _GAP.match(line, value.end())
        if gap is None and value.end() < len(line):
            raise ParseError("findmnt -P", f"no blank after {key[1]}'s value", line[:300])
        at = gap.end() if gap else value.end()
    if "TARGET" not in fields:
        raise ParseError("findmnt -P", "a line without TARGET", line[:300])
    return _mount(fields, line[:300])


_COLUMN_KEYS = {c.lower() for c in _COLUMNS}


def _parse_json(body: str) -> tuple[Mount, ...]:
    try:
        data = _json(body)
    except (json.JSONDecodeError, JsonRefused):
        # util-linux before 2.28 printed a comma after the last child ("},\n ]"): drop it and retry
        try:
            data = _json(re.sub(r",(\s*[\]}])", r"\1", body))
        except (json.JSONDecodeError, JsonRefused) as e:
            raise ParseError("findmnt -J", f"not JSON: {e}", body) from None
    if not isinstance(data, dict) or not isinstance(data.get("filesystems"), list):
        raise ParseError("findmnt -J", "no 'filesystems' list", body)
    found: list[Mount] = []
    # depth first, in order, without recursion: the nesting is the input's, not bounded by us
    todo: list[object] = list(reversed(data["filesystems"]))
    while todo:
        item = todo.pop()
        if not isinstance(item, dict):
            raise ParseError("findmnt -J", "a filesystem that is not an object", body)
        fields = _json_fields(item, body)
        found.append(_mount(fields, json.dumps(fields)[:300]))
        children = item.get("children", [])
        if not isinstance(children, list):
            raise ParseError("findmnt -J", "'children' is not a list", body)
        todo.extend(reversed(children))
    return tuple(found)


def _json(body: str) -> object:
    """JSON with bounded numbers; nesting past the interpreter's limit is refused, not raised."""
    try:
        return jsonsafe.loads(body, finite_numbers=False)
    except RecursionError:
        raise JsonRefused("nested too deep") from None


def _json_fields(item: dict, body: str) -> dict[str, str]:
    """The columns this parser reads, each a string (or null: not shown)."""
    fields: dict[str, str] = {}
    for key, value in item.items():
        if not isinstance(key, str) or key not in _COLUMN_KEYS or value is None:
            continue
        if not isinstance(value, str):
            raise ParseError("findmnt -J", f"{key} is {jsonsafe.kind_of(value)}, not a string", body)
        fields[key.upper()] = value
    return fields


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
    options = above.options or tuple(o for o in values.get("OPTIONS", "").split(",") if o)
    return Mount(
        above.target,
        above.source or _unhex(values.get("SOURCE", "")),
        above.fstype or _unhex(values.get("FSTYPE", "")),
        options,
        "" if "OPTIONS" in values else above.lost,
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


def _mountinfo_lost(mount_options: list[str], sb_options: list[str]) -> str:
    """Why a mountinfo line's rw/ro is unknown, or "": the kernel starts both option lists with rw or
    ro, and a superblock remounted ro (ext4's errors=remount-ro) shows only in SUPER-OPTIONS (the
    mount's own options still say rw)."""
    if not sb_options:
        return "its mountinfo line has no superblock options (a superblock remounted ro would not show)"
    for what, options in (("mount", mount_options), ("superblock", sb_options)):
        if "rw" not in options and "ro" not in options:
            return f"neither rw nor ro among its {what} options"
    return ""


def parse_mountinfo(text: str) -> tuple[Mount, ...]:
    """/proc/self/mountinfo (proc(5)): ID PARENT MAJ:MIN ROOT MOUNT-POINT MOUNT-OPTIONS [OPTIONAL...]
    - FSTYPE SOURCE SUPER-OPTIONS. The options are the mount's and then the superblock's."""
    found: list[Mount] = []
    for line in split_lines(text):
        if not line.strip():
            continue
        left, sep, right = line.partition(" - ")
        # the fields after " - " are split at single spaces: an empty SOURCE (a mount of "") keeps its
        # place, so the superblock's options are never read from the wrong field
        head, tail = left.split(), right.split(" ")
        if not sep or len(head) < 6 or not tail[0] or not head[0].isdigit() or any(tail[3:]):
            raise ParseError("/proc/self/mountinfo", f"not a mountinfo line: {line[:80]!r}", text)
        fstype, source = tail[0], tail[1] if len(tail) > 1 else ""
        # the superblock's options may be missing from a line cut short (or an empty field)
        mount_options, sb_options = head[5].split(","), tail[2].split(",") if len(tail) > 2 and tail[2] else []
        unique = tuple(dict.fromkeys(o for o in mount_options + sb_options if o))  # "rw" is in both lists
        lost = _mountinfo_lost(mount_options, sb_options)
        found.append(Mount(unoctal(head[4]), unoctal(source), fstype, unique, lost))
    if not found:
        raise ParseError("/proc/self/mountinfo", "no mounts", text)
    return tuple(found)
