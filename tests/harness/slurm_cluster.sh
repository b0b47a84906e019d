#!/bin/bash
# A real Slurm cluster (Debian slurm-wlm 22.05 + munge) on the simulated nodes of ssh_nodes.sh (root only).
#
#   slurm_cluster.sh up N|NODE...   slurmctld + one slurmd per node (node1..nodeN, or the nodes named);
#                                   ready when `sinfo -h -N -t idle` lists them all. Idempotent: the
#                                   same configuration with every daemon alive does nothing; another
#                                   configuration (or a dead daemon) restarts the whole Slurm cluster.
#   slurm_cluster.sh down           stop slurmctld, every slurmd, their jobs (slurmstepd, Prologs) and
#                                   our munged; remove $S/slurm. Works without the state dir too (it
#                                   finds the daemons by the paths in their command lines).
#   slurm_cluster.sh revive         start again what died (a slurmd whose node was stopped and started);
#                                   a dead slurmctld or munged restarts everything, same slurm.conf
#   slurm_cluster.sh status         one line per daemon (name pid up|down), then `sinfo -N`
#
# State: R=$S/slurm, S=$NODECHECK_HARNESS_DIR (the ssh_nodes.sh state dir, default
# ${TMPDIR:-/tmp}/nodecheck-harness): slurm.conf, env.sh (export SLURM_CONF=$R/slurm.conf),
# log/slurmctld.log, log/slurmd-nodeI.log, jobs/ (sbatch from SimCluster: slurm-%j.out), state/,
# spool/nodeI/, etc/ (slurm.conf, bound to /etc/slurm, see below), munge/, *.pid.
#
# Layout (tests/harness/README.md, "Slurm"):
#   * munged: our own, one per cluster (socket $R/munge/munge.socket, a fresh key), handed to Slurm by
#     AuthInfo=socket=...; a system munged is never used nor touched, so two clusters on one machine
#     (or a CI machine's own munge) cannot stop each other's. `down` always stops it.
#   * slurmctld: its own UTS namespace with hostname `ctl` (SlurmctldHost=ctl(127.0.0.1), port 16817),
#     in the cluster's network namespace, and its own mount namespace where /etc/slurm is $R/etc.
#   * slurmd -N nodeI: inside node I's UTS + mount + network namespaces (nsenter -t <sshd pid> -u -m -n),
#     NodeAddr=node I's address (lib.sh nc_node_addr) Port=17000+I: a Prolog or HealthCheckProgram on node3 has hostname node3 and
#     node3's fake tools in /usr/local/sbin, and sees node3's clean /root (so anything under the real
#     /root, e.g. a venv there, is invisible to it: `up` checks that the programs run there).
#   * /etc/slurm/slurm.conf is there in slurmctld's and every node's mount namespace (a bind of $R/etc,
#     removed by `down`): Slurm gives PrologSlurmctld and HealthCheckProgram no SLURM_CONF, so their
#     scontrol reads the default path, as on a real cluster. The host's /etc/slurm is untouched.
#   * every daemon starts with the environment PATH=/usr/sbin:/usr/bin:/sbin:/bin SLURM_CONF=...
#     only, whoever runs `up`.
#
# Environment for `up`:
#   PROLOG, PROLOG_SLURMCTLD, HEALTH_CHECK_PROGRAM  absolute paths (Prolog=, PrologSlurmctld=, HealthCheckProgram=)
#   PROLOG_FLAGS         PrologFlags (default Alloc: the Prolog runs on every node at allocation; "none" omits it)
#   EXTRA_CONF           more slurm.conf lines; a line KEY=... replaces our default KEY line
#   SLURM_ETC_FILES      a directory whose files are put beside slurm.conf ($R and $R/etc = /etc/slurm)
#                        before any daemon starts (a HealthCheckProgram runs at slurmd start-up)
#                        (AuthInfo keeps our socket=), e.g. "HealthCheckInterval=5"
#   SLURM_UP_TIMEOUT     seconds to wait for every node idle (default 30)
#   REBOOT_PROGRAM=1     RebootProgram=tests/harness/slurm_reboot.sh (`scontrol reboot` "reboots" a node:
#                        its slurmd restarts with -b) and ResumeTimeout=$RESUME_TIMEOUT (default 90 s)
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"   # nc_node_addr: the one index -> address mapping

