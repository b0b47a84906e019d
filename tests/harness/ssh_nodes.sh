#!/bin/bash
# nodecheck's simulated cluster: N "GPU nodes", each a real OpenSSH sshd (root only).
#
#   ssh_nodes.sh up N            node1..nodeN (N <= 2540) at $NET.1..$NET.254, then the next /24s
#                                (lib.sh nc_node_addr: node255 = a.b.(c+1).1), port $PORT; refuses if already up
#   ssh_nodes.sh down            stop every process started on any node, remove the state dir
#   ssh_nodes.sh stop NODE       "power off" NODE: kill its sshd and everything running on it
#   ssh_nodes.sh start NODE      start a stopped NODE again (same host key)
#   ssh_nodes.sh rekey NODE      give NODE a NEW host key and restart its sshd; known_hosts keeps
#                                the old key, so strict clients now see a host-key mismatch
#   ssh_nodes.sh restore-key NODE  undo rekey
#   ssh_nodes.sh reset           start stopped nodes and undo every rekey (fake tools: see cluster.py)
#   ssh_nodes.sh status          one line per node: name address state pid
#   ssh_nodes.sh pid NODE        sshd pid (run a daemon "on" the node: nsenter -t PID -u -m CMD)
#   ssh_nodes.sh drop-sessions NODE  kill NODE's per-connection sshd processes (not the listener),
#                                as if the clients' network dropped; prints how many
#   ssh_nodes.sh fabric-clear    stop every simulated RDMA driver, delete the nodes' veths (rnic*)
#   NODE is "node3" or "3".
#
# Environment (read by `up`, then remembered in $S/harness.env for the other commands):
#   NODECHECK_HARNESS_DIR   state dir S   (default ${TMPDIR:-/tmp}/nodecheck-harness)
#   NODECHECK_HARNESS_NET   first 3 octets (default 127.0.1)   NODECHECK_HARNESS_PORT (default 22)
#
# Node i runs `sshd -f $S/nodes/nodei/sshd_config` inside its own UTS + mount namespace, where
# `hostname` is nodei, /root is $S/nodes/nodei/home (a clean home) and /usr/local/sbin is
# $S/nodes/nodei/bin: an executable put there is that node's fake tool (first in root's PATH),
# for ssh sessions and for anything else started in the namespace (e.g. a Slurm prolog).
# /usr/local/lib/python3.X/dist-packages is $S/nodes/nodei/py: a fake python module (pynvml) put
# there is importable by the node's python3 only.
# /sys/class/infiniband is $S/nodes/nodei/sys/class/infiniband (empty = no RDMA device): /sys/class is
# a tmpfs in the node, with every real class bound back from a sysfs mounted in the cluster's
# network namespace (so /sys/class/net lists that namespace's interfaces), and /sys/devices from
# the same sysfs so the class symlinks resolve; the rest of /sys (cgroup, ...) is the host's.
# Every node also has (see "The node itself" in README.md): /mnt/shared, a real FUSE mount (fuse.hangfs)
# served by ONE tests/fakes/hangfs.py process for the whole cluster ($S/hangfs.pid), which can hang per
# node ($S/nodes/nodei/shared/hang: pending|held, then SIGUSR1; it answers in .../shared/state);
# /dev/shm, its own 2 GiB tmpfs; /proc/meminfo bound from $S/node-default/meminfo (a recorded 2 TiB
# GPU node); /sys/devices/system a tmpfs with every real entry bound back plus edac from
# $S/node-default/edac (8 memory controllers, 32 DIMMs, counters 0). Faults bind per-node files over
# these inside the node (SimCluster, sim/node_state.py) and write what undoes them to
# $S/nodes/nodei/undo, which `reset` runs in the node.
# Client side files: $S/id_ed25519, $S/authorized_keys, $S/known_hosts, $S/ssh_config,
# $S/hosts.yml (nodecheck inventory), $S/env.sh (exports for pdsh/ssh). /etc/hosts is not touched.
# Processes are tracked by each node's mount-namespace id ($S/nodes/nodei/mntns), so `down` and
# `stop` also end sessions and hung fake tools, not just the sshd listener.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"   # nc_node_addr: the index -> address mapping

S=${NODECHECK_HARNESS_DIR:-${TMPDIR:-/tmp}/nodecheck-harness}
S=$(realpath -m -- "$S")
SSHD=/usr/sbin/sshd
MARK=.nodecheck-harness

die() { echo "ssh_nodes.sh: $*" >&2; exit 1; }

