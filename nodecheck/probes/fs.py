"""The filesystem probes of fs.mounts and fs.free, and the bounded, killable statfs they share.

Why a statfs needs this much care: on a hung NFS or Lustre client or a FUSE mount whose daemon
stopped, statfs(2) blocks in the kernel. NFS mounts are `hard` by default (nfs(5)): the client
retries a request to a dead server forever, it never fails. Since Linux 2.6.25 the NFS client waits
in TASK_KILLABLE, so SIGKILL ends such a wait (ps still shows it as D until then); FUSE's wait is
killable while the request is still queued. Many other waits are uninterruptible (Lustre's, a FUSE
request the daemon already took, page-cache writeback): the task sits in state D, and not even
SIGKILL ends it until the server answers. A `wait` on such a child blocks the waiter with it, and
a child that inherited the SSH channel's stdout keeps the session open after the probe's shell is
gone. So each path is stat'ed by its own background process, with stdin from /dev/null and its output
into a private temporary file, all paths at once (N hung mounts cost one bound, not N), polled
until the bound, then sent SIGKILL and never waited on; what /proc/PID/stat says afterwards is
reported (D: the process stays behind, and the message says so). `df` and `mount` are never run:
df statfs's every mount (NHC's README warns its check_fs_free "may HANG in cases of NFS failure").
A path on which an earlier run's stat is still stuck is not stat'ed again (stuck_stats), so a dead
mount holds one process however many prologs run.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from nodecheck.core.model import Probe
from nodecheck.parsers.statfs import STATFS_FORMAT
from nodecheck.probes.shell import ESCAPE_FUNCTIONS

# The probe's own temporary directory: the first of these where mktemp -d works (/tmp may be the
# full filesystem under test; then /dev/shm, /run). Not $TMPDIR: a user's TMPDIR on a network
# filesystem could hang the mkdir itself.
TEMP_DIRS = ("/tmp", "/dev/shm", "/run", "/var/tmp")
MOUNTS_MAX = 8 * 1024 * 1024  # bytes of mount table read at most (a Kubernetes node's is large)
FSTAB_MAX = 256 * 1024

# stuck_stats FILE: "PID:PATH" of every stat -f of ours (STATFS_FORMAT) that an earlier run left in
# D state on PATH, in this mount namespace (a container's or another simulated node's stat on its own
# /mnt/shared is not this node's). A path with one is not stat'ed again: every prolog on a node with
# a dead mount would otherwise leave one more process the kernel holds. Only the command line of a
# stat of nodecheck's own user already in D state is read (reading another process's cmdline takes its
# mm lock, which a stat stuck in statfs does not hold, but a user's process named stat, stuck in a page
# fault on its own FUSE mount, would: the probe would hang on it).
# statfs_all LIMIT_CS DIR PATH...: stat -f every PATH at once, each in its own process writing to
# DIR/N.out; prints for path N "@@nodecheck path.N <escaped path>" and either its result
# ("@@nodecheck took.N CS" and a "statfs.N" section with stat's output and exit code) or, when it did
# not answer within LIMIT_CS centiseconds, "@@nodecheck hung.N PID STATE WAITED_CS" where STATE is what
# /proc/PID/stat says after the SIGKILL ("gone": it died), with " earlier" when the stuck stat is
# one an earlier run left (stuck_stats) and no new one was started. Needs ESCAPE_FUNCTIONS (escaped).
# Time is read from /proc/uptime (centiseconds since boot, monotonic, no fork; a faked `date` on the
# node cannot skew it). A child has exited when /proc/PID/stat is gone (bash reaps children itself)
# or says Z; only then is it waited on. Until it exec's stat it is a copy of this shell: still
# running. Only a process /proc/PID/stat names (stat) is killed or reported: a PID that the shell
# already reaped and the kernel gave to another program is not.
STATFS_FUNCTION = r"""
nc_now() {
  nc_cs=$nc_loops
  if read -r nc_up nc_rest 2>/dev/null </proc/uptime; then
    nc_cs=${nc_up%.*}${nc_up#*.}
    nc_cs=${nc_cs#"${nc_cs%%[!0]*}"}
    nc_cs=${nc_cs:-0}
  fi
}
nc_state() {
  nc_st= nc_comm=
  read -r nc_line 2>/dev/null <"/proc/$1/stat" || return 0
  nc_comm=${nc_line#*\(}
  nc_comm=${nc_comm%\)*}
  nc_st=${nc_line##*) }
  nc_st=${nc_st%% *}
}
stuck_stats() {
  : >"$1"
  for nc_f in /proc/[0-9]*/stat; do
    read -r nc_line 2>/dev/null <"$nc_f" || continue
    case $nc_line in *" (stat) D "*) ;; *) continue ;; esac
    nc_pid=${nc_f#/proc/}
    nc_pid=${nc_pid%/stat}
    [ "/proc/$nc_pid/ns/mnt" -ef /proc/self/ns/mnt ] 2>/dev/null || continue
    [ "$(stat -c %u -- "/proc/$nc_pid" 2>/dev/null)" = "$(id -u)" ] || continue   # ours, not a user's
    tr '\000' '\n' 2>/dev/null <"/proc/$nc_pid/cmdline" | {
      nc_n=0 nc_fmt= nc_path=
      while IFS= read -r nc_arg; do
        nc_n=$((nc_n + 1))
        case $nc_n in 4) nc_fmt=$nc_arg ;; 6) nc_path=$nc_arg ;; esac
      done
      [ "$nc_n" = 6 ] && [ "$nc_fmt" = 'STATFS_FORMAT' ] && printf '%s:%s\n' "$nc_pid" "$nc_path"
    } >>"$1"
  done
}
statfs_all() {
  sa_limit=$1 sa_dir=$2 nc_loops=0
  shift 2
  nc_now; sa_t0=$nc_cs
  stuck_stats "$sa_dir/stuck"
  sa_i=0 sa_left=
  for sa_p in "$@"; do
    sa_old=
    while IFS= read -r sa_line; do
      [ "${sa_line#*:}" = "$sa_p" ] && sa_old=${sa_line%%:*} && break
    done <"$sa_dir/stuck"
    if [ -n "$sa_old" ]; then                   # one stuck stat a path is enough: not another
      echo "$sa_old D 0 earlier" >"$sa_dir/$sa_i.hung"
    else
      stat -f -c 'STATFS_FORMAT' -- "$sa_p" </dev/null >"$sa_dir/$sa_i.out" 2>&1 &
      sa_left="$sa_left $sa_i:$!"
    fi
    sa_i=$((sa_i + 1))
  done
  sa_killed=0
  while [ -n "$sa_left" ]; do
    sa_next=
    for sa_j in $sa_left; do
      sa_n=${sa_j%%:*} sa_pid=${sa_j#*:}
      nc_state "$sa_pid"
      case $nc_st in
        ''|Z|X)                                 # exited: reaping a zombie never blocks
          wait "$sa_pid" 2>/dev/null; sa_rc=$?; nc_now
          if [ "$sa_killed" = 1 ]; then echo "$sa_pid gone $((nc_cs - sa_t0))" >"$sa_dir/$sa_n.hung"
          else echo "$sa_rc $((nc_cs - sa_t0))" >"$sa_dir/$sa_n.rc"; fi ;;
        *) sa_next="$sa_next $sa_j" ;;
      esac
    done
    sa_left=$sa_next
    [ -n "$sa_left" ] || break
    nc_now
    if [ "$sa_killed" = 0 ] && [ $((nc_cs - sa_t0)) -ge "$sa_limit" ]; then
      # past the bound: SIGKILL every one still running, then give a killable wait half a second to
      # unwind; whatever is still there after that is stuck (D) and is left, never waited on
      for sa_j in $sa_left; do
        nc_state "${sa_j#*:}"
        [ "$nc_comm" = stat ] && kill -KILL "${sa_j#*:}" 2>/dev/null
      done
      sa_killed=1 sa_limit=$((sa_limit + 50))
    elif [ "$sa_killed" = 1 ] && [ $((nc_cs - sa_t0)) -ge "$sa_limit" ]; then
      for sa_j in $sa_left; do
        nc_state "${sa_j#*:}"
        [ "$nc_comm" = stat ] || nc_st=gone
        echo "${sa_j#*:} $nc_st $((nc_cs - sa_t0))" >"$sa_dir/${sa_j%%:*}.hung"
      done
      break
    fi
    sleep 0.05 2>/dev/null || sleep 1
    nc_loops=$((nc_loops + 5))
  done
  sa_i=0
  for sa_p in "$@"; do
    printf '@@nodecheck path.%s %s\n' "$sa_i" "$(escaped "$sa_p")"
    if read -r sa_a sa_b sa_c sa_d 2>/dev/null <"$sa_dir/$sa_i.hung"; then
      echo "@@nodecheck hung.$sa_i $sa_a $sa_b $sa_c${sa_d:+ $sa_d}"
    elif read -r sa_a sa_b 2>/dev/null <"$sa_dir/$sa_i.rc"; then
      echo "@@nodecheck took.$sa_i $sa_b"
      echo "@@nodecheck begin statfs.$sa_i"
      head -c 4096 "$sa_dir/$sa_i.out"
      echo "@@nodecheck end statfs.$sa_i rc=$sa_a"
    fi
    sa_i=$((sa_i + 1))
  done
}
nc_tmp=
for nc_d in TEMP_DIRS; do
  # a directory on a full filesystem can often still be made (tmpfs, ext4's reserve) while a file's
  # first byte cannot be written: try a write before taking it
  if nc_tmp=$(mktemp -d "$nc_d/nodecheck-fs.XXXXXX" 2>/dev/null); then
    { echo ok >"$nc_tmp/w" && read -r nc_ok <"$nc_tmp/w" && [ "$nc_ok" = ok ]; } 2>/dev/null && break
    rm -rf "$nc_tmp"
  fi
  nc_tmp=
