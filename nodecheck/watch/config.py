"""The watcher's settings: where the job's progress shows, the bounds that tell a hang from work, alerts.

Read from a YAML file (`--config FILE`), or from the `watch:` block of a JOB.yml (the file job-check
reads), then overridden by the command line (apply_overrides). Every error names file:line and the fix.

Who may set what: the watcher runs as root and the file may be a user's JOB.yml. A file that is not
root's word (owned by another uid, or writable by group or others; judged on the file as read,
yaml_source.load_file) may set only JOB_FIELDS, which describe the job; anything else (match, on_hang,
forensics, alerts.*, history: ROOT_FIELDS, and any field added later until it is listed in JOB_FIELDS)
makes root run, send, signal, collect or choose processes, and comes only from a root-owned config or
the command line. The file's owner is also the job's user the progress log is read as (WatchSource).

    # watch.yml
    match: 'train\\.py'                    # the job's processes (ERE, as `pgrep -f`)
    interval_s: 30
    progress:
      log: /scratch/{node}/train.log      # {node}: the node's name
      step_regex: '\\bstep[:= ]\\s*(?P<step>\\d+)'
      throughput_regex: '(?P<throughput>\\d[\\d,]*(?:\\.\\d+)?)\\s*tps'
    bounds: {hang_after_s: 600, checkpoint_max_s: 900, throughput_floor: 4000}
    alerts: {command: /usr/local/bin/page-oncall, url: https://hooks.example/nodecheck}
    on_hang: cancel                        # or requeue; unset: never touch the job
    forensics: true                        # on hung: nodecheck forensics first (stacks, dumps, culprit)

Bounds, and how they interact (classify.py applies them):
- progress frozen longer than hang_after_s is a hang, EXCEPT while a checkpoint explains the freeze
  (the GPU pattern of a save, or checkpoint_regex matched the log's last progress line): then the
  freeze may last up to checkpoint_max_s. So checkpoint_max_s may be larger than hang_after_s (the
  usual case: saves are long) or smaller (a freeze that looks like a save is judged sooner); both are
  allowed.
- before the first progress is seen the bound is startup_grace_s (loading, compiling, first step).
- A JOB.yml whose `checkpoint.save_s` (the longest expected save) is set, under a `watch:` block that
  sets no bounds.checkpoint_max_s, gets checkpoint_max_s = 1.5 x save_s (a save may run that much
  over its estimate before it is called a hang); the derived value is validated like a written one.
"""

from __future__ import annotations

import math
import re
import shlex
import warnings
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from nodecheck.config.yaml_source import Located, load_file, not_roots_word, pydantic_error, shown
from nodecheck.core.errors import ConfigError

DEFAULT_STEP_REGEX = r"\bstep[:= ]\s*(?P<step>\d+)"
# "tps: 5,400" (torchtitan: the label first) or "5,400 tokens/s" (the unit after); one group, so the
# unit-after form is a lookahead that refuses a unit followed by ":" (that number belongs to a label
# before it: "loss: 7.12  tps: 5,400" reads 5400, not 7.12). The lookahead starts only where a number
# starts ((?<![\d,.])): tried inside one, a 64 KiB line of digits ("1,2,3,..." a printed tensor) cost
# O(n^2), 40 s a node a tick
_UNITS = r"(?:tps|tokens/s|samples/s)"
DEFAULT_THROUGHPUT_REGEX = (
    rf"(?:\b{_UNITS}(?:\s*[:=]\s*|\s+)|(?<![\d,.])(?=\d[\d,]*(?:\.\d+)?\s*{_UNITS}\b"
    r"(?!\s*[:=])))(?P<throughput>\d[\d,]*(?:\.\d+)?)"
)
DEFAULT_DONE_REGEX = r"training (?:complete|finished|done)"
DEFAULT_CHECKPOINT_REGEX = r"(?i)saving checkpoint"
SAVE_S_MARGIN = 1.5  # checkpoint_max_s derived from a JOB.yml's checkpoint.save_s
MAX_SAMPLE_TIMEOUT_S = 20.0
_PYTHON_ONLY_DIGIT = re.compile(r"(?<!\\)(?:\\\\)*\\[dD]")  # \d not after an escaped backslash

