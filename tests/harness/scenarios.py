"""Named fault layouts for the simulated cluster: which fake each node gets.

A layout maps a node name to one action or a list of actions, for example:
    Replay(tool, data_file, exit_code=0, stderr_file=None)   the tool prints a recorded output
    Exit(tool, code, stderr_text="")                         the tool fails
    Hang(tool)                                               the tool never answers
    Missing(tool)                                            the tool is not installed (no fake)
    Unreachable()                                            the node's sshd is stopped
    RekeyHost()                                              the node presents a new host key
and the others below (Nvml, GpuReset, Script, replays by arguments and in sequence, Sysfs, RocePort; under
the key "*", the cluster-wide Fabric and Nccl). Every action is an Action: it installs itself and
describes itself (the listing `apply` prints and demo.sh shows). Relative data files are under
tests/data/. A scenario in SCENARIOS is a layout, or a function from the node list to a layout
(for any cluster size).

    apply(cluster, DEMO)                          # reset the cluster, then install the layout
    python tests/harness/scenarios.py --state-dir S apply demo      # same, from a shell
    python tests/harness/scenarios.py list
"""

from __future__ import annotations

import argparse
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

if not __package__:  # run as a script: tests/ on sys.path, so `harness` is a package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness.cluster import SimCluster
from harness.sim.node_state import NVIDIA_DAEMONS, SERVICES

DATA = Path(__file__).resolve().parents[1] / "data"

IBSTAT_HEALTHY = "ibstat/gpud-h100-ndr-ib-mixed-cx6dx-ethernet-down-disabled.txt"
IBSTAT_PORT_DOWN = "ibstat/derived-h100-ndr-mlx5_3-down-polling.txt"
IBSTAT_LOW_RATE = "ibstat/derived-h100-ndr-mlx5_5-rate-200.txt"


class Action(ABC):
    """One thing a scenario does to a node (under the key "*": to the whole cluster). Each kind says
    itself what it does (describe) and how (install), so a kind added later cannot fall through a
    catch-all and be listed, or installed, as something else."""

    @abstractmethod
    def describe(self) -> str:
        """What the node gets, in the words of the scenario listing (demo.sh prints it)."""

    @abstractmethod
    def install(self, cluster: SimCluster, node: str) -> None:
        """Do it on the cluster (node is "*" for the cluster-wide kinds)."""

    def recordings(self) -> tuple[str, ...]:
        """The data files it replays (relative to tests/data/, or absolute): apply() checks that
        they exist before it touches the cluster."""
        return ()


@dataclass(frozen=True)
class Replay(Action):
    tool: str
    data_file: str
    exit_code: int = 0
    stderr_file: str | None = None

    def describe(self) -> str:
        return f"{self.tool}: replay {Path(self.data_file).name}"

    def install(self, cluster: SimCluster, node: str) -> None:
        cluster.fake_replay(
            node,
            self.tool,
            _data(self.data_file),
            self.exit_code,
            _data(self.stderr_file) if self.stderr_file else None,
        )

    def recordings(self) -> tuple[str, ...]:
        return (self.data_file,) + ((self.stderr_file,) if self.stderr_file else ())


@dataclass(frozen=True)
class Exit(Action):
    tool: str
    code: int
    stderr_text: str = ""

    def describe(self) -> str:
        return f"{self.tool}: exits {self.code}"

    def install(self, cluster: SimCluster, node: str) -> None:
        cluster.fake_exit(node, self.tool, self.code, self.stderr_text)


@dataclass(frozen=True)
class Hang(Action):
    tool: str

    def describe(self) -> str:
        return f"{self.tool}: hangs"

    def install(self, cluster: SimCluster, node: str) -> None:
        cluster.fake_hang(node, self.tool)


@dataclass(frozen=True)
class Missing(Action):
    tool: str

    def describe(self) -> str:
        return f"{self.tool}: not installed"

    def install(self, cluster: SimCluster, node: str) -> None:
        cluster.remove_tool(node, self.tool)


@dataclass(frozen=True)
class Unreachable(Action):
    def describe(self) -> str:
        return "sshd stopped (unreachable)"

    def install(self, cluster: SimCluster, node: str) -> None:
        cluster.stop(node)


@dataclass(frozen=True)
class RekeyHost(Action):
    def describe(self) -> str:
        return "new host key (known_hosts mismatch)"

    def install(self, cluster: SimCluster, node: str) -> None:
        cluster.rekey(node)


@dataclass(frozen=True)
class Nvml(Action):
    """nvidia-ml-py is installed on the node (the fake pynvml) with this GPU state file."""

    state_file: str

    def describe(self) -> str:
        return f"pynvml: {Path(self.state_file).name}"

    def install(self, cluster: SimCluster, node: str) -> None:
        cluster.fake_nvml(node, self.state_file)


@dataclass(frozen=True)
class GpuLibrary(Action):
    """CuPy on the node (the fake cupy over the node's fake NVML GPUs), with the GPU benchmark faults:
    `speed` {gpu index: factor} (0.85: 15% slower), `bitflip` {gpu index: "persistent"|"transient"}."""

    speed: tuple[tuple[int, float], ...] = ()
    bitflip: tuple[tuple[int, str], ...] = ()

    def describe(self) -> str:
        faults = [f"GPU{g} speed x{f:g}" for g, f in self.speed] + [f"GPU{g} {k} bit flip" for g, k in self.bitflip]
        return "cupy: " + (", ".join(faults) or "healthy")

    def install(self, cluster: SimCluster, node: str) -> None:
        state = {
            "speed": {str(g): f for g, f in self.speed},
            "bitflip": {str(g): k for g, k in self.bitflip},
        }
        cluster.fake_gpu_library(node, state if self.speed or self.bitflip else None)


