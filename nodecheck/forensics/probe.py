"""The forensics probes: what one hung job's node is doing now (snapshot), every rank's stack (stacks),
one flight-recorder dump file (fetch). Each builds argv only; parsers/forensics.py reads their output.

Every value (the process pattern, the job id, paths, pids) is a positional argument of the script,
never text inside it. Values that come back (environment variables, paths) are printed escaped on
one line (probes/shell.py), so a variable whose value holds a newline or "@@nodecheck" cannot forge
a line, and only the variables named in RANK_VARS leave the node (never the job's secrets).

Dump paths come from the ranks' own environment and from /tmp, which the job's user controls: a file is
listed only when it is a regular file (not a symbolic link) owned by the uid of a rank that names its
prefix (c10d's default prefix: any rank of the job), and fetched only after the same checks are made
again on the file as opened (FETCH_PY): /etc/shadow behind TORCH_FR_DUMP_TEMP_FILE, or behind a
symlink in /tmp, is refused, never copied. The job's log (--log, a watch's progress.log) is opened and
read by the job's user, never by root (shell.owned_read): a root-only file there, or a link to one, is
the node's log error, none of its lines.
"""

from __future__ import annotations

from collections.abc import Sequence

from nodecheck.core.model import Probe
from nodecheck.judging.nccl_settings import TRACE_FILE_VARS
from nodecheck.parsers.watch_sample import GPU_FIELDS
from nodecheck.probes.shell import ANCESTRY_FUNCTION, ESC_AWK, JOB_USER, JOB_USER_MAX, OWNED_READ_FUNCTION

SNAPSHOT = "forensics-snapshot"
STACKS = "forensics-stacks"
FETCH_PREFIX = "forensics-dump-"  # + a number: one probe per dump file

# c10d's DebugInfoWriter default (TORCH_FR_DUMP_TEMP_FILE / TORCH_NCCL_DEBUG_INFO_TEMP_FILE unset)
DEFAULT_DUMP_PREFIX = "/tmp/nccl_trace_rank_"
NCCL_WARN_LINES = 50  # of the job's log: the last NCCL WARN lines
LOG_SCAN_BYTES = 4 * 1024 * 1024  # how much of the log's end is searched for them
# what is read of each rank's environment: who it is (torchrun, then srun), which GPU, where its
# flight recorder dumps, and whether it dumps at all
RANK_VARS = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "SLURM_NTASKS",
    "SLURM_STEP_ID",
    "SLURM_JOB_ID",
    "SLURMD_NODENAME",
    "CUDA_VISIBLE_DEVICES",
    *TRACE_FILE_VARS,
    "TORCH_NCCL_DUMP_ON_TIMEOUT",
    "TORCH_FR_BUFFER_SIZE",
    "TORCH_NCCL_TRACE_BUFFER_SIZE",
)

# esc_lines: stdin's lines, each escaped onto one line (the probes/shell.py escaping)
_ESC_LINES = f"""
esc_lines() {{ LC_ALL=C awk '{ESC_AWK}
{{ print esc($0) }}'; }}
"""

