"""playbooks/*.yml → Playbook: which checks run, with validated parameters, timeouts and a deadline."""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from nodecheck.checks import checks_named
from nodecheck.config.gate_settings import GateSettings
from nodecheck.config.yaml_source import FINITE_HINT, Located, load_file, non_finite, pydantic_error, shown
from nodecheck.core.errors import ConfigError
from nodecheck.core.model import Node, Probe
from nodecheck.core.registry import CheckSpec, ParamsT

DEFAULT_DEADLINE_S = 300.0  # a pre-job check that takes longer is not pre-job
# Upper bounds, so a typo (1e10) or .inf is an error at load time, not an OverflowError when the
# runner adds it to the clock: a day is far beyond any pre-job check or probe.
MAX_DEADLINE_S = 86_400.0
MAX_TIMEOUT_S = 86_400.0
# Shipped playbooks: playbooks/ beside the package in a source checkout; installed, pyproject maps
# them into the package as nodecheck/playbooks/.
_PACKAGE = Path(__file__).resolve().parents[1]
SHIPPED = next(
    (p for p in (_PACKAGE / "playbooks", _PACKAGE.parent / "playbooks") if p.is_dir()), _PACKAGE / "playbooks"
)


class Select(BaseModel):
    model_config = ConfigDict(extra="forbid")
    labels: list[str] = []  # a node runs the playbook if it has all of them


class PlaybookFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    version: Literal[1] = 1
    description: str = ""
    # strict: `deadline_s: true` is not 1 s; a YAML int (120) is still accepted for a float
    deadline_s: float = Field(DEFAULT_DEADLINE_S, gt=0, le=MAX_DEADLINE_S, allow_inf_nan=False, strict=True)
    select: Select = Select()
    include: list[str] = []  # pins files (nodecheck baseline), relative to this file
    gate: GateSettings = GateSettings()  # Slurm gate / sweep drain policy (nodecheck.gate.decide)
    checks: dict[str, dict | None]


class IncludeFile(BaseModel):
    """A file a playbook includes: checks blocks only (what `nodecheck baseline` writes)."""

    model_config = ConfigDict(extra="forbid")
    version: Literal[1] = 1
    description: str = ""
    checks: dict[str, dict | None]


class CheckOptions(BaseModel):
    """Keys every check block accepts besides its own parameters."""

    model_config = ConfigDict(extra="allow")
    timeout_s: float | None = Field(
        None, gt=0, le=MAX_TIMEOUT_S, allow_inf_nan=False, strict=True
    )  # overrides each of the check's probe timeouts
    enabled: bool = True


@dataclass(frozen=True)
class PlannedCheck(Generic[ParamsT]):
    spec: CheckSpec[ParamsT]
    params: ParamsT  # a model validated from the block; job-check's JobContext
    probes: tuple[Probe, ...]
    after: tuple[Probe, ...] = ()  # run after the active checks (spec.after)


@dataclass(frozen=True)
class Playbook:
    name: str
    path: str
    sha256: str
    description: str
    deadline_s: float
    select_labels: frozenset[str]
    checks: tuple[PlannedCheck, ...]
    includes: tuple[tuple[str, str], ...] = ()  # (path, sha256) of each pins file, in load order
    gate: GateSettings = dataclasses.field(default_factory=GateSettings)
    job_env_owner: int | None = None  # the uid owning the --job-env file as it was read (None: no file)

    def selects(self, node: Node) -> bool:
        return self.select_labels <= node.labels


def search_path() -> list[Path]:
    extra = [Path(p) for p in os.environ.get("NODECHECK_PLAYBOOK_PATH", "").split(":") if p]
    return extra + [Path("playbooks"), Path("/etc/nodecheck/playbooks"), SHIPPED]