@dataclass(frozen=True)
class Script(Action):
    """The tool is this /bin/sh script body (fakes that need logic, e.g. a readlink that
    resolves one library name and hands everything else to the real one)."""

    tool: str
    body: str
    what: str = "script"

    def describe(self) -> str:
        return f"{self.tool}: {self.what}"

    def install(self, cluster: SimCluster, node: str) -> None:
        cluster.fake_script(node, self.tool, self.body)


@dataclass(frozen=True)
class ReplayByArgs(Action):
    """The tool prints the data file of the first (shell pattern, file) case its arguments match."""

    tool: str
    cases: tuple[tuple[str, str], ...]
    what: str = ""  # what the listing says instead of the number of cases

    def describe(self) -> str:
        return f"{self.tool}: {self.what or f'replay by arguments ({_cases(len(self.cases))})'}"

    def install(self, cluster: SimCluster, node: str) -> None:
        cluster.fake_replay_by_args(node, self.tool, [(pattern, _data(f)) for pattern, f in self.cases])

    def recordings(self) -> tuple[str, ...]:
        return tuple(f for _, f in self.cases)


@dataclass(frozen=True)
class ReplaySequence(Action):
    """The k-th call of the tool prints the k-th file (then the last): counters before and after."""

    tool: str
    data_files: tuple[str, ...]

    def describe(self) -> str:
        return f"{self.tool}: replay a sequence of {len(self.data_files)} files"

    def install(self, cluster: SimCluster, node: str) -> None:
        cluster.fake_replay_sequence(node, self.tool, [_data(f) for f in self.data_files])

    def recordings(self) -> tuple[str, ...]:
        return tuple(self.data_files)


@dataclass(frozen=True)
class SequenceByArgs(Action):
    """Per argument pattern its own sequence of files (perfquery per port, before and after)."""

    tool: str
    cases: tuple[tuple[str, tuple[str, ...]], ...]

    def describe(self) -> str:
        changing = [pattern.strip("* ") for pattern, files in self.cases if len(set(files)) > 1]
        what = f"{self.tool}: replay by arguments ({_cases(len(self.cases))})"
        return what + (f"; {', '.join(changing)}: output changes between calls" if changing else "")

    def install(self, cluster: SimCluster, node: str) -> None:
        cluster.fake_sequence_by_args(
            node, self.tool, [(pattern, [_data(f) for f in files]) for pattern, files in self.cases]
        )

    def recordings(self) -> tuple[str, ...]:
        return tuple(f for _, files in self.cases for f in files)


@dataclass(frozen=True)
class Sysfs(Action):
    """Files under the node's /sys/class/infiniband (relative paths -> content)."""

    files: tuple[tuple[str, str], ...]

    def describe(self) -> str:
        ports = {
            "/".join(PurePosixPath(rel).parts[:3])
            for rel, _ in self.files
            if len(PurePosixPath(rel).parts) > 3 and PurePosixPath(rel).parts[1] == "ports"
        }
        what = f"{len(ports)} RDMA ports, " if ports else ""
        return f"/sys/class/infiniband: {what}{len(self.files)} files"

    def install(self, cluster: SimCluster, node: str) -> None:
        cluster.fake_sysfs(node, dict(self.files))


@dataclass(frozen=True)
class RocePort(Action):
    """A real netdev (veth) backing RDMA port ca/1, kept in the node's sysfs by the simulated driver."""

    behaviour: str = "stable"  # or "networkmanager": the GID moves after a flap
    ca: str = "mlx5_0"

    def describe(self) -> str:
        return f"RoCE port {self.ca}/1 on a veth ({self.behaviour})"

    def install(self, cluster: SimCluster, node: str) -> None:
        cluster.roce_port(node, self.behaviour, self.ca)


@dataclass(frozen=True)
class HangMount(Action):
    """/mnt/shared stops answering (the node's FUSE connection is no longer served)."""

    mode: str = "pending"  # or "held": a killed caller stays in State D until released

    def describe(self) -> str:
        return f"/mnt/shared hangs ({self.mode})"

    def install(self, cluster: SimCluster, node: str) -> None:
        cluster.hang_mount(node, self.mode)


@dataclass(frozen=True)
class FillShm(Action):
    """/dev/shm filled by a leftover file up to `leave_bytes` free."""

    leave_bytes: int = 0

    def describe(self) -> str:
        return "/dev/shm full" if not self.leave_bytes else f"/dev/shm filled to {self.leave_bytes} B free"

    def install(self, cluster: SimCluster, node: str) -> None:
        cluster.fill_shm(node, self.leave_bytes)


@dataclass(frozen=True)
class FakeProc(Action):
    """A recorded file bound over /proc/<relpath> in the node (meminfo, cmdline, loadavg, ...)."""

    relpath: str
    data_file: str

    def describe(self) -> str:
        return f"/proc/{self.relpath}: {Path(self.data_file).name}"

    def install(self, cluster: SimCluster, node: str) -> None:
        cluster.fake_proc(node, self.relpath, _data(self.data_file).read_bytes())

    def recordings(self) -> tuple[str, ...]:
        return (self.data_file,)


@dataclass(frozen=True)
class Edac(Action):
    """Files of the node's EDAC tree changed (content) or removed (None), relative to
    /sys/devices/system/edac."""

    files: tuple[tuple[str, str | None], ...]

    def describe(self) -> str:
        gone = [rel for rel, text in self.files if text is None]
        changed = [f"{rel}={text.strip()}" for rel, text in self.files if text is not None]
        return "EDAC: " + "; ".join([*(f"{g} removed" for g in gone), *changed])

    def install(self, cluster: SimCluster, node: str) -> None:
        cluster.fake_edac(node, dict(self.files))


