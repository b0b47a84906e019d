"""Load a YAML file keeping the line of every key, so config errors can name file:line.

A file is opened once and read through that descriptor: its owner and mode (Located.owner_uid, .mode)
are the fstat of the same descriptor, so whose word the content is (the watcher's trust in a config,
watch/config.py) cannot be taken from another file put at the path; only regular files are read (a
FIFO or a device is refused without blocking), at most MAX_FILE_BYTES."""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import math
import os
import stat
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from nodecheck.core.errors import ConfigError
from nodecheck.core.model import SHOWN_MAX_CHARS, shown  # noqa: F401 - shown: this module's callers quote with it
from nodecheck.core.reading import read_at_most
from nodecheck.core.redact import mask_url_credentials

Loc = tuple  # a path into the document: ("nodes", "gpu[001-008]", "address")

FINITE_HINT = "nan and inf are not limits or settings: write a finite number, e.g. 85"


# PyYAML's composer recurses once per nesting level, so a hostile depth ends in RecursionError;
# inventories and playbooks are at most 5 levels deep, so this bound is far from any real file.
MAX_DEPTH = 50
# a config is a few KiB of YAML; a bigger file is the wrong file (a log, an image, /proc/kcore's size)
MAX_FILE_BYTES = 16 * 1024 * 1024
_NOT_REGULAR = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


@dataclass(frozen=True)
class Located:
    data: Any
    file: str
    lines: dict  # Loc -> 1-based line
    sha256: str = ""  # of the bytes parsed, so nobody has to read twice
    # who owns the file read, and its st_mode: fstat of the very descriptor read (load_file), so whose
    # word the content is cannot be taken from another file put at the path later; None: not a file
    owner_uid: int | None = None
    mode: int | None = None

    def line(self, loc: Loc) -> int | None:
        """The line of the deepest known prefix of loc (a missing key points at its parent)."""
        loc = tuple(loc)
        while loc not in self.lines and loc:
            loc = loc[:-1]
        return self.lines.get(loc)

    def error(self, loc: Loc, message: str, hint: str = "") -> ConfigError:
        return ConfigError(message, file=self.file, line=self.line(loc), hint=hint)


def load_file(path: str | Path) -> Located:
    """The file parsed, with its owner and mode as read; unreadable, binary or non-UTF-8 files, files
    that are not regular files and files over MAX_FILE_BYTES are ConfigErrors like bad YAML."""
    path = Path(path)
    raw, st = read_config_bytes(path)
    try:
        text = raw.decode("utf-8")  # explicit: the locale's encoding is not the file's
    except UnicodeDecodeError as e:
        raise ConfigError(
            f"not UTF-8 text (byte 0x{raw[e.start]:02x})",
            file=str(path),
            line=raw.count(b"\n", 0, e.start) + 1,
            hint="is this the right file? save it as plain UTF-8 text",
        ) from None
    return dataclasses.replace(
        load_text(text, str(path)),
        sha256=hashlib.sha256(raw).hexdigest(),
        owner_uid=st.st_uid,
        mode=st.st_mode,
    )