# $1 mode: "match" (pgrep -f $2) or "slurm" ($2 the job id: processes whose environment holds
# SLURM_JOB_ID=$2 and, where srun set it, SLURMD_NODENAME=$3); $4 the job's log ("" none; "~/" the
# remote user's home); $5 an extra dump prefix ("" none); $6 the job's user (a uid or a name; "" not
# known).
#
# The job's log is opened and read by the job's user, never by root (shell.owned_read): its path comes
# from the command line or a watch config, and it lies in the job's directory, where the job can put a
# symbolic link or a hard link to a root-only file. With no job's user known, a user's log is read as its
# owner and root's as nobody. A log that is refused says why, as the section's one line; none of it is
# read.
#
# pgrep -f also matches this script (its argv holds the pattern), its subshells and its ancestors
# (the SSH session's shell, timeout): they are dropped (probes/shell.py's ancestry, as the watch probe).
# /proc/PID/environ is NUL-separated: grep -z reads it; a value's own newline becomes \001 before
# the escaping, so every variable stays one line.
SNAPSHOT_SCRIPT = (
    _ESC_LINES
    + ANCESTRY_FUNCTION
    + OWNED_READ_FUNCTION
    + r"""
LC_ALL=C; export LC_ALL
mode=$1; what=$2; node=$3; log=$4; extra=$5; job_user=${6-}
case $log in '~/'*) log=$HOME/${log#'~/'} ;; esac
echo "@@nodecheck begin clock"
date +%s 2>&1; echo "@@nodecheck end clock rc=$?"
echo "@@nodecheck begin gpus"
nvidia-smi --query-gpu="""
    + ",".join(GPU_FIELDS)
    + r""" --format=csv,noheader,nounits 2>&1
echo "@@nodecheck end gpus rc=$?"
ancestry
if [ "$mode" = slurm ]; then
  pids=$(grep -l -z -x -F "SLURM_JOB_ID=$what" /proc/[0-9]*/environ 2>/dev/null | while read -r f; do
    f=${f#/proc/}; f=${f%/environ}
    if grep -q -z '^SLURMD_NODENAME=' "/proc/$f/environ" 2>/dev/null; then
      grep -q -z -x -F "SLURMD_NODENAME=$node" "/proc/$f/environ" 2>/dev/null || continue
    fi
    echo "$f"
  done); rc=0
else
  pids=$(pgrep -f -- "$what" 2>&1); rc=$?
  [ "$rc" = 1 ] && rc=0 && pids=
fi
mine=
for q in $pids; do
  case $q in *[!0-9]*) continue ;; esac
  case $skip in *" $q "*) continue ;; esac
  [ "$(sed -n 's/^PPid:[[:space:]]*//p' "/proc/$q/status" 2>/dev/null)" = "$$" ] && continue
  mine="$mine $q"
done
echo "@@nodecheck begin procs"
if [ "$rc" != 0 ]; then printf '%s\n' "$pids"
elif [ -n "$mine" ]; then ps -o pid=,ppid=,stat=,etimes=,args= -p "$(echo $mine | tr ' ' ,)"; rc=$?; [ "$rc" = 1 ] && rc=0
fi
echo "@@nodecheck end procs rc=$rc"
# each rank's dump prefixes with its uid ("UID<tab>PREFIX" lines); c10d's default prefix and
# --dump-prefix with every rank's uid: a dump is a file of a rank whose prefix names it, owned by that
# rank's user (the real uid of /proc/PID/status)
tab=$(printf '\t')
uids=; prefixes=
for q in $mine; do
  [ -r "/proc/$q/environ" ] || continue
  uid=$(sed -n 's/^Uid:[[:space:]]*\([0-9][0-9]*\).*/\1/p' "/proc/$q/status" 2>/dev/null)
  echo "@@nodecheck begin env-$q"
  grep -z -E "^("""
    + "|".join(RANK_VARS)
    + r""")=" "/proc/$q/environ" 2>/dev/null | tr '\n\000' '\001\n' | esc_lines
  echo "@@nodecheck end env-$q rc=0"
  [ -n "$uid" ] || continue
  case " $uids " in *" $uid "*) ;; *) uids="$uids $uid" ;; esac
  for v in """
    + " ".join(TRACE_FILE_VARS)
    + r'''; do
    pre=$(grep -z "^$v=" "/proc/$q/environ" 2>/dev/null | tr -d '\000' | sed -n "1s/^$v=//p")
    [ -n "$pre" ] && prefixes="$prefixes
$uid$tab$pre"
  done
done
for uid in $uids; do
  for pre in "'''
    + DEFAULT_DUMP_PREFIX
    + r"""" "$extra"; do
    [ -n "$pre" ] && prefixes="$prefixes
$uid$tab$pre"
  done
done
# per prefix, the uids that may own its files (" 0 1000 <tab>PREFIX"), then each of its files:
# "file SIZE MTIME OWNER PATH", or "refused WHY PATH" for a symbolic link, a file that is not regular
# or another user's file (never read). lstat only (stat without -L); the fetch checks again on the file
# as opened.
echo "@@nodecheck begin dumps"
printf '%s\n' "$prefixes" | LC_ALL=C awk '{ i = index($0, "\t"); if (!i) next
  u = substr($0, 1, i - 1); p = substr($0, i + 1)
  if (!(p in us)) { order[++n] = p; us[p] = " " }
  if (index(us[p], " " u " ") == 0) us[p] = us[p] u " " }
  END { for (k = 1; k <= n; k++) print us[order[k]] "\t" order[k] }' | while IFS= read -r line; do
  owners=${line%%"$tab"*}; pre=${line#*"$tab"}
  case $pre in /*) ;; *) printf 'relative\t%s\n' "$(printf '%s\n' "$pre" | esc_lines)"; continue ;; esac
  for f in "$pre"*; do
    [ -L "$f" ] || [ -e "$f" ] || continue
    e=$(printf '%s\n' "$f" | esc_lines)
    if [ -L "$f" ]; then printf 'refused\ta symbolic link, not followed\t%s\n' "$e"; continue; fi
    if [ ! -f "$f" ]; then printf 'refused\tnot a regular file\t%s\n' "$e"; continue; fi
    set -- $(stat -c '%s %Y %u' -- "$f" 2>/dev/null)
    [ $# = 3 ] || continue
    case $owners in
      *" $3 "*) printf 'file\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$e" ;;
      *) printf 'refused\towned by uid %s, not by the rank that names it (uid%s)\t%s\n' "$3" "${owners% }" "$e" ;;
    esac
  done
done
echo "@@nodecheck end dumps rc=0"
if [ -n "$log" ]; then
  echo "@@nodecheck begin nccl_warn"
  if owned_read "$log" "$job_user" tail """
    + str(LOG_SCAN_BYTES)
    + r"""; then
    printf '%s\n' "$oo_data" | grep -a 'NCCL WARN' | tail -n """
    + str(NCCL_WARN_LINES)
    + r""" | esc_lines; rc=0; oo_data=
  elif [ "$oo_why" = "No such file or directory" ]; then
    echo "$log: no such file"; rc=1
  else
    printf '%s: %s\n' "$log" "$oo_why"; rc=1
  fi
  echo "@@nodecheck end nccl_warn rc=$rc"
fi
"""
)

