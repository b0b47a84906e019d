"""What a "which tools are here" step prints: one `@@nodecheck have TOOL PATH` or `@@nodecheck
missing TOOL` line per tool (nccl.allreduce_multi's nccl_tools probe). Pure."""

from __future__ import annotations

from nodecheck.parsers.lines import split_lines

MARK = "@@nodecheck missing "
# a "missing" line cut before its name still says a tool is missing: never read as none missing
UNNAMED = "a tool (its name cut off)"


def missing_tools(stdout: str) -> list[str]:
    """The tools the step did not find, in the order it listed them."""
    found = []
    for line in split_lines(stdout):
        if line.startswith(MARK):
            words = line[len(MARK) :].split()
            found.append(words[0] if words else UNNAMED)
    return found
