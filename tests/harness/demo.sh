#!/bin/bash
# README command 1:  sudo bash tests/harness/demo.sh [extra `nodecheck run` args, e.g. --format json]
#
# Starts a 10-node simulated cluster (real sshd per node, in a private network namespace),
# gives the nodes the DEMO faults (tests/harness/scenarios.py), runs
#   nodecheck run <state>/hosts.yml --playbook demo
# prints its report (and where its report.html is), tears everything down, and exits with nodecheck's
# exit code.
# Each node is an 8x H100 node: GPUs behind a fake nvidia-ml-py (the real NVML probe runs over SSH
# stdin), recorded ibstat / dmesg / ldconfig / ofed_info / docker outputs. One fault per node:
#   node1  healthy
#   node2  a different NCCL than the other nodes (2.21.5 vs 2.29.2)    -> nccl.version fail
#   node3  one IB port down (Polling)                                  -> ib.ports fail
#   node4  GPU3 has a row remap pending                                -> gpu.health fail
#   node5  the job's image has another digest (stale image)            -> container.digest fail
#   node6  ibstat hangs                                                -> timeout after 5 s
#   node7  a GPU fell off the bus (kernel log)                         -> gpu.xid fail (Xid 79)
#   node8  unreachable (its sshd is stopped)
#   node9  slow HCAs: every pair test through it is slow                -> ib.pairs fail (bad node)
#          and every nccl-tests run across nodes that includes it       -> nccl.allreduce_multi fail (bad node)
#   node10 mlx5_3's link went down during the run (LinkDownedCounter +1) -> ib.counters fail
# Every reachable node also passes the node checks (fs.mounts, fs.free, mem, cpu, proc.health,
# kernel.modules, services, time.sync, time.skew, limits, pcie.acs): a real FUSE mount at /mnt/shared,
# its own /dev/shm, a 2 TiB node's meminfo and EDAC tree, recorded lscpu/lsmod/lspci/chronyc/ps, the
# daemons running (tests/harness/README.md, "The node itself"; their faults: scenario node-checks).
# Every node also runs the pair tests (the fake ib_write_bw rendezvouses over real TCP between nodes),
# nccl-tests on its own (fake all_reduce_perf) and with the others through a fake mpirun (real ssh,
# ranks meeting over real TCP).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
nc_sandbox tests/harness/demo.sh demo
export NODECHECK_HARNESS_DIR=$NC_TMP/sim

nc_in_netns "$NC_NS" bash tests/harness/ssh_nodes.sh up 10 >/dev/null
# narration goes to stderr, so stdout is nodecheck's alone (e.g. with --format json)
{
  echo "Simulated cluster: 10 nodes, each a real sshd with its own host key (127.0.1.1-10:22, private network namespace)"
  nc_in_netns "$NC_NS" .venv/bin/python tests/harness/scenarios.py --state-dir "$NODECHECK_HARNESS_DIR" apply demo
  echo
  echo "\$ nodecheck run $NODECHECK_HARNESS_DIR/hosts.yml --playbook demo --html $*"
} >&2
rc=0
# --html: the report's report.html (open it in a browser; docs/html-report.md) is named on stderr
nc_in_netns "$NC_NS" .venv/bin/nodecheck run "$NODECHECK_HARNESS_DIR/hosts.yml" --playbook demo --html "$@" || rc=$?
echo >&2
case $rc in
  0) why="every node passed - NOT what this demo should give (node2-5, node7, node9 and node10 are broken)" ;;
  1) why="warnings only - NOT what this demo should give (node2-5, node7, node9 and node10 should fail)" ;;
  2) why="at least one node failed a check - as expected: node2 (NCCL drift), node3 (IB port down), node4 (row remap pending), node5 (stale image), node7 (GPU fell off the bus), node9 (slow in every pair test and nccl-tests run) and node10 (a link went down during the run) are unfit; node6 timed out and node8 is unreachable; node1 passed" ;;
  3) why="could not judge some nodes and nothing failed - NOT what this demo should give (node2-5, node7, node9 and node10 should fail)" ;;
  64) why="bad input (inventory, playbook or arguments); nothing was run" ;;
  *) why="unexpected exit code: nodecheck itself failed" ;;
esac
echo "nodecheck exit code $rc: $why" >&2
echo "(exit codes: 0 all pass, 1 warnings only, 2 any failure, 3 could not judge without failure, 64 bad input)" >&2
exit "$rc"
