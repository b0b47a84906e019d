"""roce.gids, roce.networkmanager and the judging half of roce.gid_stability, on probe outputs."""

from __future__ import annotations

from nodecheck.checks import roce
from nodecheck.core.model import Status
from nodecheck.parsers.gids import RdmaPort
from tests import everyone_tmp
from tests.helpers import captures

tmp_path = everyone_tmp.tmp_path  # files a job's user reads: in a directory everyone may enter

P = "/sys/class/infiniband/mlx5_0/ports/1"
LINK_LOCAL = "fe80:0000:0000:0000:4c6f:a3ff:fe12:3401"


def table(v2_index: int | None = 3, ip_hex: str = "0a4d:0003", layer: str = "Ethernet") -> str:
    """A sysfs dump of one RoCE port: default GIDs at 0/1, the IPv4 pair at v2_index-1/v2_index."""
    lines = [
        f"{P}/link_layer\t{layer}",
        f"{P}/state\t4: ACTIVE",
        f"{P}/phys_state\t5: LinkUp",
        f"{P}/rate\t400 Gb/sec (4X NDR)",
    ]
    entries = [(0, LINK_LOCAL, "IB/RoCE v1"), (1, LINK_LOCAL, "RoCE v2")]
    if v2_index is not None:
        ipv4 = f"0000:0000:0000:0000:0000:ffff:{ip_hex}"
        entries += [(v2_index - 1, ipv4, "IB/RoCE v1"), (v2_index, ipv4, "RoCE v2")]
    for i, gid, kind in entries:
        lines += [f"{P}/gids/{i}\t{gid}", f"{P}/gid_attrs/types/{i}\t{kind}", f"{P}/gid_attrs/ndevs/{i}\trnic3"]
    return "\n".join(lines) + "\n"


def gids_output(dump: str, env: str = "", conf: str = "", user_conf: str = "") -> str:
    return (
        f"@@nodecheck begin table\n{dump}@@nodecheck end table rc=0\n"
        f"@@nodecheck env_gid_index {env}\n"
        f"@@nodecheck begin user.conf\n{user_conf}@@nodecheck end user.conf rc={0 if user_conf else 1}\n"
        f"@@nodecheck begin nccl.conf\n{conf}@@nodecheck end nccl.conf rc={0 if conf else 1}\n"
    )


def judge_gids(outputs: dict[str, str], **params):
    by_node = {node: captures(roce.ROCE_GIDS, text, node=node) for node, text in outputs.items()}
    return list(roce.gids(by_node, roce.RoceGids(**params)))


def test_the_v2_ipv4_gid_at_the_pinned_index_passes():
    [(nodes, v)] = judge_gids({"node1": gids_output(table())}, gid_index=3)
    assert nodes == ("node1",) and v.status is Status.PASS
    assert v.message == "mlx5_0/1 (rnic3): RoCE v2 IPv4 GID 10.77.0.3 at index 3 (the playbook)"


def test_nccl_conf_index_pointing_at_a_v1_entry_fails_and_says_where_v2_is():
    [(_, v)] = judge_gids({"node1": gids_output(table(v2_index=5), conf="NCCL_IB_GID_INDEX=3\n")})
    assert v.status is Status.FAIL
    assert "GID index 3 (NCCL_IB_GID_INDEX in /etc/nccl.conf) is empty" in v.message
    assert "the RoCE v2 IPv4 GID is at 5" in v.message


def test_environment_index_wins_over_nccl_conf_and_minus_one_means_auto():
    [(_, v)] = judge_gids({"node1": gids_output(table(), env="1", conf="NCCL_IB_GID_INDEX=3\n")})
    assert v.status is Status.FAIL and "GID index 1 (NCCL_IB_GID_INDEX in nodecheck's SSH environment)" in v.message
    assert "fe80::4c6f:a3ff:fe12:3401" in v.message or LINK_LOCAL in v.message
    [(_, auto)] = judge_gids({"node1": gids_output(table(), env="-1")})
    assert auto.status is Status.PASS and "no index pinned: NCCL's own choice" in auto.message


