"""The simulated nodes' shared filesystem: ONE process serving a real FUSE mount at /mnt/shared in every
node's mount namespace (type fuse.hangfs), which can be made to hang per node.

    python3 hangfs.py serve STATE_DIR      (tests/harness/ssh_nodes.sh starts it; root only)

Why one process and the raw FUSE protocol (no libfuse, no fusepy): a FUSE daemon per node costs a
Python and a libfuse per node (~15 MB and ~40 ms of CPU each: 2 GB at 128 nodes); this one costs one
process whatever the cluster's size, and each node's mount is one setns() + mount() in it.

Per node i it keeps one /dev/fuse connection, mounted at /mnt/shared inside the node (the mount
namespace of <state>/nodes/nodei/sshd.pid, checked against nodei/mntns). The filesystem is an empty
directory whose statfs says 100 TiB, 40 % free. Nothing is cached by the kernel (attr/entry valid 0):
every stat of /mnt/shared is a request to this process, so a hang is seen at once.

Control, per node, through files under <state>/nodes/nodei/shared/ (SimCluster.hang_mount and
ssh_nodes.sh write them, then send this process SIGUSR1 and wait for its answer in `state`):
    hang    absent: serve.  "pending": stop reading the node's requests (they stay queued in the
            kernel, as with a stopped daemon or an unreachable NFS server; the caller waits in a
            killable sleep, so a timeout's SIGTERM/SIGKILL ends it).  "held": read them and never
            answer (the caller then waits uninterruptibly once killed: State D, the process "the
            kernel holds", as on a hard-mounted NFS client); removed: every held request is answered.
    state   written by this process after each change: "serving MNTNS", "hung pending MNTNS",
            "hung held MNTNS PARKED", "gone" (the node's namespace ended), "error TEXT".
SIGUSR1: rescan (mount into started/restarted nodes, re-read every `hang`). SIGTERM: exit; the kernel
aborts every connection when its /dev/fuse descriptor closes (waiters get ENOTCONN), so killing this
process can never leave a node blocked. It also exits when the state directory goes away.
Standard library only (it runs under the system python3).
"""

from __future__ import annotations

import ctypes
import errno
import os
import select
import signal
import stat
import struct
import sys
import time

MOUNTPOINT = "/mnt/shared"
FSTYPE = "fuse.hangfs"
CLONE_NEWNS = 0x00020000
MS_NOSUID, MS_NODEV = 2, 4
READ_SIZE = 1 << 20  # the kernel refuses reads shorter than max_write + 4 KiB

# opcodes (include/uapi/linux/fuse.h)
LOOKUP, FORGET, GETATTR, STATFS, GETXATTR, LISTXATTR, INIT = 1, 2, 3, 17, 22, 23, 26
OPENDIR, READDIR, RELEASEDIR, ACCESS, INTERRUPT, DESTROY, BATCH_FORGET = 27, 28, 29, 34, 36, 38, 42
NO_REPLY = {FORGET, BATCH_FORGET, INTERRUPT}
IN_HEADER = struct.Struct("<IIQQIIIHH")  # len opcode unique nodeid uid gid pid total_extlen padding
OUT_HEADER = struct.Struct("<IiQ")  # len error unique
ROOT_INO = 1
TiB = 1 << 40
BSIZE = 4096


def _attr(now: int) -> bytes:
    # fuse_attr: ino size blocks atime mtime ctime atimensec mtimensec ctimensec mode nlink uid gid rdev
    # blksize flags
    return struct.pack(
        "<QQQQQQIIIIIIIIII", ROOT_INO, 4096, 8, now, now, now, 0, 0, 0, stat.S_IFDIR | 0o755, 2, 0, 0, 0, BSIZE, 0
    )


