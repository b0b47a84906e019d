"""Simulated RDMA driver: keeps one RoCE port of one simulated node current in its sysfs view.

Started by SimCluster.roce_port() (tests/harness/sim/fabric.py), one process per port, OUTSIDE the
node's mount namespace but INSIDE the cluster's network namespace, so it sees the real veth
interface that is the port's netdev. It polls the netdev (`ip -j addr show dev X`, every 25 ms), takes
the link's ups and downs from `ip -o monitor link` in the order they happened (a flap shorter than
a poll, or a driver starved on a busy machine, still goes down and up once, never twice), and
mirrors the kernel's RoCE GID cache into the node's view of /sys/class/infiniband
($S/nodes/nodeI/sys/class/infiniband, bound there inside the node):

  <ca>/node_type, node_guid, sys_image_guid
  <ca>/ports/<p>/link_layer "Ethernet", state "4: ACTIVE" | "1: DOWN", phys_state "5: LinkUp" |
      "3: Disabled", rate, lid, sm_lid, lid_mask_count, sm_sl
  <ca>/ports/<p>/gids/<0..15>            %pI6 (8 groups of 4 hex digits), all zero when empty
  <ca>/ports/<p>/gid_attrs/types/<i>     "IB/RoCE v1" | "RoCE v2"; ABSENT for an empty or pending-
                                         delete slot (the kernel answers EINVAL there)
  <ca>/ports/<p>/gid_attrs/ndevs/<i>     the netdev name; absent likewise
  <ca>/ports/<p>/counters/*              zero, written once when absent (tests overwrite them)

The GID rules are the kernel's (drivers/infiniband/core/cache.c, roce_gid_mgmt.c; see
/work/shared/context/formats.md section 1): slots 0 and 1 are reserved for the default GIDs
(fe80::EUI-64(MAC), v1 then v2); every IP address adds a v1 then a v2 entry at the lowest free
non-reserved slots (so 2/3 for the first IPv4 address); an identical valid entry is not added twice
(the EUI-64 link-local IPv6 address is the default GID); removing an address deletes its non-default
entries; the netdev going down deletes nothing. A RoCE delete is deferred while a QP still holds
the entry: the slot stays occupied, `gids/<i>` reads all zero and types/ndevs are absent.

Behaviours:
  stable          nothing holds deleted entries: a removed and re-added address gets its slots back.
                  Link down/up changes no GID.
  networkmanager  a NetworkManager stand-in: when the link goes (admin down or no carrier) it
                  removes the port's IPv4 address (`ip addr del`), whose entries are held by a live
                  QP (pending delete); when the link is back for 0.3 s it adds the address again,
                  which lands on the next free slots (4/5): the renumbering of NVIDIA/nccl#1333.
The port turns ACTIVE 0.2 s after the netdev is up with carrier (at start-up, at once).

Files are written atomically (temp file in $S/nodes/nodeI/sys/.nc-tmp, then rename), and only when
their content changes. The driver exits on SIGTERM, and by itself when its pid file is removed or
no longer names it (SimCluster.reset(), `ssh_nodes.sh fabric-clear` or `down`, which removes the
whole state dir), or when the view directory disappears.
"""

from __future__ import annotations

import argparse
import ctypes
import ipaddress
import json
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

