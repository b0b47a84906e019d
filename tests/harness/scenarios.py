"""Named fault layouts for the simulated cluster: which fake each node gets.

A layout maps a node name to one action or a list of actions:
    Replay(tool, data_file, exit_code=0, stderr_file=None)   the tool prints a recorded output
    Exit(tool, code, stderr_text="")                         the tool fails
    Hang(tool)                                               the tool never answers
    Missing(tool)                                            the tool is not installed (no fake)
    Unreachable()                                            the node's sshd is stopped
    RekeyHost()                                              the node presents a new host key
Relative data files are under tests/data/. A scenario in SCENARIOS is a layout, or a function
from the node list to a layout (for any cluster size).

    apply(cluster, DEMO)                          # reset the cluster, then install the layout
    python tests/harness/scenarios.py --state-dir S apply demo      # same, from a shell
    python tests/harness/scenarios.py list
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Union

try:
    from .cluster import SimCluster
except ImportError:                      # run as a script: tests/harness is sys.path[0]
    from cluster import SimCluster       # type: ignore[no-redef]

DATA = Path(__file__).resolve().parents[1] / "data"

IBSTAT_HEALTHY = "ibstat/gpud-h100-ndr-ib-mixed-cx6dx-ethernet-down-disabled.txt"
IBSTAT_PORT_DOWN = "ibstat/derived-h100-ndr-mlx5_3-down-polling.txt"
IBSTAT_LOW_RATE = "ibstat/derived-h100-ndr-mlx5_5-rate-200.txt"


@dataclass(frozen=True)
class Replay:
    tool: str
    data_file: str
    exit_code: int = 0
    stderr_file: str | None = None


@dataclass(frozen=True)
class Exit:
    tool: str
    code: int
    stderr_text: str = ""


@dataclass(frozen=True)
class Hang:
    tool: str


@dataclass(frozen=True)
class Missing:
    tool: str


@dataclass(frozen=True)
class Unreachable:
    pass


@dataclass(frozen=True)
class RekeyHost:
    pass


@dataclass(frozen=True)
class Nvml:
    """nvidia-ml-py is installed on the node (the fake pynvml) with this GPU state file."""
    state_file: str


@dataclass(frozen=True)
class Script:
    """The tool is this /bin/sh script body (fakes that need logic, e.g. a readlink that
    resolves one library name and hands everything else to the real one)."""
    tool: str
    body: str
    what: str = "script"


@dataclass(frozen=True)
class ReplayByArgs:
    """The tool prints the data file of the first (shell pattern, file) case its arguments match."""
    tool: str
    cases: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class ReplaySequence:
    """The k-th call of the tool prints the k-th file (then the last): counters before and after."""
    tool: str
    data_files: tuple[str, ...]


@dataclass(frozen=True)
class SequenceByArgs:
    """Per argument pattern its own sequence of files (perfquery per port, before and after)."""
    tool: str
    cases: tuple[tuple[str, tuple[str, ...]], ...]


@dataclass(frozen=True)
class Sysfs:
    """Files under the node's /sys/class/infiniband (relative paths -> content)."""
    files: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class RocePort:
    """A real netdev (veth) backing RDMA port ca/1, kept in the node's sysfs by the simulated driver."""
    behaviour: str = "stable"                  # or "networkmanager": the GID moves after a flap
    ca: str = "mlx5_0"


@dataclass(frozen=True)
class Fabric:
    """Cluster-wide (give it under the key "*"): the fake ib_write_bw on every node and the
    bandwidth model of SimCluster.fabric()."""
    default_gbps: float = 392.0
    nodes: tuple[tuple[str, tuple[tuple[str, object], ...]], ...] = ()
    links: tuple[tuple[str, str, float], ...] = ()
    test_s: float = 0.2
    devices: tuple[str, ...] | None = None
    link_type: str = "IB"


@dataclass(frozen=True)
class Nccl:
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


Action = Union[Replay, Exit, Hang, Missing, Unreachable, RekeyHost, Nvml, Script, ReplayByArgs,
               ReplaySequence, SequenceByArgs, Sysfs, RocePort, Fabric, Nccl]
Layout = Mapping[str, Union[Action, list]]

