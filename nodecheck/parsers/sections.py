"""Split a multi-command probe's output into its named sections and their exit codes.

The probe scripts print each command between marker lines:
    @@nodecheck begin <name>
    ...the command's stdout and stderr...
    @@nodecheck end <name> rc=<exit code>
and single facts as `@@nodecheck <key> <value>` lines. One SSH round trip then carries several
commands, and a judge still knows which command said what and how it exited.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.parsers.lines import split_lines

MARK = "@@nodecheck"
_BEGIN = re.compile(r"^@@nodecheck begin (\S+)$")
# not anchored at the start: output without a final newline (a cut-off log) runs into the marker.
# An exit status is 0-255; a longer run of digits is no end marker (int() of 4,300 digits raises).
_END = re.compile(r"@@nodecheck end (\S+) rc=(\d{1,10})$", re.ASCII)
_FACT = re.compile(r"^@@nodecheck (?!begin |end )(\S+) ?(.*)$")


@dataclass(frozen=True)
class Section:
    name: str
    text: str
    rc: int | None  # None: the end marker never came (cut off)

    @property
    def ok(self) -> bool:
        return self.rc == 0


@dataclass(frozen=True)
class Sections:
    sections: dict[str, Section]
    facts: dict[str, str]  # "@@nodecheck runtime docker" → {"runtime": "docker"}
    preamble: str  # text before the first marker

    def get(self, name: str) -> Section | None:
        return self.sections.get(name)

    def require(self, name: str, tool: str) -> Section:
        section = self.sections.get(name)
        if section is None:
            raise ParseError(tool, f"probe output has no {name!r} section", self.preamble)
        return section


def split_sections(text: str, tool: str = "probe") -> Sections:
    sections: dict[str, Section] = {}
    facts: dict[str, str] = {}
    preamble: list[str] = []
    current: str | None = None
    body: list[str] = []
    for line in split_lines(text):  # "\n" only: a \x1c or U+2028 in a command's output is its own
        if current is not None:
            end = _END.search(line)
            if end and end.group(1) == current:
                text = _join(body)
                if end.start():  # the last line had no newline: keep it that way
                    text += line[: end.start()]
                sections[current] = Section(current, text, int(end.group(2)))
                current, body = None, []
            else:
                body.append(line)
            continue
        if begin := _BEGIN.match(line):
            current, body = begin.group(1), []
        elif fact := _FACT.match(line):
            facts[fact.group(1)] = fact.group(2)
        elif not sections and not facts:
            preamble.append(line)
    if current is not None:  # the output stops inside a section: keep what came
        sections[current] = Section(current, _join(body), None)
    return Sections(sections, facts, _join(preamble))


def _join(lines: list[str]) -> str:
    return "\n".join(lines) + ("\n" if lines else "")
