"""`nodecheck run` end to end over real SSH against the simulated cluster (8 real sshd nodes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from harness.scenarios import IB_DEMO, IBSTAT_HEALTHY, Hang, Replay, apply

DATA = Path(__file__).resolve().parents[1] / "data"
FAST = """\
version: 1
deadline_s: 60
checks:
  ib.ports: {timeout_s: %s, expected_ports: 8, min_rate_gbps: 400}
"""


def playbook(tmp_path, timeout_s=2):
    p = tmp_path / "fast.yml"
    p.write_text(FAST % timeout_s)
    return str(p)


def nodecheck(*args, timeout=120, env=None):
    """Run the real CLI in a child process; returns (exit code, stdout, stderr, wall seconds)."""
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "nodecheck", *args], capture_output=True, text=True, timeout=timeout, env=env
    )
    return proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started


def run_json(cluster, tmp_path, *extra, inventory=None, timeout_s=2):
    if inventory is None and "--nodes" not in extra:
        extra = ("--nodes", "node[1-8]", *extra)  # the layouts here name node1-8
    code, out, err, wall = nodecheck(
        "run",
        str(inventory or cluster.inventory_path),
        "--format",
        "json",
        "--playbook",
        playbook(tmp_path, timeout_s),
        "--output-dir",
        str(tmp_path / "reports"),
        *extra,
    )
    assert code != 64, err
    return code, json.loads(out), wall


def by_node(doc):
    return {n["node"]: n for n in doc["nodes"]}


def failing(node):
    return [(r["subject"], r["message"]) for r in node["results"] if r["status"] == "fail"]


def test_the_demo_layout_gives_exactly_the_expected_statuses(cluster, tmp_path):
    apply(cluster, IB_DEMO)
    code, doc, wall = run_json(cluster, tmp_path)
    nodes = by_node(doc)
    assert {n: v["status"] for n, v in nodes.items()} == {
        "node1": "pass",
        "node2": "pass",
        "node3": "fail",
        "node4": "pass",
        "node5": "fail",
        "node6": "timeout",
        "node7": "error",
        "node8": "unreachable",
    }
    assert (code, doc["status"], doc["complete"]) == (2, "fail", True)
    assert failing(nodes["node3"]) == [("mlx5_3/1", "mlx5_3/1: Down/Polling, expected Active/LinkUp")]
    assert failing(nodes["node5"]) == [("mlx5_5/1", "mlx5_5/1 rate 200 Gb/s, expected >= 400 Gb/s")]
    assert len(nodes["node1"]["results"]) == 8
    assert [r["message"] for r in nodes["node7"]["results"]] == ["ibstat not found on the node (exit 127)"]
    assert nodes["node8"]["results"][0]["message"].startswith("unreachable: connection refused by 127.0.1.8:22")
    assert nodes["node6"]["results"][0]["message"] == "ibstat timed out: no answer within 2 s"
    assert wall < 10  # the hang costs its timeout, not more


def test_a_hung_tool_times_out_within_its_timeout_and_does_not_linger(cluster, tmp_path):
    apply(cluster, {n: [Hang("ibstat")] if n == "node6" else [Replay("ibstat", IBSTAT_HEALTHY)] for n in cluster.nodes})
    earlier = set(_sleepers())  # hung fakes of earlier tests may still live
    code, doc, _ = run_json(cluster, tmp_path, timeout_s=1)
    [hung] = [c for c in doc["captures"] if c["node"] == "node6"]
    assert hung["outcome"] == "timeout" and 1.0 <= hung["duration_s"] < 3.0  # its 1 s, plus slack for load
    assert (code, by_node(doc)["node6"]["status"]) == (3, "timeout")
    ours = set(_sleepers()) - earlier
    assert len(ours) == 1  # the hung tool outlived the client's timeout...
    # ...and the remote `timeout` wrapper ends it a few seconds after the client gave up
    deadline = time.monotonic() + 15
    while ours & set(_sleepers()) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not ours & set(_sleepers())


def _sleepers():
    """Live `sleep 3600` processes (the hang fake) anywhere on this machine."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if (
                proc.name.isdigit()
                and (proc / "cmdline").read_bytes() == b"sleep\x003600\x00"
                and "\nState:\tZ" not in (proc / "status").read_text()
            ):
                found.append(proc.name)
        except OSError:  # the process ended while we looked
            pass
    return found