GID_TABLE_LEN = 16
RESERVED_SLOTS = 2  # one default GID per supported type: RoCE v1 and v2
GID_TYPES = ("IB/RoCE v1", "RoCE v2")  # cache.c gid_type_str[]: v1 is added first
POLL_S = 0.025
ACTIVE_DELAY_S = 0.2
NM_READD_DELAY_S = 0.3
BEHAVIOURS = ("stable", "networkmanager")
# PMA counters of the extended-width group (formats.md section 2), all zero on a fresh port
COUNTERS = (
    "symbol_error",
    "link_error_recovery",
    "link_downed",
    "port_rcv_errors",
    "port_rcv_remote_physical_errors",
    "port_rcv_switch_relay_errors",
    "port_xmit_discards",
    "port_xmit_constraint_errors",
    "port_rcv_constraint_errors",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
    "VL15_dropped",
    "port_xmit_data",
    "port_rcv_data",
    "port_xmit_packets",
    "port_rcv_packets",
    "port_xmit_wait",
    "unicast_xmit_packets",
    "unicast_rcv_packets",
    "multicast_xmit_packets",
    "multicast_rcv_packets",
)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def pi6(gid: ipaddress.IPv6Address) -> str:
    """The kernel's %pI6: 8 groups of 4 lowercase hex digits, never compressed."""
    raw = gid.packed
    return ":".join(raw[i : i + 2].hex() for i in range(0, 16, 2))


def ip_to_gid(addr: IPAddress) -> ipaddress.IPv6Address:
    """rdma_ip2gid: an IPv4 address becomes its IPv4-mapped IPv6 address."""
    if isinstance(addr, ipaddress.IPv4Address):
        return ipaddress.IPv6Address(b"\0" * 10 + b"\xff\xff" + addr.packed)
    return addr


def eui64(mac: str) -> bytes:
    m = bytes.fromhex(mac.replace(":", ""))
    return bytes([m[0] ^ 0x02, m[1], m[2], 0xFF, 0xFE, m[3], m[4], m[5]])


def default_gid(mac: str) -> ipaddress.IPv6Address:
    """make_default_gid: fe80::/64 plus the EUI-64 interface id of the netdev's MAC."""
    return ipaddress.IPv6Address(b"\xfe\x80" + b"\0" * 6 + eui64(mac))


@dataclass
class GidEntry:
    gid: ipaddress.IPv6Address
    gid_type: str
    ndev: str
    default: bool
    pending_delete: bool = False


class GidTable:
    """One port's GID cache. hold_deleted: a live QP holds every entry, so a delete leaves the slot
    occupied (pending delete) instead of freeing it."""

    def __init__(self, hold_deleted: bool, log) -> None:
        self.slots: list[GidEntry | None] = [None] * GID_TABLE_LEN
        self.hold_deleted = hold_deleted
        self.log = log

    def add(self, gid: ipaddress.IPv6Address, ndev: str, default: bool) -> None:
        for gid_type in GID_TYPES:
            if any(
                e and not e.pending_delete and (e.gid, e.gid_type, e.ndev) == (gid, gid_type, ndev) for e in self.slots
            ):
                continue  # identical valid entry: nothing to do
            free = [i for i, e in enumerate(self.slots) if e is None and (i < RESERVED_SLOTS) == default]
            if not free:
                self.log(f"unable to add gid {pi6(gid)} {gid_type} error=-28")
                continue
            self.slots[free[0]] = GidEntry(gid, gid_type, ndev, default)
            self.log(f"gid add [{free[0]}] {pi6(gid)} {gid_type} {ndev}")

    def delete(self, gid: ipaddress.IPv6Address, ndev: str) -> None:
        """An address went away: its (non-default) entries of every type."""
        for i, e in enumerate(self.slots):
            if e and not e.default and not e.pending_delete and (e.gid, e.ndev) == (gid, ndev):
                self._delete(i)

    def delete_all(self) -> None:
        for i, e in enumerate(self.slots):
            if e and not e.pending_delete:
                self._delete(i)

    def _delete(self, i: int) -> None:
        e = self.slots[i]
        assert e is not None
        if self.hold_deleted:
            e.pending_delete = True
            self.log(f"gid del [{i}] {pi6(e.gid)} {e.gid_type}: pending delete (held by a QP)")
        else:
            self.slots[i] = None
            self.log(f"gid del [{i}] {pi6(e.gid)} {e.gid_type}: slot free")

    def files(self) -> dict[str, str | None]:
        """Relative to ports/<p>/: content, or None for a file that must not exist."""
        out: dict[str, str | None] = {}
        for i, e in enumerate(self.slots):
            valid = e is not None and not e.pending_delete
            out[f"gids/{i}"] = pi6(e.gid if valid else ipaddress.IPv6Address(0)) + "\n"
            out[f"gid_attrs/types/{i}"] = e.gid_type + "\n" if valid else None
            out[f"gid_attrs/ndevs/{i}"] = e.ndev + "\n" if valid else None
        return out


