"""Hung ranks for `nodecheck forensics` (tests/fakes/hung_rank.py, freeze.py): real Python processes
inside a node's namespaces, each blocked in a function named like a collective, with the rank
variables a launcher gives (RANK, LOCAL_RANK, WORLD_SIZE, ...), so the real py-spy dumps real stacks;
frozen ones (cgroup freezer) never answer it."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from harness.sim.common import (
    FAKES,
    HarnessError,
    alive,
    argv_has,
    atomic_write,
    load_fake,
    node_python,
    read_pid,
    terminate,
)
from harness.sim.nodes import Nodes

FAKE_RANK = FAKES / "hung_rank.py"
FAKE_RANK_PKG = FAKES / "hung_rank_pkg"


class HungRanks(Nodes):
    """Ranks of a job hung in a collective, for py-spy and the flight-recorder dumps."""

    def ranks_dir(self, node: str) -> Path:
        return self.node_dir(node) / "ranks"

    def start_ranks(
        self,
        node: str,
        ranks: Sequence[Mapping],
        world_size: int,
        env: Mapping[str, str] | None = None,
        timeout: float = 10,
    ) -> dict[int, int]:
        """Start one fake rank per entry of `ranks` on the node: {"rank": R, "local_rank": L,
        "collective": all_reduce|reduce_scatter|broadcast|barrier|all_gather|none, "via_aggregate":
        bool, "threads": bool, "step": N}; each gets RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
        GROUP_RANK (rank // len(ranks)) and `env` in its environment, "train.py" in its argv.
        Waits until every stack is in place; returns {rank: pid}."""
        d = self.ranks_dir(node)
        d.mkdir(parents=True, exist_ok=True)
        atomic_write(d / "hung_rank.py", FAKE_RANK.read_bytes(), 0o644)
        pkg = d / "hung_rank_pkg"
        pkg.mkdir(exist_ok=True)
        for f in FAKE_RANK_PKG.glob("*.py"):
            atomic_write(pkg / f.name, f.read_bytes(), 0o644)
        self._install_node_pgrep()
        python = node_python()
        sshd = str(self.pid(node))
        pid_files = {}
        for spec in ranks:
            rank, local = int(spec["rank"]), int(spec.get("local_rank", spec["rank"] % len(ranks)))
            pid_file = d / f"rank-{rank}.pid"
            pid_file.unlink(missing_ok=True)
            variables = {
                "RANK": str(rank),
                "LOCAL_RANK": str(local),
                "WORLD_SIZE": str(world_size),
                "LOCAL_WORLD_SIZE": str(len(ranks)),
                "GROUP_RANK": str(rank // len(ranks)),
                **(env or {}),
            }
            argv = [
                python,
                "-I",
                str(d / "hung_rank.py"),
                "train.py",
                "--collective",
                str(spec["collective"]),
                "--step",
                str(int(spec.get("step", 0))),
                "--pid-file",
                str(pid_file),
            ]
            argv += ["--via-aggregate"] if spec.get("via_aggregate") else []
            argv += ["--threads"] if spec.get("threads") else []
            cmd = [
                "nsenter",
                "-t",
                sshd,
                "-u",
                "-m",
                "-n",
                "--wd=/root",
                "--",
                "/usr/bin/env",
                "-i",
                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "HOME=/root",
                *(f"{k}={v}" for k, v in variables.items()),
                "setsid",
                "-f",
                *argv,
            ]
            with open(d / f"rank-{rank}.out", "ab") as out:
                subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out, check=True, timeout=10)
            pid_files[rank] = pid_file
        deadline = time.monotonic() + timeout
        pids = {}
        for rank, pid_file in pid_files.items():
            while (pid := read_pid(pid_file)) is None:
                if time.monotonic() > deadline:
                    out = (d / f"rank-{rank}.out").read_text(errors="replace")[-2000:]
                    raise HarnessError(f"{node}: fake rank {rank} did not start within {timeout} s: {out}")
                time.sleep(0.01)
            pids[rank] = pid
        return pids

    def freeze_ranks(self, node: str, pids: Sequence[int]) -> str:
        """Freeze these processes (cgroup freezer): py-spy then never gets an answer from them, as from
        a process stuck in the kernel or the driver (State D). clear_ranks() thaws them."""
        freeze = load_fake("freeze")
        return freeze.freeze(pids, f"nodecheck-harness-{self.state_dir.name}-node{self._index(node)}")

    def rank_pids(self, node: str | None = None) -> list[int]:
        nodes = [f"node{self._index(node)}"] if node else self.nodes
        wanted = {str(self.ranks_dir(n) / "hung_rank.py").encode() for n in nodes}
        return sorted(
            int(p.name)
            for p in Path("/proc").iterdir()
            if p.name.isdigit() and argv_has(p, wanted) and alive(int(p.name))
        )

    def clear_ranks(self) -> None:
        """Thaw and stop every fake rank, remove their files and the dumps placed in the nodes' homes."""
        freeze = load_fake("freeze")
        for n in self.nodes:
            cg = Path(freeze.FREEZER_ROOT) / f"nodecheck-harness-{self.state_dir.name}-{n}"
            if cg.is_dir():
                freeze.thaw(str(cg))
        terminate(self.rank_pids())
        for n in self.nodes:
            for d in (self.ranks_dir(n), self.node_dir(n) / "home" / "fr"):
                if d.exists():
                    shutil.rmtree(d)

    def place_dumps(
        self, node: str, files: Mapping[int, str | os.PathLike | bytes], prefix: str = "/root/fr/trace_rank_"
    ) -> str:
        """Flight-recorder dumps as a rank's watchdog writes them: {rank: file or bytes} to PREFIX<rank> on
        the node (a /root/... prefix is the node's own home). Returns the prefix."""
        if not prefix.startswith("/root/"):
            raise ValueError("dumps go under the node's own /root (the nodes share /tmp)")
        for rank, data in files.items():
            raw = data if isinstance(data, bytes) else Path(data).read_bytes()
            dest = self.node_dir(node) / "home" / f"{prefix[len('/root/') :]}{int(rank)}"
            dest.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(dest, raw, 0o644)
        return prefix