# the named groups each regex must have: a regex without them could never yield its value
_GROUPS = {
    "step_regex": ("step",),
    "throughput_regex": ("throughput",),
    "rank_time_regex": ("rank", "seconds"),
    "done_regex": (),
    "checkpoint_regex": (),
}
_EXAMPLES = {
    "step_regex": DEFAULT_STEP_REGEX,
    "throughput_regex": DEFAULT_THROUGHPUT_REGEX,
    "rank_time_regex": r"rank (?P<rank>\d+) step \d+ time (?P<seconds>\d+(?:\.\d+)?)s",
}


def _seconds(default: float, description: str):
    return Field(default, gt=0, le=7 * 86_400, allow_inf_nan=False, description=description)


class ProgressSource(BaseModel):
    """Where the job shows progress: a log (regexes over its last 64 KiB) and/or a heartbeat file."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    log: str | None = Field(
        None, min_length=1, description="the job's log on each node; {node} is replaced by the node's name"
    )
    step_regex: str = Field(DEFAULT_STEP_REGEX, description="the step counter: group (?P<step>...)")
    throughput_regex: str | None = Field(
        DEFAULT_THROUGHPUT_REGEX, description="group (?P<throughput>...); '5,400' reads 5400"
    )
    rank_time_regex: str | None = Field(
        None, description="per-rank step time: groups (?P<rank>...) and (?P<seconds>...)"
    )
    done_regex: str | None = Field(DEFAULT_DONE_REGEX, description="the job says it finished")
    checkpoint_regex: str | None = Field(DEFAULT_CHECKPOINT_REGEX, description="the job says it saves")
    heartbeat: str | None = Field(
        None,
        min_length=1,
        description="a file the job touches as it progresses (its mtime is the signal); {node} is replaced",
    )

    @field_validator("step_regex", "throughput_regex", "rank_time_regex", "done_regex", "checkpoint_regex")
    @classmethod
    def _compiles(cls, value: str | None, info) -> str | None:
        if value is None:
            return None
        try:
            pattern = re.compile(value)
        except re.error as e:
            raise ValueError(f"not a valid regular expression ({e})") from None
        missing = [g for g in _GROUPS[info.field_name] if g not in pattern.groupindex]
        if missing:
            example = _EXAMPLES.get(info.field_name, "")
            raise ValueError(
                "needs the named group"
                + ("s " if len(missing) > 1 else " ")
                + " and ".join(f"(?P<{g}>...)" for g in missing)
                + (f", e.g. {example!r}" if example else "")
            )
        if pattern.search("") is not None:
            raise ValueError("matches the empty string, so every line would match")
        return value

    def compiled(self, name: str) -> re.Pattern | None:
        """The regex `name` ("step_regex", ...) compiled (re's own cache keeps this cheap)."""
        value = getattr(self, name)
        return re.compile(value) if value is not None else None

    def for_node(self, node: str) -> tuple[str | None, str | None]:
        """(log, heartbeat) paths on `node`, {node} replaced."""
        return (
            None if self.log is None else self.log.replace("{node}", node),
            None if self.heartbeat is None else self.heartbeat.replace("{node}", node),
        )


class Bounds(BaseModel):
    """How long each condition may last before it is a verdict, and what counts as busy/idle."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    hang_after_s: float = _seconds(600, "no progress for this long (and no checkpoint explains it) is a hang")
    checkpoint_max_s: float = _seconds(900, "the longest a checkpoint save may freeze progress")
    startup_grace_s: float = _seconds(900, "time from the first sample to the first progress")
    unresponsive_after_s: float = _seconds(90, "a node whose samples fail this long is unresponsive")
    slow_for_s: float = _seconds(300, "throughput under the floor this long is slow")
    throughput_floor: float | None = Field(
        None, gt=0, allow_inf_nan=False, description="in the log's unit (tps); unset: no slow verdict"
    )
    straggler_pct: float = Field(
        15.0,
        gt=0,
        le=1000,
        allow_inf_nan=False,
        description="a node's median rank time this much above the job's median",
    )
    busy_util_pct: float = Field(90, gt=0, le=100, allow_inf_nan=False)
    idle_util_pct: float = Field(5, ge=0, lt=100, allow_inf_nan=False)
    low_power_fraction: float = Field(
        0.35, gt=0, le=1, allow_inf_nan=False, description="board power <= this x power.limit is near idle"
    )
    low_power_w: float | None = Field(
        None, gt=0, le=100_000, allow_inf_nan=False, description="absolute near-idle power (overrides the fraction)"
    )

    @model_validator(mode="after")
    def _idle_below_busy(self) -> Bounds:
        if self.idle_util_pct >= self.busy_util_pct:
            raise ValueError(
                f"idle_util_pct ({self.idle_util_pct:g}) must be below busy_util_pct ({self.busy_util_pct:g})"
            )
        return self


class Alerts(BaseModel):
    """Where a change of verdict is sent: a command (argv, never a shell) and/or an HTTP POST."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    command: str | None = Field(
        None, min_length=1, description="split like a shell line (shlex), run without a shell; the event JSON on stdin"
    )
    url: str | None = Field(None, description="http(s) URL the event JSON is POSTed to")
    retries: int = Field(3, ge=0, le=100, strict=True)
    timeout_s: float = Field(10, gt=0, le=600, allow_inf_nan=False)
    backoff_s: float = Field(1.0, ge=0, le=3600, allow_inf_nan=False, description="doubles per retry")

    @field_validator("command")
    @classmethod
    def _splits(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            argv = shlex.split(value)
        except ValueError as e:
            raise ValueError(f"cannot be split into arguments ({e})") from None
        if not argv:
            raise ValueError("is empty once split")
        return value

    @field_validator("url")
    @classmethod
    def _http(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError("must be an http:// or https:// URL with a host")
        return value

    @property
    def argv(self) -> tuple[str, ...] | None:
        return tuple(shlex.split(self.command)) if self.command else None


class WatchConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    match: str | None = Field(
        None,
        min_length=1,
        description="the job's processes on each node: an extended regex over the command line, as `pgrep -f`",
    )
    interval_s: float = Field(30, gt=0, le=3600, allow_inf_nan=False)
    history: int = Field(240, ge=2, le=100_000, strict=True, description="ticks kept in the state")
    gpus_per_node: int | None = Field(
        None, ge=1, le=1024, strict=True, description="unset: as many as nvidia-smi shows"
    )
    progress: ProgressSource = ProgressSource()
    bounds: Bounds = Bounds()
    alerts: Alerts = Alerts()
    on_hang: Literal["cancel", "requeue"] | None = None
    forensics: bool = Field(
        False,
        strict=True,
        description="on hung: run nodecheck forensics on the job's "
        "nodes (before on_hang acts) and link its record from the incident",
    )
    sample_timeout_s: float | None = Field(
        None, gt=0, le=600, allow_inf_nan=False, description=f"default: min({MAX_SAMPLE_TIMEOUT_S:g}, interval_s)"
    )

    @field_validator("match")
    @classmethod
    def _pgrep_pattern(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if "\n" in value or "\0" in value:
            raise ValueError("must be one line")
        # pgrep -f reads a POSIX extended regex: glibc takes Python's \d for a plain "d" and has no
        # (?...) at all, so such a pattern silently matches nothing, and a crash is never seen
        if _PYTHON_ONLY_DIGIT.search(value):
            raise ValueError("is a POSIX extended regex (pgrep -f), where \\d is a plain 'd': write [0-9]")
        if "(?" in value:
            raise ValueError(
                "is a POSIX extended regex (pgrep -f), which has no (?...) groups or flags: "
                "write (...) or spell both cases, [Tt]rain"
            )
        try:
            with warnings.catch_warnings():  # "[[:digit:]]" is good ERE; Python only warns about it
                warnings.simplefilter("ignore")
                re.compile(value)
        except re.error as e:
            raise ValueError(f"not a valid regular expression ({e})") from None
        return value

    @property
    def sample_timeout(self) -> float:
        """The probe's timeout: never longer than the interval, so ticks do not pile up."""
        if self.sample_timeout_s is not None:
            return min(self.sample_timeout_s, self.interval_s)
        return min(MAX_SAMPLE_TIMEOUT_S, self.interval_s)


# ---- who may set what --------------------------------------------------------------------------------
# The watcher runs as root; its config may be a user's JOB.yml. A file that is not root's word (owned
# by another uid, or writable by group or others: an ACL granting a user write shows as the group
# bits) may describe only its own job: these fields. Everything else (ROOT_FIELDS today, and any field
# added later until it is listed here) makes root run, send, signal, collect or choose processes, and
# comes only from a root-owned config or the command line (apply_overrides).
JOB_FIELDS = frozenset(
    {
        "interval_s",
        "sample_timeout_s",  # never longer than interval_s
        "gpus_per_node",
        "progress.log",  # read as the file's owner (watch/probe.py)
        "progress.heartbeat",
        "progress.step_regex",
        "progress.throughput_regex",
        "progress.rank_time_regex",
        "progress.done_regex",
        "progress.checkpoint_regex",
        "bounds.hang_after_s",
        "bounds.checkpoint_max_s",
        "bounds.startup_grace_s",
        "bounds.unresponsive_after_s",
        "bounds.slow_for_s",
        "bounds.throughput_floor",
        "bounds.straggler_pct",
        "bounds.busy_util_pct",
        "bounds.idle_util_pct",
        "bounds.low_power_fraction",
        "bounds.low_power_w",
    }
)
# for the record and the test that every field is classified; the code refuses whatever is not above
ROOT_FIELDS = frozenset(
    {
        "match",  # which processes root signals (on_hang cancel) and reads
        "on_hang",  # root cancels or requeues
        "forensics",  # root collects every rank's stacks and dumps
        "history",  # how much root keeps in memory and writes into state and incident records
        "alerts.command",  # root runs it
        "alerts.url",  # root POSTs there
        "alerts.retries",
        "alerts.timeout_s",
        "alerts.backoff_s",
    }
)
_ROOT_OPTION = {
    "match": "--match PATTERN",
    "on_hang": "--on-hang cancel|requeue",
    "forensics": "--forensics",
    "alerts.command": "--alert-command COMMAND",
    "alerts.url": "--alert-url URL",
}


@dataclass(frozen=True)
class WatchSource:
    """The settings and whose word they are: the uid owning the config file as it was read (None: no
    file). That owner is the job's user the watcher reads the progress log as (app.job_user)."""

    cfg: WatchConfig
    owner_uid: int | None = None


def load_watch_config(path: str | None) -> WatchConfig:
    """The settings in `path` (load_watch_source without the owner)."""
    return load_watch_source(path).cfg


def load_watch_source(path: str | None) -> WatchSource:
    """The settings in `path` (None: the defaults). A file whose top level has `watch:` is a JOB.yml:
    its watch block is used. A file that is not root's word sets only JOB_FIELDS (ConfigError naming
    the first other field, its line and why). Progress completeness (a log or a heartbeat) is checked
    by apply_overrides, since the command line may supply it."""
    if path is None:
        return WatchSource(WatchConfig())
    src = load_file(path)
    data = src.data if src.data is not None else {}
    if not isinstance(data, dict):
        raise src.error(
            (),
            "a watch config is a mapping of settings",
            hint="see examples/watch.yml; a JOB.yml holds them under `watch:`",
        )
    base: tuple = ()
    # a JOB.yml (job-check's world_size:) without a watch block is the defaults plus what the job says
    if "watch" in data or "world_size" in data:
        base = ("watch",)
        block = data.get("watch") if data.get("watch") is not None else {}
        if not isinstance(block, dict):
            raise src.error(
                base,
                "`watch:` must be a mapping of watch settings",
                hint="e.g. watch: {match: 'train\\.py', progress: {log: /path/train.log}}",
            )
        block = _derive_checkpoint_bound(src, data, block)
        gpus = data.get("gpus_per_node")
        if "gpus_per_node" not in block and isinstance(gpus, int) and not isinstance(gpus, bool) and gpus >= 1:
            block = {**block, "gpus_per_node": gpus}  # the job's rank layout, not what nvidia-smi shows
    else:
        block = data
    _refuse_root_fields(src, base, block)
    try:
        cfg = WatchConfig.model_validate(block)
    except ValidationError as e:
        error = pydantic_error(src, base, e, model=WatchConfig)
        if not error.hint:
            error.hint = _hint(e.errors()[0]["loc"])
        raise error from None
    _refuse_fast_sampling(src, base, cfg)
    return WatchSource(cfg, src.owner_uid)


# A job's own file chooses how often the job is sampled, within what root is willing to do for it:
# every tick is an SSH round trip by root to every node of the job
MIN_JOB_INTERVAL_S = 5.0


def _refuse_fast_sampling(src: Located, base: tuple, cfg: WatchConfig) -> None:
    why = not_roots_word(src.owner_uid, src.mode)
    if why and cfg.interval_s < MIN_JOB_INTERVAL_S:
        raise src.error(
            (*base, "interval_s"),
            f"{'.'.join((*base, 'interval_s'))}: {cfg.interval_s:g} s from this file ({why}): a job's own file "
            f"may ask for a sample every {MIN_JOB_INTERVAL_S:g} s at most often",
            hint=f"an operator sets a shorter interval with --interval or in a root-owned config; "
            f"here, {MIN_JOB_INTERVAL_S:g} or more",
        )


def _refuse_root_fields(src: Located, base: tuple, block: dict) -> None:
    """ConfigError when a file that is not root's word sets a field outside JOB_FIELDS: the first one
    (by line) named with its line and why, the others listed. Checked before the model validates, so
    the refusal comes first; a key the model does not know is left to it (it refuses every one)."""
    why = not_roots_word(src.owner_uid, src.mode)
    if not why:
        return
    refused = sorted(_root_fields_set(block), key=lambda f: src.line(base + tuple(f.split("."))) or 0)
    if not refused:
        return
    first, rest = refused[0], refused[1:]
    named = ".".join((*base, first))
    also = f" (also: {', '.join('.'.join((*base, f)) for f in rest)})" if rest else ""
    option = _ROOT_OPTION.get(first)
    raise src.error(
        base + tuple(first.split(".")),
        f"{named}: not taken from this file ({why}): what the watcher runs, sends, signals, collects or "
        f"matches comes only from a root-owned config or the command line{also}",
        hint=(
            f"give it on the command line ({option}), or in a root-owned config that group and others cannot write"
            if option
            else f"{first} has no command-line option: set it in a root-owned config that group and others "
            "cannot write, or drop it from this file"
        )
        + "; a job's own file may set progress.*, bounds.*, interval_s, sample_timeout_s and gpus_per_node",
    )


def _root_fields_set(block: dict, prefix: str = "", model: type[BaseModel] = WatchConfig) -> list[str]:
    """The dotted settings `block` gives that are WatchConfig's fields and not JOB_FIELDS. A block of
    settings (progress:, alerts:) is walked; a key no model knows is not a setting (the model refuses it)."""
    out: list[str] = []
    for key, value in block.items():
        field = model.model_fields.get(key) if isinstance(key, str) else None
        if field is None:
            continue
        dotted = prefix + key
        sub = field.annotation
        if isinstance(sub, type) and issubclass(sub, BaseModel):
            if isinstance(value, dict):
                out += _root_fields_set(value, dotted + ".", sub)
            elif not any(f.startswith(dotted + ".") for f in JOB_FIELDS):
                out.append(dotted)  # not a mapping: the model refuses it; not the job's either way
        elif dotted not in JOB_FIELDS:
            out.append(dotted)
    return out


def _hint(loc: tuple) -> str:
    """What the setting at `loc` is (its description), as the fix of an error that names none."""
    model, described = WatchConfig, ""
    for part in loc:
        field = getattr(model, "model_fields", {}).get(part)
        if field is None:
            break
        described = field.description or ""
        model = field.annotation
    dotted = ".".join(str(p) for p in loc)
    return f"{dotted}: {described}; see examples/watch.yml" if described else f"see {dotted} in examples/watch.yml"


def _derive_checkpoint_bound(src: Located, job: dict, block: dict) -> dict:
    """checkpoint_max_s from the JOB.yml's checkpoint.save_s when the watch block does not set it."""
    checkpoint = job.get("checkpoint")
    save_s = checkpoint.get("save_s") if isinstance(checkpoint, dict) else None
    bounds = block.get("bounds")
    if save_s is None or (isinstance(bounds, dict) and "checkpoint_max_s" in bounds):
        return block
    if isinstance(save_s, bool) or not isinstance(save_s, (int, float)) or not math.isfinite(save_s) or save_s <= 0:
        raise src.error(
            ("checkpoint", "save_s"),
            f"checkpoint.save_s must be a positive number of seconds, got {shown(save_s)}",
            hint="the longest expected checkpoint save, e.g. 300",
        )
    if bounds is not None and not isinstance(bounds, dict):
        return block  # the model reports the bad bounds with its line
    return {**block, "bounds": {**(bounds or {}), "checkpoint_max_s": SAVE_S_MARGIN * float(save_s)}}


def apply_overrides(
    cfg: WatchConfig,
    *,
    match: str | None = None,
    log: str | None = None,
    heartbeat: str | None = None,
    interval_s: float | None = None,
    alert_command: str | None = None,
    alert_url: str | None = None,
    on_hang: str | None = None,
    forensics: bool | None = None,
) -> WatchConfig:
    """A new config: the command line's values (None: keep the file's) over `cfg`, validated again;
    then a progress signal is required. ConfigError names the option and the fix."""
    data = cfg.model_dump()
    given = {"match": match, "interval_s": interval_s, "on_hang": on_hang, "forensics": forensics}
    data.update({k: v for k, v in given.items() if v is not None})
    progress = {"log": log, "heartbeat": heartbeat}
    data["progress"].update({k: v for k, v in progress.items() if v is not None})
    alerts = {"command": alert_command, "url": alert_url}
    data["alerts"].update({k: v for k, v in alerts.items() if v is not None})
    try:
        out = WatchConfig.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        dotted = ".".join(str(p) for p in first["loc"])
        option = _OPTION.get(dotted, dotted)
        raise ConfigError(f"{option}: {first['msg']}, got {shown(first.get('input'))}", hint=f"fix {option}") from None
    if out.progress.log is None and out.progress.heartbeat is None:
        raise ConfigError(
            "no progress signal: the watcher cannot tell a hang from work without one",
            hint="give --log PATH (the job's log; {node} is the node's name) or "
            "--heartbeat PATH, or progress.log / progress.heartbeat in --config",
        )
    return out


_OPTION = {
    "match": "--match",
    "interval_s": "--interval",
    "on_hang": "--on-hang",
    "progress.log": "--log",
    "progress.heartbeat": "--heartbeat",
    "alerts.command": "--alert-command",
    "alerts.url": "--alert-url",
}
