#!/bin/bash
# GPU benchmark (gpu.perf + gpu.sdc) cost on a simulated cluster: sudo bash benchmarks/gpu.sh [--nodes 16]
# Brings up its own cluster inside a private network namespace, runs benchmarks/bench_gpu_cluster.py
# there (real `nodecheck run` over SSH; the real probe on each node's python3 over the fake CuPy),
# prints a markdown table, tears everything down.
set -euo pipefail
. "$(dirname "$0")/../tests/harness/lib.sh"
nc_sandbox benchmarks/gpu.sh gpu
nc_in_netns "$NC_NS" .venv/bin/python benchmarks/bench_gpu_cluster.py --state-dir "$NC_TMP/sim" "$@"
