"""The fake nccl-tests and their launchers (tests/fakes/nccl_tests/, "nccl-tests" in
tests/harness/README.md): nccl() writes the bandwidth model and per-node faults to <state>/nccl.json
and installs, on every node, all_reduce_perf, all_gather_perf, reduce_scatter_perf, alltoall_perf,
mpirun and srun."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from pathlib import Path

from harness.sim.base import ClusterBase
from harness.sim.common import FAKES, atomic_write, node_python, terminate

FAKE_NCCL_TESTS = FAKES / "nccl_tests"


class NcclTests(ClusterBase):
    """nccl-tests and their launchers on every node, with one bandwidth model and per-node faults."""

    def nccl(
        self,
        net_busbw_gbs: float = 370.0,
        nvlink_busbw_gbs: float = 480.0,
        nodes: Mapping[str, dict] | None = None,
        gpus_per_node: int = 8,
        gpu_model: str = "NVIDIA H100 80GB HBM3",
        nccl_version: str = "2.29.2+cuda12.4",
        tests_version: str = "2.17.9",
        test_s: float = 0.3,
    ) -> Path:
        """Write <state>/nccl.json and install the fake nccl-tests and launchers
        (tests/fakes/nccl_tests/) on every node: all_reduce_perf, all_gather_perf,
        reduce_scatter_perf, alltoall_perf, mpirun, srun. A multi-node test's bus bandwidth plateau
        is the least net_busbw_gbs of its nodes, a single-node test's the node's nvlink_busbw_gbs
        (net_busbw_gbs with NCCL_P2P_DISABLE=1 and NCCL_SHM_DISABLE=1). nodes: per node
        {"net_busbw_gbs", "nvlink_busbw_gbs", "corrupt": True, "corrupt_from_bytes", "hang": "start" |
        "init" | "sweep", "hang_at_bytes", "nccl_version", "gpus", "gpu_model"}; test_s: how long a
        whole sweep takes. Schema: tests/harness/README.md, "nccl-tests"."""
        keys = (
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
        spec_nodes = {}
        for name, cfg in (nodes or {}).items():
            node = f"node{self._index(name)}"  # typos fail here, not silently later
            unknown = sorted(set(cfg) - set(keys))
            if unknown:
                raise ValueError(f"{name}: unknown nccl keys {unknown} (known: {', '.join(keys)})")
            if cfg.get("hang") not in (None, "start", "init", "sweep"):
                raise ValueError(f"{name}: hang must be 'start', 'init' or 'sweep', not {cfg['hang']!r}")
            spec_nodes[node] = dict(cfg)
        spec = {
            "net_busbw_gbs": float(net_busbw_gbs),
            "nvlink_busbw_gbs": float(nvlink_busbw_gbs),
            "gpus_per_node": int(gpus_per_node),
            "gpu_model": gpu_model,
            "nccl_version": nccl_version,
            "tests_version": tests_version,
            "test_s": float(test_s),
            "nodes": spec_nodes,
        }
        path = self.state_dir / "nccl.json"
        atomic_write(path, json.dumps(spec, indent=1).encode(), 0o644)
        for n in self.nodes:
            self.fake_nccl_tests(n)
        return path

    def fake_nccl_tests(self, node: str) -> list[Path]:
        """Install the fake nccl-tests (tests/fakes/nccl_tests/) as the node's nccl-tests binaries and
        launchers: the package copied to <data>/nccl_tests/, its __main__.py beside it as
        <data>/nccl_tests.py (the script every fake process runs, by which clear_nccl() finds them),
        and a sh wrapper per tool. The model comes from <state>/nccl.json, defaults without one."""
        i = self._index(node)
        package = self.node_dir(node) / "data" / "nccl_tests"
        package.mkdir(parents=True, exist_ok=True)
        for module in FAKE_NCCL_TESTS.glob("*.py"):
            atomic_write(package / module.name, module.read_bytes(), 0o644)
        script = self._copy_data(node, "nccl_tests", "py", (FAKE_NCCL_TESTS / "__main__.py").read_bytes())
        python = node_python()
        args = [python, "-I", str(script), f"node{i}", self.address(node), self.net, str(self.state_dir / "nccl.json")]
        return [
            self._write_tool(
                node, tool, "fake nccl-tests (tests/fakes/nccl_tests/)", [f'exec {shlex.join([*args, tool])} "$0" "$@"']
            )
            for tool in ("all_reduce_perf", "all_gather_perf", "reduce_scatter_perf", "alltoall_perf", "mpirun", "srun")
        ]

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
        terminate(pids)
        (self.state_dir / "nccl.json").unlink(missing_ok=True)