def test_all_healthy_passes_with_exit_0_and_a_folded_table(cluster, tmp_path):
    apply(cluster, "ib-healthy")
    code, out, err, _ = nodecheck(
        "run", str(cluster.inventory_path), "--playbook", playbook(tmp_path), "--output-dir", str(tmp_path / "reports")
    )
    assert code == 0, out + err
    assert "node[1-10]  pass      ib.ports  8 of 8 pass" in out
    assert "10 nodes: 10 pass. Status PASS (exit 0)." in out
    [report] = list((tmp_path / "reports").iterdir())
    assert (report / "captures/node5/ibstat.txt").read_bytes() == (DATA / IBSTAT_HEALTHY).read_bytes()
    assert json.loads((report / "report.json").read_text())["status"] == "pass"


def test_a_node_with_a_changed_host_key_runs_nothing(cluster, tmp_path):
    apply(cluster, "ib-healthy")
    marker = tmp_path / "ran-on-node2"
    cluster.fake_script("node2", "ibstat", f"touch {marker}; cat {DATA / IBSTAT_HEALTHY}")
    cluster.rekey("node2")
    code, doc, _ = run_json(cluster, tmp_path)
    node2 = by_node(doc)["node2"]
    assert node2["status"] == "unreachable"
    assert "host key MISMATCH for node2" in node2["results"][0]["message"]
    assert not marker.exists()  # nothing was executed on it
    assert [n for n, v in by_node(doc).items() if v["status"] != "pass"] == ["node2"]
    assert code == 3


def test_unknown_host_keys_are_refused_unless_trust_on_first_use(cluster, tmp_path):
    apply(cluster, "ib-healthy")
    known = tmp_path / "known_hosts"
    lines = cluster.known_hosts.read_text().splitlines()
    known.write_text("\n".join(ln for ln in lines if not ln.startswith("node1,")) + "\n")
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(cluster.inventory_path.read_text().replace(str(cluster.known_hosts), str(known)))
    code, doc, _ = run_json(cluster, tmp_path, inventory=inventory)
    assert by_node(doc)["node1"]["status"] == "unreachable" and code == 3
    assert "no known_hosts entry for node1 or 127.0.1.1" in by_node(doc)["node1"]["results"][0]["message"]
    code, doc, _ = run_json(cluster, tmp_path, "--accept-new-host-keys", inventory=inventory)
    assert (code, doc["status"]) == (0, "pass")
    assert any(ln.startswith("node1,127.0.1.1 ssh-ed25519 ") for ln in known.read_text().splitlines())
    code, doc, _ = run_json(cluster, tmp_path, inventory=inventory)  # strict again: now known
    assert (code, doc["status"]) == (0, "pass")


def test_the_deadline_bounds_the_run_and_still_writes_a_partial_report(cluster, tmp_path):
    apply(cluster, {n: [Hang("ibstat")] for n in cluster.nodes})
    code, doc, wall = run_json(cluster, tmp_path, "--deadline", "3", "--fanout", "2", timeout_s=30)
    assert wall < 3 + 4  # the deadline, plus start-up and report
    assert (code, doc["complete"]) == (3, False)
    statuses = {n: v["status"] for n, v in by_node(doc).items()}
    assert statuses == {"node1": "timeout", "node2": "timeout", **{f"node{i}": "skipped" for i in range(3, 9)}}
    assert "stopped at the run deadline" in by_node(doc)["node1"]["results"][0]["message"]
    [report] = list((tmp_path / "reports").iterdir())
    assert json.loads((report / "report.json").read_text())["complete"] is False


def test_nodes_restricts_the_run(cluster, tmp_path):
    apply(cluster, "ib-healthy")
    code, doc, _ = run_json(cluster, tmp_path, "--nodes", "node[2-3]")
    assert (code, list(by_node(doc))) == (0, ["node2", "node3"])


