"""Shell functions the probe scripts share (POSIX sh; every value reaches them as an argument). What
`escaped` / `env_matching` print is decoded by nodecheck.parsers.escapes.unescape."""

from __future__ import annotations

import re

JOB_FILE_MAX = 65536  # bytes of a file a job names that a probe reads at most
READ_SECONDS = 5  # the most a read as the job's user may take (a FIFO swapped in, a stopped reader)
# The job's user that job_file takes: a uid, or a user name as useradd and sssd allow them (alice,
# alice@example.org, machine$); never an option (a leading "-") or anything a shell would split.
# ("$" is the end of the text in pydantic's patterns; use JOB_USER.fullmatch in Python.)
JOB_USER_PATTERN = r"^([0-9]+|[A-Za-z0-9_][A-Za-z0-9_.@-]*\$?)?$"
JOB_USER = re.compile(JOB_USER_PATTERN)
JOB_USER_MAX = 256

# job_as USER, then as_job CMD ARGS...: CMD as the job's USER (a uid or a name; "" = not known). nodecheck
# runs as root, and root sees what the job's user cannot: as root, `mktemp` in a directory only root may
# write says "writable", `[ -e PATH ]` answers for a directory the job cannot enter, and its first entry's
# name leaks. So a test made for the job runs as the job's user: `setpriv --reuid --regid --init-groups`
# (util-linux), else `runuser -u` (util-linux). ja_how says as whom it runs: a user name ("root" when no
# job's user is known, or it is root: root's view, which messages then say), or "!not checked as the
# job's user: WHY" (the user is unknown here, neither tool is on the node, or this shell is not root and
# not the user): then as_job runs nothing (exit 126) and no root answer is given in the user's place.
# job_as_nobody instead: as_job runs CMD as everyone, uid and gid 65534 with no supplementary group
# (`setpriv --clear-groups`; else `runuser -u nobody`): what no one in particular may do (a shell that is
# not root runs CMD as itself: its rights are no one else's). ja_limit=SECONDS: as_job's CMD is killed
# after that long (by root's `timeout`, which the user cannot stop).
AS_JOB_FUNCTION = r"""
unset ja_how ja_run ja_limit                    # never from the environment: job_as sets them
job_as() {
  ja_run= ja_uid= ja_gid= ja_name= ja_me=$(id -u)
  if [ -n "$1" ]; then
    { ja_uid=$(id -u -- "$1") && ja_gid=$(id -g -- "$1") && ja_name=$(id -nu -- "$1"); } 2>/dev/null || {
      ja_run=! ja_how="!not checked as the job's user: $1 is not known on this node"; return 0; }
  fi
  if [ -z "$ja_uid" ] || [ "$ja_uid" = "$ja_me" ]; then ja_how=$(id -un 2>/dev/null) || ja_how="uid $ja_me"
  elif [ "$ja_me" != 0 ]; then ja_run=! ja_how="!not checked as the job's user: nodecheck runs as uid $ja_me, not root"
  elif command -v setpriv >/dev/null 2>&1; then ja_run=setpriv ja_how=$ja_name
  elif command -v runuser >/dev/null 2>&1; then ja_run=runuser ja_how=$ja_name
  else ja_run=! ja_how="!not checked as the job's user: neither setpriv nor runuser (util-linux) is on this node"; fi
}
job_as_nobody() {
  ja_run= ja_uid= ja_gid= ja_name= ja_me=$(id -u)
  if [ "$ja_me" != 0 ]; then ja_how=$(id -un 2>/dev/null) || ja_how="uid $ja_me"
  elif command -v setpriv >/dev/null 2>&1; then ja_run=nobody ja_how=nobody
  elif command -v runuser >/dev/null 2>&1 && id -u nobody >/dev/null 2>&1; then
    ja_run=runuser ja_name=nobody ja_how=nobody
  else
    ja_run=! ja_how="!not checked as nobody (no job's user is known): neither setpriv nor runuser (util-linux) is on this node"
  fi
}
as_job() {
  case $ja_run in
    '') ;;
    setpriv) set -- setpriv --reuid="$ja_uid" --regid="$ja_gid" --init-groups -- env -i PATH="$PATH" LC_ALL=C "$@" ;;
    nobody) set -- setpriv --reuid=65534 --regid=65534 --clear-groups -- env -i PATH="$PATH" LC_ALL=C "$@" ;;
    runuser) set -- runuser -u "$ja_name" -- env -i PATH="$PATH" LC_ALL=C "$@" ;;
    *) return 126 ;;
  esac
  # a process of another user gets none of root's environment (a token the session holds) nor its
  # open files (fds 3-9: a capture, a lock), which that user could read through ptrace or /proc
  if [ -n "${ja_limit-}" ]; then timeout -k 1 "$ja_limit" "$@" 3<&- 4<&- 5<&- 6<&- 7<&- 8<&- 9<&-
  else "$@" 3<&- 4<&- 5<&- 6<&- 7<&- 8<&- 9<&-; fi
}
"""

