"""Load a YAML file keeping the line of every key, so config errors can name file:line."""
from __future__ import annotations

import difflib
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from nodecheck.errors import ConfigError

Loc = tuple  # a path into the document: ("nodes", "gpu[001-008]", "address")


@dataclass(frozen=True)
class Located:
    data: Any
    file: str
    lines: dict                                # Loc -> 1-based line

    def line(self, loc: Loc) -> int | None:
        """The line of the deepest known prefix of loc (a missing key points at its parent)."""
        loc = tuple(loc)
        while loc not in self.lines and loc:
            loc = loc[:-1]
        return self.lines.get(loc)

    def error(self, loc: Loc, message: str, hint: str = "") -> ConfigError:
        return ConfigError(message, file=self.file, line=self.line(loc), hint=hint)


def load_file(path: str | Path) -> Located:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise ConfigError(f"cannot read: {e.strerror}", file=str(path),
                          hint="check the path and its permissions") from None
    return load_text(text, str(path))


def load_text(text: str, file: str) -> Located:
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        lines: dict = {}
        data = _walk(loader, node, (), lines, file) if node is not None else None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        raise ConfigError(f"malformed YAML: {e.problem or e.context}",
                          file=file, line=mark.line + 1 if mark else None,
                          hint="check indentation, colons and quoting on that line") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"malformed YAML: {e}", file=file) from None
    finally:
        loader.dispose()
    return Located(data, file, lines)


def _walk(loader: yaml.SafeLoader, node: yaml.Node, loc: Loc, lines: dict, file: str) -> Any:
    lines.setdefault(loc, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        loader.flatten_mapping(node)           # resolves YAML merge keys (<<)
        out: dict = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if not isinstance(key, (str, int, float, bool)) or isinstance(key, bool):
                key = str(key)
            if key in out:
                raise ConfigError(f"duplicate key {key!r} (first at line {lines[loc + (key,)]})",
                                  file=file, line=key_node.start_mark.line + 1,
                                  hint="each key may appear once; merge the two entries")
            lines[loc + (key,)] = key_node.start_mark.line + 1
            out[key] = _walk(loader, value_node, loc + (key,), lines, file)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_walk(loader, item, loc + (i,), lines, file) for i, item in enumerate(node.value)]
    return loader.construct_object(node, deep=True)


def pydantic_error(src: Located, base: Loc, err: Any, what: str = "",
                   model: Any = None) -> ConfigError:
    """The first error of a pydantic ValidationError, placed at its key's line.

    `model` (the pydantic class validated at `base`) lets an unknown key get a "did you mean"."""
    # an unknown key usually explains a "missing" one (a typo), so report it first
    first = sorted(err.errors(), key=lambda e: e["type"] != "extra_forbidden")[0]
    loc = base + tuple(first["loc"])
    dotted = ".".join(str(p) for p in loc if p != "__root__")
    msg = first["msg"]
    if first["type"] == "extra_forbidden":
        return src.error(loc, f"unknown key {dotted!r}{what}",
                         hint=_did_you_mean(str(loc[-1]), model))
    if first["type"] == "missing":
        return src.error(loc[:-1], f"missing required key {dotted!r}{what}",
                         hint=f"add {loc[-1]}: <value>")
    got = first.get("input")
    shown = "" if isinstance(got, (dict, list)) else f", got {got!r}"
    return src.error(loc, f"{dotted}: {msg}{shown}{what}")


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
