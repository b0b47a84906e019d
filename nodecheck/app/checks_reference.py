"""The checks reference, rendered from the registry: the text `nodecheck checks` prints, and the
markdown page docs/checks.md (`nodecheck checks --format markdown > docs/checks.md`).

Everything here is read from the registered checks (the judge's docstring, its probes, its pydantic
parameter model), so the reference cannot say something the code does not do; a test fails when
docs/checks.md is older than the registry (tests/app/test_checks_reference.py).
"""

from __future__ import annotations

import inspect
import shlex
import sys
import types
import typing
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from nodecheck.core.model import Probe
from nodecheck.core.registry import CheckSpec

FORMATS = ("text", "markdown")
REGENERATE = "nodecheck checks --format markdown > docs/checks.md"

# the two keys every check's playbook block takes besides its own parameters (config/playbook.py)
COMMON = (
    ("timeout_s", "number", "probe default", "per-probe timeout for this check, seconds (0 < timeout_s <= 86400)"),
    ("enabled", "true|false", "default True", "false turns the check off"),
)

SCOPES = {
    "node": "judges each node on its own probes' output",
    "fleet": "judges every node's output together (pins a value, or compares it across the run's nodes)",
    "active": "runs commands between the nodes (pair tests, a flap) after every node's probes came back",
}

ARGUMENT_MAX = 60  # a longer argv word (a script) is shown by its size only


def render(checks: Mapping[str, CheckSpec], fmt: str) -> str:
    """The reference of `checks` as "text" (what `nodecheck checks` prints) or "markdown" (docs/checks.md)."""
    if fmt == "text":
        return _text(checks)
    if fmt == "markdown":
        return _markdown(checks)
    raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")


# ---- text ---------------------------------------------------------------------------------------


def _text(checks: Mapping[str, CheckSpec]) -> str:
    lines = []
    for name, spec in sorted(checks.items()):
        lines.append(f"{name}  ({spec.scope})  {spec.description}")
        for field, info in _model(spec.params).model_fields.items():
            default = "required" if info.is_required() else f"default {default_text(info)}"
            lines.append(
                f"    {field:<16} {type_name(info.annotation):<28} {default:<24} {info.description or ''}".rstrip()
            )
        for field, kind, default, description in COMMON:
            lines.append(f"    {field:<16} {kind:<28} {default:<24} {description}")
    return "\n".join(lines) + "\n"


def _model(params: type) -> type[BaseModel]:
    """A check's parameter model (CheckSpec.params is typed `type`: the registry does not import pydantic)."""
    if not issubclass(params, BaseModel):
        raise TypeError(f"{params!r} is not a pydantic model")
    return params