@dataclass(frozen=True)
class Services(Action):
    """Processes named like the node's daemons (no systemd); those in `stopped` are not running."""

    stopped: tuple[str, ...] = ()
    # the node runs the real slurmd of slurm_cluster.sh: no second, fake one
    real_slurmd: bool = False

    def describe(self) -> str:
        running = [n for n in SERVICES if n not in self.stopped and not (self.real_slurmd and n == "slurmd")]
        return f"services: {', '.join(running)}" + (f"; {', '.join(self.stopped)} stopped" if self.stopped else "")

    def install(self, cluster: SimCluster, node: str) -> None:
        cluster.start_services(node, names=[n for n in SERVICES if not (self.real_slurmd and n == "slurmd")])
        for name in self.stopped:
            cluster.stop_service(node, name)


@dataclass(frozen=True)
class MemlockLimit(Action):
    """The node's slurmd (and so every job on it) runs with memlock limited to `nbytes`."""

    nbytes: int

    def describe(self) -> str:
        return f"slurmd memlock {self.nbytes // 1024} KiB"

    def install(self, cluster: SimCluster, node: str) -> None:
        cluster.limit_memlock(node, self.nbytes)


@dataclass(frozen=True)
class ClockOffset(Action):
    """The node's `date` runs `seconds` off the real time."""

    seconds: float

    def describe(self) -> str:
        return f"date: clock {self.seconds:+g} s"

    def install(self, cluster: SimCluster, node: str) -> None:
        cluster.clock_offset(node, self.seconds)


@dataclass(frozen=True)
class NodeDir(Action):
    """A directory in the node's own /root."""

    path: str

    def describe(self) -> str:
        return f"directory {self.path}"

    def install(self, cluster: SimCluster, node: str) -> None:
        cluster.make_dir(node, self.path)


def _cases(n: int) -> str:
    return f"{n} case" if n == 1 else f"{n} cases"


def _overrides(nodes: tuple[tuple[str, tuple[tuple[str, object], ...]], ...]) -> str:
    """ "" or " (node9: gbps=150.0; ...)": the nodes a cluster-wide model treats differently."""
    parts = [f"{n}: " + ", ".join(f"{k}={v}" for k, v in kv) for n, kv in nodes]
    return f" ({'; '.join(parts)})" if parts else ""


@dataclass(frozen=True)
class Fabric(Action):
    """Cluster-wide (give it under the key "*"): the fake ib_write_bw on every node and the
    bandwidth model of SimCluster.fabric()."""

    default_gbps: float = 392.0
    nodes: tuple[tuple[str, tuple[tuple[str, object], ...]], ...] = ()
    links: tuple[tuple[str, str, float], ...] = ()
    test_s: float = 0.2
    devices: tuple[str, ...] | None = None
    link_type: str = "IB"

    def describe(self) -> str:
        links = "".join(f", link {a}-{b}: {g:g} Gb/s" for a, b, g in self.links)
        return f"fake ib_write_bw on every node, {self.default_gbps:g} Gb/s{_overrides(self.nodes)}{links}"

    def install(self, cluster: SimCluster, node: str) -> None:
        cluster.fabric(
            self.default_gbps,
            {n: dict(v) for n, v in self.nodes} or None,
            [{"a": x, "b": y, "gbps": g} for x, y, g in self.links] or None,
            self.test_s,
            list(self.devices) if self.devices is not None else None,
            self.link_type,
        )


@dataclass(frozen=True)
class Nccl(Action):
    """Cluster-wide (give it under the key "*"): the fake nccl-tests and launchers on every node and
    the bandwidth model and per-node faults of SimCluster.nccl(), e.g. nodes=(("node3",
    (("net_busbw_gbs", 150.0),)), ("node5", (("hang", "init"),)))."""

    net_busbw_gbs: float = 370.0
    nvlink_busbw_gbs: float = 480.0
    nodes: tuple[tuple[str, tuple[tuple[str, object], ...]], ...] = ()
    gpus_per_node: int = 8
    gpu_model: str = "NVIDIA H100 80GB HBM3"
    nccl_version: str = "2.29.2+cuda12.4"
    tests_version: str = "2.17.9"
    test_s: float = 0.3

    def describe(self) -> str:
        return (
            f"fake nccl-tests, mpirun and srun on every node, busbw {self.net_busbw_gbs:g} GB/s across "
            f"nodes{_overrides(self.nodes)}"
        )

    def install(self, cluster: SimCluster, node: str) -> None:
        cluster.nccl(
            self.net_busbw_gbs,
            self.nvlink_busbw_gbs,
            {n: dict(v) for n, v in self.nodes} or None,
            self.gpus_per_node,
            self.gpu_model,
            self.nccl_version,
            self.tests_version,
            self.test_s,
        )


Layout = Mapping[str, Action | list]

# ib.ports alone (tests/data/playbooks/ib-only.yml: 8 ports, 400 Gb/s, ibstat timeout 5 s).
IB_DEMO: dict[str, list[Action]] = {
    "node1": [Replay("ibstat", IBSTAT_HEALTHY)],
    "node2": [Replay("ibstat", IBSTAT_HEALTHY)],
    "node3": [Replay("ibstat", IBSTAT_PORT_DOWN)],  # one IB port down (Polling)
    "node4": [Replay("ibstat", IBSTAT_HEALTHY)],
    "node5": [Replay("ibstat", IBSTAT_LOW_RATE)],  # one link at 200 Gb/s
    "node6": [Hang("ibstat")],  # ibstat hangs: timeout
    "node7": [Missing("ibstat")],  # ibstat not installed
    "node8": [Unreachable()],  # sshd down
}
IB_DEMO_EXPECTED = {  # what nodecheck should say about each IB_DEMO node
    "node1": "pass",
    "node2": "pass",
    "node4": "pass",
    "node3": "fail: mlx5_3 port down",
    "node5": "fail: mlx5_5 rate 200 < 400 Gb/s",
    "node6": "timeout",
    "node7": "error: ibstat not found (exit 127)",
    "node8": "unreachable",
}