def read_config_bytes(path: Path) -> tuple[bytes, os.stat_result]:
    """The bytes of `path` and the fstat of the descriptor they were read through (one open: the owner
    is the content's). O_NONBLOCK: opening a FIFO nobody writes returns at once, to be refused below."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except IsADirectoryError:
        raise _not_a_file(path, "is a directory, not a file") from None
    except OSError as e:
        raise _unreadable(path, e) from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise _not_a_file(path, "is a directory, not a file")
        for test, kind in _NOT_REGULAR:
            if test(st.st_mode):
                raise _not_a_file(path, f"is not a regular file ({kind})")
        if st.st_size > MAX_FILE_BYTES:
            raise _too_big(path, f"is {st.st_size} bytes")
        raw = read_at_most(fd, MAX_FILE_BYTES + 1)  # bounded even if the file grows after the fstat
    except OSError as e:
        raise _unreadable(path, e) from None
    finally:
        os.close(fd)
    if len(raw) > MAX_FILE_BYTES:
        raise _too_big(path, f"is more than {MAX_FILE_BYTES} bytes")
    return raw, st


def _not_a_file(path: Path, message: str) -> ConfigError:
    return ConfigError(message, file=str(path), hint="give the path of the YAML file itself")


def _unreadable(path: Path, e: OSError) -> ConfigError:
    return ConfigError(f"cannot read: {e.strerror or e}", file=str(path), hint="check the path and its permissions")


def _too_big(path: Path, size: str) -> ConfigError:
    return ConfigError(
        f"{size}: larger than any config (at most {MAX_FILE_BYTES // (1024 * 1024)} MiB)",
        file=str(path),
        hint="is this the right file? a config is a few KiB of YAML",
    )


def load_text(text: str, file: str) -> Located:
    loader = None
    try:
        loader = _Loader(text)  # the reader rejects control characters right here
        node = loader.get_single_node()
        walker = _Walker(loader, file)
        data = walker.walk(node, ()) if node is not None else None
    except _TooDeep as e:
        assert e.problem_mark is not None  # _Loader raises it with one
        raise ConfigError(
            f"nested more than {MAX_DEPTH} levels deep",
            file=file,
            line=e.problem_mark.line + 1,
            hint="inventories and playbooks are a few levels deep; check the brackets",
        ) from None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        raise ConfigError(
            f"malformed YAML: {e.problem or e.context}",
            file=file,
            line=mark.line + 1 if mark else None,
            hint="check indentation, colons and quoting on that line",
        ) from None
    except yaml.reader.ReaderError as e:
        raise ConfigError(
            f"character #x{e.character:04x} is not allowed in YAML",
            file=file,
            line=text.count("\n", 0, e.position) + 1,
            hint="is this a binary file? write control characters as escapes in a double-quoted string",
        ) from None
    except yaml.YAMLError as e:
        raise ConfigError(f"malformed YAML: {e}", file=file) from None
    except RecursionError:  # a backstop: depth and alias cycles are caught above
        raise ConfigError(
            "nested too deeply or a recursive alias",
            file=file,
            hint="an alias (*name) cannot refer to a value that encloses it",
        ) from None
    finally:
        if loader is not None:
            loader.dispose()
    return Located(data, file, walker.lines)


class _TooDeep(yaml.MarkedYAMLError):
    """Raised by _Loader at MAX_DEPTH; a MarkedYAMLError so it carries the line."""


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses to compose nodes more than MAX_DEPTH levels deep."""

    depth = 0

    def compose_node(self, parent, index):
        if self.depth >= MAX_DEPTH:
            raise _TooDeep(problem="too deep", problem_mark=self.peek_event().start_mark)
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


MERGE_TAG = "tag:yaml.org,2002:merge"  # a plain `<<` key
VALUE_TAG = "tag:yaml.org,2002:value"  # a plain `=` key: PyYAML treats it as the string "="
_KINDS = {type(None): "null", bool: "a boolean", int: "a number", float: "a number"}