done
if [ -z "$nc_tmp" ]; then
  echo "@@nodecheck error cannot write a temporary file in any of TEMP_DIRS"
  exit 0
fi
""".replace("STATFS_FORMAT", STATFS_FORMAT).replace("TEMP_DIRS", " ".join(TEMP_DIRS))

# The fstab entries the mounts probe stat's when asked to (from_fstab): field 2 of every entry that is
# not noauto, not swap/ignore, with an absolute mount point, "\040"-style escapes decoded (one per
# line; one whose decoded path holds a newline is left out). The same rule as
# nodecheck.parsers.fstab.FstabEntry.auto_mounted. LC_ALL=C: bytes, whatever the node's locale.
FSTAB_AWK = r"""
function dec(s,   out, i, c, d) {
  out = ""
  for (i = 1; i <= length(s); i++) {
    c = substr(s, i, 1)
    if (c == "\\" && substr(s, i + 1, 3) ~ /^[0-7][0-7][0-7]$/) {
      d = substr(s, i + 1, 3)
      out = out sprintf("%c", substr(d, 1, 1) * 64 + substr(d, 2, 1) * 8 + substr(d, 3, 1))
      i += 3
    } else out = out c
  }
  return out
}
{
  n = 0
  for (i = 1; i <= NF; i++) { if (substr($i, 1, 1) == "#") break; n = i }
  if (n < 3) next
  if ($3 == "swap" || $3 == "ignore") next
  if (n >= 4 && ("," $4 ",") ~ /,noauto,/) next
  if (substr($2, 1, 1) != "/") next
  p = dec($2)
  if (p ~ /\n/) next
  print p
}
"""

# mount_table: the "mounts" section (and the "mounts-from" fact). findmnt -P -o ...: key="value" pairs
# with unsafe characters hex-escaped, the columns asked for, one mount a line (no tree), the same in
# util-linux 2.23 (EL7) and later; it only reads /proc/self/mountinfo (no statfs, since no
# SIZE/AVAIL/USED column is asked for), so it cannot hang on a dead server. Without findmnt,
# mountinfo itself. Needs $nc_tmp.
MOUNT_TABLE_FUNCTION = r"""
mount_table() {
  if command -v findmnt >/dev/null 2>&1; then
    echo "@@nodecheck mounts-from findmnt"
    findmnt -P -o TARGET,SOURCE,FSTYPE,OPTIONS </dev/null >"$nc_tmp/mounts" 2>&1; rc=$?
  else
    echo "@@nodecheck mounts-from mountinfo"
    cat /proc/self/mountinfo >"$nc_tmp/mounts" 2>&1; rc=$?
  fi
  [ "$(wc -c <"$nc_tmp/mounts")" -gt MOUNTS_MAX ] && echo "@@nodecheck mounts-truncated MOUNTS_MAX"
  echo "@@nodecheck begin mounts"
  head -c MOUNTS_MAX "$nc_tmp/mounts"
  echo "@@nodecheck end mounts rc=$rc"
}
""".replace("MOUNTS_MAX", str(MOUNTS_MAX))

# $1: the statfs bound in centiseconds; $2: 1 = also every fstab entry mounted at boot; $3: how many
# listed mount points follow; then those, then the fstab mount points not to touch (exclude). Paths
# are one line each (the params refuse newlines), so they travel through files line by line. Order: the statfs first, then the mount table, so an automount (systemd's
# x-systemd.automount: autofs until first use) that the statfs triggered is in the table.
MOUNTS_SCRIPT = (
    ESCAPE_FUNCTIONS
    + STATFS_FUNCTION
    + MOUNT_TABLE_FUNCTION
    + r"""
