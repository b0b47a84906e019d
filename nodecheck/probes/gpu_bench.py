"""The GPU benchmark's node step: where the probe runs (the node's python3, or the job's own container)
and the shell around it (the idle guard, a bound, NVIDIA's nvbandwidth where installed).

The probe itself (probes/gpu_bench_probe.py) is the stdin of `python3 -`, as the NVML probe is: nothing
is installed on the node. With `container:` it runs inside the image the job will run (docker/podman
`run --gpus`, `enroot start`, `apptainer exec --nv`), so the figures are those of the PyTorch, CUDA and
cuBLAS the job gets. Every value is an argument (quoted once, by the transport); the script is fixed.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from nodecheck.core.model import Probe
from nodecheck.probes.idle import IDLE_GUARD

BENCH_PROBE_SCRIPT = (Path(__file__).resolve().parent / "gpu_bench_probe.py").read_text()
UNAVAILABLE_EXIT = 3  # the probe found no GPU library it can use (its stdout says why)
OUTPUT_CAP = 4 * 1024 * 1024  # the probe's JSON for 8 GPUs is ~20 KB; nvbandwidth's tables a few KB
STDERR_CAP = 16384
GUARD_S = 40  # the idle guard's own bounds (squeue 5 s, nvidia-smi 15 s) plus start-up
# the nvbandwidth testcases that give what the probe's own copies measure (NVIDIA/nvbandwidth README):
# host<->device per GPU over PCIe (copy engine), and device<->device reads over NVLink for every pair
NVBANDWIDTH_TESTS = ("host_to_device_memcpy_ce", "device_to_host_memcpy_ce", "device_to_device_memcpy_read_ce")
NVBANDWIDTH_TIMEOUT_S = 120  # three testcases on 8 GPUs take well under a minute

ContainerRuntime = Literal["docker", "podman", "enroot", "apptainer"]
Backend = Literal["auto", "torch", "cupy"]
# a registry reference (registry.local/team/train:24.10@sha256:...) or an enroot container name
_IMAGE_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,254}$")
_SIF_PATH = re.compile(r"^/[A-Za-z0-9._/+-]{1,254}\.sif$")
_PYTHON = re.compile(r"^(?:/[A-Za-z0-9._+-]+)+$|^python3(?:\.\d{1,2})?$")


class BenchContainer(BaseModel):
    """The job's image, to run the probe in (the container.digest check's image)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    image: str = Field(
        ...,
        description="docker/podman: an image reference (registry.local/train:24.10); enroot: a container "
        "name (`enroot create --name`, pyxis's named containers); apptainer: a .sif path",
    )
    runtime: ContainerRuntime = Field(..., description="docker, podman, enroot or apptainer")

    @model_validator(mode="after")
    def _image_fits(self) -> BenchContainer:
        if self.runtime == "apptainer":
            if not _SIF_PATH.match(self.image) or "/../" in self.image:
                raise ValueError(f"apptainer runs a .sif file: give its absolute path, got {self.image!r}")
        elif not _IMAGE_REF.match(self.image):
            raise ValueError(
                f"not an image reference or container name: {self.image!r} (letters, digits and ._/:@+- only)"
            )
        return self


