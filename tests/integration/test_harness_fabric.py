"""The simulated cluster's RDMA fabric, checked over real SSH: per-node /sys/class/infiniband views,
RoCE ports kept by the simulated driver (tests/harness/rdma_driver.py), the fake ib_write_bw's TCP
rendezvous and bandwidths (tests/fakes/ib_write_bw.py), replay sequences and dropped SSH sessions."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from helpers import data

pytestmark = pytest.mark.integration

PORT_DIR = "/sys/class/infiniband/mlx5_0/ports/1"
ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"
BANNER = (
    "\n************************************\n"
    "* Waiting for client to connect... *\n"
    "************************************\n"
)
NO_SOCKET = " Unable to init the socket connection\n"
RECORDING = "perftest/dgx-spark-ib_write_bw-rdma-cm-force-link-ib-4qp-report-gbits.txt"
# what the orchestrator (nodecheck/probes/pairtest.py) passes, for one rail
ARGS = "-d {dev} -i 1 -p {port} -F --report_gbits -D 5 -s 65536 -q 4"


def wait_on_node(cluster, node: str, condition: str, then: str, timeout_s: float = 5.0):
    """One ssh command on the node: poll the shell condition every 20 ms, then run `then`."""
    loops = int(timeout_s / 0.02)
    return cluster.run(
        node,
        f"i=0; until {condition}; do i=$((i+1)); [ $i -ge {loops} ] && break; sleep 0.02; done; {then}",
        timeout=timeout_s + 10,
    )


def roce_gid(i: int) -> str:
    return f"0000:0000:0000:0000:0000:ffff:0a4d:{i:04x}"  # 10.77.0.i, IPv4-mapped


def link_local_gid(i: int) -> str:
    return f"fe80:0000:0000:0000:ba3f:d2ff:fe77:{i:04x}"  # EUI-64 of b8:3f:d2:77:00:<i>


def wait_listening(address: str, port: int, timeout_s: float = 5.0) -> None:
    """Like the orchestrator: a listener in /proc/net/tcp (the cluster shares one netns with us)."""
    a, b, c, d = (int(x) for x in address.split("."))
    want = f"{d:02X}{c:02X}{b:02X}{a:02X}:{port:04X} 00000000:0000 0A"
    deadline = time.monotonic() + timeout_s
    while want not in Path("/proc/net/tcp").read_text():
        assert time.monotonic() < deadline, f"nothing listens on {address}:{port}"
        time.sleep(0.01)


class Background:
    """A command running on a node over its own SSH session (e.g. an ib_write_bw server)."""

    def __init__(self, cluster, node: str, command: str) -> None:
        self.client = cluster.connect(node)
        self.chan = self.client.get_transport().open_session()
        self.chan.exec_command(command)

    def finish(self, timeout_s: float = 10.0) -> tuple[int, str, str]:
        self.chan.settimeout(timeout_s)
        out, err = self.chan.makefile("rb").read(), self.chan.makefile_stderr("rb").read()
        rc = self.chan.recv_exit_status()
        self.client.close()
        return rc, out.decode(), err.decode()


def result_row(output: str) -> list[str]:
    lines = output.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith(" #bytes"))
    return lines[header + 1].split()


def fake_processes(cluster) -> list[int]:
    marker = str(cluster.state_dir).encode()
    found = []
    for p in Path("/proc").iterdir():
        try:
            argv = (p / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(a.startswith(marker) and a.endswith((b"/ib_write_bw.py", b"/rdma_driver.py")) for a in argv):
            found.append(int(p.name))
    return found


# ---- sysfs view -------------------------------------------------------------------------------


def test_each_node_sees_its_own_infiniband_directory_and_the_rest_of_sys(cluster):
    cluster.fake_sysfs(
        "node1",
        {
            "mlx5_0/ports/1/link_layer": "InfiniBand\n",
            "mlx5_0/ports/1/state": "4: ACTIVE\n",
            "mlx5_0/ports/1/rate": "400 Gb/sec (4X NDR)\n",
            "mlx5_0/ports/1/counters/link_downed": "3\n",
        },
    )
    cluster.fake_sysfs("node2", {"mlx5_1/ports/1/state": "1: DOWN\n"})
    show = "ls /sys/class/infiniband; cat /sys/class/infiniband/*/ports/1/state"
    assert cluster.run("node1", show) == (0, "mlx5_0\n4: ACTIVE\n", "")
    assert cluster.run("node2", show) == (0, "mlx5_1\n1: DOWN\n", "")
    assert cluster.run("node3", "ls -A /sys/class/infiniband") == (0, "", "")  # no RDMA device
    assert cluster.run("node1", f"cat {PORT_DIR}/link_layer {PORT_DIR}/counters/link_downed") == (
        0,
        "InfiniBand\n3\n",
        "",
    )
    # a Slurm prolog enters the node's namespaces instead of ssh: same view
    r = subprocess.run(
        ["nsenter", "-t", str(cluster.pid("node2")), "-u", "-m", "cat", "/sys/class/infiniband/mlx5_1/ports/1/state"],
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert (r.returncode, r.stdout) == (0, "1: DOWN\n")
    # the rest of /sys still works: the cluster namespace's interfaces, cgroups, other classes
    rc, out, _ = cluster.run(
        "node4",
        "ls /sys/class/net; cat /sys/class/net/lo/operstate; "
        "test -d /sys/fs/cgroup && echo cgroup; ls /sys/class | grep -cx block",
    )
    assert (rc, out) == (0, "lo\nunknown\ncgroup\n1\n")
    with pytest.raises(ValueError):
        cluster.fake_sysfs("node1", {"../escape": "x"})


# ---- RoCE ports -------------------------------------------------------------------------------


def test_roce_port_files_and_stable_link_flap(cluster):
    assert cluster.roce_port("node3") == "rnic3"
    rc, out, _ = cluster.run(
        "node3",
        f"cd {PORT_DIR} && cat link_layer state phys_state rate "
        "gids/0 gids/1 gids/2 gids/3 gids/4 gids/15 gid_attrs/types/0 gid_attrs/types/1 "
        "gid_attrs/types/2 gid_attrs/types/3 gid_attrs/ndevs/3 counters/link_downed "
        "/sys/class/net/rnic3/address /sys/class/net/rnic3/carrier; "
        "ls gid_attrs/types | sort -n | tr '\\n' ' '",
    )
    assert rc == 0
    assert out.splitlines() == [
        "Ethernet",
        "4: ACTIVE",
        "5: LinkUp",
        "400 Gb/sec (4X NDR)",
        link_local_gid(3),
        link_local_gid(3),
        roce_gid(3),
        roce_gid(3),
        ZERO_GID,
        ZERO_GID,
        "IB/RoCE v1",
        "RoCE v2",
        "IB/RoCE v1",
        "RoCE v2",
        "rnic3",
        "0",
        "b8:3f:d2:77:00:03",
        "1",
        "0 1 2 3 ",
    ]
    assert cluster.run("node3", f"cat {PORT_DIR}/gid_attrs/types/4")[0] == 1  # empty slot: no file

    assert cluster.run("node3", "ip link set rnic3 down") == (0, "", "")
    rc, out, _ = wait_on_node(
        cluster,
        "node3",
        f'[ "$(cat {PORT_DIR}/state)" = "1: DOWN" ]',
        f"cat {PORT_DIR}/state {PORT_DIR}/phys_state {PORT_DIR}/gids/3 {PORT_DIR}/gid_attrs/types/3",
        timeout_s=3,
    )
    assert (rc, out) == (0, f"1: DOWN\n3: Disabled\n{roce_gid(3)}\nRoCE v2\n")  # down changes no GID
    assert cluster.run("node3", "ip link set rnic3 up") == (0, "", "")
    rc, out, _ = wait_on_node(
        cluster,
        "node3",
        f'[ "$(cat {PORT_DIR}/state)" = "4: ACTIVE" ]',
        f"cat {PORT_DIR}/state {PORT_DIR}/gids/3 {PORT_DIR}/gid_attrs/types/3 {PORT_DIR}/gids/5",
        timeout_s=3,
    )
    assert (rc, out) == (0, f"4: ACTIVE\n{roce_gid(3)}\nRoCE v2\n{ZERO_GID}\n")


def test_networkmanager_flap_moves_the_v2_gid_from_3_to_5(cluster):
    cluster.roce_port("node4", behaviour="networkmanager")
    assert cluster.run("node4", f"cat {PORT_DIR}/gids/3 {PORT_DIR}/gid_attrs/types/3")[1] == f"{roce_gid(4)}\nRoCE v2\n"
    assert cluster.run("node4", "ip link set rnic4 down") == (0, "", "")
    rc, out, _ = wait_on_node(
        cluster,
        "node4",
        "! ip -4 addr show dev rnic4 | grep -q inet",
        f"cat {PORT_DIR}/state {PORT_DIR}/gids/3; ip -4 -o addr show dev rnic4 | wc -l",
        timeout_s=3,
    )
    assert (rc, out) == (0, f"1: DOWN\n{ZERO_GID}\n0\n")  # address gone, entry pending delete
    assert cluster.run("node4", "ip link set rnic4 up") == (0, "", "")
    rc, out, _ = wait_on_node(
        cluster,
        "node4",
        f'[ "$(cat {PORT_DIR}/gids/5)" != "{ZERO_GID}" ]',
        f"cd {PORT_DIR} && cat state gids/2 gids/3 gids/4 gids/5 gid_attrs/types/4 "
        f"gid_attrs/types/5 gid_attrs/ndevs/5; cat gid_attrs/types/3 2>/dev/null || "
        f"echo no types/3; ip -4 -o addr show dev rnic4 | awk '{{print $4}}'",
        timeout_s=4,
    )
    assert (rc, out.splitlines()) == (
        0,
        [
            "4: ACTIVE",
            ZERO_GID,
            ZERO_GID,
            roce_gid(4),
            roce_gid(4),
            "IB/RoCE v1",
            "RoCE v2",
            "rnic4",
            "no types/3",
            "10.77.0.4/32",
        ],
    )


def test_a_flap_the_driver_slept_through_still_renumbers_the_networkmanager_port(cluster):
    """A busy machine can starve the driver for longer than a short flap: no poll sees the link down,
    yet NetworkManager (and so the driver) must, as the kernel's netlink events queue it."""
    cluster.roce_port("node4", behaviour="networkmanager")
    driver = int((cluster.node_dir("node4") / "rdma" / "mlx5_0-1.pid").read_text())
    os.kill(driver, signal.SIGSTOP)  # starved through the whole flap
    try:
        assert cluster.run("node4", "ip link set rnic4 down && ip link set rnic4 up") == (0, "", "")
    finally:
        os.kill(driver, signal.SIGCONT)
    rc, out, _ = wait_on_node(
        cluster,
        "node4",
        f'[ "$(cat {PORT_DIR}/gids/5)" != "{ZERO_GID}" ]',
        f"cd {PORT_DIR} && cat state gids/3 gids/5 gid_attrs/types/5",
        timeout_s=10,
    )
    assert (rc, out.splitlines()) == (0, ["4: ACTIVE", ZERO_GID, roce_gid(4), "RoCE v2"])