limit=$1 fstab=$2 listed=$3
shift 3
i=0
: >"$nc_tmp/listed"
: >"$nc_tmp/exclude"
for p in "$@"; do
  if [ "$i" -lt "$listed" ]; then printf '%s\n' "$p" >>"$nc_tmp/listed"; else printf '%s\n' "$p" >>"$nc_tmp/exclude"; fi
  i=$((i + 1))
done
set --
while IFS= read -r p; do set -- "$@" "$p"; done <"$nc_tmp/listed"
if [ "$fstab" = 1 ]; then
  if [ -e /etc/fstab ]; then
    echo "@@nodecheck begin fstab"
    head -c FSTAB_MAX /etc/fstab; rc=$?
    echo "@@nodecheck end fstab rc=$rc"
    head -c FSTAB_MAX /etc/fstab | LC_ALL=C awk 'FSTAB_AWK' >"$nc_tmp/fstab.paths" 2>/dev/null
    while IFS= read -r p; do
      grep -qxF -- "$p" "$nc_tmp/exclude" || set -- "$@" "$p"
    done <"$nc_tmp/fstab.paths"
  else
    echo "@@nodecheck fstab-missing /etc/fstab"
  fi
fi
statfs_all "$limit" "$nc_tmp" "$@"
mount_table
rm -rf "$nc_tmp"
exit 0
""".replace("FSTAB_MAX", str(FSTAB_MAX)).replace("FSTAB_AWK", FSTAB_AWK)
)

# $1: the statfs bound in centiseconds; then the paths. The mount table after the statfs, as in
# MOUNTS_SCRIPT: the filesystem's type by its name there (ext4), not by statfs's magic ("ext2/ext3").
FREE_SCRIPT = (
    ESCAPE_FUNCTIONS
    + STATFS_FUNCTION
    + MOUNT_TABLE_FUNCTION
    + r"""
