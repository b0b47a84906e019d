"""Smoke tests of the simulated cluster itself (tests/harness), with paramiko, OpenSSH and pdsh."""

from __future__ import annotations

import os
import socket
import subprocess
import time

import paramiko
import pytest
import yaml
from harness import scenarios
from harness.cluster import HarnessError, SimCluster

pytestmark = pytest.mark.integration


def test_each_node_answers_with_its_own_hostname_and_its_own_fake(cluster, tmp_path):
    assert cluster.nodes == [f"node{i}" for i in range(1, 11)]
    for n in cluster.nodes:
        data = tmp_path / f"{n}.out"
        data.write_bytes(f"ibstat of {n}\r\n\tno trailing newline é".encode())
        cluster.fake_replay(n, "ibstat", data)
        data.write_bytes(b"changed after install")  # the fake keeps its own copy
    for n in cluster.nodes:
        rc, out, err = cluster.run(n, "hostname; ibstat")
        assert (rc, out, err) == (0, f"{n}\nibstat of {n}\r\n\tno trailing newline é", "")


def test_replay_is_byte_for_byte_with_exit_code_and_stderr(cluster, tmp_path):
    data = tmp_path / "out.bin"
    data.write_bytes(bytes(range(256)) * 40)
    err = tmp_path / "err.txt"
    err.write_bytes(b"warning: something\n")
    cluster.fake_replay("node2", "ibstat", data, exit_code=3, stderr_file=err)
    c = cluster.connect("node2")
    try:
        _, out, stderr = c.exec_command("ibstat -p mlx5_0")  # arguments are ignored
        assert out.read() == data.read_bytes()
        assert stderr.read() == b"warning: something\n"
        assert out.channel.recv_exit_status() == 3
    finally:
        c.close()


def test_missing_tool_is_exit_127_and_fake_exit_fails(cluster):
    rc, _, err = cluster.run("node4", "ibstat")
    assert rc == 127 and "not found" in err
    cluster.fake_exit("node4", "ibstat", 2, "ibpanic: mad rpc failed\n")
    assert cluster.run("node4", "ibstat") == (2, "", "ibpanic: mad rpc failed\n")
    assert cluster.run("node5", "ibstat")[0] == 127  # only node4 has it
    cluster.remove_tool("node4", "ibstat")
    assert cluster.run("node4", "ibstat")[0] == 127


