"""The driver-stack probe (nvidia.libraries): the loaded NVIDIA kernel module's version, and for each
user-space driver library CUDA and NCCL load, where the dynamic loader finds it and what file that is.

nodecheck runs as root and the library directories are the only places it looks: it reads names and
stat() results only, never a library's content; a symbolic link is followed only within its own
directory or into one of the standard library directories (a link elsewhere is reported, not
followed); every output is bounded and every name that is not plain is printed escaped."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from nodecheck.core.model import Probe
from nodecheck.probes.shell import ESCAPE_FUNCTIONS

PROC_VERSION_MAX = 4096  # two short lines
SYS_VERSION_MAX = 256
LDCONFIG_MAX = 8 << 20  # `ldconfig -p` of a big node: ~5000 lines x 120 bytes
MAX_LINKS = 8  # the driver's chain is libX.so.1 -> libX.so.VERSION: one link (two from libX.so)
MAX_SIBLINGS = 32  # versioned files of one library in one directory
# The directories the dynamic loader's configuration names for the driver on the distributions in use
# (Debian/Ubuntu multiarch, RHEL/SUSE lib64, merged-/usr aliases); a link into one of them is followed.
LIBRARY_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/lib64",
    "/usr/lib",
    "/lib",
)

# $1: the root the node's paths are read under: the check always passes "/" (the playbook cannot set
# it); the tests pass a fake tree. $@ after it: library names, checked against parsers.nvidia_libraries
# LIBRARY_NAME. Output: sections proc-version / sys-version (or the fact kernel-module none), ldconfig
# (the cache's lines for those names, in its order; rc = ldconfig's exit code, 127 = not installed),
# and libs: tab-separated records, every path printed by `out` (escaped when not plain):
#   found NAME PATH       a name the cache lacks, present in a standard directory
#   link PATH TARGET      one symbolic link of a chain
#   stop PATH REASON      a link not followed (outside the library directories, too many, unreadable)
#   file PATH SIZE TYPE   where a chain ends (TYPE as stat %F: regular file, regular empty file, ...)
#   gone PATH             where a chain ends in nothing (a dangling link)
#   sibling PATH SIZE     another versioned file of the library in the chain's last directory
LIBRARIES_SCRIPT = (
    ESCAPE_FUNCTIONS
    + r"""
LC_ALL=C; export LC_ALL
tab=$(printf '\t')
root=${1%/}; shift
names=" $* " cached=" "
dirs="LIBRARY_DIRS"
out() {
  case $1 in
    *[!-A-Za-z0-9._+/,:=\>\(\)\ ]*|'') escaped "$1" ;;
    *) printf '%s\n' "$1" ;;
  esac
}
rec() { printf '%s' "$1"; shift; for f do printf '\t%s' "$(out "$f")"; done; echo; }
shown() { printf '%s' "${1#"$root"}"; }
trusted() {
  [ "$1" = "$2" ] && return 0
  for d in $dirs; do [ "$1" = "$d" ] && return 0; done
  return 1
}
walk() {
  p=$root$1 home=${1%/*} n=0
  while [ -L "$p" ]; do
    if [ "$n" -ge MAX_LINKS ]; then rec stop "$(shown "$p")" "more than MAX_LINKS links"; return; fi
    if ! t=$(readlink -- "$p"); then rec stop "$(shown "$p")" "unreadable link"; return; fi
    rec link "$(shown "$p")" "$t"
    case $t in
      /*) if ! trusted "${t%/*}" "$home"; then rec stop "$(shown "$p")" "link target outside the library directories"; return; fi
          p=$root$t ;;
      */*|.|..|'') rec stop "$(shown "$p")" "link target outside its directory"; return ;;
      *) p=${p%/*}/$t ;;
    esac
    n=$((n + 1))
  done
  if [ -e "$p" ]; then
    st=$(stat -c '%s	%F' -- "$p" 2>/dev/null) || st="?	unreadable"
    rec file "$(shown "$p")" "${st%%	*}" "${st#*	}"
    siblings "$p"
  else
    rec gone "$(shown "$p")"
  fi
}
siblings() {
  base=${1##*/}; base=${base%%.so*}; k=0
  for s in "${1%/*}/$base.so."[0-9]*.[0-9]*; do
    [ "$s" = "$1" ] && continue
    [ -f "$s" ] && [ ! -L "$s" ] || continue
    k=$((k + 1)); [ "$k" -gt MAX_SIBLINGS ] && break
    rec sibling "$(shown "$s")" "$(stat -c %s -- "$s" 2>/dev/null)"
  done
}

