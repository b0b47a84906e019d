"""The checks reference, rendered from the registry: the text `nodecheck checks` prints, the
markdown page docs/checks.md (`nodecheck checks --format markdown > docs/checks.md`), the JSON of
`nodecheck checks --format json` and the page `nodecheck explain CHECK` prints.

Each registered check is read once into a CheckReference (the judge's docstring, its probes, its
pydantic parameter model, its example messages and recorded outputs from app/checks_examples.py),
and every format renders that one model, so the forms cannot disagree and cannot say something the
code does not do; a test fails when docs/checks.md is older than the registry
(tests/app/test_checks_reference.py).
"""

from __future__ import annotations

import inspect
import json
import re
import shlex
import sys
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticSerializationError, to_jsonable_python

from nodecheck.app.checks_examples import ACTIVE_TOOLS, CORPUS, EXAMPLES, RUNNER_EXAMPLES
from nodecheck.core.model import Probe, Status
from nodecheck.core.registry import CheckSpec

FORMATS = ("text", "markdown", "json")
JSON_VERSION = 1  # the schema of `nodecheck checks --format json`
CORPUS_ROOT = "tests/data"  # the recorded outputs; their provenance: tests/data/SOURCES.md
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

# the node tools a probe's command or script may call, as an operator installs them; found as whole
# words in the probe's argv and stdin ("where present": a script may try several, or none)
NODE_TOOLS = (
    "chronyc", "dcgmi", "dmesg", "docker", "dpkg-query", "enroot", "findmnt", "getconf", "ib_write_bw",
    "ibdev2netdev", "ibstat", "ibstatus", "ibv_devinfo", "journalctl", "ldconfig", "lscpu", "lsmod",
    "lspci", "mpirun", "nmcli", "ntpq", "nvbandwidth", "nvidia-smi", "ofed_info", "perfquery", "podman",
    "ps", "python3", "rdma", "rpm", "sha256sum", "show_gids", "srun", "sysctl", "systemctl",
    "timedatectl", "uname", "all_reduce_perf", "all_gather_perf", "reduce_scatter_perf", "alltoall_perf",
)  # fmt: skip


# ---- the model ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProbeReference:
    """One command a check runs on each node, as the reference shows it."""

    name: str
    argv: tuple[str, ...]  # as run; a script argument is shown by its size (command)
    timeout_s: float
    stdin_script: bool  # its stdin carries a script
    tools: tuple[str, ...]  # NODE_TOOLS named in its argv or stdin

    @property
    def command(self) -> str:
        return " ".join(_argument(a) for a in self.argv)


@dataclass(frozen=True)
class ProbesReference:
    """A check's probes: listed, or built from the parameters (then listed with the defaults, when
    the defaults alone validate)."""

    probes: tuple[ProbeReference, ...]
    built_by: str = ""  # "function (module)" when the probes are a function of the params
    known: bool = True  # False: built from parameters that have no default; not listed


@dataclass(frozen=True)
class ParamReference:
    name: str
    type: str  # "number", "list of text", "InfiniBand|Ethernet|any"
    required: bool
    default: str  # default_text (a repr, or LONG_DEFAULT); "" when required
    default_value: object  # the default as a JSON value (None when required or not representable)
    constraints: str  # ">= 0, strict type"
    bounds: Mapping[str, object]  # {"ge": 0}: the numeric and length bounds, for machines
    description: str


@dataclass(frozen=True)
class Example:
    status: Status
    message: str