def _tiled(layout: Mapping[str, list]) -> Callable[[list[str]], dict]:
    """Repeat an 8-node layout over any number of nodes (node9 gets node1's setup, ...)."""
    base = [layout[k] for k in sorted(layout, key=lambda k: int(k[4:]))]
    return lambda nodes: {n: base[i % len(base)] for i, n in enumerate(nodes)}


# ---- GPU health and version/image drift (issue 3) --------------------------------------------
NVML_STATES = Path(__file__).resolve().parents[1] / "fakes" / "nvml_states"
NVML_HEALTHY = str(NVML_STATES / "h100x8-healthy.json")
NVML_REMAP_PENDING = str(NVML_STATES / "h100x8-row-remap-pending.json")
NVML_LEFTOVER = str(NVML_STATES / "h100x8-leftover-process.json")
DMESG_CLEAN = "scenarios/derived-dmesg-T-nvrm-gpu-at-no-xid.txt"
EMPTY = "scenarios/empty.txt"
NVIDIA_ONLY_LSPCI = "-D -nn -d 10de:"  # how nvlink.fabric's probe asks for NVIDIA's devices
DMESG_FALLEN_OFF_BUS = "dmesg-xid/nvsentinel-155-fallen-off-bus-multiline-no-xid-570.txt"
DMESG_OOM = "dmesg-oom/docker-for-linux-1001-syslog-prefixed-global-oom-killed-process-truncated.txt"
OFED_INFO = "scenarios/ofed_info-s-mlnx-23.07.txt"
IMAGE = "b10s/test:app4"  # the image of the real `docker inspect` recording
DOCKER_INSPECT = "scenarios/docker-image-inspect-b10s-test-app4.txt"
DOCKER_INSPECT_STALE = "scenarios/derived-docker-image-inspect-b10s-test-app4-stale.txt"
NCCL_GOOD, NCCL_STALE = "2.29.2", "2.21.5"


def nccl_readlink(version: str) -> Script:
    """readlink -f resolves the cached libnccl.so.2 to this versioned file, as the deb's symlink
    does; any other path goes to the real readlink."""
    return Script(
        "readlink",
        'case "$*" in\n'
        f"  *libnccl.so.2) echo /lib/x86_64-linux-gnu/libnccl.so.{version} ;;\n"
        '  *) exec /usr/bin/readlink "$@" ;;\nesac',
        f"libnccl.so.2 -> {version}",
    )


# ---- NVIDIA's driver stack (issue 20) ----------------------------------------------------------------
# The kernel module's /proc file (a real open-module file, its version set to the simulated fleet's),
# and the loader cache: the NCCL line above plus the driver's libraries in the node's own library
# directory (node_state.NVIDIA_LIB_DIR), where NvidiaDriver lays them out.
PROC_DRIVER = {
    "550.90.07": "scenarios/derived-proc-driver-nvidia-version-open-550.90.07.txt",
    "580.159.04": "scenarios/derived-proc-driver-nvidia-version-open-580.159.04.txt",
}
LDCONFIG_DRIVER = "scenarios/constructed-ldconfig-p-nccl-and-driver-sim.txt"
# file sizes of driver 550.90.07's libcuda and libnvidia-ml (tests/data/ls-l-driver-libs/gpud-415-*);
# the other two are not in any listing found, so plausible sizes (any non-zero size reads the same)
DRIVER_LIBS = {
    "libcuda": ("libcuda.so.1", 28581024),
    "libnvidia-ml": ("libnvidia-ml.so.1", 2078360),
    "libnvidia-ptxjitcompiler": ("libnvidia-ptxjitcompiler.so.1", 25000000),
    "libnvidia-nvvm": ("libnvidia-nvvm.so.4", 50000000),
}


@dataclass(frozen=True)
class NvidiaDriver(Action):
    """The NVIDIA kernel module of `version` loaded (/proc/driver/nvidia/version) and its user-space
    libraries as the driver's installer lays them out (libX.so.1 -> libX.so.VERSION); those in
    `empty` are 0-byte files (an upgrade that failed half-way, Soperator #2684)."""

    version: str = "550.90.07"
    empty: tuple[str, ...] = ()

    def describe(self) -> str:
        return f"NVIDIA driver {self.version}" + (f"; {', '.join(self.empty)} empty" if self.empty else "")

    def install(self, cluster: SimCluster, node: str) -> None:
        libs: dict[str, int | str] = {}
        for base, (soname, size) in DRIVER_LIBS.items():
            real = f"{base}.so.{self.version}"
            libs[real] = 0 if base in self.empty else size
            libs[soname] = real
        cluster.fake_nvidia_driver(node, _data(PROC_DRIVER[self.version]).read_bytes(), libs)

    def recordings(self) -> tuple[str, ...]:
        return (PROC_DRIVER[self.version],)


@dataclass(frozen=True)
class NvidiaDaemons(Action):
    """Root processes named like NVIDIA's daemons in the node (no systemd): nv-fabricmanager, ..."""

    names: tuple[str, ...]

    def describe(self) -> str:
        return f"daemons: {', '.join(self.names)}"

    def install(self, cluster: SimCluster, node: str) -> None:
        unknown = [n for n in self.names if n not in NVIDIA_DAEMONS]
        if unknown:
            raise ValueError(f"unknown NVIDIA daemon(s) {unknown} (known: {', '.join(NVIDIA_DAEMONS)})")
        cluster.start_services(node, names=list(self.names))