if [ -e "$root/proc/driver/nvidia/version" ]; then
  echo "@@nodecheck begin proc-version"; head -c PROC_MAX "$root/proc/driver/nvidia/version" 2>&1; echo "@@nodecheck end proc-version rc=$?"
elif [ -e "$root/sys/module/nvidia/version" ]; then
  echo "@@nodecheck begin sys-version"; head -c SYS_MAX "$root/sys/module/nvidia/version" 2>&1; echo "@@nodecheck end sys-version rc=$?"
else
  echo "@@nodecheck kernel-module none"
fi

ldc=ldconfig
command -v ldconfig >/dev/null 2>&1 || { [ -x /sbin/ldconfig ] && ldc=/sbin/ldconfig; } || ldc=
echo "@@nodecheck begin ldconfig"
rc=127 sel=
if [ -n "$ldc" ]; then
  rc=124                                  # no "@@rc" line: the cache's listing was cut off
  sel=$({ "$ldc" -p 2>/dev/null; echo "@@rc $?"; } | head -c LDC_MAX | while IFS= read -r line; do
    case $line in
      "@@rc "*) printf '%s\n' "$line" ;;
      *" => "*) so=${line%% (*}; so=${so#"${so%%[!$tab ]*}"}
                case $names in *" $so "*) printf '%s\n' "$line" ;; esac ;;
    esac
  done)
fi
paths=
while IFS= read -r line; do
  case $line in
    "@@rc "*) rc=${line#@@rc } ;;
    ?*) case $line in
          *[!-A-Za-z0-9._+/,:=\>\(\)\ $tab]*) escaped "$line" ;;
          *) printf '%s\n' "$line" ;;
        esac
        so=${line%% (*}; so=${so#"${so%%[!$tab ]*}"}; cached="$cached$so "
        paths="$paths${line##* => }
" ;;
  esac
done <<EOF
$sel
EOF
echo "@@nodecheck end ldconfig rc=$rc"

echo "@@nodecheck begin libs"
walked=" "
while IFS= read -r path; do
  case $path in /*) ;; *) continue ;; esac
  case $walked in *" $path "*) continue ;; esac
  walked="$walked$path "
  walk "$path"
done <<EOF
$paths
EOF
for n do
  case $cached in *" $n "*) continue ;; esac
  for d in $dirs; do
    if [ -e "$root$d/$n" ] || [ -L "$root$d/$n" ]; then rec found "$n" "$d/$n"; walk "$d/$n"; break; fi
  done
done
echo "@@nodecheck end libs rc=0"
exit 0
"""
)


def _script() -> str:
    return (
        LIBRARIES_SCRIPT.replace("LIBRARY_DIRS", " ".join(LIBRARY_DIRS))
        .replace("MAX_LINKS", str(MAX_LINKS))
        .replace("MAX_SIBLINGS", str(MAX_SIBLINGS))
        .replace("PROC_MAX", str(PROC_VERSION_MAX))
        .replace("SYS_MAX", str(SYS_VERSION_MAX))
        .replace("LDC_MAX", str(LDCONFIG_MAX))
    )


SCRIPT = _script()
ROOT = "/"  # the node's own tree; only the tests read another (LIBRARIES_SCRIPT's $1)


def libraries_probe(names: Sequence[str], root: str = ROOT) -> Probe:
    """The probe for these library names (validated by the check's params); `root` is for tests only."""
    args = (root, *sorted(set(names)))
    digest = hashlib.sha256(chr(0).join(args).encode()).hexdigest()[:8]
    # 15 s: a stat per file in local library directories and one `ldconfig -p`; nothing here waits on a device
    return Probe(f"nvidia-libraries:{digest}", ("sh", "-c", SCRIPT, "nodecheck-nvidia-libraries", *args), timeout_s=15)
