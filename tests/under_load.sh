#!/bin/bash
# The tests that must hold on a busy machine, run again beside a CPU hog (issue 32, 2.5):
#   sudo bash tests/under_load.sh        (.ci/run runs it after tests/run_all.sh)
#
# A user's CI box is shared: beside 2 x nproc busy processes, through tests/run_all.sh,
#   1. the linear-time tests (-m growth): proved by growth in CPU time (tests/growth.py), not by seconds
#   2. the watcher's integration tests (tests/integration/test_watch.py: they measure their pace and wait
#      on state) and the py-spy rank tests (tests/parsers/test_pyspy.py: a rank is stopped once asleep)
# The hog ends on every exit path: the EXIT trap kills it, and each busy loop also ends by itself once
# this script is gone (even SIGKILLed), since it spins only while its parent lives.
# Exit code: the first failing stage's, 0 when both pass. A few minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."

hogs=()
stop_hogs() {
  local pid
  for pid in "${hogs[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${hogs[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  hogs=()
}
trap stop_hogs EXIT
trap 'exit 130' INT # exiting runs the EXIT trap
trap 'exit 143' TERM

busy=$((2 * $(nproc)))
for ((i = 0; i < busy; i++)); do
  # kill -0 is a shell builtin: no fork, the loop is all CPU, and it stops when this script is gone
  sh -c 'while kill -0 "$1" 2>/dev/null; do :; done' hog $$ &
  hogs+=($!)
done
started=$SECONDS
echo "under_load.sh: $busy busy processes beside the tests (nproc $(nproc))"

rc=0
bash tests/run_all.sh -m growth || rc=$?
stage_rc=0
bash tests/run_all.sh tests/integration/test_watch.py tests/parsers/test_pyspy.py || stage_rc=$?
((rc != 0)) || rc=$stage_rc

stop_hogs
echo "under_load.sh: $((SECONDS - started)) s beside the hog; exit $rc"
exit "$rc"
