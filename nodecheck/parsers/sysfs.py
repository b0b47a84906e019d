"""Read the sysfs dump nodecheck's probes print: one `PATH<TAB>VALUE` line per file.

Probe scripts walk sysfs in shell (`for f in /sys/class/infiniband/*/ports/*/counters/*`) and
print each file's first line after its path and a tab. A file that exists but cannot be read
prints `PATH<TAB>!<reason>`: the kernel answers EINVAL for an unpopulated GID type and, on older
kernels, `N/A (no PMA)` for a counter it cannot query, and both mean "no value", not zero.
"""

from __future__ import annotations

from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.parsers.lines import split_lines


@dataclass(frozen=True)
class Unreadable:
    reason: str  # what the probe printed after the "!"


def parse_sysfs_dump(text: str, tool: str = "sysfs") -> dict[str, str | Unreadable]:
    """{path: value}. A line without a tab, or a path that is not absolute, is not this format."""
    values: dict[str, str | Unreadable] = {}
    for number, line in enumerate(split_lines(text), 1):  # a value may hold \x1c, U+2028...
        if not line.strip():
            continue
        path, tab, value = line.partition("\t")
        if not tab or not path.startswith("/"):
            raise ParseError(tool, f"line {number} is not 'PATH<TAB>VALUE'", line)
        value = value.rstrip()
        values[path] = Unreadable(value[1:] or "unreadable") if value.startswith("!") else value
    return values


# The shell that prints the format: `sysfs_dump FILE...` in a probe script. `read` is a shell
# builtin, so a GID table of 256 entries costs no fork per file; it takes the first line, and a
# read error (EINVAL for an unpopulated GID type) makes it fail: the file is reported unreadable.
SHELL_FUNCTION = r"""sysfs_dump() {
  for f in "$@"; do
    [ -f "$f" ] || continue
    v=
    if { IFS= read -r v < "$f"; } 2>/dev/null || [ -n "$v" ]; then printf '%s\t%s\n' "$f" "$v"
    else printf '%s\t!unreadable\n' "$f"; fi
  done
}"""
