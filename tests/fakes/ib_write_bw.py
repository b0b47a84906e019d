"""Fake perftest `ib_write_bw` for the simulated cluster: a real TCP rendezvous, simulated bandwidth.

Installed on a node by SimCluster.fake_ib_write_bw() / fabric() (tests/harness/cluster.py) as a
/bin/sh wrapper that runs `python3 -I THIS NODE NODE_ADDRESS NET FABRIC_JSON "$@"`, so it needs no
environment variable. It behaves like ib_write_bw for the options an orchestrator uses:

    server:  ib_write_bw -d DEV -i IBPORT -p TCPPORT [-x GIDINDEX] -F --report_gbits -D S -s SIZE -q N
    client:  the same plus the server's address (or `nodeK`, resolved as DNS would on a cluster)

Options with a value also work as -dDEV, --ib-dev=DEV, --ib-dev DEV; other options are ignored
(perftest's other value-taking short options are known, so their values are not taken for the host;
an unknown long option must use --opt=VALUE). The server binds its own node's address and TCP port,
prints perftest's waiting banner, accepts one client (or gives up after 60 s, so no test leaks a
process), and closes its listening socket; the client connects from its node's address. They swap
node names and devices over the socket, "run" for `test_s` seconds (not -D), and both print the
test-info block, one address line per QP and side, and the result in perftest's format; the server
prints the client's result, as ib_write_bw's server does after xchg_bw_reports.

The output is shaped on the recording
/work/shared/corpus/perftest/dgx-spark-ib_write_bw-rdma-cm-force-link-ib-4qp-report-gbits.txt
(tests/fakes/README.md): the same lines, tabs expanded as in the recording, with the device, the QP
count, the address lines and the result row substituted. With -R it reproduces that recording line
for line except the QPN/PSN values (tests/integration/test_harness_fabric.py checks this).

Bandwidth (Gb/s) = min(default_gbps, either node's "gbps", either end's device "gbps", the pair's
link "gbps"), read from FABRIC_JSON at every run ($S/fabric.json, written by SimCluster.fabric()):
    {"default_gbps": 392.0, "test_s": 0.3, "devices": ["mlx5_0", ...], "link_type": "IB",
     "nodes": {"node3": {"gbps": 150.0}, "node6": {"hang": true},
               "node4": {"devices": {"mlx5_3": {"gbps": 50.0}}}, "node7": {"devices_missing": ["mlx5_1"]}},
     "links": [{"a": "node2", "b": "node5", "gbps": 80.0}]}
Failures use perftest's own messages (formats.md section 3, corpus/perftest), exit 1: no listener
("Couldn't connect to HOST:PORT" + " Unable to init the socket connection"), port in use ("Couldn't
listen to port N" + the same), no device at all (corpus debian-perftest-4.5-no-rdma-device-exit1.txt),
a named device the node lacks ("IB device X not found" + " Unable to find the Infiniband/RoCE device",
ctx_find_dev). A "hang" node sleeps for an hour once connected, as server or as client.
"""

from __future__ import annotations

import ipaddress
import json
import re
import socket
import sys
import time
import zlib
from dataclasses import dataclass, field

