#!/bin/bash
# Remediation's cost on a health check, and a GPU reset's drain-to-resume time, on a simulated cluster with a
# real Slurm: sudo bash benchmarks/remedy.sh [--repeat 5]. Runs benchmarks/bench_remedy.py in its own sandbox.
set -euo pipefail
. "$(dirname "$0")/../tests/harness/lib.sh"
nc_sandbox benchmarks/remedy.sh remedy
nc_in_netns "$NC_NS" .venv/bin/python benchmarks/bench_remedy.py --state-dir "$NC_TMP/sim" "$@"
