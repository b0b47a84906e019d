"""The three commands of nccl.env's reachability test on a node: start a TCP listener, connect to
other nodes' listeners, stop the listener.

A connection is only judged against a listener that is known to be up, and a listener must never
outlive the test. So `start` launches one detached listener (under its own `timeout`, so even a
lost nodecheck cannot leave one behind), waits until it has bound its ports and says which it holds;
`connect` tries every target at once and prints one result line per target; `stop` kills the
listener's process group and says whether it was still listening.

Every value reaches the node as a positional argument (`sh -c SCRIPT sh ARGS...`, `python3 -c SRC
ARGS...`), quoted once by the transport; the scripts only use them as "$var" or sys.argv.

As the pair test's steps (probes/pairtest.py), the listener's directory is private (mktemp -d) and
the stop step gets its path back and checks it, and the pid, before it reads or kills anything.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from nodecheck.core.model import Probe
from nodecheck.core.thresholds import fmt
from nodecheck.parsers.pairtest import MADE_DIR  # what the steps print is read in parsers.reachability
from nodecheck.probes.pairtest import OUR_GROUP_FUNCTION, PRIVATE_DIR_FUNCTION, SHOW_FUNCTION

READY_WAIT_S = 10  # how long a listener may take to bind its ports
LISTENER_DIR = "nodecheck-reach"  # ${TMPDIR:-/tmp}/nodecheck-reach.<tag>.<node>.XXXXXX

# The listener: binds each port on the node's address (never the wildcard: the simulated nodes share
# one network namespace), says which ports it holds, then answers each connection with a line naming
# this run, so a connection that reaches something else is not taken for ours. Python 3.4+.
_LISTENER = r"""
import errno, select, socket, sys
tag, host, socks = sys.argv[1], sys.argv[2], []
for port in sys.argv[3:]:
    try:
        family, kind, proto, _, addr = socket.getaddrinfo(host, int(port), 0, socket.SOCK_STREAM)[0]
        s = socket.socket(family, kind, proto)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(addr)
        s.listen(128)
        socks.append(s)
        print("@@nodecheck port %s listening" % port)
    except OSError as e:
        print("@@nodecheck port %s %s %s" % (port, "busy" if e.errno == errno.EADDRINUSE else "error", e.strerror or e))
print("@@nodecheck bound")
sys.stdout.flush()
line = ("nodecheck %s\n" % tag).encode()
while socks:
    for s in select.select(socks, [], [])[0]:
        try:
            c = s.accept()[0]
            c.sendall(line)
            c.close()
        except OSError:
            pass
"""

# $1 limit (s, the listener's own timeout)  $2 ready wait (s)  $3 directory name (its prefix)
# $4 listener source, then the listener's arguments: TAG ADDRESS PORT...
_START = (
    PRIVATE_DIR_FUNCTION
    + OUR_GROUP_FUNCTION
    + SHOW_FUNCTION
    + r"""
