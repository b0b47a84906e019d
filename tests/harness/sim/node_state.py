"""The node itself (see "The node itself" in tests/harness/README.md): what ssh_nodes.sh gives every node at
start (a FUSE mount at /mnt/shared served by tests/fakes/hangfs.py, its own 2 GiB /dev/shm, /proc/meminfo
and the EDAC tree under /sys/devices/system/edac from $S/node-default), and the faults on them: a hung
mount, a full /dev/shm, a file bound over /proc, EDAC counters, services (processes named like the
daemons, no systemd), slurmd's memlock limit and a clock that is off.

Every fault that changes the node's mounts is made inside the node (nsenter into its mount namespace)
and writes the shell line that undoes it to <node>/undo, which `ssh_nodes.sh reset` runs in the node
(last line first); a stopped node loses them with its namespace."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath

from harness.sim.common import HarnessError, atomic_write, read_pid
from harness.sim.nodes import Nodes

HANG_MODES = ("pending", "held")
# name -> argv[0] of the fake daemon (its comm is the name, cut to 15 characters by the kernel)
SERVICES = {
    "nvidia-persistenced": "/usr/bin/nvidia-persistenced",
    "munged": "/usr/sbin/munged",
    "chronyd": "/usr/sbin/chronyd",
    "slurmd": "/usr/sbin/slurmd",
}
# the limits slurmd.service gives slurmd (LimitNOFILE=131072, LimitMEMLOCK=infinity, LimitSTACK=infinity,
# slurm-wlm's etc/slurmd.service.in), which its job steps inherit; where the harness may not raise a hard
# limit (no CAP_SYS_RESOURCE: a container), the hard limit it has
# the NVIDIA daemons a GPU node may run (issue 20): started only where a scenario asks for them
NVIDIA_DAEMONS = {"nv-fabricmanager": "/usr/bin/nv-fabricmanager"}
DAEMONS = {**SERVICES, **NVIDIA_DAEMONS}
# where a node's NVIDIA user-space driver libraries lie (a per-node tmpfs; the fake ldconfig names
# them there): never over the real /usr/lib, which holds the node's own libc and Python
NVIDIA_LIB_DIR = "/opt/nodecheck-sim/nvidia-lib"
SLURMD_ULIMITS = (
    "{ ulimit -l unlimited || ulimit -l $(ulimit -H -l); ulimit -n 131072 || ulimit -n $(ulimit -H -n); "
    "ulimit -s unlimited || ulimit -s $(ulimit -H -s); } 2>/dev/null"
)
SHM_FILL = "/dev/shm/.nodecheck-harness-fill"
EDAC_UNDO = "umount -l /sys/devices/system/edac"


class NodeState(Nodes):
    """Mounts, /proc, EDAC, services and the clock of a node."""

    # -- running things inside a node
    def _node_pid(self, node: str) -> int:
        pid = read_pid(self.node_dir(node) / "sshd.pid")
        if pid is None:
            raise HarnessError(f"{node} is not running")
        return pid

    def in_node(self, node: str, script: str, *args: str, timeout: float = 20) -> str:
        """Run a /bin/sh script inside the node's mount and UTS namespaces (as root); its stdout."""
        cmd = ["nsenter", "-t", str(self._node_pid(node)), "-u", "-m", "--", "/bin/sh", "-c", script, "sh", *args]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            raise HarnessError(f"{node}: {script.splitlines()[0]}...: exit {r.returncode}: {r.stderr.strip()}")
        return r.stdout

    def _undo(self, node: str, line: str) -> None:
        with open(self.node_dir(node) / "undo", "a") as f:
            f.write(line + "\n")

    # -- /mnt/shared (tests/fakes/hangfs.py)
    def mount_state(self, node: str) -> str:
        """What the shared filesystem's server says of the node: "serving MNTNS", "hung pending MNTNS",
        "hung held MNTNS PARKED", "gone" or "error ..."."""
        try:
            return (self.node_dir(node) / "shared" / "state").read_text().strip()
        except FileNotFoundError:
            return ""

    def _hangfs_signal(self) -> None:
        pid = read_pid(self.state_dir / "hangfs.pid")
        if pid is None:
            raise HarnessError("the shared filesystem's server is not running (no hangfs.pid)")
        os.kill(pid, signal.SIGUSR1)

    def _wait_mount(self, node: str, prefix: str, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while not (state := self.mount_state(node)).startswith(prefix):
            if time.monotonic() > deadline:
                raise HarnessError(f"{node}: /mnt/shared is {state!r}, expected {prefix!r}...")
            time.sleep(0.01)

    def hang_mount(self, node: str, mode: str = "pending") -> None:
        """/mnt/shared stops answering on the node: every stat/statfs/open of it blocks in the kernel.
        "pending": the server stops reading the node's requests (a stopped FUSE daemon, an unreachable
        NFS server): the caller sleeps killably, SIGKILL (or timeout's SIGTERM) ends it. "held": the
        server takes each request and never answers: a killed caller stays in State D until
        release_mount() (a hard-mounted NFS client; the process "the kernel holds")."""
        if mode not in HANG_MODES:
            raise ValueError(f"mode must be one of {HANG_MODES}, not {mode!r}")
        atomic_write(self.node_dir(node) / "shared" / "hang", f"{mode}\n".encode(), 0o644)
        self._hangfs_signal()
        self._wait_mount(node, f"hung {mode} ")

    def release_mount(self, node: str | None = None) -> None:
        """/mnt/shared answers again (held requests are answered now)."""
        for n in [node] if node else self.nodes:
            hang = self.node_dir(n) / "shared" / "hang"
            if hang.exists():
                hang.unlink()
                self._hangfs_signal()
                if self.status().get(f"node{self._index(n)}"):
                    self._wait_mount(n, "serving ")

    # -- /dev/shm
    def fill_shm(self, node: str, leave_bytes: int = 0) -> None:
        """Fill the node's /dev/shm (a 2 GiB tmpfs) up to `leave_bytes` free: one file, allocated
        (fallocate: the pages are really taken). Undone by reset()."""
        self.in_node(
            node,
            'avail=$(stat -f -c "%a * %S" /dev/shm) && n=$(( $avail - $2 )) && [ "$n" -gt 0 ] && '
            'fallocate -l "$n" "$1"',
            SHM_FILL,
            str(int(leave_bytes)),
        )
        self._undo(node, f"rm -f {SHM_FILL}")

    # -- /proc
    def fake_proc(self, node: str, relpath: str, text: str | bytes) -> Path:
        """The node's /proc/<relpath> (an existing file: meminfo, cmdline, loadavg, sys/vm/max_map_count)
        shows `text`: a file bound over it inside the node. Returns that file. Undone by reset()."""
        rel = PurePosixPath(relpath)
        if rel.is_absolute() or ".." in rel.parts or not rel.parts or any(c in relpath for c in "\n\0"):
            raise ValueError(f"bad /proc path {relpath!r} (relative, e.g. 'meminfo')")
        d = self.node_dir(node) / "proc"
        d.mkdir(exist_ok=True)
        n = len(list(d.iterdir()))
        src = d / f"{n}-{'%'.join(rel.parts)}"  # a new file per bind: the bind holds its inode
        atomic_write(src, text.encode() if isinstance(text, str) else text, 0o444)
        self.in_node(node, '[ -f "$2" ] && mount --bind "$1" "$2"', str(src), f"/proc/{rel}")
        self._undo(node, f"umount -l {shlex.quote(f'/proc/{rel}')}")
        return src

    def fake_nvidia_driver(self, node: str, proc_version: bytes, libs: Mapping[str, int | str]) -> None:
        """The node's NVIDIA driver as nvidia.libraries reads it: /proc/driver/nvidia/version shows
        `proc_version` (a tmpfs over /proc/driver in the node), and NVIDIA_LIB_DIR holds `libs`
        (a tmpfs in the node): {file name: size in bytes (a file of that size, 0 = empty) or the
        name of the file a symbolic link points to}. Undone by reset()."""
        script = (
            "mount -t tmpfs -o size=1m,mode=0755 nodecheck-sim /proc/driver && mkdir /proc/driver/nvidia && "
            'cat "$1" > /proc/driver/nvidia/version && mkdir -p "$2" && '
            'mount -t tmpfs -o size=64m,mode=0755 nodecheck-sim "$2" && shift 2 && '
            "for spec do name=${spec%%=*}; what=${spec#*=}; case $what in "
            '[0-9]*) truncate -s "$what" "$NC_DIR/$name" ;; *) ln -s "$what" "$NC_DIR/$name" ;; esac; done'
        )
        for name in libs:
            if "/" in name or "=" in name or not name.startswith("lib"):
                raise ValueError(f"bad library file name {name!r}")
        version = self.node_dir(node) / "proc-driver-nvidia-version"
        atomic_write(version, proc_version, 0o444)
        specs = [f"{name}={what}" for name, what in libs.items()]
        self.in_node(node, f"NC_DIR={shlex.quote(NVIDIA_LIB_DIR)}; " + script, str(version), NVIDIA_LIB_DIR, *specs)
        self._undo(node, f"umount -l {shlex.quote(NVIDIA_LIB_DIR)}; umount -l /proc/driver")

    def fake_meminfo(self, node: str, data_file: str | os.PathLike) -> Path:
        """The node's /proc/meminfo replays `data_file` (e.g. a DIMM missing)."""
        return self.fake_proc(node, "meminfo", Path(data_file).read_bytes())

    # -- EDAC
    def edac_dir(self, node: str) -> Path:
        """The node's own copy of /sys/devices/system/edac (made by the first fake_edac())."""
        return self.node_dir(node) / "edac"

    def fake_edac(self, node: str, files: Mapping[str, str | bytes | None]) -> Path:
        """Change the node's EDAC tree: {path under /sys/devices/system/edac: content, or None to
        remove the file or directory}, e.g. {"mc/mc0/ce_count": "12\n", "mc/mc3/dimm3": None}. The
        first call gives the node its own copy of the default tree (8 controllers x 4 DIMMs, counters
        0), bound over the shared one inside the node."""
        root = self.edac_dir(node)
        undo = self.node_dir(node) / "undo"
        if not root.exists():
            shutil.copytree(self.state_dir / "node-default" / "edac", root)
        if EDAC_UNDO not in (undo.read_text() if undo.exists() else ""):  # not bound in this namespace yet
            self.in_node(node, 'mount --bind "$1" /sys/devices/system/edac', str(root))
            self._undo(node, EDAC_UNDO)
        for relpath, text in files.items():
            rel = PurePosixPath(relpath)
            if rel.is_absolute() or ".." in rel.parts or not rel.parts:
                raise ValueError(f"bad EDAC path {relpath!r} (relative to /sys/devices/system/edac)")
            dest = root.joinpath(*rel.parts)
            if text is None:
                if dest.is_dir():
                    shutil.rmtree(dest)
                else:
                    dest.unlink(missing_ok=True)
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(dest, text.encode() if isinstance(text, str) else text, 0o444)
        return root

    # -- services
    def start_services(
        self, node: str | None = None, names: Sequence[str] = tuple(SERVICES), timeout: float = 5.0
    ) -> dict[str, dict[str, int]]:
        """Processes named like the daemons in each node's namespaces (no systemd on the nodes): a
        `sleep infinity` exec'd from a root-owned copy of sleep called by the daemon's name, in a
        root-owned directory no one else may write (nodecheck takes a process for a daemon only when
        its binary is so: a symlink's name is no daemon), with the daemon's path as argv[0]. slurmd
        gets slurmd.service's limits (memlock unlimited, nofile 131072, stack unlimited; each
        at most the hard limit the harness has where it may not raise one): its job steps inherit them.
        Not started by default: the real Slurm of slurm_cluster.sh runs its own slurmd. Returns
        {node: {name: pid}}."""
        sleep = shutil.which("sleep") or "/bin/sleep"
        started = {}
        for n in [node] if node else self.nodes:
            d = self.node_dir(n) / "services"
            d.mkdir(exist_ok=True)
            d.chmod(0o755)
            specs = []
            for name in names:
                if name not in DAEMONS:
                    raise ValueError(f"unknown service {name!r} (known: {', '.join(DAEMONS)})")
                binary = d / name
                if binary.is_symlink():  # a state dir of before: the name only, not the daemon's binary
                    binary.unlink()
                if not binary.exists():
                    shutil.copy(sleep, binary)
                    binary.chmod(0o755)
                (d / f"{name}.pid").unlink(missing_ok=True)
                specs.append(f"{name}={DAEMONS[name]}")
            script = (
                "d=$1; shift; for spec do name=${spec%%=*}; argv0=${spec#*=}\n"
                f'  ( [ "$name" != slurmd ] || {SLURMD_ULIMITS}; exec -a "$argv0" "$d/$name" infinity ) '
                "</dev/null >/dev/null 2>&1 &\n"
                '  echo $! > "$d/$name.pid"; done'
            )
            subprocess.run(
                [
                    "nsenter",
                    "-t",
                    str(self._node_pid(n)),
                    "-u",
                    "-m",
                    "--",
                    "setsid",
                    "/bin/bash",
                    "-c",
                    script,
                    "bash",
                    str(d),
                    *specs,
                ],
                check=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
                capture_output=True,
            )
            pids = {}
            deadline = time.monotonic() + timeout
            for name in names:
                while (pid := self.service_pid(n, name)) is None:  # until the subshell exec'd the daemon
                    if time.monotonic() > deadline:
                        raise HarnessError(f"{n}: fake {name} did not start")
                    time.sleep(0.005)
                pids[name] = pid
                self._undo(
                    n, f'[ "$(cat /proc/{pid}/comm 2>/dev/null)" != {shlex.quote(name[:15])} ] || kill -KILL {pid}'
                )
            started[n] = pids
        return started

    def service_pid(self, node: str, name: str) -> int | None:
        """The pid of the node's fake `name`, if it runs."""
        pid = read_pid(self.node_dir(node) / "services" / f"{name}.pid")
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip() if pid else ""
        except OSError:
            return None
        return pid if comm == name[:15] else None

    def stop_service(self, node: str, name: str) -> None:
        """The service is not running on the node (its process is killed)."""
        pid = self.service_pid(node, name)
        if pid is None:
            raise HarnessError(f"{node}: no fake {name} running")
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while self.service_pid(node, name) and time.monotonic() < deadline:
            time.sleep(0.01)

    def limit_memlock(self, node: str, nbytes: int) -> None:
        """The node's slurmd runs with memlock limited to `nbytes` (soft and hard): its jobs cannot
        register more memory for RDMA (prlimit on the running fake slurmd)."""
        pid = self.service_pid(node, "slurmd")
        if pid is None:
            raise HarnessError(f"{node}: no fake slurmd running (start_services first)")
        subprocess.run(["prlimit", "--pid", str(pid), f"--memlock={int(nbytes)}:{int(nbytes)}"], check=True, timeout=10)

    # -- files of the node's own
    def make_dir(self, node: str, path: str) -> Path:
        """A directory in the node's own /root (e.g. a site's "node prepared" marker), removed by reset()."""
        rel = PurePosixPath(path).relative_to("/root")
        if ".." in rel.parts or not rel.parts:
            raise ValueError(f"bad path {path!r} (a directory under /root)")
        dest = self.node_dir(node) / "home" / rel
        dest.mkdir(parents=True, exist_ok=True)
        self._undo(node, f"rm -rf {shlex.quote(path)}")
        return dest

    # -- the clock
    def clock_offset(self, node: str, seconds: float) -> Path:
        """The node's `date` (a fake in its /usr/local/sbin, first in PATH) prints the real time plus
        `seconds` (GNU date's relative item: nanoseconds kept, so `date +%s.%N` is off by exactly that);
        with -d/-s/-r/-f it is the real date. remove_tool(node, "date") or reset() undoes it."""
        real = "/bin/date" if os.access("/bin/date", os.X_OK) else (shutil.which("date") or "date")
        return self._write_tool(
            node,
            "date",
            f"the real time {float(seconds):+g} s",
            [
                "for a do case $a in -d*|--date*|-s*|--set*|-r*|--reference*|-f*|--file*)"
                f' exec {real} "$@" ;; esac; done',
                f'exec {real} -d "{float(seconds):+g} seconds" "$@"',
            ],
        )

    def clear_node_state(self) -> None:
        """Forget the per-node copies (the binds and processes go with `ssh_nodes.sh reset`'s undo)."""
        for n in self.nodes:
            d = self.node_dir(n)
            for sub in ("edac", "proc", "services"):
                if (d / sub).exists():
                    shutil.rmtree(d / sub)