@dataclass(frozen=True)
class CheckReference:
    """Everything the reference says about one registered check."""

    name: str
    scope: str
    description: str  # first paragraph of the judge's docstring, one line
    details: str  # the docstring's other paragraphs, as written
    module: str  # "nodecheck.checks.ib"
    function: str  # "ports"
    probes: ProbesReference
    after: ProbesReference  # run again after the active checks (before/after pairs)
    params: tuple[ParamReference, ...]
    nested: tuple[type[BaseModel], ...]  # structured parameter types the params name (markdown lists them)
    examples: tuple[Example, ...]  # per status the judge gives, most healthy first
    corpus: tuple[str, ...]  # directories of CORPUS_ROOT the check is tested on
    template: bool
    active_tools: tuple[str, ...] = ()  # what an active check's own steps run (ACTIVE_TOOLS)

    @property
    def source(self) -> str:
        return f"{self.module.replace('.', '/')}.py"

    @property
    def tools(self) -> tuple[str, ...]:
        probed = {t for p in (*self.probes.probes, *self.after.probes) for t in p.tools}
        return tuple(sorted(probed | set(self.active_tools)))

    @property
    def statuses(self) -> tuple[Status, ...]:
        return tuple(dict.fromkeys(e.status for e in self.examples))


def reference(spec: CheckSpec) -> CheckReference:
    """The reference of one registered check."""
    _, details = _docstring(spec)
    nested: dict[str, type[BaseModel]] = {}
    params = tuple(_param(field, info, nested) for field, info in _model(spec.params).model_fields.items())
    return CheckReference(
        name=spec.name,
        scope=spec.scope,
        description=spec.description,
        details=details,
        module=spec.judge.__module__,
        function=spec.judge.__name__,
        probes=_probes(spec.probes, spec.params),
        after=_probes(spec.after, spec.params),
        params=params,
        nested=tuple(nested.values()),
        examples=tuple(Example(status, message) for status, message in EXAMPLES.get(spec.name, ())),
        corpus=CORPUS.get(spec.name, ()),
        template=spec.template,
        active_tools=ACTIVE_TOOLS.get(spec.name, ()),
    )


def references(checks: Mapping[str, CheckSpec]) -> list[CheckReference]:
    """Every check's reference, in name order."""
    return [reference(spec) for _, spec in sorted(checks.items())]


def _param(field: str, info: FieldInfo, nested: dict[str, type[BaseModel]]) -> ParamReference:
    for found in _models(info.annotation):
        nested.setdefault(found.__name__, found)
    return ParamReference(
        name=field,
        type=_type(info.annotation),
        required=info.is_required(),
        default="" if info.is_required() else default_text(info),
        default_value=None if info.is_required() else _json_value(info),
        constraints=_constraints(info),
        bounds=_bounds(info.metadata, info.annotation),
        description=info.description or "",
    )


def _json_value(info: FieldInfo) -> object:
    try:
        return to_jsonable_python(info.get_default(call_default_factory=True))
    except PydanticSerializationError:  # a default no JSON can hold: default_text says it
        return None


def _probes(probes, params: type) -> ProbesReference:
    if not callable(probes):
        return ProbesReference(tuple(_probe(p) for p in probes))
    built_by = f"{probes.__name__} ({probes.__module__})"
    defaults = _default_params(params)
    if defaults is None:
        return ProbesReference((), built_by, known=False)
    return ProbesReference(tuple(_probe(p) for p in probes(defaults)), built_by)


def _probe(probe: Probe) -> ProbeReference:
    text = " ".join((*probe.argv, probe.stdin or ""))
    tools = tuple(t for t in NODE_TOOLS if re.search(rf"(?<![\w.-]){re.escape(t)}(?![\w.-])", text))
    return ProbeReference(probe.name, probe.argv, probe.timeout_s, bool(probe.stdin), tools)