DEF_PORT = 18515  # perftest DEF_PORT
DEF_SIZE = 65536  # DEF_SIZE_BW
DEF_ITERS = 5000  # DEF_ITERS_WB (RDMA Write BW)
DEFAULTS = {
    "default_gbps": 392.0,
    "test_s": 0.3,
    "devices": [f"mlx5_{i}" for i in range(8)],
    "link_type": "IB",
    "nodes": {},
    "links": [],
}
ACCEPT_TIMEOUT_S = 60.0  # harness limit: real perftest waits forever for its client
HANG_S = 3600.0
RESULT_LINE = "-" * 87
# perftest's getopt string: "w:y:p:d:i:m:s:n:t:u:S:x:c:q:I:o:M:r:Q:A:l:D:f:B:T:L:E:J:j:K:k:X:W:aFegzRvhbNVCHUOZP"
SHORT_WITH_VALUE = set("wypdimsntuSxcqIoMrQAlDfBTLEJjKkXW")
LONG_WITH_VALUE = {
    "port",
    "ib-dev",
    "ib-port",
    "mtu",
    "size",
    "iters",
    "tx-depth",
    "rx-depth",
    "qp-timeout",
    "sl",
    "gid-index",
    "connection",
    "qp",
    "inline_size",
    "outs",
    "cq-mod",
    "post_list",
    "recv_post_list",
    "duration",
    "margin",
    "mmap",
    "mmap-offset",
    "dlid",
    "source_ip",
    "tos",
    "flows",
    "rate_limit",
    "burst_size",
    "rate_units",
    "output",
    "force-link",
    "out_json_file",
    "limit_bw",
    "limit_msgrate",
    "use_cuda",
    "use_cuda_bus_id",
    "use_rocm",
    "use_neuron",
    "use_hl",
    "cpu_freq_f",
}
LONG_TO_SHORT = {
    "port": "p",
    "ib-dev": "d",
    "ib-port": "i",
    "gid-index": "x",
    "size": "s",
    "duration": "D",
    "qp": "q",
    "iters": "n",
    "rdma_cm": "R",
}
NO_DEVICE = (
    " Did not detect devices \n"
    " If device exists, check if driver is up\n"
)  # corpus debian-perftest-4.5-no-rdma-device-exit1.txt
NOT_FOUND = " Unable to find the Infiniband/RoCE device\n"
NO_SOCKET = " Unable to init the socket connection\n"


@dataclass
class Options:
    host: str | None = None
    values: dict[str, str] = field(default_factory=dict)
    flags: set[str] = field(default_factory=set)

    def number(self, key: str, default: int) -> int:
        try:
            return int(self.values[key], 0) if key in self.values else default
        except ValueError:
            return default

    @property
    def report_gbits(self) -> bool:
        return "report_gbits" in self.flags

    @property
    def rdma_cm(self) -> bool:
        return "R" in self.flags


def parse_args(argv: list[str]) -> Options:
    o = Options()
    i = 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("--"):
            name, eq, value = a[2:].partition("=")
            if not eq and name in LONG_WITH_VALUE and i + 1 < len(argv):
                i, value, eq = i + 1, argv[i + 1], "="
            key = LONG_TO_SHORT.get(name, name)
            if eq:
                o.values[key] = value
            else:
                o.flags.add(key)
        elif a.startswith("-") and len(a) > 1:
            for j in range(1, len(a)):  # bundled short options: -aF, -dmlx5_0, -D5
                if a[j] in SHORT_WITH_VALUE:
                    if a[j + 1 :]:
                        o.values[a[j]] = a[j + 1 :]
                    elif i + 1 < len(argv):
                        i += 1
                        o.values[a[j]] = argv[i]
                    break
                o.flags.add(a[j])
        else:
            o.host = a
        i += 1
    return o


@dataclass(frozen=True)
class Fabric:
    spec: dict

    @classmethod
    def load(cls, path: str) -> Fabric:
        try:
            with open(path) as f:
                spec = json.load(f)
        except FileNotFoundError:
            spec = {}
        return cls({**DEFAULTS, **spec})

    def node(self, name: str) -> dict:
        return self.spec["nodes"].get(name, {})

    def devices(self, node: str) -> list[str]:
        missing = set(self.node(node).get("devices_missing", ()))
        return [d for d in self.spec["devices"] if d not in missing]

    def gbps(self, a: str, dev_a: str, b: str, dev_b: str) -> float:
        values = [float(self.spec["default_gbps"])]
        for node, dev in ((a, dev_a), (b, dev_b)):
            cfg = self.node(node)
            if "gbps" in cfg:
                values.append(float(cfg["gbps"]))
            if "gbps" in cfg.get("devices", {}).get(dev, {}):
                values.append(float(cfg["devices"][dev]["gbps"]))
        for link in self.spec["links"]:
            if {link.get("a"), link.get("b")} == {a, b} and "gbps" in link:
                values.append(float(link["gbps"]))
        return min(values)

    def hangs(self, node: str) -> bool:
        return bool(self.node(node).get("hang"))


@dataclass(frozen=True)
class Me:
    node: str
    address: str
    net: str


def node_index(node: str) -> int:
    m = re.fullmatch(r"node(\d+)", node)
    return int(m.group(1)) if m else 0


def c_hash_hex(value: int, width: int) -> str:
    """C's %#0<width>x: "0x" and zero padding, except that 0 prints as plain zeros ("0000")."""
    return "0" * width if value == 0 else "0x" + format(value, f"0{max(width - 2, 1)}x")