def reply(op: int, body: bytes, now: int) -> tuple[int, bytes]:
    """(error, payload) for one request."""
    if op == INIT:
        major, minor, readahead, _flags = struct.unpack_from("<IIII", body)
        # fuse_init_out (64 bytes): no optional feature asked for
        out = struct.pack("<IIIIHHIIHHII", 7, min(minor, 31), readahead, 0, 16, 12, 128 * 1024, 1, 0, 0, 0, 0)
        return 0, out + bytes(64 - len(out))
    if op == GETATTR:
        return 0, struct.pack("<QII", 0, 0, 0) + _attr(now)  # attr_valid 0: never cached
    if op == LOOKUP:
        return -errno.ENOENT, b""  # an empty directory
    if op == STATFS:
        blocks = 100 * TiB // BSIZE
        free = blocks * 2 // 5
        return 0, struct.pack("<QQQQQIIII24x", blocks, free, free, 1 << 30, 1 << 29, BSIZE, 255, BSIZE, 0)
    if op == OPENDIR:
        return 0, struct.pack("<QII", 1, 0, 0)
    if op == READDIR:
        _fh, offset, size = struct.unpack_from("<QQI", body)
        out = b""
        for off, name in ((1, b"."), (2, b"..")):
            if off > offset:
                ent = struct.pack("<QQII", ROOT_INO, off, len(name), stat.S_IFDIR >> 12) + name
                out += ent + bytes(-len(ent) % 8)
        return 0, out[:size] if len(out) <= size else b""
    if op in (RELEASEDIR, DESTROY):
        return 0, b""
    return -errno.ENOSYS, b""  # ACCESS, GETXATTR, ...: the kernel then stops asking


class Node:
    def __init__(self, name: str, ctl: str) -> None:
        self.name, self.ctl = name, ctl
        self.fd: int | None = None
        self.mntns: int | None = None
        self.hang = ""  # "", "pending", "held"
        self.parked: list[tuple[int, int, bytes]] = []  # (unique, opcode, body) of held requests
        self.last_state = ""

    def write_state(self, text: str) -> None:
        if text == self.last_state:
            return
        tmp = os.path.join(self.ctl, ".state.tmp")
        with open(tmp, "w") as f:
            f.write(text + "\n")
        os.replace(tmp, os.path.join(self.ctl, "state"))
        self.last_state = text


