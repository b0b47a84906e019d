#!/bin/bash
# Slurm gate benchmark: sudo bash benchmarks/prolog.sh [--nodes 10] [--repeat 5]
# Brings up a simulated cluster and a real Slurm (slurmctld + a slurmd per node) inside a private
# network namespace, runs benchmarks/bench_prolog.py there, prints a markdown table, tears down.
set -euo pipefail
. "$(dirname "$0")/../tests/harness/lib.sh"
nc_sandbox benchmarks/prolog.sh prolog
nc_in_netns "$NC_NS" .venv/bin/python benchmarks/bench_prolog.py --state-dir "$NC_TMP/sim" "$@"
