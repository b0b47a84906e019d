"""Faults in the SSH connection to a node: killed, reset, stuck after login, refused, impersonated,
answering too late. The faulted node gets its exact status; the healthy one beside it passes."""

from __future__ import annotations

import subprocess
import time

from faults.support import HEALTHY, assert_nothing_left, assert_report, book, finish, run, start, temp_entries, wait_for
from harness.mute_sshd import MuteSshd

NODES = ["node1", "node2"]
HEALTHY_BYTES = HEALTHY.read_bytes()
HALF = HEALTHY_BYTES.index(b"CA 'mlx5_5'")


def _cut_mid_output(cluster, tmp_path, cut) -> tuple:
    """node2's ibstat prints half its output, then stalls; `cut(cluster)` hits the connection then."""
    cluster.fake_replay("node1", "ibstat", HEALTHY)
    marker = tmp_path / "half-printed"
    cluster.fake_stall_after("node2", "ibstat", HEALTHY_BYTES[:HALF], HEALTHY_BYTES[HALF:], 3, marker)
    before = temp_entries()
    started = time.monotonic()
    proc = start(cluster, tmp_path, "node[1-2]", playbook=book(timeout_s=10))
    wait_for(marker)
    cut(cluster)
    return finish(proc, tmp_path, started), before


def test_sshd_killed_mid_run_is_unreachable_connection_lost(cluster, tmp_path):
    o, before = _cut_mid_output(cluster, tmp_path, lambda c: c.stop("node2"))
    assert_report(o, NODES, complete=True)
    assert (o.status("node1"), o.status("node2")) == ("pass", "unreachable"), o.messages("node2")
    [(status, message)] = o.messages("node2")
    assert message.startswith("unreachable: connection lost during ibstat"), message
    assert o.code == 3 and o.wall < 8
    assert_nothing_left(cluster, NODES, before)


def test_a_connection_reset_mid_output_is_unreachable_connection_lost(cluster, tmp_path):
    def reset(c):
        if c.reset_ssh_connections("node2") == 0:  # no socket destroy in this kernel: drop instead
            c.kill_ssh_sessions("node2")

    o, before = _cut_mid_output(cluster, tmp_path, reset)
    assert_report(o, NODES, complete=True)
    assert (o.status("node1"), o.status("node2")) == ("pass", "unreachable"), o.messages("node2")
    [(status, message)] = o.messages("node2")
    assert message.startswith("unreachable: connection lost during ibstat"), message
    assert o.code == 3 and o.wall < 8
    assert_nothing_left(cluster, NODES, before, within=5)  # the stalled tool ends when it writes again


def _inventory(cluster, tmp_path, lines: str, known_hosts=None) -> object:
    inv = tmp_path / "hosts.yml"
    inv.write_text(
        f"defaults: {{user: root, known_hosts: {known_hosts or cluster.known_hosts}, "
        f"identity_file: {cluster.identity_file}}}\nnodes:\n"
        f"  node1: {{address: {cluster.address('node1')}}}\n" + lines
    )
    return inv


def test_an_exec_request_never_answered_times_out_within_the_probe_bound(cluster, tmp_path):
    """Issue 17 finding 6: an sshd that authenticates, opens the session, then never answers `exec`."""
    cluster.fake_replay("node1", "ibstat", HEALTHY)
    net = cluster.address("node1").rsplit(".", 1)[0]
    with MuteSshd(f"{net}.200") as mute:
        known = tmp_path / "known_hosts"
        known.write_text(cluster.known_hosts.read_text() + mute.known_hosts_line + "\n")
        inv = _inventory(cluster, tmp_path, f"  mute: {{address: {mute.address}, port: {mute.port}}}\n", known)
        o = run(cluster, tmp_path, "node1,mute", inventory=inv, playbook=book(timeout_s=2, deadline_s=12))
        assert mute.exec_requests == 1
    assert_report(o, ["node1", "mute"], complete=True)
    assert (o.status("node1"), o.status("mute")) == ("pass", "timeout")
    [(status, message)] = o.messages("mute")
    assert message.startswith("ibstat timed out: no answer within 2 s"), message
    assert o.code == 3 and o.wall < 2 + 6