limit=$1; ready_wait=$2; name=$3; src=$4; shift 4
command -v python3 >/dev/null 2>&1 || { echo "@@nodecheck nopython"; exit 0; }
command -v setsid >/dev/null 2>&1 || { echo "setsid not found (util-linux): cannot detach the listener" >&2; exit 127; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/nodecheck-reach.$name.XXXXXX") || { echo "cannot create a temporary directory" >&2; exit 70; }
echo "@@nodecheck dir $dir"
# its own session (the stop step kills the group) and its own timeout (a lost nodecheck leaves nothing
# behind: a listener that ran into its timeout was never stopped, so it removes its directory itself);
# --foreground keeps timeout in that group (else it makes its own and outlives the kill)
setsid sh -c 'd=$1; l=$2; s=$3; shift 3; timeout --foreground -k 2 "$l" python3 -u -c "$s" "$@" >"$d/out" 2>"$d/err" </dev/null; rc=$?; echo $rc >"$d/rc"; case $rc in 124|137) rm -rf "$d" ;; esac' \
  sh "$dir" "$limit" "$src" "$@" </dev/null >/dev/null 2>&1 &
echo $! >"$dir/pid"
end=$(( $(date +%s) + ready_wait ))
while :; do
  if grep -q '^@@nodecheck bound' "$dir/out" 2>/dev/null; then state=ready; break; fi
  if [ -e "$dir/rc" ]; then state="exited $(show "$dir/rc")"; break; fi
  if [ "$(date +%s)" -ge "$end" ]; then state=notready; break; fi
  sleep 0.05
done
show "$dir/out"
echo "@@nodecheck $state"
echo "@@nodecheck begin stderr"; show "$dir/err"; echo "@@nodecheck end stderr rc=0"
"""
)

# The client: every target at once, each within the connect timeout; one result line per target.
_CONNECT = r"""
import errno, socket, sys, threading
tag, limit, args = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
targets = [(args[i], int(args[i + 1])) for i in range(0, len(args) - 1, 2)]
want = ("nodecheck %s" % tag).encode()
results = ["error no result"] * len(targets)
def test(i, host, port):
    try:
        s = socket.create_connection((host, port), timeout=limit)
    except socket.timeout:
        results[i] = "timeout"
        return
    except OSError as e:
        kind = {errno.ECONNREFUSED: "refused", errno.EHOSTUNREACH: "unreachable",
                errno.ENETUNREACH: "unreachable"}.get(e.errno, "error")
        results[i] = "%s %s" % (kind, e.strerror or e)
        return
    try:
        got = b""
        while b"\n" not in got and len(got) < 200:
            chunk = s.recv(200)
            if not chunk:
                break
            got += chunk
        results[i] = "ok" if got.strip() == want else "other %r" % got[:80]
    except socket.timeout:
        results[i] = "silent"
    except OSError as e:
        results[i] = "error %s" % (e.strerror or e)
    finally:
        s.close()
threads = [threading.Thread(target=test, args=(i, h, p)) for i, (h, p) in enumerate(targets)]
for t in threads:
    t.start()
for t in threads:
    t.join()
for i, r in enumerate(results):
    print("@@nodecheck conn %d %s" % (i, r))
"""

# $1 directory name (its prefix)  $2 the directory start made ("" when it printed none: then every
# directory of the prefix that passes private_dir). Kills the listener's process group, only when its
# leader is the listener nodecheck started there (dash's kill wants `-s SIGNAL -- -PGID`).
_STOP = (
    PRIVATE_DIR_FUNCTION
    + OUR_GROUP_FUNCTION
    + SHOW_FUNCTION
    + r"""
prefix=${TMPDIR:-/tmp}/nodecheck-reach.$1.; made=$2
stop() {
  dir=$1; pid=$(show "$dir/pid")
  if [ ! -e "$dir/rc" ] && our_group "$pid" "$dir"; then
    echo "@@nodecheck alive"
    kill -s TERM -- "-$pid" 2>/dev/null; sleep 0.2; kill -s KILL -- "-$pid" 2>/dev/null
  else
    echo "@@nodecheck exited $(show "$dir/rc")"
    echo "@@nodecheck begin stderr"; show "$dir/err"; echo "@@nodecheck end stderr rc=0"
  fi
  rm -rf -- "$dir"
}
if [ -n "$made" ]; then
  if private_dir "$made" "$prefix"; then stop "$made"
  elif [ -e "$made" ] || [ -L "$made" ]; then echo "@@nodecheck refused $made (not the private directory the start step made)"
  else echo "@@nodecheck nodir"; fi
  exit 0
fi
found=0
for d in "$prefix"??????; do
  private_dir "$d" "$prefix" || continue
  stop "$d"; found=1
done
[ "$found" = 1 ] || echo "@@nodecheck nodir"
"""
)


def listener_directory(tag: str, node: str) -> str:
    """The name of the listener's directory on `node` (the node's name made safe for a path)."""
    return f"{tag}.{re.sub(r'[^A-Za-z0-9_.-]', '_', node)}"


def start_listener(name: str, directory: str, limit_s: float, tag: str, address: str, ports: Sequence[int]) -> Probe:
    """A listener on `address` for `ports` that answers with `tag`; `limit_s`: its own timeout."""
    return Probe(
        name,
        (
            "sh",
            "-c",
            _START,
            "sh",
            str(math.ceil(limit_s)),
            str(READY_WAIT_S),
            directory,
            _LISTENER,
            tag,
            address,
            *map(str, ports),
        ),
        timeout_s=READY_WAIT_S + 10,
    )


def connect_to_listeners(name: str, tag: str, timeout_s: float, targets: Sequence[tuple[str, int]]) -> Probe:
    """Connections to every (address, port) at once, each given `timeout_s` to connect and to answer."""
    words = [w for address, port in targets for w in (address, str(port))]
    return Probe(name, ("python3", "-c", _CONNECT, tag, fmt(timeout_s), *words), timeout_s=2 * timeout_s + 10)


def stop_listener(name: str, directory: str, made: str) -> Probe:
    """`directory`: the name start_listener got; `made`: the directory it printed (listener_made;
    "" when it printed none)."""
    if made and not MADE_DIR.match(made):
        raise ValueError(f"{made!r} is not a directory a start step made")
    return Probe(name, ("sh", "-c", _STOP, "sh", directory, made), timeout_s=10)