load_env() {   # the settings `up` used
  [ -f "$S/harness.env" ] || die "no simulated cluster at $S (run: up N)"
  # shellcheck disable=SC1091
  . "$S/harness.env"
}

node_index() {   # node3 | 3 -> 3, validated against N
  local a=${1:-}; a=${a#node}
  [[ $a =~ ^[1-9][0-9]*$ ]] && ((a <= N)) || die "no such node: ${1:-<missing>} (have node1..node$N)"
  echo "$a"
}

alive() {   # pid exists and is not a zombie (PID 1 here reaps orphans late)
  local line
  [ -n "${1:-}" ] && read -r line 2>/dev/null < "/proc/$1/stat" || return 1
  line=${line##*) }
  [ "${line%% *}" != Z ]
}

sshd_pid() {   # prints the node's running sshd pid, or fails
  local p=
  read -r p 2>/dev/null < "$S/nodes/node$1/sshd.pid" || true
  alive "$p" && echo "$p"
}

ns_id() { stat -L -c %i "/proc/$1/ns/mnt"; }

# All nodes must listen in the network namespace `up` ran in (usually a private one, see
# lib.sh). NETPFX enters it when a later command (start, reset) runs from elsewhere.
NETPFX=()
try_find_netns() {   # sets NETPFX, or fails when no running node is left to enter
  local i p
  [ "$(stat -L -c %i /proc/$$/ns/net)" = "$NETNS" ] && return 0
  for ((i = 1; i <= N; i++)); do
    p=$(sshd_pid "$i") || continue
    if [ "$(stat -L -c %i "/proc/$p/ns/net" 2>/dev/null)" = "$NETNS" ]; then
      NETPFX=(nsenter "--net=/proc/$p/ns/net"); return 0
    fi
  done
  return 1
}
find_netns() {
  try_find_netns || die "run this in the network namespace the cluster was started in (every node is stopped, none to enter)"
}

# Kill every process whose mount namespace id is one of "$@", TERM first, then KILL.
kill_namespaces() {
  (($#)) || return 0
  local want=" $* " self_ns init_ns line pid ns pids tries sig=TERM
  self_ns=$(ns_id $$); init_ns=$(ns_id 1 2>/dev/null || echo none)   # /proc/1 may be unreadable
  [[ $want == *" $self_ns "* || $want == *" $init_ns "* ]] && die "refusing to kill the host's mount namespace"
  thaw_frozen_ranks
  for ((tries = 1; tries <= 60; tries++)); do
    pids=()
    while read -r ns line; do
      pid=${line#/proc/}; pid=${pid%%/*}
      [[ $want == *" $ns "* ]] && ((pid != $$ && pid != 1)) && alive "$pid" && pids+=("$pid")
    done < <(stat -L -c '%i %n' /proc/[0-9]*/ns/mnt 2>/dev/null || true)
    ((${#pids[@]})) || { remove_freezer_cgroups; return 0; }
    ((tries < 40)) || sig=KILL   # about 2 s of grace for TERM
    kill -s $sig "${pids[@]}" 2>/dev/null || true
    sleep 0.05
  done
  die "processes still running after SIGKILL: ${pids[*]}"
}

# Fake ranks frozen by SimCluster.freeze_ranks (cgroup v1 freezer): a frozen process does not die, not
# even of SIGKILL, until it is thawed, so they are thawed before any kill.
FREEZER_PREFIX=/sys/fs/cgroup/freezer/nodecheck-harness-
thaw_frozen_ranks() {
  local cg
  for cg in "$FREEZER_PREFIX"*/; do
    [ -w "${cg}freezer.state" ] && echo THAWED > "${cg}freezer.state" 2>/dev/null || true
  done
}
remove_freezer_cgroups() {
  local cg
  for cg in "$FREEZER_PREFIX"*/; do [ -d "$cg" ] && rmdir "$cg" 2>/dev/null || true; done
}

fstab_escape() {   # fstab_escape VAR PATH: PATH with fstab's octal escapes (no subshell: no fork)
  local p=${2//\\/\\134}; p=${p// /\\040}; p=${p//$'\t'/\\011}; p=${p//$'\n'/\\012}
  printf -v "$1" '%s' "$p"
}

# The node's /sys view as an fstab for ONE `mount -a` (one process instead of ~30 mount calls):
# a sysfs of the cluster's network namespace at $d/sysfs, a tmpfs over /sys/class, each real class
# bound back from that sysfs, the node's own infiniband directory, and /sys/devices from the same
# sysfs (class entries are symlinks into ../../devices, whose net/ part is per network namespace).
write_sysfs_fstab() {
  local d=$1 c n e en
  fstab_escape e "$d"
  {
    echo "nc-sysfs $e/sysfs sysfs rw,nosuid,nodev,noexec 0 0"
    echo "nc-sysclass /sys/class tmpfs mode=0755,size=256k 0 0"
    for c in /sys/class/*; do
      n=${c##*/}
      [ "$n" != infiniband ] && [ -d "$c" ] || continue
      fstab_escape en "$n"
      echo "$e/sysfs/class/$en /sys/class/$en none bind,X-mount.mkdir 0 0"
    done
    echo "$e/sys/class/infiniband /sys/class/infiniband none bind,X-mount.mkdir 0 0"
    echo "$e/sysfs/devices /sys/devices none bind 0 0"
    # the node's own /sys/devices/system: real entries bound back, the fake EDAC tree instead of any real one
    echo "nc-sysdevsystem /sys/devices/system tmpfs mode=0755,size=64k 0 0"
    for c in /sys/devices/system/*; do
      n=${c##*/}
      [ "$n" != edac ] && [ -d "$c" ] || continue
      fstab_escape en "$n"
      echo "$e/sysfs/devices/system/$en /sys/devices/system/$en none bind,X-mount.mkdir 0 0"
    done
    fstab_escape en "$S/node-default"
    echo "$en/edac /sys/devices/system/edac none bind,X-mount.mkdir 0 0"
    echo "$en/meminfo /proc/meminfo none bind 0 0"
    echo "nc-shm /dev/shm tmpfs rw,nosuid,nodev,size=2g,mode=1777 0 0"
  } > "$d/sysfs.fstab"
}

# What every node's /proc/meminfo and EDAC tree show until a fault binds its own copy over them (written
# once per cluster, shared by the nodes): a recorded 2 TiB H100 node (2x Sapphire Rapids, 32x 64 GiB
# DDR5), and an EDAC tree as i10nm_edac lays one out: mc0..mc7 "Intel_10nm Socket#S IMC#I", 4 DIMMs each.
DATA=$(cd "$(dirname "$0")/.." && pwd)/data
DEFAULT_MEMINFO=$DATA/meminfo/sichek-2tib-gpu-node-no-hugepages-no-swap.txt
write_node_defaults() {
  local t=$S/node-default m k e dirs=()
  for ((m = 0; m < 8; m++)); do for ((k = 0; k < 4; k++)); do dirs+=("$t/edac/mc/mc$m/dimm$k"); done; done
  mkdir -p "${dirs[@]}"
  cp "$DEFAULT_MEMINFO" "$t/meminfo"
  for ((m = 0; m < 8; m++)); do
    e=$t/edac/mc/mc$m
    echo "Intel_10nm Socket#$((m / 4)) IMC#$((m % 4))" > "$e/mc_name"
    echo 262144 > "$e/size_mb"
    for k in ce_count ue_count ce_noinfo_count ue_noinfo_count; do echo 0 > "$e/$k"; done
    for ((k = 0; k < 4; k++)); do
      echo "CPU_SrcID#$((m / 4))_MC#$((m % 4))_Chan#$((k / 2))_DIMM#$((k % 2))" > "$e/dimm$k/dimm_label"
      echo "channel $((k / 2)) slot $((k % 2))" > "$e/dimm$k/dimm_location"
      echo 65536 > "$e/dimm$k/size"
      echo Registered-DDR5 > "$e/dimm$k/dimm_mem_type"
      echo 0 > "$e/dimm$k/dimm_ce_count"
      echo 0 > "$e/dimm$k/dimm_ue_count"
    done
  done
}

# The shared filesystem's server (tests/fakes/hangfs.py): one process for all nodes, outside them.
HANGFS=$(cd "$(dirname "$0")/.." && pwd)/fakes/hangfs.py
if [ -x /usr/bin/python3 ]; then NODE_PY=/usr/bin/python3; else NODE_PY=python3; fi
is_hangfs() {   # pid $1 is this cluster's hangfs server
  local a seen=0
  alive "$1" || return 1
  while IFS= read -r -d '' a; do
    [[ $a == */hangfs.py ]] && seen=1
    ((seen)) && [ "$a" = "$S" ] && return 0
  done 2>/dev/null < "/proc/$1/cmdline"
  return 1
}
hangfs_pid() { local p=; read -r p 2>/dev/null < "$S/hangfs.pid" || true; is_hangfs "$p" && echo "$p"; }
hangfs_start() {   # no wait here: hangfs_sync waits for its pid file
  rm -f "$S/hangfs.pid"
  # a grandchild: up's `wait` for the nodes must not wait for it
  (setsid "$NODE_PY" -I -S "$HANGFS" serve "$S" </dev/null >>"$S/hangfs.log" 2>&1 &)   # -S: no site: faster
}
# Make the server rescan, then wait until every node in "$@" is served in its current mount namespace
# (or hung, as its `hang` file says). Starts the server if it is not running. Where FUSE cannot work
# (no /dev/fuse) it says so and the nodes run without /mnt/shared: only what needs the mount fails.
hangfs_sync() {
  local p= i t st ns left=("$@") next
  p=$(hangfs_pid) || hangfs_start
  for ((t = 0; t < 250; t++)); do p=$(hangfs_pid) && break; sleep 0.02; done
  if [ -z "$p" ]; then
    echo "ssh_nodes.sh: warning: no /mnt/shared on the nodes: its server did not start: $(tail -n 3 "$S/hangfs.log" 2>/dev/null)" >&2
    return 0
  fi
  kill -USR1 "$p"
  for ((t = 0; t < 250 && ${#left[@]}; t++)); do
    next=()
    for i in "${left[@]}"; do
      ns=; read -r ns 2>/dev/null < "$S/nodes/node$i/mntns" || true
      st=; read -r st 2>/dev/null < "$S/nodes/node$i/shared/state" || true
      case "$st" in
        "serving $ns" | "hung pending $ns" | "hung held $ns "*) ;;
        error*) echo "ssh_nodes.sh: warning: node$i has no /mnt/shared: $st" >&2 ;;
        *) next+=("$i") ;;
      esac
    done
    left=("${next[@]}")
    ((${#left[@]})) && sleep 0.02
  done
  ((${#left[@]} == 0)) || die "/mnt/shared not served on node(s) ${left[*]} ($(tail -n 3 "$S/hangfs.log" 2>/dev/null))"
}
hangfs_stop() {   # the kernel aborts every connection as the process dies: nothing stays blocked on it
  local p t
  p=$(hangfs_pid) || return 0
  kill -KILL "$p" 2>/dev/null || true
  for ((t = 0; t < 100; t++)); do alive "$p" || return 0; sleep 0.02; done
}
# Undo a running node's faults (a hung mount; binds over /proc and /sys, a filled /dev/shm): what the
# SimCluster methods wrote to its undo file, run inside the node, last line first.
undo_node_state() {
  local i=$1 d=$S/nodes/node$1 p
  if [ -e "$d/shared/hang" ]; then rm -f "$d/shared/hang"; hangfs_sync "$i"; fi
  [ -e "$d/undo" ] || return 0
  if p=$(sshd_pid "$i"); then tac "$d/undo" | nsenter -t "$p" -m /bin/sh -s >/dev/null 2>&1 || true; fi
  rm -f "$d/undo"
}

start_node() {   # launch node $1's sshd in fresh UTS + mount namespaces (no wait)
  local i=$1 d=$S/nodes/node$1
  rm -f "$d/sshd.pid" "$d/mntns" "$d/stopped"
  : > "$d/sshd.log"; : > "$d/start.log"
  [ -d "$d/sysfs" ] && [ -d "$d/sys/class/infiniband" ] || mkdir -p "$d/sys/class/infiniband" "$d/sysfs"
  write_sysfs_fstab "$d"
  # sshd daemonizes itself once its host key is loaded; stdio never points at the caller's pipes
  "${NETPFX[@]}" unshare --uts --mount --propagation private /bin/sh -c \
    'hostname "$1" && mount --bind "$2/home" /root && mount --bind "$2/bin" /usr/local/sbin &&
     { [ -z "$4" ] || mount --bind "$2/py" "$4"; } &&
     mount -a -T "$2/sysfs.fstab" && umount "$2/sysfs" &&
     exec "$3" -f "$2/sshd_config" -E "$2/sshd.log"' \
    sh "node$i" "$d" "$SSHD" "${PYSITE:-}" </dev/null >>"$d/start.log" 2>&1 || echo "exit $?" >>"$d/start.log"
}

# Wait until each node in "$@" wrote its pid file (= listen socket bound). A node whose sshd
# wrote anything to its log before that failed (LogLevel ERROR; the log is new at start_node).
# EARLY_FAIL=0: a restarted sshd's log may hold older session errors, so only time out.
EARLY_FAIL=1
wait_nodes() {
  local i p ns left=("$@") next t self_ns failed=()
  self_ns=$(ns_id $$)
  for ((t = 0; t < 400 && ${#left[@]}; t++)); do   # up to 20 s
    next=()
    for i in "${left[@]}"; do
      p=; read -r p 2>/dev/null < "$S/nodes/node$i/sshd.pid" || true
      if [ -n "$p" ] && alive "$p"; then
        ns=$(ns_id "$p") || { next+=("$i"); continue; }
        [ "$ns" != "$self_ns" ] || die "node$i sshd is not in its own mount namespace"
        echo "$ns" > "$S/nodes/node$i/mntns"
      elif ((EARLY_FAIL)) && { [ -s "$S/nodes/node$i/start.log" ] || [ -s "$S/nodes/node$i/sshd.log" ]; }; then
        failed+=("$i")   # sshd failed before daemonizing, or logged an error (LogLevel ERROR) after
      else
        next+=("$i")
      fi
    done
    left=("${next[@]}")
    ((${#left[@]})) && sleep 0.05
  done
  failed+=("${left[@]}")
  local a
  for i in "${failed[@]}"; do
    nc_node_addr a "$NET" "$i"
    echo "node$i ($a:$PORT) did not start: $(cat "$S/nodes/node$i/start.log" "$S/nodes/node$i/sshd.log" 2>/dev/null | tr '\n' ' ')" >&2
  done
  ((${#failed[@]} == 0)) || exit 1
}

host_key_line() {   # known_hosts line for node $1
  local i=$1 names a
  nc_node_addr a "$NET" "$i"
  if [ "$PORT" = 22 ]; then names="node$i,$a"; else names="[node$i]:$PORT,[$a]:$PORT"; fi
  local type key
  read -r type key _ < "$S/nodes/node$i/ssh_host_ed25519_key.pub"
  echo "$names $type $key"
}

keygen() { ssh-keygen -q -t ed25519 -N '' -C "$2" -f "$1" </dev/null >/dev/null; }

up() {
  local n=${1:-} i d a b blocks pats
  NET=${NODECHECK_HARNESS_NET:-127.0.1}
  PORT=${NODECHECK_HARNESS_PORT:-22}
  [[ $n =~ ^[1-9][0-9]*$ ]] && ((n <= NC_MAX_NODES)) || die "N must be 1..$NC_MAX_NODES, got '${n}'"
  [[ $NET =~ ^([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})$ ]] || die "NODECHECK_HARNESS_NET must look like 127.0.1, got '$NET'"
  blocks=$(((n + 253) / 254))   # /24 blocks: NET, then the next third octets
  ((${NET##*.} + blocks - 1 <= 255)) || die "$n nodes need $blocks /24 blocks from $NET: past .255"
  # sshd per node, plus its sessions: lift the soft open-files limit to the hard one (children inherit)
  ulimit -S -n "$(ulimit -H -n)" 2>/dev/null || true
  [[ $PORT =~ ^[1-9][0-9]*$ ]] && ((PORT <= 65535)) || die "bad NODECHECK_HARNESS_PORT '$PORT'"
  [ "$(id -u)" = 0 ] || die "must run as root (it starts sshd in new namespaces)"
  [ -x "$SSHD" ] || die "$SSHD not found (apt-get install openssh-server; or run tests/harness/setup.sh)"
  command -v unshare >/dev/null && command -v ssh-keygen >/dev/null || die "need unshare and ssh-keygen"
  case "$S/" in /root/*|/usr/local/sbin/*) die "state dir $S would be hidden inside the nodes (/root and /usr/local/sbin are per-node)";; esac
  [ -e "$S/$MARK" ] && die "already up (or left over) at $S (run: down)"
  if [ -e "$S" ] && [ -n "$(ls -A "$S")" ] && [ ! -e "$S/$MARK" ]; then die "$S exists and is not empty"; fi
  mkdir -p "$S/nodes" /run/sshd
  chmod 700 "$S"
  : > "$S/$MARK"
  trap 'rc=$?; if ((rc)); then echo "up failed; cleaning up" >&2; down >/dev/null 2>&1 || true; fi' EXIT

  mkdir -p /mnt/shared   # the mount point: an empty directory on the host; the mounts are in the nodes only
  hangfs_start           # python's start-up overlaps the keys' and the nodes' (it mounts when hangfs_sync asks)
  keygen "$S/id_ed25519" nodecheck-harness
  cp "$S/id_ed25519.pub" "$S/authorized_keys"
  write_node_defaults &   # beside the key generation (the `wait` below covers it)
  for ((i = 1; i <= n; i++)); do   # host keys: ssh-keygen in parallel (process start-up dominates)
    d=$S/nodes/node$i
    mkdir -p "$d/bin" "$d/home" "$d/data" "$d/py" "$d/sysfs" "$d/sys/class/infiniband" "$d/shared"
    keygen "$d/ssh_host_ed25519_key" "node$i" &
    ((i % 16)) || wait
  done
  wait
  # the nodes' python3 site dir for local packages: a per-node directory is mounted over it, so a
  # fake nvidia-ml-py (pynvml) can be installed on one node only (empty = not installed)
  PYSITE=$(/usr/bin/python3 -c 'import sys; print(next((p for p in sys.path if p.startswith("/usr/local/lib/python3") and p.endswith("-packages")), ""))' 2>/dev/null || true)
  [ -z "$PYSITE" ] || mkdir -p "$PYSITE"
  printf 'N=%s\nNET=%s\nPORT=%s\nNETNS=%s\nPYSITE=%s\n' "$n" "$NET" "$PORT" "$(stat -L -c %i /proc/$$/ns/net)" "$PYSITE" > "$S/harness.env"

  {
    pats=
    for ((b = 0; b < blocks; b++)); do pats+=" ${NET%.*}.$((${NET##*.} + b)).*"; done
    printf 'Host node*%s\n' "$pats"
    printf '  User root\n  Port %s\n  IdentityFile %s/id_ed25519\n  IdentitiesOnly yes\n' "$PORT" "$S"
    printf '  UserKnownHostsFile %s/known_hosts\n  GlobalKnownHostsFile /dev/null\n' "$S"
    printf '  StrictHostKeyChecking yes\n  BatchMode yes\n  ConnectTimeout 5\n'
    for ((i = 1; i <= n; i++)); do nc_node_addr a "$NET" "$i"; printf 'Host node%s\n  HostName %s\n' "$i" "$a"; done
  } > "$S/ssh_config"
  : > "$S/known_hosts"
  for ((i = 1; i <= n; i++)); do
    [ -s "$S/nodes/node$i/ssh_host_ed25519_key.pub" ] || die "ssh-keygen failed for node$i"
    host_key_line "$i" >> "$S/known_hosts"
    d=$S/nodes/node$i
    nc_node_addr a "$NET" "$i"
    printf '%s\n' "ListenAddress $a:$PORT" "HostKey $d/ssh_host_ed25519_key" \
      "PidFile $d/sshd.pid" "AuthorizedKeysFile $S/authorized_keys" \
      "PermitRootLogin prohibit-password" "PasswordAuthentication no" \
      "KbdInteractiveAuthentication no" "UsePAM no" \
      "StrictModes no" "UseDNS no" "MaxStartups 300" "MaxSessions 100" "LogLevel ERROR" \
      "Subsystem sftp internal-sftp" \
      "SetEnv NODECHECK_FAKE_NODE=node$i NODECHECK_FAKE_DIR=$d" > "$d/sshd_config"
  done
  {
    echo "# nodecheck inventory of the simulated cluster (tests/harness/ssh_nodes.sh)"
    echo "defaults:"
    echo "  user: root"
    echo "  port: $PORT"
    echo "  identity_file: $S/id_ed25519"
    echo "  known_hosts: $S/known_hosts"
    echo "nodes:"
    # one entry per /24 block: node[255-508] at a.b.(c+1).[1-254], ...
    for ((b = 0; b < blocks; b++)); do
      local first=$((b * 254 + 1)) last=$(((b + 1) * 254))
      ((last <= n)) || last=$n
      if ((first == last)); then
        nc_node_addr a "$NET" "$first"
        printf '  node%s:\n    address: %s\n' "$first" "$a"
      else
        printf '  node[%s-%s]:\n    address: %s.%s.[1-%s]\n' "$first" "$last" "${NET%.*}" "$((${NET##*.} + b))" "$((last - first + 1))"
      fi
    done
  } > "$S/hosts.yml"
  cat > "$S/env.sh" <<EOF
# source me: plain ssh/pdsh against the simulated cluster
export NODECHECK_HARNESS_DIR='$S'
export PDSH_RCMD_TYPE=ssh
export PDSH_SSH_ARGS_APPEND='-F $S/ssh_config'
EOF

  for ((i = 1; i <= n; i++)); do start_node "$i" & ((i % 8)) || wait; done; wait
  wait_nodes $(seq 1 "$n")
  hangfs_sync $(seq 1 "$n")
  nc_node_addr a "$NET" "$n"
  echo "up: $n nodes at $NET.1-$a:$PORT, state $S (ssh -F $S/ssh_config node1 hostname)"
}

down() {
  local f ids=() stopped=0
  [ -e "$S" ] || { echo "down: nothing at $S"; return 0; }
  [ -e "$S/$MARK" ] || die "$S was not made by ssh_nodes.sh; not touching it"
  local d p self_ns; self_ns=$(ns_id $$)
  for d in "$S"/nodes/node*; do
    if [ -s "$d/mntns" ]; then ids+=("$(cat "$d/mntns")")
    elif p=$(cat "$d/sshd.pid" 2>/dev/null) && alive "$p" && f=$(ns_id "$p") && [ "$f" != "$self_ns" ]; then
      ids+=("$f")   # started by an interrupted `up`, never recorded
    else continue; fi
    stopped=$((stopped + 1))
  done
  fabric_clear || true
  hangfs_stop
  kill_namespaces "${ids[@]}"
  rm -rf -- "$S"
  echo "down: stopped $stopped nodes, removed $S"
}

stop_node() {
  local i; i=$(node_index "$1")
  local d=$S/nodes/node$i
  # a held request would keep a killed process in State D: answer it first
  if [ -e "$d/shared/hang" ] && sshd_pid "$i" >/dev/null; then rm -f "$d/shared/hang"; hangfs_sync "$i"; fi
  rm -f "$d/undo"   # the node's mounts go with its namespace
  [ -s "$d/mntns" ] && kill_namespaces "$(cat "$d/mntns")"
  rm -f "$d/sshd.pid" "$d/mntns"
  : > "$d/stopped"
}

start_one() {
  local i; i=$(node_index "$1")
  sshd_pid "$i" >/dev/null && die "node$i is already running"
  find_netns
  start_node "$i"
  wait_nodes "$i"
  hangfs_sync "$i"
}

hup_node() {   # sshd re-executes itself on SIGHUP (re-reads config and host key), same namespaces
  local i=$1 p d=$S/nodes/node$1
  p=$(sshd_pid "$i") || return 0   # stopped: the new key is used at the next start
  rm -f "$d/sshd.pid"
  kill -HUP "$p"
  EARLY_FAIL=0 wait_nodes "$i"
}

rekey() {
  local i; i=$(node_index "$1")
  local k=$S/nodes/node$i/ssh_host_ed25519_key
  if [ ! -e "$k.orig" ]; then mv "$k" "$k.orig"; mv "$k.pub" "$k.orig.pub"; else rm -f "$k" "$k.pub"; fi
  keygen "$k" "node$i-rekeyed"
  hup_node "$i"
}

restore_key() {
  local i; i=$(node_index "$1")
  local k=$S/nodes/node$i/ssh_host_ed25519_key
  [ -e "$k.orig" ] || return 0
  mv -f "$k.orig" "$k"; mv -f "$k.orig.pub" "$k.pub"
  hup_node "$i"
}

reset() {
  local i k starts=()
  for ((i = 1; i <= N; i++)); do
    k=$S/nodes/node$i/ssh_host_ed25519_key
    if ! sshd_pid "$i" >/dev/null; then
      rm -f "$S/nodes/node$i/undo" "$S/nodes/node$i/shared/hang"
      [ -e "$k.orig" ] && { mv -f "$k.orig" "$k"; mv -f "$k.orig.pub" "$k.pub"; }
      [ -s "$S/nodes/node$i/mntns" ] && kill_namespaces "$(cat "$S/nodes/node$i/mntns")"
      ((${#starts[@]})) || find_netns
      start_node "$i"; starts+=("$i")
    else
      undo_node_state "$i"
      if [ -e "$k.orig" ]; then restore_key "$i"; fi
    fi
  done
  ((${#starts[@]} == 0)) || { wait_nodes "${starts[@]}"; hangfs_sync "${starts[@]}"; }
}

# A node's per-connection sshd processes (sshd, or sshd-session/sshd-auth on OpenSSH >= 9.8) are
# those in its mount namespace other than the listener. SIGKILL: the clients see their connection
# close, and what the sessions started keeps running as it would after a network drop (a process
# started with setsid certainly does).
drop_sessions() {
  local i; i=$(node_index "$1")
  local d=$S/nodes/node$i ns listener pid line comm pids=() t left
  [ -s "$d/mntns" ] || { echo 0; return 0; }
  ns=$(cat "$d/mntns"); listener=$(sshd_pid "$i") || listener=
  while read -r pns line; do
    pid=${line#/proc/}; pid=${pid%%/*}
    [ "$pns" = "$ns" ] && [ "$pid" != "$listener" ] && ((pid != $$)) || continue
    comm=; read -r comm 2>/dev/null < "/proc/$pid/comm" || continue
    [[ $comm == sshd* ]] && alive "$pid" && pids+=("$pid")
  done < <(stat -L -c '%i %n' /proc/[0-9]*/ns/mnt 2>/dev/null || true)
  ((${#pids[@]})) && kill -KILL "${pids[@]}" 2>/dev/null
  for ((t = 0; t < 100; t++)); do   # gone (or zombies) within 5 s
    left=0
    for pid in "${pids[@]}"; do alive "$pid" && left=1; done
    ((left)) || break
    sleep 0.05
  done
  echo "${#pids[@]}"
}

is_rdma_driver() {   # pid $1 runs tests/harness/rdma_driver.py (pid files can be stale)
  local a
  alive "$1" || return 1
  while IFS= read -r -d '' a; do [[ $a == */rdma_driver.py ]] && return 0; done 2>/dev/null < "/proc/$1/cmdline"
  return 1
}

is_fake_perftest() {   # pid $1 runs a fake ib_write_bw of this cluster (tests/fakes/ib_write_bw.py)
  local a
  while IFS= read -r -d '' a; do [[ $a == "$S"/nodes/node*/data/ib_write_bw.py ]] && return 0; done 2>/dev/null < "/proc/$1/cmdline"
  return 1
}

# Simulated RDMA ports (cluster.py roce_port): a driver process per port, outside the nodes' mount
# namespaces, with $d/rdma/PORT.pid, and a veth pair named in $d/rdma/PORT.netdev. A driver also
# exits by itself when its pid file goes away (down removes the whole state dir). Fake ib_write_bw
# servers or clients still running (hung, or waiting for a client) are stopped too.
fabric_clear() {
  local f p pid dev pids=() devs=() t
  for f in "$S"/nodes/node*/rdma/*.pid; do
    [ -e "$f" ] || continue
    pid=; read -r pid < "$f" || true
    rm -f "$f"
    [ -n "$pid" ] && is_rdma_driver "$pid" && pids+=("$pid")
  done
  for p in /proc/[0-9]*; do
    pid=${p#/proc/}
    ((pid != $$)) && is_fake_perftest "$pid" && alive "$pid" && pids+=("$pid")
  done
  ((${#pids[@]})) && kill -TERM "${pids[@]}" 2>/dev/null
  for ((t = 0; t < 60 && ${#pids[@]}; t++)); do
    local left=()
    for pid in "${pids[@]}"; do alive "$pid" && left+=("$pid"); done
    pids=("${left[@]}")
    ((${#pids[@]})) || break
    ((t < 40)) || kill -KILL "${pids[@]}" 2>/dev/null
    sleep 0.05
  done
  for f in "$S"/nodes/node*/rdma/*.netdev; do
    [ -e "$f" ] || continue
    dev=; read -r dev < "$f" || true
    [ -n "$dev" ] && devs+=("$dev")
  done
  if ((${#devs[@]})); then
    if [ -z "${N:-}" ] && [ -f "$S/harness.env" ]; then . "$S/harness.env"; fi
    if [ -n "${N:-}" ] && try_find_netns; then   # else: they go with the namespace
      for dev in "${devs[@]}"; do "${NETPFX[@]}" ip link del "$dev" 2>/dev/null || true; done
    fi
  fi
  rm -rf "$S"/nodes/node*/rdma
}

status() {
  local i p a
  for ((i = 1; i <= N; i++)); do
    nc_node_addr a "$NET" "$i"
    if p=$(sshd_pid "$i"); then echo "node$i $a:$PORT up $p"; else echo "node$i $a:$PORT down -"; fi
  done
}

cmd=${1:-}; shift || true
case "$cmd" in
  up) [ $# -eq 1 ] || die "usage: up N"; up "$1" ;;
  down) down ;;
  stop) load_env; stop_node "${1:-}" ;;
  start) load_env; start_one "${1:-}" ;;
  rekey) load_env; rekey "${1:-}" ;;
  restore-key) load_env; restore_key "${1:-}" ;;
  reset) load_env; reset ;;
  status) load_env; status ;;
  pid) load_env; i=$(node_index "${1:-}"); sshd_pid "$i" || die "node$i is not running" ;;
  drop-sessions) load_env; drop_sessions "${1:-}" ;;
  fabric-clear) load_env; fabric_clear ;;
  *) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