@dataclass(frozen=True)
class Netdev:
    exists: bool
    admin_up: bool = False
    carrier: bool = False
    mac: str | None = None
    addrs: tuple[IPAddress, ...] = ()  # IPv4 first, then IPv6 (the kernel's add order)

    @property
    def link_ok(self) -> bool:
        return self.exists and self.admin_up and self.carrier


def read_netdev(name: str) -> Netdev:
    r = subprocess.run(["ip", "-j", "addr", "show", "dev", name], capture_output=True, text=True)
    if r.returncode != 0:
        return Netdev(exists=False)
    info = json.loads(r.stdout or "[]")
    if not info:
        return Netdev(exists=False)
    link = info[0]
    flags = set(link.get("flags", ()))
    addrs = [ipaddress.ip_address(a["local"]) for a in link.get("addr_info", ()) if "local" in a]
    addrs.sort(key=lambda a: a.version)
    return Netdev(True, "UP" in flags, has_carrier(flags), link.get("address"), tuple(addrs))


def has_carrier(flags: set[str]) -> bool:
    # a veth whose peer went down passes through <NO-CARRIER,...,UP,LOWER_UP>: no carrier yet
    return "LOWER_UP" in flags and "NO-CARRIER" not in flags


# `ip -o monitor link`: "3: rnic2@if4: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu ..." ("Deleted 3: ..." when gone)
_LINK_EVENT = re.compile(r"^(Deleted )?\d+: ([^:@\s]+)(?:@\S+)?: <([^>]*)>")


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the driver dies, however (a SIGKILLed driver would
    otherwise leave its `ip monitor` running in the cluster's network namespace)."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class LinkEvents:
    """The netdev's link state changes, in order, from `ip -o monitor link` (None where it cannot run:
    the polls alone then see the link, as before)."""

    def __init__(self, netdev: str) -> None:
        self.netdev = netdev
        self.changes: queue.SimpleQueue[bool] = queue.SimpleQueue()
        try:
            self.proc: subprocess.Popen | None = subprocess.Popen(
                ["ip", "-o", "monitor", "link"],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                preexec_fn=_die_with_parent,  # no thread runs yet: safe here
            )
        except OSError:
            self.proc = None
            return
        threading.Thread(target=self._read, name="link-events", daemon=True).start()

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            m = _LINK_EVENT.match(line)
            if m and m[2] == self.netdev and not m[1]:
                flags = set(m[3].split(","))
                self.changes.put("UP" in flags and has_carrier(flags))

    def since_last(self) -> list[bool]:
        """Each link state reported since the last call, oldest first."""
        got = []
        while True:
            try:
                got.append(self.changes.get_nowait())
            except queue.Empty:
                return got

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()


class SysfsWriter:
    """Writes the port's files atomically, and only what changed since the last write."""

    def __init__(self, root: Path, tmp_dir: Path) -> None:
        self.root, self.tmp_dir = root, tmp_dir
        self.written: dict[str, str | None] = {}

    def sync(self, files: dict[str, str | None]) -> None:
        for rel, text in files.items():
            if rel in self.written and self.written[rel] == text:
                continue
            dest = self.root / rel
            if text is None:
                dest.unlink(missing_ok=True)
            else:
                self.write(dest, text)
            self.written[rel] = text

    def write(self, dest: Path, text: str) -> None:
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.tmp_dir, prefix=dest.name + ".")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(text)
            os.chmod(tmp, 0o444)  # sysfs attributes read as r--r--r--
            os.replace(tmp, dest)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


