"""Split tool output into lines the way the tool wrote them: at "\\n" only."""

from __future__ import annotations


def split_lines(text: str) -> list[str]:
    """The lines of `text`, split at "\\n" (a "\\r\\n" pair counts as one break); no final empty line.

    Not str.splitlines: that also splits at \\v \\f \\x1c-\\x1e \\x85 U+2028 U+2029, which a tool
    (or a value it echoes: a GPU name, a process name, a log message) may print inside a line, so
    one "Key : value" line would become two, the second starting with ":"."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the last line opens no new one
    return [line[:-1] if line.endswith("\r") else line for line in lines]
