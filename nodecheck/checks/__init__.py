"""The checks nodecheck knows; importing this package registers them (this list is the table of contents)."""
from nodecheck.checks import ib  # noqa: F401  ib.ports
from nodecheck.checks import gpu  # noqa: F401  gpu.count, gpu.health, gpu.processes, gpu.driver
from nodecheck.checks import cuda  # noqa: F401  cuda.version
from nodecheck.checks import gpu_xid  # noqa: F401  gpu.xid
from nodecheck.checks import node  # noqa: F401  node.oom
from nodecheck.checks import kernel  # noqa: F401  kernel.version
from nodecheck.checks import os  # noqa: F401  os.release
from nodecheck.checks import ofed  # noqa: F401  ofed.version
from nodecheck.checks import nccl  # noqa: F401  nccl.version, nccl.settings
from nodecheck.checks import hca  # noqa: F401  hca.firmware
from nodecheck.checks import container  # noqa: F401  container.digest
from nodecheck.checks import ib_counters  # noqa: F401  ib.counters
from nodecheck.checks import ib_pairs  # noqa: F401  ib.pairs
from nodecheck.checks import roce  # noqa: F401  roce.gids, roce.networkmanager, roce.gid_stability
from nodecheck.checks import nccl_allreduce  # noqa: F401  nccl.allreduce_single, nccl.allreduce_multi
from nodecheck.checks import nccl_env  # noqa: F401  nccl.env


# Below the table of contents on purpose: the imports above fill the registry this reads.
from collections.abc import Mapping

from nodecheck.core.registry import CHECKS, CheckSpec


def all_checks() -> Mapping[str, CheckSpec]:
    """Every registered check, by name."""
    return CHECKS
