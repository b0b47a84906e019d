#!/bin/bash
# Forensics benchmark: sudo bash benchmarks/forensics.sh [--nodes 16] [--ranks-per-node 8] [--repeat 3]
# Brings up a simulated cluster inside a private network namespace, starts fake ranks hung in
# collectives on every node (one rank in another collective: the epoch-end deadlock), places each
# rank's flight-recorder dump, runs `nodecheck forensics` (real SSH, real py-spy on every rank), prints
# what it cost, tears down.
set -euo pipefail
. "$(dirname "$0")/../tests/harness/lib.sh"
nc_sandbox benchmarks/forensics.sh forensics
nc_in_netns "$NC_NS" .venv/bin/python benchmarks/bench_forensics_cluster.py --state-dir "$NC_TMP/sim" "$@"