def gpu_node(
    nvml: str = NVML_HEALTHY,
    dmesg: str = DMESG_CLEAN,
    nccl: str = NCCL_GOOD,
    docker: str = DOCKER_INSPECT,
    driver: NvidiaDriver | None = None,
) -> list[Action]:
    """A healthy 8x H100 node: NVML, kernel log, NCCL, OFED, HCAs, the job's image and the NVIDIA
    driver's kernel module and libraries (`driver`: another driver, or one with a fault)."""
    return [
        Nvml(nvml),
        Replay("dmesg", dmesg),
        Replay("ldconfig", LDCONFIG_DRIVER),
        driver or NvidiaDriver(),
        nccl_readlink(nccl),
        Replay("ofed_info", OFED_INFO),
        Replay("ibstat", IBSTAT_HEALTHY),
        Replay("docker", docker),
    ]


# The InfiniBand ports of IBSTAT_HEALTHY (mlx5_1/2/7/8 are its Ethernet ports), as the node's sysfs
# shows them, and their counters: perfquery -x replays a real 2-port read (port 1 is used).
IB_CAS = ("mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11")
PERFQUERY_X = "perfquery/infiniband_exporter-extended-2ports-capmask2.txt"
PERFQUERY_X_LINK_DOWNED = "scenarios/derived-perfquery-x-2ports-linkdowned-plus1-symbol-42.txt"


def ib_counters(link_went_down_on: str | None = None) -> list[Action]:
    """sysfs ports of the healthy ibstat's IB HCAs, and perfquery per port; on `link_went_down_on`
    the second read shows LinkDownedCounter +1 and SymbolErrorCounter +42 (the link flapped)."""
    files = tuple(
        (f"{ca}/ports/1/{name}", value)
        for ca in IB_CAS
        for name, value in (
            ("link_layer", "InfiniBand\n"),
            ("state", "4: ACTIVE\n"),
            ("phys_state", "5: LinkUp\n"),
            ("rate", "400 Gb/sec (4X NDR)\n"),
        )
    )
    cases = ((f"*-C {link_went_down_on} *", (PERFQUERY_X, PERFQUERY_X_LINK_DOWNED)),) if link_went_down_on else ()
    return [Sysfs(files), SequenceByArgs("perfquery", cases + (("*", (PERFQUERY_X,)),))]


GPU_FLEET: dict[str, list[Action]] = {
    "node1": gpu_node(),
    "node2": gpu_node(nccl=NCCL_STALE),  # a different NCCL (stale image's host)
    "node3": gpu_node(docker=DOCKER_INSPECT_STALE),  # a different image digest
    "node4": gpu_node(nvml=NVML_REMAP_PENDING),  # GPU3: row remap pending
    "node5": gpu_node(nvml=NVML_LEFTOVER),  # GPU5: leftover python3, 40 GiB
    "node6": gpu_node(dmesg=DMESG_FALLEN_OFF_BUS),  # Xid 79: GPU fallen off the bus
    "node7": gpu_node(dmesg=DMESG_OOM),  # OOM kills in the log: warn
    "node8": gpu_node(),
}

# nvidia-smi for a node where NVML cannot answer (no nvidia-ml-py): the GPU probe falls back to it
NVIDIA_SMI_FALLBACK = ReplayByArgs(
    "nvidia-smi",
    (
        ("--query-gpu=*", "scenarios/constructed-nvidia-smi-query-gpu-h100pcie-2gpu.csv"),
        ("--query-compute-apps=*", EMPTY),
        ("-q", "nvidia-smi-q/gpud-pr80-remapped-rows-uncorrectable-4-pending-yes.txt"),
        ("nvlink -s", "nvidia-smi-nvlink/hpe-dl380a-h100pcie-nvlink-s-inactive-links.txt"),
    ),
)


def _with(actions: list[Action], *replace: Action) -> list[Action]:
    """A node's actions with those of the same tool swapped for `replace`."""
    tools = {getattr(a, "tool", None) for a in replace}
    return [a for a in actions if getattr(a, "tool", None) not in tools] + list(replace)


# ---- the node itself (issue 19) -------------------------------------------------------------------
# Recordings of the tools the node checks run, as a DGX-class H100 node shows them (2x Xeon 8480+,
# 224 CPUs; the NVIDIA and RDMA modules loaded; chrony synchronised; ACS off on the root port above
# the GPU); and their faulty counterparts (derived from the same files).
LSCPU_NODE = "lscpu/hf-blog-sapphire-rapids-8480plus-2s-56c-smt-224cpu.txt"
LSMOD_NODE = "lsmod/gpud-pr39-h100-fm535-lsmod-grep-peermem.txt"
LSMOD_NO_PEERMEM = "lsmod/derived-gpud-pr39-h100-no-nvidia-peermem.txt"
LSPCI_NODE = "lspci/cmlgpu-xeon-e5v4-tesla-p100-root-port-acs-disabled.txt"
LSPCI_ACS_ENABLED = "lspci/derived-cmlgpu-tesla-p100-acs-enabled-on-root-port-00-02-0.txt"
CHRONYC_NODE = "chronyc-tracking/pingcap-docs-normal-22us-slow.txt"
PS_NODE = "ps/devbox-procps-4.0.2-probe-columns-pid-namespace.txt"
PS_D_STATE = "ps/derived-azure-local-csi-153-h100-lvm-D-probe-columns.txt"
MEMINFO_DIMM_MISSING = "meminfo/derived-sichek-2tib-gpu-node-one-dimm-missing.txt"
# a node prepared by the site (its own marker directory); the command check of NODE_CHECKS tests for it
SITE_MARKER = "/root/.site-ready"
MEMLOCK_64K = 65536


