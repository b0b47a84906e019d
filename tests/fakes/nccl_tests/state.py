"""What every program of the fake shares: the state file (<state>/nccl.json: the bandwidth model
and per-node faults), the node a process runs on (Ctx), and how it writes."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
from dataclasses import dataclass

AGENT_FLAG = "--nodecheck-fake-agent"


COORD_ENV = "NODECHECK_FAKE_NCCL_COORD"


HARD_CAP_S = 120  # no fake process lives longer than this (never leak processes)


PERF_TOOLS = ("all_reduce_perf", "all_gather_perf", "reduce_scatter_perf", "alltoall_perf")


LAUNCHERS = ("mpirun", "srun")


HANGS = ("start", "init", "sweep")


DEFAULTS: dict = {
    "net_busbw_gbs": 370.0,
    "nvlink_busbw_gbs": 480.0,
    "gpus_per_node": 8,
    "gpu_model": "NVIDIA H100 80GB HBM3",
    "gpu_memory_bytes": 85520809984,
    "nccl_version": "2.29.2+cuda12.4",
    "tests_version": "2.17.9",
    "test_s": 0.3,
    "corrupt_from_bytes": 1 << 20,
    "hang_at_bytes": 1 << 20,
    "nodes": {},
}


NODE_KEYS = (
    "net_busbw_gbs",
    "nvlink_busbw_gbs",
    "corrupt",
    "corrupt_from_bytes",
    "hang",
    "hang_at_bytes",
    "nccl_version",
    "gpus",
    "gpu_model",
)


def nccl_code(version: str) -> int:
    """NCCL_VERSION_CODE of "2.29.2+cuda12.4": 22902 (X*1000+Y*100+Z before 2.9)."""
    m = re.match(r"(\d+)\.(\d+)\.(\d+)", version)
    if not m:
        return 0
    x, y, z = (int(g) for g in m.groups())
    return x * 10000 + y * 100 + z if (x > 2 or (x == 2 and y >= 9)) else x * 1000 + y * 100 + z


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version)[:3])


@dataclass(frozen=True)
class NodeSpec:
    name: str
    net_busbw_gbs: float
    nvlink_busbw_gbs: float
    gpus: int
    gpu_model: str
    nccl_version: str
    corrupt: bool
    corrupt_from_bytes: int
    hang: str | None
    hang_at_bytes: int


@dataclass(frozen=True)
class State:
    spec: dict

    @classmethod
    def load(cls, path: str) -> State:
        try:
            with open(path) as f:
                spec = json.load(f)
        except (FileNotFoundError, ValueError):
            spec = {}
        return cls({**DEFAULTS, **spec})

    def node(self, name: str) -> NodeSpec:
        s, n = self.spec, self.spec["nodes"].get(name, {})
        hang = n.get("hang")
        return NodeSpec(
            name=name,
            net_busbw_gbs=float(n.get("net_busbw_gbs", s["net_busbw_gbs"])),
            nvlink_busbw_gbs=float(n.get("nvlink_busbw_gbs", s["nvlink_busbw_gbs"])),
            gpus=int(n.get("gpus", s["gpus_per_node"])),
            gpu_model=str(n.get("gpu_model", s["gpu_model"])),
            nccl_version=str(n.get("nccl_version", s["nccl_version"])),
            corrupt=bool(n.get("corrupt", False)),
            corrupt_from_bytes=int(n.get("corrupt_from_bytes", s["corrupt_from_bytes"])),
            hang=hang if hang in HANGS else None,
            hang_at_bytes=int(n.get("hang_at_bytes", s["hang_at_bytes"])),
        )

    @property
    def tests_version(self) -> str:
        return str(self.spec["tests_version"])

    @property
    def layout(self) -> str:
        """ "2.17": the 2.17.x output (no unalign); "newest": 2.18 and later (2.19.1's sources)."""
        return "2.17" if version_tuple(self.tests_version) < (2, 18) else "newest"


@dataclass(frozen=True)
class Ctx:
    node: str
    address: str
    net: str
    state_path: str
    state: State

    @property
    def ssh_config(self) -> str:
        return os.path.join(os.path.dirname(self.state_path), "ssh_config")

    def resolve(self, host: str) -> str:
        """nodeK -> its address (the simulated cluster has no DNS); anything else as given."""
        m = re.fullmatch(r"node([1-9]\d*)", host)
        return f"{self.net}.{m.group(1)}" if m else host

    def is_me(self, host: str) -> bool:
        return host in (self.node, self.address, "localhost", "127.0.0.1") or self.resolve(host) == self.address


def entry_script() -> str:
    """The script this process was started as (<data>/nccl_tests.py on a node, the package's
    directory in the repository): a launcher starts its own node's agent with it, so that agent has
    the same argv as every other fake process (the harness and the tests find them by it)."""
    return os.path.abspath(sys.argv[0])


def die_with_parent() -> None:
    """SIGKILL when the parent (agent) dies: a rank never outlives the process that started it."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:  # pragma: no cover
        pass


def write_out(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def write_err(text: str) -> None:
    sys.stdout.flush()
    sys.stderr.write(text)
    sys.stderr.flush()