# writable LABEL PATH: can a file be created beside PATH (a dump-file prefix, or DIR/x for DIR)?
# mktemp + rm, so no file is left behind, as the job's user (as_job; the script's $job_user, or job_as
# called before); prints "LABEL<TAB>ok" or "LABEL<TAB>!<first line of the error>", "!relative" for a
# relative path (its directory is the job's working directory, which the probe cannot know), and
# "LABEL<TAB>?not checked as the job's user: WHY" when it cannot run as them.
WRITABLE_FUNCTION = (
    AS_JOB_FUNCTION
    + r"""
writable() {
  [ -n "${ja_how+x}" ] || job_as "${job_user-}"
  case $2 in
    /*) d=${2%/*}; [ -n "$d" ] || d=/
        if [ "$ja_run" = ! ]; then printf '%s\t?%s\n' "$1" "${ja_how#!}"
        elif t=$(as_job mktemp "$d/.nodecheck-write-test.XXXXXX" 2>&1); then as_job rm -f "$t"; printf '%s\tok\n' "$1"
        else printf '%s\t!%s\n' "$1" "$(printf '%s\n' "$t" | head -n 1)"; fi ;;
    *) printf '%s\t!relative\n' "$1" ;;
  esac
}
"""
)

# ancestry: $skip becomes " PID PID ... ": this shell and every process above it, walked through /proc
# without a fork. `pgrep -f PATTERN` also matches the probe's own shell (its argv holds the pattern)
# and whatever started it (timeout, the SSH session's shell, a wrapper): none of them is the job's.
ANCESTRY_FUNCTION = r"""
ancestry() {
  skip=" $$ " p=$PPID
  while [ "${p:-0}" -gt 1 ] 2>/dev/null && [ -r "/proc/$p/status" ]; do
    skip="$skip$p "; up=
    while read -r key value; do [ "$key" = PPid: ] && up=$value && break; done <"/proc/$p/status"
    p=$up
  done
}
"""

# A value printed raw can hold a newline (then its second line reads as another variable, or as the
# section's end: a secret whose value holds "\nTORCH_X=..." would leave the node) or a backslash
# (dash's echo interprets "\c"). So values are printed on one line, every byte outside printable
# ASCII, "\" and "@" (the framing's "@@nodecheck") as \xHH; awk reads ENVIRON, so names are exact.
# LC_ALL=C: awk sees bytes, whatever the node's locale.
ESC_AWK = r"""function esc(v,   out, j, c, n) {
  out = ""
  for (j = 1; j <= length(v); j++) {
    c = substr(v, j, 1); n = ord[c]
    out = out ((n < 32 || n > 126 || c == "\\" || c == "@") ? sprintf("\\x%02x", n) : c)
  }
  return out
}
BEGIN { for (i = 1; i < 256; i++) ord[sprintf("%c", i)] = i }"""

# escaped VALUE: VALUE on one line, escaped.  env_matching ERE: NAME=VALUE (escaped) of every exported
# variable whose name matches ERE; nothing else leaves the node.
ESCAPE_FUNCTIONS = f"""
escaped() {{
  NODECHECK_VALUE=$1 LC_ALL=C awk '{ESC_AWK}
BEGIN {{ print esc(ENVIRON["NODECHECK_VALUE"]) }}'
}}
env_matching() {{
  NODECHECK_NAMES=$1 LC_ALL=C awk '{ESC_AWK}
BEGIN {{ for (k in ENVIRON) if (k ~ ENVIRON["NODECHECK_NAMES"]) print k "=" esc(ENVIRON[k]) }}'
}}
"""