def node_os(
    lspci: str = LSPCI_NODE,
    lsmod: str = LSMOD_NODE,
    ps: str = PS_NODE,
    stopped: tuple[str, ...] = (),
    real_slurmd: bool = False,
) -> list[Action]:
    """What the node checks read beyond the mounts, /proc/meminfo and EDAC every node has from its start:
    lscpu, lsmod, lspci, chronyc and ps replaying recordings, the daemons running (slurmd with memlock
    unlimited, unless `real_slurmd`: Slurm's own runs there) and the site's marker directory in /root."""
    return [
        Replay("lscpu", LSCPU_NODE),
        Replay("lsmod", lsmod),
        # nvlink.fabric's NVIDIA-only listing: no NVSwitch on the bus (the NVLink scenarios give theirs)
        ReplayByArgs("lspci", ((NVIDIA_ONLY_LSPCI, EMPTY), ("*", lspci)), f"replay {Path(lspci).name}, no NVSwitch"),
        Replay("chronyc", CHRONYC_NODE),
        Replay("ps", ps),
        Services(stopped, real_slurmd),
        NodeDir(SITE_MARKER),
    ]


# One fault per node, each named by exactly one of the node checks (tests/integration/test_node_checks.py,
# tests/data/playbooks/node-checks.yml). node2's hung storage also leaves a D-state process in ps.
NODE_CHECKS: dict[str, list[Action]] = {
    "node1": node_os(),  # healthy
    "node2": node_os(ps=PS_D_STATE) + [HangMount()],  # /mnt/shared hung; processes stuck in D
    "node3": node_os() + [FillShm()],  # /dev/shm full
    "node4": node_os(stopped=("nvidia-persistenced",)),  # a service stopped
    "node5": node_os(lsmod=LSMOD_NO_PEERMEM),  # nvidia_peermem not loaded
    "node6": node_os() + [ClockOffset(3.0)],  # the clock 3 s ahead
    "node7": node_os() + [MemlockLimit(MEMLOCK_64K)],  # jobs get memlock 64 KiB
    "node8": node_os(lspci=LSPCI_ACS_ENABLED),  # ACS enabled on the GPU's root port
    "node9": [a for a in node_os() if not isinstance(a, NodeDir)],  # not marked ready: the custom check fails
    "node10": node_os() + [FakeProc("meminfo", MEMINFO_DIMM_MISSING), Edac((("mc/mc3/dimm3", None),))],  # a DIMM
}

# ---- NVIDIA's diagnostics and the NVLink fabric (issue 20) ----------------------------------------
LSPCI_HGX_H100 = "lspci-nvswitch/nvidia-fm-guide-hgx-h100-4-nvswitches.txt"
DCGM_R1_PASS = "dcgmi-diag/derived-glimmer-v4.5.2-gb10-r1-pass.txt"
DCGM_R2_PASS = "dcgmi-diag/derived-glimmer-v4.5.2-gb10-r2-pass.txt"
DCGM_R2_MEMORY_FAIL = "dcgmi-diag/derived-glimmer-v4.5.2-gb10-r2-memory-fail.txt"
DCGM_HOSTENGINE_DOWN = "dcgmi-diag/dcgm-exporter-193-hostengine-unreachable.txt"
COMPUTE_APPS_ONE = "scenarios/constructed-nvidia-smi-compute-apps-one-process.csv"
NVML_FABRIC_IN_PROGRESS = str(NVML_STATES / "h100x8-fabric-in-progress.json")
NVML_CRC_RISING = str(NVML_STATES / "h100x8-nvlink-crc-rising.json")
NVML_GB200_RACK_A = str(NVML_STATES / "gb200x4-rack-a.json")
NVML_GB200_OTHER_CLIQUE = str(NVML_STATES / "gb200x4-other-clique.json")


def dcgm(level2: str = DCGM_R2_PASS, *, busy: bool = False) -> list[Action]:
    """dcgmi answering levels 1 and 2 (or every diag with `level2`'s text, for an error such as the
    host engine down), and what the idle guard asks: no Slurm job here (squeue lists none) and no GPU
    process (nvidia-smi's compute-apps query empty, or one process where `busy`)."""
    cases = (
        (("diag -r 1 -j", DCGM_R1_PASS), ("diag -r 2 -j", level2))
        if level2 != DCGM_HOSTENGINE_DOWN
        else (("diag *", level2),)
    )
    return [
        ReplayByArgs("dcgmi", cases),
        Script("squeue", "exit 0", "no job allocated here"),
        ReplayByArgs("nvidia-smi", (("--query-compute-apps=*", COMPUTE_APPS_ONE if busy else EMPTY),)),
    ]


# ---- remediation: a GPU reset, a reboot through Slurm (issue 33) ------------------------------------
@dataclass(frozen=True)
class GpuReset(Action):
    """nvidia-smi as the remedy and its idle guard use it, over the node's fake NVML state (after an Nvml
    action): `--query-compute-apps=...` lists no GPU process (one where `busy`); `-r -i N` (or
    `--gpu-reset -i N`) resets GPU N: its pending row remap and page retirement are applied in the
    node's nvml_state.json, and it prints what the real nvidia-smi prints (tests/fakes/nvidia_smi.py).
    `busy`: the reset is refused as the real one refuses a GPU in use (exit 255). Not `reset_helps`: the
    reset prints success but the remap stays pending. `reboot_clears`: a reboot through Slurm
    (slurm_up(reboot_program=True)) applies every pending remap, as a real reboot does."""

    busy: bool = False
    reset_helps: bool = True
    reboot_clears: bool = True

    def describe(self) -> str:
        what = ["GPU process running" if self.busy else "no GPU process"]
        what.append("reset applies pending remaps" if self.reset_helps else "reset leaves the remap pending")
        if self.reboot_clears:
            what.append("a reboot applies them")
        return "nvidia-smi: " + ", ".join(what)

    def install(self, cluster: SimCluster, node: str) -> None:
        apps = _data(COMPUTE_APPS_ONE if self.busy else EMPTY)
        cluster.fake_nvidia_smi(node, apps, busy=self.busy, reset_helps=self.reset_helps)
        # the hook runs inside the node: its /usr/local/sbin is the node's fakes
        cluster.on_reboot(node, "exec /usr/local/sbin/nvidia-smi --reboot" if self.reboot_clears else None)

    def recordings(self) -> tuple[str, ...]:
        return (COMPUTE_APPS_ONE if self.busy else EMPTY,)