def test_roce_port_is_idempotent_and_reset_removes_it(cluster):
    cluster.roce_port("node5")
    pid_file = cluster.node_dir("node5") / "rdma" / "mlx5_0-1.pid"
    pid = int(pid_file.read_text())
    assert cluster.roce_port("node5") == "rnic5" and int(pid_file.read_text()) == pid
    assert cluster.roce_port("node5", ca="mlx5_1") == "rnic5x1"  # a second port
    assert (
        cluster.run("node5", "cat /sys/class/infiniband/mlx5_1/ports/1/gids/3")[1]
        == "0000:0000:0000:0000:0000:ffff:0a4d:0105\n"
    )  # 10.77.1.5
    assert cluster.roce_port("node5", rate="200 Gb/sec (4X HDR)") == "rnic5"  # new driver, new rate
    assert int(pid_file.read_text()) != pid
    assert cluster.run("node5", f"cat {PORT_DIR}/rate")[1] == "200 Gb/sec (4X HDR)\n"
    cluster.reset()
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    assert "rnic5" not in links
    assert fake_processes(cluster) == []
    assert cluster.run("node5", "ls -A /sys/class/infiniband") == (0, "", "")


# ---- replay sequence --------------------------------------------------------------------------


def test_replay_sequence_prints_file_k_on_call_k_then_stays_on_the_last(cluster, tmp_path):
    files = []
    for k, text in enumerate(["PortXmitData:....................100\n", "PortXmitData:....................900\n"]):
        files.append(tmp_path / f"perfquery{k}.txt")
        files[-1].write_text(text)
    cluster.fake_replay_sequence("node2", "perfquery", files)
    outs = [cluster.run("node2", "perfquery -x 5 1") for _ in range(3)]
    assert outs == [
        (0, "PortXmitData:....................100\n", ""),
        (0, "PortXmitData:....................900\n", ""),
        (0, "PortXmitData:....................900\n", ""),
    ]
    cluster.fake_replay_sequence("node2", "perfquery", files[:1])  # starts again
    assert cluster.run("node2", "perfquery")[1] == "PortXmitData:....................100\n"


