#!/bin/bash
# Fan-out benchmark: sudo bash benchmarks/run.sh [--nodes 128] [--repeat 5] [--fanout 64]
# Brings up its own simulated cluster inside a private network namespace, runs
# benchmarks/bench_fanout.py there, prints a markdown table, tears everything down.
set -euo pipefail
. "$(dirname "$0")/../tests/harness/lib.sh"
nc_sandbox benchmarks/run.sh bench
mkdir -p benchmarks/results
nc_in_netns "$NC_NS" .venv/bin/python benchmarks/bench_fanout.py --state-dir "$NC_TMP/sim" \
  --json "benchmarks/results/fanout-$(date -u +%Y%m%dT%H%M%SZ).json" "$@"