# $1 seconds py-spy may take per process; $2 "1": native frames too; $3 py-spy's path ("" = PATH);
# then the pids. Every process is dumped at once (a hung job does not change while we look, and a
# 64-rank node must not take 64 timeouts); each `timeout` bounds one py-spy. py-spy stops the process
# for the moment of its dump (a consistent stack); one that cannot be stopped (frozen in the kernel:
# py-spy waits for ever; SIGSTOPped or traced: it fails at once) is evidence, and its stack is then
# read once more without stopping it (--nonblocking: never hangs, may be inconsistent). A dump with
# native frames that fails for another reason than the timeout is tried again without them
# (unwinding is the part that breaks on stripped builds). The process's state and kernel wait
# channel after the dump say what a process that did not answer is stuck in (D: kernel or driver).
# RUST_BACKTRACE would add py-spy's own backtrace to its error text.
STACKS_SCRIPT = r"""
LC_ALL=C; export LC_ALL; unset RUST_BACKTRACE
t=$1; native=$2; spy=${3:-py-spy}; shift 3
if ! command -v "$spy" >/dev/null 2>&1; then echo "@@nodecheck pyspy missing"; exit 0; fi
printf '@@nodecheck pyspy %s\n' "$("$spy" --version 2>&1 | head -n 1)"
d=$(mktemp -d) || exit 1
trap 'rm -rf "$d"' EXIT
for p in "$@"; do
  (
    if [ "$native" = 1 ]; then
      timeout -k 2 "$t" "$spy" dump --native --pid "$p" >"$d/$p.out" 2>"$d/$p.err"; rc=$?
      if [ "$rc" != 0 ] && [ "$rc" != 124 ] && [ "$rc" != 137 ] && [ -d "/proc/$p" ]; then
        timeout -k 2 "$t" "$spy" dump --pid "$p" >"$d/$p.out" 2>"$d/$p.err"; rc=$?
      fi
    else
      timeout -k 2 "$t" "$spy" dump --pid "$p" >"$d/$p.out" 2>"$d/$p.err"; rc=$?
    fi
    echo "$rc" >"$d/$p.rc"
    if [ "$rc" != 0 ] && [ -d "/proc/$p" ]; then
      timeout -k 2 "$t" "$spy" dump --nonblocking --pid "$p" >"$d/$p.nb" 2>/dev/null; echo "$?" >"$d/$p.nbrc"
    fi
  ) &
done
wait
for p in "$@"; do
  state=$(sed -n 's/^State:[[:space:]]*//p' "/proc/$p/status" 2>/dev/null)
  printf '@@nodecheck pstate %s %s\t%s\n' "$p" "$(cat "/proc/$p/wchan" 2>/dev/null)" "${state:-gone}"
  echo "@@nodecheck begin stack-$p"
  cat "$d/$p.out" 2>/dev/null
  echo "@@nodecheck end stack-$p rc=$(cat "$d/$p.rc" 2>/dev/null || echo 125)"
  echo "@@nodecheck begin stackerr-$p"
  head -c 2000 "$d/$p.err" 2>/dev/null | esc_lines
  echo "@@nodecheck end stackerr-$p rc=0"
  if [ -f "$d/$p.nbrc" ]; then
    echo "@@nodecheck begin unpaused-$p"
    cat "$d/$p.nb" 2>/dev/null
    echo "@@nodecheck end unpaused-$p rc=$(cat "$d/$p.nbrc")"
  fi
done
"""

