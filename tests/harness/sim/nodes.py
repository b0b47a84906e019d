"""The nodes themselves: each a real sshd with its own host key in its own mount and UTS namespace.
Start and stop them, change a host key, drop, reset or freeze SSH sessions, see what runs on a node,
and log in (paramiko) to run a command."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
from collections.abc import Collection
from pathlib import Path
from typing import TypeVar

from harness.sim.base import ClusterBase
from harness.sim.common import atomic_write, read_pid, read_pids

_C = TypeVar("_C", bound="Nodes")


class Nodes(ClusterBase):
    """Each node a real sshd: its lifecycle, host key, SSH sessions, processes, and a client to it."""

    def up(self: _C, n: int) -> _C:
        """Start node1..node<n> (1 <= n <= 254). Raises HarnessError if already up or on failure
        (a failed up leaves nothing running)."""
        self._sh("up", str(int(n)), timeout=60 + n)
        return self

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

    def pid(self, node: str) -> int:
        """The node's sshd pid; `nsenter -t <pid> -u -m CMD` runs CMD "on" the node."""
        return int(self._sh("pid", node).strip())

    def status(self) -> dict[str, bool]:
        """{node: sshd running}."""
        out = self._sh("status")
        return {f[0]: f[2] == "up" for f in (line.split() for line in out.splitlines())}

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

    def kill_ssh_sessions(self, node: str) -> int:
        """Kill the node's per-connection sshd processes (not its listener), as if the clients'
        network dropped: their connections close; processes started with setsid keep running.
        Returns how many were killed."""
        return int(self._sh("drop-sessions", node).strip())

    def reset_ssh_connections(self, node: str) -> int:
        """TCP reset of every established connection to the node's sshd (`ss -K`, the kernel's
        socket destroy: the client gets ECONNRESET mid-stream). Returns how many sockets went;
        0 means the kernel lacks CONFIG_INET_DIAG_DESTROY (use kill_ssh_sessions instead)."""
        addr = self.address(node)
        query = ["state", "established", "(", "src", f"{addr}:{self.port}", ")"]
        before = (
            subprocess.run([*self._netns_prefix(), "ss", "-Htn", *query], capture_output=True, text=True, timeout=10)
            .stdout.strip()
            .splitlines()
        )
        subprocess.run([*self._netns_prefix(), "ss", "-K", "-Htn", *query], capture_output=True, timeout=10)
        after = (
            subprocess.run([*self._netns_prefix(), "ss", "-Htn", *query], capture_output=True, text=True, timeout=10)
            .stdout.strip()
            .splitlines()
        )
        return len(before) - len(after)

    def hang_ssh(self, node: str) -> int:
        """The node stops answering SSH while it keeps working: SIGSTOP its sshd listener and every
        per-connection sshd process. A new connection is accepted by the kernel but never gets a
        banner (the client times out); open sessions freeze; what they started, and the training,
        keep running. Undo with unhang_ssh() (reset(), stop() and down() do). Returns how many
        processes were stopped."""
        name = f"node{self._index(node)}"
        stopped: set[int] = set()
        for _ in range(2):  # a second pass catches a session forked while the first one ran
            for pid in self._sshd_processes(name):
                if pid not in stopped:
                    os.kill(pid, signal.SIGSTOP)
                    stopped.add(pid)
        hung = self.node_dir(name) / "ssh_hung"
        old = set(read_pids(hung))
        atomic_write(hung, "".join(f"{p}\n" for p in sorted(stopped | old)).encode(), 0o644)
        return len(stopped)

    def unhang_ssh(self, node: str | None = None) -> None:
        """SIGCONT what hang_ssh() stopped (one node, or every node): the node answers again."""
        for n in [f"node{self._index(node)}"] if node else self.nodes:
            hung = self.node_dir(n) / "ssh_hung"
            if not hung.exists():
                continue
            for pid in set(read_pids(hung)) | set(self._sshd_processes(n)):
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

    def node_processes(self, node: str, ignore: Collection[str] = ("slurmd", "slurmstepd")) -> list[tuple[int, str]]:
        """(pid, command line) of every process "on" the node (in its mount namespace; the nodes
        share one PID namespace) except its sshd listener and daemons named in `ignore`: what a
        run left behind on the node."""
        name = f"node{self._index(node)}"
        try:
            ns = int((self.node_dir(name) / "mntns").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return []
        listener = read_pid(self.node_dir(name) / "sshd.pid")
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

    def _install_node_pgrep(self) -> None:
        """Every simulated node shares the host's PID namespace, so a plain `pgrep -f 'train\\.py'` on
        node1 would also find node2's trainer. On a real node it finds that node's only; this pgrep
        (a wrapper in the node's /usr/local/sbin, first in PATH) keeps to the processes in the
        node's own mount namespace, which is what "on the node" means here."""
        real = "/usr/bin/pgrep" if os.access("/usr/bin/pgrep", os.X_OK) else (shutil.which("pgrep") or "pgrep")
        for n in self.nodes:
            self._write_tool(
                n,
                "pgrep",
                "only this node's processes (the nodes share one PID namespace)",
                [f'exec {shlex.quote(real)} --ns $$ --nslist mnt "$@"'],
            )

    def connect(self, node: str, known_hosts: str | os.PathLike | None = None, timeout: float = 10):
        """A paramiko SSHClient logged in to the node with strict host-key checking (RejectPolicy)."""
        import paramiko

        c = paramiko.SSHClient()
        c.load_host_keys(str(known_hosts or self.known_hosts))
        c.set_missing_host_key_policy(paramiko.RejectPolicy())
        try:
            c.connect(
                self.address(node),
                port=self.port,
                username="root",
                key_filename=str(self.identity_file),
                look_for_keys=False,
                allow_agent=False,
                timeout=timeout,
                banner_timeout=timeout,
                auth_timeout=timeout,
            )
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
            return out.channel.recv_exit_status(), stdout.decode(errors="replace"), stderr.decode(errors="replace")
        finally:
            c.close()
