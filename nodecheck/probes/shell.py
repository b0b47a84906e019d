"""Shell functions the probe scripts share (POSIX sh; every value reaches them as an argument), and
the decoder of what `escaped` / `env_matching` print."""
from __future__ import annotations

import re

JOB_FILE_MAX = 65536                           # bytes of a file a job names that a probe reads at most

# writable LABEL PATH: can a file be created beside PATH (a dump-file prefix, or DIR/x for DIR)?
# mktemp + rm, so no file is left behind; prints "LABEL<TAB>ok" or "LABEL<TAB>!<first line of the
# error>", and "!relative" for a relative path (its directory is the job's working directory,
# which the probe cannot know).
WRITABLE_FUNCTION = r'''
writable() {
  case $2 in
    /*) d=${2%/*}; [ -n "$d" ] || d=/
        if t=$(mktemp "$d/.nodecheck-write-test.XXXXXX" 2>&1); then rm -f "$t"; printf '%s\tok\n' "$1"
        else printf '%s\t!%s\n' "$1" "$(printf '%s\n' "$t" | head -n 1)"; fi ;;
    *) printf '%s\t!relative\n' "$1" ;;
  esac
}
'''

# ancestry: $skip becomes " PID PID ... ": this shell and every process above it, walked through /proc
# without a fork. `pgrep -f PATTERN` also matches the probe's own shell (its argv holds the pattern)
# and whatever started it (timeout, the SSH session's shell, a wrapper): none of them is the job's.
ANCESTRY_FUNCTION = r'''
ancestry() {
  skip=" $$ " p=$PPID
  while [ "${p:-0}" -gt 1 ] 2>/dev/null && [ -r "/proc/$p/status" ]; do
    skip="$skip$p "; up=
    while read -r key value; do [ "$key" = PPid: ] && up=$value && break; done <"/proc/$p/status"
    p=$up
  done
}
'''

# A value printed raw can hold a newline (then its second line reads as another variable, or as the
# section's end: a secret whose value holds "\nTORCH_X=..." would leave the node) or a backslash
# (dash's echo interprets "\c"). So values are printed on one line, every byte outside printable
# ASCII, "\" and "@" (the framing's "@@nodecheck") as \xHH; awk reads ENVIRON, so names are exact.
# LC_ALL=C: awk sees bytes, whatever the node's locale.
_ESC_AWK = r'''function esc(v,   out, j, c, n) {
  out = ""
  for (j = 1; j <= length(v); j++) {
    c = substr(v, j, 1); n = ord[c]
    out = out ((n < 32 || n > 126 || c == "\\" || c == "@") ? sprintf("\\x%02x", n) : c)
  }
  return out
}
BEGIN { for (i = 1; i < 256; i++) ord[sprintf("%c", i)] = i }'''

# escaped VALUE: VALUE on one line, escaped.  env_matching ERE: NAME=VALUE (escaped) of every exported
# variable whose name matches ERE; nothing else leaves the node.
ESCAPE_FUNCTIONS = f'''
escaped() {{
  NODECHECK_VALUE=$1 LC_ALL=C awk '{_ESC_AWK}
BEGIN {{ print esc(ENVIRON["NODECHECK_VALUE"]) }}'
}}
env_matching() {{
  NODECHECK_NAMES=$1 LC_ALL=C awk '{_ESC_AWK}
BEGIN {{ for (k in ENVIRON) if (k ~ ENVIRON["NODECHECK_NAMES"]) print k "=" esc(ENVIRON[k]) }}'
}}
'''

# nccl_confs PATH NAMED [UID]: the files NCCL reads its variables from, in its order (src/misc/param.cc
# initEnvFunc): PATH (NCCL_CONF_FILE, else ~/.nccl.conf), then /etc/nccl.conf; PATH printed escaped.
# NAMED=1: PATH came from an environment (the job's, or the session's NCCL_CONF_FILE), so it is read
# only as job_file allows. Needs ESCAPE_FUNCTIONS.
NCCL_CONF_FUNCTION = r'''
nccl_confs() {
  printf '@@nodecheck conf_path %s\n' "$(escaped "$1")"
  if [ "$2" = 1 ]; then job_file user.conf "$1" "${3-}"
  else echo "@@nodecheck begin user.conf"; head -c JOB_FILE_MAX -- "$1" 2>/dev/null; echo "@@nodecheck end user.conf rc=0"; fi
  echo "@@nodecheck begin nccl.conf"
  head -c JOB_FILE_MAX /etc/nccl.conf 2>/dev/null
  echo "@@nodecheck end nccl.conf rc=0"
}
# job_file LABEL PATH UID: a file a job names (its NCCL_CONF_FILE), as section LABEL. nodecheck runs as
# root, so a path from a job's environment must not make it copy /etc/shadow or a key into a report:
# the file is read only when it is a regular file (never through a symlink), at most JOB_FILE_MAX
# bytes, and owned by the job's user UID ("" = not known), or by root or nodecheck's own user and
# readable by everyone. Otherwise the section holds "not read: WHY" with rc=1, never the content. The
# checks are made on the file as opened (its device and inode against the path's own, not followed),
# so a path swapped between the checks and the read is refused. A missing file is an empty rc=0
# section (NCCL skips it too).
job_file() {
  echo "@@nodecheck begin $1"
  jf_rc=1
  if [ -L "$2" ]; then echo "not read: it is a symbolic link"
  elif [ ! -e "$2" ]; then jf_rc=0
  elif [ ! -f "$2" ]; then echo "not read: not a regular file"
  elif ! { command exec 3<"$2"; } 2>/dev/null; then echo "not read: cannot open it"
  else
    jf_at=$(stat -c '%d:%i' -- "$2" 2>/dev/null)
    set -- "$1" "$2" "$3" $(stat -L -c '%d:%i %u %a %s %F' /dev/fd/3 2>/dev/null)
    jf_other=${6#"${6%?}"}
    if [ "$4" != "$jf_at" ] || [ "${8-}" != regular ]; then echo "not read: it changed while it was read"
    elif [ "$7" -gt JOB_FILE_MAX ]; then echo "not read: $7 bytes, more than JOB_FILE_MAX"
    elif [ -n "$3" ] && [ "$5" = "$3" ]; then jf_rc=0
    elif [ "$5" != 0 ] && [ "$5" != "$(id -u)" ]; then
      echo "not read: owned by uid $5, not by root${3:+ or the job's user (uid $3)}"
    else
      case $jf_other in [4567]) jf_rc=0 ;; *) echo "not read: mode $6 (not readable by everyone) and not the job's own file" ;; esac
    fi
    [ "$jf_rc" = 0 ] && head -c JOB_FILE_MAX <&3
    exec 3<&-
  fi
  echo "@@nodecheck end $1 rc=$jf_rc"
}
'''.replace("JOB_FILE_MAX", str(JOB_FILE_MAX))

_ESCAPE = re.compile(r"\\x([0-9a-fA-F]{2})")


def unescape(text: str) -> str:
    """What `escaped` printed -> the value (UTF-8; an undecodable byte stays visible as \\xHH).
    ValueError for text no escaping function prints (non-ASCII: an older or foreign probe)."""
    if not text.isascii():
        raise ValueError(f"not escaped: {text[:60]!r}")
    raw = _ESCAPE.sub(lambda m: chr(int(m[1], 16)), text).encode("latin-1")
    return raw.decode("utf-8", "backslashreplace")