class Server:
    def __init__(self, state_dir: str) -> None:
        self.state_dir = state_dir
        self.nodes: dict[str, Node] = {}
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.home_ns = os.open("/proc/self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
        self.rescan = True
        self.stop = False

    # -- mounting into a node's namespace (this process is single-threaded: setns(CLONE_NEWNS) needs it)
    def _setns(self, fd: int) -> None:
        if self.libc.setns(fd, CLONE_NEWNS) != 0:
            raise OSError(ctypes.get_errno(), "setns")

    def mount(self, node: Node, pid: int, mntns: int) -> None:
        dev = os.open("/dev/fuse", os.O_RDWR | os.O_CLOEXEC | os.O_NONBLOCK)
        ns = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
        try:
            if os.fstat(ns).st_ino != mntns:
                raise OSError(errno.ESRCH, f"pid {pid} is not in the node's mount namespace")
            self._setns(ns)
            try:
                os.makedirs(MOUNTPOINT, exist_ok=True)
                data = f"fd={dev},rootmode=40000,user_id=0,group_id=0,allow_other".encode()
                if self.libc.mount(b"hangfs", MOUNTPOINT.encode(), FSTYPE.encode(), MS_NOSUID | MS_NODEV, data) != 0:
                    raise OSError(ctypes.get_errno(), f"mount {FSTYPE} on {MOUNTPOINT}")
            finally:
                self._setns(self.home_ns)
                os.chdir("/")
        except BaseException:
            os.close(dev)
            raise
        finally:
            os.close(ns)
        self.drop(node)
        node.fd, node.mntns = dev, mntns

    def drop(self, node: Node) -> None:
        if node.fd is not None:
            os.close(node.fd)  # the kernel aborts the connection: any waiter gets ENOTCONN
        node.fd, node.mntns, node.parked = None, None, []

    # -- the nodes and their control files
    def scan(self) -> None:
        base = os.path.join(self.state_dir, "nodes")
        for name in sorted(os.listdir(base)):
            d = os.path.join(base, name)
            ctl = os.path.join(d, "shared")
            if not os.path.isdir(ctl):
                continue
            node = self.nodes.setdefault(name, Node(name, ctl))
            try:
                with open(os.path.join(d, "sshd.pid")) as f:
                    pid = int(f.read().split()[0])
                with open(os.path.join(d, "mntns")) as f:
                    mntns = int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                pid = mntns = 0
            if mntns and node.mntns != mntns:
                try:
                    self.mount(node, pid, mntns)
                except OSError as e:
                    self.drop(node)
                    node.write_state(f"error {e}")
                    continue
            try:
                with open(os.path.join(ctl, "hang")) as f:
                    hang = f.read().strip()
            except FileNotFoundError:
                hang = ""
            node.hang = hang if hang in ("pending", "held") else ""
            if not node.hang:
                self.answer_parked(node)
            self.report(node)

    def report(self, node: Node) -> None:
        if node.fd is None:
            if not node.last_state.startswith("error"):
                node.write_state("gone")
        elif node.hang == "held":
            node.write_state(f"hung held {node.mntns} {len(node.parked)}")
        elif node.hang:
            node.write_state(f"hung {node.hang} {node.mntns}")
        else:
            node.write_state(f"serving {node.mntns}")

    # -- the protocol
    def answer_parked(self, node: Node) -> None:
        parked, node.parked = node.parked, []
        for unique, op, body in parked:
            self.send(node, unique, *reply(op, body, int(time.time())))

    def send(self, node: Node, unique: int, error: int, payload: bytes) -> None:
        if node.fd is None:
            return
        try:
            os.write(node.fd, OUT_HEADER.pack(OUT_HEADER.size + len(payload), error, unique) + payload)
        except OSError as e:  # ENOENT: the caller was interrupted and the kernel dropped the request
            if e.errno == errno.ENODEV:
                self.drop(node)
                self.report(node)

    def serve_one(self, node: Node) -> None:
        try:
            raw = os.read(node.fd, READ_SIZE)
        except BlockingIOError:
            return
        except OSError as e:
            if e.errno in (errno.EINTR, errno.ENOENT):  # ENOENT: the request went away before we read it
                return
            self.drop(node)  # ENODEV: unmounted (the node's namespace ended) or aborted
            self.report(node)
            return
        _len, op, unique, _nodeid, *_ = IN_HEADER.unpack_from(raw)
        body = raw[IN_HEADER.size :]
        if op in NO_REPLY:
            return
        if node.hang == "held" and op != INIT:
            node.parked.append((unique, op, body))
            self.report(node)
            return
        self.send(node, unique, *reply(op, body, int(time.time())))

    def run(self) -> None:
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGUSR1, lambda *_: setattr(self, "rescan", True))
        signal.signal(signal.SIGTERM, lambda *_: setattr(self, "stop", True))
        signal.signal(signal.SIGINT, lambda *_: setattr(self, "stop", True))
        os.chdir("/")
        pid_file = os.path.join(self.state_dir, "hangfs.pid")
        with open(pid_file + ".tmp", "w") as f:
            f.write(f"{os.getpid()}\n")
        os.replace(pid_file + ".tmp", pid_file)  # ready: SIGUSR1 is handled from now on
        while not self.stop:
            if self.rescan:
                self.rescan = False
                self.scan()
            fds = {n.fd: n for n in self.nodes.values() if n.fd is not None and n.hang != "pending"}
            poller = select.poll()  # not select(): a 1,024-node cluster has fds past FD_SETSIZE
            for fd in (wake_r, *fds):
                poller.register(fd, select.POLLIN)
            try:
                ready = [fd for fd, _ in poller.poll(2000)]
            except InterruptedError:
                continue
            if not os.path.isdir(self.state_dir):
                break  # down removed the cluster
            for fd in ready:
                if fd == wake_r:
                    try:
                        os.read(wake_r, 4096)
                    except BlockingIOError:
                        pass
                elif fds[fd].fd == fd:
                    self.serve_one(fds[fd])


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[1] != "serve":
        print("usage: hangfs.py serve STATE_DIR", file=sys.stderr)
        return 2
    Server(os.path.abspath(argv[2])).run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