def test_ssh_config_resolves_names_keys_and_a_proxyjump(cluster, tmp_path):
    """Nodes named only by name: HostName, User, IdentityFile and known_hosts come from ssh_config,
    and node2 is reached through node1 (ProxyJump), both host keys verified."""
    apply(cluster, "ib-healthy")
    config = tmp_path / "ssh_config"
    config.write_text(f"Host node2\n  ProxyJump node1\n\n{cluster.ssh_config.read_text()}")
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(f"defaults: {{ssh_config: {config}}}\nnodes:\n  node[1-3]:\n")
    code, doc, _ = run_json(cluster, tmp_path, inventory=inventory)
    assert (code, [n["status"] for n in doc["nodes"]]) == (0, ["pass", "pass", "pass"])
    assert [n["address"] for n in doc["nodes"]] == ["node1", "node2", "node3"]
    cluster.stop("node1")  # the jump host is gone: node2 too
    code, doc, _ = run_json(cluster, tmp_path, inventory=inventory)
    assert [n["status"] for n in doc["nodes"]] == ["unreachable", "unreachable", "pass"]


def test_auth_failure_and_a_silent_server_are_unreachable_with_the_reason(cluster, tmp_path):
    """A key the nodes do not accept, and a port that accepts TCP but never speaks SSH: both end as
    UNREACHABLE with their reason, the silent one within --connect-timeout."""
    import socket
    import subprocess as sp

    apply(cluster, "ib-healthy")
    stranger = tmp_path / "stranger_key"
    sp.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)], check=True)
    silent = socket.create_server(("127.0.1.100", 0))  # listens, never sends a banner
    port = silent.getsockname()[1]
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        f"defaults: {{user: root, known_hosts: {cluster.known_hosts}}}\nnodes:\n"
        f"  node1x: {{address: 127.0.1.1, identity_file: {stranger}}}\n"
        f"  mute: {{address: 127.0.1.100, port: {port}, identity_file: {stranger}}}\n"
    )
    try:
        code, doc, wall = run_json(cluster, tmp_path, "--connect-timeout", "2", inventory=inventory)
    finally:
        silent.close()
    nodes = by_node(doc)
    assert [nodes[n]["status"] for n in ("node1x", "mute")] == ["unreachable", "unreachable"]
    assert nodes["node1x"]["results"][0]["message"].startswith(
        f"unreachable: authentication failed for root@127.0.1.1 (tried {stranger})"
    )
    assert nodes["mute"]["results"][0]["message"].startswith(
        f"unreachable: 127.0.1.100:{port}: no SSH handshake within 2 s"
    )
    assert wall < 2 + 6 and code == 3  # the 2 s connect timeout bounds it


