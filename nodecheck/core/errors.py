"""The two kinds of expected failure: bad operator input and tool output a parser cannot read."""

from __future__ import annotations

from nodecheck.core.model import excerpt as bounded


class ConfigError(Exception):
    """Bad input (inventory, playbook, arguments): names the file, the line and the fix. Exit 64."""

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None, hint: str = "") -> None:
        self.file, self.line, self.message, self.hint = file, line, message, hint
        super().__init__(str(self))

    def __str__(self) -> str:
        where = ""
        if self.file:
            where = f"{self.file}:{self.line}: " if self.line else f"{self.file}: "
        tail = f"; hint: {self.hint}" if self.hint else ""
        return f"{where}{self.message}{tail}"


class ParseError(Exception):
    """A tool's output that a parser does not understand; becomes an ERROR result with the excerpt."""

    def __init__(self, tool: str, reason: str, excerpt: str = "") -> None:
        self.tool, self.reason, self.excerpt = tool, reason, bounded(excerpt)
        super().__init__(f"{tool}: {reason}")
