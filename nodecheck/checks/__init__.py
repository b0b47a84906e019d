"""The checks nodecheck knows; importing this package registers them (this list is the table of contents)."""
from nodecheck.checks import ib  # noqa: F401  ib.ports
from nodecheck.checks import gpu  # noqa: F401  gpu.count, gpu.health, gpu.processes, gpu.driver, cuda.version
from nodecheck.checks import kernel  # noqa: F401  gpu.xid, node.oom
from nodecheck.checks import versions  # noqa: F401  kernel.version, os.release, ofed.version, nccl.*, hca.firmware
from nodecheck.checks import container  # noqa: F401  container.digest
from nodecheck.checks import ib_counters  # noqa: F401  ib.counters
from nodecheck.checks import ib_pairs  # noqa: F401  ib.pairs
from nodecheck.checks import roce  # noqa: F401  roce.gids, roce.networkmanager, roce.gid_stability
from nodecheck.checks import nccl_tests  # noqa: F401  nccl.allreduce_single, nccl.allreduce_multi
from nodecheck.checks import nccl_env  # noqa: F401  nccl.env
