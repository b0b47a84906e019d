"""The simulated cluster's ground: its state directory, ssh_nodes.sh, node names and addresses, the
cluster's network namespace, and how a file (a fake tool, its canned output) is put on a node."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from harness.sim.common import SCRIPT, TOOL_NAME, HarnessError, atomic_write, read_pid

NODES_PER_BLOCK = 254
MAX_NODES = 2540  # ten /24 blocks (tests/harness/lib.sh NC_MAX_NODES)


def node_address(net: str, index: int) -> str:
    """Node `index`'s address in a cluster at `net` ("a.b.c"): a.b.(c + (i-1)//254).((i-1)%254 + 1), so a
    cluster of up to 254 nodes is a.b.c.1..N and a bigger one goes on in the next /24s. The one mapping
    (its shell twin: tests/harness/lib.sh nc_node_addr)."""
    m = re.fullmatch(r"([0-9]{1,3}\.[0-9]{1,3})\.([0-9]{1,3})", net)
    if not m or not 1 <= index <= MAX_NODES:
        raise ValueError(f"no address for node {index} in {net!r}")
    block, host = divmod(index - 1, NODES_PER_BLOCK)
    third = int(m.group(2)) + block
    if third > 255:
        raise ValueError(f"node {index} of {net}.* is past .255")
    return f"{m.group(1)}.{third}.{host + 1}"


class ClusterBase:
    """State and primitives every concern of SimCluster builds on."""

    def __init__(
        self,
        state_dir: str | os.PathLike | None = None,
        net: str | None = None,
        port: int | None = None,
        script: str | os.PathLike = SCRIPT,
    ) -> None:
        default = Path(os.environ.get("TMPDIR") or "/tmp") / "nodecheck-harness"
        self.state_dir = Path(os.path.abspath(state_dir or os.environ.get("NODECHECK_HARNESS_DIR") or default))
        self._net = net or os.environ.get("NODECHECK_HARNESS_NET") or "127.0.1"
        self._port = int(port or os.environ.get("NODECHECK_HARNESS_PORT") or 22)
        self.script = Path(script)

    @property
    def is_up(self) -> bool:
        return (self.state_dir / "harness.env").is_file()

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
        return node_address(self.net, self._index(node))

    def node_dir(self, node: str) -> Path:
        return self.state_dir / "nodes" / f"node{self._index(node)}"

    def _sh(self, *args: str, timeout: float = 30) -> str:
        env = dict(
            os.environ,
            NODECHECK_HARNESS_DIR=str(self.state_dir),
            NODECHECK_HARNESS_NET=self._net,
            NODECHECK_HARNESS_PORT=str(self._port),
        )
        try:
            r = subprocess.run(
                ["bash", str(self.script), *args],
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as e:
            raise HarnessError(f"ssh_nodes.sh {' '.join(args)}: timed out after {timeout} s") from e
        if r.returncode != 0:
            raise HarnessError(
                f"ssh_nodes.sh {' '.join(args)} failed (exit {r.returncode}): {r.stderr.strip() or r.stdout.strip()}"
            )
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

    def _netns_prefix(self) -> list[str]:
        """[] in the cluster's network namespace, else an nsenter into it (through a running node)."""
        env = dict(line.split("=", 1) for line in (self.state_dir / "harness.env").read_text().split())
        want = int(env["NETNS"])
        if os.stat("/proc/self/ns/net").st_ino == want:
            return []
        for n in self.nodes:
            pid = read_pid(self.node_dir(n) / "sshd.pid")
            try:
                if pid and os.stat(f"/proc/{pid}/ns/net").st_ino == want:
                    return ["nsenter", f"--net=/proc/{pid}/ns/net"]
            except OSError:
                continue
        raise HarnessError("not in the cluster's network namespace, and no running node to enter it")

    @staticmethod
    def _check_tool(tool: str) -> None:
        if not TOOL_NAME.match(tool):
            raise ValueError(f"bad tool name {tool!r}")

    def _copy_data(self, node: str, tool: str, stream: str, raw: bytes) -> Path:
        self._check_tool(tool)
        dest = self.node_dir(node) / "data" / f"{tool}.{stream}"
        atomic_write(dest, raw, 0o644)
        return dest

    def _write_tool(self, node: str, tool: str, what: str, lines: list[str]) -> Path:
        self._check_tool(tool)
        d = self.node_dir(node)
        for stream in ("stdout", "stderr"):  # drop data a previous fake of this tool left
            f = d / "data" / f"{tool}.{stream}"
            if not any(str(f) in line for line in lines):
                f.unlink(missing_ok=True)
        script = "#!/bin/sh\n# nodecheck harness fake %s on node%d: %s\n%s\n" % (
            tool,
            self._index(node),
            what.replace("\n", " "),
            "\n".join(lines),
        )
        dest = d / "bin" / tool
        atomic_write(dest, script.encode(), 0o755)
        return dest
