"""Remediation config, as an operator writes it: the action ladders (a file of their own, the shipped
profile by default) and the budgets (the gate config's `remedy:` section). Pure: files in, typed
config out; nodecheck.remedy plans and acts on it.

A ladder names the failures it is for (a check, and where it matters a cause read off the failing
verdict's observed facts: an Xid code, a pending row remap, a unit that is down) and the ordered
steps to try for them:

    ladders:
      - name: gpu-row-remap-pending
        check: gpu.health
        when: {remap_pending: true}
        steps: [reset_gpu, reboot, hold]
        again_within_h: 24     # the same GPU again within 24 h of an action for it: hold
        source: NVIDIA GPU Memory Error Management, row remapping
    otherwise: [hold]          # a failure no ladder names waits for a person

The first ladder whose check and `when` match a failure gives its steps. A unit to restart is
named by the ladder, never taken from a tool's output: the output only says which ladder applies.

Memory rules read the node's past over a window; one that matches holds a node the plan would act
on again, for a person (a node that keeps failing is a hardware case, not a repair case):

    memory:
      - name: drained-often
        drains: 3              # nodecheck drained the node 3 times within 7 days (the gate log)
        within_h: 168
      - name: ib-link-flapping
        counter: LinkDownedCounter
        rises: 3               # it rose on one port in 3 sweeps within a day (the sweep history)
        within_h: 24
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from nodecheck.config.yaml_source import Located, load_file, not_roots_word, pydantic_error
from nodecheck.core.errors import ConfigError
from nodecheck.core.model import shown
from nodecheck.judging import counter_rules, nvlink_rules

ActionKind = Literal["reset_gpu", "restart_service", "reboot", "hold"]
ACTIONS: tuple[str, ...] = ("reset_gpu", "restart_service", "reboot", "hold")
SHIPPED_PROFILE = "default"
# systemd unit names as systemctl takes them (escaped names included); never an option (no leading -)
UNIT = r"^[A-Za-z0-9][A-Za-z0-9:_.@\\-]{0,254}$"
Scalar = bool | int | str


class Step(BaseModel):
    """One rung: what to do. `unit` is restart_service's (and only its)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    action: ActionKind
    unit: str | None = Field(None, pattern=UNIT)

    @property
    def label(self) -> str:
        return f"restart_service {self.unit}" if self.action == "restart_service" else self.action


def _step(value: object) -> object:
    """'reset_gpu' | 'reboot' | 'hold' | {restart_service: UNIT} -> Step's fields."""
    if isinstance(value, str):
        if value == "restart_service":
            raise ValueError("restart_service names its unit: {restart_service: nvidia-fabricmanager.service}")
        return {"action": value}
    if isinstance(value, dict) and list(value) == ["restart_service"]:
        return {"action": "restart_service", "unit": value["restart_service"]}
    raise ValueError(
        f"a step is one of {', '.join(a for a in ACTIONS if a != 'restart_service')} or "
        f"{{restart_service: UNIT}}, got {shown(value)}"
    )


class Ladder(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]{0,63}$")
    check: str = Field(description="the check whose failure it is for: gpu.health, gpu.xid, services, ...")
    when: dict[str, Scalar | list[Scalar]] = Field(
        default_factory=dict,
        description="the failing verdict's observed facts that must match: a value, or a list of values "
        "one of which must be there (e.g. {xid: [48, 94, 95]}); an observed list (services' `down` "
        "units) matches when it holds one of them",
    )
    steps: list[Step] = Field(min_length=1)
    again_within_h: float | None = Field(
        None,
        gt=0,
        le=24 * 365,
        allow_inf_nan=False,
        description="the same failure on the same target again within this many hours of an action "
        "for it: held for a person, not tried again",
    )
    source: str = Field("", max_length=500, description="why these steps: the document they follow")

    @field_validator("steps", mode="before")
    @classmethod
    def _steps(cls, value: object) -> object:
        return [_step(v) for v in value] if isinstance(value, list) else value

    @field_validator("steps")
    @classmethod
    def _hold_last(cls, steps: list[Step]) -> list[Step]:
        actions = [s.action for s in steps]
        if "hold" in actions[:-1]:
            raise ValueError("hold ends a ladder: the steps after it would never run")
        return steps

    def matches(self, check: str, observed: Mapping[str, object]) -> bool:
        """Is a failing verdict of `check` with these observed facts this ladder's?"""
        if check != self.check:
            return False
        for key, wanted in self.when.items():
            if key not in observed:
                return False
            options = wanted if isinstance(wanted, list) else [wanted]
            seen = observed[key]
            # a list observed (services' `down` units) matches when it holds one of the options
            values = list(seen) if isinstance(seen, (list, tuple)) else [seen]
            if not any(_same(v, o) for v in values for o in options):
                return False
        return True


