"""The gate config file: what Slurm cannot pass on the command line.

slurm.conf's Prolog=, PrologSlurmctld= and HealthCheckProgram= name a program without arguments,
and the Prolog's environment is nearly empty (no PATH, no HOME), so the console scripts
nodecheck-prolog, nodecheck-prolog-slurmctld and nodecheck-health read their options from a YAML
file. It is found, first match wins: --config FILE; $NODECHECK_GATE_CONFIG; nodecheck.yml beside
$SLURM_CONF (Slurm passes SLURM_CONF to the Prolog; so the file lives with slurm.conf); then
/etc/nodecheck/gate.yml. No file is fine: the defaults apply.

    # /etc/slurm/nodecheck.yml
    output_dir: /var/lib/nodecheck/reports
    log_file: /var/log/nodecheck/gate.log
    prolog:     {playbook: prolog, deadline: 20}
    controller: {playbook: prolog, inventory: /etc/nodecheck/hosts.yml, drain_on: [fail, unreachable]}
    health:     {playbook: health}

Top-level keys apply to every mode; a mode's section overrides them; the command line overrides both.
"""

from __future__ import annotations

import os
from argparse import Namespace
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from nodecheck.config.gate_settings import DrainOn
from nodecheck.config.remedy import RemedySettings
from nodecheck.config.yaml_source import load_file, pydantic_error

DEFAULT_SLURM_CONF = "/etc/slurm/slurm.conf"
FALLBACK = "/etc/nodecheck/gate.yml"
MODES = ("prolog", "controller", "health", "sweep")


class SweepSlurm(BaseModel):
    """sweep --slurm-submit's sbatch options (fleet.submit); the command line's flags win."""

    model_config = ConfigDict(extra="forbid")
    partition: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:+-]{0,127}$")
    reservation: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:+-]{0,127}$")
    account: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:+-]{0,127}$")
    qos: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:+-]{0,127}$")
    time: str | None = Field(None, pattern=r"^((\d+-)?\d{1,6}(:\d\d){0,2}|UNLIMITED|INFINITE)$")
    exclusive: bool = True
    python: str | None = Field(
        None,
        pattern=r"^/[^\x00-\x1f\x7f]*$",
        description="the interpreter the batch job runs nodecheck with (default: the submitter's, "
        "sys.executable): for a venv that the compute nodes see at another path",
    )


class GateOptions(BaseModel):
    """Keys a section (or the top level) may set; the names are the command-line options'."""

    model_config = ConfigDict(extra="forbid")
    playbook: str | None = None
    inventory: str | None = None
    deadline: float | None = Field(None, gt=0, le=86_400, allow_inf_nan=False)
    output_dir: str | None = None
    log_file: str | None = None
    observe: bool | None = None
    retries: int | None = Field(None, ge=0, le=10, strict=True)
    drain_on: list[DrainOn] | None = Field(None, min_length=1)
    fanout: int | None = Field(None, ge=1, le=4096, strict=True)
    connect_timeout: float | None = Field(None, gt=0, le=600, allow_inf_nan=False)
    accept_new_host_keys: bool | None = None
    path: str | None = Field(None, description="PATH for the checks' tools (default: the system dirs)")
    scontrol: str | None = Field(None, description="the scontrol to use (default: scontrol on PATH)")
    drain_token: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9._-]{1,64}$",
        description="this site's drain token: mixed into the mark of every drain reason nodecheck sets "
        "('nodecheck[<mark>]: ...'), so only reasons this site's nodecheck wrote are resumed; "
        "changing it leaves the drains of the old token to be resumed by hand",
    )
    slurm: SweepSlurm | None = Field(None, description="sweep --slurm-submit: partition, reservation, account, ...")
    keep_reports: Literal["problems", "always"] | None = Field(
        None,
        description="prolog/controller/health: store a run's report only when it found something "
        "(not all pass, or a drain/resume: the default), or always",
    )


class GateFile(GateOptions):
    prolog: GateOptions = GateOptions()
    controller: GateOptions = GateOptions()
    health: GateOptions = GateOptions()
    sweep: GateOptions = GateOptions()
    remedy: RemedySettings | None = None  # absent: `health` and the sweeps do no repair at all


def config_path(explicit: str | None, environ=os.environ) -> Path | None:
    """The config file to read, or None (no file: defaults). An explicit one must exist."""
    if explicit:
        return Path(explicit)
    if environ.get("NODECHECK_GATE_CONFIG"):
        return Path(environ["NODECHECK_GATE_CONFIG"])
    beside = Path(environ.get("SLURM_CONF") or DEFAULT_SLURM_CONF).parent / "nodecheck.yml"
    for candidate in (beside, Path(FALLBACK)):
        if candidate.is_file():
            return candidate
    return None


def load(path: Path | None, mode: str) -> tuple[GateOptions, str | None]:
    """(the options for `mode`, the file they came from). ConfigError names file:line."""
    if mode not in MODES:  # a caller's bug, not the operator's file
        raise ValueError(f"mode {mode!r}: one of {', '.join(MODES)}")
    if path is None:
        return GateOptions(), None
    book = _validated(load_file(path))
    merged = {k: v for k, v in book.model_dump(exclude={*MODES, "remedy"}).items() if v is not None}
    if mode != "controller":
        # a top-level inventory is for the controller: given to every node's health check it would
        # make each one check the whole fleet over SSH (a health section may still name one)
        merged.pop("inventory", None)
    merged.update({k: v for k, v in getattr(book, mode).model_dump().items() if v is not None})
    return GateOptions(**merged), str(path)


def _validated(src) -> GateFile:
    data = src.data if src.data is not None else {}
    if not isinstance(data, dict):
        raise src.error((), "a gate config is a mapping of options", hint="see README, 'Slurm gate'")
    # "health:" with every option under it commented out is an empty section, not an error
    data = {k: ({} if k in (*MODES, "remedy") and v is None else v) for k, v in data.items()}
    try:
        return GateFile.model_validate(data)
    except ValidationError as e:
        raise pydantic_error(src, (), e, model=GateFile) from None


def remedy_settings(path: Path | None) -> tuple[RemedySettings | None, str | None]:
    """(the `remedy:` section, the file it came from). None when there is no section (or no file):
    `health` and the sweeps then do no repair pass; `remediate` plans with the defaults. An empty
    `remedy:` is a section with every default (observe)."""
    if path is None:
        return None, None
    return _validated(load_file(path)).remedy, str(path)


def apply(args: Namespace, options: GateOptions) -> Namespace:
    """Fill every option the command line left unset (None; False for a store_true flag) from the
    config file. Unset is tested by identity: `in (None, False)` is also true of 0 (0 == False),
    so `--retries 0` on the command line would lose to the file's retries."""
    for key, value in options.model_dump().items():
        given = getattr(args, key, None)
        if value is not None and (given is None or given is False):
            setattr(args, key, tuple(value) if key == "drain_on" else value)
    return args


def salvage_log_file(path: Path | None, mode: str) -> str | None:
    """The log_file a config file names even when the file is invalid (a typo elsewhere), so the
    config error itself is logged where the operator looks; None when it cannot be read."""
    if path is None:
        return None
    try:
        import yaml

        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except Exception:  # unreadable or not YAML: nothing to salvage
        return None
    if not isinstance(data, dict):
        return None
    section = data.get(mode)
    for source in (section if isinstance(section, dict) else {}, data):
        value = source.get("log_file")
        if isinstance(value, str) and value:
            return value
    return None