def test_auth_refused_is_unreachable_and_runs_nothing(cluster, tmp_path):
    stranger = tmp_path / "stranger_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)], check=True)
    cluster.fake_replay("node1", "ibstat", HEALTHY)
    marker = tmp_path / "ran-on-node2"
    cluster.fake_script("node2", "ibstat", f"touch {marker}; cat {HEALTHY}")
    inv = _inventory(
        cluster, tmp_path, f"  node2: {{address: {cluster.address('node2')}, identity_file: {stranger}}}\n"
    )
    before = temp_entries()
    o = run(cluster, tmp_path, "node[1-2]", inventory=inv)
    assert_report(o, NODES, complete=True)
    assert (o.status("node1"), o.status("node2")) == ("pass", "unreachable")
    [(status, message)] = o.messages("node2")
    assert message.startswith(
        f"unreachable: authentication failed for root@{cluster.address('node2')} (tried {stranger})"
    ), message
    assert not marker.exists() and o.code == 3
    assert_nothing_left(cluster, NODES, before)


def test_a_changed_host_key_is_unreachable_and_runs_nothing(cluster, tmp_path):
    cluster.fake_replay("node1", "ibstat", HEALTHY)
    marker = tmp_path / "ran-on-node2"
    cluster.fake_script("node2", "ibstat", f"touch {marker}; cat {HEALTHY}")
    cluster.rekey("node2")
    before = temp_entries()
    o = run(cluster, tmp_path, "node[1-2]")
    assert_report(o, NODES, complete=True)
    assert (o.status("node1"), o.status("node2")) == ("pass", "unreachable")
    [(status, message)] = o.messages("node2")
    assert message.startswith("unreachable: host key MISMATCH for node2"), message
    assert not marker.exists() and o.code == 3
    assert_nothing_left(cluster, NODES, before)


def test_a_node_that_answers_after_its_connect_timeout_stays_unreachable(cluster, tmp_path):
    """node2's sshd is frozen (the kernel accepts the connection, no banner comes) and thaws 3 s
    after nodecheck connected: the 1.5 s connect bound decides, the late answer changes nothing and
    leaves no session behind."""
    cluster.fake_replay("node1", "ibstat", HEALTHY)
    cluster.fake_replay("node2", "ibstat", HEALTHY)
    cluster.hang_ssh("node2")
    before = temp_entries()
    started = time.monotonic()
    proc = start(cluster, tmp_path, "node[1-2]", "--connect-timeout", "1.5")
    try:
        _wait_connected(cluster.address("node2"))
        connected = time.monotonic()
        time.sleep(3.0)
    finally:
        cluster.unhang_ssh("node2")
    o = finish(proc, tmp_path, started)
    assert_report(o, NODES, complete=True)
    assert (o.status("node1"), o.status("node2")) == ("pass", "unreachable"), o.messages("node2")
    [(status, message)] = o.messages("node2")
    assert message == (
        f"unreachable: {cluster.address('node2')}:22: no SSH handshake within 1.5 s "
        "(something listens there but does not speak SSH)"
    ), message
    assert o.code == 3 and started + o.wall - connected < 1.5 + 4
    assert_nothing_left(cluster, NODES, before, within=5)


def _wait_connected(address: str, timeout: float = 20) -> None:
    """Until a TCP connection to address:22 is established (in the frozen sshd's accept queue)."""
    end = time.monotonic() + timeout
    while not subprocess.run(
        ["ss", "-Htn", "state", "established", "(", "dst", f"{address}:22", ")"], capture_output=True, text=True
    ).stdout.strip():
        assert time.monotonic() < end, f"nodecheck never connected to {address}:22"
        time.sleep(0.05)
