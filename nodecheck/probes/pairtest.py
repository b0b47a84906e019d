"""The three commands of one pair test round on a node: start servers, run clients, collect servers.

A pair test needs a server that is listening before its client starts, and a server must never
outlive the test. So the server side is two steps: `start` launches one detached ib_write_bw per
rail (each under its own `timeout`, so even a lost nodecheck cannot leave one behind), waits until
each listens on its port and says so; `collect` waits briefly for them to finish, kills what is left
(the whole process group) and prints each server's output. The client side is one step that runs
every rail's client at once, each under `timeout`: a hung client is exit 124, a timeout for that pair.

Every value reaches the node as a positional argument of `sh -c SCRIPT sh ARGS...`, quoted once by
the transport; the scripts only use them as "$var".
"""
from __future__ import annotations

from dataclasses import dataclass

from nodecheck.model import Probe

READY_WAIT_S = 10                              # how long a server may take to listen
COLLECT_WAIT_S = 5                             # how long a finished client's server may take to exit
KILL_GRACE_S = 2


@dataclass(frozen=True)
class Rail:
    """One test of a pair: HCA `device` port `ib_port` on both ends; `tcp_port` for the handshake."""
    device: str
    ib_port: int
    tcp_port: int
    gid_index: int | None = None


@dataclass(frozen=True)
class TestShape:
    duration_s: int                            # ib_write_bw -D
    size: int                                  # -s message size in bytes
    qps: int                                   # -q
    timeout_s: float                           # per test: a client that runs longer is hung


def _tool_args(rail: Rail, shape: TestShape) -> list[str]:
    args = ["-d", rail.device, "-i", str(rail.ib_port), "-p", "{port}", "-F", "--report_gbits",
            "-D", str(shape.duration_s), "-s", str(shape.size), "-q", str(shape.qps)]
    if rail.gid_index is not None:
        args += ["-x", str(rail.gid_index)]
    return args


# Port selection: the requested port, or the next of a few candidates when something already
# listens there (a leftover test, another service). /proc/net/tcp{,6} lists listeners as
# ":<PORT in hex> <remote>:0000 0A"; no ss or netstat needed.
_COMMON = r'''
listening() {
  hex=$(printf ':%04X ' "$1")
  cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | grep -q "$hex[0-9A-F]*:0000 0A"
}
'''

_START = _COMMON + r'''
limit=$1; ready_wait=$2; shift 2
dir=$(mktemp -d "${TMPDIR:-/tmp}/nodecheck-pairtest.XXXXXX") || { echo "cannot create a temporary directory" >&2; exit 70; }
echo "@@nodecheck dir $dir"
command -v ib_write_bw >/dev/null 2>&1 || { echo "ib_write_bw not found (perftest not installed)" >&2; exit 127; }
for spec in "$@"; do
  dev=${spec%%|*}; rest=${spec#*|}; port=${rest%%|*}; args=${rest#*|}
  try=0
  while listening "$port" && [ $try -lt 5 ]; do port=$((port + 1000)); try=$((try + 1)); done
  argv="${args%%\{port\}*}$port${args#*\{port\}}"
  setsid sh -c 'set -f; timeout --foreground -k 2 "$1" ib_write_bw $2 >"$3.out" 2>&1 </dev/null; echo $? >"$3.rc"' \
    sh "$limit" "$argv" "$dir/$dev" </dev/null >/dev/null 2>&1 &
  echo $! >"$dir/$dev.pid"
  echo "$port" >"$dir/$dev.port"
done
waited=0
for pidf in "$dir"/*.pid; do
  [ -e "$pidf" ] || continue
  dev=$(basename "$pidf" .pid); port=$(cat "$dir/$dev.port"); pid=$(cat "$pidf")
  while :; do
    if listening "$port"; then echo "@@nodecheck ready $dev $port $pid"; break; fi
    if [ -e "$dir/$dev.rc" ]; then echo "@@nodecheck exited $dev $port rc=$(cat "$dir/$dev.rc")"; cat "$dir/$dev.out"; break; fi
    if [ "$waited" -ge $((ready_wait * 10)) ]; then echo "@@nodecheck notready $dev $port"; break; fi
    sleep 0.1; waited=$((waited + 1))
  done
done
'''

_CLIENT = r'''
set -f
limit=$1; shift
dir=$(mktemp -d "${TMPDIR:-/tmp}/nodecheck-pairtest.XXXXXX") || { echo "cannot create a temporary directory" >&2; exit 70; }
command -v ib_write_bw >/dev/null 2>&1 || { echo "ib_write_bw not found (perftest not installed)" >&2; rm -rf "$dir"; exit 127; }
for spec in "$@"; do
  dev=${spec%%|*}; args=${spec#*|}
  ( timeout -k 2 "$limit" ib_write_bw $args >"$dir/$dev.out" 2>&1 </dev/null; echo $? >"$dir/$dev.rc" ) &
done
wait
for spec in "$@"; do
  dev=${spec%%|*}
  echo "@@nodecheck begin client:$dev"
  cat "$dir/$dev.out"
  echo "@@nodecheck end client:$dev rc=$(cat "$dir/$dev.rc" 2>/dev/null || echo 255)"
done
rm -rf "$dir"
'''

_COLLECT = r'''
dir=$1; wait_s=$2
case "$dir" in "${TMPDIR:-/tmp}"/nodecheck-pairtest.*) ;; *) echo "refusing to touch $dir" >&2; exit 64;; esac
[ -d "$dir" ] || { echo "no such test directory $dir" >&2; exit 66; }
waited=0
for pidf in "$dir"/*.pid; do
  [ -e "$pidf" ] || continue
  dev=$(basename "$pidf" .pid); pid=$(cat "$pidf")
  while [ ! -e "$dir/$dev.rc" ] && [ "$waited" -lt $((wait_s * 10)) ]; do sleep 0.1; waited=$((waited + 1)); done
  if [ ! -e "$dir/$dev.rc" ]; then
    kill -TERM -- "-$pid" 2>/dev/null; sleep 0.5; kill -KILL -- "-$pid" 2>/dev/null
    echo "@@nodecheck killed $dev"
  fi
  echo "@@nodecheck begin server:$dev"
  cat "$dir/$dev.out" 2>/dev/null
  echo "@@nodecheck end server:$dev rc=$(cat "$dir/$dev.rc" 2>/dev/null || echo 137)"
done
rm -rf "$dir"
'''


def start_servers(name: str, rails: list[Rail], shape: TestShape) -> Probe:
    limit = int(shape.timeout_s + READY_WAIT_S + COLLECT_WAIT_S)
    specs = [f"{r.device}|{r.tcp_port}|{' '.join(_tool_args(r, shape))}" for r in rails]
    return Probe(name, ("sh", "-c", _START, "sh", str(limit), str(READY_WAIT_S), *specs),
                 timeout_s=READY_WAIT_S + 10)


def run_clients(name: str, rails: list[tuple[Rail, int]], server_address: str, shape: TestShape) -> Probe:
    """`rails`: each rail with the port its server listens on (start may have moved it)."""
    specs = [f"{r.device}|{' '.join(_tool_args(r, shape)).replace('{port}', str(port))} {server_address}"
             for r, port in rails]
    return Probe(name, ("sh", "-c", _CLIENT, "sh", str(int(shape.timeout_s)), *specs),
                 timeout_s=shape.timeout_s + 10)


def collect_servers(name: str, directory: str) -> Probe:
    return Probe(name, ("sh", "-c", _COLLECT, "sh", directory, str(COLLECT_WAIT_S)),
                 timeout_s=COLLECT_WAIT_S + 15)