class BenchTarget(BaseModel):
    """Where the probe runs and with which library: the params gpu.perf and gpu.sdc share."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    container: BenchContainer | None = Field(
        None,
        description="run the probe inside the job's image (the figures of the software the job runs); "
        "unset: the node's own python3 with PyTorch or CuPy",
    )
    python: str = Field(
        "python3", description="the interpreter on the node or in the image: python3, python3.11 or an absolute path"
    )
    backend: Backend = Field("auto", description="auto: PyTorch where it sees a GPU, else CuPy")

    @field_validator("python")
    @classmethod
    def _python(cls, value: str) -> str:
        if not _PYTHON.match(value) or "/../" in value:
            raise ValueError(f"not an interpreter name or absolute path: {value!r}")
        return value

    @property
    def where(self) -> str:
        """For messages: "the node's python3" or "docker image registry.local/train:24.10"."""
        c = self.container
        return f"the node's {self.python}" if c is None else f"{c.runtime} image {c.image}"


# The image's code never runs with root's rights: whoever can push the job's tag or write its .sif
# would otherwise run code as root on the host (and through the NVIDIA container hooks, which run
# on the host). docker/podman: an unprivileged user (nobody), no capabilities, no privilege gain by
# setuid; the GPUs stay usable (their device files are world-accessible, as the NVIDIA driver makes
# them). apptainer: --no-privs (root in the container without capabilities), and the .sif only when
# no one but root can change it (image_guard below). enroot: `enroot start` as root runs a container
# from root's own store ($ENROOT_DATA_PATH of root), which only root can create or change.
UNPRIVILEGED = "65534:65534"
_CONTAINED = ("--user", UNPRIVILEGED, "--cap-drop", "ALL", "--security-opt", "no-new-privileges")


def launcher(target: BenchTarget) -> tuple[str, ...]:
    """The argv that runs `python -` (the probe on stdin) where the target says."""
    c, py = target.container, target.python
    if c is None:
        return (py, "-")
    if c.runtime == "docker":  # -i: the probe is stdin; no network: the probe needs none
        return (
            "docker", "run", "--rm", "-i", "--gpus", "all", "--network", "none", *_CONTAINED,
            "--entrypoint", py, c.image, "-",
        )  # fmt: skip
    if c.runtime == "podman":  # CDI, as NVIDIA's container toolkit documents for podman
        return (
            "podman", "run", "--rm", "-i", "--device", "nvidia.com/gpu=all", "--network", "none", *_CONTAINED,
            "--entrypoint", py, c.image, "-",
        )  # fmt: skip
    if c.runtime == "enroot":
        return ("enroot", "start", "--env", "NVIDIA_VISIBLE_DEVICES=all", c.image, py, "-")
    return ("apptainer", "exec", "--no-privs", "--nv", "--containall", "--cleanenv", c.image, py, "-")


def guarded_image(target: BenchTarget) -> str:
    """The image file the node must find root-only before it runs (apptainer's .sif), else ""."""
    c = target.container
    return c.image if c is not None and c.runtime == "apptainer" else ""


# image_guard PATH: is PATH (a .sif) changeable by no one but root? Followed to where it leads
# (readlink -f), the file and every directory above it must be root's and not writable by group or
# others; a sticky directory (/tmp) may be writable by all, since no one can replace root's file in
# it. Sets ig_why ("owned by uid 1000: /shared/u/train.sif", "writable by group or others: ...",
# "not found") and returns 1 when not.
IMAGE_GUARD_FUNCTION = r"""
image_guard() {
  ig_why= ig_p=$(readlink -f -- "$1" 2>/dev/null)
  if [ -z "$ig_p" ] || [ ! -f "$ig_p" ]; then ig_why="not found"; return 1; fi
  ig_c=$ig_p ig_file=1
  while :; do
    ig_s=$(stat -c '%u %a' -- "${ig_c:-/}" 2>/dev/null) || { ig_why="cannot stat ${ig_c:-/}"; return 1; }
    ig_u=${ig_s%% *} ig_m=${ig_s#* }
    if [ "$ig_u" != 0 ]; then ig_why="owned by uid $ig_u: ${ig_c:-/}"; return 1; fi
    ig_sticky=; [ ${#ig_m} -eq 4 ] && case ${ig_m%???} in [1357]) ig_sticky=1 ;; esac
    case ${ig_m#"${ig_m%??}"} in       # the group and other digits: a write bit in either
      [2367]?|?[2367])
        if [ -n "$ig_file" ] || [ -z "$ig_sticky" ]; then
          ig_why="writable by group or others (mode $ig_m): ${ig_c:-/}"; return 1
        fi ;;
    esac
    [ -n "$ig_c" ] || return 0
    ig_c=${ig_c%/*} ig_file=
  done
}
"""


# $1 guard (1: run the idle guard), $2 the bound in s, $3 stdout cap, $4 nvbandwidth (auto|never|required),
# $5 nvbandwidth's bound, $6 the image file that must be root-only ("" none: guarded_image); then the
# launcher argv and the probe's own args after a "--".
_STEP_SCRIPT = (
    IMAGE_GUARD_FUNCTION
    + r"""
guard=$1 t=$2 cap=$3 nvb=$4 nvb_t=$5 image=$6; shift 6
if [ "$guard" = 1 ]; then
{
"""
    + IDLE_GUARD
    + r"""
} </dev/null
fi
command -v "$1" >/dev/null 2>&1 || { echo "@@nodecheck missing $1"; exit 0; }
if [ -n "$image" ] && ! image_guard "$image"; then echo "@@nodecheck untrusted_image $ig_why"; exit 0; fi
d=$(mktemp -d 2>/dev/null) || { echo "mktemp -d failed: nowhere to keep the probe's exit code" >&2; exit 70; }
trap 'rm -rf "$d"' EXIT
echo "@@nodecheck begin bench"
{ timeout -k 10 "$t" "$@" 2>"$d/err"; echo $? >"$d/rc"; } | head -c "$cap"
echo
echo "@@nodecheck end bench rc=0"
echo "@@nodecheck bench_rc $(cat "$d/rc" 2>/dev/null)"
echo "@@nodecheck begin stderr"
head -c """
    + str(STDERR_CAP)
    + r""" "$d/err"
echo
echo "@@nodecheck end stderr rc=0"
if [ "$nvb" != never ]; then
  if command -v nvbandwidth >/dev/null 2>&1; then
    echo "@@nodecheck begin nvbandwidth"
    { timeout -k 10 "$nvb_t" nvbandwidth -t """
    + " ".join(NVBANDWIDTH_TESTS)
    + r""" 2>&1 </dev/null; echo $? >"$d/nvb_rc"; } | head -c "$cap"
    echo
    echo "@@nodecheck end nvbandwidth rc=0"
    echo "@@nodecheck nvbandwidth_rc $(cat "$d/nvb_rc" 2>/dev/null)"
  else
    echo "@@nodecheck nvbandwidth_missing 1"
  fi
fi
"""
)


def bench_probe(
    kind: str,
    target: BenchTarget,
    probe_args: Sequence[str],
    bound_s: int,
    *,
    nvbandwidth: str = "never",
    guard: bool = True,
) -> Probe:
    """The node step of gpu.perf or gpu.sdc (kind): named per argv, since probes are told apart by
    name. Its timeout covers the guard, the probe's bound and nvbandwidth's."""
    nvb_s = NVBANDWIDTH_TIMEOUT_S if nvbandwidth != "never" else 0
    args = (
        "1" if guard else "0",
        str(bound_s),
        str(OUTPUT_CAP),
        nvbandwidth,
        str(NVBANDWIDTH_TIMEOUT_S),
        guarded_image(target),
        *launcher(target),
        *probe_args,
    )
    digest = hashlib.sha256("\0".join(args).encode()).hexdigest()[:10]
    return Probe(
        f"{kind}:{digest}",
        ("sh", "-c", _STEP_SCRIPT, f"nodecheck-{kind}", *args),
        timeout_s=bound_s + nvb_s + GUARD_S + 30,
        stdin=BENCH_PROBE_SCRIPT,
    )