def type_name(annotation) -> str:
    """A parameter's type as an operator reads it: "InfiniBand|Ethernet|any", "number", "list of text"."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:  # a constrained type (a module name's pattern): the type under it
        return type_name(args[0])
    if origin is typing.Literal:
        return "|".join(str(a) for a in args)
    if origin in (typing.Union, types.UnionType):  # Optional[X] or X | None: the default says it may be unset
        return " or ".join(type_name(a) for a in args if a is not type(None))
    if origin in (list, tuple):  # a tuple[X, ...] is a list in the playbook
        return f"list of {type_name(args[0])}" if args else "list"
    names = {float: "number", int: "integer", str: "text", bool: "true|false"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


# ---- markdown -----------------------------------------------------------------------------------


def _markdown(checks: Mapping[str, CheckSpec]) -> str:
    out = [
        "# Checks reference",
        "",
        "<!-- Generated from the check registry; do not edit. Regenerate with:",
        f"     {REGENERATE} -->",
        "",
        "Every check nodecheck knows, as registered in `nodecheck/checks/`. A playbook lists checks by name "
        "under `checks:`, each with the parameters below (plus `timeout_s` and `enabled`, which every check "
        "takes). A check `a.b` is the function `b` in `nodecheck/checks/a.py` (or in `a_x.py` when `b` "
        "starts with `x`). `nodecheck checks` prints the same list as text.",
        "",
        "| Check | Scope | What it judges |",
        "|---|---|---|",
    ]
    for name, spec in sorted(checks.items()):
        out.append(f"| [`{name}`](#{_anchor(name)}) | {spec.scope} | {_cell(spec.description)} |")
    out += ["", "Scopes: " + "; ".join(f"**{scope}** {what}" for scope, what in SCOPES.items()) + "."]
    nested: dict[str, type[BaseModel]] = {}
    for name, spec in sorted(checks.items()):
        out += ["", *_check_page(name, spec, nested)]
    if nested:
        out += [
            "",
            "## Parameter types",
            "",
            "Structured parameters the checks above share; each is written as a mapping in the playbook.",
        ]
        done: set[str] = set()
        while len(done) < len(nested):  # a type's own fields may name further types
            for type_ in sorted(set(nested) - done):
                done.add(type_)
                model = nested[type_]
                out += ["", f"### {type_}", ""]
                if model.__doc__ and model.__doc__ is not BaseModel.__doc__:
                    out += [_paragraph(model.__doc__), ""]
                out += _parameter_table(model, nested)
    return "\n".join(out) + "\n"


def _check_page(name: str, spec: CheckSpec, nested: dict[str, type[BaseModel]]) -> list[str]:
    first, rest = _docstring(spec)
    module = spec.judge.__module__
    lines = [
        f"## {name}",
        "",
        f"Scope: **{spec.scope}**. Source: `{module.replace('.', '/')}.py`, function `{spec.judge.__name__}`.",
        "",
        first,
    ]
    if rest:
        lines += ["", rest]
    lines += ["", "Probes (commands run on each node):", ""]
    lines += _probe_lines(spec.probes, spec.params) or ["- none"]
    after = _probe_lines(spec.after, spec.params)
    if after:
        lines += ["", "Run again after the active checks, and judged on the difference:", "", *after]
    if spec.scope == "active":
        lines += ["", "Its active steps run on the nodes after these probes; see the source."]
    lines += ["", "Parameters:", ""]
    lines += _parameter_table(spec.params, nested, common=True)
    return lines


def _docstring(spec: CheckSpec) -> tuple[str, str]:
    """(first paragraph on one line, the rest as written), from the judge's docstring."""
    doc = inspect.cleandoc(spec.judge.__doc__ or "")
    paragraphs = doc.split("\n\n")
    return spec.description, "\n\n".join(p.strip("\n") for p in paragraphs[1:] if p.strip())


def _probe_lines(probes, params: type) -> list[str]:
    if not callable(probes):
        return [_probe_line(p) for p in probes]
    defaults = _default_params(params)
    if defaults is None:
        return [f"- built from the parameters by `{probes.__name__}` (`{probes.__module__}`)"]
    built = [_probe_line(p) for p in probes(defaults)]
    return [f"- built from the parameters by `{probes.__name__}`; with the defaults:", *("  " + b for b in built)]


def _default_params(params: type) -> BaseModel | None:
    """The parameter model with every default, or None where a parameter is required (or the
    defaults alone do not validate: a model that asks for at least one of several settings)."""
    if not issubclass(params, BaseModel) or any(info.is_required() for info in params.model_fields.values()):
        return None
    try:
        return params()
    except ValidationError:
        return None


def _probe_line(probe: Probe) -> str:
    argv = " ".join(_argument(a) for a in probe.argv)
    extra = "; its stdin carries a script" if probe.stdin else ""
    return f"- `{probe.name}`: `{argv}` (timeout {probe.timeout_s:g} s{extra})"


def _argument(word: str) -> str:
    if "\n" in word or len(word) > ARGUMENT_MAX:
        return f"<script, {len(word.strip().splitlines())} lines>"
    return shlex.quote(word).replace("`", "'")  # an empty argument shows as ''; a backtick would end the span


