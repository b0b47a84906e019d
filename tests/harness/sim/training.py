"""Training jobs for `nodecheck watch` (tests/fakes/trainer.py, gpu_telemetry.py; scenarios:
tests/harness/training.py). A fake training process per node (or `procs` per node) inside the
node's namespaces, writing torchtitan-like step lines to its log, and a fake nvidia-smi that reads
the same scenario, so `nodecheck watch` samples a real process, a real log and GPU telemetry that
follow one clock."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from harness.sim.common import FAKES, HarnessError, alive, atomic_write, load_trainer, node_python, terminate
from harness.sim.nodes import Nodes

FAKE_TRAINER = FAKES / "trainer.py"
FAKE_GPU_TELEMETRY = FAKES / "gpu_telemetry.py"


class TrainingJobs(Nodes):
    """A training job per node that `nodecheck watch` can sample."""

    def training_dir(self, node: str) -> Path:
        """<node dir>/training: the scenario, the copies of the fakes, trainer-K.pid and trainer-K.out."""
        return self.node_dir(node) / "training"

    def training_log(self, node: str, scenario: Mapping | None = None) -> Path:
        """The host's path of the node's training log (the scenario's "log"; /root/... on the node is
        <node dir>/home/... here)."""
        if scenario is None:
            scenario = json.loads((self.training_dir(node) / "scenario.json").read_text())
        log = str(scenario.get("log") or load_trainer().DEFAULTS["log"])
        if log == "/root" or log.startswith("/root/"):
            return self.node_dir(node) / "home" / log[len("/root/") :]
        return Path(log)

    def start_training(self, node: str, scenario: Mapping, fresh_log: bool = True, timeout: float = 10) -> Path:
        """Start the scenario's training on the node: a fake trainer (`procs` processes, default 1)
        inside the node's UTS + mount + network namespaces, detached (setsid; stdio to
        training_dir/trainer-K.out), with "train.py" in its argv; the node's nvidia-smi answers from
        the same scenario. Installs on every node a pgrep that sees only its own node's processes
        (the simulated nodes share one PID namespace). A training already running on the node is
        stopped first; fresh_log removes an old log. Returns the log's path on this host."""
        logs = self.start_training_all({node: scenario}, fresh_log=fresh_log, timeout=timeout)
        return logs[f"node{self._index(node)}"]

    def start_training_all(
        self, scenarios: Mapping[str, Mapping], fresh_log: bool = True, timeout: float = 10
    ) -> dict[str, Path]:
        """start_training() for each {node: scenario} (e.g. from tests/harness/training.py), all
        launched before waiting for any: {node: host path of its log}."""
        trainer = load_trainer()
        checked = {}
        for name, scn in scenarios.items():
            node = f"node{self._index(name)}"
            try:
                checked[node] = trainer.check_scenario(dict(scn))
            except trainer.ScenarioError as e:
                raise ValueError(f"{node}: {e}") from None
        self._install_node_pgrep()
        python = node_python()
        logs = {}
        for node, scn in checked.items():
            self.stop_training(node)
            d = self.training_dir(node)
            if d.exists():
                shutil.rmtree(d)
            d.mkdir(parents=True)
            atomic_write(d / "trainer.py", FAKE_TRAINER.read_bytes(), 0o644)
            atomic_write(d / "gpu_telemetry.py", FAKE_GPU_TELEMETRY.read_bytes(), 0o644)
            atomic_write(d / "scenario.json", json.dumps(scn, indent=1).encode(), 0o644)
            logs[node] = self.training_log(node, scn)
            if fresh_log:
                logs[node].unlink(missing_ok=True)
            telemetry = [python, "-I", str(d / "gpu_telemetry.py"), str(d / "scenario.json")]
            self._write_tool(
                node,
                "nvidia-smi",
                "fake GPU telemetry of the training scenario (tests/fakes/gpu_telemetry.py)",
                [f'exec {shlex.join(telemetry)} "$@"'],
            )
            sshd = str(self.pid(node))
            for k in range(int(scn["procs"])):
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
                    "setsid",
                    "-f",
                    python,
                    "-I",
                    str(d / "trainer.py"),
                    "train.py",
                    "--scenario",
                    str(d / "scenario.json"),
                    "--proc",
                    str(k),
                ]
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
            if wanted.intersection(argv) and alive(int(p.name)):
                pids.append(int(p.name))
        return sorted(pids)

    def stop_training(self, node: str | None = None) -> int:
        """SIGTERM (then SIGKILL after 1 s) the trainers of one node, or of every node; returns how
        many were running. The scenario stays: nvidia-smi keeps following its clock."""
        pids = self.training_pids(node)
        terminate(pids)
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