def test_the_users_nccl_conf_wins_over_etc_and_spaces_around_the_sign_are_not_nccls_syntax():
    [(_, v)] = judge_gids(
        {"node1": gids_output(table(), user_conf="NCCL_IB_GID_INDEX=3\n", conf="NCCL_IB_GID_INDEX=1\n")}
    )
    assert v.status is Status.PASS and "(NCCL_IB_GID_INDEX in NCCL_CONF_FILE or ~/.nccl.conf)" in v.message
    [(_, w)] = judge_gids({"node1": gids_output(table(), conf="NCCL_IB_GID_INDEX = 1\n")})
    assert w.status is Status.PASS and "no index pinned" in w.message  # NCCL ignores that line too


def test_a_port_without_an_ipv4_gid_fails():
    [(_, v)] = judge_gids({"node1": gids_output(table(v2_index=None))})
    assert v.status is Status.FAIL and v.message.startswith("mlx5_0/1 (rnic3): no RoCE v2 IPv4 GID")


def test_an_ib_only_node_is_an_error_not_a_pass():
    [(_, v)] = judge_gids({"node1": gids_output(table(layer="InfiniBand"))})
    assert v.status is Status.ERROR and v.message == "no RoCE (Ethernet) RDMA port"


def test_nodes_whose_gid_sits_at_another_index_drift():
    outputs = {f"node{i}": gids_output(table()) for i in range(1, 4)}
    outputs["node4"] = gids_output(table(v2_index=5))
    verdicts = judge_gids(outputs)
    drift = [(n, v) for n, v in verdicts if v.status is Status.WARN]
    assert drift == [(("node4",), drift[0][1])]
    assert drift[0][1].message == (
        "mlx5_0/1: RoCE v2 IPv4 GID at index 5 on node4, at 3 on 3 nodes: "
        "a job pinned to one index breaks on the others"
    )
    assert sum(v.status is Status.PASS for _, v in verdicts) == 4


def nm_output(
    running: str = "running",
    rc: int = 0,
    devices: str = "rnic3:ethernet:connected\n",
    conf: str = "",
    netdevs: str = "mlx5_0/1 rnic3\n",
) -> str:
    out = f"@@nodecheck begin running\n{running}\n@@nodecheck end running rc={rc}\n"
    out += f"@@nodecheck begin devices\n{devices}@@nodecheck end devices rc={rc}\n"
    if conf:
        out += (
            f"@@nodecheck begin conf:/etc/NetworkManager/conf.d/rdma.conf\n{conf}"
            "@@nodecheck end conf:/etc/NetworkManager/conf.d/rdma.conf rc=0\n"
        )
    return out + f"@@nodecheck begin rdma_netdevs\n{netdevs}@@nodecheck end rdma_netdevs rc=0\n"


def judge_nm(text: str):
    return list(roce.networkmanager(captures(roce.NM_PROBE, text), roce.RoceNetworkManager()))


def test_networkmanager_managing_an_rdma_netdev_warns_with_the_fix():
    [v] = judge_nm(nm_output())
    assert v.status is Status.WARN
    assert "NetworkManager manages RDMA netdevs rnic3 (mlx5_0/1, connected)" in v.message
    assert "unmanaged-devices=interface-name:rnic3" in v.message


def test_unmanaged_by_state_or_by_config_passes():
    [v] = judge_nm(nm_output(devices="rnic3:ethernet:unmanaged\n"))
    assert v.status is Status.PASS and "unmanaged by NetworkManager" in v.message
    [c] = judge_nm(
        nm_output(devices="lo:loopback:unmanaged\n", conf="[keyfile]\nunmanaged-devices=interface-name:rnic*\n")
    )
    assert c.status is Status.PASS


def test_no_networkmanager_passes_and_no_rdma_netdev_is_an_error():
    [v] = judge_nm(nm_output(running="sh: 1: nmcli: not found", rc=127))
    assert v.status is Status.PASS and "not installed" in v.message
    [e] = judge_nm(nm_output(netdevs=""))
    assert e.status is Status.ERROR


def flap_output(before: str, after: str, final: str = "4: ACTIVE") -> str:
    return (
        "@@nodecheck address_before 10.77.0.3/32\n"
        f"@@nodecheck begin before\n{before}@@nodecheck end before rc=0\n"
        "@@nodecheck guard 4242\n@@nodecheck recovered_after_s 0.6\n@@nodecheck address_after 10.77.0.3/32\n"
        f"@@nodecheck begin after\n{after}@@nodecheck end after rc=0\n@@nodecheck final_state {final}\n"
    )