# read_as PATH USER HOW BYTES: PATH as USER's own process opens it. nodecheck runs as root, and a file
# root may open is no proof that the job's user may: a file readable by everyone inside a directory only
# root may enter (/root/private/nccl.conf) is not theirs to read, and checking the file's owner and mode
# as root said yes. So the file is opened, checked and read by a process of USER (a uid or a name; as
# job_as), or of nobody (job_as_nobody: uid and gid 65534, no group) when USER is "" or root, and only what
# that process prints is taken: whatever it is made to print, it is what that user could read. That
# process (ra_reader, with no environment but PATH, no file descriptor of ours, within READ_SECONDS s)
# refuses a symbolic link (never followed) and what is not a regular file (a FIFO would block its open),
# opens the file once and prints one line, "ok DEV:INO UID MODE SIZE MTIME" of the file as opened, then
# (HOW) its first or last BYTES bytes ("head", "tail"; "none": nothing) and an end mark; or "-" (no such
# file, as that user sees it), "!WHY" or "?WHY" (WHY in that user's words). Root then takes it only when
# the line is well formed, the mark ends it (a read cut by the time limit is no read), and the path is
# still the very file that was opened (its device and inode, not followed). Root bounds what it takes to
# BYTES + 4096 bytes.
# Returns 0 with ra_uid, ra_mode (octal), ra_size, ra_mtime (s.ns), ra_data (the bytes; NUL bytes are
# dropped) of the file as opened and ra_as_uid (the reading user's uid; "" for nobody); else 1 and ra_why
# ("not read: ...", or "No such file or directory" with ra_missing=1). A node that cannot switch users
# (no setpriv or runuser, not root, a user it does not know) reads nothing: "not read: not checked as ...".
READ_AS_FUNCTION = (
    AS_JOB_FUNCTION
    + r"""
ra_reader='p=$1 how=$2 n=$3
if [ -L "$p" ]; then echo "!it is a symbolic link"; exit 0; fi
if [ ! -e "$p" ]; then
  e=$(stat -c %F -- "$p" 2>&1 >/dev/null)
  case $e in *"No such file or directory") echo - ;; *) echo "?cannot reach it: ${e##*: }" ;; esac
  exit 0
fi
[ -f "$p" ] || { echo "!not a regular file"; exit 0; }
[ -r "$p" ] || { echo "?cannot open it: Permission denied"; exit 0; }
{ command exec 3<"$p"; } 2>/dev/null || { echo "?cannot open it"; exit 0; }
[ -f /dev/fd/3 ] || { echo "!it changed while it was read"; exit 0; }
set -- $(stat -L -c "%d:%i %u %a %s" /dev/fd/3 2>/dev/null) "$(date -r /dev/fd/3 +%s.%N 2>/dev/null)"
{ [ $# = 5 ] && [ -n "$5" ]; } || { echo "!it could not be stat-ed"; exit 0; }
echo "ok $1 $2 $3 $4 $5"
case $how in head) head -c "$n" <&3 ;; tail) tail -c "$n" <&3 ;; esac && printf "\n@@read-done"'
ra_nl='
'
ra_me=
read_as() {
  : "${ra_me:=$(id -u)}"
  ra_path=$1 ra_why= ra_missing= ra_as_uid= ra_uid= ra_mode= ra_size= ra_mtime= ra_data=
  ra_out=$(
    [ -n "$2" ] && job_as "$2"
    if [ -z "$2" ] || { [ -z "$ja_run" ] && [ "$ja_me" = 0 ]; }; then job_as_nobody; fi  # root's job: everyone's
    printf '%s %s\n' "${ja_uid:--}" "$ja_how"
    [ "$ja_run" = ! ] && exit 0
    command -v timeout >/dev/null 2>&1 && ja_limit=READ_SECONDS
    as_job env -i PATH="$PATH" LC_ALL=C sh -c "$ra_reader" nodecheck-read "$1" "$3" "${4:-0}" \
      </dev/null 2>/dev/null 3<&- 4<&- 5<&- 6<&- 7<&- 8<&- 9<&- | head -c $((${4:-0} + 4096))
  )
  ra_as=${ra_out%%"$ra_nl"*} ra_out=${ra_out#*"$ra_nl"}
  ra_as_uid=${ra_as%% *} ra_as=${ra_as#* }
  [ "$ra_as_uid" = - ] && ra_as_uid=
  case $ra_as in '!'*) ra_out= ra_why="not read: ${ra_as#!}"; return 1 ;; esac
  ra_head=${ra_out%%"$ra_nl"*}
  case $ra_head in
    -) ra_missing=1 ra_why="No such file or directory" ;;
    '!'*) ra_why="not read: ${ra_head#!}" ;;
    '?'*) ra_why="not read: $ra_as ${ra_head#?}" ;;
    'ok '*[!0-9:.\ ]*) ra_why="not read: the read as $ra_as gave no answer of its form" ;;
    'ok '*) case $ra_out in *"$ra_nl@@read-done") ;; *) ra_why="not read: the read as $ra_as did not finish" ;; esac ;;
    *) ra_why="not read: the read as $ra_as did not answer within READ_SECONDS s" ;;
  esac
  if [ -z "$ra_why" ]; then
    set -- ${ra_head#ok }                      # (digits, ":" and "." only: nothing a shell expands)
    if [ $# != 5 ]; then ra_why="not read: the read as $ra_as gave no answer of its form"
    elif [ -L "$ra_path" ] || [ ! -f "$ra_path" ] || [ "$(stat -c %d:%i -- "$ra_path" 2>/dev/null)" != "$1" ]; then
      ra_why="not read: it changed while it was read"     # root's own look: a plain file, the very one opened
    fi
  fi
  if [ -n "$ra_why" ]; then ra_out=; return 1; fi
  ra_uid=$2 ra_mode=$3 ra_size=$4 ra_mtime=$5
  ra_data=${ra_out#*"$ra_nl"} ra_out=
  ra_data=${ra_data%"$ra_nl@@read-done"}
}
"""
).replace("READ_SECONDS", str(READ_SECONDS))

