"""Python API over ssh_nodes.sh: the simulated cluster used by the integration tests and the demo.

    c = SimCluster(state_dir="/tmp/x/sim")   # net/port default to $NODECHECK_HARNESS_NET/_PORT or 127.0.1/22
    c.up(8)                                   # node1..node8 = real sshd at 127.0.1.1..8:22
    c.fake_replay("node3", "ibstat", "tests/data/ibstat/....txt")
    c.fake_hang("node6", "ibstat"); c.stop("node8"); c.rekey("node2")
    ... nodecheck run c.inventory_path ...
    c.reset()                                 # no fakes, every node up with its original key
    c.down()

Needs root, and should run inside a private network namespace (tests/run_all.sh and
tests/harness/demo.sh make one). Nodes keep running after this object is gone; only down()
(or `ssh_nodes.sh down`) stops them. SimCluster(state_dir=...) on a running cluster attaches to it.

A fake tool is an sh script at <state>/nodes/<node>/bin/<tool>, which is /usr/local/sbin/<tool>
on that node only. It reads its canned output from <state>/nodes/<node>/data/ by absolute path
and needs no environment variable, so it behaves the same over ssh and when a Slurm prolog (or
`nsenter -t <pid> -u -m`) runs it. Arguments given to a fake are ignored.

The RDMA fabric (see "Fabric" in tests/harness/README.md): each node's /sys/class/infiniband is
<state>/nodes/<node>/sys/class/infiniband (sysfs_dir(); empty = no RDMA device). fake_sysfs() writes
files there (IB ports); roce_port() gives the node a veth `rnic<i>` and starts
tests/harness/rdma_driver.py, which keeps a RoCE port's files (GID table, state) in step with it;
fabric() installs the fake ib_write_bw (tests/fakes/ib_write_bw.py) with per-node/link bandwidths.

Real Slurm (see "Slurm" in tests/harness/README.md): slurm_up() starts slurmctld and one slurmd per
node through tests/harness/slurm_cluster.sh, each slurmd inside its node's namespaces, so a Prolog on
node3 runs node3's fake tools; sbatch(), wait_job(), node(), drain()/resume(), slurm_reset(),
run_on_node() drive it from tests.

Training jobs for `nodecheck watch` (see "trainer.py" in tests/fakes/README.md): start_training()
runs tests/fakes/trainer.py inside a node's namespaces, detached, writing step lines to its log, and
installs tests/fakes/gpu_telemetry.py as the node's nvidia-smi; both follow one scenario clock
(builders: tests/harness/training.py). stop_training(), hang_ssh()/unhang_ssh() (sshd SIGSTOPped:
connections time out while the node keeps training); reset() undoes all of it.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path, PurePosixPath
from typing import Callable, Collection, Mapping, Sequence

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "ssh_nodes.sh"
SLURM_SCRIPT = HERE / "slurm_cluster.sh"
FAKE_PYNVML = HERE.parent / "fakes" / "pynvml.py"
FAKE_IB_WRITE_BW = HERE.parent / "fakes" / "ib_write_bw.py"
FAKE_TRAINER = HERE.parent / "fakes" / "trainer.py"
FAKE_GPU_TELEMETRY = HERE.parent / "fakes" / "gpu_telemetry.py"
FAKE_RANK = HERE.parent / "fakes" / "hung_rank.py"
FAKE_RANK_PKG = HERE.parent / "fakes" / "hung_rank_pkg"
RDMA_DRIVER = HERE / "rdma_driver.py"
ROCE_BEHAVIOURS = ("stable", "networkmanager")
FABRIC_DEVICES = tuple(f"mlx5_{i}" for i in range(8))   # fabric(devices=None): mlx5_0..mlx5_7
_TOOL = re.compile(r"^[A-Za-z0-9_.+-]+$")


class HarnessError(RuntimeError):
    """ssh_nodes.sh failed; the message carries its stderr."""


class SimCluster:
    def __init__(self, state_dir: str | os.PathLike | None = None, net: str | None = None,
                 port: int | None = None, script: str | os.PathLike = SCRIPT) -> None:
        default = Path(os.environ.get("TMPDIR") or "/tmp") / "nodecheck-harness"
        self.state_dir = Path(os.path.abspath(state_dir or os.environ.get("NODECHECK_HARNESS_DIR")
                                              or default))
        self._net = net or os.environ.get("NODECHECK_HARNESS_NET") or "127.0.1"
        self._port = int(port or os.environ.get("NODECHECK_HARNESS_PORT") or 22)
        self.script = Path(script)

    # ---- lifecycle --------------------------------------------------------------------------
    def up(self, n: int) -> "SimCluster":
        """Start node1..node<n> (1 <= n <= 254). Raises HarnessError if already up or on failure
        (a failed up leaves nothing running)."""
        self._sh("up", str(int(n)), timeout=60 + n)
        return self

    def down(self) -> None:
        """Stop everything started on any node (sshd, sessions, hung fakes) and remove state_dir.
        A no-op when nothing is there. A Slurm cluster (slurm_up) is stopped first: its slurmctld
        and munged live outside the nodes."""
        if self.slurm_dir.exists():
            self.slurm_down()
        if self.is_up:
            self.unhang_ssh()          # a stopped sshd would ignore SIGTERM until down's SIGKILL
        self._sh("down", timeout=60)

    @property
    def is_up(self) -> bool:
        return (self.state_dir / "harness.env").is_file()

    def __enter__(self) -> "SimCluster":
        return self

    def __exit__(self, *exc) -> None:
        self.down()

    # ---- what nodecheck (and ssh, pdsh) get ---------------------------------------------------
    @property
    def nodes(self) -> list[str]:
        """["node1", ..., "nodeN"] of the running cluster."""
        return [f"node{i}" for i in range(1, self._env()["N"] + 1)]

    @property
    def net(self) -> str:
        return self._env()["NET"] if self.is_up else self._net

    @property
    def port(self) -> int:
        return self._env()["PORT"] if self.is_up else self._port

    def address(self, node: str) -> str:
        return f"{self.net}.{self._index(node)}"

    @property
    def inventory_path(self) -> Path:
        """hosts.yml: the nodecheck inventory of the cluster (user, port, key, known_hosts)."""
        return self.state_dir / "hosts.yml"

    @property
    def known_hosts(self) -> Path:
        return self.state_dir / "known_hosts"

    @property
    def identity_file(self) -> Path:
        return self.state_dir / "id_ed25519"

    @property
    def ssh_config(self) -> Path:
        """For OpenSSH and pdsh: `ssh -F <this> node3`, PDSH_SSH_ARGS_APPEND="-F <this>"."""
        return self.state_dir / "ssh_config"

    def node_dir(self, node: str) -> Path:
        return self.state_dir / "nodes" / f"node{self._index(node)}"

    def pid(self, node: str) -> int:
        """The node's sshd pid; `nsenter -t <pid> -u -m CMD` runs CMD "on" the node."""
        return int(self._sh("pid", node).strip())

    def status(self) -> dict[str, bool]:
        """{node: sshd running}."""
        out = self._sh("status")
        return {f[0]: f[2] == "up" for f in (line.split() for line in out.splitlines())}

    # ---- faults ---------------------------------------------------------------------------------
    def stop(self, node: str) -> None:
        """Power the node off: its sshd and everything running on it are killed; connections
        to it are refused until start()."""
        self.unhang_ssh(node)
        self._sh("stop", node)

    def start(self, node: str) -> None:
        """Start a stopped node again (same host key, same fake tools)."""
        self._sh("start", node)

    def rekey(self, node: str) -> None:
        """Give the node a NEW host key and restart its sshd; known_hosts keeps the old key, so a
        strict client (RejectPolicy) gets BadHostKeyException. Undo with restore_key()/reset()."""
        self._sh("rekey", node)

    def restore_key(self, node: str) -> None:
        self._sh("restore-key", node)

    def reset(self) -> None:
        """Back to a clean cluster: no fake tools, every node up, every original host key back, no
        RDMA ports (drivers stopped, veths deleted, every /sys/class/infiniband view empty), no
        training (trainers stopped, their files and logs removed) and no hung sshd."""
        self.unhang_ssh()
        self.clear_ranks()
        self.clear_training()
        self.clear_fabric()
        self.clear_nccl()
        self.clear_tools()
        self._sh("reset", timeout=60)

    # ---- fake tools -----------------------------------------------------------------------------
    def fake_replay(self, node: str, tool: str, data_file: str | os.PathLike, exit_code: int = 0,
                    stderr_file: str | os.PathLike | None = None) -> Path:
        """`tool` on `node` prints data_file byte for byte (and stderr_file on stderr), then exits
        with exit_code. The files are copied, so the originals may change or go away."""
        data = self._copy_data(node, tool, "stdout", Path(data_file).read_bytes())
        lines = [f"cat {shlex.quote(str(data))}"]
        if stderr_file is not None:
            err = self._copy_data(node, tool, "stderr", Path(stderr_file).read_bytes())
            lines.append(f"cat {shlex.quote(str(err))} >&2")
        return self._write_tool(node, tool, f"replay of {data_file}", lines + [f"exit {int(exit_code)}"])

    def fake_output(self, node: str, tool: str, stdout: str | bytes = b"", exit_code: int = 0,
                    stderr: str | bytes = b"") -> Path:
        """Like fake_replay, with the output given inline."""
        lines = []
        for stream, text, redirect in (("stdout", stdout, ""), ("stderr", stderr, " >&2")):
            if text:
                raw = text.encode() if isinstance(text, str) else text
                lines.append(f"cat {shlex.quote(str(self._copy_data(node, tool, stream, raw)))}{redirect}")
        return self._write_tool(node, tool, "canned output", lines + [f"exit {int(exit_code)}"])

    def fake_exit(self, node: str, tool: str, code: int, stderr_text: str = "") -> Path:
        """`tool` on `node` prints stderr_text on stderr and exits with `code`."""
        return self.fake_output(node, tool, b"", code, stderr_text)

    def fake_hang(self, node: str, tool: str) -> Path:
        """`tool` on `node` never answers (sleeps an hour; down()/stop() kill it)."""
        return self._write_tool(node, tool, "hangs", ["exec sleep 3600"])

    def fake_script(self, node: str, tool: str, body: str) -> Path:
        """`tool` on `node` is the given /bin/sh script body (for fakes that need logic)."""
        return self._write_tool(node, tool, "script", [body])

    def fake_replay_by_args(self, node: str, tool: str, cases: "list[tuple[str, str | os.PathLike]]",
                            otherwise_exit: int = 2) -> Path:
        """`tool` on `node` prints the data file of the first case whose shell pattern matches its
        arguments ("$*"), e.g. [("--query-gpu=*", f1), ("-q", f2)]; no match: exit otherwise_exit."""
        lines = ['case "$*" in']
        for i, (pattern, data_file) in enumerate(cases):
            if "'" in pattern or ")" in pattern:
                raise ValueError(f"bad pattern {pattern!r}")
            data = self._copy_data(node, tool, f"case{i}", Path(data_file).read_bytes())
            # a space in a case pattern must be escaped; * and ? stay globs
            lines.append(f"  {pattern.replace(' ', chr(92) + ' ')}) cat {shlex.quote(str(data))}; exit 0 ;;")
        lines += [f'  *) echo "fake {tool}: no canned output for: $*" >&2; exit {int(otherwise_exit)} ;;', "esac"]
        return self._write_tool(node, tool, "replay by arguments", lines)

    def fake_nvml(self, node: str, state_file: str | os.PathLike) -> Path:
        """nvidia-ml-py is "installed" on the node: the fake pynvml module (tests/fakes/pynvml.py)
        goes into the node's python3 site dir with `state_file` as its GPU state."""
        site = self.node_dir(node) / "py"
        _atomic_write(site / "pynvml.py", FAKE_PYNVML.read_bytes(), 0o644)
        _atomic_write(site / "nvml_state.json", Path(state_file).read_bytes(), 0o644)
        return site

    def remove_tool(self, node: str, tool: str) -> None:
        """The tool is missing on the node again (a shell answers exit 127)."""
        self._check_tool(tool)
        d = self.node_dir(node)
        (d / "bin" / tool).unlink(missing_ok=True)
        for f in (d / "data").glob(f"{tool}.*"):
            f.unlink()

    def clear_tools(self, node: str | None = None) -> None:
        """Remove every fake tool (of one node, or of all nodes)."""
        for n in [node] if node else self.nodes:
            d = self.node_dir(n)
            for sub in ("bin", "data", "py"):
                if not (d / sub).is_dir():
                    continue
                for f in (d / sub).iterdir():
                    if f.is_dir():
                        shutil.rmtree(f)       # python's __pycache__
                    else:
                        f.unlink()

    def tools(self, node: str) -> list[str]:
        return sorted(p.name for p in (self.node_dir(node) / "bin").iterdir())

    def fake_replay_sequence(self, node: str, tool: str, data_files: "list[str | os.PathLike]",
                             exit_code: int = 0) -> Path:
        """The k-th call of `tool` on `node` prints data_files[k] (copied); from the last one on, it
        keeps printing the last (e.g. perfquery before and after a test)."""
        if not data_files:
            raise ValueError("fake_replay_sequence needs at least one data file")
        self._check_tool(tool)
        data = self.node_dir(node) / "data"
        for old in data.glob(f"{tool}.seq*"):
            old.unlink()
        copies = [self._copy_data(node, tool, f"seq{k}", Path(f).read_bytes()) for k, f in enumerate(data_files)]
        count, lock = data / f"{tool}.count", data / f"{tool}.lock"
        count.unlink(missing_ok=True)
        lines = [f"exec 9>>{shlex.quote(str(lock))} && flock 9 || exit 99",   # calls may overlap
                 f"n=0; {{ read -r n < {shlex.quote(str(count))}; }} 2>/dev/null",
                 f"echo $((n + 1)) > {shlex.quote(str(count))}",
                 "exec 9>&-",
                 f"[ \"$n\" -lt {len(copies)} ] || n={len(copies) - 1}",
                 'case "$n" in']
        lines += [f"  {k}) cat {shlex.quote(str(c))} ;;" for k, c in enumerate(copies)]
        lines += ["esac", f"exit {int(exit_code)}"]
        return self._write_tool(node, tool, f"replay sequence of {len(copies)} files", lines)

    def fake_sequence_by_args(self, node: str, tool: str,
                              cases: "list[tuple[str, list[str | os.PathLike]]]", otherwise_exit: int = 2) -> Path:
        """Per shell pattern of the arguments ("$*"), its own sequence: the k-th call matching a
        pattern prints its k-th file (then the last). E.g. perfquery per port, before and after a
        test: [("*-C mlx5_3 *", [before, after]), ("*", [before])]; no match: exit otherwise_exit."""
        self._check_tool(tool)
        data = self.node_dir(node) / "data"
        lock = data / f"{tool}.lock"
        lines = [f"exec 9>>{shlex.quote(str(lock))} && flock 9 || exit 99", 'case "$*" in']
        for i, (pattern, files) in enumerate(cases):
            if "'" in pattern or ")" in pattern or not files:
                raise ValueError(f"bad case {pattern!r}")
            copies = [self._copy_data(node, tool, f"case{i}.seq{k}", Path(f).read_bytes())
                      for k, f in enumerate(files)]
            count = data / f"{tool}.case{i}.count"
            count.unlink(missing_ok=True)
            c = shlex.quote(str(count))
            lines += [f"  {pattern.replace(' ', chr(92) + ' ')})", f"    n=0; {{ read -r n < {c}; }} 2>/dev/null; echo $((n + 1)) > {c}",
                      f"    [ \"$n\" -lt {len(copies)} ] || n={len(copies) - 1}", '    case "$n" in']
            lines += [f"      {k}) cat {shlex.quote(str(f))} ;;" for k, f in enumerate(copies)]
            lines += ["    esac ;;"]
        lines += [f"  *) exit {int(otherwise_exit)} ;;", "esac"]
        return self._write_tool(node, tool, f"sequences by arguments ({len(cases)} cases)", lines)

    # ---- RDMA fabric ----------------------------------------------------------------------------
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
            _atomic_write(dest, text.encode() if isinstance(text, str) else text, 0o444, tmp_dir=tmp)
        return root

    def roce_port(self, node: str, behaviour: str = "stable", ca: str = "mlx5_0", port: int = 1,
                  rate: str = "400 Gb/sec (4X NDR)", timeout: float = 10.0) -> str:
        """Give the node a RoCE port: RDMA port <ca>/<port> whose netdev is a real interface, a veth
        pair rnic<i> / rnic<i>p in the cluster's network namespace (both up; IPv4 10.77.0.<i>/32 and
        MAC b8:3f:d2:77:00:<i> on rnic<i>; a node's k-th further port gets rnic<i>x<k>, 10.77.<k>.<i>),
        kept current in the node's sysfs by tests/harness/rdma_driver.py. behaviour "stable": link
        down/up changes no GID; "networkmanager": the address goes with the link and comes back
        0.3 s after it, on the next free GID slots (4/5). Idempotent; a different behaviour or rate
        restarts the driver (a fresh GID table). Returns when the port's files are written."""
        if behaviour not in ROCE_BEHAVIOURS:
            raise ValueError(f"behaviour must be one of {ROCE_BEHAVIOURS}, not {behaviour!r}")
        if not _TOOL.match(ca) or int(port) < 1:
            raise ValueError(f"bad RDMA port {ca!r}/{port!r}")
        i, port = self._index(node), int(port)
        rdma = self.node_dir(node) / "rdma"
        rdma.mkdir(exist_ok=True)
        key = f"{ca}-{port}"
        conf_path, pid_file, ready = rdma / f"{key}.json", rdma / f"{key}.pid", rdma / f"{key}.ready"
        old = json.loads(conf_path.read_text()) if conf_path.exists() else None
        k = old["k"] if old else len(list(rdma.glob("*.json")))
        conf = {"ca": ca, "port": port, "k": k, "netdev": f"rnic{i}" if k == 0 else f"rnic{i}x{k}",
                "address": f"10.77.{k}.{i}/32", "mac": f"b8:3f:d2:77:{k:02x}:{i:02x}",
                "behaviour": behaviour, "rate": rate}
        netdev = conf["netdev"]
        _atomic_write(rdma / f"{key}.netdev", f"{netdev}\n".encode(), 0o644)   # for fabric-clear
        self._ensure_veth(netdev, conf["mac"], conf["address"])
        if old == conf and _is_rdma_driver(_read_pid(pid_file)):
            return netdev
        _stop_driver(pid_file)
        _atomic_write(conf_path, json.dumps(conf, indent=1).encode(), 0o644)
        ready.unlink(missing_ok=True)
        cmd = [*self._netns_prefix(), "setsid", "-f", sys.executable, "-I", str(RDMA_DRIVER),
               "--node", f"node{i}", "--view", str(self.sysfs_dir(node)), "--ca", ca, "--port", str(port),
               "--netdev", netdev, "--address", conf["address"], "--behaviour", behaviour,
               "--rate", rate, "--pid-file", str(pid_file), "--ready-file", str(ready)]
        with open(rdma / f"{key}.log", "ab") as log:
            subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, check=True, timeout=10)
        deadline = time.monotonic() + timeout
        while not ready.exists():
            if time.monotonic() > deadline:
                raise HarnessError(f"RDMA driver for {node} {ca}/{port} not ready after {timeout} s: "
                                   f"{(rdma / f'{key}.log').read_text(errors='replace')[-2000:]}")
            time.sleep(0.01)
        return netdev

    def fabric(self, default_gbps: float = 392.0, nodes: Mapping[str, dict] | None = None,
               links: "list[dict] | None" = None, test_s: float = 0.3,
               devices: "list[str] | None" = None, link_type: str = "IB") -> Path:
        """Write <state>/fabric.json and install the fake ib_write_bw on every node. nodes:
        {"node3": {"gbps": 150.0}, "node6": {"hang": True}, "node4": {"devices": {"mlx5_3":
        {"gbps": 50.0}}}, "node7": {"devices_missing": ["mlx5_1"]}}; links: [{"a": "node2", "b":
        "node5", "gbps": 80.0}]; a test's bandwidth is the least value that applies to it. devices:
        the HCAs every node has (default mlx5_0..mlx5_7); link_type: "IB" or "Ethernet" (the test
        info's "Link type"; Ethernet adds GID lines). test_s: how long each test "runs"."""
        for name in list(nodes or {}) + [n for link in links or [] for n in (link["a"], link["b"])]:
            self._index(name)                              # typos fail here, not silently later
        spec = {"default_gbps": float(default_gbps), "test_s": float(test_s),
                "devices": list(devices) if devices is not None else list(FABRIC_DEVICES),
                "link_type": link_type, "nodes": dict(nodes or {}), "links": list(links or [])}
        path = self.state_dir / "fabric.json"
        _atomic_write(path, json.dumps(spec, indent=1).encode(), 0o644)
        for n in self.nodes:
            self.fake_ib_write_bw(n)
        return path

    def fake_ib_write_bw(self, node: str) -> Path:
        """Install tests/fakes/ib_write_bw.py as the node's ib_write_bw (a real TCP rendezvous with
        the other nodes; bandwidths from <state>/fabric.json, defaults without one)."""
        i = self._index(node)
        script = self._copy_data(node, "ib_write_bw", "py", FAKE_IB_WRITE_BW.read_bytes())
        python = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
        args = [python, "-I", str(script), f"node{i}", self.address(node), self.net,
                str(self.state_dir / "fabric.json")]
        return self._write_tool(node, "ib_write_bw", "fake perftest (tests/fakes/ib_write_bw.py)",
                                [f'exec {shlex.join(args)} "$@"'])

    def clear_fabric(self) -> None:
        """Stop every RDMA driver and leftover fake ib_write_bw, delete the veths, empty every
        node's /sys/class/infiniband view and remove fabric.json (part of reset())."""
        nodes = self.nodes
        if any((self.node_dir(n) / "rdma").exists() for n in nodes) or \
                (self.state_dir / "fabric.json").exists() or \
                any((self.node_dir(n) / "bin" / "ib_write_bw").exists() for n in nodes):
            self._sh("fabric-clear", timeout=60)
        (self.state_dir / "fabric.json").unlink(missing_ok=True)
        for n in nodes:
            view = self.sysfs_dir(n)
            if view.is_dir():
                for f in view.iterdir():
                    shutil.rmtree(f) if f.is_dir() and not f.is_symlink() else f.unlink()
            else:
                view.mkdir(parents=True)

    def nccl(self, net_busbw_gbs: float = 370.0, nvlink_busbw_gbs: float = 480.0,
             nodes: Mapping[str, dict] | None = None, gpus_per_node: int = 8,
             gpu_model: str = "NVIDIA H100 80GB HBM3", nccl_version: str = "2.29.2+cuda12.4",
             tests_version: str = "2.17.9", test_s: float = 0.3) -> Path:
        """Write <state>/nccl.json and install the fake nccl-tests and launchers
        (tests/fakes/nccl_tests.py) on every node: all_reduce_perf, all_gather_perf,
        reduce_scatter_perf, alltoall_perf, mpirun, srun. A multi-node test's bus bandwidth plateau
        is the least net_busbw_gbs of its nodes, a single-node test's the node's nvlink_busbw_gbs
        (net_busbw_gbs with NCCL_P2P_DISABLE=1 and NCCL_SHM_DISABLE=1). nodes: per node
        {"net_busbw_gbs", "nvlink_busbw_gbs", "corrupt": True, "corrupt_from_bytes", "hang": "start" |
        "init" | "sweep", "hang_at_bytes", "nccl_version", "gpus", "gpu_model"}; test_s: how long a
        whole sweep takes. Schema: tests/harness/README.md, "nccl-tests"."""
        keys = ("net_busbw_gbs", "nvlink_busbw_gbs", "corrupt", "corrupt_from_bytes", "hang",
                "hang_at_bytes", "nccl_version", "gpus", "gpu_model")
        spec_nodes = {}
        for name, cfg in (nodes or {}).items():
            node = f"node{self._index(name)}"                  # typos fail here, not silently later
            unknown = sorted(set(cfg) - set(keys))
            if unknown:
                raise ValueError(f"{name}: unknown nccl keys {unknown} (known: {', '.join(keys)})")
            if cfg.get("hang") not in (None, "start", "init", "sweep"):
                raise ValueError(f"{name}: hang must be 'start', 'init' or 'sweep', not {cfg['hang']!r}")
            spec_nodes[node] = dict(cfg)
        spec = {"net_busbw_gbs": float(net_busbw_gbs), "nvlink_busbw_gbs": float(nvlink_busbw_gbs),
                "gpus_per_node": int(gpus_per_node), "gpu_model": gpu_model, "nccl_version": nccl_version,
                "tests_version": tests_version, "test_s": float(test_s), "nodes": spec_nodes}
        path = self.state_dir / "nccl.json"
        _atomic_write(path, json.dumps(spec, indent=1).encode(), 0o644)
        for n in self.nodes:
            self.fake_nccl_tests(n)
        return path

    def fake_nccl_tests(self, node: str) -> list[Path]:
        """Install tests/fakes/nccl_tests.py as the node's nccl-tests binaries and launchers (a sh
        wrapper per tool; the model comes from <state>/nccl.json, defaults without one)."""
        i = self._index(node)
        fake = HERE.parent / "fakes" / "nccl_tests.py"
        script = self._copy_data(node, "nccl_tests", "py", fake.read_bytes())
        python = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
        args = [python, "-I", str(script), f"node{i}", self.address(node), self.net, str(self.state_dir / "nccl.json")]
        return [self._write_tool(node, tool, "fake nccl-tests (tests/fakes/nccl_tests.py)",
                                 [f'exec {shlex.join([*args, tool])} "$0" "$@"'])
                for tool in ("all_reduce_perf", "all_gather_perf", "reduce_scatter_perf", "alltoall_perf",
                             "mpirun", "srun")]

    def clear_nccl(self) -> None:
        """End every fake nccl-tests process still running (hung ranks, agents, launchers) and remove
        nccl.json (part of reset())."""
        marker, pids = str(self.state_dir / "nodes"), []
        for p in Path("/proc").iterdir():
            try:
                argv = (p / "cmdline").read_bytes().decode(errors="replace").split("\0")
            except OSError:
                continue
            if p.name.isdigit() and any(a.startswith(marker) and a.endswith("/data/nccl_tests.py") for a in argv):
                pids.append(int(p.name))
        _terminate(pids)
        (self.state_dir / "nccl.json").unlink(missing_ok=True)

    def kill_ssh_sessions(self, node: str) -> int:
        """Kill the node's per-connection sshd processes (not its listener), as if the clients'
        network dropped: their connections close; processes started with setsid keep running.
        Returns how many were killed."""
        return int(self._sh("drop-sessions", node).strip())

    # ---- fault injection (tests/faults) ------------------------------------------------------
    def fake_killed(self, node: str, tool: str, sig: str = "KILL", stdout: str = "") -> Path:
        """`tool` on `node` prints `stdout`, then dies by signal `sig` (KILL, SEGV, ...), as a tool
        that crashed or was OOM-killed mid-run."""
        if not re.fullmatch(r"[A-Z0-9]+", sig):
            raise ValueError(f"bad signal name {sig!r}")
        lines = [f"cat {shlex.quote(str(self._copy_data(node, tool, 'stdout', stdout.encode())))}"] if stdout else []
        return self._write_tool(node, tool, f"dies by SIG{sig}", lines + [f"kill -{sig} $$", "sleep 5"])

    def fake_flood(self, node: str, tool: str, nbytes: int, line: str = "x" * 99) -> Path:
        """`tool` on `node` prints `nbytes` bytes of `line` lines (100 MB of output), then exits 0."""
        if "'" in line or "\n" in line:
            raise ValueError(f"bad flood line {line!r}")
        return self._write_tool(node, tool, f"prints {nbytes} bytes",
                                [f"yes '{line}' | head -c {int(nbytes)}", "exit 0"])

    def fake_stall_after(self, node: str, tool: str, first: bytes, rest: bytes, stall_s: float,
                         marker: str | os.PathLike) -> Path:
        """`tool` prints `first`, touches `marker` (the test's cue to inject a fault), waits
        `stall_s`, then prints `rest`: output cut by whatever the test does in between."""
        a = self._copy_data(node, tool, "stdout", first)
        b = self._copy_data(node, tool, "rest", rest)
        return self._write_tool(node, tool, f"prints, stalls {stall_s:g} s, prints the rest",
                                [f"cat {shlex.quote(str(a))}", f"touch {shlex.quote(str(marker))}",
                                 f"sleep {float(stall_s):g}", f"cat {shlex.quote(str(b))}", "exit 0"])

    def node_processes(self, node: str, ignore: Collection[str] = ("slurmd", "slurmstepd")) -> list[tuple[int, str]]:
        """(pid, command line) of every process "on" the node (in its mount namespace; the nodes
        share one PID namespace) except its sshd listener and daemons named in `ignore`: what a
        run left behind on the node."""
        name = f"node{self._index(node)}"
        try:
            ns = int((self.node_dir(name) / "mntns").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return []
        listener = _read_pid(self.node_dir(name) / "sshd.pid")
        found = []
        for p in Path("/proc").iterdir():
            if not p.name.isdigit() or int(p.name) == listener:
                continue
            try:
                if os.stat(p / "ns" / "mnt").st_ino != ns or "\nState:\tZ" in (p / "status").read_text():
                    continue
                comm = (p / "comm").read_text().strip()
                argv = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            except OSError:
                continue
            if comm not in ignore:
                found.append((int(p.name), argv or f"[{comm}]"))
        return found

    def reset_ssh_connections(self, node: str) -> int:
        """TCP reset of every established connection to the node's sshd (`ss -K`, the kernel's
        socket destroy: the client gets ECONNRESET mid-stream). Returns how many sockets went;
        0 means the kernel lacks CONFIG_INET_DIAG_DESTROY (use kill_ssh_sessions instead)."""
        addr = self.address(node)
        query = ["state", "established", "(", "src", f"{addr}:{self.port}", ")"]
        before = subprocess.run([*self._netns_prefix(), "ss", "-Htn", *query], capture_output=True,
                                text=True, timeout=10).stdout.strip().splitlines()
        subprocess.run([*self._netns_prefix(), "ss", "-K", "-Htn", *query], capture_output=True, timeout=10)
        after = subprocess.run([*self._netns_prefix(), "ss", "-Htn", *query], capture_output=True,
                               text=True, timeout=10).stdout.strip().splitlines()
        return len(before) - len(after)

    def slurmctld_kill(self) -> int:
        """slurmctld dies (SIGKILL), slurmd and munged stay: every scontrol gets "Unable to contact
        slurm controller". slurm_up() again (or slurm_down()) brings it back / cleans up."""
        pid = _read_pid(self.slurm_dir / "slurmctld.pid")
        if not _alive(pid):
            raise HarnessError("slurmctld is not running")
        os.kill(pid, signal.SIGKILL)
        for _ in range(50):
            if not _alive(pid):
                break
            time.sleep(0.1)
        return pid

    # ---- training jobs (tests/fakes/trainer.py, gpu_telemetry.py; scenarios: tests/harness/training.py)
    # A fake training process per node (or `procs` per node) inside the node's namespaces, writing
    # torchtitan-like step lines to its log, and a fake nvidia-smi that reads the same scenario, so
    # `nodecheck watch` samples a real process, a real log and GPU telemetry that follow one clock.
    def training_dir(self, node: str) -> Path:
        """<node dir>/training: the scenario, the copies of the fakes, trainer-K.pid and trainer-K.out."""
        return self.node_dir(node) / "training"

    def training_log(self, node: str, scenario: Mapping | None = None) -> Path:
        """The host's path of the node's training log (the scenario's "log"; /root/... on the node is
        <node dir>/home/... here)."""
        if scenario is None:
            scenario = json.loads((self.training_dir(node) / "scenario.json").read_text())
        log = str(scenario.get("log") or _load_trainer().DEFAULTS["log"])
        if log == "/root" or log.startswith("/root/"):
            return self.node_dir(node) / "home" / log[len("/root/"):]
        return Path(log)

    def start_training(self, node: str, scenario: Mapping, fresh_log: bool = True, timeout: float = 10) -> Path:
        """Start the scenario's training on the node: a fake trainer (`procs` processes, default 1)
        inside the node's UTS + mount + network namespaces, detached (setsid; stdio to
        training_dir/trainer-K.out), with "train.py" in its argv; the node's nvidia-smi answers from
        the same scenario. Installs on every node a pgrep that sees only its own node's processes
        (the simulated nodes share one PID namespace). A training already running on the node is
        stopped first; fresh_log removes an old log. Returns the log's path on this host."""
        return self.start_training_all({node: scenario}, fresh_log=fresh_log, timeout=timeout)[f"node{self._index(node)}"]

    def start_training_all(self, scenarios: Mapping[str, Mapping], fresh_log: bool = True,
                           timeout: float = 10) -> dict[str, Path]:
        """start_training() for each {node: scenario} (e.g. from tests/harness/training.py), all
        launched before waiting for any: {node: host path of its log}."""
        trainer = _load_trainer()
        checked = {}
        for name, scn in scenarios.items():
            node = f"node{self._index(name)}"
            try:
                checked[node] = trainer.check_scenario(dict(scn))
            except trainer.ScenarioError as e:
                raise ValueError(f"{node}: {e}") from None
        self._install_node_pgrep()
        python = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
        logs = {}
        for node, scn in checked.items():
            self.stop_training(node)
            d = self.training_dir(node)
            if d.exists():
                shutil.rmtree(d)
            d.mkdir(parents=True)
            _atomic_write(d / "trainer.py", FAKE_TRAINER.read_bytes(), 0o644)
            _atomic_write(d / "gpu_telemetry.py", FAKE_GPU_TELEMETRY.read_bytes(), 0o644)
            _atomic_write(d / "scenario.json", json.dumps(scn, indent=1).encode(), 0o644)
            logs[node] = self.training_log(node, scn)
            if fresh_log:
                logs[node].unlink(missing_ok=True)
            self._write_tool(node, "nvidia-smi", "fake GPU telemetry of the training scenario (tests/fakes/gpu_telemetry.py)",
                             [f'exec {shlex.join([python, "-I", str(d / "gpu_telemetry.py"), str(d / "scenario.json")])} "$@"'])
            sshd = str(self.pid(node))
            for k in range(int(scn["procs"])):
                cmd = ["nsenter", "-t", sshd, "-u", "-m", "-n", "--wd=/root", "--",
                       "/usr/bin/env", "-i", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                       "HOME=/root", "setsid", "-f", python, "-I", str(d / "trainer.py"), "train.py",
                       "--scenario", str(d / "scenario.json"), "--proc", str(k)]
                with open(d / f"trainer-{k}.out", "ab") as out:
                    subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out, check=True, timeout=10)
        deadline = time.monotonic() + timeout
        for node, scn in checked.items():
            d = self.training_dir(node)
            for k in range(int(scn["procs"])):
                while not (d / f"trainer-{k}.pid").exists():
                    if time.monotonic() > deadline:
                        out = (d / f"trainer-{k}.out").read_text(errors="replace")[-2000:]
                        raise HarnessError(f"{node}: trainer process {k} did not start within {timeout} s: {out}")
                    time.sleep(0.01)
        return logs

    def training_pids(self, node: str | None = None) -> list[int]:
        """Live trainer processes (of one node, or of every node)."""
        nodes = [f"node{self._index(node)}"] if node else self.nodes
        wanted = {str(self.training_dir(n) / "trainer.py").encode() for n in nodes}
        pids = []
        for p in Path("/proc").iterdir():
            if not p.name.isdigit():
                continue
            try:
                argv = (p / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if wanted.intersection(argv) and _alive(int(p.name)):
                pids.append(int(p.name))
        return sorted(pids)

    def stop_training(self, node: str | None = None) -> int:
        """SIGTERM (then SIGKILL after 1 s) the trainers of one node, or of every node; returns how
        many were running. The scenario stays: nvidia-smi keeps following its clock."""
        pids = self.training_pids(node)
        _terminate(pids)
        return len(pids)

    def clear_training(self) -> None:
        """Stop every trainer, remove each node's training dir and the logs under its /root (part of
        reset()). The fake nvidia-smi and pgrep go with clear_tools()."""
        self.stop_training()
        for n in self.nodes:
            d = self.training_dir(n)
            if not d.exists():
                continue
            try:
                log = self.training_log(n)
            except (OSError, ValueError):
                log = None
            if log is not None and self.node_dir(n) in log.parents:
                log.unlink(missing_ok=True)
            shutil.rmtree(d)

    # ---- hung ranks for `nodecheck forensics` (tests/fakes/hung_rank.py, freeze.py) --------------
    # Real Python processes inside a node's namespaces, each blocked in a function named like a
    # collective, with the rank variables a launcher gives (RANK, LOCAL_RANK, WORLD_SIZE, ...), so the
    # real py-spy dumps real stacks; frozen ones (cgroup freezer) never answer it.
    def ranks_dir(self, node: str) -> Path:
        return self.node_dir(node) / "ranks"

    def start_ranks(self, node: str, ranks: Sequence[Mapping], world_size: int, env: Mapping[str, str] | None = None,
                    timeout: float = 10) -> dict[int, int]:
        """Start one fake rank per entry of `ranks` on the node: {"rank": R, "local_rank": L,
        "collective": all_reduce|reduce_scatter|broadcast|barrier|all_gather|none, "via_aggregate":
        bool, "threads": bool, "step": N}; each gets RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
        GROUP_RANK (rank // len(ranks)) and `env` in its environment, "train.py" in its argv.
        Waits until every stack is in place; returns {rank: pid}."""
        d = self.ranks_dir(node)
        d.mkdir(parents=True, exist_ok=True)
        _atomic_write(d / "hung_rank.py", FAKE_RANK.read_bytes(), 0o644)
        pkg = d / "hung_rank_pkg"
        pkg.mkdir(exist_ok=True)
        for f in FAKE_RANK_PKG.glob("*.py"):
            _atomic_write(pkg / f.name, f.read_bytes(), 0o644)
        self._install_node_pgrep()
        python = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
        sshd = str(self.pid(node))
        pid_files = {}
        for spec in ranks:
            rank, local = int(spec["rank"]), int(spec.get("local_rank", spec["rank"] % len(ranks)))
            pid_file = d / f"rank-{rank}.pid"
            pid_file.unlink(missing_ok=True)
            variables = {"RANK": str(rank), "LOCAL_RANK": str(local), "WORLD_SIZE": str(world_size),
                         "LOCAL_WORLD_SIZE": str(len(ranks)), "GROUP_RANK": str(rank // len(ranks)), **(env or {})}
            argv = [python, "-I", str(d / "hung_rank.py"), "train.py", "--collective", str(spec["collective"]),
                    "--step", str(int(spec.get("step", 0))), "--pid-file", str(pid_file)]
            argv += ["--via-aggregate"] if spec.get("via_aggregate") else []
            argv += ["--threads"] if spec.get("threads") else []
            cmd = ["nsenter", "-t", sshd, "-u", "-m", "-n", "--wd=/root", "--", "/usr/bin/env", "-i",
                   "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root",
                   *(f"{k}={v}" for k, v in variables.items()), "setsid", "-f", *argv]
            with open(d / f"rank-{rank}.out", "ab") as out:
                subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out, check=True, timeout=10)
            pid_files[rank] = pid_file
        deadline = time.monotonic() + timeout
        pids = {}
        for rank, pid_file in pid_files.items():
            while (pid := _read_pid(pid_file)) is None:
                if time.monotonic() > deadline:
                    out = (d / f"rank-{rank}.out").read_text(errors="replace")[-2000:]
                    raise HarnessError(f"{node}: fake rank {rank} did not start within {timeout} s: {out}")
                time.sleep(0.01)
            pids[rank] = pid
        return pids

    def freeze_ranks(self, node: str, pids: Sequence[int]) -> str:
        """Freeze these processes (cgroup freezer): py-spy then never gets an answer from them, as from
        a process stuck in the kernel or the driver (State D). clear_ranks() thaws them."""
        freeze = _load_fake("freeze")
        return freeze.freeze(pids, f"nodecheck-harness-{self.state_dir.name}-node{self._index(node)}")

    def rank_pids(self, node: str | None = None) -> list[int]:
        nodes = [f"node{self._index(node)}"] if node else self.nodes
        wanted = {str(self.ranks_dir(n) / "hung_rank.py").encode() for n in nodes}
        return sorted(int(p.name) for p in Path("/proc").iterdir()
                      if p.name.isdigit() and _argv_has(p, wanted) and _alive(int(p.name)))

    def clear_ranks(self) -> None:
        """Thaw and stop every fake rank, remove their files and the dumps placed in the nodes' homes."""
        freeze = _load_fake("freeze")
        for n in self.nodes:
            cg = Path(freeze.FREEZER_ROOT) / f"nodecheck-harness-{self.state_dir.name}-{n}"
            if cg.is_dir():
                freeze.thaw(str(cg))
        _terminate(self.rank_pids())
        for n in self.nodes:
            for d in (self.ranks_dir(n), self.node_dir(n) / "home" / "fr"):
                if d.exists():
                    shutil.rmtree(d)

    def place_dumps(self, node: str, files: Mapping[int, str | os.PathLike | bytes],
                    prefix: str = "/root/fr/trace_rank_") -> str:
        """Flight-recorder dumps as a rank's watchdog writes them: {rank: file or bytes} to PREFIX<rank> on
        the node (a /root/... prefix is the node's own home). Returns the prefix."""
        if not prefix.startswith("/root/"):
            raise ValueError("dumps go under the node's own /root (the nodes share /tmp)")
        for rank, data in files.items():
            raw = data if isinstance(data, bytes) else Path(data).read_bytes()
            dest = self.node_dir(node) / "home" / f"{prefix[len('/root/'):]}{int(rank)}"
            dest.parent.mkdir(parents=True, exist_ok=True)
            _atomic_write(dest, raw, 0o644)
        return prefix

    def install_pyspy(self, node: str | None = None) -> None:
        """The real py-spy (from the test venv) on the node's PATH."""
        spy = Path(sys.executable).parent / "py-spy"
        if not os.access(spy, os.X_OK):
            raise HarnessError(f"{spy} is not installed (pip install py-spy: the test extra has it)")
        for n in [node] if node else self.nodes:
            self._write_tool(n, "py-spy", "the real py-spy", [f'exec {shlex.quote(str(spy))} "$@"'])

    def hang_ssh(self, node: str) -> int:
        """The node stops answering SSH while it keeps working: SIGSTOP its sshd listener and every
        per-connection sshd process. A new connection is accepted by the kernel but never gets a
        banner (the client times out); open sessions freeze; what they started, and the training,
        keep running. Undo with unhang_ssh() (reset(), stop() and down() do). Returns how many
        processes were stopped."""
        name = f"node{self._index(node)}"
        stopped: set[int] = set()
        for _ in range(2):     # a second pass catches a session forked while the first one ran
            for pid in self._sshd_processes(name):
                if pid not in stopped:
                    os.kill(pid, signal.SIGSTOP)
                    stopped.add(pid)
        hung = self.node_dir(name) / "ssh_hung"
        old = set(_read_pids(hung))
        _atomic_write(hung, "".join(f"{p}\n" for p in sorted(stopped | old)).encode(), 0o644)
        return len(stopped)

    def unhang_ssh(self, node: str | None = None) -> None:
        """SIGCONT what hang_ssh() stopped (one node, or every node): the node answers again."""
        for n in [f"node{self._index(node)}"] if node else self.nodes:
            hung = self.node_dir(n) / "ssh_hung"
            if not hung.exists():
                continue
            for pid in set(_read_pids(hung)) | set(self._sshd_processes(n)):
                try:
                    os.kill(pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
            hung.unlink()

    def _sshd_processes(self, node: str) -> list[int]:
        """The node's sshd listener and per-connection sshd processes (sshd, sshd-session, ...)."""
        try:
            ns = int((self.node_dir(node) / "mntns").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return []
        pids = []
        for p in Path("/proc").iterdir():
            if not p.name.isdigit():
                continue
            try:
                if os.stat(p / "ns" / "mnt").st_ino != ns or not (p / "comm").read_text().startswith("sshd"):
                    continue
            except OSError:
                continue
            pids.append(int(p.name))
        return pids

    def _install_node_pgrep(self) -> None:
        """Every simulated node shares the host's PID namespace, so a plain `pgrep -f 'train\\.py'` on
        node1 would also find node2's trainer. On a real node it finds that node's only; this pgrep
        (a wrapper in the node's /usr/local/sbin, first in PATH) keeps to the processes in the
        node's own mount namespace, which is what "on the node" means here."""
        real = "/usr/bin/pgrep" if os.access("/usr/bin/pgrep", os.X_OK) else (shutil.which("pgrep") or "pgrep")
        for n in self.nodes:
            self._write_tool(n, "pgrep", "only this node's processes (the nodes share one PID namespace)",
                             [f'exec {shlex.quote(real)} --ns $$ --nslist mnt "$@"'])

    # ---- a client -------------------------------------------------------------------------------
    def connect(self, node: str, known_hosts: str | os.PathLike | None = None, timeout: float = 10):
        """A paramiko SSHClient logged in to the node with strict host-key checking (RejectPolicy)."""
        import paramiko

        c = paramiko.SSHClient()
        c.load_host_keys(str(known_hosts or self.known_hosts))
        c.set_missing_host_key_policy(paramiko.RejectPolicy())
        try:
            c.connect(self.address(node), port=self.port, username="root",
                      key_filename=str(self.identity_file), look_for_keys=False, allow_agent=False,
                      timeout=timeout, banner_timeout=timeout, auth_timeout=timeout)
        except BaseException:
            c.close()
            raise
        return c

    def run(self, node: str, command: str, timeout: float = 10) -> tuple[int, str, str]:
        """(exit code, stdout, stderr) of a shell command on the node, over ssh."""
        c = self.connect(node, timeout=timeout)
        try:
            _, out, err = c.exec_command(command, timeout=timeout)
            stdout, stderr = out.read(), err.read()
            return out.channel.recv_exit_status(), stdout.decode(errors="replace"), \
                stderr.decode(errors="replace")
        finally:
            c.close()

    # ---- Slurm (slurm_cluster.sh) ---------------------------------------------------------------
    # A real slurmctld + one slurmd per node (inside the node's namespaces, so a Prolog on node3 runs
    # node3's fake tools with hostname node3). See "Slurm" in tests/harness/README.md.
    @property
    def slurm_dir(self) -> Path:
        return self.state_dir / "slurm"

    @property
    def slurm_conf(self) -> Path:
        """slurm.conf of the running Slurm cluster (SLURM_CONF for sbatch, scontrol, ...)."""
        return self.slurm_dir / "slurm.conf"

    @property
    def slurm_is_up(self) -> bool:
        return self.slurm_conf.is_file()

    def slurm_up(self, nodes: int | Sequence[str] | None = None, prolog: str | os.PathLike | None = None,
                 prolog_slurmctld: str | os.PathLike | None = None,
                 health_check_program: str | os.PathLike | None = None, extra_conf: Sequence[str] = (),
                 prolog_flags: str = "Alloc", timeout: float = 30,
                 etc_files: Mapping[str, str] | None = None) -> Path:
        """Start slurmctld and a slurmd on each node (default: every node; an int n = node1..node<n>)
        and wait until all are idle; returns slurm.conf. Already up with the same configuration:
        nothing happens; with another one, the whole Slurm cluster restarts (jobs are lost).
        prolog and health_check_program run inside the nodes: they must not live under /root (each
        node has its own). extra_conf: slurm.conf lines; KEY=... replaces our default for KEY
        (e.g. "HealthCheckInterval=5", "SchedulerParameters=sched_interval=1"). etc_files: {name: text}
        put beside slurm.conf (and in /etc/slurm on the nodes) before any daemon starts, e.g. the
        gate's nodecheck.yml, which a HealthCheckProgram reads when slurmd starts."""
        if nodes is None:
            names = self.nodes
        elif isinstance(nodes, int):
            names = [f"node{i}" for i in range(1, nodes + 1)]
        else:
            names = [f"node{self._index(n)}" for n in nodes]
        env = {"PROLOG": "", "PROLOG_SLURMCTLD": "", "HEALTH_CHECK_PROGRAM": "",
               "PROLOG_FLAGS": prolog_flags, "EXTRA_CONF": "\n".join(extra_conf),
               "SLURM_UP_TIMEOUT": str(max(1, int(timeout)))}
        for key, program, on_node in (("PROLOG", prolog, True), ("PROLOG_SLURMCTLD", prolog_slurmctld, False),
                                      ("HEALTH_CHECK_PROGRAM", health_check_program, True)):
            if program is None:
                continue
            path = os.path.abspath(program)
            if on_node and _under_hidden_dir(path):
                raise HarnessError(
                    f"{key.lower()} {path} is under /root (or /usr/local/sbin), which every simulated node "
                    "replaces with its own: slurmd could not run it there. Keep the repository, its .venv "
                    "and temp files elsewhere (e.g. /work, /tmp; pytest's tmp_path honours $TMPDIR).")
            env[key] = path
        if etc_files:
            staged = self.state_dir / ".slurm-etc"
            shutil.rmtree(staged, ignore_errors=True)
            staged.mkdir()
            for name, text in etc_files.items():
                (staged / name).write_text(text)
            env["SLURM_ETC_FILES"] = str(staged)
        self._slurm_sh("up", *names, env=env, timeout=timeout + 30)
        return self.slurm_conf

    def slurm_down(self) -> None:
        """Stop slurmctld, every slurmd, their jobs and the harness's munged; remove slurm_dir."""
        self._slurm_sh("down", timeout=60)

    def slurm_revive(self, timeout: float = 30) -> None:
        """Start again the slurmd of nodes that were stopped and started (stop()/reset()); a dead
        slurmctld or munged restarts the whole Slurm cluster with the same slurm.conf."""
        self._slurm_sh("revive", env={"SLURM_UP_TIMEOUT": str(max(1, int(timeout)))}, timeout=timeout + 30)

    def slurm_env(self) -> dict[str, str]:
        """os.environ plus SLURM_CONF, for running Slurm's clients (sbatch, sinfo, nodecheck)."""
        return dict(os.environ, SLURM_CONF=str(self.slurm_conf))

    def slurm_command(self, *argv: str, timeout: float = 10, check: bool = True) -> subprocess.CompletedProcess:
        """Run a Slurm client (argv[0]: sinfo, squeue, scancel, ...) against the cluster, from the
        jobs directory (where sbatch's slurm-%j.out files go)."""
        jobs = self.slurm_dir / "jobs"
        jobs.mkdir(parents=True, exist_ok=True)
        try:
            r = subprocess.run(list(argv), env=self.slurm_env(), cwd=jobs, capture_output=True, text=True,
                               timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as e:
            raise HarnessError(f"{shlex.join(argv)}: timed out after {timeout} s\n{self.slurm_logs()}") from e
        if check and r.returncode != 0:
            raise HarnessError(f"{shlex.join(argv)} failed (exit {r.returncode}): {r.stderr.strip() or r.stdout.strip()}")
        return r

    def scontrol(self, *args: str, timeout: float = 10) -> str:
        """stdout of `scontrol ARGS` (raises HarnessError on failure)."""
        return self.slurm_command("scontrol", *args, timeout=timeout).stdout

    def sbatch(self, *args: str, wrap: str | None = "true", timeout: float = 10) -> int:
        """Submit a batch job (`sbatch --parsable ARGS --wrap=WRAP`; wrap=None: ARGS name a script)
        and return its id. Output goes to slurm_dir/jobs/slurm-<id>.out unless ARGS say otherwise."""
        argv = ["sbatch", "--parsable", *args] + ([f"--wrap={wrap}"] if wrap is not None else [])
        out = self.slurm_command(*argv, timeout=timeout).stdout.strip()
        return int(out.split(";")[0])

    def job(self, jobid: int) -> dict[str, str]:
        """`scontrol show job JOBID` as {key: value}: JobState, Reason, NodeList, BatchHost,
        Restarts, ExitCode, ... (a job array or het job: its first record)."""
        return _scontrol_record(self.scontrol("show", "job", str(int(jobid))))

    def wait_job(self, jobid: int, states: Collection[str] = ("COMPLETED",), timeout: float = 60) -> dict[str, str]:
        """Poll until the job's JobState is one of `states`; returns job(). Raises HarnessError (with
        the job and the daemons' log tails) on timeout, or as soon as the job ends in another state."""
        final = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}
        deadline = time.monotonic() + timeout
        while True:
            job = self.job(jobid)
            state = job.get("JobState", "")
            if state in states:
                return job
            if state in final or time.monotonic() > deadline:
                why = f"ended {state}" if state in final else f"still {state} after {timeout} s"
                raise HarnessError(f"job {jobid} {why}, wanted {sorted(states)}: {job}\n{self.slurm_logs()}")
            time.sleep(0.2)

    def node(self, name: str) -> dict[str, str]:
        """`scontrol show node NAME` as {key: value}. State e.g. "IDLE+DRAIN"; Reason is the whole text
        as Slurm shows it ("Prolog error [root@2026-11-29T14:12:26]"), ReasonText / ReasonUser /
        ReasonTime its parts ("" when the node has no reason)."""
        node = _scontrol_record(self.scontrol("show", "node", f"node{self._index(name)}"))
        node.setdefault("Reason", "")
        m = re.fullmatch(r"(.*) \[([^\]@]*)@([0-9T:-]+)\]", node.get("Reason", ""), re.S)
        node["ReasonText"], node["ReasonUser"], node["ReasonTime"] = m.groups() if m else (node.get("Reason", ""), "", "")
        return node

    def wait_node(self, name: str, predicate: Callable[[dict[str, str]], bool], timeout: float = 30) -> dict[str, str]:
        """Poll node(name) until predicate(node) is true; returns it. HarnessError on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            node = self.node(name)
            if predicate(node):
                return node
            if time.monotonic() > deadline:
                raise HarnessError(f"{name}: condition not met after {timeout} s: State={node.get('State')} "
                                   f"Reason={node.get('Reason')!r}\n{self.slurm_logs()}")
            time.sleep(0.2)

    def drain(self, name: str, reason: str) -> None:
        """As an operator would: scontrol update nodename=NAME state=drain reason=REASON."""
        self.scontrol("update", f"nodename=node{self._index(name)}", "state=drain", f"reason={reason}")

    def resume(self, name: str) -> None:
        """scontrol update nodename=NAME state=resume (drained or down: back in service)."""
        self.scontrol("update", f"nodename=node{self._index(name)}", "state=resume")

    def slurm_nodes(self) -> dict[str, str]:
        """{node: State} of every Slurm node (e.g. "IDLE", "IDLE+DRAIN", "MIXED+DRAIN")."""
        out = self.slurm_command("sinfo", "-h", "-N", "-O", "NodeList:64,StateComplete:128").stdout
        return {f[0]: f[1].upper() for f in (line.split() for line in out.splitlines()) if len(f) == 2}

    def slurm_reset(self, timeout: float = 30) -> None:
        """Between tests: slurmd of restarted nodes started again, every job cancelled, every drained or
        down node resumed (whatever its reason), every node idle again. Every node must be running:
        call it after reset() (which starts stopped nodes), e.g. at the start of each test."""
        self.slurm_revive(timeout=timeout)
        self.slurm_command("scancel", "--user=root", check=False)
        deadline = time.monotonic() + timeout
        while self.slurm_command("squeue", "-h", "-o", "%i").stdout.strip():
            if time.monotonic() > deadline:
                raise HarnessError(f"jobs left after scancel: {self.slurm_command('squeue').stdout}\n{self.slurm_logs()}")
            time.sleep(0.1)
        stuck = [n for n, st in self.slurm_nodes().items() if re.search(r"DRAIN|DOWN|FAIL|NOT_RESPONDING", st)]
        if stuck:
            self.scontrol("update", f"nodename={','.join(stuck)}", "state=resume")
        while True:
            states = self.slurm_nodes()
            if all(st == "IDLE" for st in states.values()):
                return
            if time.monotonic() > deadline:
                raise HarnessError(f"nodes not idle after reset: {states}\n{self.slurm_logs()}")
            time.sleep(0.1)

    def slurm_logs(self, lines: int = 15) -> str:
        """The last lines of slurmctld's log and of each slurmd's log (for assertion messages)."""
        parts = []
        logs = self.slurm_dir / "log"
        for f in [logs / "slurmctld.log", *sorted(logs.glob("slurmd-*.log"), key=lambda p: _natural(p.name))]:
            try:
                tail = f.read_text(errors="replace").splitlines()[-lines:]
            except OSError:
                continue
            parts.append(f"--- {f.name}\n" + "\n".join(tail))
        return "\n".join(parts) or f"(no Slurm logs under {logs})"

    def run_on_node(self, node: str, argv: Sequence[str], env: Mapping[str, str] | None = None,
                    timeout: float = 60) -> tuple[int, str, str]:
        """(exit code, stdout, stderr) of argv run "on" the node as slurmd runs its HealthCheckProgram:
        inside the node's UTS + mount + network namespaces, with ONLY `env` in the environment
        (default: what Slurm 22.05 gives a HealthCheckProgram, SLURMD_NODENAME=<node>; no PATH, so give
        argv[0] as an absolute path), in slurmd's log directory (/ without Slurm). /etc/slurm/slurm.conf
        is there while Slurm is up."""
        name = f"node{self._index(node)}"
        env = {"SLURMD_NODENAME": name} if env is None else dict(env)
        cwd = self.slurm_dir / "log" if self.slurm_is_up else Path("/")
        cmd = ["nsenter", "-t", str(self.pid(name)), "-u", "-m", "-n", f"--wd={cwd}", "--",
               "/usr/bin/env", "-i", *[f"{k}={v}" for k, v in env.items()], *argv]
        try:
            r = subprocess.run(cmd, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as e:
            raise HarnessError(f"{shlex.join(argv)} on {name}: timed out after {timeout} s") from e
        return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")

    def _slurm_sh(self, *args: str, env: Mapping[str, str] | None = None, timeout: float = 60) -> str:
        full = dict(os.environ, NODECHECK_HARNESS_DIR=str(self.state_dir), **(env or {}))
        try:
            r = subprocess.run(["bash", str(SLURM_SCRIPT), *args], env=full, capture_output=True, text=True,
                               timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as e:
            raise HarnessError(f"slurm_cluster.sh {' '.join(args)}: timed out after {timeout} s") from e
        if r.returncode != 0:
            raise HarnessError(f"slurm_cluster.sh {' '.join(args)} failed (exit {r.returncode}): "
                               f"{r.stderr.strip() or r.stdout.strip()}")
        return r.stdout

    # ---- internals ------------------------------------------------------------------------------
    def _sh(self, *args: str, timeout: float = 30) -> str:
        env = dict(os.environ, NODECHECK_HARNESS_DIR=str(self.state_dir),
                   NODECHECK_HARNESS_NET=self._net, NODECHECK_HARNESS_PORT=str(self._port))
        try:
            r = subprocess.run(["bash", str(self.script), *args], env=env, capture_output=True,
                               text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as e:
            raise HarnessError(f"ssh_nodes.sh {' '.join(args)}: timed out after {timeout} s") from e
        if r.returncode != 0:
            raise HarnessError(f"ssh_nodes.sh {' '.join(args)} failed (exit {r.returncode}): "
                               f"{r.stderr.strip() or r.stdout.strip()}")
        return r.stdout

    def _env(self) -> dict:
        try:
            text = (self.state_dir / "harness.env").read_text()
        except FileNotFoundError:
            raise HarnessError(f"no simulated cluster at {self.state_dir} (call up(n))") from None
        env = dict(line.split("=", 1) for line in text.split())
        return {"N": int(env["N"]), "NET": env["NET"], "PORT": int(env["PORT"])}

    def _index(self, node: str) -> int:
        m = re.fullmatch(r"(?:node)?([1-9][0-9]*)", str(node))
        n = self._env()["N"]
        if not m or int(m.group(1)) > n:
            raise ValueError(f"no such node: {node!r} (have node1..node{n})")
        return int(m.group(1))

    @staticmethod
    def _check_tool(tool: str) -> None:
        if not _TOOL.match(tool):
            raise ValueError(f"bad tool name {tool!r}")

    def _copy_data(self, node: str, tool: str, stream: str, raw: bytes) -> Path:
        self._check_tool(tool)
        dest = self.node_dir(node) / "data" / f"{tool}.{stream}"
        _atomic_write(dest, raw, 0o644)
        return dest

    def _sysfs_tmp(self, node: str) -> Path:
        """Temp files for atomic writes into the view: same filesystem, but outside the view."""
        tmp = self.node_dir(node) / "sys" / ".nc-tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        return tmp

    def _netns_prefix(self) -> list[str]:
        """[] in the cluster's network namespace, else an nsenter into it (through a running node)."""
        env = dict(line.split("=", 1) for line in (self.state_dir / "harness.env").read_text().split())
        want = int(env["NETNS"])
        if os.stat("/proc/self/ns/net").st_ino == want:
            return []
        for n in self.nodes:
            pid = _read_pid(self.node_dir(n) / "sshd.pid")
            try:
                if pid and os.stat(f"/proc/{pid}/ns/net").st_ino == want:
                    return ["nsenter", f"--net=/proc/{pid}/ns/net"]
            except OSError:
                continue
        raise HarnessError("not in the cluster's network namespace, and no running node to enter it")

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

    def _write_tool(self, node: str, tool: str, what: str, lines: list[str]) -> Path:
        self._check_tool(tool)
        d = self.node_dir(node)
        for stream in ("stdout", "stderr"):   # drop data a previous fake of this tool left
            f = d / "data" / f"{tool}.{stream}"
            if not any(str(f) in line for line in lines):
                f.unlink(missing_ok=True)
        script = "#!/bin/sh\n# nodecheck harness fake %s on node%d: %s\n%s\n" % (
            tool, self._index(node), what.replace("\n", " "), "\n".join(lines))
        dest = d / "bin" / tool
        _atomic_write(dest, script.encode(), 0o755)
        return dest


# `scontrol show job|node` lines whose value is the rest of the line (it may hold spaces and "k=v")
_WHOLE_LINE_KEYS = ("Reason", "OS", "Comment", "AdminComment", "SystemComment", "Extra", "Command",
                    "WorkDir", "StdErr", "StdIn", "StdOut")
_KEY_START = re.compile(r"\s+(?=[A-Za-z][A-Za-z0-9_:/]*=)")


def _terminate(pids: Sequence[int]) -> None:
    """SIGTERM, then SIGKILL whatever still runs after 1 s."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.01)


def _scontrol_record(text: str) -> dict[str, str]:
    """The first record of `scontrol show job|node` (multi-line form) as {key: value}."""
    record: dict[str, str] = {}
    for line in text.split("\n\n")[0].splitlines():
        line = line.strip()
        if not line:
            continue
        key = line.split("=", 1)[0]
        fields = [line] if key in _WHOLE_LINE_KEYS else _KEY_START.split(line)
        for field in fields:
            k, sep, v = field.partition("=")
            if sep:
                record[k] = v.strip() if k in _WHOLE_LINE_KEYS else v
    return record


def _under_hidden_dir(path: str) -> bool:
    """Is path (or what it resolves to) under a directory each simulated node replaces with its own?"""
    return any(p == d or p.startswith(d + "/") for p in (path, os.path.realpath(path))
               for d in ("/root", "/usr/local/sbin"))


def _natural(name: str) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def _atomic_write(dest: Path, raw: bytes, mode: int, tmp_dir: Path | None = None) -> None:
    """Write-then-rename, so a node running the tool never sees half a file. tmp_dir: where the
    temp file lives (same filesystem), for directories that must never show a stray name."""
    fd, tmp = tempfile.mkstemp(dir=tmp_dir or dest.parent, prefix=f".{dest.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        os.chmod(tmp, mode)
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _argv_has(proc: Path, wanted: set[bytes]) -> bool:
    try:
        return bool(wanted.intersection((proc / "cmdline").read_bytes().split(b"\0")))
    except OSError:
        return False


def _load_fake(name: str):
    """A module of tests/fakes, loaded by path (the harness also runs outside the test package): the
    trainer (its scenario schema and clock), freeze."""
    import importlib.util

    mod = sys.modules.get(f"nodecheck_fake_{name}")
    if mod is None:
        spec = importlib.util.spec_from_file_location(f"nodecheck_fake_{name}", HERE.parent / "fakes" / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[f"nodecheck_fake_{name}"] = mod
        spec.loader.exec_module(mod)
    return mod


def _load_trainer():
    return _load_fake("trainer")


def _read_pids(path: Path) -> list[int]:
    try:
        return [int(x) for x in path.read_text().split()]
    except (OSError, ValueError):
        return []


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _alive(pid: int | None) -> bool:
    """pid exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, TypeError):
        return False
    return pid is not None and stat.rsplit(")", 1)[1].split()[0] != "Z"


def _is_rdma_driver(pid: int | None) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, TypeError):
        return False
    return _alive(pid) and any(a.endswith(b"/rdma_driver.py") for a in argv)


def _stop_driver(pid_file: Path) -> None:
    """Stop the driver named in pid_file: without its pid file it exits by itself; TERM, then KILL."""
    pid = _read_pid(pid_file)
    pid_file.unlink(missing_ok=True)
    if not _is_rdma_driver(pid):
        return
    assert pid is not None
    try:
        os.kill(pid, signal.SIGTERM)
        for _ in range(100):
            if not _alive(pid):
                return
            time.sleep(0.02)
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


__all__ = ["SimCluster", "HarnessError", "SCRIPT", "SLURM_SCRIPT", "ROCE_BEHAVIOURS", "FABRIC_DEVICES"]
