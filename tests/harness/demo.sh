#!/bin/bash
# README command 1:  sudo bash tests/harness/demo.sh [extra `nodecheck run` args, e.g. --format json]
#
# Starts an 8-node simulated cluster (real sshd per node, in a private network namespace),
# gives the nodes the DEMO faults (tests/harness/scenarios.py), runs
#   nodecheck run <state>/hosts.yml --playbook demo
# prints its report, tears everything down, and exits with nodecheck's exit code.
#   node1 node2 node4  healthy: 8 NDR InfiniBand ports at 400 Gb/s
#   node3              one IB port down (Polling)
#   node5              one link at 200 Gb/s
#   node6              ibstat hangs (timeout after 5 s)
#   node7              ibstat is not installed
#   node8              unreachable (its sshd is stopped)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
nc_sandbox tests/harness/demo.sh demo
export NODECHECK_HARNESS_DIR=$NC_TMP/sim

nc_in_netns "$NC_NS" bash tests/harness/ssh_nodes.sh up 8 >/dev/null
# narration goes to stderr, so stdout is nodecheck's alone (e.g. with --format json)
{
  echo "Simulated cluster: 8 nodes, each a real sshd with its own host key (127.0.1.1-8:22, private network namespace)"
  nc_in_netns "$NC_NS" .venv/bin/python tests/harness/scenarios.py --state-dir "$NODECHECK_HARNESS_DIR" apply demo
  echo
  echo "\$ nodecheck run $NODECHECK_HARNESS_DIR/hosts.yml --playbook demo $*"
} >&2
rc=0
nc_in_netns "$NC_NS" .venv/bin/nodecheck run "$NODECHECK_HARNESS_DIR/hosts.yml" --playbook demo "$@" || rc=$?
echo >&2
case $rc in
  0) why="every node passed - NOT what this demo should give (node3 and node5 are broken)" ;;
  1) why="warnings only - NOT what this demo should give (node3 and node5 should fail)" ;;
  2) why="at least one node failed a check - as expected: node3 (IB port down) and node5 (200 Gb/s link) are unfit; node6-8 could not be judged (timeout, missing ibstat, unreachable)" ;;
  3) why="could not judge some nodes and nothing failed - NOT what this demo should give (node3 and node5 should fail)" ;;
  64) why="bad input (inventory, playbook or arguments); nothing was run" ;;
  *) why="unexpected exit code: nodecheck itself failed" ;;
esac
echo "nodecheck exit code $rc: $why" >&2
echo "(exit codes: 0 all pass, 1 warnings only, 2 any failure, 3 could not judge without failure, 64 bad input)" >&2
exit "$rc"