# The fetch: $1 the Python below, $2 the dump file, $3 the uid that must own it, $4 the most bytes
# fetched. Python, not sh: the file is opened once, with O_NOFOLLOW (a symbolic link is refused, never
# followed) and O_NONBLOCK (a FIFO put in its place cannot hang the probe); each directory on its path
# is opened the same way (a symbolic link there is followed only when root owns it, as /scratch ->
# /lustre/scratch); the checks are made on the open file (fstat): a regular file, the very one lstat
# saw, owned by the rank's uid, one link, within the bound. Those bytes are read, gzip'ed (a dump is
# mostly repeated frame strings) and base64'ed, since a capture is text. No python3: refused, never a
# weaker read.
FETCH_SCRIPT = r"""
if ! command -v python3 >/dev/null 2>&1; then
  echo "@@nodecheck refused python3 is not installed on the node (a dump is read only through its O_NOFOLLOW open and fstat checks)"
  exit 0
fi
exec python3 -I -S -c "$1" "$2" "$3" "$4"
"""

FETCH_PY = r"""
import base64, errno, os, stat, sys, zlib
path, uid, bound = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def say(line):
    sys.stdout.write("@@nodecheck " + line + "\n")
    sys.exit(0)
def directory(parts):
    fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
    for part in parts:
        try:
            nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
        except OSError as e:
            if e.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            st = os.lstat(part, dir_fd=fd)
            if not stat.S_ISLNK(st.st_mode):
                raise
            if st.st_uid != 0:
                say("refused a directory on its path is a symbolic link owned by uid %d" % st.st_uid)
            nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = nxt
    return fd
parts = [p for p in path.split("/") if p]
if not path.startswith("/") or not parts or any(p in (".", "..") for p in parts):
    say("refused not an absolute path free of . and ..")
try:
    fd = directory(parts[:-1])
    seen = os.lstat(parts[-1], dir_fd=fd)
    if stat.S_ISLNK(seen.st_mode):
        say("refused a symbolic link, not followed")
    if not stat.S_ISREG(seen.st_mode):
        say("refused not a regular file")
    f = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY, dir_fd=fd)
except FileNotFoundError:
    say("missing")
except OSError as e:
    if e.errno == errno.ELOOP:
        say("refused a symbolic link, not followed")
    say("refused cannot open it: %s" % os.strerror(e.errno or 0))
st = os.fstat(f)
if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (seen.st_dev, seen.st_ino):
    say("refused it changed while it was opened")
if st.st_uid != uid:
    say("refused owned by uid %d, not by the rank (uid %d)" % (st.st_uid, uid))
if st.st_nlink != 1:
    say("refused it has %d hard links" % st.st_nlink)
if st.st_size > bound:
    say("too_large %d" % st.st_size)
chunks, got = [], 0
while got <= bound:
    chunk = os.read(f, min(1 << 20, bound + 1 - got))
    if not chunk:
        break
    chunks.append(chunk)
    got += len(chunk)
if got > bound:
    say("too_large %d" % got)
packer = zlib.compressobj(6, zlib.DEFLATED, 31)
packed = packer.compress(b"".join(chunks)) + packer.flush()
sys.stdout.write("@@nodecheck encoding gzip+base64 %d\n" % st.st_size)
sys.stdout.write(base64.encodebytes(packed).decode("ascii"))
"""


def snapshot_probe(
    mode: str, what: str, node: str, log: str | None, extra_prefix: str | None, timeout_s: float, user: str = ""
) -> Probe:
    """`user`: the job's user, who reads its log (a uid or a user name; "" not known: see SNAPSHOT_SCRIPT)."""
    if mode not in ("match", "slurm"):
        raise ValueError(f"mode {mode!r}")
    if not JOB_USER.fullmatch(user) or len(user) > JOB_USER_MAX:
        raise ValueError(f"not a uid or a user name: {user[:60]!r}")
    return Probe(
        SNAPSHOT,
        ("sh", "-c", SNAPSHOT_SCRIPT, "nodecheck-forensics", mode, what, node, log or "", extra_prefix or "", user),
        timeout_s=timeout_s,
    )


def stacks_probe(pids: Sequence[int], timeout_s: float, native: bool, pyspy: str | None) -> Probe:
    # the probe's own bound: every py-spy at once, each with its kill grace and its retries, plus the
    # round trip
    bound = 3 * (timeout_s + 2) + 10  # native, without native, then --nonblocking
    return Probe(
        STACKS,
        (
            "sh",
            "-c",
            _ESC_LINES + STACKS_SCRIPT,
            "nodecheck-forensics-stacks",
            f"{timeout_s:g}",
            "1" if native else "0",
            pyspy or "",
            *(str(int(p)) for p in pids),
        ),
        timeout_s=bound,
    )


def fetch_probe(k: int, path: str, owner: int, max_bytes: int, timeout_s: float) -> Probe:
    """forensics-dump-K: the dump at path, read only when it is still a regular file owned by uid owner."""
    return Probe(
        f"{FETCH_PREFIX}{k}",
        ("sh", "-c", FETCH_SCRIPT, "nodecheck-forensics-fetch", FETCH_PY, path, str(int(owner)), str(int(max_bytes))),
        timeout_s=timeout_s,
    )
