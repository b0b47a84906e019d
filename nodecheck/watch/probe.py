"""The watcher's sample of one node: one `sh -c` round trip, read by parsers/watch_sample.py.

Every value (the process pattern, the log and heartbeat paths, the tail size) is a positional
argument of the script, never text inside it, so a pattern with quotes, `;` or spaces reaches pgrep
as written and a path cannot inject a command.

`pgrep -f PATTERN` also matches this script's own shell (its argv holds the pattern), the shells it
forks for `$(...)`, and every process that started it: `timeout`, the login shell running the SSH
command line (bash execs a lone command, but a `cmd; :` line, another shell or a ForceCommand
wrapper does not), the watcher itself under the local transport (its argv holds `--match PATTERN`)
and whatever shell launched it. Counted as the job's, one of them would keep a node whose job died
"running": so $$, its children and ALL its ancestors (walked through /proc, without a fork) are
dropped before the list is printed.

The log and the heartbeat are opened and read by the job's user, never by root (shell.owned_read): the
watch config can be a user's JOB.yml, and the watcher runs as root, so `progress.log: /etc/shadow`, a
symlink to it, a file in a directory the job's user cannot enter, or another user's log is refused on
the node (the sample says why, as the log's error), never copied into a sample, an incident record or
the watcher's output. Size, mtime and tail are all taken from the file as that user opened it. The
job's user: the config file's owner when it is not root, else the Slurm job's user (squeue's); none
known (an operator's config over an inventory): a user's file is read as its owner, root's as nobody
(so only a root file everyone may reach and read).
"""

from __future__ import annotations

from nodecheck.core.model import Probe
from nodecheck.parsers.watch_sample import GPU_FIELDS, TAIL_BYTES
from nodecheck.probes.shell import ANCESTRY_FUNCTION, JOB_USER, JOB_USER_MAX, OWNED_READ_FUNCTION
from nodecheck.watch.config import WatchConfig

PROBE_NAME = "watch"
ARGV0 = "nodecheck-watch"  # $0 of the script: how it shows in `ps` on the node

# $1 process pattern (ERE; "" = not watched)  $2 log path ("" = none)  $3 heartbeat path ("" = none)
# $4 bytes of log tail  $5 the job's user (a uid or a name; "" = not known). A leading "~/" in a path is
# the remote user's home.
SCRIPT = (
    r"""
LC_ALL=C; export LC_ALL
"""
    + ANCESTRY_FUNCTION
    + OWNED_READ_FUNCTION
    + r"""
pattern=$1; log=$2; beat=$3; tail_bytes=$4; job_user=${5-}
case $log in '~/'*) log=$HOME/${log#'~/'} ;; esac
case $beat in '~/'*) beat=$HOME/${beat#'~/'} ;; esac
echo "@@nodecheck begin clock"
date +%s.%N 2>&1; echo "@@nodecheck end clock rc=$?"
echo "@@nodecheck begin gpus"
nvidia-smi --query-gpu="""
    + ",".join(GPU_FIELDS)
    + r""" --format=csv,noheader,nounits 2>&1
echo "@@nodecheck end gpus rc=$?"
if [ -n "$pattern" ]; then
  echo "@@nodecheck begin procs"
  pids=$(pgrep -f -- "$pattern" 2>&1); rc=$?
  ancestry
  if [ "$rc" = 0 ]; then
    out=$(ps -o pid=,ppid=,stat=,etimes=,args= -p "$(echo $pids | tr ' ' ,)" 2>&1); prc=$?
    if [ "$prc" != 0 ] && [ -n "$out" ]; then
      printf '%s\n' "$out"; rc=$prc
    elif [ -n "$out" ]; then
      printf '%s\n' "$out" | awk -v self=$$ -v skip="$skip" 'index(skip, " " $1 " ") == 0 && $2 != self'
    fi
  elif [ "$rc" = 1 ]; then
    rc=0
  else
    printf '%s\n' "$pids"
  fi
  echo "@@nodecheck end procs rc=$rc"
else
  echo "@@nodecheck procs unwatched"
fi
log_read= log_why= log_tail=
if [ -n "$log" ]; then
  echo "@@nodecheck begin log_stat"
  # one read, as the job's user: size, mtime and tail are the same file's
  if owned_read "$log" "$job_user" tail "$tail_bytes"; then
    log_read=1 log_tail=$oo_data; printf '%s\n%s\n' "$oo_size" "$oo_mtime"; rc=0
  else
    log_why=$oo_why; echo "nodecheck-watch: $log: $log_why"; rc=1
  fi
  echo "@@nodecheck end log_stat rc=$rc"
else
  echo "@@nodecheck log unwatched"
fi
if [ -n "$beat" ]; then
  echo "@@nodecheck begin heartbeat"
  if owned_read "$beat" "$job_user" none 0; then echo "$oo_mtime"; rc=0
  else echo "nodecheck-watch: $beat: $oo_why"; rc=1; fi
  echo "@@nodecheck end heartbeat rc=$rc"
else
  echo "@@nodecheck heartbeat unwatched"
fi
if [ -n "$log" ]; then
  echo "@@nodecheck begin log_tail"
  if [ -n "$log_read" ]; then
    printf '%s' "$log_tail"; rc=0; log_tail=
  else
    echo "nodecheck-watch: $log: $log_why"; rc=1
  fi
  echo; echo "@@nodecheck end log_tail rc=$rc"
fi
"""
)


def sample_argv(cfg: WatchConfig, node: str, job_user: str = "") -> tuple[str, ...]:
    if not JOB_USER.fullmatch(job_user) or len(job_user) > JOB_USER_MAX:
        raise ValueError(f"not a uid or a user name: {job_user[:60]!r}")
    log, heartbeat = cfg.progress.for_node(node)
    return ("sh", "-c", SCRIPT, ARGV0, cfg.match or "", log or "", heartbeat or "", str(TAIL_BYTES), job_user)


def sample_probe(cfg: WatchConfig, node: str, job_user: str = "") -> Probe:
    """The one probe a tick runs on `node`; its stdout is parsed by parse_sample. `job_user`: whose
    log and heartbeat these are (a uid or a user name; "" not known): see the module's docstring."""
    return Probe(PROBE_NAME, sample_argv(cfg, node, job_user), timeout_s=cfg.sample_timeout)