def render(checks: Mapping[str, CheckSpec], fmt: str) -> str:
    """The reference of `checks` as "text" (what `nodecheck checks` prints), "markdown"
    (docs/checks.md) or "json" (`nodecheck checks --format json`)."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    refs = references(checks)
    if fmt == "text":
        return _text(refs)
    if fmt == "markdown":
        return _markdown(refs)
    return json.dumps(as_json(refs), indent=2, ensure_ascii=False) + "\n"


# ---- text ---------------------------------------------------------------------------------------


def _text(refs: Sequence[CheckReference]) -> str:
    lines = []
    for ref in refs:
        lines.append(f"{ref.name}  ({ref.scope})  {ref.description}")
        lines += _text_params(ref.params)
    return "\n".join(lines) + "\n"


def _text_params(params: Sequence[ParamReference]) -> list[str]:
    lines = []
    for p in params:
        default = "required" if p.required else f"default {p.default}"
        lines.append(f"    {p.name:<16} {p.type:<28} {default:<24} {p.description}".rstrip())
    for field, kind, default, description in COMMON:
        lines.append(f"    {field:<16} {kind:<28} {default:<24} {description}")
    return lines


def explain(ref: CheckReference) -> str:
    """The page `nodecheck explain CHECK` prints: what the check judges and why, its parameters, the
    commands and tools it runs on each node, each status it gives with an example, its sources."""
    out = [f"{ref.name}  ({ref.scope}: {SCOPES.get(ref.scope, '')})", "", ref.description]
    if ref.details:
        out += ["", ref.details]
    if ref.template:
        out += ["", f"A template: the playbook key `{ref.name}.<label>` runs it under that name."]
    out += ["", "Parameters (the playbook block under its name):"]
    for p in ref.params:
        out.append(f"  {p.name}: {p.type}, " + ("required" if p.required else f"default {p.default}"))
        if p.constraints:
            out.append(f"      bounds: {p.constraints}")
        if p.description:
            out.append(f"      {p.description}")
    for field, kind, default, description in COMMON:
        out += [f"  {field}: {kind}, {default}", f"      {description}"]
    out += ["", "Runs on each node:", *_text_probes(ref.probes)]
    if ref.after.probes or ref.after.built_by:
        out += ["", "Runs again after the active checks (judged on the difference):", *_text_probes(ref.after)]
    if ref.scope == "active":
        tools = f": {', '.join(ref.active_tools)}" if ref.active_tools else ""
        out.append(f"  and its active steps, on and between the nodes, after every node's probes came back{tools}")
    out += ["", "Tools it calls (where present): " + (", ".join(ref.tools) or "none named (see the commands)")]
    out += ["", "Statuses it gives, with an example message from its tests:"]
    width = max((len(e.status.name) for e in (*ref.examples, *_runner_examples())), default=0)
    out += [f"  {e.status.name:<{width}}  {e.message}" for e in ref.examples] or ["  (no examples recorded)"]
    out += ["", "Any check can also be, from the runner (the node or its probe, not the judge):"]
    out += [f"  {e.status.name:<{width}}  {e.message}" for e in _runner_examples()]
    out += ["", "Sources:", f"  code: {ref.source}, function {ref.function}"]
    if ref.corpus:
        dirs = ", ".join(f"{CORPUS_ROOT}/{d}/" for d in ref.corpus)
        out.append(f"  tested on recorded outputs: {dirs} (provenance: {CORPUS_ROOT}/SOURCES.md)")
    out.append("  reference: docs/checks.md#" + _anchor(ref.name))
    return "\n".join(out) + "\n"


def _text_probes(probes: ProbesReference) -> list[str]:
    if not probes.known:
        return [f"  built from the parameters by {probes.built_by}"]
    lines = [f"  (built from the parameters by {probes.built_by}; with the defaults:)"] if probes.built_by else []
    for p in probes.probes:
        script = "; its stdin carries a script" if p.stdin_script else ""
        lines.append(f"  {p.name}: {p.command}  (timeout {p.timeout_s:g} s{script})")
    return lines or ["  none"]


def _runner_examples() -> tuple[Example, ...]:
    return tuple(Example(status, message) for status, message in RUNNER_EXAMPLES)


# ---- json ---------------------------------------------------------------------------------------


def as_json(refs: Sequence[CheckReference]) -> dict:
    """The document `nodecheck checks --format json` prints."""
    return {
        "version": JSON_VERSION,
        "common_params": [
            {"name": field, "type": kind, "default": default, "description": description}
            for field, kind, default, description in COMMON
        ],
        "runner_statuses": [_example_json(e) for e in _runner_examples()],
        "checks": [_check_json(ref) for ref in refs],
    }


def _check_json(ref: CheckReference) -> dict:
    return {
        "name": ref.name,
        "scope": ref.scope,
        "description": ref.description,
        "details": ref.details,
        "template": ref.template,
        "source": {"path": ref.source, "module": ref.module, "function": ref.function},
        "params": [
            {
                "name": p.name,
                "type": p.type,
                "required": p.required,
                "default": p.default_value,
                "default_text": None if p.required else p.default,
                "constraints": p.constraints,
                "bounds": dict(p.bounds),
                "description": p.description,
            }
            for p in ref.params
        ],
        "probes": _probes_json(ref.probes),
        "after_probes": _probes_json(ref.after),
        "tools": list(ref.tools),
        "active_tools": list(ref.active_tools),
        "statuses": [_example_json(e) for e in ref.examples],
        "corpus": [f"{CORPUS_ROOT}/{d}" for d in ref.corpus],
    }


def _probes_json(probes: ProbesReference) -> dict:
    return {
        "built_by": probes.built_by or None,
        "known": probes.known,
        "list": [
            {
                "name": p.name,
                "command": p.command,
                "timeout_s": p.timeout_s,
                "stdin_script": p.stdin_script,
                "tools": list(p.tools),
            }
            for p in probes.probes
        ],
    }


def _example_json(e: Example) -> dict:
    return {"status": e.status.value, "example": e.message}


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


def _markdown(refs: Sequence[CheckReference]) -> str:
    out = [
        "# Checks reference",
        "",
        "<!-- Generated from the check registry; do not edit. Regenerate with:",
        f"     {REGENERATE} -->",
        "",
        "Every check nodecheck knows, as registered in `nodecheck/checks/`. A playbook lists checks by name "
        "under `checks:`, each with the parameters below (plus `timeout_s` and `enabled`, which every check "
        "takes). A check `a.b` is the function `b` in `nodecheck/checks/a.py` (or in `a_x.py` when `b` "
        "starts with `x`). `nodecheck checks` prints the same list as text, `nodecheck checks --format json` "
        "as JSON, and `nodecheck explain CHECK` one check's page.",
        "",
        "| Check | Scope | What it judges |",
        "|---|---|---|",
    ]
    for ref in refs:
        out.append(f"| [`{ref.name}`](#{_anchor(ref.name)}) | {ref.scope} | {_cell(ref.description)} |")
    out += ["", "Scopes: " + "; ".join(f"**{scope}** {what}" for scope, what in SCOPES.items()) + "."]
    out += [
        "",
        "Besides the statuses each check lists below, the runner gives any check these, from the node "
        "or its probe rather than the judge:",
        "",
        *_status_table(_runner_examples()),
    ]
    nested: dict[str, type[BaseModel]] = {}
    for ref in refs:
        out += ["", *_check_page(ref)]
        for model in ref.nested:
            nested.setdefault(model.__name__, model)
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
                out += _parameter_table([_param(field, info, nested) for field, info in model.model_fields.items()])
    return "\n".join(out) + "\n"


def _check_page(ref: CheckReference) -> list[str]:
    lines = [
        f"## {ref.name}",
        "",
        f"Scope: **{ref.scope}**. Source: `{ref.source}`, function `{ref.function}`.",
        "",
        ref.description,
    ]
    if ref.details:
        lines += ["", ref.details]
    lines += ["", "Probes (commands run on each node):", ""]
    lines += _probe_lines(ref.probes) or ["- none"]
    after = _probe_lines(ref.after)
    if after:
        lines += ["", "Run again after the active checks, and judged on the difference:", "", *after]
    if ref.scope == "active":
        lines += ["", "Its active steps run on the nodes after these probes; see the source."]
    if ref.tools:
        lines += ["", "Tools its probes call (where present): " + ", ".join(f"`{t}`" for t in ref.tools) + "."]
    lines += ["", "Parameters:", ""]
    lines += _parameter_table(ref.params, common=True)
    if ref.examples:
        lines += ["", "Statuses, each with an example message from its tests:", "", *_status_table(ref.examples)]
    if ref.corpus:
        dirs = ", ".join(f"`{CORPUS_ROOT}/{d}/`" for d in ref.corpus)
        lines += ["", f"Tested on the recorded outputs in {dirs} (provenance: `{CORPUS_ROOT}/SOURCES.md`)."]
    return lines


def _status_table(examples: Sequence[Example]) -> list[str]:
    return ["| Status | Example message |", "|---|---|"] + [
        f"| {e.status.name} | {_cell(e.message)} |" for e in examples
    ]


def _docstring(spec: CheckSpec) -> tuple[str, str]:
    """(first paragraph on one line, the rest as written), from the judge's docstring."""
    doc = inspect.cleandoc(spec.judge.__doc__ or "")
    paragraphs = doc.split("\n\n")
    return spec.description, "\n\n".join(p.strip("\n") for p in paragraphs[1:] if p.strip())


