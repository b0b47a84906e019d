"""kernel.modules: the kernel modules GPU and RDMA work needs are loaded, and conflicting ones are not."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from nodecheck.core.model import Status, Verdict
from nodecheck.core.registry import Captures, check
from nodecheck.parsers.modules import canonical
from nodecheck.probes.kernel_state import ModuleFacts, modules_probe, read_modules

_MODULE = re.compile(r"[A-Za-z0-9_-]{1,64}", re.ASCII)


def _module_name(name: str) -> str:
    if not _MODULE.fullmatch(name) or name.startswith("-"):
        raise ValueError(f"{name!r} is not a kernel module name like nvidia_peermem")
    return canonical(name)


ModuleName = Annotated[str, AfterValidator(_module_name)]
Group = ModuleName | list[ModuleName]  # a list: any one of them (nvidia_peermem or the older nv_peer_mem)

# what a missing or present module costs, for the message
WHY_REQUIRED = {
    "nvidia": "the GPUs have no driver",
    "nvidia_uvm": "CUDA cannot initialise (unified memory)",
    "nvidia_peermem": "GPUDirect RDMA is off: NCCL stages through host memory, inter-node bandwidth drops",
    "nv_peer_mem": "GPUDirect RDMA is off: NCCL stages through host memory, inter-node bandwidth drops",
    "ib_core": "no RDMA stack",
    "mlx5_ib": "the ConnectX HCAs have no RDMA driver",
    "gdrdrv": "GDRCopy is unavailable (NCCL and UCX fall back to slower copies)",
}
WHY_FORBIDDEN = {"nouveau": "the open-source nouveau driver holds the GPUs, so nvidia cannot"}


class KernelModules(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    required: list[Group] = Field(
        default_factory=lambda: list[Group](["nvidia", "nvidia_uvm"]),
        description="modules that must be loaded; a list inside the list: any one of them "
        "([nvidia_peermem, nv_peer_mem])",
    )
    recommended: list[Group] = Field(default_factory=list, description="modules whose absence only warns (gdrdrv)")
    forbidden: list[ModuleName] = Field(
        default_factory=lambda: ["nouveau"], description="modules that must not be loaded"
    )

    def names(self) -> list[str]:
        return sorted({n for g in (*self.required, *self.recommended) for n in _alternatives(g)} | set(self.forbidden))


def _alternatives(group: str | Sequence[str]) -> tuple[str, ...]:
    return (group,) if isinstance(group, str) else tuple(group)


def probes(want: KernelModules):
    return [modules_probe(want.names())]


@check("kernel.modules", probes=probes, params=KernelModules)
def modules(out: Captures, want: KernelModules) -> Iterator[Verdict]:
    """Required kernel modules are loaded (nvidia, nvidia_uvm; a profile adds nvidia_peermem or
    nv_peer_mem, ib_core, mlx5_ib): without nvidia_peermem GPUDirect RDMA is silently off and
    inter-node bandwidth drops; forbidden ones (nouveau) are not.

    Read from `lsmod`, else /proc/modules; a module named as another's user is loaded too (a
    filtered listing), and a module built into the kernel counts as loaded (/sys/module/NAME without
    initstate). A module that is Loading or Unloading is not loaded."""
    facts = read_modules(out, probes(want)[0])
    for group in want.required:
        yield _required(group, facts, Status.FAIL)
    for group in want.recommended:
        yield _required(group, facts, Status.WARN)
    for name in want.forbidden:
        yield _forbidden(name, facts)


def _how(name: str, facts: ModuleFacts) -> str | None:
    """How `name` is seen loaded ("" when listed and Live), or None when it is not."""
    module = facts.loaded.modules.get(name)
    if module is not None:
        return "" if module.state == "Live" else None
    if name in facts.loaded.holders:
        return f"seen as a user of another module in {facts.source}"
    if name in facts.builtin:
        return "built into the kernel"
    return None


def _required(group: str | Sequence[str], facts: ModuleFacts, missing: Status) -> Verdict:
    names = _alternatives(group)
    label = " or ".join(names)
    for name in names:
        how = _how(name, facts)
        if how is not None:
            note = f" ({how})" if how else ""
            return Verdict(Status.PASS, f"{name} loaded{note}", names[0], {"loaded": name}, {"loaded": list(names)})
    stuck = [m for n in names if (m := facts.loaded.modules.get(n)) is not None]
    why = next((WHY_REQUIRED[n] for n in names if n in WHY_REQUIRED), "")
    if stuck:
        seen = f"{stuck[0].name} is {stuck[0].state} ({facts.source}), expected Live"
    else:
        seen = f"{label} not loaded ({facts.source}), expected loaded"
    return Verdict(
        missing,
        seen + (f": {why}" if why else ""),
        names[0],
        {"loaded": None, "state": stuck[0].state if stuck else None},
        {"loaded": list(names)},
    )


def _forbidden(name: str, facts: ModuleFacts) -> Verdict:
    how = _how(name, facts)
    if how is None and name not in facts.loaded.modules:
        return Verdict(Status.PASS, f"{name} not loaded", name, {"loaded": False}, {"loaded": False})
    why = WHY_FORBIDDEN.get(name, "")
    where = f" ({how})" if how else f" ({facts.source})"
    return Verdict(
        Status.FAIL,
        f"{name} loaded{where}, expected not loaded" + (f": {why}" if why else ""),
        name,
        {"loaded": True},
        {"loaded": False},
    )
