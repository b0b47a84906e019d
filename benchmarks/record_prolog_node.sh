#!/bin/bash
# Record one simulated node's answers to the prolog playbook: sudo bash benchmarks/record_prolog_node.sh
set -euo pipefail
. "$(dirname "$0")/../tests/harness/lib.sh"
nc_sandbox benchmarks/record_prolog_node.sh h2-record
nc_in_netns "$NC_NS" .venv/bin/python benchmarks/record_prolog_node.py --state-dir "$NC_TMP/sim" "$@"