S=${NODECHECK_HARNESS_DIR:-${TMPDIR:-/tmp}/nodecheck-harness}
S=$(realpath -m -- "$S")
R=$S/slurm
CONF=$R/slurm.conf
SOCK=$R/munge/munge.socket
CTL_PORT=16817
SLURMD_PORT0=17000   # slurmd of node I: 17000+I. 16800+I would put node17 on SlurmctldPort (RECIPE §3.1)
REBOOT_SCRIPT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/slurm_reboot.sh

die() { echo "slurm_cluster.sh: $*" >&2; exit 1; }

alive() {   # pid exists and is not a zombie (PID 1 may reap orphans late)
  local line
  [ -n "${1:-}" ] && read -r line 2>/dev/null < "/proc/$1/stat" || return 1
  line=${line##*) }
  [ "${line%% *}" != Z ]
}

pid_of() {   # pid_of FILE COMM: the pid in FILE if that process is alive and is COMM
  local p= c=
  read -r p 2>/dev/null < "$1" || return 1
  alive "$p" && read -r c 2>/dev/null < "/proc/$p/comm" && [ "$c" = "$2" ] && echo "$p"
}

load_nodes_env() {   # N NET NETNS of the ssh nodes
  [ -f "$S/harness.env" ] || die "no simulated cluster at $S (run: ssh_nodes.sh up N first)"
  # shellcheck disable=SC1091
  . "$S/harness.env"
}

node_pid() {   # sshd pid of node $1 (the process whose namespaces slurmd joins)
  local p
  p=$(pid_of "$S/nodes/node$1/sshd.pid" sshd) || die "node$1 is not running (ssh_nodes.sh start node$1)"
  echo "$p"
}

# Every process of this Slurm cluster, found without state files (ssh_nodes.sh down removes $S).
# daemon_pids: slurmctld/slurmd by `-f $CONF` in their command line, munged by `--socket=$SOCK`.
# job_pids: slurmstepd, slurmscriptd, Prologs and the jobs' own processes, by SLURM_CONF=$CONF in
# their environment together with SLURM_JOB_ID or being a slurmstepd/slurmscriptd (a shell that
# sourced env.sh has SLURM_CONF only, and is left alone).
pids_of_files() {   # /proc/PID/... lines -> live PIDs, once each, never this script or its parent
  local f p seen=" $$ $PPID "
  while read -r f; do
    p=${f#/proc/}; p=${p%%/*}
    [[ $seen == *" $p "* ]] && continue
    seen+="$p "
    alive "$p" && echo "$p"
  done
}

daemon_pids() {   # also a RebootProgram's detached half (slurm_reboot.sh --detached NODE $R), or it starts a slurmd after down
  grep -lzxF -e "$CONF" -e "--socket=$SOCK" -e "$R" /proc/[0-9]*/cmdline 2>/dev/null | pids_of_files || true
}

job_pids() {   # job_pids [slurmscriptd]: that too (slurmctld's helper; first stopping it stalls slurmctld)
  local f p c envs=() also=${1:-slurmstepd}
  mapfile -t envs < <(grep -lzxF -e "SLURM_CONF=$CONF" /proc/[0-9]*/environ 2>/dev/null || true)
  ((${#envs[@]})) || return 0
  {
    grep -lzE '^SLURM_JOB_ID=' "${envs[@]}" 2>/dev/null || true
    for f in "${envs[@]}"; do
      p=${f#/proc/}; p=${p%%/*}
      read -r c 2>/dev/null < "/proc/$p/comm" && [[ $c == slurmstepd || $c == "$also" ]] && echo "$f"
    done
  } | pids_of_files
}

# What slurmd ran outside any job (a HealthCheckProgram: SLURMD_NODENAME in its environment, nothing
# else of ours), found where slurmd runs: in its node's mount namespace ($S/nodes/nodeI/mntns, or any
# but this script's once the state dir is gone). A process on this machine with SLURMD_NODENAME in
# its environment is not this cluster's (another test's fake srun task or `nodecheck health`, which
# a SIGKILL from here failed at random while this cluster went down).
health_check_pids() {
  local f p ns mine nodes=" "
  mine=$(stat -L -c %i /proc/$$/ns/mnt)
  for f in "$S"/nodes/node*/mntns; do
    [ -s "$f" ] && nodes+="$(cat "$f") "
  done
  grep -lzE '^SLURMD_NODENAME=' /proc/[0-9]*/environ 2>/dev/null | while read -r f; do
    p=${f#/proc/}; p=${p%%/*}
    ns=$(stat -L -c %i "/proc/$p/ns/mnt" 2>/dev/null) || continue
    if [ "$nodes" = " " ]; then [ "$ns" != "$mine" ] && echo "$f"
    elif [[ $nodes == *" $ns "* ]]; then echo "$f"; fi
  done | pids_of_files || true
}

wait_gone() {   # wait_gone TRIES PID...: 0 once none is alive (zombies count as gone)
  local tries=$1 t p left; shift
  for ((t = 0; t < tries; t++)); do
    left=0
    for p in "$@"; do alive "$p" && { left=1; break; }; done
    ((left)) || return 0
    sleep 0.05
  done
  return 1
}

# Jobs first, with SIGKILL (slurmstepd ignores SIGTERM, and nothing of a job is worth keeping),
# then the daemons with SIGTERM, SIGKILL after 3 s. Prints how many processes were stopped.
stop_all() {
  local jobs daemons more total=0 p
  mapfile -t jobs < <(job_pids)
  if ((${#jobs[@]})); then
    kill -KILL "${jobs[@]}" 2>/dev/null || true
    total=${#jobs[@]}
  fi
  mapfile -t daemons < <(daemon_pids)
  if ((${#daemons[@]})); then
    # without its state dir (ssh_nodes.sh down removed $S) slurmctld takes > 3 s over SIGTERM
    if [ -d "$R/state" ]; then kill -TERM "${daemons[@]}" 2>/dev/null || true
    else kill -KILL "${daemons[@]}" 2>/dev/null || true; fi
    total=$((total + ${#daemons[@]}))
    wait_gone 60 "${daemons[@]}" || kill -KILL "${daemons[@]}" 2>/dev/null || true
  fi
  mapfile -t more < <(job_pids slurmscriptd)   # a Prolog or step forked meanwhile
  # and what slurmd ran outside any job: a HealthCheckProgram gets neither SLURM_CONF nor a job id,
  # only SLURMD_NODENAME; left running, its scontrol would drain nodes of the next cluster
  mapfile -t -O "${#more[@]}" more < <(health_check_pids)
  if ((${#more[@]})); then kill -KILL "${more[@]}" 2>/dev/null || true; total=$((total + ${#more[@]})); fi
  wait_gone 100 "${jobs[@]}" "${daemons[@]}" "${more[@]}" ||
    die "still running after SIGKILL: $(for p in "${jobs[@]}" "${daemons[@]}" "${more[@]}"; do alive "$p" && echo -n "$p "; done)"
  echo "$total"
}

down() {
  local n f p
  n=$(stop_all)
  for f in "$S"/nodes/node*/sshd.pid; do   # the nodes' /etc/slurm binds (gone with a stopped node)
    p=$(pid_of "$f" sshd) && unbind_etc "$p"
  done
  rm -rf -- "$R"
  echo "down: stopped $n processes, removed $R"
}

# What slurmd runs inside the nodes must exist there: not under /root or /usr/local/sbin (each
# node has its own), and its #! interpreter neither (a venv made from a pyenv python in /root).
check_node_program() {
  local what=$1 path=$2 pid=$3 line interp p
  [[ $path == /* ]] || die "$what must be an absolute path, got '$path'"
  [[ $path =~ ^[^[:space:]=,\"\']+$ ]] || die "$what path must not contain spaces, quotes, '=' or ',': $path"
  for p in "$path" "$(realpath -m -- "$path")"; do
    case "$p/" in /root/*|/usr/local/sbin/*|/usr/local/lib/python3*)
      die "$what $path is under /root, /usr/local/sbin or /usr/local/lib/python3*, which every simulated node replaces with its own: slurmd on a node cannot run it. Keep the repository, its .venv and temp files outside /root (e.g. /work, /tmp).";;
    esac
  done
  nsenter -t "$pid" -m -- test -x "$path" ||
    die "$what $path is not an executable file inside the simulated nodes"
  line=; IFS= read -r line < "$path" || true
  if [[ $line == '#!'* ]]; then
    read -r interp _ <<<"${line#\#!}"
    nsenter -t "$pid" -m -- test -x "$interp" ||
      die "$what $path: its interpreter $interp does not exist inside the simulated nodes (under /root? each node has a clean /root)"
  fi
}

write_conf() {   # write_conf FILE NODE_INDEX...: slurm.conf for these nodes and the environment
  local out=$1; shift
  local i key line extra=" " auth_extra=
  local -a lines=()
  if [ -n "${EXTRA_CONF:-}" ]; then
    while IFS= read -r line; do
      [[ $line =~ ^[[:space:]]*([A-Za-z]+)= ]] || continue
      key=${BASH_REMATCH[1],,}
      case $key in nodename|partitionname|nodeset|downnodes|frontendname) continue;; esac
      extra+="$key "
      [ "$key" = authinfo ] && auth_extra=${line#*=}
    done <<<"$EXTRA_CONF"
  fi
  local auth="socket=$SOCK,cred_expire=5"
  if [ -n "$auth_extra" ]; then
    if [[ $auth_extra == *socket=* ]]; then auth=$auth_extra; else auth="socket=$SOCK,$auth_extra"; fi
  fi
  lines=(
    "ClusterName=nodecheck"
    "SlurmctldHost=ctl(127.0.0.1)"
    "SlurmctldPort=$CTL_PORT"
    "SlurmUser=root"
    "SlurmdUser=root"
    "AuthType=auth/munge"
    "CredType=cred/munge"
    "AuthInfo=$auth"
    "StateSaveLocation=$R/state"
    "SlurmdSpoolDir=$R/spool/%n"
    "SlurmctldPidFile=$R/slurmctld.pid"
    "SlurmdPidFile=$R/slurmd-%n.pid"
    "SlurmctldLogFile=$R/log/slurmctld.log"
    "SlurmdLogFile=$R/log/slurmd-%n.log"
    "MailProg=/bin/true"
    "ProctrackType=proctrack/linuxproc"
    "TaskPlugin=task/none"
    "JobAcctGatherType=jobacct_gather/none"
    "AccountingStorageType=accounting_storage/none"
    "SelectType=select/cons_tres"
    "SelectTypeParameters=CR_Core"
    "MpiDefault=none"
    "ReturnToService=2"
    "PrologEpilogTimeout=30"
    "SchedulerParameters=nohold_on_prolog_fail,sched_interval=1"
    "MinJobAge=300"
    "KillWait=2"
    # as a GPU site sets it: jobs get slurmd's memlock (unlimited for RDMA), not the submitting shell's
    "PropagateResourceLimitsExcept=MEMLOCK"
  )
  [ "${PROLOG_FLAGS:-Alloc}" = none ] || lines+=("PrologFlags=${PROLOG_FLAGS:-Alloc}")
  [ -z "${PROLOG:-}" ] || lines+=("Prolog=$PROLOG")
  [ -z "${PROLOG_SLURMCTLD:-}" ] || lines+=("PrologSlurmctld=$PROLOG_SLURMCTLD")
  [ -z "${HEALTH_CHECK_PROGRAM:-}" ] || lines+=("HealthCheckProgram=$HEALTH_CHECK_PROGRAM")
  # a short ResumeTimeout: a reboot that never completes marks the node DOWN within a test's patience
  [ "${REBOOT_PROGRAM:-0}" != 1 ] || lines+=("RebootProgram=$REBOOT_SCRIPT" "ResumeTimeout=${RESUME_TIMEOUT:-90}")
  {
    echo "# written by tests/harness/slurm_cluster.sh up; EXTRA_CONF lines replace the defaults of the same key"
    for line in "${lines[@]}"; do
      key=${line%%=*}; key=${key,,}
      [[ $key != authinfo && $extra == *" $key "* ]] || echo "$line"   # AuthInfo: merged above
    done
    [ -z "${EXTRA_CONF:-}" ] || printf '%s\n' "$EXTRA_CONF" | grep -viE '^[[:space:]]*AuthInfo=' || true
    local addr
    for i in "$@"; do
      nc_node_addr addr "$NET" "$i"
      echo "NodeName=node$i NodeAddr=$addr Port=$((SLURMD_PORT0 + i)) CPUs=$(nproc) RealMemory=1000"
    done
    echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
  } > "$out"
}

all_alive() {   # every daemon of the current configuration runs
  local i
  pid_of "$SOCK.pid" munged >/dev/null || return 1
  pid_of "$R/slurmctld.pid" slurmctld >/dev/null || return 1
  for i in "$@"; do pid_of "$R/slurmd-node$i.pid" slurmd >/dev/null || return 1; done
}

fail_up() {
  echo "slurm_cluster.sh: $*" >&2
  local f
  for f in "$R"/log/*.log "$R"/log/*.start "$R"/munge/munged.log; do
    [ -s "$f" ] || continue
    echo "--- ${f#"$R"/} (last lines)" >&2
    tail -n 8 "$f" >&2
  done
  ((!TEARDOWN_ON_FAIL)) || down >/dev/null 2>&1 || true
  exit 1
}
TEARDOWN_ON_FAIL=1   # a failed up leaves nothing running; a failed revive leaves what runs alone

sinfo_in_ns() { "${NETPFX[@]}" env SLURM_CONF="$CONF" timeout 5 sinfo "$@"; }

preflight() {   # root, binaries, the ssh nodes' settings (N NET NETNS)
  [ "$(id -u)" = 0 ] || die "must run as root"
  export PATH=$PATH:/usr/sbin:/sbin
  local b
  for b in slurmctld slurmd munged munge unmunge sinfo; do
    command -v "$b" >/dev/null || die "$b not found (apt-get install slurm-wlm munge; or run tests/harness/setup.sh)"
  done
  load_nodes_env
  [[ $R =~ ^[^[:space:]=,\"\']+$ ]] || die "state dir $R must not contain spaces, quotes, '=' or ','"
}

lock() {   # one up/revive at a time per state dir; fd 8 is closed for every daemon started
  exec 8>"$S/.slurm.lock"
  flock -w 60 8 || die "another slurm_cluster.sh holds $S/.slurm.lock"
}

conf_nodes() {   # node indexes of the NodeName lines of $CONF
  sed -n 's/^NodeName=node\([0-9]*\) .*/\1/p' "$CONF"
}

start_munged() {
  # a private daemon. --force: $S is mode 0700, and munged otherwise insists that every directory
  # above its socket be world-executable (only root talks to it here).
  mkdir -p "$R/munge"
  head -c 128 /dev/urandom > "$R/munge/munge.key"
  chmod 600 "$R/munge/munge.key"
  munged --force --socket="$SOCK" --key-file="$R/munge/munge.key" --pid-file="$SOCK.pid" \
    --log-file="$R/munge/munged.log" --seed-file="$R/munge/munged.seed" 8>&- </dev/null >"$R/log/munged.start" 2>&1 ||
    fail_up "munged did not start"
  munge -n -S "$SOCK" </dev/null 2>/dev/null | unmunge -S "$SOCK" >/dev/null 2>&1 || fail_up "munge does not answer on $SOCK"
}

# Daemons get a clean environment (what Prologs see must not depend on who ran `up`).
CLEAN_ENV=(env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin SLURM_CONF="$CONF")

# slurmctld only starts where the hostname is SlurmctldHost: a UTS namespace named ctl. Its own
# mount namespace has /etc/slurm = $R/etc, so a PrologSlurmctld's scontrol finds slurm.conf at the
# default path, as in production (Slurm gives PrologSlurmctld no SLURM_CONF).
start_slurmctld() {
  "${NETPFX[@]}" unshare --uts --mount --propagation private /bin/sh -c \
    'hostname ctl && mount --bind "$1" /etc/slurm && shift && exec "$@"' sh "$R/etc" \
    "${CLEAN_ENV[@]}" slurmctld -i -f "$CONF" 8>&- </dev/null >"$R/log/slurmctld.start" 2>&1 ||
    fail_up "slurmctld did not start"
}

# /etc/slurm inside a node's mount namespace: a bind of $R/etc (slurm.conf only), for Slurm clients on
# the node (a HealthCheckProgram gets neither SLURM_CONF nor PATH; an ssh session runs sinfo as on a
# real node). Stacked or stale binds (an earlier cluster) are removed first.
unbind_etc() {   # unbind_etc SSHD_PID
  grep -qs ' /etc/slurm ' "/proc/$1/mountinfo" || return 0
  nsenter -t "$1" -m -- /bin/sh -c 'while mountpoint -q /etc/slurm; do umount -l /etc/slurm || exit 1; done' || true
}

bind_etc() {   # bind_etc SSHD_PID
  unbind_etc "$1"
  nsenter -t "$1" -m -- mount --bind "$R/etc" /etc/slurm || fail_up "cannot bind $R/etc to /etc/slurm in pid $1's mount namespace"
}

start_slurmd() {   # inside node $1's UTS + mount + network namespaces
  local p
  mkdir -p "$R/spool/node$1"
  p=$(node_pid "$1")
  bind_etc "$p"
  nsenter -t "$p" -u -m -n -- "${CLEAN_ENV[@]}" slurmd -N "node$1" -f "$CONF" \
    8>&- </dev/null >"$R/log/slurmd-node$1.start" 2>&1 || fail_up "slurmd node$1 did not start"
}

# wait_ready N [idle|responding]: idle = every node idle (drained ones count: sinfo -t idle lists
# them); responding = every node answers (no "*" after the state, not down), whatever runs on it.
wait_ready() {
  local n=$1 mode=${2:-idle} end=$((SECONDS + ${SLURM_UP_TIMEOUT:-30})) ok
  while :; do
    if [ "$mode" = idle ]; then
      ok=$(sinfo_in_ns -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l) || ok=0
    else
      ok=$(sinfo_in_ns -h -N -o '%N %T' 2>/dev/null | awk '$2 !~ /[*~#%!]$/ && $2 !~ /^(down|unknown|future)/ {print $1}' | sort -u | wc -l) || ok=0
    fi
    ((ok == n)) && return 0
    grep -qs 'fatal:' "$R"/log/*.log && fail_up "a Slurm daemon died"
    ((SECONDS < end)) || fail_up "only $ok of $n nodes $mode after ${SLURM_UP_TIMEOUT:-30} s"
    sleep 0.05
  done
}

start_all() {   # start_all CONF_FILE: everything from nothing, with this slurm.conf
  local conf=$1 i; local -a idx
  down >/dev/null
  mkdir -p "$R/state" "$R/log" "$R/jobs" "$R/etc"
  mv "$conf" "$CONF"
  chmod 644 "$CONF"
  ln "$CONF" "$R/etc/slurm.conf"
  local f
  for f in "${SLURM_ETC_FILES:-/nonexistent}"/*; do   # files that live beside slurm.conf (nodecheck.yml)
    [ -f "$f" ] || continue
    cp -- "$f" "$R/etc/" && ln -f -- "$R/etc/${f##*/}" "$R/${f##*/}"
  done
  [ -d /etc/slurm ] || mkdir -p /etc/slurm   # the bind target (slurm-client ships it)
  printf 'export SLURM_CONF=%s\n' "$CONF" > "$R/env.sh"
  mapfile -t idx < <(conf_nodes)
  trap 'rc=$?; ((rc == 0)) || { down >/dev/null 2>&1 || true; }' EXIT
  start_munged
  start_slurmctld
  for i in "${idx[@]}"; do start_slurmd "$i"; done
  wait_ready "${#idx[@]}"
  trap - EXIT
  echo "up: slurmctld + ${#idx[@]} slurmd, SLURM_CONF=$CONF"
}

up() {
  (($#)) || die "usage: up N | up NODE..."
  preflight
  local -a idx=()
  local a i
  if (($# == 1)) && [[ $1 =~ ^[1-9][0-9]*$ ]]; then
    (($1 <= N)) || die "only $N simulated nodes are up, asked for $1"
    for ((i = 1; i <= $1; i++)); do idx+=("$i"); done
  else
    for a in "$@"; do
      a=${a#node}
      [[ $a =~ ^[1-9][0-9]*$ ]] && ((a <= N)) || die "no such node: $a (have node1..node$N)"
      [[ " ${idx[*]} " == *" $a "* ]] || idx+=("$a")
    done
  fi
  local pid1
  pid1=$(node_pid "${idx[0]}")
  NETPFX=(nsenter "--net=/proc/$pid1/ns/net")   # the cluster's network namespace, from anywhere
  [ -z "${PROLOG:-}" ] || check_node_program Prolog "$PROLOG" "$pid1"
  [ -z "${HEALTH_CHECK_PROGRAM:-}" ] || check_node_program HealthCheckProgram "$HEALTH_CHECK_PROGRAM" "$pid1"
  [ "${REBOOT_PROGRAM:-0}" != 1 ] || check_node_program RebootProgram "$REBOOT_SCRIPT" "$pid1"
  if [ -n "${PROLOG_SLURMCTLD:-}" ]; then
    [[ $PROLOG_SLURMCTLD == /* && -x $PROLOG_SLURMCTLD ]] || die "PrologSlurmctld $PROLOG_SLURMCTLD is not an executable file (absolute path)"
  fi
  for i in "${idx[@]}"; do node_pid "$i" >/dev/null; done
  lock
  local want
  want=$(mktemp "$S/.slurm.conf.XXXXXX")
  write_conf "$want" "${idx[@]}"
  if [ -f "$CONF" ] && cmp -s "$want" "$CONF" && all_alive "${idx[@]}"; then
    rm -f "$want"
    echo "up: already up with this configuration (${#idx[@]} slurmd), SLURM_CONF=$CONF"
    return 0
  fi
  start_all "$want"
}

# After ssh_nodes.sh stop/start (or reset) of a node, its slurmd is gone: start it again in the
# node's new namespaces. If slurmctld or munged died, restart everything with the same slurm.conf.
revive() {
  preflight
  [ -f "$CONF" ] || die "no Slurm cluster at $R (run: up N)"
  local -a idx; local i started=0 keep
  mapfile -t idx < <(conf_nodes)
  NETPFX=(nsenter "--net=/proc/$(node_pid "${idx[0]}")/ns/net")
  lock
  TEARDOWN_ON_FAIL=0
  if ! pid_of "$SOCK.pid" munged >/dev/null || ! pid_of "$R/slurmctld.pid" slurmctld >/dev/null; then
    TEARDOWN_ON_FAIL=1
    keep=$(mktemp "$S/.slurm.conf.XXXXXX")
    cp "$CONF" "$keep"
    start_all "$keep"
    return 0
  fi
  for i in "${idx[@]}"; do
    pid_of "$R/slurmd-node$i.pid" slurmd >/dev/null && continue
    start_slurmd "$i"; started=$((started + 1))
  done
  wait_ready "${#idx[@]}" responding
  echo "revive: started $started slurmd"
}

status() {
  local f p
  [ -d "$R" ] || { echo "no Slurm cluster at $R"; return 0; }
  p=$(pid_of "$SOCK.pid" munged) || p=-; echo "munged $p $([ "$p" = - ] && echo down || echo up)"
  p=$(pid_of "$R/slurmctld.pid" slurmctld) || p=-; echo "slurmctld $p $([ "$p" = - ] && echo down || echo up)"
  for f in "$R"/slurmd-node*.pid; do
    [ -e "$f" ] || continue
    p=$(pid_of "$f" slurmd) || p=-
    f=${f##*/slurmd-}; echo "${f%.pid} $p $([ "$p" = - ] && echo down || echo up)"
  done
  if p=$(pid_of "$R/slurmctld.pid" slurmctld); then
    NETPFX=(nsenter "--net=/proc/$p/ns/net")
    sinfo_in_ns -N -o '%N %T %E' || true
  fi
}

cmd=${1:-}; shift || true
case "$cmd" in
  up) up "$@" ;;
  revive) revive ;;
  down) [ "$(id -u)" = 0 ] || die "must run as root"; down ;;
  status) status ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac
