#!/bin/bash
# srun transport vs SSH under a real Slurm: sudo bash benchmarks/srun.sh [--nodes 64] [--repeat 5]
# Brings up a simulated cluster and a real Slurm (slurmctld + a slurmd per node) inside a private
# network namespace, runs benchmarks/bench_srun.py there, prints a markdown table, tears down.
set -euo pipefail
. "$(dirname "$0")/../tests/harness/lib.sh"
nc_sandbox benchmarks/srun.sh srun
mkdir -p benchmarks/results
nc_in_netns "$NC_NS" .venv/bin/python benchmarks/bench_srun.py --state-dir "$NC_TMP/sim" \
  --json "benchmarks/results/srun-$(date -u +%Y%m%dT%H%M%SZ).json" "$@"
