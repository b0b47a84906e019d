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
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "ssh_nodes.sh"
FAKE_PYNVML = HERE.parent / "fakes" / "pynvml.py"
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
        A no-op when nothing is there."""
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
        """Back to a clean cluster: no fake tools, every node up, every original host key back."""
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


def _atomic_write(dest: Path, raw: bytes, mode: int) -> None:
    """Write-then-rename, so a node running the tool never sees half a file."""
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        os.chmod(tmp, mode)
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


__all__ = ["SimCluster", "HarnessError", "SCRIPT"]