# ---- fake ib_write_bw -------------------------------------------------------------------------


def test_ib_write_bw_server_and_client_rendezvous_over_tcp(cluster):
    cluster.fabric(test_s=0.2)
    server = Background(cluster, "node1", "ib_write_bw " + ARGS.format(dev="mlx5_0", port=18515) + " -x 3")
    wait_listening(cluster.address("node1"), 18515)
    t0 = time.monotonic()
    rc, client_out, err = cluster.run(
        "node2", "ib_write_bw " + ARGS.format(dev="mlx5_2", port=18515) + f" -x 3 {cluster.address('node1')}"
    )
    assert time.monotonic() - t0 >= 0.2  # it "ran" test_s
    assert (rc, err) == (0, "")
    s_rc, server_out, s_err = server.finish()
    assert (s_rc, s_err) == (0, "")
    # both print perftest's result for 392 Gb/s: -D 5 of 64 KiB messages, no peak in duration mode
    assert result_row(client_out) == result_row(server_out) == ["65536", "3738403", "0.00", "392.00", "0.747681"]
    assert server_out.startswith(BANNER + "-" * 87 + "\n                    RDMA_Write BW Test\n")
    assert " Dual-port       : OFF          Device         : mlx5_0\n" in server_out
    assert " Dual-port       : OFF          Device         : mlx5_2\n" in client_out
    assert " Number of qps   : 4            Transport type : IB\n" in client_out
    assert " TX depth        : 128\n" in client_out and " TX depth" not in server_out
    # one line per QP and side; the server's remote QPs are the client's local ones
    local = [ln for ln in client_out.splitlines() if ln.startswith(" local address")]
    remote = [ln.replace("remote", "local") for ln in server_out.splitlines() if ln.startswith(" remote address")]
    assert len(local) == 4 and local == [ln.replace(" remote", " local") for ln in remote]
    assert re.fullmatch(
        r" local address: LID 0000 QPN 0x[0-9a-f]{4} PSN 0x[0-9a-f]+ RKey 0x[0-9a-f]{6} "
        r"VAddr 0x[0-9a-f]{14}",
        local[0],
    )


