"""Read a job's environment file (`--job-env FILE`): KEY=VALUE lines as a job script sources them.

The file is what a batch script would `source` (or `set -a; . FILE`) before it starts the job:
blank lines, `#` comments, an optional leading `export `, values quoted the shell way. nodecheck
does not run the file, so anything the shell would compute (`$VAR`, `${VAR}`, `$(cmd)`, backticks,
a leading `~`) is refused with the line that holds it: a value nodecheck cannot know is not guessed.
A key set twice keeps its last value, as the shell does. An unquoted `;`, `&`, `|`, `<`, `>`, `(` or
`)` is refused too: the shell would end the value there.
"""

from __future__ import annotations

import errno
import hashlib
import io
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from nodecheck.config.yaml_source import read_config_bytes
from nodecheck.core.errors import ConfigError
from nodecheck.probes.env_policy import ENV_NAME

_ASSIGNMENT = re.compile(r"^(export[ \t]+)?([^=\s]*)=")
# after an unquoted or double-quoted `$`: what the shell expands (a name, ${...}, $(...), $1, $@ ...)
_EXPANDS = re.compile(r"[A-Za-z_{(0-9@*#?$!-]")
NOT_RUN = "nodecheck reads this file, it does not run it"


@dataclass(frozen=True)
class JobEnvFile:
    """The file as read once: its variables, the sha256 of its bytes and its owner (the fstat of the
    descriptor read: whose job it is, app.job_user; a path swapped after the read lends nothing)."""

    env: dict[str, str]
    sha256: str
    owner_uid: int


def load_job_env(path: str) -> dict[str, str]:
    """{KEY: VALUE} of the file; ConfigError (file, line, hint) for anything a plain reading cannot
    settle. Later lines win over earlier ones."""
    return read_job_env(path).env


def read_job_env(path: str) -> JobEnvFile:
    """The file read once (one open: a regular file, bounded), with what load_job_env returns."""
    raw, st = _read(path)
    text = _decode(raw, path)
    env: dict[str, str] = {}
    for number, line in enumerate(text.split("\n"), 1):
        parsed = _parse_line(line, path, number)
        if parsed is not None:
            env[parsed[0]] = parsed[1]
    return JobEnvFile(env, hashlib.sha256(raw).hexdigest(), st.st_uid)


def _read(path: str):
    """(bytes, fstat) of the file, read through one descriptor (yaml_source.read_config_bytes: a
    regular file, bounded, a FIFO refused without blocking); its errors said for a job environment."""
    try:
        return read_config_bytes(Path(path))
    except ConfigError as e:
        if "directory, not a file" in e.message:
            raise ConfigError("is a directory, not a job environment file", file=path) from None
        if e.message == f"cannot read: {os.strerror(errno.ENOENT)}":
            raise ConfigError(
                "job environment file not found",
                file=path,
                hint="give the path of a KEY=VALUE file, as the job script sources it",
            ) from None
        if e.message.startswith("cannot read: "):
            raise ConfigError(
                "cannot read the job environment file: " + e.message.removeprefix("cannot read: "),
                file=path,
                hint="check its permissions",
            ) from None
        raise ConfigError(e.message, file=path, hint="give the KEY=VALUE file the job script sources") from None


def _decode(raw: bytes, path: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise ConfigError(
            f"not UTF-8 text (byte {raw[e.start]:#04x})", file=path, line=line, hint="save the file as UTF-8"
        ) from None


def _parse_line(line: str, path: str, number: int) -> tuple[str, str] | None:
    def error(message: str, hint: str) -> ConfigError:
        return ConfigError(message, file=path, line=number, hint=hint)

    if line.endswith("\r"):
        raise error(
            "the line ends with a carriage return (a Windows file): the shell would keep it in the value",
            "convert the file to Unix line endings (dos2unix)",
        )
    if "\0" in line:
        raise error("a NUL byte: no environment value can hold one", "remove it")
    stripped = line.strip()
    if not stripped or stripped.startswith("#"):
        return None
    match = _ASSIGNMENT.match(stripped)
    if match is None:
        raise error(
            f"not a KEY=VALUE line: {_quote(stripped)}",
            f"{NOT_RUN}; write each variable as KEY=VALUE (optionally after `export `)",
        )
    key = match.group(2)
    if not ENV_NAME.match(key):
        raise error(
            f"{_quote(key)} is not a variable name (letters, digits and _, not starting with a digit)",
            "write KEY=VALUE; `+=` and array syntax are not read",
        )
    rest = stripped[match.end() :]
    _refuse_expansion(rest, key, error)
    value, after = _first_word(rest, key, error)
    if after and not after.startswith("#"):
        raise error(
            f"{key}: more than one word after '=' ({_quote(after)}): the shell would run it as a command",
            'quote the value if it has spaces: KEY="a b"',
        )
    return key, value


def _first_word(rest: str, key: str, error) -> tuple[str, str]:
    """(the value, what follows it on the line). Quoting is undone by shlex, the shell's rules; a
    `#` ends the line only where it starts a word, as in the shell (a#b is one word)."""
    if not rest or rest[0] in " \t":
        return "", rest.strip()  # KEY= alone (or KEY= # comment): the empty string
    stream = io.StringIO(rest)  # what the lexer leaves unread follows the value
    lexer = shlex.shlex(stream, posix=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        value = lexer.get_token()
    except ValueError as e:  # "No closing quotation", "No escaped character"
        raise error(
            f"{key}: {str(e)[0].lower() + str(e)[1:]}",
            "close the quote on the same line; a value spread over lines is not read",
        ) from None
    return value or "", stream.read().strip()


def _refuse_expansion(rest: str, key: str, error) -> None:
    """Walk the raw value with the shell's quoting: `$` and backticks expand outside single quotes."""
    quote = ""
    i = 0
    while i < len(rest):
        c = rest[i]
        if quote == "'":
            quote = "" if c == "'" else quote
        elif c == "\\":
            i += 1  # the next character is literal (in "..." too, for $ and `)
        elif c == "'" and not quote:
            quote = "'"
        elif c == '"':
            quote = "" if quote == '"' else '"'
        elif c == "`" or (c == "$" and i + 1 < len(rest) and _EXPANDS.match(rest[i + 1])):
            what = "command substitution" if c == "`" or rest[i + 1] == "(" else "a variable expansion"
            raise error(
                f"{key}: {what} in {_quote(rest[i:], 20)}: {NOT_RUN}, so it cannot know the value",
                f"write the value out, or single-quote it if the {'`' if c == '`' else '$'} is literal",
            )
        elif c == "$" and not quote and rest[i + 1 : i + 2] in ("'", '"'):
            raise error(
                f"{key}: bash's {c}{rest[i + 1]}...{rest[i + 1]} quoting in {_quote(rest[i:], 20)}: sh and bash "
                "read it differently",
                "write the value in plain single or double quotes",
            )
        elif c in ";&|<>()" and not quote:
            raise error(
                f"{key}: an unquoted {c!r} in {_quote(rest, 20)}: the shell ends the value there "
                f"and reads the rest as a command or redirection",
                f"quote the value if the {c!r} belongs to it: KEY='a{c}b'",
            )
        elif c == "~" and i == 0:
            raise error(
                f"{key}: a leading ~ is expanded by the shell to a home directory: {NOT_RUN}", "write the absolute path"
            )
        elif c in " \t" and not quote:
            break  # the value ends here; the rest is checked as the rest
        i += 1


def _quote(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "…")