def remedy_gpu_node(nvml: str = NVML_REMAP_PENDING, **reset) -> list[Action]:
    """A GPU node the remedy can work on: gpu_node() with `nvml` (default GPU3's row remap pending), no
    Slurm job (squeue lists none) and nvidia-smi resetting GPUs (GpuReset(**reset))."""
    return gpu_node(nvml=nvml) + [Script("squeue", "exit 0", "no job allocated here"), GpuReset(**reset)]


# issue 33: GPU3's row remap pending everywhere but node1; what a reset does differs per node
GPU_REMEDY: dict[str, list[Action]] = {
    "node1": remedy_gpu_node(NVML_HEALTHY),  # healthy: nothing to do
    "node2": remedy_gpu_node(),  # a reset of GPU3 clears it
    "node3": remedy_gpu_node(reset_helps=False),  # the reset does not help; a reboot does
    "node4": remedy_gpu_node(busy=True),  # a GPU process runs: the guard refuses, a reset would fail
}


def hgx_node(nvml: str = NVML_HEALTHY, *, fabric_manager: bool = True, **gpu) -> list[Action]:
    """An HGX H100 node as the NVLink checks read it: its 4 NVSwitches on the PCI bus and (unless
    not) nv-fabricmanager running."""
    return (
        gpu_node(nvml=nvml, **gpu)
        + [ReplayByArgs("lspci", ((NVIDIA_ONLY_LSPCI, LSPCI_HGX_H100),))]
        + ([NvidiaDaemons(("nv-fabricmanager",))] if fabric_manager else [])
    )


def gb200_node(nvml: str = NVML_GB200_RACK_A) -> list[Action]:
    """A GB200 NVL72 compute tray: 4 GPUs registered with the rack's NVLink fabric (no NVSwitch in
    the tray: the PCI bus shows none)."""
    return gpu_node(nvml=nvml, driver=NvidiaDriver("580.159.04")) + [
        ReplayByArgs("lspci", ((NVIDIA_ONLY_LSPCI, EMPTY),))
    ]


# One fault per node, each named by one of issue 20's checks (tests/integration/test_nvidia_stack.py):
# node1-6 HGX H100 boards, node7-10 GB200 trays of one rack (inventory label nvl_domain=rackA).
NVIDIA_STACK: dict[str, list[Action]] = {
    "node1": hgx_node() + dcgm(),  # healthy
    "node2": hgx_node() + dcgm(DCGM_R2_MEMORY_FAIL),  # DCGM's memory test fails
    "node3": hgx_node() + dcgm(DCGM_HOSTENGINE_DOWN),  # the DCGM host engine is not running
    "node4": hgx_node(NVML_FABRIC_IN_PROGRESS, fabric_manager=False) + dcgm(),  # Fabric Manager down
    "node5": hgx_node(NVML_CRC_RISING) + dcgm(),  # NVLink errors rising on GPU2 link 5
    "node6": hgx_node(driver=NvidiaDriver(empty=("libnvidia-ml",))) + dcgm(),  # a 0-byte libnvidia-ml
    "node7": gb200_node() + dcgm(),
    "node8": gb200_node() + dcgm(),
    "node9": gb200_node() + dcgm(),
    "node10": gb200_node(NVML_GB200_OTHER_CLIQUE) + dcgm(),  # in rackA, but another NVLink partition
}

# docker on a node where the GPU benchmark runs in "the job's image": `docker run ... --entrypoint PY
# IMAGE -` runs PY - on the node itself (the fake cupy is the image's GPU library), after writing the
# argv it was given to the node's data dir (docker-run.args) for the test to read.
DOCKER_RUNS_ON_NODE = r"""
[ "$1" = run ] || { echo "fake docker: only run" >&2; exit 2; }
printf '%s\n' "$@" > "${NODECHECK_FAKE_DIR:?}/data/docker-run.args"
py=; while [ $# -gt 0 ]; do case $1 in --entrypoint) py=$2; shift 2 ;; -) shift; break ;; *) shift ;; esac; done
exec "$py" - "$@"
"""


# a real nvbandwidth v0.10.0 run on 8x H100 80GB HBM3 (device_to_device_memcpy_read_ce only): the
# NVLink figures of the H100 boards; their host copies are the probe's own
NVBANDWIDTH_H100 = "nvbandwidth/h100-80gb-hbm3-x8-v0.10.0-d2d-read-ce.txt"


def gpu_bench_node(*, busy: bool = False, **faults) -> list[Action]:
    """An HGX H100 node whose GPUs the benchmark can load: CuPy on it (with `faults`: speed, bitflip),
    NVIDIA's nvbandwidth replaying a real 8x H100 run, and the idle guard's view of its GPU processes."""
    return gpu_node() + [
        GpuLibrary(**faults),
        Replay("nvbandwidth", NVBANDWIDTH_H100),
        ReplayByArgs("nvidia-smi", (("--query-compute-apps=*", COMPUTE_APPS_ONE if busy else EMPTY),)),
    ]


# issue 21 (tests/integration/test_gpu_perf.py): node1-6 8x H100, node7-10 4x GB200 (a second model,
# judged among themselves); one fault per node
GPU_PERF: dict[str, list[Action]] = {
    "node1": gpu_bench_node(),  # healthy
    "node2": gpu_bench_node(speed=((5, 0.85),)),  # GPU5 15% slower than its 47 peers
    "node3": gpu_bench_node(bitflip=((2, "persistent"),)),  # GPU2 computes a wrong bit, every time
    "node4": gpu_bench_node(),
    "node5": gpu_bench_node(busy=True),  # a GPU process runs: not tested
    "node6": _with(gpu_bench_node(), Script("docker", DOCKER_RUNS_ON_NODE, "runs the image's python on the node")),
    **{f"node{i}": gb200_node() + [GpuLibrary()] for i in range(7, 11)},
}

