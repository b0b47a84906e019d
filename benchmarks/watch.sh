#!/bin/bash
# Watcher benchmark: sudo bash benchmarks/watch.sh [--nodes 64] [--ticks 10] [--interval 2]
# Brings up a simulated cluster inside a private network namespace, starts a time-compressed healthy
# training run on every node (fake trainer + fake nvidia-smi), runs `nodecheck watch` for a number
# of ticks, prints what each tick cost the watcher, tears down.
set -euo pipefail
. "$(dirname "$0")/../tests/harness/lib.sh"
nc_sandbox benchmarks/watch.sh watch
nc_in_netns "$NC_NS" .venv/bin/python benchmarks/bench_watch_cluster.py --state-dir "$NC_TMP/sim" "$@"