def address_lines(side: str, node: str, device: str, qps: int, tcp_port: int, o: Options, link_type: str) -> list[str]:
    lines = []
    for q in range(qps):
        seed = zlib.crc32(f"{node}/{device}/{tcp_port}/{q}".encode())
        qpn = 0x03E0 + 0x10 * node_index(node) + q
        line = f" {side} address: LID 0000 QPN {c_hash_hex(qpn, 6)} PSN {c_hash_hex(seed & 0xFFFFFF, 6)}"
        if not o.rdma_cm:
            vaddr = 0x7F0000000000 + ((seed >> 4) & 0xFFFFFFF) * 0x1000
            line += f" RKey {c_hash_hex(0x100 + node_index(node), 8)} VAddr {c_hash_hex(vaddr, 16)}"
        lines.append(line)
        if link_type == "Ethernet":  # PERF_GID_FMT: the 16 GID bytes in decimal, %02d
            gid = ipaddress.IPv6Address(f"::ffff:10.77.0.{node_index(node)}").packed
            lines.append(" GID: " + ":".join(f"{b:02d}" for b in gid))
    return lines


def info_block(device: str, o: Options, server: bool, link_type: str) -> list[str]:
    """ctx_print_test_info, as in the recording; the server prints no TX depth (write, not duplex)."""
    lines = [
        RESULT_LINE,
        "                    RDMA_Write BW Test",
        f" Dual-port       : OFF\t\tDevice         : {device}",
        f" Number of qps   : {o.number('q', 1)}\t\tTransport type : IB",
        " Connection type : RC\t\tUsing SRQ      : OFF",
        " PCIe relax order: ON",
        " ibv_wr* API     : ON",
    ]
    if not server:
        lines.append(" TX depth        : 128")
    lines += [" CQ Moderation   : 1", " Mtu             : 1024[B]", f" Link type       : {link_type}"]
    if link_type == "Ethernet":
        lines.append(f" GID index       : {o.number('x', 3)}")
    lines += [
        " Max inline data : 0[B]",
        f" rdma_cm QPs     : {'ON' if o.rdma_cm else 'OFF'}",
        f" Data ex. method : {'rdma_cm' if o.rdma_cm else 'Ethernet'}",
        RESULT_LINE,
    ]
    return lines


def result_lines(gbps: float, o: Options) -> list[str]:
    size = o.number("s", DEF_SIZE)
    duration = o.number("D", 0)
    unit = "Gb/sec" if o.report_gbits else "MiB/sec"
    avg = gbps if o.report_gbits else gbps * 1e9 / 8 / 2**20
    msg_rate = gbps * 1e9 / 8 / size / 1e6
    if duration:  # duration mode: no peak, iterations = messages sent in the test time
        iters, peak = int(gbps * 1e9 / 8 * duration / size), 0.0
    else:  # -n per QP (the recording: -q 4 prints 20000); peak a hair above the average
        iters, peak = o.number("n", DEF_ITERS) * o.number("q", 1), avg * 1.0001
    if o.report_gbits and avg < 0.1:  # inc_accuracy: REPORT_FMT_EXT
        row = " %-7d    %d           %-7.6f            %-7.6f            %-7.6f" % (size, iters, peak, avg, msg_rate)
    else:  # REPORT_FMT of the recording's perftest version
        row = " %-7d    %-10d       %-7.2f            %-7.2f\t\t   %-7.6f" % (size, iters, peak, avg, msg_rate)
    return [f" #bytes     #iterations    BW peak[{unit}]    BW average[{unit}]   MsgRate[Mpps]", row, RESULT_LINE]


def emit(lines: list[str]) -> None:
    sys.stdout.write("".join(line.expandtabs(8) + "\n" for line in lines))
    sys.stdout.flush()


def fail(*messages: str) -> int:
    sys.stdout.flush()
    sys.stderr.write("".join(messages))
    sys.stderr.flush()
    return 1


def send(conn: socket.socket, obj: dict) -> None:
    conn.sendall(json.dumps(obj).encode() + b"\n")


def receive(conn: socket.socket, rfile) -> dict | None:
    line = rfile.readline()
    return json.loads(line) if line else None


