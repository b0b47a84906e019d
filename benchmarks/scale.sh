#!/bin/bash
# Thousand-node scale (issue 22): sudo bash benchmarks/scale.sh [--nodes 1024] [bench_scale.py options]
# Brings up ONE simulated cluster of --nodes (default 1,024; lib.sh nc_node_addr: several /24s) in a
# private network namespace, timing `up` and the memory the nodes hold; runs benchmarks/bench_scale.py
# on it (nodecheck vs pdsh at 128..1,024 nodes, --nodes subsets), then benchmarks/bench_controller.py
# (prolog --controller for a 128- and a 1,024-node job); prints markdown tables; tears down (timed).
set -euo pipefail
. "$(dirname "$0")/../tests/harness/lib.sh"
nodes=1024
if [ "${1:-}" = --nodes ]; then nodes=$2; shift 2; fi
nc_sandbox benchmarks/scale.sh scale
mkdir -p benchmarks/results
stamp=$(date -u +%Y%m%dT%H%M%SZ)
mem() { awk '/^MemAvailable:/ {print int($2 / 1024)}' /proc/meminfo; }
m0=$(mem); t0=$(date +%s.%N)
nc_in_netns "$NC_NS" env NODECHECK_HARNESS_DIR="$NC_TMP/sim" bash tests/harness/ssh_nodes.sh up "$nodes"
t1=$(date +%s.%N)
echo "cluster up: $nodes nodes in $(echo "$t1 - $t0" | bc) s, $(($m0 - $(mem))) MB of memory held"
nc_in_netns "$NC_NS" .venv/bin/python benchmarks/bench_scale.py --state-dir "$NC_TMP/sim" --reuse \
  --json "benchmarks/results/scale-$stamp.json" "$@"
nc_in_netns "$NC_NS" .venv/bin/python benchmarks/bench_controller.py --state-dir "$NC_TMP/sim" \
  --sizes "128,$nodes" --json "benchmarks/results/controller-$stamp.json"
t0=$(date +%s.%N)
nc_in_netns "$NC_NS" env NODECHECK_HARNESS_DIR="$NC_TMP/sim" bash tests/harness/ssh_nodes.sh down
echo "cluster down: $(echo "$(date +%s.%N) - $t0" | bc) s"
