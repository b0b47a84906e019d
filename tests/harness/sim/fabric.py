"""The RDMA fabric (see "Fabric" in tests/harness/README.md): each node's /sys/class/infiniband is
<state>/nodes/<node>/sys/class/infiniband (sysfs_dir(); empty = no RDMA device). fake_sysfs() writes
files there (IB ports); roce_port() gives the node a veth `rnic<i>` and starts
tests/harness/rdma_driver.py, which keeps a RoCE port's files (GID table, state) in step with it;
fabric() installs the fake ib_write_bw (tests/fakes/ib_write_bw.py) with per-node/link bandwidths."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from harness.sim.base import ClusterBase
from harness.sim.common import FAKES, HARNESS, TOOL_NAME, HarnessError, alive, atomic_write, node_python, read_pid

ROCE_BEHAVIOURS = ("stable", "networkmanager")
FABRIC_DEVICES = tuple(f"mlx5_{i}" for i in range(8))  # fabric(devices=None): mlx5_0..mlx5_7
FAKE_IB_WRITE_BW = FAKES / "ib_write_bw.py"
RDMA_DRIVER = HARNESS / "rdma_driver.py"


class Fabric(ClusterBase):
    """The nodes' RDMA devices and the links between them."""

    def sysfs_dir(self, node: str) -> Path:
        """The directory that is /sys/class/infiniband on the node (empty: no RDMA device)."""
        return self.node_dir(node) / "sys" / "class" / "infiniband"

    def fake_sysfs(self, node: str, files: Mapping[str, str | bytes]) -> Path:
        """Write files under the node's /sys/class/infiniband, e.g. for an IB port
        {"mlx5_0/ports/1/link_layer": "InfiniBand\n", "mlx5_0/ports/1/state": "4: ACTIVE\n",
        "mlx5_0/ports/1/counters/link_downed": "3\n"}. Content is written as given (the kernel's
        files end in a newline). Each file is replaced atomically. Returns sysfs_dir(node)."""
        root = self.sysfs_dir(node)
        tmp = self._sysfs_tmp(node)
        for rel, text in files.items():
            parts = PurePosixPath(rel).parts
            if not parts or PurePosixPath(rel).is_absolute() or ".." in parts:
                raise ValueError(f"bad sysfs path {rel!r} (relative to /sys/class/infiniband)")
            dest = root.joinpath(*parts)
            dest.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(dest, text.encode() if isinstance(text, str) else text, 0o444, tmp_dir=tmp)
        return root

    def roce_port(
        self,
        node: str,
        behaviour: str = "stable",
        ca: str = "mlx5_0",
        port: int = 1,
        rate: str = "400 Gb/sec (4X NDR)",
        timeout: float = 10.0,
    ) -> str:
        """Give the node a RoCE port: RDMA port <ca>/<port> whose netdev is a real interface, a veth
        pair rnic<i> / rnic<i>p in the cluster's network namespace (both up; IPv4 10.77.0.<i>/32 and
        MAC b8:3f:d2:77:00:<i> on rnic<i>; a node's k-th further port gets rnic<i>x<k>, 10.77.<k>.<i>),
        kept current in the node's sysfs by tests/harness/rdma_driver.py. behaviour "stable": link
        down/up changes no GID; "networkmanager": the address goes with the link and comes back
        0.3 s after it, on the next free GID slots (4/5). Idempotent; a different behaviour or rate
        restarts the driver (a fresh GID table). Returns when the port's files are written."""
        if behaviour not in ROCE_BEHAVIOURS:
            raise ValueError(f"behaviour must be one of {ROCE_BEHAVIOURS}, not {behaviour!r}")
        if not TOOL_NAME.match(ca) or int(port) < 1:
            raise ValueError(f"bad RDMA port {ca!r}/{port!r}")
        i, port = self._index(node), int(port)
        rdma = self.node_dir(node) / "rdma"
        rdma.mkdir(exist_ok=True)
        key = f"{ca}-{port}"
        conf_path, pid_file, ready = rdma / f"{key}.json", rdma / f"{key}.pid", rdma / f"{key}.ready"
        old = json.loads(conf_path.read_text()) if conf_path.exists() else None
        k = old["k"] if old else len(list(rdma.glob("*.json")))
        conf = {
            "ca": ca,
            "port": port,
            "k": k,
            "netdev": f"rnic{i}" if k == 0 else f"rnic{i}x{k}",
            "address": f"10.77.{k}.{i}/32",
            "mac": f"b8:3f:d2:77:{k:02x}:{i:02x}",
            "behaviour": behaviour,
            "rate": rate,
        }
        netdev = conf["netdev"]
        atomic_write(rdma / f"{key}.netdev", f"{netdev}\n".encode(), 0o644)  # for fabric-clear
        self._ensure_veth(netdev, conf["mac"], conf["address"])
        if old == conf and _is_rdma_driver(read_pid(pid_file)):
            return netdev
        _stop_driver(pid_file)
        atomic_write(conf_path, json.dumps(conf, indent=1).encode(), 0o644)
        ready.unlink(missing_ok=True)
        cmd = [
            *self._netns_prefix(),
            "setsid",
            "-f",
            sys.executable,
            "-I",
            str(RDMA_DRIVER),
            "--node",
            f"node{i}",
            "--view",
            str(self.sysfs_dir(node)),
            "--ca",
            ca,
            "--port",
            str(port),
            "--netdev",
            netdev,
            "--address",
            conf["address"],
            "--behaviour",
            behaviour,
            "--rate",
            rate,
            "--pid-file",
            str(pid_file),
            "--ready-file",
            str(ready),
        ]
        with open(rdma / f"{key}.log", "ab") as log:
            subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, check=True, timeout=10)
        deadline = time.monotonic() + timeout
        while not ready.exists():
            if time.monotonic() > deadline:
                raise HarnessError(
                    f"RDMA driver for {node} {ca}/{port} not ready after {timeout} s: "
                    f"{(rdma / f'{key}.log').read_text(errors='replace')[-2000:]}"
                )
            time.sleep(0.01)
        return netdev

    def fabric(
        self,
        default_gbps: float = 392.0,
        nodes: Mapping[str, dict] | None = None,
        links: list[dict] | None = None,
        test_s: float = 0.3,
        devices: list[str] | None = None,
        link_type: str = "IB",
    ) -> Path:
        """Write <state>/fabric.json and install the fake ib_write_bw on every node. nodes:
        {"node3": {"gbps": 150.0}, "node6": {"hang": True}, "node4": {"devices": {"mlx5_3":
        {"gbps": 50.0}}}, "node7": {"devices_missing": ["mlx5_1"]}}; links: [{"a": "node2", "b":
        "node5", "gbps": 80.0}]; a test's bandwidth is the least value that applies to it. devices:
        the HCAs every node has (default mlx5_0..mlx5_7); link_type: "IB" or "Ethernet" (the test
        info's "Link type"; Ethernet adds GID lines). test_s: how long each test "runs"."""
        for name in list(nodes or {}) + [n for link in links or [] for n in (link["a"], link["b"])]:
            self._index(name)  # typos fail here, not silently later
        spec = {
            "default_gbps": float(default_gbps),
            "test_s": float(test_s),
            "devices": list(devices) if devices is not None else list(FABRIC_DEVICES),
            "link_type": link_type,
            "nodes": dict(nodes or {}),
            "links": list(links or []),
        }
        path = self.state_dir / "fabric.json"
        atomic_write(path, json.dumps(spec, indent=1).encode(), 0o644)
        for n in self.nodes:
            self.fake_ib_write_bw(n)
        return path

    def fake_ib_write_bw(self, node: str) -> Path:
        """Install tests/fakes/ib_write_bw.py as the node's ib_write_bw (a real TCP rendezvous with
        the other nodes; bandwidths from <state>/fabric.json, defaults without one)."""
        i = self._index(node)
        script = self._copy_data(node, "ib_write_bw", "py", FAKE_IB_WRITE_BW.read_bytes())
        python = node_python()
        args = [
            python,
            "-I",
            str(script),
            f"node{i}",
            self.address(node),
            self.net,
            str(self.state_dir / "fabric.json"),
        ]
        return self._write_tool(
            node, "ib_write_bw", "fake perftest (tests/fakes/ib_write_bw.py)", [f'exec {shlex.join(args)} "$@"']
        )

    def clear_fabric(self) -> None:
        """Stop every RDMA driver and leftover fake ib_write_bw, delete the veths, empty every
        node's /sys/class/infiniband view and remove fabric.json (part of reset())."""
        nodes = self.nodes
        if (
            any((self.node_dir(n) / "rdma").exists() for n in nodes)
            or (self.state_dir / "fabric.json").exists()
            or any((self.node_dir(n) / "bin" / "ib_write_bw").exists() for n in nodes)
        ):
            self._sh("fabric-clear", timeout=60)
        (self.state_dir / "fabric.json").unlink(missing_ok=True)
        for n in nodes:
            view = self.sysfs_dir(n)
            if view.is_dir():
                for f in view.iterdir():
                    shutil.rmtree(f) if f.is_dir() and not f.is_symlink() else f.unlink()
            else:
                view.mkdir(parents=True)

    def _sysfs_tmp(self, node: str) -> Path:
        """Temp files for atomic writes into the view: same filesystem, but outside the view."""
        tmp = self.node_dir(node) / "sys" / ".nc-tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        return tmp

    def _ip(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        r = subprocess.run([*self._netns_prefix(), "ip", *args], capture_output=True, text=True, timeout=10)
        if check and r.returncode:
            raise HarnessError(f"ip {' '.join(args)} failed (exit {r.returncode}): {r.stderr.strip()}")
        return r

    def _ensure_veth(self, netdev: str, mac: str, address: str) -> None:
        """Create the veth pair, up, with its address; an existing one is left as it is."""
        if self._ip("link", "show", "dev", netdev, check=False).returncode == 0:
            return
        self._ip("link", "add", netdev, "address", mac, "type", "veth", "peer", "name", f"{netdev}p")
        # the EUI-64 link-local address is then the default GID (deduplicated, as in the kernel)
        self._ip("link", "set", netdev, "addrgenmode", "eui64", check=False)
        self._ip("link", "set", f"{netdev}p", "up")
        self._ip("link", "set", netdev, "up")
        self._ip("addr", "add", address, "dev", netdev)


def _is_rdma_driver(pid: int | None) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, TypeError):
        return False
    return alive(pid) and any(a.endswith(b"/rdma_driver.py") for a in argv)


def _stop_driver(pid_file: Path) -> None:
    """Stop the driver named in pid_file: without its pid file it exits by itself; TERM, then KILL."""
    pid = read_pid(pid_file)
    pid_file.unlink(missing_ok=True)
    if not _is_rdma_driver(pid):
        return
    assert pid is not None
    try:
        os.kill(pid, signal.SIGTERM)
        for _ in range(100):
            if not alive(pid):
                return
            time.sleep(0.02)
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
