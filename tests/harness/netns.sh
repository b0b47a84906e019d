#!/bin/bash
# Private network namespace for the simulated cluster (root only).
#   netns.sh create NAME [NET]   lo up + NET.0/24 on lo (NET default $NODECHECK_HARNESS_NET or 127.0.1)
#   netns.sh delete NAME
#   netns.sh exec NAME CMD...    = nsenter --net=/run/netns/NAME CMD...
# Delete a namespace only after everything started in it has stopped (ssh_nodes.sh down):
# `ip netns del` removes the name, processes inside would keep the namespace alive.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
nc_require_root "tests/harness/netns.sh"
case "${1:-}" in
  create) [ $# -ge 2 ] || nc_die "usage: $0 create NAME [NET]"; nc_netns_create "$2" "${3:-}" ;;
  delete) [ $# -eq 2 ] || nc_die "usage: $0 delete NAME"; nc_netns_delete "$2" ;;
  exec) [ $# -ge 3 ] || nc_die "usage: $0 exec NAME CMD..."; name=$2; shift 2; nc_in_netns "$name" "$@" ;;
  *) echo "usage: $0 create NAME [NET] | delete NAME | exec NAME CMD..." >&2; exit 2 ;;
esac
