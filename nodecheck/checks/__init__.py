"""The checks nodecheck knows; importing this package registers them (this list is the table of contents)."""

# Below the table of contents on purpose: the imports above fill the registry this reads.
from collections.abc import Mapping

from nodecheck.checks import (
    command,  # noqa: F401  command (command.<label> in a playbook)
    container,  # noqa: F401  container.digest
    cpu,  # noqa: F401  cpu
    cuda,  # noqa: F401  cuda.version
    fs,  # noqa: F401  fs.mounts, fs.free
    gpu,  # noqa: F401  gpu.count, gpu.health, gpu.processes, gpu.driver, gpu.vbios, gpu.gsp_firmware
    gpu_dcgm,  # noqa: F401  gpu.dcgm_diag
    gpu_perf,  # noqa: F401  gpu.perf
    gpu_sdc,  # noqa: F401  gpu.sdc
    gpu_xid,  # noqa: F401  gpu.xid
    hca,  # noqa: F401  hca.firmware
    ib,  # noqa: F401  ib.ports
    ib_counters,  # noqa: F401  ib.counters
    ib_pairs,  # noqa: F401  ib.pairs
    kernel,  # noqa: F401  kernel.version
    kernel_cmdline,  # noqa: F401  kernel.cmdline
    kernel_modules,  # noqa: F401  kernel.modules
    kernel_params,  # noqa: F401  kernel.params
    limits,  # noqa: F401  limits
    mem,  # noqa: F401  mem
    nccl,  # noqa: F401  nccl.version, nccl.settings
    nccl_allreduce,  # noqa: F401  nccl.allreduce_single, nccl.allreduce_multi
    nccl_env,  # noqa: F401  nccl.env
    node,  # noqa: F401  node.oom
    nvidia,  # noqa: F401  nvidia.libraries
    nvlink,  # noqa: F401  nvlink.fabric, nvlink.domain
    nvlink_errors,  # noqa: F401  nvlink.errors
    nvlink_sxid,  # noqa: F401  nvlink.sxid
    ofed,  # noqa: F401  ofed.version
    os,  # noqa: F401  os.release
    pcie,  # noqa: F401  pcie.acs, pcie.aer
    proc,  # noqa: F401  proc.health
    roce,  # noqa: F401  roce.gids, roce.networkmanager, roce.gid_stability
    services,  # noqa: F401  services
    time,  # noqa: F401  time.sync
    time_skew,  # noqa: F401  time.skew
)
from nodecheck.core.registry import CHECKS, CheckSpec


def all_checks() -> Mapping[str, CheckSpec]:
    """Every registered check, by name."""
    return CHECKS