def _probe_lines(probes: ProbesReference) -> list[str]:
    if not probes.known:
        return [f"- built from the parameters by `{probes.built_by.replace(' (', '` (`').rstrip(')')}`)"]
    built = [_probe_line(p) for p in probes.probes]
    if not probes.built_by:
        return built
    function = probes.built_by.split(" ", 1)[0]
    return [f"- built from the parameters by `{function}`; with the defaults:", *("  " + b for b in built)]


def _default_params(params: type) -> BaseModel | None:
    """The parameter model with every default, or None where a parameter is required (or the
    defaults alone do not validate: a model that asks for at least one of several settings)."""
    if not issubclass(params, BaseModel) or any(info.is_required() for info in params.model_fields.values()):
        return None
    try:
        return params()
    except ValidationError:
        return None


def _probe_line(probe: ProbeReference) -> str:
    extra = "; its stdin carries a script" if probe.stdin_script else ""
    return f"- `{probe.name}`: `{probe.command}` (timeout {probe.timeout_s:g} s{extra})"


def _argument(word: str) -> str:
    if "\n" in word or len(word) > ARGUMENT_MAX:
        return f"<script, {len(word.strip().splitlines())} lines>"
    return shlex.quote(word).replace("`", "'")  # an empty argument shows as ''; a backtick would end the span


