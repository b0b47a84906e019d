"""The checks nodecheck knows, and the module that registers each (this table is the table of
contents; tests/checks/test_contents.py holds it to what the modules register).

A command imports only the modules of the checks its playbook names (checks_named): the node Prolog
starts before every job, and importing all 36 modules cost it about a tenth of a second."""

from __future__ import annotations

import functools
import importlib
from collections.abc import Iterable, Mapping

from nodecheck.core.registry import CHECKS, CheckSpec

# check name -> its module under nodecheck.checks, in the order `nodecheck checks` lists them
CONTENTS: dict[str, str] = {
    "command": "command",
    "container.digest": "container",
    "mem": "mem",
    "cpu": "cpu",
    "gpu.count": "gpu",
    "gpu.health": "gpu",
    "gpu.processes": "gpu",
    "gpu.driver": "gpu",
    "gpu.vbios": "gpu",
    "gpu.gsp_firmware": "gpu",
    "cuda.version": "cuda",
    "fs.mounts": "fs",
    "fs.free": "fs",
    "gpu.dcgm_diag": "gpu_dcgm",
    "gpu.perf": "gpu_perf",
    "gpu.sdc": "gpu_sdc",
    "gpu.xid": "gpu_xid",
    "ib.ports": "ib",
    "hca.firmware": "hca",
    "ib.counters": "ib_counters",
    "ib.pairs": "ib_pairs",
    "kernel.version": "kernel",
    "kernel.cmdline": "kernel_cmdline",
    "kernel.modules": "kernel_modules",
    "kernel.params": "kernel_params",
    "limits": "limits",
    "nccl.version": "nccl",
    "nccl.settings": "nccl",
    "nccl.allreduce_single": "nccl_allreduce",
    "nccl.allreduce_multi": "nccl_allreduce",
    "nccl.env": "nccl_env",
    "node.oom": "node",
    "nvidia.libraries": "nvidia",
    "services": "services",
    "nvlink.fabric": "nvlink",
    "nvlink.domain": "nvlink",
    "nvlink.errors": "nvlink_errors",
    "nvlink.sxid": "nvlink_sxid",
    "ofed.version": "ofed",
    "os.release": "os",
    "pcie.acs": "pcie",
    "pcie.aer": "pcie",
    "proc.health": "proc",
    "roce.gids": "roce",
    "roce.networkmanager": "roce",
    "roce.gid_stability": "roce",
    "time.sync": "time",
    "time.skew": "time_skew",
}


def _load(modules: Iterable[str]) -> None:
    for module in dict.fromkeys(modules):  # importing registers the module's checks (once)
        importlib.import_module(f"nodecheck.checks.{module}")


@functools.cache  # once every module is loaded the registry no longer changes (`facts` asks per node)
def all_checks() -> Mapping[str, CheckSpec]:
    """Every registered check, by name, in the table's order."""
    _load(CONTENTS.values())
    return {name: CHECKS[name] for name in CONTENTS}


def checks_named(names: Iterable[str]) -> Mapping[str, CheckSpec]:
    """The registry with at least the named checks in it, importing only their modules. A name the
    table does not know (a typo, whose "did you mean" needs every name) loads them all; a template's
    `<family>.<label>` loads its family's."""
    modules = []
    for name in names:
        module = CONTENTS.get(name)
        if module is None:
            family = name.partition(".")[0]
            if family not in CONTENTS:
                return all_checks()
            _load([CONTENTS[family]])
            if not CHECKS[family].template:  # `limits.x`: a typo, not a label
                return all_checks()
            module = CONTENTS[family]
        modules.append(module)
    _load(modules)
    return CHECKS
