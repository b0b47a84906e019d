# Shell helpers shared by tests/run_all.sh, tests/harness/demo.sh and tests/harness/netns.sh.
# Source it; it defines functions only (no side effects).
#
#   nc_netns_create NAME [NET]   private network namespace: lo up, NET.0/24 (default 127.0.1) on lo
#   nc_netns_delete NAME         delete it (no error if absent)
#   nc_in_netns NAME CMD...      run CMD inside it (nsenter --net, NOT `ip netns exec`)
#
# Why nsenter: `ip netns exec` also remounts /sys, and slurmd dies without /sys/fs/cgroup.
# Why NET.0/24 on lo: 127.0.0.0/8 is already routed on lo, but glibc's AI_ADDRCONFIG ignores
# 127.0.0.1, and slurmctld/srun fail in a namespace that has nothing else (RECIPE §3.1).

NC_REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
NC_HARNESS=$NC_REPO_ROOT/tests/harness

nc_die() { echo "error: $*" >&2; exit 1; }

nc_require_root() {
  [ "$(id -u)" = 0 ] || nc_die "${1:-this script} must run as root (try: sudo bash ${1:-$0})"
}

nc_netns_create() {
  local name=$1 net=${2:-${NODECHECK_HARNESS_NET:-127.0.1}}
  [[ $name =~ ^[A-Za-z0-9_.-]+$ ]] || nc_die "bad netns name: $name"
  # a namespace of that name can only be a leftover of a dead run (names carry a pid)
  [ -e "/run/netns/$name" ] && ip netns del "$name" 2>/dev/null
  ip netns add "$name" || nc_die "ip netns add $name failed"
  ip -n "$name" link set lo up
  ip -n "$name" addr add "$net.0/24" dev lo
}

# The ONE mapping from a node index to its address (Python twin: harness.sim.base.node_address):
# node i of NET a.b.c is a.b.(c + (i-1)/254).((i-1)%254 + 1), so N <= 254 keeps a.b.c.1..N and the
# cluster grows by /24 blocks (node255 = a.b.(c+1).1). No fork: the result goes into variable VAR.
#   nc_node_addr VAR NET I
NC_MAX_NODES=2540   # ten /24 blocks
nc_node_addr() {
  local -n _nc_out=$1
  local net=$2 i=$3
  _nc_out="${net%.*}.$((${net##*.} + (i - 1) / 254)).$(((i - 1) % 254 + 1))"
}

nc_netns_delete() {
  [ -e "/run/netns/$1" ] || return 0
  ip netns del "$1" 2>/dev/null || true
}

nc_in_netns() {
  local name=$1; shift
  nsenter --net="/run/netns/$name" "$@"
}

# The common start of every entry script (tests, demo, benchmark): root, the repo root as cwd,
# setup.sh, a private network namespace $NC_NS and a temp dir $NC_TMP. On exit, whatever
# simulated cluster lives in $NC_TMP/sim (Slurm first, then the nodes) is stopped, then the
# namespace and the temp dir go.
nc_sandbox() {
  local script=$1 label=$2
  nc_require_root "$script"
  cd "$NC_REPO_ROOT"
  bash tests/harness/setup.sh
  NC_NS=nodecheck-$label-$$
  NC_TMP=$(mktemp -d "${TMPDIR:-/tmp}/nodecheck-$label.XXXXXX")
  trap nc_sandbox_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  nc_netns_create "$NC_NS"
}

nc_sandbox_cleanup() {
  # Slurm first: slurmctld and the harness's munged run outside the nodes, so ssh_nodes.sh down
  # would not stop them (slurm_cluster.sh finds them even when the state dir is already gone)
  NODECHECK_HARNESS_DIR=$NC_TMP/sim bash "$NC_HARNESS/slurm_cluster.sh" down >/dev/null 2>&1 \
    || echo "warning: stopping the simulated Slurm cluster failed ($NC_TMP/sim/slurm)" >&2
  NODECHECK_HARNESS_DIR=$NC_TMP/sim bash "$NC_HARNESS/ssh_nodes.sh" down >/dev/null 2>&1 \
    || echo "warning: stopping the simulated cluster failed ($NC_TMP/sim)" >&2
  # the fault suite's own cluster (tests/faults/conftest.py), beside the integration tests' one
  if [ -d "$NC_TMP/sim-faults" ]; then
    NODECHECK_HARNESS_DIR=$NC_TMP/sim-faults bash "$NC_HARNESS/slurm_cluster.sh" down >/dev/null 2>&1 || true
    NODECHECK_HARNESS_DIR=$NC_TMP/sim-faults bash "$NC_HARNESS/ssh_nodes.sh" down >/dev/null 2>&1 \
      || echo "warning: stopping the fault suite's cluster failed ($NC_TMP/sim-faults)" >&2
  fi
  nc_netns_delete "$NC_NS"
  rm -rf -- "$NC_TMP"
}
