"""Python API over ssh_nodes.sh: the simulated cluster used by the integration tests and the demo.

    c = SimCluster(state_dir="/tmp/x/sim")   # net/port default to $NODECHECK_HARNESS_NET/_PORT or 127.0.1/22
    c.up(8)                                   # node1..node8 = real sshd at 127.0.1.1..8:22
    c.fake_replay("node3", "ibstat", "tests/data/ibstat/....txt")
    c.fake_hang("node6", "ibstat"); c.stop("node8"); c.rekey("node2")
    ... nodecheck run c.inventory_path ...
    c.reset()                                 # no fakes, every node up with its original key
    c.down()

Needs root, and should run inside a private network namespace (tests/run_all.sh and
tests/harness/demo.sh make one). Nodes keep running after this object is gone; only down()
(or `ssh_nodes.sh down`) stops them. SimCluster(state_dir=...) on a running cluster attaches to it.

SimCluster is composed of one part per concern, each a module of tests/harness/sim/:
    nodes.py     the nodes (a real sshd each): start/stop, host keys, SSH sessions, a client
    tools.py     fake tools (sh scripts in a node's own /usr/local/sbin, canned outputs by absolute path)
    fabric.py    the RDMA fabric: /sys/class/infiniband views, RoCE ports (rdma_driver.py), ib_write_bw
    nccl.py      the fake nccl-tests and their launchers (tests/fakes/nccl_tests/)
    training.py  training jobs for `nodecheck watch` (scenario builders: tests/harness/training.py)
    ranks.py     hung ranks for `nodecheck forensics`
    node_state.py  the node itself: /mnt/shared (FUSE, can hang), /dev/shm, /proc, EDAC, services, clock
    slurm.py     a real slurmctld and a slurmd per node (slurm_cluster.sh)
and base.py / common.py under all of them. This module adds what spans the concerns: down() and reset().
"""

from __future__ import annotations

from harness.sim.common import SCRIPT, SLURM_SCRIPT, HarnessError
from harness.sim.fabric import FABRIC_DEVICES, ROCE_BEHAVIOURS, Fabric
from harness.sim.nccl import NcclTests
from harness.sim.node_state import NodeState
from harness.sim.nodes import Nodes
from harness.sim.ranks import HungRanks
from harness.sim.slurm import Slurm
from harness.sim.tools import Tools
from harness.sim.training import TrainingJobs


class SimCluster(Slurm, TrainingJobs, HungRanks, NodeState, NcclTests, Fabric, Tools, Nodes):
    """The simulated cluster: every part's API on one object (the parts that act on running nodes,
    Slurm, training and ranks, build on Nodes and come first)."""

    def down(self) -> None:
        """Stop everything started on any node (sshd, sessions, hung fakes) and remove state_dir.
        A no-op when nothing is there. A Slurm cluster (slurm_up) is stopped first: its slurmctld
        and munged live outside the nodes."""
        if self.slurm_dir.exists():
            self.slurm_down()
        if self.is_up:
            self.unhang_ssh()  # a stopped sshd would ignore SIGTERM until down's SIGKILL
        self._sh("down", timeout=60)

    def reset(self) -> None:
        """Back to a clean cluster: no fake tools, every node up, every original host key back, no
        RDMA ports (drivers stopped, veths deleted, every /sys/class/infiniband view empty), no
        training (trainers stopped, their files and logs removed), no hung sshd, and every node's own
        state back to its start (/mnt/shared answering, /dev/shm empty, no bind over /proc or EDAC, no
        fake service)."""
        self.unhang_ssh()
        self.clear_ranks()
        self.clear_training()
        self.clear_fabric()
        self.clear_nccl()
        self.clear_tools()
        self._sh("reset", timeout=60)  # also undoes the node-state faults inside each node
        self.clear_node_state()

    def __enter__(self) -> SimCluster:
        return self

    def __exit__(self, *exc) -> None:
        self.down()


__all__ = ["FABRIC_DEVICES", "ROCE_BEHAVIOURS", "SCRIPT", "SLURM_SCRIPT", "HarnessError", "SimCluster"]