class Driver:
    def __init__(self, a: argparse.Namespace) -> None:
        self.a = a
        self.view = Path(a.view)
        self.port_dir = f"{a.ca}/ports/{a.port}"
        tmp_dir = self.view.parents[1] / ".nc-tmp"  # same filesystem as the view, outside it
        tmp_dir.mkdir(exist_ok=True)
        self.writer = SysfsWriter(self.view, tmp_dir)
        self.table = GidTable(hold_deleted=a.behaviour == "networkmanager", log=self.log)
        self.nm_address = ipaddress.ip_interface(a.address)
        self.nm_removed = False
        self.prev = Netdev(exists=False)
        self.link_up_since: float | None = None

    def log(self, msg: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {self.a.node} {self.a.ca}/{self.a.port}: {msg}", flush=True)

    def owned(self) -> bool:
        try:
            return Path(self.a.pid_file).read_text().strip() == str(os.getpid()) and self.view.is_dir()
        except OSError:
            return False

    def on_netdev(self, cur: Netdev) -> None:
        """The kernel's reaction to netdev and address events, from two successive polls."""
        prev, t, nd = self.prev, self.table, self.a.netdev
        if not cur.exists:
            if prev.exists:
                self.log("netdev gone: all GIDs deleted")
                t.delete_all()
            return
        if not prev.exists or prev.mac != cur.mac:  # REGISTER, or CHANGEADDR
            if prev.exists:
                self.log(f"MAC {prev.mac} -> {cur.mac}: all GIDs deleted and added again")
                t.delete_all()
            self.add_all(cur)
            return
        if cur.admin_up and not prev.admin_up:  # NETDEV_UP: default + every address
            self.add_all(cur)
        for addr in prev.addrs:
            if addr not in cur.addrs:
                self.log(f"address {addr} removed")
                t.delete(ip_to_gid(addr), nd)
        for addr in cur.addrs:
            if addr not in prev.addrs:
                self.log(f"address {addr} added")
                t.add(ip_to_gid(addr), nd, default=False)

    def add_all(self, cur: Netdev) -> None:
        if cur.mac:
            self.table.add(default_gid(cur.mac), self.a.netdev, default=True)
        for addr in cur.addrs:
            self.table.add(ip_to_gid(addr), self.a.netdev, default=False)

    def network_manager(self, cur: Netdev, now: float) -> None:
        dev, addr = self.a.netdev, str(self.nm_address)
        if cur.exists and not cur.link_ok and self.nm_address.ip in cur.addrs:
            self.log(f"NetworkManager: link lost, ip addr del {addr} dev {dev}")
            if self.ip("addr", "del", addr, "dev", dev):
                self.nm_removed = True
        elif (
            cur.link_ok
            and self.nm_removed
            and self.link_up_since is not None
            and now - self.link_up_since >= NM_READD_DELAY_S
        ):
            self.log(f"NetworkManager: link back, ip addr add {addr} dev {dev}")
            if self.nm_address.ip in cur.addrs or self.ip("addr", "add", addr, "dev", dev):
                self.nm_removed = False

    def ip(self, *args: str) -> bool:
        r = subprocess.run(["ip", *args], capture_output=True, text=True)
        if r.returncode:
            self.log(f"ip {' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")
        return r.returncode == 0

    def port_files(self, active: bool) -> dict[str, str | None]:
        p = self.port_dir
        files: dict[str, str | None] = {
            f"{p}/link_layer": "Ethernet\n",
            f"{p}/state": "4: ACTIVE\n" if active else "1: DOWN\n",
            f"{p}/phys_state": "5: LinkUp\n" if active else "3: Disabled\n",
            f"{p}/rate": self.a.rate + "\n",
            f"{p}/lid": "0x0\n",
            f"{p}/sm_lid": "0x0\n",
            f"{p}/lid_mask_count": "0\n",
            f"{p}/sm_sl": "0\n",
        }
        files.update({f"{p}/{rel}": text for rel, text in self.table.files().items()})
        return files

    def device_files(self, mac: str | None) -> dict[str, str | None]:
        files: dict[str, str | None] = {f"{self.a.ca}/node_type": "1: CA\n"}
        if mac:
            guid = eui64(mac).hex()
            guid = ":".join(guid[i : i + 4] for i in range(0, 16, 4)) + "\n"
            files[f"{self.a.ca}/node_guid"] = files[f"{self.a.ca}/sys_image_guid"] = guid
        return files

    def write_counters(self) -> None:
        for name in COUNTERS:
            dest = self.view / self.port_dir / "counters" / name
            if not dest.exists():
                self.writer.write(dest, "0\n")

    def run(self) -> int:
        ready = Path(self.a.ready_file)
        events = LinkEvents(self.a.netdev)  # listening before the first poll: no change falls between
        link_ok: bool | None = None  # the link as the events tell it, in order
        try:
            first = True
            while self.owned():
                cur = read_netdev(self.a.netdev)
                if link_ok is None or events.proc is None:
                    link_ok = cur.link_ok
                    events.since_last()  # the poll has seen these
                    steps = [cur]
                else:
                    # every change the events saw, each its own step, even those no poll caught
                    steps = []
                    for state in events.since_last():
                        if state != link_ok:
                            link_ok = state
                            steps.append(_with_link(cur, state))
                    steps = steps or [_with_link(cur, link_ok)]
                for step in steps:
                    if not self.step(step, time.monotonic(), first, ready):
                        return self.exit()
                    first = False
                time.sleep(POLL_S)
            return self.exit()
        finally:
            events.stop()

    def exit(self) -> int:
        self.log("exiting: pid file or view gone")
        return 0

    def step(self, cur: Netdev, now: float, first: bool, ready: Path) -> bool:
        """The kernel's (and NetworkManager's) reaction to one state of the netdev; False: the view is gone."""
        self.on_netdev(cur)
        if cur.link_ok and self.link_up_since is None:
            # at start-up the port is trained already; later it takes ACTIVE_DELAY_S
            self.link_up_since = now - ACTIVE_DELAY_S if first else now
            if not first:
                self.log("link up")
        elif not cur.link_ok and self.link_up_since is not None:
            self.link_up_since = None
            self.log("link down")
        if self.a.behaviour == "networkmanager":
            self.network_manager(cur, now)
        active = self.link_up_since is not None and now - self.link_up_since >= ACTIVE_DELAY_S
        try:
            self.writer.sync({**self.device_files(cur.mac), **self.port_files(active)})
            if first:
                self.write_counters()
                self.writer.write(ready, f"{os.getpid()}\n")
                self.log(f"ready: netdev {self.a.netdev}, behaviour {self.a.behaviour}")
        except FileNotFoundError:
            if not self.owned():
                return False
            raise
        self.prev = cur
        return True


def _with_link(cur: Netdev, link_ok: bool) -> Netdev:
    """The polled netdev with the link as the events tell it (a down may be one no poll caught)."""
    if not cur.exists or cur.link_ok == link_ok:
        return cur
    return replace(cur, admin_up=True, carrier=True) if link_ok else replace(cur, carrier=False)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--node", required=True)
    ap.add_argument("--view", required=True, help="the node's /sys/class/infiniband directory")
    ap.add_argument("--ca", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--netdev", required=True)
    ap.add_argument("--address", required=True, help="the port's IPv4 address/prefix (NetworkManager's)")
    ap.add_argument("--behaviour", choices=BEHAVIOURS, required=True)
    ap.add_argument("--rate", required=True)
    ap.add_argument("--pid-file", required=True)
    ap.add_argument("--ready-file", required=True)
    a = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    Path(a.pid_file).write_text(f"{os.getpid()}\n")
    return Driver(a).run()


if __name__ == "__main__":
    sys.exit(main())
