"""JOB.yml -> JobSpec: what a training job says about itself (world size, the environment its ranks get,
checkpoints, where the per-rank work counts come from, timeouts, the launcher), validated with file:line
errors. Relative paths are taken relative to JOB.yml's directory (the file usually lives beside the job's
data on the shared filesystem).

The shape of issue 7 loads unchanged:
    world_size: 16
    gpus_per_node: 8
    env: {NCCL_SOCKET_IFNAME: ib0, TORCH_NCCL_ASYNC_ERROR_HANDLING: "1", TORCH_NCCL_TRACE_BUFFER_SIZE: "2000"}
    checkpoint: {dir: /shared/ckpt, every_steps: 500}
    data_balance: {counts_file: counts.json, per_step: 1}
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from nodecheck.config.yaml_source import Located, load_file, pydantic_error
from nodecheck.probes.env_policy import EnvName, EnvValue

# PyTorch's init_process_group(timeout=) default for NCCL: 10 minutes (torch.distributed
# default_pg_timeout); what the job gets when it does not pass one
PYTORCH_DEFAULT_TIMEOUT_S = 600.0
MAX_SECONDS = 30 * 86_400.0  # bounds a typo (1e12) at load time, not in arithmetic


class _Block(BaseModel):
    # numbers are strict (strict=True on each): YAML's `true` is not 1 s, and "50" is a quoting mistake
    model_config = ConfigDict(extra="forbid", frozen=True)


class DataBalance(_Block):
    """Where the per-rank work counts come from, and how many items one rank consumes per step."""

    counts_file: str | None = Field(None, description='JSON {"0": 30871, ...} or [..], or CSV rank,count')
    counts_command: list[str] | str | None = Field(
        None,
        description="a command that prints the counts (argv list, or a string split as the shell "
        "would, never run by one); run on this machine in JOB.yml's directory, as the job's user "
        "(JOB.yml's owner, else the Slurm job's user)",
    )
    command_timeout_s: float = Field(60.0, gt=0, le=3600, allow_inf_nan=False, strict=True)
    per_step: int = Field(1, ge=1, strict=True, description="items (blocks, samples) one rank consumes per micro-step")
    grad_accum: int = Field(1, ge=1, strict=True, description="micro-steps per optimizer step")
    format: Literal["auto", "json", "csv"] = "auto"
    unit: str = Field("blocks", min_length=1, description="what a count counts, for the messages")

    @model_validator(mode="after")
    def _one_source(self) -> DataBalance:
        if (self.counts_file is None) == (self.counts_command is None):
            raise ValueError("give exactly one of counts_file or counts_command")
        if isinstance(self.counts_command, list) and not self.counts_command:
            raise ValueError("counts_command is an empty list")
        return self

    @property
    def argv(self) -> list[str]:
        return self.counts_command if isinstance(self.counts_command, list) else shlex.split(self.counts_command or "")

    @property
    def items_per_step(self) -> int:
        return self.per_step * self.grad_accum


class Checkpoint(_Block):
    dir: str = Field(min_length=1, description="the checkpoint directory, as every node sees it")
    every_steps: int | None = Field(None, ge=1, strict=True)
    every_minutes: float | None = Field(None, gt=0, le=MAX_SECONDS / 60, allow_inf_nan=False, strict=True)
    step_seconds: float | None = Field(
        None,
        gt=0,
        le=MAX_SECONDS,
        allow_inf_nan=False,
        strict=True,
        description="seconds per optimizer step, to turn every_steps into minutes",
    )
    save_s: float | None = Field(
        None,
        gt=0,
        le=MAX_SECONDS,
        allow_inf_nan=False,
        strict=True,
        description="the longest expected save: the other ranks block that long",
    )
    resume: bool = False
    resume_from: str | None = Field(
        None, min_length=1, description="the checkpoint it resumes from (default: anything in dir)"
    )
    min_free_gb: float = Field(
        0.0,
        ge=0,
        le=1e9,
        allow_inf_nan=False,
        strict=True,
        description="free space the checkpoint directory needs on every node (GB, 10^9 bytes)",
    )


class Timeouts(_Block):
    collective_s: float | None = Field(
        None,
        gt=0,
        le=MAX_SECONDS,
        allow_inf_nan=False,
        strict=True,
        description="what the code passes to init_process_group(timeout=); unset: PyTorch's default, 10 min",
    )
    longest_blocking_s: float | None = Field(
        None,
        gt=0,
        le=MAX_SECONDS,
        allow_inf_nan=False,
        strict=True,
        description="the longest phase some ranks wait on others (a save, an evaluation, a data reload)",
    )


class Launcher(_Block):
    kind: Literal["srun", "torchrun", "other"] = "other"
    max_restarts: int | None = Field(None, ge=0, strict=True, description="torchrun --max-restarts")
    requeue: bool | None = Field(
        None, description="the batch script requeues a failed start itself (or sbatch --requeue)"
    )


class Limits(_Block):
    timeout_min_s: float = Field(
        60.0,
        gt=0,
        le=MAX_SECONDS,
        allow_inf_nan=False,
        strict=True,
        description="a collective timeout below this is a unit mistake (minutes "
        "written as seconds): the first slow collective ends the job",
    )
    timeout_max_s: float = Field(
        3600.0,
        gt=0,
        le=MAX_SECONDS,
        allow_inf_nan=False,
        strict=True,
        description="a collective timeout above this hides a hang for too long",
    )
    checkpoint_max_minutes: float = Field(60.0, gt=0, le=MAX_SECONDS / 60, allow_inf_nan=False, strict=True)
    checkpoint_max_steps: int | None = Field(None, ge=1, strict=True)


class JobSpec(_Block):
    world_size: int = Field(ge=1, le=10_000_000, strict=True, description="ranks in the job")
    gpus_per_node: int = Field(ge=1, le=1024, strict=True)
    env: dict[EnvName, EnvValue] = Field({}, description="the environment every rank gets")
    checkpoint: Checkpoint | None = None
    data_balance: DataBalance | None = None
    timeouts: Timeouts = Timeouts()
    launcher: Launcher = Launcher()
    limits: Limits = Limits()
    watch: Any = None  # the watcher's block (nodecheck.watch.config validates it)
    # set by load_job_spec, not by the file
    source: str = Field("", exclude=True)
    sha256: str = Field("", exclude=True)
    # the uid owning JOB.yml as it was read (the descriptor's fstat): the job's user (job.command), never
    # a second stat of the path, which could name a root-owned file the user put there since
    owner_uid: int | None = Field(None, exclude=True)

    @property
    def nodes_needed(self) -> int:
        """Nodes the world size fills (a multiple of gpus_per_node: load_job_spec checks)."""
        return -(-self.world_size // self.gpus_per_node)


_SET_BY_LOAD = ("source", "sha256", "owner_uid")
FILE_KEYS = frozenset(JobSpec.model_fields) - set(_SET_BY_LOAD)


def load_job_spec(path: str | Path) -> JobSpec:
    """Read and validate JOB.yml. ConfigError names file:line and the fix (with "did you mean" for a
    mistyped key); relative paths come back absolute, relative to the file's directory."""
    src = load_file(path)
    if not isinstance(src.data, dict):
        raise src.error(
            (), "a job description is a mapping with world_size: and gpus_per_node:", hint="see examples/job.yml"
        )
    for key in _SET_BY_LOAD:
        if key in src.data:
            raise src.error((key,), f"unknown key {key!r}", hint="see examples/job.yml")
    try:
        spec = JobSpec.model_validate(src.data)
    except ValidationError as e:
        raise pydantic_error(src, (), e, model=JobSpec) from None
    _check_consistency(spec, src)
    return _resolved(spec, src, Path(path).resolve().parent)