# ib.ports alone (tests/data/playbooks/ib-only.yml: 8 ports, 400 Gb/s, ibstat timeout 5 s).
IB_DEMO: dict[str, list[Action]] = {
    "node1": [Replay("ibstat", IBSTAT_HEALTHY)],
    "node2": [Replay("ibstat", IBSTAT_HEALTHY)],
    "node3": [Replay("ibstat", IBSTAT_PORT_DOWN)],     # one IB port down (Polling)
    "node4": [Replay("ibstat", IBSTAT_HEALTHY)],
    "node5": [Replay("ibstat", IBSTAT_LOW_RATE)],      # one link at 200 Gb/s
    "node6": [Hang("ibstat")],                         # ibstat hangs: timeout
    "node7": [Missing("ibstat")],                      # ibstat not installed
    "node8": [Unreachable()],                          # sshd down
}
IB_DEMO_EXPECTED = {  # what nodecheck should say about each IB_DEMO node
    "node1": "pass", "node2": "pass", "node4": "pass",
    "node3": "fail: mlx5_3 port down", "node5": "fail: mlx5_5 rate 200 < 400 Gb/s",
    "node6": "timeout", "node7": "error: ibstat not found (exit 127)", "node8": "unreachable",
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
DMESG_FALLEN_OFF_BUS = "dmesg-xid/nvsentinel-155-fallen-off-bus-multiline-no-xid-570.txt"
DMESG_OOM = "dmesg-oom/docker-for-linux-1001-syslog-prefixed-global-oom-killed-process-truncated.txt"
LDCONFIG_NCCL = "scenarios/ldconfig-p-libnccl-deb.txt"
OFED_INFO = "scenarios/ofed_info-s-mlnx-23.07.txt"
IMAGE = "b10s/test:app4"                       # the image of the real `docker inspect` recording
DOCKER_INSPECT = "scenarios/docker-image-inspect-b10s-test-app4.txt"
DOCKER_INSPECT_STALE = "scenarios/derived-docker-image-inspect-b10s-test-app4-stale.txt"
NCCL_GOOD, NCCL_STALE = "2.29.2", "2.21.5"


def nccl_readlink(version: str) -> Script:
    """readlink -f resolves the cached libnccl.so.2 to this versioned file, as the deb's symlink
    does; any other path goes to the real readlink."""
    return Script("readlink", 'case "$*" in\n'
                  f'  *libnccl.so.2) echo /lib/x86_64-linux-gnu/libnccl.so.{version} ;;\n'
                  '  *) exec /usr/bin/readlink "$@" ;;\nesac', f"libnccl.so.2 -> {version}")


def gpu_node(nvml: str = NVML_HEALTHY, dmesg: str = DMESG_CLEAN, nccl: str = NCCL_GOOD,
             docker: str = DOCKER_INSPECT) -> list[Action]:
    """A healthy 8x H100 node: NVML, kernel log, NCCL, OFED, HCAs and the job's image."""
    return [Nvml(nvml), Replay("dmesg", dmesg), Replay("ldconfig", LDCONFIG_NCCL), nccl_readlink(nccl),
            Replay("ofed_info", OFED_INFO), Replay("ibstat", IBSTAT_HEALTHY), Replay("docker", docker)]


# The InfiniBand ports of IBSTAT_HEALTHY (mlx5_1/2/7/8 are its Ethernet ports), as the node's sysfs
# shows them, and their counters: perfquery -x replays a real 2-port read (port 1 is used).
IB_CAS = ("mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11")
PERFQUERY_X = "perfquery/infiniband_exporter-extended-2ports-capmask2.txt"
PERFQUERY_X_LINK_DOWNED = "scenarios/derived-perfquery-x-2ports-linkdowned-plus1-symbol-42.txt"


def ib_counters(link_went_down_on: str | None = None) -> list[Action]:
    """sysfs ports of the healthy ibstat's IB HCAs, and perfquery per port; on `link_went_down_on`
    the second read shows LinkDownedCounter +1 and SymbolErrorCounter +42 (the link flapped)."""
    files = tuple((f"{ca}/ports/1/{name}", value) for ca in IB_CAS for name, value in (
        ("link_layer", "InfiniBand\n"), ("state", "4: ACTIVE\n"), ("phys_state", "5: LinkUp\n"),
        ("rate", "400 Gb/sec (4X NDR)\n")))
    cases = ((f"*-C {link_went_down_on} *", (PERFQUERY_X, PERFQUERY_X_LINK_DOWNED)),) if link_went_down_on else ()
    return [Sysfs(files), SequenceByArgs("perfquery", cases + (("*", (PERFQUERY_X,)),))]


GPU_FLEET: dict[str, list[Action]] = {
    "node1": gpu_node(),
    "node2": gpu_node(nccl=NCCL_STALE),                     # a different NCCL (stale image's host)
    "node3": gpu_node(docker=DOCKER_INSPECT_STALE),         # a different image digest
    "node4": gpu_node(nvml=NVML_REMAP_PENDING),             # GPU3: row remap pending
    "node5": gpu_node(nvml=NVML_LEFTOVER),                  # GPU5: leftover python3, 40 GiB
    "node6": gpu_node(dmesg=DMESG_FALLEN_OFF_BUS),          # Xid 79: GPU fallen off the bus
    "node7": gpu_node(dmesg=DMESG_OOM),                     # OOM kills in the log: warn
    "node8": gpu_node(),
}

# nvidia-smi for a node where NVML cannot answer (no nvidia-ml-py): the GPU probe falls back to it
NVIDIA_SMI_FALLBACK = ReplayByArgs("nvidia-smi", (
    ("--query-gpu=*", "scenarios/constructed-nvidia-smi-query-gpu-h100pcie-2gpu.csv"),
    ("--query-compute-apps=*", "scenarios/empty.txt"),
    ("-q", "nvidia-smi-q/gpud-pr80-remapped-rows-uncorrectable-4-pending-yes.txt"),
    ("nvlink -s", "nvidia-smi-nvlink/hpe-dl380a-h100pcie-nvlink-s-inactive-links.txt"),
))


def _with(actions: list[Action], *replace: Action) -> list[Action]:
    """A node's actions with those of the same tool swapped for `replace`."""
    tools = {getattr(a, "tool", None) for a in replace}
    return [a for a in actions if getattr(a, "tool", None) not in tools] + list(replace)


# The README demo (playbooks/demo.yml): one fault per node, each named by exactly one check. Every
# node also has the IB counters and the fake ib_write_bw (the pair tests run over real TCP).
DEMO: dict[str, list[Action]] = {
    "node1": gpu_node() + ib_counters(),                                # healthy
    "node2": gpu_node(nccl=NCCL_STALE) + ib_counters(),                 # NCCL differs from the rest
    "node3": _with(gpu_node(), Replay("ibstat", IBSTAT_PORT_DOWN)) + ib_counters(),   # IB port down
    "node4": gpu_node(nvml=NVML_REMAP_PENDING) + ib_counters(),         # GPU3 row remap pending
    "node5": gpu_node(docker=DOCKER_INSPECT_STALE) + ib_counters(),     # stale image digest
    "node6": _with(gpu_node(), Hang("ibstat")) + ib_counters(),        # ibstat hangs: timeout
    "node7": gpu_node(dmesg=DMESG_FALLEN_OFF_BUS) + ib_counters(),      # a GPU fell off the bus (Xid 79)
    "node8": [Unreachable()],                                           # sshd down
    "node9": gpu_node() + ib_counters(),                                # slow HCAs: every pair test is slow
    "node10": gpu_node() + ib_counters(link_went_down_on="mlx5_3"),     # mlx5_3's link went down in the run
    # node9's HCAs are slow: its pair tests and every nccl-tests run across nodes that includes it
    "*": [Fabric(nodes=(("node9", (("gbps", 150.0),)),), devices=IB_CAS),
          Nccl(nodes=(("node9", (("net_busbw_gbs", 140.0),)),), test_s=0.2)],
}

SCENARIOS: dict[str, Union[Layout, Callable[[list[str]], Layout]]] = {
    "demo": DEMO,
    "ib-demo": IB_DEMO,
    "clean": {},                                                       # no fakes at all
    "ib-healthy": lambda nodes: {n: [Replay("ibstat", IBSTAT_HEALTHY)] for n in nodes},
    "demo-tiled": _tiled(IB_DEMO),                                     # IB_DEMO's mix at any size
    "gpu-fleet": GPU_FLEET,                                            # issue 3: one fault per node
    "gpu-healthy": lambda nodes: {n: gpu_node() for n in nodes},
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
    plan = {node: acts if isinstance(acts, (list, tuple)) else [acts] for node, acts in layout.items()}
    for acts in plan.values():                       # fail before touching the cluster
        for a in acts:
            if isinstance(a, Replay):
                _data(a.data_file)
                if a.stderr_file:
                    _data(a.stderr_file)
    cluster.reset()
    for node, acts in plan.items():
        for a in acts:
            if isinstance(a, Replay):
                cluster.fake_replay(node, a.tool, _data(a.data_file), a.exit_code,
                                    _data(a.stderr_file) if a.stderr_file else None)
            elif isinstance(a, Exit):
                cluster.fake_exit(node, a.tool, a.code, a.stderr_text)
            elif isinstance(a, Hang):
                cluster.fake_hang(node, a.tool)
            elif isinstance(a, Missing):
                cluster.remove_tool(node, a.tool)
            elif isinstance(a, Nvml):
                cluster.fake_nvml(node, a.state_file)
            elif isinstance(a, Script):
                cluster.fake_script(node, a.tool, a.body)
            elif isinstance(a, ReplayByArgs):
                cluster.fake_replay_by_args(node, a.tool, [(pattern, _data(f)) for pattern, f in a.cases])
            elif isinstance(a, ReplaySequence):
                cluster.fake_replay_sequence(node, a.tool, [_data(f) for f in a.data_files])
            elif isinstance(a, SequenceByArgs):
                cluster.fake_sequence_by_args(node, a.tool, [(pattern, [_data(f) for f in files])
                                                             for pattern, files in a.cases])
            elif isinstance(a, Sysfs):
                cluster.fake_sysfs(node, dict(a.files))
            elif isinstance(a, RocePort):
                cluster.roce_port(node, a.behaviour, a.ca)
            elif isinstance(a, Fabric):
                cluster.fabric(a.default_gbps, {n: dict(v) for n, v in a.nodes} or None,
                               [{"a": x, "b": y, "gbps": g} for x, y, g in a.links] or None, a.test_s,
                               list(a.devices) if a.devices is not None else None, a.link_type)
            elif isinstance(a, Nccl):
                cluster.nccl(a.net_busbw_gbs, a.nvlink_busbw_gbs, {n: dict(v) for n, v in a.nodes} or None,
                             a.gpus_per_node, a.gpu_model, a.nccl_version, a.tests_version, a.test_s)
            elif isinstance(a, Unreachable):
                cluster.stop(node)
            elif isinstance(a, RekeyHost):
                cluster.rekey(node)
            else:
                raise TypeError(f"{node}: unknown action {a!r}")


def describe(layout: Layout) -> str:
    lines = []
    for node in sorted(layout, key=lambda k: int(k[4:]) if k[4:].isdigit() else 0):
        acts = layout[node] if isinstance(layout[node], (list, tuple)) else [layout[node]]
        text = ", ".join(
            f"{a.tool}: replay {Path(a.data_file).name}" if isinstance(a, Replay)
            else f"{a.tool}: exits {a.code}" if isinstance(a, Exit)
            else f"{a.tool}: hangs" if isinstance(a, Hang)
            else f"{a.tool}: not installed" if isinstance(a, Missing)
            else f"pynvml: {Path(a.state_file).name}" if isinstance(a, Nvml)
            else f"{a.tool}: {a.what}" if isinstance(a, Script)
            else f"{a.tool}: replay by arguments ({len(a.cases)} cases)" if isinstance(a, ReplayByArgs)
            else "sshd stopped (unreachable)" if isinstance(a, Unreachable)
            else "fake ib_write_bw on every node" if isinstance(a, Fabric)
            else "fake nccl-tests, mpirun and srun on every node" if isinstance(a, Nccl)
            else "new host key (known_hosts mismatch)" for a in acts) or "no fakes"
        lines.append(f"  {node:8} {text}")
    return "\n".join(lines)


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
