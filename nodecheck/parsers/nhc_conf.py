"""LBNL NHC configuration text (nhc.conf) → the directives NHC would run, each with its line.

NHC reads its file with bash: `while read LINE` (no -r), splits each line at the first `||` into a
target (which hosts) and a check, skips lines whose target starts with `#`, and later runs each
check with `eval $CHECK` (mej/nhc scripts/common.nhc nhc_load_conf, nhc nhcmain_run_checks). This
module reproduces that reading without running anything:

- `read` without -r joins a line ending in a backslash with the next (a continuation) and drops
  every other backslash, keeping the character after it; leading and trailing blanks go.
- `while read` stops at a last line that has no newline: NHC never runs it, so neither does this.
- the check is split into words the way bash's eval would: '...' literal, "..." with $ expansions
  and backslash escapes, $VAR / ${VAR} / $(...) / $((...)) / `...` kept as expansions (their value
  is known only on the node), `#` starting a word ends the line, and unquoted shell operators
  (; & | < > ( )) mark a line as shell code rather than one check call.

Pure: text in, frozen facts out. Operator errors in the file are facts (`Malformed`, with the line
and why); only input that is not a text file at all (NUL or other control bytes) raises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from nodecheck.core.errors import ParseError

TOOL = "nhc.conf"
# The largest configuration read: NHC's own sample is 6 KiB, the largest site file seen (an
# nhc-genconf output with every DMI handle) 15 KiB; 1 MiB is far beyond any real one and keeps a
# wrong file (a log, a core dump) from being read whole.
MAX_CONF_BYTES = 1024 * 1024
# A logical line (after continuations) longer than this is refused as one malformed line.
MAX_LINE_CHARS = 16 * 1024

_BLANKS = " \t"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\+?)=")
_OPERATORS = ";&|<>()"
# control characters a text file does not hold (tab, newline and carriage return are allowed)
_BINARY = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


class NhcConfError(ParseError):
    """The input is not an NHC configuration text at all (binary, too large); names the line."""

    def __init__(self, reason: str, line: int | None = None, excerpt: str = "") -> None:
        self.line = line
        super().__init__(TOOL, reason, excerpt)


@dataclass(frozen=True)
class Target:
    """Which hosts a line is for, as NHC's mcheck reads the text before `||`."""

    raw: str
    kind: Literal["all", "glob", "regex", "range"]  # all: the glob `*` alone
    pattern: str  # without the leading ! and the delimiters
    negated: bool = False

    @property
    def every_host(self) -> bool:
        return self.kind == "all" and not self.negated


@dataclass(frozen=True)
class Expansion:
    """A $ expansion in a word: its value exists only when NHC runs on the node."""

    raw: str  # as written: "$NHC_CORES", "${X:-2}", "$((2*HW_CORES))", "$(hostname)"
    name: str | None  # the variable of a plain $NAME or ${NAME}; None for anything computed


@dataclass(frozen=True)
class Word:
    """One shell word after quote removal: literal text and expansions, in order."""

    parts: tuple[str | Expansion, ...]
    raw: str  # the source text of the word

    @property
    def literal(self) -> str | None:
        """The word's text when it has no expansion, else None."""
        if any(isinstance(p, Expansion) for p in self.parts):
            return None
        return "".join(p for p in self.parts if isinstance(p, str))

    @property
    def expansions(self) -> tuple[Expansion, ...]:
        return tuple(p for p in self.parts if isinstance(p, Expansion))


@dataclass(frozen=True)
class Directive:
    """A line NHC would run on the hosts its target matches."""

    line: int  # first physical line, 1-based
    end_line: int  # last physical line (a continuation spans several)
    text: str  # the logical line as NHC read it
    target: Target
    kind: Literal["check", "setting", "shell"]
    # check: the function; setting: the variable; shell: the first word (or "")
    name: str
    args: tuple[Word, ...] = ()  # check: its arguments; setting: the value (one word)
    exported: bool = False  # setting: `export NAME=...`
    why: str = ""  # shell: which shell syntax made it more than one call


@dataclass(frozen=True)
class Malformed:
    """A line NHC would not run as written, or would run as something else; why, in words."""

    line: int
    end_line: int
    text: str
    reason: str


@dataclass(frozen=True)
class NhcConf:
    directives: tuple[Directive, ...]
    malformed: tuple[Malformed, ...]
    lines: int  # physical lines in the text