# The README demo (playbooks/demo.yml): one fault per node, each named by exactly one check. Every
# node also has the IB counters and the fake ib_write_bw (the pair tests run over real TCP), and the node
# itself as the node checks read it (node_os(): every node check passes on every reachable node).
DEMO: dict[str, list[Action]] = {
    "node1": gpu_node() + ib_counters() + node_os(),  # healthy
    "node2": gpu_node(nccl=NCCL_STALE) + ib_counters() + node_os(),  # NCCL differs from the rest
    "node3": _with(gpu_node(), Replay("ibstat", IBSTAT_PORT_DOWN)) + ib_counters() + node_os(),  # IB port down
    "node4": gpu_node(nvml=NVML_REMAP_PENDING) + ib_counters() + node_os(),  # GPU3 row remap pending
    "node5": gpu_node(docker=DOCKER_INSPECT_STALE) + ib_counters() + node_os(),  # stale image digest
    "node6": _with(gpu_node(), Hang("ibstat")) + ib_counters() + node_os(),  # ibstat hangs: timeout
    "node7": gpu_node(dmesg=DMESG_FALLEN_OFF_BUS) + ib_counters() + node_os(),  # a GPU fell off the bus (Xid 79)
    "node8": [Unreachable()],  # sshd down
    "node9": gpu_node() + ib_counters() + node_os(),  # slow HCAs: every pair test is slow
    "node10": gpu_node() + ib_counters(link_went_down_on="mlx5_3") + node_os(),  # mlx5_3's link went down
    # node9's HCAs are slow: its pair tests and every nccl-tests run across nodes that includes it
    "*": [
        Fabric(nodes=(("node9", (("gbps", 150.0),)),), devices=IB_CAS),
        Nccl(nodes=(("node9", (("net_busbw_gbs", 140.0),)),), test_s=0.2),
    ],
}

SCENARIOS: dict[str, Layout | Callable[[list[str]], Layout]] = {
    "demo": DEMO,
    "ib-demo": IB_DEMO,
    "clean": {},  # no fakes at all
    "ib-healthy": lambda nodes: {n: [Replay("ibstat", IBSTAT_HEALTHY)] for n in nodes},
    "demo-tiled": _tiled(IB_DEMO),  # IB_DEMO's mix at any size
    "gpu-fleet": GPU_FLEET,  # issue 3: one fault per node
    "gpu-healthy": lambda nodes: {n: gpu_node() for n in nodes},
    "node-checks": NODE_CHECKS,  # issue 19: one fault per node check
    "node-healthy": lambda nodes: {n: node_os() for n in nodes},
    "nvidia-stack": NVIDIA_STACK,  # issue 20: DCGM, NVLink fabric/domain/errors, driver libraries
    "gpu-perf": GPU_PERF,  # issue 21: the GPU benchmark and the SDC screen
    "gpu-remedy": GPU_REMEDY,  # issue 33: GPU resets that help, do not help, are refused
}


def layout_for(name: str, nodes: list[str]) -> Layout:
    try:
        sc = SCENARIOS[name]
    except KeyError:
        raise KeyError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}") from None
    return sc(nodes) if callable(sc) else sc


def _data(path: str) -> Path:
    p = Path(path)
    p = p if p.is_absolute() else DATA / p
    if not p.is_file():
        raise FileNotFoundError(f"scenario data file missing: {p}")
    return p


def apply(cluster: SimCluster, layout: Layout | str) -> None:
    """Reset the cluster (no fakes, all nodes up, original host keys), then install `layout`.
    Nodes the layout does not name stay clean. `layout` may be a SCENARIOS name."""
    if isinstance(layout, str):
        layout = layout_for(layout, cluster.nodes)
    unknown = sorted(set(layout) - set(cluster.nodes) - {"*"})
    if unknown:
        raise ValueError(f"layout names nodes the cluster does not have: {', '.join(unknown)}")
    plan = _plan(layout)
    for node, acts in plan.items():  # fail before touching the cluster
        for a in acts:
            if not isinstance(a, Action):
                raise TypeError(f"{node}: unknown action {a!r}")
            for f in a.recordings():
                _data(f)
    cluster.reset()
    for node, acts in plan.items():
        for a in acts:
            a.install(cluster, node)


def describe(layout: Layout) -> str:
    """One line per node: what each of its actions does ("no fakes" for none)."""
    lines = []
    for node, acts in sorted(_plan(layout).items(), key=lambda kv: int(kv[0][4:]) if kv[0][4:].isdigit() else 0):
        lines.append(f"  {node:8} {', '.join(a.describe() for a in acts) or 'no fakes'}")
    return "\n".join(lines)


def _plan(layout: Layout) -> dict[str, list[Action]]:
    """{node: [actions]}: a single action given for a node becomes a list of one."""
    return {node: list(acts) if isinstance(acts, (list, tuple)) else [acts] for node, acts in layout.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Install a named fault scenario on a running SimCluster.")
    ap.add_argument("--state-dir", help="cluster state dir (default $NODECHECK_HARNESS_DIR)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("apply")
    a.add_argument("scenario", choices=sorted(SCENARIOS))
    a.add_argument("-q", "--quiet", action="store_true")
    sub.add_parser("list")
    args = ap.parse_args(argv)
    if args.cmd == "list":
        print("\n".join(SCENARIOS))
        return 0
    cluster = SimCluster(state_dir=args.state_dir)
    layout = layout_for(args.scenario, cluster.nodes)
    apply(cluster, layout)
    if not args.quiet:
        print(f"scenario {args.scenario}:\n{describe(layout)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