def _same(seen: object, wanted: Scalar) -> bool:
    """Equal, and of the same kind: True is not 1, "48" is not 48."""
    return type(seen) is type(wanted) and seen == wanted


# the counters a sweep keeps in its history (nodecheck.report.diff.KEPT_COUNTERS: those a rise of
# means something) and NVLink's: the ones a memory rule can count the rises of
MEMORY_COUNTERS: tuple[str, ...] = (
    *(
        n
        for n, info in counter_rules.COUNTERS.items()
        if info.kind in (counter_rules.FAIL_ON_INCREASE, counter_rules.RATE)
    ),
    *nvlink_rules.COUNTERS,
)


class MemoryRule(BaseModel):
    """A rule over a node's past: when it matches, the node is held for a person instead of being
    acted on again. It counts one of: nodecheck's drains of the node (`drains`, from the gate log), or
    the sweeps in which one of its ports' `counter` rose (`rises`, from the sweep history)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]{0,63}$")
    drains: int | None = Field(
        None, ge=2, le=1000, strict=True, description="nodecheck drained the node this many times within within_h"
    )
    counter: str | None = Field(
        None, description="an error counter the sweep history keeps (LinkDownedCounter, SymbolErrorCounter, crc_flit)"
    )
    rises: int | None = Field(
        None, ge=2, le=1000, strict=True, description="the counter rose on one port in this many sweeps within within_h"
    )
    within_h: float = Field(gt=0, le=24 * 365, allow_inf_nan=False, description="the window (hours)")
    source: str = Field("", max_length=500, description="why this rule: the document it follows")

    @field_validator("counter")
    @classmethod
    def _known_counter(cls, counter: str | None) -> str | None:
        if counter is not None and counter not in MEMORY_COUNTERS:
            close = difflib.get_close_matches(counter, MEMORY_COUNTERS, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ValueError(
                f"{shown(counter)} is not a counter the sweep history keeps; {hint}one of: {', '.join(MEMORY_COUNTERS)}"
            )
        return counter

    @model_validator(mode="after")
    def _one_kind(self) -> MemoryRule:
        if (self.drains is None) == (self.counter is None):
            raise ValueError(
                "a memory rule counts either drains (drains: 3) "
                "or a counter's rises (counter: LinkDownedCounter, rises: 3)"
            )
        if (self.counter is None) != (self.rises is None):
            raise ValueError(
                "a counter rule says in how many sweeps it must rise: counter: LinkDownedCounter, rises: 3"
            )
        return self

    @property
    def said(self) -> str:
        """The rule as a person reads it: 'drained 3 times within 7 days'."""
        if self.drains is not None:
            return f"drained {self.drains} times within {hours_said(self.within_h)}"
        return f"{self.counter} rose in {self.rises} sweeps within {hours_said(self.within_h)}"


def hours_said(h: float) -> str:
    return f"{h / 24:g} days" if h >= 48 and h % 24 == 0 else f"{h:g} h"


class LadderFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    version: Literal[1] = 1
    ladders: list[Ladder] = Field(default_factory=list)
    otherwise: list[Step] = Field(
        default_factory=lambda: [Step(action="hold")],
        min_length=1,
        description="the steps for a failure no ladder names (default: hold for a person)",
    )
    memory: list[MemoryRule] = Field(
        default_factory=list,
        description="rules over the node's past: one that matches holds the node rather than acting again",
    )

    @field_validator("otherwise", mode="before")
    @classmethod
    def _steps(cls, value: object) -> object:
        return [_step(v) for v in value] if isinstance(value, list) else value


@dataclass(frozen=True)
class Ladders:
    """The ladders in force, and where they came from (the report and every plan say)."""

    ladders: tuple[Ladder, ...]
    otherwise: tuple[Step, ...]
    file: str
    sha256: str = ""
    memory: tuple[MemoryRule, ...] = ()

    def for_failure(self, check: str, observed: Mapping[str, object]) -> Ladder | None:
        return next((lad for lad in self.ladders if lad.matches(check, observed)), None)


def shipped_path(name: str = SHIPPED_PROFILE) -> Path:
    return Path(str(resources.files("nodecheck.config") / "ladders" / f"{name}.yml"))


def load_ladders(path: str | Path | None = None, known_checks: Sequence[str] | None = None) -> Ladders:
    """The ladder file at `path` (None: the shipped default profile). `known_checks`: the check names
    a ladder may name (a typo would otherwise match nothing, silently)."""
    src = load_file(shipped_path() if path is None else path)
    if why := not_roots_word(src.owner_uid, src.mode):
        # its steps are what root does to a node (reset, restart, reboot): only root's word counts
        raise src.error(
            (),
            f"a ladder file says what root does to nodes, so it must be root's word; this one is {why}",
            hint=f"chown root {src.file} && chmod go-w {src.file}",
        )
    if not isinstance(src.data, dict):
        raise src.error((), "a ladder file is a mapping with a 'ladders:' list", hint=f"see {shipped_path()}")
    try:
        book = LadderFile.model_validate(src.data)
    except ValidationError as e:
        raise pydantic_error(src, (), e, model=LadderFile) from None
    _refuse_duplicates(src, book)
    if known_checks is not None:
        _refuse_unknown_checks(src, book, known_checks)
    return Ladders(tuple(book.ladders), tuple(book.otherwise), src.file, src.sha256, tuple(book.memory))


def _refuse_duplicates(src: Located, book: LadderFile) -> None:
    sections: tuple[tuple[str, Sequence[Ladder | MemoryRule]], ...] = (
        ("ladders", book.ladders),
        ("memory", book.memory),
    )
    for section, items in sections:
        seen: set[str] = set()
        for i, item in enumerate(items):
            if item.name in seen:
                what = "ladder" if section == "ladders" else "memory rule"
                raise src.error((section, i, "name"), f"{what} {item.name!r} is named twice", hint="rename one")
            seen.add(item.name)


def _refuse_unknown_checks(src: Located, book: LadderFile, known: Sequence[str]) -> None:
    for i, ladder in enumerate(book.ladders):
        if ladder.check not in known:
            close = difflib.get_close_matches(ladder.check, list(known), n=1)
            raise src.error(
                ("ladders", i, "check"),
                f"ladder {ladder.name!r}: unknown check {shown(ladder.check)}",
                hint=(f"did you mean {close[0]!r}? " if close else "") + "`nodecheck checks` lists every check",
            )


class RemedySettings(BaseModel):
    """The gate config's `remedy:` section: the site's budgets. Every key has a safe default."""

    model_config = ConfigDict(extra="forbid")
    ladders: str | None = Field(None, description="a ladder file (default: the shipped profile)")
    max_nodes: int = Field(
        2, ge=1, le=100_000, strict=True, description="nodes in remediation at once, the whole cluster"
    )
    max_share: float | None = Field(
        None,
        gt=0,
        le=1,
        allow_inf_nan=False,
        description="and at most this share of each partition the node is in (of the cluster for a node "
        "in none; at least one node)",
    )
    max_actions: int = Field(
        2, ge=1, le=100, strict=True, description="actions on one node within window_h; then held for a person"
    )
    window_h: float = Field(168, gt=0, le=24 * 365, allow_inf_nan=False, description="max_actions' window (hours)")
    act: bool = Field(
        False,
        description="carry out the plan (default: observe, print and log it only); --observe on the command line wins",
    )
    acceptance: dict[Literal["reset_gpu", "restart_service", "reboot"], str] = Field(
        default_factory=dict,
        description="per action, a playbook (name or path) whose checks must pass too before the node "
        "returns, beside the health playbook: e.g. {reset_gpu: gpu-after-reset.yml} with gpu.dcgm_diag "
        "level 2 and gpu.perf; run on the drained node with its disruptive checks allowed",
    )
    reproof_s: float = Field(
        180,
        gt=0,
        le=3600,
        allow_inf_nan=False,
        description="after an action, how long the failing node may take to pass again (a restarted "
        "service coming up): the checks re-run every 10 s until it passes or this runs out",
    )
    bug_report_s: float = Field(
        300,
        ge=0,
        le=3600,
        allow_inf_nan=False,
        description="evidence: nvidia-bug-report.sh's time bound (0: not run) before the first action",
    )
    state_dir: str = Field(
        "/var/lib/nodecheck/remedy",
        pattern=r"^/[^\x00-\x1f\x7f]*$",
        description="where each node's action record is kept (shared storage for nodes that reinstall on boot)",
    )


def known_check_names() -> list[str]:
    """Every registered check, for load_ladders' typo check (imported late: the registry fills on import)."""
    from nodecheck.checks import all_checks

    return list(all_checks())


def require_ladder_file(path: str) -> None:
    """A named ladder file must exist: a typo must not fall back to the shipped profile."""
    if not Path(path).is_file():
        raise ConfigError(f"ladder file {shown(path)} not found", file="--ladders", hint="give a path to a YAML file")