def parse_nhc_conf(text: str) -> NhcConf:
    """Every directive and every malformed line of an nhc.conf text, in file order."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_CONF_BYTES:
        raise NhcConfError(f"larger than {MAX_CONF_BYTES // 1024} KiB: not an NHC configuration")
    physical = text.split("\n")
    bad = _BINARY.search(text)
    if bad:
        line = text.count("\n", 0, bad.start()) + 1
        raise NhcConfError(
            f"line {line}: control character {bad.group()!r}: a binary file, not an NHC configuration",
            line,
            physical[line - 1][:200],
        )
    directives: list[Directive] = []
    malformed: list[Malformed] = []
    # the text after the last "\n" is a line without a newline: `while read` never hands it over
    complete, last = physical[:-1], physical[-1]
    for start, end, logical in _read_lines(complete):
        item = _directive(start, end, logical)
        if isinstance(item, Directive):
            directives.append(item)
        elif item is not None:
            malformed.append(item)
    if last.strip(_BLANKS + "\r"):
        number = len(physical)
        malformed.append(
            Malformed(
                number,
                number,
                last,
                "the file's last line has no newline: NHC's `while read` loop never runs it "
                "(end the file with a newline)",
            )
        )
    lines = len(complete) + (1 if last else 0)
    return NhcConf(tuple(directives), tuple(malformed), lines)


def _read_lines(physical: list[str]):
    """(first line, last line, logical line) as bash `read` (no -r) returns them: a trailing
    backslash continues the line, every other backslash is dropped and keeps the next character,
    blanks at both ends are trimmed."""
    index = 0
    while index < len(physical):
        start = index
        out: list[str] = []
        while True:
            line = physical[index]
            index += 1
            continued = False
            i = 0
            while i < len(line):
                ch = line[i]
                if ch == "\\":
                    if i + 1 < len(line):
                        out.append(line[i + 1])
                        i += 2
                        continue
                    continued = True  # backslash-newline: the line goes on
                    break
                out.append(ch)
                i += 1
            if not continued or index >= len(physical):
                break
        yield start + 1, index, "".join(out).strip(_BLANKS)


def _directive(line: int, end: int, text: str) -> Directive | Malformed | None:
    if len(text) > MAX_LINE_CHARS:
        return Malformed(line, end, text[:200] + "...", f"a line longer than {MAX_LINE_CHARS} characters")
    # a file saved with CRLF: bash keeps the \r in the last word, so NHC looks for "/\r" and fails;
    # what the operator meant is clear, and a translation that keeps a \r would be refused anyway
    text = text.rstrip("\r")
    if "||" not in text:
        if not text or text.startswith("#"):
            return None
        # NHC: TARGET and CHECK are then both the whole line; it runs only where the host name
        # matches the whole line as a glob, i.e. nowhere
        return Malformed(line, end, text, "no `||` between target and check: NHC never runs this line")
    target_text, check_text = (part.strip(_BLANKS) for part in text.split("||", 1))
    if target_text.startswith("#"):
        return None  # a comment (NHC tests the target only)
    if not target_text or not check_text:
        return None  # NHC skips an empty target or check
    target = _target(target_text)
    words, why, comment_only = _split_words(check_text)
    if isinstance(words, str):
        return Malformed(line, end, text, words)
    if comment_only:
        return None  # `* || # ...`: eval runs nothing
    if why:
        first = words[0].literal if words and words[0].literal else ""
        return Directive(line, end, text, target, "shell", first or "", tuple(words), why=why)
    return _classify(line, end, text, target, words)


def _target(text: str) -> Target:
    negated = text.startswith("!")
    body = text[1:] if negated else text
    if len(body) >= 2 and body.startswith("/") and body.endswith("/"):
        return Target(text, "regex", body[1:-1], negated)
    if len(body) >= 2 and body.startswith("{") and body.endswith("}"):
        return Target(text, "range", body[1:-1], negated)
    return Target(text, "all" if body == "*" else "glob", body, negated)


def _classify(line: int, end: int, text: str, target: Target, words: list[Word]) -> Directive:
    first = words[0].literal
    if first == "export" and len(words) == 2:
        assigned = _assignment(words[1])
        if assigned:
            return Directive(line, end, text, target, "setting", assigned[0], (assigned[1],), exported=True)
    if first in ("export", "declare", "typeset", "local", "readonly", "unset"):
        return Directive(line, end, text, target, "shell", first, tuple(words), why=f"the `{first}` builtin")
    assigned = _assignment(words[0])
    if assigned and len(words) == 1:
        return Directive(line, end, text, target, "setting", assigned[0], (assigned[1],))
    if assigned:
        return Directive(
            line, end, text, target, "shell", "", tuple(words), why="a variable assignment before a command"
        )
    if first is None:
        return Directive(line, end, text, target, "shell", "", tuple(words), why="the command name is an expansion")
    return Directive(line, end, text, target, "check", first, tuple(words[1:]))


def _assignment(word: Word) -> tuple[str, Word] | None:
    """NAME=value as bash sees it (the name and `=` unquoted at the word's start): the name and the value."""
    match = _ASSIGNMENT.match(word.raw)
    if not match or match.group(2):  # NAME+=...: appends to a value this file cannot know
        return None
    name = match.group(1)
    head = word.parts[0]
    # the raw text starts with plain characters, so the first part is text that starts with them
    assert isinstance(head, str) and head.startswith(name + "=")
    rest = head[len(name) + 1 :]
    return name, Word(((rest,) if rest else ()) + tuple(word.parts[1:]), word.raw[len(name) + 1 :])


def _split_words(text: str) -> tuple[list[Word] | str, str, bool]:
    """(words, why it is shell code or "", only a comment) — or (reason, "", False) when bash
    would refuse the text (an unterminated quote or expansion)."""
    words: list[Word] = []
    parts: list[str | Expansion] = []
    literal: list[str] = []
    why = ""
    i = 0
    n = len(text)
    word_start = -1

    def flush_literal() -> None:
        if literal:
            parts.append("".join(literal))
            literal.clear()

    def end_word(at: int) -> None:
        nonlocal word_start
        flush_literal()
        if word_start >= 0:
            words.append(Word(tuple(_merge(parts)), text[word_start:at]))
        parts.clear()
        word_start = -1

    while i < n:
        ch = text[i]
        if ch in _BLANKS:
            end_word(i)
            i += 1
            continue
        if ch == "#" and word_start < 0:
            break  # a comment to the end of the line
        if ch in _OPERATORS:
            end_word(i)
            why = why or f"the shell operator `{text[i : i + 2] if text[i : i + 2] in ('&&', '||') else ch}`"
            i += 1
            continue
        if word_start < 0:
            word_start = i
        if ch == "\\":
            # read already dropped the file's backslashes; one left here came from an escaped one
            if i + 1 < n:
                literal.append(text[i + 1])
            i += 2
        elif ch == "'":
            close = text.find("'", i + 1)
            if close < 0:
                return "an unterminated ' quote (bash refuses the line)", "", False
            literal.append(text[i + 1 : close])
            i = close + 1
        elif ch == '"':
            i += 1
            while i < n and text[i] != '"':
                if text[i] == "\\" and i + 1 < n and text[i + 1] in '$`"\\':
                    literal.append(text[i + 1])
                    i += 2
                elif text[i] in "$`" and not _lone_dollar(text, i):
                    span = _expansion(text, i)
                    if isinstance(span, str):
                        return span, "", False
                    flush_literal()
                    parts.append(span[0])
                    i = span[1]
                else:
                    literal.append(text[i])
                    i += 1
            if i >= n:
                return 'an unterminated " quote (bash refuses the line)', "", False
            i += 1
        elif ch in "$`" and not _lone_dollar(text, i):
            span = _expansion(text, i)
            if isinstance(span, str):
                return span, "", False
            flush_literal()
            parts.append(span[0])
            i = span[1]
        else:
            literal.append(ch)
            i += 1
    end_word(n)
    return words, why, not words and not why


def _merge(parts: list[str | Expansion]) -> list[str | Expansion]:
    merged: list[str | Expansion] = []
    for part in parts:
        if isinstance(part, str) and merged and isinstance(merged[-1], str):
            merged[-1] = merged[-1] + part
        else:
            merged.append(part)
    return merged


def _expansion(text: str, i: int) -> tuple[Expansion, int] | str:
    """The expansion starting at text[i] ($ or `) and the index after it, or why it is broken."""
    if text[i] == "`":
        close = text.find("`", i + 1)
        if close < 0:
            return "an unterminated ` command substitution (bash refuses the line)"
        return Expansion(text[i : close + 1], None), close + 1
    nxt = text[i + 1] if i + 1 < len(text) else ""
    if nxt in "({":
        close = _matching(text, i + 1)
        if close < 0:
            return f"an unterminated ${nxt} (bash refuses the line)"
        raw = text[i : close + 1]
        inner = raw[2:-1]
        name = inner if nxt == "{" and _NAME.match(inner) else None
        return Expansion(raw, name), close + 1
    match = _PARAMETER.match(text, i + 1)
    assert match is not None  # _lone_dollar said so
    raw = text[i : match.end()]
    return Expansion(raw, match.group() if _NAME.match(match.group()) else None), match.end()


_PARAMETER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9#?$!@*-]")  # $NAME, or a special one: $1 $# $? $$ ...


def _lone_dollar(text: str, i: int) -> bool:
    """A $ that starts no expansion (`foo$`, `$ `, `$/`): bash keeps it as a plain character."""
    return text[i] == "$" and text[i + 1 : i + 2] not in ("(", "{") and not _PARAMETER.match(text, i + 1)


def _matching(text: str, open_at: int) -> int:
    """The index of the bracket closing text[open_at], skipping quoted text; -1 if none."""
    pairs = {"(": ")", "{": "}"}
    stack = [pairs[text[open_at]]]
    i = open_at + 1
    while i < len(text):
        ch = text[i]
        if ch == "'":
            close = text.find("'", i + 1)
            if close < 0:
                return -1
            i = close + 1
            continue
        if ch == "\\":
            i += 2
            continue
        if ch in pairs:
            stack.append(pairs[ch])
        elif ch == stack[-1]:
            stack.pop()
            if not stack:
                return i
        i += 1
    return -1