def test_sigterm_ends_the_run_early_and_still_writes_a_partial_report(cluster, tmp_path):
    """Slurm or systemd stopping nodecheck must not lose what it already knows."""
    apply(
        cluster,
        {n: [Hang("ibstat")] if n in ("node2", "node3") else [Replay("ibstat", IBSTAT_HEALTHY)] for n in cluster.nodes},
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "nodecheck",
            "run",
            str(cluster.inventory_path),
            "--format",
            "json",
            "--playbook",
            playbook(tmp_path, 60),
            "--output-dir",
            str(tmp_path / "reports"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(2.0)  # the healthy nodes have answered by now
    started = time.monotonic()
    proc.send_signal(15)
    out, err = proc.communicate(timeout=30)
    assert time.monotonic() - started < 5
    doc = json.loads(out)
    assert (proc.returncode, doc["complete"], doc["incomplete_reason"]) == (3, False, "stopped by a signal")
    statuses = {n: v["status"] for n, v in by_node(doc).items()}
    assert statuses == {
        **{f"node{i}": "pass" for i in (1, 4, 5, 6, 7, 8, 9, 10)},
        "node2": "timeout",
        "node3": "timeout",
    }
    [report] = list((tmp_path / "reports").iterdir())
    assert json.loads((report / "report.json").read_text())["incomplete_reason"] == "stopped by a signal"


def test_trust_on_first_use_through_a_jump_host_records_each_host_once(cluster, tmp_path):
    apply(cluster, "ib-healthy")
    known = tmp_path / "known_hosts"
    config = tmp_path / "ssh_config"
    config.write_text(
        "Host node2 node3 node4 node5\n  ProxyJump node1\n\n"
        + cluster.ssh_config.read_text().replace(str(cluster.known_hosts), str(known))
    )
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(f"defaults: {{ssh_config: {config}}}\nnodes:\n  node[2-5]:\n")
    code, doc, _ = run_json(cluster, tmp_path, "--accept-new-host-keys", inventory=inventory)
    assert (code, doc["status"]) == (0, "pass")
    hosts = sorted(line.split()[0] for line in known.read_text().splitlines())
    assert hosts == [f"node{i},127.0.1.{i}" for i in range(1, 6)]  # the jump host once, not 4 times


def test_nodes_a_playbook_does_not_select_are_named_not_silently_dropped(cluster, tmp_path):
    apply(cluster, "ib-healthy")
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        cluster.inventory_path.read_text()
        .replace("nodes:\n", "nodes:\n  node8: {address: 127.0.1.8, labels: [gppu]}\n", 1)
        .replace("node[1-10]", "node[1-7]")
        .replace("127.0.1.[1-10]", "127.0.1.[1-7]")
        + "    labels: [gpu]\n"
    )
    book = tmp_path / "gpu.yml"
    book.write_text("select: {labels: [gpu]}\nchecks:\n  ib.ports: {timeout_s: 2}\n")
    code, out, err, _ = nodecheck(
        "run", str(inventory), "--playbook", str(book), "--format", "json", "--output-dir", str(tmp_path / "reports")
    )
    doc = json.loads(out)
    assert (code, doc["excluded_nodes"], len(doc["nodes"])) == (0, ["node8"], 7)
    code, out, err, _ = nodecheck(
        "run",
        str(inventory),
        "--playbook",
        str(book),
        "--nodes",
        "node[7-8]",
        "--output-dir",
        str(tmp_path / "reports"),
    )
    assert code == 64 and "node8 lack the labels ['gpu'] that playbook gpu selects" in err


def test_agent_only_authentication_works_at_full_fanout(cluster, tmp_path):
    """The usual operator setup: no identity file, keys in an ssh-agent, many nodes at once."""
    apply(cluster, "ib-healthy")
    sock = tmp_path / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        env = dict(os.environ, SSH_AUTH_SOCK=str(sock), HOME=str(tmp_path / "home"))
        subprocess.run(["ssh-add", "-q", str(cluster.identity_file)], env=env, check=True)
        inventory = tmp_path / "hosts.yml"
        inventory.write_text(
            f"defaults: {{user: root, known_hosts: {cluster.known_hosts}}}\n"
            "nodes:\n  node[1-8]:\n    address: 127.0.1.[1-8]\n"
        )
        code, out, err, _ = nodecheck(
            "run",
            str(inventory),
            "--fanout",
            "8",
            "--format",
            "json",
            "--playbook",
            playbook(tmp_path),
            "--output-dir",
            str(tmp_path / "r"),
            env=env,
        )
    finally:
        agent.kill()
        agent.wait()
    doc = json.loads(out)
    assert (code, [n["status"] for n in doc["nodes"]]) == (0, ["pass"] * 8), err


def test_descriptors_above_1023_do_not_break_a_session(cluster, tmp_path):
    """A large fan-out raises the open-file limit; waiting on a channel must not use select()."""
    import resource

    from nodecheck.core.model import Node, Probe
    from nodecheck.transport.ssh import SshTransport

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    filler = [os.open("/dev/null", os.O_RDONLY) for _ in range(1100)]
    try:
        node = Node(
            "node1",
            "127.0.1.1",
            user="root",
            identity_file=str(cluster.identity_file),
            known_hosts=str(cluster.known_hosts),
        )
        session = SshTransport().connect(node, 10)
        capture = session.run(Probe("hostname", ("hostname",), 10), 10)
        session.close()
    finally:
        for fd in filler:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert (capture.outcome.value, capture.exit_code, capture.stdout) == ("exited", 0, "node1\n")