def resolve(name_or_path: str) -> Path:
    """A path if it looks like one, else the first playbooks/<name>.yml on the search path."""
    if "/" in name_or_path or name_or_path.endswith((".yml", ".yaml")):
        return Path(name_or_path)
    for folder in search_path():
        candidate = folder / f"{name_or_path}.yml"
        if candidate.is_file():
            return candidate
    known = sorted({p.stem for d in search_path() if d.is_dir() for p in d.glob("*.yml")})
    close = difflib.get_close_matches(name_or_path, known, n=1)
    raise ConfigError(
        f"no playbook named {shown(name_or_path)}",
        file="--playbook",
        hint=(f"did you mean {close[0]!r}? " if close else "")
        + f"shipped playbooks: {', '.join(known) or 'none'}; or give a path",
    )


def load_playbook(name_or_path: str, pins: tuple[str, ...] = (), job_env: str | None = None) -> Playbook:
    """`pins`: more include files from the command line (`--pins`), relative to the current
    directory, so a shipped profile can take an operator's pins unchanged. `job_env`: a KEY=VALUE
    file (`--job-env`) with the environment the job will run with; its values go over the `env`
    parameter of every check that takes one (nccl.env, nccl.allreduce_*)."""
    path = resolve(name_or_path)
    src = load_file(path)
    if src.data is None:
        raise src.error(
            (), "empty file: a playbook is a mapping with a 'checks:' key", hint="see playbooks/default.yml"
        )
    if not isinstance(src.data, dict):
        raise src.error((), "a playbook is a mapping with a 'checks:' key", hint="see playbooks/default.yml")
    try:
        book = PlaybookFile.model_validate(src.data)
    except ValidationError as e:
        raise pydantic_error(src, (), e, model=PlaybookFile) from None
    _refuse_non_finite(src, (), book.gate, root=("gate",))
    blocks: dict[str, list[tuple[Located, dict]]] = {}
    for name, block in book.checks.items():
        blocks.setdefault(name, []).append((src, block or {}))
    digest = hashlib.sha256(src.sha256.encode())
    for pin in pins:
        if not Path(pin).is_file():
            raise ConfigError(
                f"pins file {shown(pin)} not found",
                file="--pins",
                hint="`nodecheck baseline hosts.yml > pins.yml` writes one",
            )
    extra = [(i, str(Path(p).resolve())) for i, p in enumerate(pins)]
    pinned: dict[tuple[str, str], tuple[Located, object]] = {}
    included_files: list[tuple[str, str]] = []
    for index, included in [*enumerate(book.include), *extra]:
        inc = _load_include(src, path, index, included, listed={n: b or {} for n, b in book.checks.items()})
        digest.update(inc.sha256.encode())  # the report's sha256 changes when a pin file does
        included_files.append((inc.file, inc.sha256))
        for name, block in inc.data["checks"].items():
            for key, value in (block or {}).items():
                # two pin files that disagree: which one is right is the operator's call, not ours
                if (name, key) in pinned and pinned[(name, key)][1] != value:
                    other = pinned[(name, key)][0]
                    raise inc.error(
                        ("checks", name, key),
                        f"{name}.{key} is pinned to {shown(value)} here and to "
                        f"{shown(pinned[(name, key)][1])} in {other.file}",
                        hint="keep one pins file per fleet, or remove the stale pin",
                    )
                pinned[(name, key)] = (inc, value)
            # pin files come before the playbook's own block: the playbook's keys win
            parts = blocks.setdefault(name, [])
            parts.insert(len(parts) - 1 if name in book.checks else len(parts), (inc, block or {}))
    env, job_env_owner = None, None
    if job_env is not None:
        from nodecheck.config.job_env import read_job_env

        env_file = read_job_env(job_env)  # read once: its variables, digest and owner are one file's
        env, job_env_owner = env_file.env, env_file.owner_uid
        included_files.append((str(Path(job_env).resolve()), env_file.sha256))
        digest.update(included_files[-1][1].encode())
    checks = tuple(c for c in (_plan_check(name, parts, env) for name, parts in blocks.items()) if c)
    if not checks:
        raise src.error(("checks",), "no enabled checks", hint="list at least one check; `nodecheck checks` shows them")
    if env is not None and not any("env" in c.spec.params.model_fields for c in checks):
        raise ConfigError(
            f"playbook {path} has no check that takes a job environment",
            file="--job-env",
            hint="add nccl.env or an nccl.allreduce_* check to the playbook, or drop --job-env",
        )
    return Playbook(
        name=path.stem,
        path=str(path),
        sha256=digest.hexdigest() if book.include or pins or env is not None else src.sha256,
        description=book.description,
        deadline_s=book.deadline_s,
        select_labels=frozenset(book.select.labels),
        checks=checks,
        includes=tuple(included_files),
        gate=book.gate,
        job_env_owner=job_env_owner,
    )