def _check_consistency(spec: JobSpec, src: Located) -> None:
    """What pydantic cannot see per field: values that contradict each other."""
    if spec.world_size % spec.gpus_per_node:
        # the launchers put the same number of ranks on every node (torchrun --nproc-per-node, srun
        # --ntasks-per-node), so no allocation matches: say so here, not as a world_size FAIL whose fix
        # ("allocate N nodes") is the allocation the job already has
        up, down = spec.nodes_needed, spec.world_size // spec.gpus_per_node
        fits = [f"{n * spec.gpus_per_node} ({n} node{'s' * (n != 1)})" for n in (up, down) if n]
        raise src.error(
            ("world_size",),
            f"world_size {spec.world_size} is not a multiple of gpus_per_node "
            f"{spec.gpus_per_node}: every node runs gpus_per_node ranks",
            hint=f"world_size: {' or '.join(fits)}, or the gpus_per_node that divides it",
        )
    if spec.limits.timeout_min_s > spec.limits.timeout_max_s:
        raise src.error(
            ("limits", "timeout_min_s"),
            f"limits.timeout_min_s {spec.limits.timeout_min_s:g} is above "
            f"limits.timeout_max_s {spec.limits.timeout_max_s:g}",
            hint="swap them",
        )
    ck = spec.checkpoint
    if ck is not None and ck.resume_from is not None and not ck.resume:
        raise src.error(
            ("checkpoint", "resume_from"),
            "checkpoint.resume_from is set but checkpoint.resume is false",
            hint="set resume: true, or drop resume_from",
        )


def _resolved(spec: JobSpec, src: Located, base: Path) -> JobSpec:
    def absolute(p: str | None) -> str | None:
        return p if p is None or p.startswith("/") else str(base / p)

    update: dict[str, Any] = {"source": src.file, "sha256": src.sha256, "owner_uid": src.owner_uid}
    if spec.data_balance is not None and spec.data_balance.counts_file is not None:
        update["data_balance"] = spec.data_balance.model_copy(
            update={"counts_file": absolute(spec.data_balance.counts_file)}
        )
    if spec.checkpoint is not None:
        update["checkpoint"] = spec.checkpoint.model_copy(
            update={"dir": absolute(spec.checkpoint.dir), "resume_from": absolute(spec.checkpoint.resume_from)}
        )
    return spec.model_copy(update=update)


def base_dir(spec: JobSpec) -> Path:
    """The directory of JOB.yml: where counts_command runs."""
    return Path(spec.source).resolve().parent if spec.source else Path.cwd()