def _parameter_table(model: type, nested: dict[str, type[BaseModel]], *, common: bool = False) -> list[str]:
    rows = ["| Name | Type | Default | Constraints | Description |", "|---|---|---|---|---|"]
    for field, info in _model(model).model_fields.items():
        for found in _models(info.annotation):
            nested.setdefault(found.__name__, found)
        rows.append(
            f"| `{field}` | {_cell(_type(info.annotation))} | {_cell(_default(info))} | "
            f"{_cell(_constraints(info))} | {_cell(info.description or '')} |"
        )
    if common:
        for field, kind, default, description in COMMON:
            rows.append(
                f"| `{field}` | {_cell(kind)} | {_cell(default.removeprefix('default '))} |  | {_cell(description)} |"
            )
    return rows


def _default(info: FieldInfo) -> str:
    if info.is_required():
        return "required"
    shown = default_text(info)
    return shown if shown == LONG_DEFAULT else f"`{shown}`"


LONG_DEFAULT = "a table: see the description"
DEFAULT_MAX_CHARS = 300  # a default longer than this (gpu.perf's per-model floors) is said, not dumped


def default_text(info: FieldInfo) -> str:
    """A parameter's default as the reference shows it: its repr, or a pointer to the description
    where the repr would flood the page."""
    text = repr(info.get_default(call_default_factory=True))
    return text if len(text) <= DEFAULT_MAX_CHARS else LONG_DEFAULT


_BOUNDS = (
    ("gt", "> {}"),
    ("ge", ">= {}"),
    ("lt", "< {}"),
    ("le", "<= {}"),
    ("min_length", "length >= {}"),
    ("max_length", "length <= {}"),
)


def _constraints(info: FieldInfo) -> str:
    said = _said(info.metadata)
    for arg in typing.get_args(info.annotation):  # Optional[Annotated[...]], list[Annotated[...]]
        inner = _said(getattr(arg, "__metadata__", ()))
        if inner:
            said += [f"items ({', '.join(inner)})"] if typing.get_origin(info.annotation) is list else inner
    return ", ".join(said)


def _said(metadata) -> list[str]:
    said = []
    for meta in metadata:
        if isinstance(meta, FieldInfo):  # Annotated[int, Field(ge=1)]: the constraints are its own metadata
            said += _said(meta.metadata)
            continue
        for attribute, words in _BOUNDS:
            if getattr(meta, attribute, None) is not None:
                said.append(words.format(getattr(meta, attribute)))
        pattern = getattr(meta, "pattern", None)
        if isinstance(pattern, str):
            said.append(f"matches `{pattern}`")
        if getattr(meta, "strict", None) is True:
            said.append("strict type")
        if getattr(meta, "allow_inf_nan", None) is False:
            said.append("finite")
    return said


def _type(annotation) -> str:
    """type_name, with Annotated types read as the type they constrain and mappings named."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type(args[0])
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type(a) for a in args if a is not type(None))
    if origin is list:
        return f"list of {_type(args[0])}" if args else "list"
    if origin is dict and len(args) == 2:
        return f"mapping of {_type(args[0])} to {_type(args[1])}"
    return type_name(annotation)


def _models(annotation) -> list[type[BaseModel]]:
    """The pydantic models a parameter's type names (Ceiling, Optional[Floor], dict[str, RatePerHour])."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models(arg)]


def _paragraph(doc: str) -> str:
    return " ".join(inspect.cleandoc(doc).split("\n\n")[0].split())


def _cell(text: str) -> str:
    """Text safe inside a markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")


def _anchor(name: str) -> str:
    """GitHub's anchor for a `## name` heading: lower case, dots dropped."""
    return "".join(c for c in name.lower() if c.isalnum() or c in "-_")


def main(argv: Sequence[str] = ()) -> int:
    from nodecheck.checks import all_checks

    fmt = argv[0] if argv else "markdown"
    sys.stdout.write(render(all_checks(), fmt))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