# nccl_confs PATH NAMED [USER]: the files NCCL reads its variables from, in its order (src/misc/param.cc
# initEnvFunc): PATH (NCCL_CONF_FILE, else ~/.nccl.conf), then /etc/nccl.conf; PATH printed escaped.
# NAMED=1: PATH came from an environment (the job's, or the session's NCCL_CONF_FILE), so it is read
# only as job_file allows, for the job's USER. Needs ESCAPE_FUNCTIONS.
NCCL_CONF_FUNCTION = (
    READ_AS_FUNCTION
    + r"""
nccl_confs() {
  printf '@@nodecheck conf_path %s\n' "$(escaped "$1")"
  if [ "$2" = 1 ]; then job_file user.conf "$1" "${3-}"
  else echo "@@nodecheck begin user.conf"; head -c JOB_FILE_MAX -- "$1" 2>/dev/null; echo "@@nodecheck end user.conf rc=0"; fi
  echo "@@nodecheck begin nccl.conf"
  head -c JOB_FILE_MAX /etc/nccl.conf 2>/dev/null
  echo "@@nodecheck end nccl.conf rc=0"
}
# job_file LABEL PATH USER: a file a job names (its NCCL_CONF_FILE), as section LABEL. nodecheck runs as
# root, so a path from a job's environment must not make it copy /etc/shadow or a key into a report: the
# file is opened and read by the job's USER (read_as: a uid, or a name this node resolves), or by nobody
# when no job's user is known ("", root, or a user this node does not know, which the refusals then
# say), never by root; and it is taken only when it is a regular file (never through a symbolic link) of
# at most JOB_FILE_MAX bytes that is the job's own (owned by USER), or root's or nodecheck's own user's and
# readable by everyone. Root's private file (/etc/shadow), a file in a directory the reading user cannot
# enter (/root/private/nccl.conf, mode 0644), and another user's file, private or not, are refused: the
# job's user could not read the first two and has no business naming the third. Otherwise the section
# holds "not read: WHY" with rc=1, never the content. The checks are made on the file as opened (its
# device and inode against the path's own, not followed), so a path swapped between the checks and the
# read is refused. A missing file is an empty rc=0 section (NCCL skips it too).
job_file() {
  echo "@@nodecheck begin $1"
  jf_rc=1 jf_user=$3 jf_who=
  if [ -n "$jf_user" ] && ! id -u -- "$jf_user" >/dev/null 2>&1; then
    jf_user= jf_who=" (the job's user $3 is not known on this node)"
  fi
  if read_as "$2" "$jf_user" head JOB_FILE_MAX; then
    if [ "$ra_size" -gt JOB_FILE_MAX ]; then echo "not read: $ra_size bytes, more than JOB_FILE_MAX"
    elif [ -n "$ra_as_uid" ] && [ "$ra_uid" = "$ra_as_uid" ]; then jf_rc=0
    elif [ "$ra_uid" != 0 ] && [ "$ra_uid" != "$ra_me" ]; then
      jf_job=; [ -n "$ra_as_uid" ] && jf_job=" or the job's user (uid $ra_as_uid)"   # (no ' inside ${x:+...}: bash)
      echo "not read: owned by uid $ra_uid, not by root$jf_job$jf_who"
    else
      case $ra_mode in *[4567]) jf_rc=0 ;; *) echo "not read: mode $ra_mode (not readable by everyone) and not the job's own file" ;; esac
    fi
    [ "$jf_rc" = 0 ] && printf '%s' "$ra_data"
  elif [ -n "$ra_missing" ]; then jf_rc=0
  else echo "$ra_why$jf_who"
  fi
  ra_data=
  echo "@@nodecheck end $1 rc=$jf_rc"
}
"""
).replace("JOB_FILE_MAX", str(JOB_FILE_MAX))

