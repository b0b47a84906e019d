#!/bin/bash
# RebootProgram of the harness's Slurm (slurm_cluster.sh up with REBOOT_PROGRAM=1; README "Reboot").
#
# slurmd runs it through system(), inside its node's namespaces, holding its configuration lock: it
# must return at once. So it checks where it runs, hands the "reboot" to a detached copy of itself and
# exits 0. The detached copy stops that node's slurmd (only the one process its pid file names, after
# checking it is a slurmd of this cluster), runs the node's "on reboot" hook if the test left one
# ($S/nodes/nodeI/data/on-reboot.sh: what a reboot clears, e.g. a GPU's pending row remap), and starts
# the slurmd again with `-b` ("Report node rebooted when daemon restarted"): its boot time is then its
# start time, newer than the reboot request, and slurmctld takes the node back (README "Reboot").
# Every reboot appends one line to $R/reboots/nodeI.log: the time and the node's State= and Reason=
# as slurmctld showed them when the reboot began (tests count and read them: Slurm's transient
# REBOOT_ISSUED state, seen without polling). A hook that exits 75 keeps the node off: its slurmd stays
# stopped (a reboot that never comes back; slurmctld marks it DOWN after ResumeTimeout). Its own
# output goes to $R/log/reboot-nodeI.log. It never reboots anything: no reboot(8), no systemctl, nothing outside
# the node's slurmd.
set -u
PATH=/usr/sbin:/usr/bin:/sbin:/bin

die() { echo "slurm_reboot.sh: $*" >&2; exit 1; }

if [ "${1:-}" != --detached ]; then
  node=$(hostname)
  # a simulated node has the hostname nodeI (its UTS namespace); anywhere else: refuse
  [[ $node =~ ^node[1-9][0-9]*$ ]] || die "hostname '$node' is not a simulated node's: refusing"
  conf=${SLURM_CONF:-}   # slurm_cluster.sh starts every slurmd with SLURM_CONF=$R/slurm.conf only
  [[ $conf == /*/slurm.conf && -f $conf ]] || die "no SLURM_CONF of the harness's Slurm (got '$conf')"
  R=${conf%/slurm.conf}
  setsid -f /bin/bash "$0" --detached "$node" "$R" </dev/null >>"$R/log/reboot-$node.log" 2>&1
  exit 0
fi

node=$2 R=$3
# slurmd's descriptors (its listening socket among them) must not outlive it in this process
for fd in /proc/$$/fd/*; do
  fd=${fd##*/}
  [[ $fd =~ ^[0-9]+$ ]] && ((fd > 2)) && eval "exec $fd>&-" 2>/dev/null
done
S=${R%/slurm}
pidfile=$R/slurmd-$node.pid
conf=$R/slurm.conf

is_our_slurmd() {   # pid $1 is a live slurmd started with -N $node -f $conf
  local comm args
  read -r comm 2>/dev/null < "/proc/$1/comm" && [ "$comm" = slurmd ] || return 1
  args=$(tr '\0' ' ' 2>/dev/null < "/proc/$1/cmdline") || return 1
  [[ " $args " == *" -N $node "* && " $args " == *" -f $conf "* ]]
}

echo "$(date +%FT%T) $node: reboot"
# the node as slurmctld shows it now (REBOOT_ISSUED: it set that before it sent the request)
seen=$(timeout 10 scontrol -o show node "$node" 2>&1) || seen="scontrol failed: $seen"
state=$(sed -n 's/.* State=\([^ ]*\).*/\1/p' <<<"$seen")
reason=$(sed -n 's/.* Reason=\(.*\)$/\1/p' <<<"$seen")
pid=; read -r pid 2>/dev/null < "$pidfile" || true
if [ -n "$pid" ] && is_our_slurmd "$pid"; then
  kill -TERM "$pid"
  for ((t = 0; t < 200; t++)); do is_our_slurmd "$pid" || break; sleep 0.05; done
  is_our_slurmd "$pid" && { kill -KILL "$pid"; sleep 0.2; }
  is_our_slurmd "$pid" && die "slurmd $pid of $node does not stop"
else
  echo "no slurmd of $node running (pid file: '$pid'); starting one"
fi

hook=$S/nodes/$node/data/on-reboot.sh
rc=0
[ ! -f "$hook" ] || /bin/sh "$hook" || rc=$?
mkdir -p "$R/reboots"
echo "$(date +%FT%T) $node State=$state Reason=$reason" >> "$R/reboots/$node.log"
case $rc in
  0) ;;
  75) echo "on-reboot hook: the node stays off"; exit 0 ;;
  *) echo "on-reboot hook $hook failed (exit $rc)" ;;
esac
env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin SLURM_CONF="$conf" slurmd -b -N "$node" -f "$conf" \
  </dev/null >"$R/log/slurmd-$node.start" 2>&1 || die "slurmd -b of $node did not start"
echo "$(date +%FT%T) $node: slurmd started again"