def split_selected(playbook: Playbook, nodes: list[Node]) -> tuple[list[Node], list[Node]]:
    """(the nodes the playbook's `select:` labels take, the ones they leave out), each in order.

    Lets the caller tell an operator that a node named with --nodes will not be checked."""
    selected = [n for n in nodes if playbook.selects(n)]
    excluded = [n for n in nodes if not playbook.selects(n)]
    return selected, excluded


# An included file only pins values (what `nodecheck baseline` writes); it must not be able to turn a
# check off or loosen a threshold behind the playbook's back.
INCLUDE_KEYS = {"expect", "image", "runtime", "reference"}  # reference: gpu.sdc's pinned checksums


def _load_include(src: Located, path: Path, index: int, included: str, listed: dict[str, dict]) -> Located:
    target = (path.parent / included) if not Path(included).is_absolute() else Path(included)
    if not target.is_file():
        raise src.error(
            ("include", index),
            f"included file {shown(included)} not found (looked at {shown(str(target))})",
            hint="paths are relative to the playbook; `nodecheck baseline` writes one",
        )
    inc = load_file(target)
    if not isinstance(inc.data, dict):
        raise inc.error(
            (), "an included file is a mapping with a 'checks:' key", hint="as `nodecheck baseline` writes it"
        )
    try:
        IncludeFile.model_validate(inc.data)
    except ValidationError as e:
        raise pydantic_error(inc, (), e, model=IncludeFile) from None
    for name, block in inc.data["checks"].items():
        for key, value in block.items() if isinstance(block, dict) else ():
            if key not in INCLUDE_KEYS:
                raise inc.error(
                    ("checks", name, key),
                    f"an included file may only pin values: {shown(key)} is "
                    f"not one of {', '.join(sorted(INCLUDE_KEYS))}",
                    hint="set thresholds, drift, timeout_s and enabled in the playbook itself",
                )
            # for a check the playbook lists, the pin must be about the same image the same way (it
            # must not, say, turn a digest comparison into enroot's presence-only check)
            own = listed.get(name)
            mine = None if own is None else own.get(key, "auto" if key == "runtime" else None)
            if key in ("image", "runtime") and mine is not None and mine != value:
                raise inc.error(
                    ("checks", name, key),
                    f"{name}.{key} is {shown(value)} here but {shown(mine)} in the "
                    "playbook: these pins are for another image or runtime",
                    hint="write the pins again with `nodecheck baseline --image ... --runtime ...`",
                )
    return inc


def _plan_check(
    name: str, parts: list[tuple[Located, dict]], job_env: dict[str, str] | None = None
) -> PlannedCheck | None:
    """`parts`: the check's blocks, included files first, the playbook's last (its keys win).
    `job_env`: the --job-env file's variables, over the block's `env` where the check takes one."""
    registry = checks_named([name])  # its module only: the node Prolog's start-up
    loc = ("checks", name)
    src = parts[-1][0]
    spec, label = _resolve(name, registry, src, loc)
    block: dict = {}
    origin: dict[str, Located] = {}
    for part_src, part in parts:
        if not isinstance(part, dict):
            raise part_src.error(
                loc, f"check {name}: expected a mapping of parameters", hint="e.g. {drift: fail}, or nothing"
            )
        block.update(part)
        origin.update(dict.fromkeys(part, part_src))
    if job_env is not None and "job_env" in spec.params.model_fields:
        block["job_env"] = job_env  # kept apart from the operator's `env`: a test trusts it less (probes/env_policy)
    elif job_env is not None and "env" in spec.params.model_fields:
        mine = block.get("env", {})  # (`env:` left empty or a list is the block's error, job env or not)
        block["env"] = {**mine, **job_env} if isinstance(mine, dict) else mine  # a bad block still fails validation
    try:
        options = CheckOptions.model_validate(block)
        params = spec.params.model_validate(options.model_extra or {})
    except ValidationError as e:
        first = e.errors()[0]["loc"] if e.errors() else ()
        where = origin.get(str(first[0]), src) if first else src
        raise pydantic_error(where, loc, e, what=f" (check {name})", model=spec.params) from None
    for key, value in block.items():  # each key at the line of the file that set it
        _refuse_non_finite(
            origin.get(key, src),
            loc,
            {key: value if key in ("timeout_s", "enabled") else getattr(params, key, value)},
            f" (check {name})",
        )
    if not options.enabled:
        return None
    probes, after = spec.probes_for(params), spec.after_probes_for(params)
    if label is not None:  # each label its own probe: probes are deduplicated by name across checks
        probes = tuple(dataclasses.replace(p, name=f"{p.name}:{label}") for p in probes)
        after = tuple(dataclasses.replace(p, name=f"{p.name}:{label}") for p in after)
    if options.timeout_s is not None:
        probes = tuple(dataclasses.replace(p, timeout_s=options.timeout_s) for p in probes)
        after = tuple(dataclasses.replace(p, timeout_s=options.timeout_s) for p in after)
    return PlannedCheck(spec, params, probes, after)


# The label of a template check (`command.<label>`): it names results, drain reasons, history and the
# capture file, so it stays short and plain.
TEMPLATE_LABEL = re.compile(r"[a-z0-9_-]{1,64}")


def _resolve(name: str, registry: Mapping[str, CheckSpec], src: Located, loc: tuple) -> tuple[CheckSpec, str | None]:
    """The spec a playbook key plans, and the label when the key is `<template>.<label>`: the
    template's spec under the key's own name (registry.CheckSpec.template)."""
    family, dot, label = name.partition(".")
    template = registry.get(family)
    if dot and name not in registry and template is not None and template.template:
        if not TEMPLATE_LABEL.fullmatch(label):
            raise src.error(
                loc,
                f"{shown(name)}: the label after {family}. is 1-64 of a-z, 0-9, _ and -",
                hint=f"e.g. {family}.nfs_home",
            )
        return dataclasses.replace(template, name=name), label
    if name in registry and registry[name].template:
        raise src.error(
            loc,
            f"{name} is written {name}.<label>, one entry per command",
            hint=f"e.g. {name}.nfs_home: {{argv: [mountpoint, -q, /home]}}",
        )
    if name not in registry:
        close = difflib.get_close_matches(name, list(registry), n=1)
        raise src.error(
            loc,
            f"unknown check {shown(name)}",
            hint=(f"did you mean {close[0]!r}? " if close else "") + "`nodecheck checks` lists every check",
        )
    return registry[name], None


def _refuse_non_finite(src: Located, base: tuple, value: object, what: str = "", root: tuple = ()) -> None:
    """A NaN or infinity anywhere in validated settings is a ConfigError at its line: NaN compares
    false with everything, so a NaN bound passes every value and would resume a drained node."""
    found = non_finite(value, root)
    if found is not None:
        where, number = found
        loc = base + where
        dotted = ".".join(str(part) for part in loc)
        raise src.error(loc, f"{dotted}: Input should be a finite number, got {number}{what}", hint=FINITE_HINT)
