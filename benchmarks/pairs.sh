#!/bin/bash
# Pair-test benchmark on a simulated cluster: sudo bash benchmarks/pairs.sh [--nodes 32]
# Brings up its own cluster inside a private network namespace, runs benchmarks/bench_pairs_cluster.py
# there (real `nodecheck run` over SSH; the fake ib_write_bw rendezvouses over real TCP), prints a
# markdown table, tears everything down. The pure planner benchmark is benchmarks/bench_pairs.py.
set -euo pipefail
. "$(dirname "$0")/../tests/harness/lib.sh"
nc_sandbox benchmarks/pairs.sh pairs
nc_in_netns "$NC_NS" .venv/bin/python benchmarks/bench_pairs_cluster.py --state-dir "$NC_TMP/sim" "$@"