class _Walker:
    """Node graph → plain data, recording the line of every key.

    Each node becomes one value however many aliases name it, so a document of nested aliases
    (a "billion laughs") costs what it is written in, not what it expands to, and an alias inside
    its own anchor is a ConfigError, not an endless recursion."""

    def __init__(self, loader: yaml.SafeLoader, file: str) -> None:
        self.loader, self.file = loader, file
        self.lines: dict[Loc, int] = {}
        self.values: dict[int, Any] = {}  # id(node) -> its value, for the next alias of it
        self.pairs: dict[int, list] = {}  # id(mapping node) -> its pairs, merges resolved
        self.walking: set[int] = set()  # nodes entered and not left: meeting one is a cycle
        self.merging: set[int] = set()

    def walk(self, node: yaml.Node, loc: Loc) -> Any:
        self.lines.setdefault(loc, node.start_mark.line + 1)
        if id(node) not in self.values:
            self._enter(node, self.walking)
            if isinstance(node, yaml.MappingNode):
                value: Any = self._mapping(node, loc)
            elif isinstance(node, yaml.SequenceNode):
                value = [self.walk(item, loc + (i,)) for i, item in enumerate(node.value)]
            else:
                value = self._scalar(node)
            self.walking.discard(id(node))
            self.values[id(node)] = value
        return self.values[id(node)]

    def _enter(self, node: yaml.Node, entered: set) -> None:
        if id(node) in entered:
            raise ConfigError(
                "recursive alias: a value contains an alias of itself",
                file=self.file,
                line=node.start_mark.line + 1,
                hint="an alias (*name) cannot refer to a value that encloses it",
            )
        entered.add(id(node))

    def _mapping(self, node: yaml.MappingNode, loc: Loc) -> dict:
        out: dict = {}
        for key, key_node, value_node in self._pairs(node):
            self.lines[loc + (key,)] = key_node.start_mark.line + 1
            out[key] = self.walk(value_node, loc + (key,))
        return out

    def _pairs(self, node: yaml.MappingNode) -> list:
        """(key, key node, value node) of a mapping: the pairs its merge keys (<<) bring in, each
        key once, then its own, which override them. Done here rather than by PyYAML's
        flatten_mapping, which copies merged pairs (repeated merges grow exponentially), edits the
        nodes, and leaves an overridden key looking like a duplicate."""
        if id(node) in self.pairs:
            return self.pairs[id(node)]
        self._enter(node, self.merging)
        merged: dict = {}
        own: dict = {}
        for key_node, value_node in node.value:
            if key_node.tag == MERGE_TAG:
                for source in self._merge_sources(value_node):
                    for pair in self._pairs(source):
                        merged.setdefault(pair[0], pair)  # in `<<: [*a, *b]` a's keys win
                continue
            key = self._key(key_node)
            if key in own:
                raise ConfigError(
                    f"duplicate key {shown(key)} (first at line {own[key][1].start_mark.line + 1})",
                    file=self.file,
                    line=key_node.start_mark.line + 1,
                    hint="each key may appear once; merge the two entries",
                )
            own[key] = (key, key_node, value_node)
        self.merging.discard(id(node))
        pairs = [p for key, p in merged.items() if key not in own] + list(own.values())
        self.pairs[id(node)] = pairs
        return pairs

    def _merge_sources(self, node: yaml.Node) -> list:
        sources = node.value if isinstance(node, yaml.SequenceNode) else [node]
        for source in sources:
            if not isinstance(source, yaml.MappingNode):
                raise ConfigError(
                    "a merge key (<<) takes a mapping or a list of mappings",
                    file=self.file,
                    line=source.start_mark.line + 1,
                    hint="write <<: *name, where &name marks a mapping",
                )
        return sources

    def _key(self, node: yaml.Node) -> str:
        """A mapping key, which must be a string: YAML reads bare `123`, `yes`, `~` as a number,
        a boolean, null, and turning those back into text would silently rename the key."""
        line = node.start_mark.line + 1
        if not isinstance(node, yaml.ScalarNode):
            raise ConfigError(
                f"a {'list' if isinstance(node, yaml.SequenceNode) else 'mapping'} cannot be a key",
                file=self.file,
                line=line,
                hint="keys are names: quote it if it is one, or fix the indentation",
            )
        if node.tag == VALUE_TAG:
            return node.value
        key = self._scalar(node)
        if isinstance(key, str):
            return key
        if not node.value:
            raise ConfigError(
                "empty key",
                file=self.file,
                line=line,
                hint='give the key a name; quote it if it is meant to be empty: "":',
            )
        kind = _KINDS.get(type(key), f"a {type(key).__name__}")
        raise ConfigError(
            f"key {shown(node.value)} is read by YAML as {kind}, not a name",
            file=self.file,
            line=line,
            hint=f'quote it: "{node.value[:80]}":',
        )

    def _scalar(self, node: yaml.Node) -> Any:
        try:
            return self.loader.construct_object(node, deep=True)
        except (ValueError, KeyError, TypeError, OverflowError) as e:  # e.g. the date 2024-13-45
            tag = node.tag.rsplit(":", 1)[-1]
            why = "" if isinstance(e, KeyError) else f": {e}"  # a KeyError says only the key
            raise ConfigError(
                f"cannot read {shown(node.value)} as a {tag}{why[:200]}",
                file=self.file,
                line=node.start_mark.line + 1,
                hint="quote it if it is text",
            ) from None