def judge_flap(text: str):
    port = RdmaPort("mlx5_0", 1, "Ethernet", "ACTIVE", "LinkUp", None, (), ("rnic3",))
    out = captures(roce.ROCE_GIDS, text)[roce.ROCE_GIDS.name]
    from nodecheck.parsers.sections import split_sections

    return roce._judge_flap("mlx5_0/1 (rnic3)", port, out, split_sections(text).facts)


def test_a_stable_table_passes_and_a_renumbered_one_fails():
    ok = judge_flap(flap_output(table(), table()))
    assert ok.status is Status.PASS and "10.77.0.3 at 3" in ok.message
    moved = judge_flap(flap_output(table(), table(v2_index=5)))
    assert moved.status is Status.FAIL
    assert "10.77.0.3 moved from index 3 to 5" in moved.message


def test_a_vanished_gid_and_a_port_left_down_fail():
    gone = judge_flap(flap_output(table(), table(v2_index=None)))
    assert gone.status is Status.FAIL and "10.77.0.3 vanished (was at index 3)" in gone.message
    down = judge_flap(flap_output(table(), table(), final="1: DOWN"))
    assert down.status is Status.FAIL and "port 1: DOWN after the flap" in down.message


# -- issue 17: an empty /sys/class/infiniband ------------------------------------------------------

NO_RDMA = "no RDMA device under /sys/class/infiniband (driver not loaded or adapters gone)"


def test_no_rdma_device_at_all_fails_naming_what_is_missing():
    # the table walk finds no port directory: the node has no RDMA device, a fact, not unreadable
    [(nodes, v)] = judge_gids({"node1": gids_output("")})
    assert (nodes, v.status, v.message) == (("node1",), Status.FAIL, f"{NO_RDMA}; expected a RoCE (Ethernet) port")
    [(_, v)] = judge_gids({"node1": gids_output("")}, devices=["mlx5_0", "mlx5_1"])
    assert (v.status, v.message, dict(v.expected)) == (
        Status.FAIL,
        f"{NO_RDMA}; expected mlx5_0, mlx5_1",
        {"devices": ["mlx5_0", "mlx5_1"]},
    )


def test_a_table_walk_that_did_not_finish_is_an_error_not_no_device():
    text = "@@nodecheck begin table\n"  # cut before its end marker: rc unknown
    [(_, v)] = judge_gids({"node1": text})
    assert (v.status, v.message) == (Status.ERROR, "no RoCE (Ethernet) RDMA port")


# -- issue 17: the session's NCCL_CONF_FILE (the job's, in the prolog) is read only as shell.job_file allows --


def _run_gids_probe(tmp_path, **env) -> str:
    import subprocess

    run = subprocess.run(
        roce.ROCE_GIDS.argv,
        capture_output=True,
        text=True,
        timeout=20,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **env},
    )
    assert run.returncode == 0, run.stderr
    return run.stdout


def test_a_root_only_file_named_as_nccl_conf_file_is_not_captured_by_the_gid_probe(tmp_path):
    import os

    shadow = tmp_path / "shadow"
    shadow.write_text("root:$6$s3cr3t-hash:19000:0:99999:7:::\nNCCL_IB_GID_INDEX=7\n")
    shadow.chmod(0o600)
    os.chown(shadow, 0, 0)
    text = _run_gids_probe(tmp_path, NCCL_CONF_FILE=str(shadow))
    assert "s3cr3t" not in text and "NCCL_IB_GID_INDEX=7" not in text
    assert (
        "@@nodecheck begin user.conf\nnot read: nobody cannot open it: Permission denied\n"
        "@@nodecheck end user.conf rc=1\n" in text
    )
    assert roce._job_gid_index(text, roce.RoceGids()) == (None, "NCCL's own choice")


def test_the_gid_probe_still_reads_a_plain_conf_file_and_the_home_one(tmp_path):
    conf = tmp_path / "site.conf"
    conf.write_text("NCCL_IB_GID_INDEX=3\n")
    conf.chmod(0o644)
    assert roce._job_gid_index(_run_gids_probe(tmp_path, NCCL_CONF_FILE=str(conf)), roce.RoceGids()) == (
        3,
        "NCCL_IB_GID_INDEX in NCCL_CONF_FILE or ~/.nccl.conf",
    )
    (tmp_path / ".nccl.conf").write_text("NCCL_IB_GID_INDEX=5\n")
    assert roce._job_gid_index(_run_gids_probe(tmp_path), roce.RoceGids()) == (
        5,
        "NCCL_IB_GID_INDEX in NCCL_CONF_FILE or ~/.nccl.conf",
    )
