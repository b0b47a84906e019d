"""The checks nodecheck knows; importing this package registers them (this list is the table of contents)."""

# Below the table of contents on purpose: the imports above fill the registry this reads.
from collections.abc import Mapping

from nodecheck.checks import (
    container,  # noqa: F401  container.digest
    cuda,  # noqa: F401  cuda.version
    gpu,  # noqa: F401  gpu.count, gpu.health, gpu.processes, gpu.driver
    gpu_xid,  # noqa: F401  gpu.xid
    hca,  # noqa: F401  hca.firmware
    ib,  # noqa: F401  ib.ports
    ib_counters,  # noqa: F401  ib.counters
    ib_pairs,  # noqa: F401  ib.pairs
    kernel,  # noqa: F401  kernel.version
    nccl,  # noqa: F401  nccl.version, nccl.settings
    nccl_allreduce,  # noqa: F401  nccl.allreduce_single, nccl.allreduce_multi
    nccl_env,  # noqa: F401  nccl.env
    node,  # noqa: F401  node.oom
    ofed,  # noqa: F401  ofed.version
    os,  # noqa: F401  os.release
    roce,  # noqa: F401  roce.gids, roce.networkmanager, roce.gid_stability
)
from nodecheck.core.registry import CHECKS, CheckSpec


def all_checks() -> Mapping[str, CheckSpec]:
    """Every registered check, by name."""
    return CHECKS