limit=$1
shift
statfs_all "$limit" "$nc_tmp" "$@"
mount_table
rm -rf "$nc_tmp"
exit 0
"""
)

# The probe's own bound over its statfs bound: mktemp, findmnt, the half second after the SIGKILL,
# printing; the runner kills the whole probe at this (a TIMEOUT of the check, not of one mount).
PROBE_MARGIN_S = 15.0


def _name(kind: str, args: Sequence[str]) -> str:
    # probes are deduplicated by name across checks: a different argv needs a different name
    return f"{kind}:{hashlib.sha256(json.dumps(list(args)).encode()).hexdigest()[:12]}"


def centiseconds(seconds: float) -> str:
    return str(max(1, round(seconds * 100)))


def mounts_probe(paths: Sequence[str], from_fstab: bool, stat_timeout_s: float, exclude: Sequence[str] = ()) -> Probe:
    """The fs.mounts probe: statfs of `paths` (and of fstab's entries with from_fstab, but those in
    `exclude`), then the mount table."""
    args = (centiseconds(stat_timeout_s), "1" if from_fstab else "0", str(len(paths)), *paths, *exclude)
    return Probe(
        _name("fs-mounts", args),
        ("sh", "-c", MOUNTS_SCRIPT, "nodecheck-fs-mounts", *args),
        timeout_s=stat_timeout_s + PROBE_MARGIN_S,
    )


def free_probe(paths: Sequence[str], stat_timeout_s: float) -> Probe:
    """The fs.free probe: statfs of `paths`."""
    args = (centiseconds(stat_timeout_s), *paths)
    return Probe(
        _name("fs-free", args),
        ("sh", "-c", FREE_SCRIPT, "nodecheck-fs-free", *args),
        timeout_s=stat_timeout_s + PROBE_MARGIN_S,
    )
