"""The simulated cluster, one module per concern; tests/harness/cluster.py composes them into SimCluster.

base.py          the state directory, ssh_nodes.sh, node names and addresses, writing a node's files
nodes.py         the nodes themselves: start/stop, host keys, SSH sessions (drop, reset, hang), a client
tools.py         fake tools in a node's /usr/local/sbin: replays, hangs, exits, sequences, pynvml, py-spy
fabric.py        the RDMA fabric: sysfs views, RoCE ports on veths (rdma_driver.py), the fake ib_write_bw
nccl.py          the fake nccl-tests and their launchers (tests/fakes/nccl_tests/)
training.py      training jobs for `nodecheck watch` (tests/fakes/trainer.py, gpu_telemetry.py)
node_state.py    the node itself: /mnt/shared (FUSE, tests/fakes/hangfs.py), /dev/shm, /proc, EDAC, services, clock
ranks.py         hung ranks for `nodecheck forensics` (tests/fakes/hung_rank.py, freeze.py)
slurm.py         a real Slurm: slurmctld and a slurmd per node (slurm_cluster.sh)
common.py        paths of the fakes, HarnessError, files and processes (atomic writes, pid files)
"""
