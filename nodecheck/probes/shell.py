"""Shell functions the probe scripts share (POSIX sh; every value reaches them as an argument). What
`escaped` / `env_matching` print is decoded by nodecheck.parsers.escapes.unescape."""

from __future__ import annotations

import re

JOB_FILE_MAX = 65536  # bytes of a file a job names that a probe reads at most
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
AS_JOB_FUNCTION = r"""
unset ja_how ja_run                             # never from the environment: job_as sets them
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
as_job() {
  case $ja_run in
    '') "$@" ;;
    setpriv) setpriv --reuid="$ja_uid" --regid="$ja_gid" --init-groups -- "$@" ;;
    runuser) runuser -u "$ja_name" -- "$@" ;;
    *) return 126 ;;
  esac
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

# nccl_confs PATH NAMED [USER]: the files NCCL reads its variables from, in its order (src/misc/param.cc
# initEnvFunc): PATH (NCCL_CONF_FILE, else ~/.nccl.conf), then /etc/nccl.conf; PATH printed escaped.
# NAMED=1: PATH came from an environment (the job's, or the session's NCCL_CONF_FILE), so it is read
# only as job_file allows, for the job's USER. Needs ESCAPE_FUNCTIONS.
NCCL_CONF_FUNCTION = r"""
nccl_confs() {
  printf '@@nodecheck conf_path %s\n' "$(escaped "$1")"
  if [ "$2" = 1 ]; then job_file user.conf "$1" "${3-}"
  else echo "@@nodecheck begin user.conf"; head -c JOB_FILE_MAX -- "$1" 2>/dev/null; echo "@@nodecheck end user.conf rc=0"; fi
  echo "@@nodecheck begin nccl.conf"
  head -c JOB_FILE_MAX /etc/nccl.conf 2>/dev/null
  echo "@@nodecheck end nccl.conf rc=0"
}
# job_file LABEL PATH USER: a file a job names (its NCCL_CONF_FILE), as section LABEL. nodecheck runs as
# root, so a path from a job's environment must not make it copy /etc/shadow or a key into a report:
# the file is read as the job's user would see it, and only when it is a regular file (never through
# a symlink) of at most JOB_FILE_MAX bytes that is the job's own (owned by USER: a uid, or a name this
# node resolves; "" = not known; root counts as none), or root's or nodecheck's own user's and readable
# by everyone. Root's private file (/etc/shadow) and another user's file, private or not, are refused:
# the job's user could not read the first and has no business naming the second. Otherwise the section
# holds "not read: WHY" with rc=1, never the content. The checks are made on the file as opened (its
# device and inode against the path's own, not followed), so a path swapped between the checks and the
# read is refused. A missing file is an empty rc=0 section (NCCL skips it too).
job_file() {
  echo "@@nodecheck begin $1"
  jf_rc=1 jf_uid=$3 jf_who=
  case $jf_uid in
    ''|*[!0-9]*) [ -n "$jf_uid" ] && { jf_uid=$(id -u -- "$3" 2>/dev/null) || jf_uid=
                 [ -n "$jf_uid" ] || jf_who=" (the job's user $3 is not known on this node)"; } ;;
  esac
  [ "$jf_uid" = 0 ] && jf_uid=                  # root's job: root's private files are still refused
  if [ -L "$2" ]; then echo "not read: it is a symbolic link"
  elif [ ! -e "$2" ]; then jf_rc=0
  elif [ ! -f "$2" ]; then echo "not read: not a regular file"
  elif ! { command exec 3<"$2"; } 2>/dev/null; then echo "not read: cannot open it"
  else
    jf_at=$(stat -c '%d:%i' -- "$2" 2>/dev/null)
    set -- "$1" "$2" "$jf_uid" $(stat -L -c '%d:%i %u %a %s %F' /dev/fd/3 2>/dev/null)
    jf_other=${6#"${6%?}"}
    if [ "$4" != "$jf_at" ] || [ "${8-}" != regular ]; then echo "not read: it changed while it was read"
    elif [ "$7" -gt JOB_FILE_MAX ]; then echo "not read: $7 bytes, more than JOB_FILE_MAX"
    elif [ -n "$3" ] && [ "$5" = "$3" ]; then jf_rc=0
    elif [ "$5" != 0 ] && [ "$5" != "$(id -u)" ]; then
      jf_job=; [ -n "$3" ] && jf_job=" or the job's user (uid $3)"    # (no ' inside ${3:+...}: bash)
      echo "not read: owned by uid $5, not by root$jf_job$jf_who"
    else
      case $jf_other in [4567]) jf_rc=0 ;; *) echo "not read: mode $6 (not readable by everyone) and not the job's own file" ;; esac
    fi
    [ "$jf_rc" = 0 ] && head -c JOB_FILE_MAX <&3
    exec 3<&-
  fi
  echo "@@nodecheck end $1 rc=$jf_rc"
}
""".replace("JOB_FILE_MAX", str(JOB_FILE_MAX))

# owned_open PATH USER: open PATH on fd 3 for a root process that reads it on a job's behalf (the watcher's
# progress log and heartbeat, whose paths a user's JOB.yml may name): only when it is not a symbolic link,
# is a regular file, and is the job's own (owned by USER: a uid, or a name this node resolves), or root's
# (or this shell's user's) and readable by everyone. With no job's user known ("", or root) any user's
# file but root's private ones is taken: an operator's watch of an inventory does not know whose job it
# is, and a log lives in the job's directory, where the job can put a link or a hard link to
# /etc/shadow, never its own root-owned file. Checked on the file as opened (its device and inode
# against the path's own, not followed), so a path swapped between the checks and the read is refused.
# Returns 0 with fd 3 open; else 1, fd 3 closed, and oo_why says why ("No such file or directory",
# "not read: ..."). Content is read through fd 3 (`<&3`), never by the path.
OWNED_OPEN_FUNCTION = r"""
oo_me=
owned_open() {
  oo_why= oo_uid=$2
  case $oo_uid in
    ''|*[!0-9]*) [ -n "$oo_uid" ] && { oo_uid=$(id -u -- "$2" 2>/dev/null) || oo_uid=
                 [ -n "$oo_uid" ] || { oo_why="not read: the job's user $2 is not known on this node"; return 1; }; } ;;
  esac
  [ "$oo_uid" = 0 ] && oo_uid=
  if [ -L "$1" ]; then oo_why="not read: it is a symbolic link"; return 1; fi
  if [ ! -e "$1" ]; then oo_why="No such file or directory"; return 1; fi
  if [ ! -f "$1" ]; then oo_why="not a regular file"; return 1; fi      # (a FIFO would block the open)
  if ! { command exec 3<"$1"; } 2>/dev/null; then oo_why="not read: cannot open it"; return 1; fi
  oo_at=$(stat -c '%d:%i' -- "$1" 2>/dev/null)
  set -- "$1" "$oo_uid" $(stat -L -c '%d:%i %u %a %F' /dev/stdin <&3 2>/dev/null)
  oo_other=${5#"${5%?}"}
  if [ "$3" != "$oo_at" ] || [ "${6-}" != regular ]; then oo_why="not read: it changed while it was read"
  elif [ -n "$2" ] && [ "$4" = "$2" ]; then :
  elif [ "$4" = 0 ] || [ "$4" = "${oo_me:=$(id -u)}" ]; then
    case $oo_other in [4567]) ;; *) oo_why="not read: owned by uid $4 and not readable by everyone" ;; esac
  elif [ -n "$2" ]; then oo_why="not read: owned by uid $4, not by the job's user (uid $2) or root"
  fi
  [ -z "$oo_why" ] && return 0
  exec 3<&-
  return 1
}
"""