def choose_device(me: Me, fabric: Fabric, o: Options) -> tuple[str | None, int]:
    devices = fabric.devices(me.node)
    if not devices:
        return None, fail(NO_DEVICE, NOT_FOUND)
    wanted = o.values.get("d")
    if wanted is None:
        return devices[0], 0
    if wanted not in devices:
        return None, fail(f"IB device {wanted} not found\n", NOT_FOUND)
    return wanted, 0


def serve(me: Me, fabric: Fabric, o: Options, device: str) -> int:
    port = o.number("p", DEF_PORT)
    emit(
        [
            "",
            "************************************",
            "* Waiting for client to connect... *",
            "************************************",
        ]
    )
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((me.address, port))
        listener.listen(1)
    except OSError:
        return fail(f"Couldn't listen to port {port}\n", NO_SOCKET)
    listener.settimeout(ACCEPT_TIMEOUT_S)
    try:
        conn, _ = listener.accept()
    except socket.timeout:
        return fail(f"fake ib_write_bw: no client within {ACCEPT_TIMEOUT_S:.0f} s (the harness's limit)\n", NO_SOCKET)
    finally:
        listener.close()
    with conn, conn.makefile("rb") as rfile:
        if fabric.hangs(me.node):
            time.sleep(HANG_S)
        conn.settimeout(ACCEPT_TIMEOUT_S + float(fabric.spec["test_s"]))
        try:
            hello = receive(conn, rfile)
            if hello is None:
                raise ConnectionError("client went away")
            send(conn, {"node": me.node, "device": device})
            link_type = fabric.spec["link_type"]
            emit(
                info_block(device, o, True, link_type)
                + address_lines("local", me.node, device, o.number("q", 1), port, o, link_type)
                + address_lines("remote", hello["node"], hello["device"], o.number("q", 1), port, o, link_type)
                + [RESULT_LINE]
            )
            report = receive(conn, rfile)
            if report is None:
                raise ConnectionError("client went away")
        except (OSError, ValueError, KeyError):
            return fail(" Failed to exchange data between server and clients\n")
    emit(result_lines(float(report["gbps"]), o))
    return 0


def resolve(me: Me, host: str) -> str:
    m = re.fullmatch(r"node([1-9]\d*)", host)  # the simulated cluster has no DNS for its nodes
    return f"{me.net}.{m.group(1)}" if m else socket.gethostbyname(host)


def connect(me: Me, fabric: Fabric, o: Options, device: str) -> int:
    port = o.number("p", DEF_PORT)
    host = o.host or ""
    try:
        address = resolve(me, host)
    except OSError as e:
        return fail(f"{e.strerror or e} for {host}:{port}\n", NO_SOCKET)
    conn = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    conn.settimeout(5.0)
    try:
        conn.bind((me.address, 0))
        conn.connect((address, port))
    except OSError:
        conn.close()
        return fail(f"Couldn't connect to {host}:{port}\n", NO_SOCKET)
    with conn, conn.makefile("rb") as rfile:
        if fabric.hangs(me.node):
            time.sleep(HANG_S)
        conn.settimeout(None)  # a hung server hangs its client too, as in perftest
        try:
            send(conn, {"node": me.node, "device": device})
            peer = receive(conn, rfile)
            if peer is None:
                raise ConnectionError("server went away")
            link_type = fabric.spec["link_type"]
            emit(
                info_block(device, o, False, link_type)
                + address_lines("local", me.node, device, o.number("q", 1), port, o, link_type)
                + address_lines("remote", peer["node"], peer["device"], o.number("q", 1), port, o, link_type)
                + [RESULT_LINE]
            )
            time.sleep(float(fabric.spec["test_s"]))
            gbps = fabric.gbps(me.node, device, peer["node"], peer["device"])
            send(conn, {"gbps": gbps})
        except (OSError, ValueError, KeyError):
            return fail(" Failed to exchange data between server and clients\n")
    emit(result_lines(gbps, o))
    return 0


def main(argv: list[str]) -> int:
    if len(argv) < 4:
        sys.stderr.write("usage: ib_write_bw.py NODE NODE_ADDRESS NET FABRIC_JSON [ib_write_bw args]\n")
        return 2
    me = Me(argv[0], argv[1], argv[2])
    fabric = Fabric.load(argv[3])
    o = parse_args(argv[4:])
    device, rc = choose_device(me, fabric, o)
    if device is None:
        return rc
    return connect(me, fabric, o, device) if o.host else serve(me, fabric, o, device)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