# owned_read PATH USER HOW BYTES: a file a root process reads on a job's behalf (the watcher's progress log
# and heartbeat, forensics' job log: paths a user's JOB.yml or the job's directory may steer), read by
# read_as (HOW: "tail" its last BYTES bytes, "head" its first, "none" its size and mtime only): as the
# job's USER (a uid, or a name this node resolves), and taken when it is the job's own or root's (or this
# shell's user's) and readable by everyone. With no job's user known ("", or root: an operator's watch of
# an inventory does not know whose job it is) a user's file is read as its owner (the uid owning the path,
# not followed) and root's as nobody: either way never by root, so a log inside a directory its reader
# cannot enter, a symbolic link, or a hard link to /etc/shadow is refused. Returns 0 with oo_size,
# oo_mtime (s.ns) and oo_data (the bytes) of the file as opened; else 1 and oo_why ("No such file or
# directory", "not read: ..."), never any of its content.
OWNED_READ_FUNCTION = (
    READ_AS_FUNCTION
    + r"""
owned_read() {
  oo_why= oo_size= oo_mtime= oo_data= oo_user=$2
  case $oo_user in 0|root) oo_user= ;; esac
  oo_as=$oo_user
  if [ -z "$oo_as" ]; then
    oo_as=$(stat -c %u -- "$1" 2>/dev/null) || oo_as=
    case $oo_as in 0|"${ra_me:=$(id -u)}") oo_as= ;; esac
  fi
  if ! read_as "$1" "$oo_as" "$3" "$4"; then
    oo_why=$ra_why oo_not="not read: not checked as the job's user"
    case $oo_user:$oo_why in
      ":$oo_not"*) oo_why="not read: not checked as its owner (uid $oo_as)${oo_why#"$oo_not"}" ;;
    esac
    return 1
  fi
  if [ -n "$ra_as_uid" ] && [ "$ra_uid" = "$ra_as_uid" ]; then :
  elif [ "$ra_uid" = 0 ] || [ "$ra_uid" = "$ra_me" ]; then
    case $ra_mode in *[4567]) ;; *) oo_why="not read: owned by uid $ra_uid and not readable by everyone" ;; esac
  elif [ -n "$oo_user" ]; then
    oo_why="not read: owned by uid $ra_uid, not by the job's user${ra_as_uid:+ (uid $ra_as_uid)} or root"
  else oo_why="not read: it changed while it was read"    # it was read as the owner it had a moment before
  fi
  if [ -n "$oo_why" ]; then ra_data=; return 1; fi
  oo_size=$ra_size oo_mtime=$ra_mtime oo_data=$ra_data ra_data=
}
"""
)
