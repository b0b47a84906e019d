"""The three commands of one pair test round on a node: start servers, run clients, collect servers.

A pair test needs a server that is listening before its client starts, and a server must never
outlive the test. So the server side is two steps: `start` launches one detached ib_write_bw per
rail (each under its own `timeout`, so even a lost nodecheck cannot leave one behind), waits until
each listens on its port (a socket of its own, not another process's on that port) and says so;
`collect` waits briefly for them to finish, kills what is left (the whole process group) and prints
each server's output. The client side is one step that runs every rail's client at once, each
under `timeout`: a hung client is exit 124, a timeout for that pair.

Every value reaches the node as a positional argument of `sh -c SCRIPT sh ARGS...`, quoted once by
the transport; the scripts only use them as "$var".

The steps run as root in a /tmp every user can write to, so nothing there is taken on trust: `start`
makes a private directory (mktemp -d: an unpredictable name, 0700) and prints its path; `collect`
gets that path back and acts on it only when it is still what start made (PRIVATE_DIR_FUNCTION). A
pid is signalled only when it leads a process group nodecheck started (OUR_GROUP_FUNCTION), and an
output is shown only from a regular file (SHOW_FUNCTION). A directory a local user made first, a
`*.pid` holding 1 or a `*.out` linked to /etc/shadow is never read, killed or shown.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from nodecheck.core.model import Probe
from nodecheck.parsers.pairtest import MADE_DIR  # what the steps print is read there

READY_WAIT_S = 10  # how long a server may take to listen
COLLECT_WAIT_S = 5  # how long a finished client's server may take to exit
RAIL_PORTS = 64  # TCP ports from tcp_port a pair's servers take: rail i (an HCA) on tcp_port + i
PORT_MOVES = 5  # a busy port moves on by 1000, at most this often
# what may reach a node as an argument: HCA names, host addresses (IPv4, IPv6, DNS names) and the
# test directory's name; nothing that starts with "-" (it would be read as an option)
ARGUMENT = re.compile(r"^[A-Za-z0-9_.:][A-Za-z0-9_.:-]*$")


@dataclass(frozen=True)
class Rail:
    """One test of a pair: HCA `device` on both ends (the port number each end has it on) and the
    TCP port of the handshake."""

    device: str
    server_port: int  # ib_write_bw -i on the server
    client_port: int  # ib_write_bw -i on the client
    tcp_port: int
    gid_index: int | None = None


@dataclass(frozen=True)
class TestShape:
    duration_s: int  # ib_write_bw -D
    size: int  # -s message size in bytes
    qps: int  # -q
    timeout_s: float  # per test: a client that runs longer is hung


def _tool_args(rail: Rail, ib_port: int, shape: TestShape) -> list[str]:
    args = [
        "-d",
        rail.device,
        "-i",
        str(ib_port),
        "-F",
        "--report_gbits",
        "-D",
        str(shape.duration_s),
        "-s",
        str(shape.size),
        "-q",
        str(shape.qps),
    ]
    if rail.gid_index is not None:
        args += ["-x", str(rail.gid_index)]
    return args


def check_arguments(*values: str) -> None:
    for v in values:
        if not ARGUMENT.match(v):
            raise ValueError(f"{v!r} cannot be passed to a pair test (expected a name or an address)")


# private_dir PATH PREFIX: PATH is a directory a start step made: PREFIX and mktemp's six characters,
# a directory itself (not a symlink to one), owned by this user, mode 0700 (nobody else can have put
# anything in it). Whatever fails this is left alone: never read, never signalled, never removed.
PRIVATE_DIR_FUNCTION = r"""
private_dir() {
  case $1 in "$2"??????) ;; *) return 1 ;; esac
  case ${1#"$2"} in */*) return 1 ;; esac
  [ -d "$1" ] && [ ! -L "$1" ] || return 1
  [ "$(stat -c '%u %a' -- "$1" 2>/dev/null)" = "$(id -u) 700" ]
}
"""

# our_group PID MARK: PID (a decimal number > 1) is a live process of this user that leads its own
# process group and whose argv holds MARK as one word (the private path nodecheck gave it), so
# `kill -- -PID` reaches only what nodecheck started, never init (-1 is every process) or a stranger.
OUR_GROUP_FUNCTION = r"""
our_group() {
  case $1 in ''|0*|*[!0-9]*) return 1 ;; esac
  [ "${#1}" -le 10 ] && [ "$1" -gt 1 ] || return 1
  [ "$(stat -c %u "/proc/$1" 2>/dev/null)" = "$(id -u)" ] || return 1
  og_stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  og_fields=${og_stat##*")"}
  set -- "$1" "$2" $og_fields
  [ "$5" = "$1" ] || return 1              # state ppid PGRP: the group it leads
  tr '\000' '\n' <"/proc/$1/cmdline" 2>/dev/null | grep -Fqx -e "$2"
}
"""

# show FILE: FILE's content when it is a regular file (not a symlink), else nothing
SHOW_FUNCTION = r"""
show() { [ -f "$1" ] && [ ! -L "$1" ] && cat -- "$1" 2>/dev/null; }
"""


# listening PORT: anything listens on PORT (a busy port, before a server starts). Listeners show in
# /proc/net/tcp{,6} as ":<PORT in hex> <remote>:0000 0A"; no ss or netstat needed.
LISTENING_FUNCTION = r"""
listening() {
  hex=$(printf ':%04X ' "$1")
  cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | grep -q "$hex[0-9A-F]*:0000 0A"
}
"""

# our_listener PORT SID: a LISTEN socket on PORT is open in a process of session SID (setsid made the
# server's wrapper a session leader; timeout and ib_write_bw stay in its session). Another process
# listening on PORT (another service, or another node's server where nodes share a network namespace)
# is not our server being ready. The socket's inode is column 10 of its /proc/net/tcp{,6} line (state
# 0A: LISTEN); the session is field 6 of /proc/PID/stat, read after the last ")" (the command name in
# parentheses may hold any character, a newline or a ")" too), the pid from the file's name; an open
# socket is the link socket:[INODE] under /proc/PID/fd. awk reads each stat file with getline (a
# process gone since the glob is a failed read, not an error) and names at most 16 processes; the
# process scan runs only while something listens on PORT.
OUR_LISTENER_FUNCTION = r"""
our_listener() {
  ol_sockets=$(cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk -v port="$(printf '%04X' "$1")" '
    $4 == "0A" { p = $2; sub(/.*:/, "", p); if (p == port && $10 ~ /^[1-9][0-9]*$/) print "socket:[" $10 "]" }')
  [ -n "$ol_sockets" ] || return 1
  ol_pids=$(printf '%s\n' /proc/[0-9]*/stat | awk -v sid="$2" '
    {
      rest = ""
      while ((getline line < $0) > 0) if (index(line, ")")) { rest = line; sub(/.*\)/, "", rest) }
      close($0)
      if (split(rest, f, " ") >= 4 && f[4] == sid) { split($0, p, "/"); print p[3]; if (++n == 16) exit }
    }')
  for ol_pid in $ol_pids; do
    ls -l "/proc/$ol_pid/fd" 2>/dev/null | grep -qF "$ol_sockets" && return 0
  done
  return 1
}
"""

# The readiness wait is by the clock (date +%s), not by counting sleeps: reading /proc/net/tcp on a
# node with many sockets is not free.
_COMMON = PRIVATE_DIR_FUNCTION + OUR_GROUP_FUNCTION + SHOW_FUNCTION + LISTENING_FUNCTION + OUR_LISTENER_FUNCTION

# $1 limit (s, each server's own timeout)  $2 ready wait (s)  $3 the test's name (the directory's prefix)
# then per rail: DEVICE TCPPORT ARGS (one word, split on spaces; no globbing)
_START = (
    _COMMON
    + r"""
set -f
limit=$1; ready_wait=$2; name=$3; shift 3
command -v ib_write_bw >/dev/null 2>&1 || { echo "ib_write_bw not found (perftest not installed)" >&2; exit 127; }
command -v setsid >/dev/null 2>&1 || { echo "setsid not found (util-linux): cannot detach the servers" >&2; exit 127; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/nodecheck-pairtest.$name.XXXXXX") || { echo "cannot create a temporary directory" >&2; exit 70; }
echo "@@nodecheck dir $dir"
while [ $# -ge 3 ]; do
  dev=$1; port=$2; args=$3; shift 3
  try=0
  while listening "$port" && [ $try -lt 5 ] && [ $((port + 1000)) -le 65535 ]; do port=$((port + 1000)); try=$((try + 1)); done
  # each server in a session of its own (killed as a group by collect) and under its own timeout
  setsid sh -c 'set -f; timeout --foreground -k 2 "$1" ib_write_bw $2 -p "$3" >"$4.out" 2>&1 </dev/null; echo $? >"$4.rc"' \
    sh "$limit" "$args" "$port" "$dir/$dev" </dev/null >/dev/null 2>&1 &
  echo $! >"$dir/$dev.pid"
  echo "$port" >"$dir/$dev.port"
done
set +f                                     # the arguments are in; the pid files are globbed
end=$(( $(date +%s) + ready_wait ))
for pidf in "$dir"/*.pid; do
  [ -e "$pidf" ] || continue
  dev=${pidf##*/}; dev=${dev%.pid}; port=$(cat "$dir/$dev.port"); pid=$(cat "$pidf")
  while :; do
    if our_listener "$port" "$pid"; then echo "@@nodecheck ready $dev $port $pid"; break; fi
    if [ -e "$dir/$dev.rc" ]; then echo "@@nodecheck exited $dev $port rc=$(show "$dir/$dev.rc")"; show "$dir/$dev.out"; break; fi
    if [ "$(date +%s)" -ge "$end" ]; then echo "@@nodecheck notready $dev $port"; break; fi
    sleep 0.1
  done
done
"""
)

# $1 limit (s)  $2 server address  then per rail: DEVICE TCPPORT ARGS
_CLIENT = r"""
set -f
limit=$1; host=$2; shift 2
command -v ib_write_bw >/dev/null 2>&1 || { echo "ib_write_bw not found (perftest not installed)" >&2; exit 127; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/nodecheck-pairclient.XXXXXX") || { echo "cannot create a temporary directory" >&2; exit 70; }
devs=
while [ $# -ge 3 ]; do
  dev=$1; port=$2; args=$3; shift 3
  devs="$devs $dev"
  ( timeout -k 2 "$limit" ib_write_bw $args -p "$port" "$host" >"$dir/$dev.out" 2>&1 </dev/null; echo $? >"$dir/$dev.rc" ) &
done
wait
for dev in $devs; do
  echo "@@nodecheck begin client:$dev"
  cat "$dir/$dev.out"
  echo "@@nodecheck end client:$dev rc=$(cat "$dir/$dev.rc" 2>/dev/null || echo 255)"
done
rm -rf "$dir"
"""

# $1 the test's name  $2 the directory start made ("" when it printed none: then every directory of
# this test's prefix that passes private_dir)  $3 wait (s). Kills each server's whole process group
# (setsid made it a session leader; dash's kill wants `-s SIGNAL -- -PGID`, it refuses `-TERM -- -PGID`).
_COLLECT = (
    _COMMON
    + r"""
prefix=${TMPDIR:-/tmp}/nodecheck-pairtest.$1.; made=$2; wait_s=$3
end=$(( $(date +%s) + wait_s ))
collect() {
  dir=$1
  for pidf in "$dir"/*.pid; do
    [ -f "$pidf" ] && [ ! -L "$pidf" ] || continue
    dev=${pidf##*/}; dev=${dev%.pid}; pid=$(show "$pidf")
    while [ ! -e "$dir/$dev.rc" ] && [ "$(date +%s)" -lt "$end" ]; do sleep 0.1; done
    # no rc file: the server (its wrapper writes rc last) is still running
    if [ ! -e "$dir/$dev.rc" ] && our_group "$pid" "$dir/$dev"; then
      # TERM, then KILL, which cannot be refused (what is left is a zombie for init to reap)
      kill -s TERM -- "-$pid" 2>/dev/null; sleep 0.5
      kill -s KILL -- "-$pid" 2>/dev/null
      echo "@@nodecheck killed $dev"
    fi
    echo "@@nodecheck begin server:$dev"
    show "$dir/$dev.out"
    rc=$(show "$dir/$dev.rc"); case $rc in ''|*[!0-9]*) rc=137 ;; esac
    echo "@@nodecheck end server:$dev rc=$rc"
  done
  rm -rf -- "$dir"
}
found=0
if [ -n "$made" ]; then
  if private_dir "$made" "$prefix"; then collect "$made"; found=1
  elif [ -e "$made" ] || [ -L "$made" ]; then echo "@@nodecheck refused $made (not the private directory the start step made)"; found=1; fi
else
  for d in "$prefix"??????; do
    private_dir "$d" "$prefix" || continue
    collect "$d"; found=1
  done
fi
[ "$found" = 1 ] || echo "no test directory ${made:-${prefix}XXXXXX} (the start step never ran)"
exit 0
"""
)


def start_servers(name: str, directory: str, rails: list[Rail], shape: TestShape) -> Probe:
    """`directory`: a name nodecheck chose (run, round, node): the prefix of the private directory
    the step makes (mktemp -d) and prints as `@@nodecheck dir PATH` (made_directory reads it)."""
    check_arguments(directory, *(r.device for r in rails))
    limit = math.ceil(shape.timeout_s) + READY_WAIT_S + COLLECT_WAIT_S
    specs = [word for r in rails for word in (r.device, str(r.tcp_port), " ".join(_tool_args(r, r.server_port, shape)))]
    return Probe(
        name,
        ("sh", "-c", _START, "sh", str(limit), str(READY_WAIT_S), directory, *specs),
        timeout_s=READY_WAIT_S + 10,
        hold_s=limit,  # the servers it detaches live until their own bound
    )


def run_clients(name: str, rails: list[tuple[Rail, int]], server_address: str, shape: TestShape) -> Probe:
    """`rails`: each rail with the port its server listens on (start may have moved it)."""
    check_arguments(server_address, *(r.device for r, _ in rails))
    specs = [word for r, port in rails for word in (r.device, str(port), " ".join(_tool_args(r, r.client_port, shape)))]
    return Probe(
        name,
        ("sh", "-c", _CLIENT, "sh", str(math.ceil(shape.timeout_s)), server_address, *specs),
        timeout_s=math.ceil(shape.timeout_s) + 10,
    )


def collect_servers(name: str, directory: str, made: str, wait_s: int = COLLECT_WAIT_S) -> Probe:
    """`directory`: the name start_servers got; `made`: the directory it printed (made_directory;
    "" when it printed none). `wait_s`: how long a server may take to finish on its own; 0 when its
    client failed (it would wait for a client that never comes)."""
    check_arguments(directory)
    if made and not MADE_DIR.match(made):
        raise ValueError(f"{made!r} is not a directory a start step made")
    return Probe(name, ("sh", "-c", _COLLECT, "sh", directory, made, str(wait_s)), timeout_s=COLLECT_WAIT_S + 15)