def _parameter_table(params: Sequence[ParamReference], *, common: bool = False) -> list[str]:
    rows = ["| Name | Type | Default | Constraints | Description |", "|---|---|---|---|---|"]
    for p in params:
        rows.append(
            f"| `{p.name}` | {_cell(p.type)} | {_cell(_default(p))} | {_cell(p.constraints)} | {_cell(p.description)} |"
        )
    if common:
        for field, kind, default, description in COMMON:
            rows.append(
                f"| `{field}` | {_cell(kind)} | {_cell(default.removeprefix('default '))} |  | {_cell(description)} |"
            )
    return rows


def _default(p: ParamReference) -> str:
    if p.required:
        return "required"
    return p.default if p.default == LONG_DEFAULT else f"`{p.default}`"


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


def _bounds(metadata, annotation=None) -> dict[str, object]:
    """A parameter's numeric and length bounds as {"ge": 0, "max_length": 64}, for machines; a union's
    members' too (`Annotated[int, Field(ge=0)] | Literal["fleet"]`: ib.ports' expected_ports)."""
    found: dict[str, object] = {}
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found.update(_bounds(getattr(arg, "__metadata__", ())))
    for meta in metadata:
        if isinstance(meta, FieldInfo):
            found.update(_bounds(meta.metadata))
            continue
        for attribute, _ in _BOUNDS:
            value = getattr(meta, attribute, None)
            if value is not None:
                found[attribute] = value
    return found


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