def test_ib_write_bw_output_is_the_recordings_shape(cluster):
    """The recorded client command, at the recorded bandwidth: the recording, but for QPN/PSN values."""
    cluster.fabric(default_gbps=111.71, devices=["rocep1s0f1"], test_s=0.05)
    server = Background(cluster, "node7", "ib_write_bw -d rocep1s0f1 --report_gbits -q 4 -R --force-link IB")
    wait_listening(cluster.address("node7"), 18515)
    rc, out, err = cluster.run(
        "node8", f"ib_write_bw {cluster.address('node7')} -d rocep1s0f1 --report_gbits -q 4 -R --force-link IB"
    )
    assert (rc, err) == (0, "")
    assert server.finish()[0] == 0
    recorded = data(RECORDING).splitlines()
    got = out.splitlines()
    assert len(got) == len(recorded) == 27
    for mine, theirs in zip(got, recorded):
        if "address: LID" in theirs:
            assert re.sub(r"QPN \S+ PSN \S+", "", mine) == re.sub(r"QPN \S+ PSN \S+", "", theirs)
        else:
            assert mine == theirs


def test_a_planted_bad_node_device_or_link_slows_exactly_its_pairs(cluster):
    cluster.fabric(
        nodes={"node3": {"gbps": 150.0}, "node4": {"devices": {"mlx5_3": {"gbps": 50.0}}}},
        links=[{"a": "node2", "b": "node5", "gbps": 80.0}],
        test_s=0.2,
    )
    pairs = [  # server, client, device, tcp port, expected Gb/s
        ("node1", "node2", "mlx5_0", 18515, "392.00"),
        ("node3", "node4", "mlx5_0", 18515, "150.00"),  # node3 is slow with everyone
        ("node5", "node2", "mlx5_0", 18516, "80.00"),  # only the node2-node5 link is slow
        ("node5", "node1", "mlx5_0", 18517, "392.00"),
        ("node6", "node4", "mlx5_3", 18515, "50.00"),  # node4's mlx5_3 only
        ("node7", "node4", "mlx5_1", 18515, "392.00"),
        ("node8", "node6", "mlx5_3", 18515, "392.00"),
    ]
    servers = [Background(cluster, s, "ib_write_bw " + ARGS.format(dev=dev, port=port)) for s, _, dev, port, _ in pairs]
    for s, _, _, port, _ in pairs:
        wait_listening(cluster.address(s), port)
    results: dict[int, tuple] = {}

    def client(k: int, server: str, node: str, dev: str, port: int) -> None:
        results[k] = cluster.run(node, "ib_write_bw " + ARGS.format(dev=dev, port=port) + f" {cluster.address(server)}")

    threads = [
        threading.Thread(target=client, args=(k, s, c, dev, port)) for k, (s, c, dev, port, _) in enumerate(pairs)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    for k, (s, c, dev, _port, gbps) in enumerate(pairs):
        rc, out, err = results[k]
        assert (rc, err) == (0, ""), (s, c)
        s_rc, s_out, _ = servers[k].finish()
        assert s_rc == 0
        assert result_row(out)[3] == result_row(s_out)[3] == gbps, (s, c, dev)


def test_ib_write_bw_failures_print_perftests_messages(cluster):
    cluster.fabric(nodes={"node7": {"devices_missing": ["mlx5_1"]}})
    addr1 = cluster.address("node1")
    # no listener: perftest's client message and exit 1
    assert cluster.run("node2", f"ib_write_bw -d mlx5_0 -p 18600 -F --report_gbits {addr1}") == (
        1,
        "",
        f"Couldn't connect to {addr1}:18600\n" + NO_SOCKET,
    )
    # port in use (the first server still waits for its client)
    first = Background(cluster, "node1", "ib_write_bw -d mlx5_0 -p 18601")
    wait_listening(addr1, 18601)
    assert cluster.run("node1", "ib_write_bw -d mlx5_0 -p 18601") == (
        1,
        BANNER,
        "Couldn't listen to port 18601\n" + NO_SOCKET,
    )
    rc, out, _ = cluster.run("node3", "ib_write_bw -d mlx5_0 -p 18601 node1")  # nodeK resolves
    assert rc == 0 and result_row(out) == ["65536", "5000", "46734.71", "46730.04", "0.747681"]  # MiB/sec
    assert "BW average[MiB/sec]" in out and first.finish()[0] == 0
    # a device the node lacks; a node with no RDMA device at all (the Debian recording)
    assert cluster.run("node7", f"ib_write_bw -d mlx5_1 {addr1}") == (
        1,
        "",
        "IB device mlx5_1 not found\n Unable to find the Infiniband/RoCE device\n",
    )
    cluster.fabric(devices=[])
    assert cluster.run("node2", f"ib_write_bw -d mlx5_0 {addr1}") == (
        1,
        "",
        data("perftest/debian-perftest-4.5-no-rdma-device-exit1.txt"),
    )


def test_a_hang_node_hangs_as_server_and_as_client_and_reset_ends_it(cluster):
    cluster.fabric(nodes={"node6": {"hang": True}}, test_s=0.1)
    server = Background(cluster, "node6", "ib_write_bw -d mlx5_0 -p 18700")
    wait_listening(cluster.address("node6"), 18700)
    t0 = time.monotonic()
    rc, out, _ = cluster.run("node1", f"timeout 1 ib_write_bw -d mlx5_0 -p 18700 {cluster.address('node6')}")
    assert rc == 124 and out == "" and time.monotonic() - t0 < 5  # connected, then nothing
    server.client.close()
    other = Background(cluster, "node2", "ib_write_bw -d mlx5_0 -p 18701")
    wait_listening(cluster.address("node2"), 18701)
    assert cluster.run("node6", f"timeout 1 ib_write_bw -d mlx5_0 -p 18701 {cluster.address('node2')}")[0] == 124
    other.client.close()
    assert fake_processes(cluster)  # the hung server sleeps on
    cluster.reset()
    assert fake_processes(cluster) == []


# ---- dropped SSH sessions ---------------------------------------------------------------------


def test_kill_ssh_sessions_drops_connections_but_not_setsid_processes(cluster):
    client = cluster.connect("node5")
    chan = client.get_transport().open_session()
    chan.exec_command("sleep 30")
    rc, _, _ = cluster.run(
        "node5", "setsid sh -c 'echo $$ > /root/bg.pid; exec sleep 300' </dev/null >/dev/null 2>&1 &"
    )
    assert rc == 0
    pid_file = cluster.node_dir("node5") / "home" / "bg.pid"
    deadline = time.monotonic() + 5
    while not pid_file.exists() or not pid_file.read_text().strip():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    bg = int(pid_file.read_text())
    try:
        assert cluster.kill_ssh_sessions("node5") >= 1
        deadline = time.monotonic() + 5
        while client.get_transport().is_active():
            assert time.monotonic() < deadline, "the session survived"
            time.sleep(0.02)
        assert Path(f"/proc/{bg}/comm").read_text() == "sleep\n"  # setsid'd: still running
        assert cluster.run("node5", "hostname")[1] == "node5\n"  # the listener is fine
        assert cluster.status()["node5"] is True
    finally:
        client.close()
        try:
            os.kill(bg, signal.SIGKILL)
        except ProcessLookupError:
            pass
