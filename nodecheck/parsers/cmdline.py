"""Split the kernel command line (/proc/cmdline) the way the kernel does (lib/cmdline.c next_arg):
parameters are separated by spaces; double quotes protect spaces and are removed ("param="a b""
and ""param=a b"" both give param = a b); everything after a bare "--" is handed to init, not the
kernel. Parameter names compare with "-" and "_" alike (kernel/params.c parameq)."""

from __future__ import annotations

from dataclasses import dataclass

from nodecheck.core.errors import ParseError

MAX_CHARS = 65536  # COMMAND_LINE_SIZE is 2048-4096 on most architectures; a larger text is not a command line


@dataclass(frozen=True)
class Param:
    name: str  # as written: "nouveau.modeset"
    value: str | None  # None: a bare flag ("quiet"); "" for "name="

    @property
    def key(self) -> str:
        """The name as the kernel compares it: "-" and "_" alike."""
        return self.name.replace("-", "_")

    def text(self) -> str:
        """The parameter written back, quoted where its value holds a space."""
        if self.value is None:
            return self.name
        value = f'"{self.value}"' if any(c.isspace() for c in self.value) else self.value
        return f"{self.name}={value}"


@dataclass(frozen=True)
class Cmdline:
    params: tuple[Param, ...]  # in order
    init_args: tuple[str, ...]  # after "--"

    def last(self, name: str) -> Param | None:
        """The parameter's last occurrence (most parameters take the last one given)."""
        key = name.replace("-", "_")
        found = [p for p in self.params if p.key == key]
        return found[-1] if found else None


def parse_cmdline(text: str) -> Cmdline:
    if len(text) > MAX_CHARS:
        raise ParseError("/proc/cmdline", f"{len(text)} characters: not a kernel command line", text)
    if "\0" in text:
        raise ParseError("/proc/cmdline", "a NUL byte: not a kernel command line", text)
    rest = text.strip()
    params: list[Param] = []
    while rest:
        param, rest = _next_arg(rest)
        if param.name == "--" and param.value is None:
            return Cmdline(tuple(params), tuple(_next_arg_words(rest)))
        params.append(param)
    return Cmdline(tuple(params), ())


def _next_arg(args: str) -> tuple[Param, str]:
    """lib/cmdline.c next_arg: one parameter and the text after it."""
    in_quote = quoted = False
    if args.startswith('"'):
        args, in_quote, quoted = args[1:], True, True
    equals = None
    i = 0
    while i < len(args):
        c = args[i]
        if c.isspace() and not in_quote:
            break
        if equals is None and c == "=":
            equals = i
        if c == '"':
            in_quote = not in_quote
        i += 1
    param, rest = args[:i], args[i:].lstrip()
    if equals is None:
        name, value = param, None
        if quoted and name.endswith('"'):
            name = name[:-1]
    else:
        name, value = param[:equals], param[equals + 1 :]
        if value.startswith('"'):
            value = value[1:]
            if value.endswith('"'):
                value = value[:-1]
        elif quoted and value.endswith('"'):
            value = value[:-1]
    return Param(name, value), rest


def _next_arg_words(rest: str) -> list[str]:
    words = []
    while rest:
        param, rest = _next_arg(rest)
        words.append(param.text())
    return words