def test_fakes_need_no_ssh_environment(cluster):
    """A Slurm prolog runs fakes with an almost empty environment, not through sshd."""
    cluster.fake_output("node3", "nvidia-smi", "GPU 0: NVIDIA H100\n")
    r = subprocess.run(
        ["nsenter", "-t", str(cluster.pid("node3")), "-u", "-m", "env", "-i", "/bin/sh", "-c", "hostname; nvidia-smi"],
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert (r.returncode, r.stdout) == (0, "node3\nGPU 0: NVIDIA H100\n")
    assert not os.path.exists("/usr/local/sbin/nvidia-smi")  # the host is untouched


def test_strict_host_keys_after_rekey(cluster):
    cluster.rekey("node2")
    with pytest.raises(paramiko.BadHostKeyException):
        cluster.connect("node2")
    r = subprocess.run(
        ["ssh", "-F", str(cluster.ssh_config), "node2", "true"], capture_output=True, text=True, timeout=20
    )
    assert r.returncode == 255 and "REMOTE HOST IDENTIFICATION HAS CHANGED" in r.stderr
    assert cluster.run("node1", "hostname")[1] == "node1\n"  # other nodes unaffected
    cluster.restore_key("node2")
    assert cluster.run("node2", "hostname")[1] == "node2\n"


def test_unknown_host_is_rejected(cluster, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    with pytest.raises(paramiko.SSHException, match="not found in known_hosts"):
        cluster.connect("node1", known_hosts=empty)


def test_stopped_node_refuses_connections_and_starts_again(cluster):
    cluster.stop("node8")
    assert cluster.status()["node8"] is False
    with pytest.raises(paramiko.ssh_exception.NoValidConnectionsError):
        cluster.connect("node8", timeout=3)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((cluster.address("node8"), cluster.port), timeout=3).close()
    cluster.start("node8")
    assert cluster.run("node8", "hostname")[1] == "node8\n"


def test_hang_fake_really_hangs(cluster):
    cluster.fake_hang("node6", "ibstat")
    c = cluster.connect("node6")
    try:
        chan = c.get_transport().open_session()
        chan.settimeout(1.0)
        chan.exec_command("ibstat")
        t0 = time.monotonic()
        with pytest.raises(socket.timeout):
            chan.recv(1)
        assert 0.9 < time.monotonic() - t0 < 5
        assert not chan.exit_status_ready()
    finally:
        c.close()
    # stop() ends what still runs on the node: the orphaned `sleep 3600` must not survive
    pid_ns = os.stat(f"/proc/{cluster.pid('node6')}/ns/mnt").st_ino
    cluster.stop("node6")
    left = []
    for p in os.listdir("/proc"):
        try:
            if p.isdigit() and os.stat(f"/proc/{p}/ns/mnt").st_ino == pid_ns:
                left.append(p)
        except OSError:
            pass
    assert left == []


def test_reset_after_test_left_things_dirty(cluster):
    cluster.fake_hang("node1", "ibstat")
    cluster.stop("node3")
    cluster.rekey("node4")
    cluster.reset()
    assert all(cluster.status().values())
    assert all(cluster.tools(n) == [] for n in cluster.nodes)
    assert cluster.run("node4", "hostname")[1] == "node4\n"


def test_inventory_and_client_files(cluster):
    inv = yaml.safe_load(cluster.inventory_path.read_text())
    assert inv == {
        "defaults": {
            "user": "root",
            "port": cluster.port,
            "known_hosts": str(cluster.known_hosts),
            "identity_file": str(cluster.identity_file),
        },
        "nodes": {"node[1-10]": {"address": f"{cluster.net}.[1-10]"}},
    }
    if cluster.port == 22:
        lines = cluster.known_hosts.read_text().splitlines()
        assert [ln.split()[0] for ln in lines] == [f"node{i},{cluster.net}.{i}" for i in range(1, 11)]
    r = subprocess.run(
        ["ssh", "-F", str(cluster.ssh_config), "node7", "hostname"], capture_output=True, text=True, timeout=20
    )
    assert (r.returncode, r.stdout) == (0, "node7\n"), r.stderr


def test_pdsh_with_the_ssh_config(cluster):
    env = dict(os.environ, PDSH_RCMD_TYPE="ssh", PDSH_SSH_ARGS_APPEND=f"-F {cluster.ssh_config}")
    r = subprocess.run(["pdsh", "-w", "node[1-10]", "hostname"], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()) == sorted(f"{n}: {n}" for n in cluster.nodes)


def test_demo_scenario(cluster):
    scenarios.apply(cluster, "ib-demo")
    st = cluster.status()
    assert [n for n, up in st.items() if not up] == ["node8"]
    healthy = (scenarios.DATA / scenarios.IBSTAT_HEALTHY).read_text()
    assert cluster.run("node1", "ibstat") == (0, healthy, "")
    assert cluster.run("node3", "ibstat")[1] == (scenarios.DATA / scenarios.IBSTAT_PORT_DOWN).read_text()
    assert cluster.run("node5", "ibstat")[1] == (scenarios.DATA / scenarios.IBSTAT_LOW_RATE).read_text()
    assert cluster.run("node7", "ibstat")[0] == 127
    assert cluster.tools("node6") == ["ibstat"]


def test_second_cluster_on_another_port_uses_bracketed_known_hosts(cluster, tmp_path):
    """A port other than 22 needs OpenSSH's [host]:port known_hosts form; paramiko honours it."""
    other = SimCluster(state_dir=tmp_path / "sim2", net=cluster.net, port=2222)
    with pytest.raises(HarnessError, match=r"N must be 1..2540"):  # ten /24s (issue 22)
        other.up(2541)
    other.up(2)
    try:
        assert other.known_hosts.read_text().split()[0] == f"[node1]:2222,[{cluster.net}.1]:2222"
        assert yaml.safe_load(other.inventory_path.read_text())["defaults"]["port"] == 2222
        assert other.run("node2", "hostname")[1] == "node2\n"
        with pytest.raises(HarnessError, match="already up"):
            other.up(2)
    finally:
        other.down()
    assert not (tmp_path / "sim2").exists()
