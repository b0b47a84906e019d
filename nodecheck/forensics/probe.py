"""The forensics probes: what one hung job's node is doing now (snapshot), every rank's stack (stacks),
one flight-recorder dump file (fetch). Each builds argv only; parsers/forensics.py reads their output.

Every value (the process pattern, the job id, paths, pids) is a positional argument of the script,
never text inside it. Values that come back (environment variables, paths) are printed escaped on
one line (probes/shell.py), so a variable whose value holds a newline or "@@nodecheck" cannot forge
a line, and only the variables named in RANK_VARS leave the node (never the job's secrets).
"""
from __future__ import annotations

from typing import Sequence

from nodecheck.model import Probe
from nodecheck.ncclvars import TRACE_FILE_VARS
from nodecheck.parsers.watch_sample import GPU_FIELDS
from nodecheck.probes.shell import _ESC_AWK, ANCESTRY_FUNCTION

SNAPSHOT = "forensics-snapshot"
STACKS = "forensics-stacks"
FETCH_PREFIX = "forensics-dump-"               # + a number: one probe per dump file

# c10d's DebugInfoWriter default (TORCH_FR_DUMP_TEMP_FILE / TORCH_NCCL_DEBUG_INFO_TEMP_FILE unset)
DEFAULT_DUMP_PREFIX = "/tmp/nccl_trace_rank_"
NCCL_WARN_LINES = 50                           # of the job's log: the last NCCL WARN lines
LOG_SCAN_BYTES = 4 * 1024 * 1024               # how much of the log's end is searched for them
# what is read of each rank's environment: who it is (torchrun, then srun), which GPU, where its
# flight recorder dumps, and whether it dumps at all
RANK_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "SLURM_PROCID",
             "SLURM_LOCALID", "SLURM_NTASKS", "SLURM_STEP_ID", "SLURM_JOB_ID", "SLURMD_NODENAME", "CUDA_VISIBLE_DEVICES",
             *TRACE_FILE_VARS, "TORCH_NCCL_DUMP_ON_TIMEOUT", "TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")

# esc_lines: stdin's lines, each escaped onto one line (the probes/shell.py escaping)
_ESC_LINES = f'''
esc_lines() {{ LC_ALL=C awk '{_ESC_AWK}
{{ print esc($0) }}'; }}
'''

# $1 mode: "match" (pgrep -f $2) or "slurm" ($2 the job id: processes whose environment holds
# SLURM_JOB_ID=$2 and, where srun set it, SLURMD_NODENAME=$3); $4 the job's log ("" none; "~/" the
# remote user's home); $5 an extra dump prefix ("" none).
#
# pgrep -f also matches this script (its argv holds the pattern), its subshells and its ancestors
# (the SSH session's shell, timeout): they are dropped (probes/shell.py's ancestry, as the watch probe).
# /proc/PID/environ is NUL-separated: grep -z reads it; a value's own newline becomes \001 before
# the escaping, so every variable stays one line.
SNAPSHOT_SCRIPT = _ESC_LINES + ANCESTRY_FUNCTION + r'''
LC_ALL=C; export LC_ALL
mode=$1; what=$2; node=$3; log=$4; extra=$5
case $log in '~/'*) log=$HOME/${log#'~/'} ;; esac
echo "@@nodecheck begin clock"
date +%s 2>&1; echo "@@nodecheck end clock rc=$?"
echo "@@nodecheck begin gpus"
nvidia-smi --query-gpu=''' + ",".join(GPU_FIELDS) + r''' --format=csv,noheader,nounits 2>&1
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
prefixes="$extra"
for q in $mine; do
  [ -r "/proc/$q/environ" ] || continue
  echo "@@nodecheck begin env-$q"
  grep -z -E "^(''' + "|".join(RANK_VARS) + r''')=" "/proc/$q/environ" 2>/dev/null | tr '\n\000' '\001\n' | esc_lines
  echo "@@nodecheck end env-$q rc=0"
  for v in ''' + " ".join(TRACE_FILE_VARS) + r'''; do
    pre=$(grep -z "^$v=" "/proc/$q/environ" 2>/dev/null | tr -d '\000' | sed -n "1s/^$v=//p")
    [ -n "$pre" ] && prefixes="$prefixes
$pre"
  done
done
echo "@@nodecheck begin dumps"
printf '%s\n%s\n' "''' + DEFAULT_DUMP_PREFIX + r'''" "$prefixes" | sort -u | while IFS= read -r pre; do
  [ -n "$pre" ] || continue
  case $pre in /*) ;; *) printf 'relative\t%s\n' "$(printf '%s\n' "$pre" | esc_lines)"; continue ;; esac
  for f in "$pre"*; do
    [ -f "$f" ] || continue
    printf 'file\t%s\t%s\t%s\n' "$(stat -c %s -- "$f")" "$(stat -c %Y -- "$f")" "$(printf '%s\n' "$f" | esc_lines)"
  done
done
echo "@@nodecheck end dumps rc=0"
if [ -n "$log" ]; then
  echo "@@nodecheck begin nccl_warn"
  if [ -f "$log" ]; then
    tail -c ''' + str(LOG_SCAN_BYTES) + r''' -- "$log" | grep -a 'NCCL WARN' | tail -n ''' + str(NCCL_WARN_LINES) + r''' | esc_lines; rc=0
  else
    echo "$log: no such file"; rc=1
  fi
  echo "@@nodecheck end nccl_warn rc=$rc"
fi
'''

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
STACKS_SCRIPT = r'''
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
'''

# $1 the dump file, $2 the most bytes fetched: gzip'ed (a dump is mostly repeated frame strings) and
# base64'ed, since a capture is text; "too_large" instead of a file past the bound.
FETCH_SCRIPT = r'''
f=$1; max=$2
[ -f "$f" ] || { echo "@@nodecheck missing"; exit 0; }
size=$(stat -c %s -- "$f") || exit 1
if [ "$size" -gt "$max" ]; then echo "@@nodecheck too_large $size"; exit 0; fi
if command -v gzip >/dev/null 2>&1; then
  echo "@@nodecheck encoding gzip+base64 $size"; gzip -c -- "$f" | base64
else
  echo "@@nodecheck encoding base64 $size"; base64 -- "$f"
fi
'''


def snapshot_probe(mode: str, what: str, node: str, log: str | None, extra_prefix: str | None,
                   timeout_s: float) -> Probe:
    if mode not in ("match", "slurm"):
        raise ValueError(f"mode {mode!r}")
    return Probe(SNAPSHOT, ("sh", "-c", SNAPSHOT_SCRIPT, "nodecheck-forensics", mode, what, node, log or "",
                            extra_prefix or ""), timeout_s=timeout_s)


def stacks_probe(pids: Sequence[int], timeout_s: float, native: bool, pyspy: str | None) -> Probe:
    # the probe's own bound: every py-spy at once, each with its kill grace and its retries, plus the
    # round trip
    bound = 3 * (timeout_s + 2) + 10           # native, without native, then --nonblocking
    return Probe(STACKS, ("sh", "-c", _ESC_LINES + STACKS_SCRIPT, "nodecheck-forensics-stacks", f"{timeout_s:g}",
                          "1" if native else "0", pyspy or "", *(str(int(p)) for p in pids)), timeout_s=bound)


def fetch_probe(k: int, path: str, max_bytes: int, timeout_s: float) -> Probe:
    return Probe(f"{FETCH_PREFIX}{k}", ("sh", "-c", FETCH_SCRIPT, "nodecheck-forensics-fetch", path, str(max_bytes)),
                 timeout_s=timeout_s)
