"""What the hostile inputs of trust round 2 (issue 32) cost, before and after: each case the review
measured, run on this code, in a fresh child process (peak RSS is that child's alone).

    .venv/bin/python benchmarks/bench_hostile_inputs.py [--only NAME]

Cases (the review's figure in brackets):
  fr-shared        a 0.3 MB flight-recorder pickle, 2,000 entries sharing one 60,000-long list
                   through the memo (its like: 52 s, 1.9 GiB)
  nhc-glob-13k     an imported NHC glob *gpu*ok*ready* on a 13 KB line that never says ready (29.5 s)
  nhc-glob-64k     the same on 64 KiB (about an hour)
  report-planted   `nodecheck report show` of a planted 150 MB report.json of tiny lists (3.8 GiB, 24 s)
  ssh-rekey        a 3 s probe on a node that starts a key re-exchange and never finishes it (33 s,
                   "internal error: SSHException")
Prints one line per case: wall seconds, peak RSS of the child, and what it returned.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FR_SHARED = r"""
import pickle
from nodecheck.parsers.flight_recorder import parse_dump
dims = list(range(60000))
entry = lambda i: {"process_group": ["0", "default_pg"], "profiling_name": "nccl:all_reduce",
                   "state": "completed", "record_id": i, "input_sizes": [dims], "output_sizes": [dims], "frames": []}
data = pickle.dumps({"version": "2.10", "entries": [entry(i) for i in range(2000)]}, protocol=2)
import time; t = time.perf_counter(); dump = parse_dump(data, "shared", time_limit_s=300)
print(f"{len(data):,} bytes, {len(dump.entries)} entries read in {time.perf_counter() - t:.2f} s")
"""

NHC_GLOB = r"""
import re, sys, time
from nodecheck.app.nhc_translate import translate
from nodecheck.app.nhc_model import block_of
from nodecheck.parsers.nhc_conf import parse_nhc_conf
from nodecheck.core.bounded_search import search, MULTILINE
conf = "* || check_cmd_output -m '*gpu*ok*ready*' nvidia-smi\n"
pattern = block_of(translate(parse_nhc_conf(conf), "nhc.conf"), "command.nhc_1_nvidia-smi")["match"]
text = ("gpu ok " * (int(sys.argv[1]) // 7)) + "\n"
t = time.perf_counter(); found = search(pattern, text, MULTILINE)
print(f"{len(text):,} bytes searched in {time.perf_counter() - t:.4f} s, match: {found is not None}")
"""

SSH_REKEY = r"""
import sys, time
sys.path.insert(0, "tests")
from tests.transport.test_ssh_probe_bounds import HOST_KEY, CLIENT_KEY, Server  # the test's paramiko sshd
import socket, threading, paramiko, tempfile, pathlib
from nodecheck.core.model import Node, Probe
from nodecheck.transport.ssh import SshTransport
release = threading.Event()
srv = socket.create_server(("127.0.0.1", 0)); port = srv.getsockname()[1]
def serve():
    conn, _ = srv.accept(); t = paramiko.Transport(conn); t.add_server_key(HOST_KEY)
    t.start_server(server=Server("rekey-stalls", release))
threading.Thread(target=serve, daemon=True).start()
d = pathlib.Path(tempfile.mkdtemp()); CLIENT_KEY.write_private_key_file(str(d / "id"))
(d / "kh").write_text(f"[127.0.0.1]:{port},[n1]:{port} ssh-rsa {HOST_KEY.get_base64()}\n")
node = Node("n1", "127.0.0.1", port=port, user="root", identity_file=str(d / "id"), known_hosts=str(d / "kh"))
session = SshTransport(connect_timeout_s=5).connect(node, 5)
t = time.perf_counter(); c = session.run(Probe("ibstat", ("ibstat",), 3.0), 3.0)
print(f"3 s probe: {c.outcome.value} after {time.perf_counter() - t:.2f} s ({c.detail})")
release.set()
"""


def child(argv: list[str]) -> tuple[float, float, str]:
    """(wall s, the child's peak RSS in MiB, its last output line)."""
    wrapper = (
        "import resource, subprocess, sys, time\n"
        "t = time.perf_counter(); done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "wall = time.perf_counter() - t\n"
        "out = (done.stdout.strip() or done.stderr.strip()).splitlines()\n"
        "print(wall, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, done.returncode)\n"
        "print(out[-1][:300] if out else '')\n"
    )
    done = subprocess.run([sys.executable, "-c", wrapper, *argv], capture_output=True, text=True, cwd=ROOT)
    first, said = (done.stdout.splitlines() + ["", ""])[:2]
    wall, rss, code = first.split()
    return float(wall), float(rss), f"exit {code}: {said}"


PLANTED: list[Path] = []  # removed at the end: 150 MB each


def report_planted() -> list[str]:
    directory = Path(tempfile.mkdtemp(prefix="nodecheck-bench-planted-"))
    PLANTED.append(directory)
    body = b"[]," * 50_000_000  # 150 MB
    (directory / "report.json").write_bytes(b'{"report_version": 3, "nodes": [' + body + b"[]]}")
    return [sys.executable, "-m", "nodecheck", "report", "show", str(directory)]


CASES = {
    "fr-shared": lambda: [sys.executable, "-c", FR_SHARED],
    "nhc-glob-13k": lambda: [sys.executable, "-c", NHC_GLOB, "13000"],
    "nhc-glob-64k": lambda: [sys.executable, "-c", NHC_GLOB, "65536"],
    "report-planted": report_planted,
    "ssh-rekey": lambda: [sys.executable, "-c", SSH_REKEY],
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=sorted(CASES))
    args = parser.parse_args()
    resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))  # a regression must not take the machine
    try:
        for name, make in CASES.items():
            if args.only and name != args.only:
                continue
            wall, rss, said = child(make())
            print(f"{name:15} {wall:7.2f} s  {rss:7.0f} MiB  {said}")
    finally:
        for directory in PLANTED:
            shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