def pydantic_error(src: Located, base: Loc, err: Any, what: str = "", model: Any = None) -> ConfigError:
    """The first error of a pydantic ValidationError, placed at its key's line.

    `model` (the pydantic class validated at `base`) lets an unknown key get a "did you mean"."""
    # an unknown key usually explains a "missing" one (a typo), so report it first
    first = sorted(err.errors(), key=lambda e: e["type"] != "extra_forbidden")[0]
    loc = base + tuple(first["loc"])
    dotted = ".".join(str(p) for p in loc if p != "__root__")
    dotted = dotted if len(dotted) <= 200 else dotted[:200] + "…"  # keys come from the file too
    msg = first["msg"]
    if first["type"] == "extra_forbidden":
        return src.error(loc, f"unknown key {dotted!r}{what}", hint=_did_you_mean(str(loc[-1]), model))
    if first["type"] == "missing":
        return src.error(loc[:-1], f"missing required key {dotted!r}{what}", hint=f"add {loc[-1]}: <value>")
    got = first.get("input")
    if isinstance(got, str):  # an alert URL's user:token@ never reaches a log or terminal
        got = mask_url_credentials(got)
    seen = "" if isinstance(got, (dict, list)) else f", got {shown(got)}"
    hint = FINITE_HINT if first["type"] == "finite_number" else ""
    return src.error(loc, f"{dotted}: {msg[:300]}{seen}{what}", hint=hint)


def non_finite(value: Any, loc: Loc = ()) -> tuple[Loc, float] | None:
    """(where, the number) of the first NaN or infinity in validated settings, else None.

    pydantic's allow_inf_nan reaches float fields only; this reaches every number a file can put
    anywhere (a field that takes anything, a list, a nested model). Each container is visited
    once, so values shared through YAML aliases cost what the file says, not their expansion."""
    seen: set[int] = set()
    todo: list[tuple[Loc, Any]] = [(loc, value)]
    while todo:
        where, item = todo.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return where, item
            continue
        if isinstance(item, (str, bytes, int)) or item is None or id(item) in seen:
            continue
        seen.add(id(item))
        if hasattr(type(item), "model_fields"):
            children = [(name, getattr(item, name, None)) for name in type(item).model_fields]
            children += list((getattr(item, "model_extra", None) or {}).items())
        elif isinstance(item, dict):
            children = list(item.items())
        elif isinstance(item, (list, tuple)):
            children = list(enumerate(item))
        elif isinstance(item, (set, frozenset)):
            children = [(i, v) for i, v in enumerate(item)]
        else:
            continue
        todo.extend((where + (key,), child) for key, child in reversed(children))
    return None


def _did_you_mean(key: str, model: Any) -> str:
    known = sorted(_field_names(model)) if model is not None else []
    close = difflib.get_close_matches(key, known, n=1)
    if close:
        return f"did you mean {close[0]!r}?"
    if known:
        return "known keys: " + ", ".join(known)
    return "remove it or fix its spelling"


def _field_names(model: Any) -> set[str]:
    """Every key name the model or its nested models accept (suggestions need no exact path)."""
    names: set[str] = set()
    todo, seen = [model], set()
    while todo:
        m = todo.pop()
        if m in seen or not hasattr(m, "model_fields"):
            continue
        seen.add(m)
        for name, field in m.model_fields.items():
            names.add(name)
            todo.extend(_nested_types(field.annotation))
    return names


def _nested_types(annotation: Any) -> list:
    args = typing.get_args(annotation)
    return [annotation] + [t for a in args for t in _nested_types(a)]


def not_roots_word(owner_uid: int | None, mode: int | None) -> str:
    """Why a file is not root's word ("" when it is): another owner than root (or the user running the
    watcher: a non-root watcher can make nothing act beyond its own rights), or writable by group or
    others. A file that was not read from disk (no owner) is the caller's own."""
    if owner_uid is None or mode is None:
        return ""
    why = []
    if owner_uid not in (0, os.geteuid()):
        why.append(f"owned by uid {owner_uid}")
    writable = [who for who, bit in (("group", stat.S_IWGRP), ("others", stat.S_IWOTH)) if mode & bit]
    if writable:
        why.append("writable by " + " and ".join(writable))
    return " and ".join(why)
