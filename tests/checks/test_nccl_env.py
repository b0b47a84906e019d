"""nccl.env: the per-node judges on constructed probe outputs (tests/parsers/test_nccl_config.py builds
them), and the reachability test against a scripted cluster (no SSH): each step answers what the real
listener and client scripts print."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from nodecheck.checks import nccl_env as ne
from nodecheck.checks.nccl_env import NcclEnv, judge_node
from nodecheck.core.model import Capture, Node, Outcome, Status
from nodecheck.judging.nccl_settings import parse_nccl_list, strtoll, torch_bool, torch_int
from nodecheck.parsers.nccl_config import parse_probe
from nodecheck.parsers.reachability import listener_made
from nodecheck.probes import reachability
from nodecheck.run.active import CheckContext, CommandRunner
from tests import everyone_tmp
from tests.parsers.test_nccl_config import LIFETIME, output

tmp_path = everyone_tmp.tmp_path  # files a job's user reads: in a directory everyone may enter

UNWRITABLE = (
    "!mktemp: failed to create file via template '/scratch/fr/.nodecheck-write-test.XXXXXX': No such file or directory"
)
GOOD_ENV = {
    "NCCL_SOCKET_IFNAME": "=ib0",
    "NCCL_IB_HCA": "mlx5_0:1",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3",
    "TORCH_NCCL_TRACE_BUFFER_SIZE": "2000",
    "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
}


def judged(text: str | None = None, subject: str | None = None, **params) -> list[tuple[str, str]]:
    """(status, message) of the verdicts about `subject` (a prefix), or all of them."""
    verdicts = judge_node(output() if text is None else text, NcclEnv(**params))
    return [(v.status.value, v.message) for v in verdicts if subject is None or v.subject.startswith(subject)]


# --- the probe output --------------------------------------------------------------------------------


def test_the_real_probe_script_runs_in_sh_and_keeps_the_nodes_other_variables_on_the_node():
    want = NcclEnv(
        env={"TORCH_FR_DUMP_TEMP_FILE": "/nonexistent-nodecheck/fr_", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": "trace_"}
    )
    [probe] = ne.probes(want)
    assert probe.argv[3:] == (
        "sh",
        "1",
        "",
        "",
        "job:TORCH_FR_DUMP_TEMP_FILE",
        "/nonexistent-nodecheck/fr_",
        "job:TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
        "trace_",
    )
    run = subprocess.run(
        probe.argv,
        capture_output=True,
        text=True,
        timeout=20,
        env={
            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
            "NCCL_DEBUG": "INFO",
            "SECRET_TOKEN": "x",
            "MASTER_PORT": "29500",
            "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": "/tmp/node_fr_",
            "HOME": "/nonexistent-nodecheck-home",
        },
    )
    assert run.returncode == 0, run.stderr
    facts = parse_probe(run.stdout)
    assert facts.node_env == {
        "NCCL_DEBUG": "INFO",
        "MASTER_PORT": "29500",
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": "/tmp/node_fr_",
    }
    assert "lo" in facts.links and facts.addresses is not None and "lo" in facts.addresses
    assert facts.writable["default"] == "ok" and facts.writable["node:TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] == "ok"
    assert facts.writable["job:TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] == "!relative"
    assert facts.writable["job:TORCH_FR_DUMP_TEMP_FILE"].startswith(
        "!mktemp: failed to create file via template '/nonexistent-nodecheck/.nodecheck-write-test.XXXXXX'"
    )
    assert facts.memlock == "unlimited" or facts.memlock.isdigit()
    assert (facts.conf[0].path, dict(facts.conf[0].settings)) == ("/nonexistent-nodecheck-home/.nccl.conf", {})
    assert facts.conf[1].path == "/etc/nccl.conf"
    without = subprocess.run(
        ne.probes(NcclEnv(node_env=False))[0].argv,
        capture_output=True,
        text=True,
        timeout=20,
        env={"PATH": "/usr/bin:/bin", "NCCL_DEBUG": "INFO"},
    )
    assert parse_probe(without.stdout).node_env == {}


def test_a_value_with_a_newline_neither_leaks_another_variable_nor_invents_one():
    # `env | grep` printed values raw: SECRET="s\nTORCH_LEAK=..." sent the secret's second line off
    # the node as a variable, and NCCL_X="a\nNCCL_FAKE=evil" invented NCCL_FAKE
    run = subprocess.run(
        ne.probes(NcclEnv())[0].argv,
        capture_output=True,
        text=True,
        timeout=20,
        env={
            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
            "SECRET": "s\nTORCH_LEAK=hunter2",
            "NCCL_X": "a\nNCCL_FAKE=evil",
            "NCCL_Y": "back\\slash @@nodecheck end node_env rc=0",
            "HOME": "/nonexistent-nodecheck-home",
        },
    )
    assert run.returncode == 0, run.stderr
    assert "hunter2" not in run.stdout
    assert parse_probe(run.stdout).node_env == {
        "NCCL_X": "a\nNCCL_FAKE=evil",
        "NCCL_Y": "back\\slash @@nodecheck end node_env rc=0",
    }


def test_the_probe_reads_the_conf_file_nccl_would_read(tmp_path):
    """NCCL_CONF_FILE from the job, else from the node's session (when it is the job's), else ~/.nccl.conf."""
    job_conf, node_conf = tmp_path / "job.conf", tmp_path / "node.conf"
    job_conf.write_text("NCCL_SOCKET_IFNAME=eth9\n")
    node_conf.write_text("NCCL_IB_HCA=mlx5_7")  # no final newline: the section still ends
    (tmp_path / ".nccl.conf").write_text("NCCL_DEBUG=INFO\n")
    node = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "NCCL_CONF_FILE": str(node_conf)}

    def conf(want: NcclEnv) -> tuple[str, dict]:
        run = subprocess.run(ne.probes(want)[0].argv, capture_output=True, text=True, timeout=20, env=node)
        first = parse_probe(run.stdout).conf[0]
        return first.path, dict(first.settings)

    assert conf(NcclEnv(env={"NCCL_CONF_FILE": str(job_conf)})) == (str(job_conf), {"NCCL_SOCKET_IFNAME": "eth9"})
    assert conf(NcclEnv()) == (str(node_conf), {"NCCL_IB_HCA": "mlx5_7"})
    assert conf(NcclEnv(node_env=False)) == (f"{tmp_path}/.nccl.conf", {"NCCL_DEBUG": "INFO"})


def test_nccl_conf_values_apply_where_the_environment_leaves_a_variable_unset():
    text = output(user_conf="NCCL_SOCKET_IFNAME=eth9\n", etc_conf="NCCL_SOCKET_IFNAME=ib0\nNCCL_IB_HCA=mlx5_1:1\n")
    assert [m for _, m in judged(text, "NCCL_SOCKET_IFNAME")] == [
        "NCCL_SOCKET_IFNAME=eth9 (/root/.nccl.conf): entry 'eth9' matches no interface on this node (interfaces: "
        "docker0 down, eth0 up, eth1 up, ib0 up, lo unknown)",
        "NCCL_SOCKET_IFNAME=eth9 (/root/.nccl.conf): no interface it selects is up on this node (interfaces: docker0 "
        "down, eth0 up, eth1 up, ib0 up, lo unknown): NCCL finds no socket interface and init fails",
    ]
    assert judged(text, "NCCL_IB_HCA")[-1] == (
        "fail",
        "NCCL_IB_HCA=mlx5_1:1 (/etc/nccl.conf): no ACTIVE port among the HCAs it selects (ACTIVE here: "
        "mlx5_0/1, mlx5_2/1): NCCL falls back to TCP sockets, far slower",
    )
    # any environment wins over the files; NCCL sets only what is unset
    assert judged(text, "NCCL_SOCKET_IFNAME", env={"NCCL_SOCKET_IFNAME": "=ib0"}) == [
        ("pass", "NCCL_SOCKET_IFNAME==ib0 (job environment): NCCL uses ib0 (10.2.0.17/16)")
    ]
    assert judged(output(node_env="NCCL_IB_HCA=mlx5_0\n", etc_conf="NCCL_IB_HCA=mlx5_1\n"), "NCCL_IB_HCA") == [
        ("pass", "NCCL_IB_HCA=mlx5_0 (node environment): NCCL uses mlx5_0/1")
    ]


def test_an_unreadable_nccl_conf_is_an_error_not_ignored():
    verdicts = judge_node(output(etc_conf="NCCL_SOCKET_IFNAME = eth0\n"), NcclEnv())
    assert [(v.status, v.message) for v in verdicts if v.subject == "nccl.conf"] == [
        (
            Status.ERROR,
            "cannot read /etc/nccl.conf, which NCCL reads: not a NAME=value line: 'NCCL_SOCKET_IFNAME = "
            "eth0'; the NCCL_* values it sets are not known, so the NCCL verdicts may not be what the job gets",
        )
    ]


def test_an_output_without_a_section_or_with_a_strange_ip_line_is_an_error_not_a_pass():
    [v] = judge_node(output().replace("@@nodecheck begin addrs", "@@nodecheck begin adrs"), NcclEnv())
    assert (v.status, v.message) == (
        Status.ERROR,
        "cannot read the nccl_env output: probe output has no 'addrs' section",
    )
    [v] = judge_node(output(addrs='Object "addr" is unknown, try "ip help".\n'), NcclEnv())
    assert (v.status, v.message) == (Status.ERROR, "cannot read the ip output: not `ip -o addr show` output")
    assert v.excerpt == 'Object "addr" is unknown, try "ip help".'
    [v] = judge_node(output().replace("@@nodecheck memlock unlimited\n", ""), NcclEnv())
    assert v.message == "cannot read the nccl_env output: probe output has no 'memlock' line"


def test_a_list_without_entries_matches_every_name_as_nccls_matchIfList_does():
    # matchIfList: `if (listSize == 0) return true`, so `^` with no entries excludes everything
    assert [parse_nccl_list(v).selects("eth0") for v in ("=", "^=", "^,", ",:1")] == [True, False, False, True]
    [(status, message)] = judged(subject="NCCL_SOCKET_IFNAME", env={"NCCL_SOCKET_IFNAME": "^,"})
    assert status == "fail" and message.startswith(
        "NCCL_SOCKET_IFNAME=^, (job environment): no interface it selects is up on this node"
    )
    assert judged(subject="NCCL_IB_HCA", env={"NCCL_IB_HCA": "^"}) == [
        (
            "fail",
            "NCCL_IB_HCA=^ (job environment): no ACTIVE port among the HCAs it selects (ACTIVE here: mlx5_0/1, "
            "mlx5_2/1): NCCL falls back to TCP sockets, far slower",
        )
    ]
    assert judged(subject="NCCL_IB_HCA", env={"NCCL_IB_HCA": "="}) == [
        ("pass", "NCCL_IB_HCA== (job environment): NCCL uses mlx5_0/1, mlx5_2/1")
    ]
    assert judged(subject="NCCL_IB_HCA", env={"NCCL_IB_HCA": ""}) == [
        ("pass", "NCCL_IB_HCA empty (job environment): NCCL uses every ACTIVE HCA port (mlx5_0/1, mlx5_2/1)")
    ]


# --- NCCL_SOCKET_IFNAME --------------------------------------------------------------------------------


def test_an_exclude_list_that_leaves_lo_selected_warns():
    assert judged(subject="NCCL_SOCKET_IFNAME", env={"NCCL_SOCKET_IFNAME": "^docker"}) == [
        (
            "warn",
            "NCCL_SOCKET_IFNAME=^docker (job environment) leaves lo selected: NCCL takes the interfaces it "
            "selects in the kernel's order, lo usually first, and may bootstrap over loopback, which other nodes "
            "cannot reach; exclude lo too (e.g. ^docker,lo)",
        ),
        (
            "pass",
            "NCCL_SOCKET_IFNAME=^docker (job environment): NCCL uses eth0 (10.1.0.17/16, "
            "fe80::5054:ff:fe12:3417/64), ib0 (10.2.0.17/16), lo (127.0.0.1/8)",
        ),
    ]
    assert [s for s, _ in judged(subject="NCCL_SOCKET_IFNAME", env={"NCCL_SOCKET_IFNAME": "lo"})] == ["pass"]


def test_unset_socket_ifname_passes_naming_nccls_own_pick():
    assert judged(subject="NCCL_SOCKET_IFNAME") == [
        (
            "pass",
            "NCCL_SOCKET_IFNAME unset: NCCL picks an interface: ib0 (it takes ib* first, and docker*, lo and "
            "virbr* only when nothing else is up with an address)",
        )
    ]
    no_ib = output(links="eth0 up\nlo unknown\n")
    assert judged(no_ib, "NCCL_SOCKET_IFNAME")[0][1].startswith(
        "NCCL_SOCKET_IFNAME unset: NCCL picks an interface: eth0 ("
    )


def test_unset_socket_ifname_on_a_node_with_only_loopback_warns_that_nccl_would_use_lo():
    text = output(links="lo unknown\n", addrs=f"1: lo    inet 127.0.0.1/8 scope host lo{LIFETIME}\n")
    assert judged(text, "NCCL_SOCKET_IFNAME") == [
        (
            "warn",
            "NCCL_SOCKET_IFNAME unset: no other interface is up with an address, so NCCL would use lo: other "
            "nodes cannot reach this one over it; set NCCL_SOCKET_IFNAME to the cluster network's interface",
        )
    ]


def test_no_interface_with_an_address_fails_even_when_unset():
    assert judged(output(links="eth0 down\n", addrs=""), "NCCL_SOCKET_IFNAME") == [
        (
            "fail",
            "NCCL_SOCKET_IFNAME unset: no interface is up with an IPv4 or IPv6 address (interfaces: eth0 down): "
            "NCCL finds no socket interface and init fails",
        )
    ]


def test_an_exact_interface_that_is_up_with_an_address_passes_with_its_addresses():
    assert judged(subject="NCCL_SOCKET_IFNAME", env={"NCCL_SOCKET_IFNAME": "=eth0"}) == [
        (
            "pass",
            "NCCL_SOCKET_IFNAME==eth0 (job environment): NCCL uses eth0 (10.1.0.17/16, fe80::5054:ff:fe12:3417/64)",
        )
    ]


def test_an_entry_matching_nothing_warns_and_a_list_matching_nothing_fails():
    assert judged(subject="NCCL_SOCKET_IFNAME", env={"NCCL_SOCKET_IFNAME": "ib,ens"}) == [
        (
            "warn",
            "NCCL_SOCKET_IFNAME=ib,ens (job environment): entry 'ens' matches no interface on this node "
            "(interfaces: docker0 down, eth0 up, eth1 up, ib0 up, lo unknown)",
        ),
        ("pass", "NCCL_SOCKET_IFNAME=ib,ens (job environment): NCCL uses ib0 (10.2.0.17/16)"),
    ]
    assert judged(subject="NCCL_SOCKET_IFNAME", env={"NCCL_SOCKET_IFNAME": "=eth9"}) == [
        (
            "warn",
            "NCCL_SOCKET_IFNAME==eth9 (job environment): entry 'eth9' matches no interface on this node "
            "(interfaces: docker0 down, eth0 up, eth1 up, ib0 up, lo unknown)",
        ),
        (
            "fail",
            "NCCL_SOCKET_IFNAME==eth9 (job environment): no interface it selects is up on this node "
            "(interfaces: docker0 down, eth0 up, eth1 up, ib0 up, lo unknown): NCCL finds no socket interface "
            "and init fails",
        ),
    ]


def test_a_selected_interface_that_is_down_or_has_no_address_fails_by_name():
    assert judged(subject="NCCL_SOCKET_IFNAME", env={"NCCL_SOCKET_IFNAME": "docker"}) == [
        (
            "fail",
            "docker0 (selected by NCCL_SOCKET_IFNAME=docker (job environment)) is down, expected up: NCCL skips "
            "an interface that is not running",
        ),
        (
            "fail",
            "NCCL_SOCKET_IFNAME=docker (job environment): no interface it selects is up on this node "
            "(interfaces: docker0 down, eth0 up, eth1 up, ib0 up, lo unknown): NCCL finds no socket interface "
            "and init fails",
        ),
    ]
    verdicts = judge_node(output(), NcclEnv(env={"NCCL_SOCKET_IFNAME": "eth"}))
    assert [(v.status.value, v.subject, v.message) for v in verdicts if v.subject.startswith("NCCL_SOCKET")] == [
        (
            "fail",
            "NCCL_SOCKET_IFNAME:eth1",
            "eth1 (selected by NCCL_SOCKET_IFNAME=eth (job environment)) has no IPv4 or IPv6 address: NCCL skips it",
        ),
        (
            "pass",
            "NCCL_SOCKET_IFNAME",
            "NCCL_SOCKET_IFNAME=eth (job environment): NCCL uses eth0 (10.1.0.17/16, fe80::5054:ff:fe12:3417/64)",
        ),
    ]


def test_an_interface_whose_driver_reports_no_state_warns():
    text = output(
        links="lo unknown\ntun0 unknown\n", addrs=f"7: tun0    inet 10.8.0.2/24 scope global tun0{LIFETIME}\n"
    )
    assert judged(text, "NCCL_SOCKET_IFNAME", env={"NCCL_SOCKET_IFNAME": "tun0"}) == [
        (
            "warn",
            "tun0 (selected by NCCL_SOCKET_IFNAME=tun0 (job environment)) has operstate unknown, expected up: "
            "its driver does not report the link state",
        ),
        ("pass", "NCCL_SOCKET_IFNAME=tun0 (job environment): NCCL uses tun0 (10.8.0.2/24)"),
    ]


def test_socket_family_restricts_the_addresses_nccl_considers():
    assert judged(
        subject="NCCL_SOCKET_IFNAME", env={"NCCL_SOCKET_IFNAME": "=ib0", "NCCL_SOCKET_FAMILY": "AF_INET6"}
    ) == [
        (
            "fail",
            "ib0 (selected by NCCL_SOCKET_IFNAME==ib0 (job environment)) has no IPv6 "
            "(NCCL_SOCKET_FAMILY=AF_INET6) address: NCCL skips it",
        ),
        (
            "fail",
            "NCCL_SOCKET_IFNAME==ib0 (job environment): no interface it selects is up with an IPv6 "
            "(NCCL_SOCKET_FAMILY=AF_INET6) address (up: ib0): NCCL finds no socket interface and init fails",
        ),
    ]


def test_an_exclude_list_judges_what_is_left_and_warns_about_entries_that_exclude_nothing():
    assert judged(subject="NCCL_SOCKET_IFNAME", env={"NCCL_SOCKET_IFNAME": "^docker,lo,virbr"}) == [
        (
            "warn",
            "NCCL_SOCKET_IFNAME=^docker,lo,virbr (job environment): excluded entry 'virbr' matches no interface "
            "on this node (interfaces: docker0 down, eth0 up, eth1 up, ib0 up, lo unknown)",
        ),
        (
            "pass",
            "NCCL_SOCKET_IFNAME=^docker,lo,virbr (job environment): NCCL uses eth0 (10.1.0.17/16, "
            "fe80::5054:ff:fe12:3417/64), ib0 (10.2.0.17/16)",
        ),
    ]
    [(status, message)] = judged(subject="NCCL_SOCKET_IFNAME", env={"NCCL_SOCKET_IFNAME": "^=eth0,eth1,ib0,lo"})
    assert status == "fail" and message.startswith(
        "NCCL_SOCKET_IFNAME=^=eth0,eth1,ib0,lo (job environment): no interface it selects is up on this node"
    )


def test_without_iproute2_the_address_part_is_an_error_never_a_pass():
    text = output(addrs="sh: 1: ip: not found\n", addrs_rc=127)
    assert judged(text, "NCCL_SOCKET_IFNAME", env={"NCCL_SOCKET_IFNAME": "=eth0"}) == [
        (
            "error",
            "NCCL_SOCKET_IFNAME==eth0 (job environment): cannot check the addresses of eth0: `ip -o addr show` "
            "exited 127: sh: 1: ip: not found (iproute2 not installed)",
        )
    ]
    assert judged(text, "NCCL_SOCKET_IFNAME") == [
        (
            "pass",
            "NCCL_SOCKET_IFNAME unset: NCCL picks an interface (it takes ib* first, and docker*, lo and virbr* only "
            "when nothing else is up with an address); which one is not known: `ip -o addr show` exited 127: "
            "sh: 1: ip: not found (iproute2 not installed)",
        )
    ]


def test_a_one_character_value_is_ignored_by_nccl_and_says_so():
    [(status, message)] = judged(subject="NCCL_SOCKET_IFNAME", env={"NCCL_SOCKET_IFNAME": "e"})
    assert status == "warn" and message.startswith(
        "NCCL_SOCKET_IFNAME=e (job environment) is ignored by NCCL (it reads 2 characters or more): NCCL picks an "
        "interface: ib0"
    )


def test_the_job_environment_wins_over_the_nodes_and_each_message_names_its_source():
    text = output(node_env="NCCL_SOCKET_IFNAME=eth0\n")
    [(_, message)] = judged(text, "NCCL_SOCKET_IFNAME")
    assert message.startswith("NCCL_SOCKET_IFNAME=eth0 (node environment): NCCL uses eth0 (")
    [(_, message)] = judged(text, "NCCL_SOCKET_IFNAME", env={"NCCL_SOCKET_IFNAME": "ib0"})
    assert message == "NCCL_SOCKET_IFNAME=ib0 (job environment): NCCL uses ib0 (10.2.0.17/16)"
    [(_, message)] = judged(text, "NCCL_SOCKET_IFNAME", node_env=False)
    assert message.startswith("NCCL_SOCKET_IFNAME unset: NCCL picks an interface: ib0")


# --- NCCL_IB_HCA ---------------------------------------------------------------------------------------


def test_unset_ib_hca_passes_naming_the_active_ports():
    assert judged(subject="NCCL_IB_HCA") == [
        ("pass", "NCCL_IB_HCA unset: NCCL uses every ACTIVE HCA port (mlx5_0/1, mlx5_2/1)")
    ]
    assert judged(output(hcas="", ib=""), "NCCL_IB_HCA") == [
        ("pass", "NCCL_IB_HCA unset: NCCL uses every ACTIVE HCA port (this node has no RDMA device)")
    ]


def test_a_named_active_port_passes():
    assert judged(subject="NCCL_IB_HCA", env={"NCCL_IB_HCA": "mlx5_0:1"}) == [
        ("pass", "NCCL_IB_HCA=mlx5_0:1 (job environment): NCCL uses mlx5_0/1")
    ]


def test_a_named_port_that_is_down_or_absent_fails():
    verdicts = judge_node(output(), NcclEnv(env={"NCCL_IB_HCA": "mlx5_1:1,mlx5_0:2"}))
    assert [(v.status.value, v.subject, v.message) for v in verdicts if v.subject.startswith("NCCL_IB_HCA")] == [
        (
            "fail",
            "NCCL_IB_HCA:mlx5_1/1",
            "mlx5_1/1 (named by NCCL_IB_HCA=mlx5_1:1,mlx5_0:2 (job environment)) is "
            "DOWN, expected ACTIVE: NCCL skips a port that is not ACTIVE",
        ),
        (
            "fail",
            "NCCL_IB_HCA:mlx5_0/2",
            "mlx5_0 port 2 (named by NCCL_IB_HCA=mlx5_1:1,mlx5_0:2 (job environment)) does not exist (ports: 1)",
        ),
        (
            "fail",
            "NCCL_IB_HCA",
            "NCCL_IB_HCA=mlx5_1:1,mlx5_0:2 (job environment): no ACTIVE port among the HCAs it "
            "selects (ACTIVE here: mlx5_0/1, mlx5_2/1): NCCL falls back to TCP sockets, far slower",
        ),
    ]


def test_an_hca_that_does_not_exist_fails_and_an_exact_name_is_not_a_prefix():
    assert judged(subject="NCCL_IB_HCA", env={"NCCL_IB_HCA": "=mlx5"}) == [
        (
            "fail",
            "NCCL_IB_HCA==mlx5 (job environment): 'mlx5' names no HCA on this node (HCAs: mlx5_0, mlx5_1, mlx5_2)",
        ),
        (
            "fail",
            "NCCL_IB_HCA==mlx5 (job environment): no ACTIVE port among the HCAs it selects (ACTIVE here: "
            "mlx5_0/1, mlx5_2/1): NCCL falls back to TCP sockets, far slower",
        ),
    ]


def test_a_prefix_that_also_matches_a_down_hca_warns_but_a_named_down_hca_fails():
    assert judged(subject="NCCL_IB_HCA", env={"NCCL_IB_HCA": "mlx5"}) == [
        (
            "warn",
            "mlx5_1 (matched by prefix 'mlx5' of NCCL_IB_HCA=mlx5 (job environment)) has no ACTIVE port "
            "(port 1 DOWN): NCCL skips it",
        ),
        ("pass", "NCCL_IB_HCA=mlx5 (job environment): NCCL uses mlx5_0/1, mlx5_2/1"),
    ]
    assert judged(subject="NCCL_IB_HCA", env={"NCCL_IB_HCA": "mlx5_0,mlx5_1"})[0] == (
        "fail",
        "mlx5_1 (named by NCCL_IB_HCA=mlx5_0,mlx5_1 (job environment)) has no ACTIVE port (port 1 DOWN): NCCL skips it",
    )


def test_an_exclude_list_passes_on_what_is_left_and_fails_when_nothing_is():
    assert judged(subject="NCCL_IB_HCA", env={"NCCL_IB_HCA": "^mlx5_2,mlx5_9"}) == [
        (
            "warn",
            "NCCL_IB_HCA=^mlx5_2,mlx5_9 (job environment): 'mlx5_9' excludes no HCA on this node (HCAs: mlx5_0, "
            "mlx5_1, mlx5_2)",
        ),
        ("pass", "NCCL_IB_HCA=^mlx5_2,mlx5_9 (job environment): NCCL uses mlx5_0/1"),
    ]
    assert judged(subject="NCCL_IB_HCA", env={"NCCL_IB_HCA": "^mlx5"}) == [
        (
            "fail",
            "NCCL_IB_HCA=^mlx5 (job environment): no ACTIVE port among the HCAs it selects (ACTIVE here: "
            "mlx5_0/1, mlx5_2/1): NCCL falls back to TCP sockets, far slower",
        )
    ]


def test_ib_disabled_is_not_judged_against_the_hcas():
    assert judged(subject="NCCL_IB_HCA", env={"NCCL_IB_HCA": "mlx5_9", "NCCL_IB_DISABLE": "1"}) == [
        ("pass", "NCCL_IB_DISABLE=1 (job environment): NCCL does not use InfiniBand or RoCE; NCCL_IB_HCA not judged")
    ]
    # NCCL reads it with strtoll(str, NULL, 0): any non-zero number disables, a word is 0
    assert judged(subject="NCCL_IB_HCA", env={"NCCL_IB_HCA": "mlx5_9", "NCCL_IB_DISABLE": "0x1"})[0][1].startswith(
        "NCCL_IB_DISABLE=0x1 (job environment): NCCL does not use"
    )
    assert judged(subject="NCCL_IB_HCA", env={"NCCL_IB_HCA": "mlx5_9", "NCCL_IB_DISABLE": "yes"})[0][0] == "fail"
    assert [strtoll(v) for v in ("1", " 2x", "010", "0x1f", "-3", "yes", "", "0")] == [1, 2, 8, 31, -3, 0, 0, 0]


# --- collective timeouts -------------------------------------------------------------------------------


def test_async_error_handling_or_blocking_wait_passes():
    assert judged(subject="timeouts", env={"TORCH_NCCL_ASYNC_ERROR_HANDLING": "3"}) == [
        (
            "pass",
            "TORCH_NCCL_ASYNC_ERROR_HANDLING=3 (job environment): the watchdog ends a collective that outlives "
            "the process group's timeout (tear the process down without aborting the communicator)",
        )
    ]
    assert judged(output(node_env="NCCL_ASYNC_ERROR_HANDLING=1\n"), "timeouts") == [
        (
            "pass",
            "NCCL_ASYNC_ERROR_HANDLING=1 (node environment): the watchdog ends a collective that outlives the "
            "process group's timeout (abort the communicator and tear the process down)",
        )
    ]
    assert judged(subject="timeouts", env={"TORCH_NCCL_BLOCKING_WAIT": "1"}) == [
        (
            "pass",
            "TORCH_NCCL_BLOCKING_WAIT=1 (job environment): wait() raises when a collective outlives the process "
            "group's timeout",
        )
    ]


NO_TIMEOUT = (
    "NCCL has no timeout by default, so a hung collective hangs the job forever unless PyTorch's watchdog "
    "acts (recent PyTorch releases default to 3, older ones to 0); set TORCH_NCCL_ASYNC_ERROR_HANDLING=3"
)


def test_no_timeout_handling_is_the_timeouts_level():
    assert judged(subject="timeouts") == [
        ("warn", f"TORCH_NCCL_ASYNC_ERROR_HANDLING unset and TORCH_NCCL_BLOCKING_WAIT unset: {NO_TIMEOUT}")
    ]
    assert judged(subject="timeouts", timeouts="fail", env={"TORCH_NCCL_ASYNC_ERROR_HANDLING": "0"}) == [
        (
            "fail",
            f"TORCH_NCCL_ASYNC_ERROR_HANDLING=0 (job environment) and TORCH_NCCL_BLOCKING_WAIT unset: {NO_TIMEOUT}",
        )
    ]
    assert judged(subject="timeouts", env={"TORCH_NCCL_ASYNC_ERROR_HANDLING": "yes"}) == [
        (
            "warn",
            "TORCH_NCCL_ASYNC_ERROR_HANDLING=yes (job environment) (not 0, 1, 2 or 3) and "
            f"TORCH_NCCL_BLOCKING_WAIT unset: {NO_TIMEOUT}",
        )
    ]
    assert judged(subject="timeouts", timeouts="off") == []


def test_pytorch_switches_are_read_as_pytorch_reads_them():
    assert judged(subject="timeouts", env={"TORCH_NCCL_BLOCKING_WAIT": "True"}) == [
        (
            "pass",
            "TORCH_NCCL_BLOCKING_WAIT=True (job environment): wait() raises when a collective outlives the "
            "process group's timeout",
        )
    ]
    assert judged(subject="timeouts", env={"TORCH_NCCL_ASYNC_ERROR_HANDLING": " 3"})[0][0] == "pass"  # stoi
    assert [
        s for s, _ in judged(subject="TORCH_NCCL_ENABLE_MONITORING", env={"TORCH_NCCL_ENABLE_MONITORING": "false"})
    ] == ["warn"]
    assert (
        judged(
            subject="flight_recorder", env={"TORCH_NCCL_TRACE_BUFFER_SIZE": "2000", "TORCH_NCCL_DUMP_ON_TIMEOUT": "yes"}
        )[0][0]
        == "pass"
    )
    assert [torch_bool(v) for v in ("Y", "no", "T", " 1", "on", "")] == [True, False, True, None, None, None]
    assert [torch_int(v) for v in ("2000", " -1", "3abc", "abc", "²", "99999999999")] == [2000, -1, 3, None, None, None]


@pytest.mark.parametrize(
    "name, value, expected",
    [
        ("TORCH_NCCL_BLOCKING_WAIT", "maybe", "1/0, true/false, yes/no, y/n or t/f"),
        ("TORCH_NCCL_DUMP_ON_TIMEOUT", " 1", "1/0, true/false, yes/no, y/n or t/f"),
        ("NCCL_ASYNC_ERROR_HANDLING", "yes", "an integer"),  # the deprecated name is read too
        ("TORCH_NCCL_TRACE_BUFFER_SIZE", "²", "an integer"),
    ],
)
def test_a_pytorch_variable_pytorch_cannot_read_fails_the_job(name, value, expected):
    env = {
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3",
        "TORCH_NCCL_TRACE_BUFFER_SIZE": "2000",
        "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
        name: value,
    }
    assert judged(subject=name, env=env, timeouts="off", flight_recorder="off") == [
        (
            "fail",
            f"{name}={value} (job environment) is not {expected}: PyTorch refuses it when it creates the NCCL "
            f'process group ("Invalid value for environment variable: {name}"), so the job fails at start; '
            f"set {expected} or unset it",
        )
    ]


def test_a_disabled_heartbeat_monitor_is_said():
    assert judged(
        subject="TORCH_NCCL_ENABLE_MONITORING",
        env={"TORCH_NCCL_ASYNC_ERROR_HANDLING": "3", "TORCH_NCCL_ENABLE_MONITORING": "0"},
    ) == [
        (
            "warn",
            "TORCH_NCCL_ENABLE_MONITORING=0 (job environment): the watchdog's heartbeat monitor is off, so a "
            "watchdog stuck in a CUDA or NCCL call is never detected (TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC does not "
            "apply); unset it or set 1",
        )
    ]


# --- flight recorder -----------------------------------------------------------------------------------

FR_ON = {"TORCH_NCCL_TRACE_BUFFER_SIZE": "2000", "TORCH_NCCL_DUMP_ON_TIMEOUT": "1"}
FR_SETTINGS = "TORCH_FR_BUFFER_SIZE unset"


def test_the_flight_recorder_on_with_a_writable_default_directory_passes():
    assert judged(subject="flight_recorder", env=FR_ON) == [
        (
            "pass",
            "flight recorder on (TORCH_NCCL_TRACE_BUFFER_SIZE=2000 (job environment), TORCH_NCCL_DUMP_ON_TIMEOUT=1 "
            "(job environment)): dumps to /tmp/nccl_trace_rank_ (PyTorch's default); its directory is writable "
            "on this node",
        )
    ]


def test_a_dump_directory_that_is_not_writable_fails():
    text = output(writable=f"default\tok\njob:TORCH_NCCL_DEBUG_INFO_TEMP_FILE\t{UNWRITABLE}\n")
    assert judged(text, "flight_recorder", env={**FR_ON, "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": "/scratch/fr/rank_"}) == [
        (
            "fail",
            "flight recorder on (TORCH_NCCL_TRACE_BUFFER_SIZE=2000 (job environment), TORCH_NCCL_DUMP_ON_TIMEOUT=1 "
            "(job environment)): dumps to TORCH_NCCL_DEBUG_INFO_TEMP_FILE=/scratch/fr/rank_ (job environment), "
            "but /scratch/fr is not writable on this node (mktemp: failed to create file via template "
            "'/scratch/fr/.nodecheck-write-test.XXXXXX': No such file or directory): the dump of a timed-out "
            "collective would be lost",
        )
    ]


def test_pytorch_2_9_names_from_the_node_are_read_first():
    text = output(
        node_env="TORCH_FR_BUFFER_SIZE=100\nTORCH_FR_DUMP_TEMP_FILE=/var/fr/r_\n",
        writable="default\tok\nnode:TORCH_FR_DUMP_TEMP_FILE\tok\n",
    )
    assert judged(
        text, "flight_recorder", env={"TORCH_NCCL_DUMP_ON_TIMEOUT": "1", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": "/ignored/"}
    ) == [
        (
            "pass",
            "flight recorder on (TORCH_FR_BUFFER_SIZE=100 (node environment), TORCH_NCCL_DUMP_ON_TIMEOUT=1 (job "
            "environment)): dumps to TORCH_FR_DUMP_TEMP_FILE=/var/fr/r_ (node environment); its directory is "
            "writable on this node",
        )
    ]


def test_a_relative_dump_path_cannot_be_checked_and_warns():
    text = output(writable="default\tok\njob:TORCH_NCCL_DEBUG_INFO_TEMP_FILE\t!relative\n")
    [(status, message)] = judged(text, "flight_recorder", env={**FR_ON, "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": "fr_"})
    assert status == "warn" and message.endswith(
        "dumps to TORCH_NCCL_DEBUG_INFO_TEMP_FILE=fr_ (job environment), a relative path: the dump lands in the "
        "job's working directory, which nodecheck cannot check; give an absolute path"
    )


def test_the_flight_recorder_off_or_half_on_is_the_flight_recorder_level():
    off = (
        "a timed-out collective leaves no record of which rank stopped where; set "
        "TORCH_NCCL_TRACE_BUFFER_SIZE=2000 and TORCH_NCCL_DUMP_ON_TIMEOUT=1"
    )
    assert judged(subject="flight_recorder") == [
        ("warn", f"flight recorder off ({FR_SETTINGS}, TORCH_NCCL_DUMP_ON_TIMEOUT unset): {off}")
    ]
    assert judged(subject="flight_recorder", flight_recorder="fail", env={"TORCH_NCCL_TRACE_BUFFER_SIZE": "2000"}) == [
        (
            "fail",
            "flight recorder off (TORCH_NCCL_TRACE_BUFFER_SIZE=2000 (job environment), TORCH_NCCL_DUMP_ON_TIMEOUT "
            f"unset): {off}",
        )
    ]
    assert (
        judged(subject="flight_recorder", env={"TORCH_NCCL_TRACE_BUFFER_SIZE": "0", "TORCH_NCCL_DUMP_ON_TIMEOUT": "1"})[
            0
        ][0]
        == "warn"
    )
    assert judged(subject="flight_recorder", flight_recorder="off") == []


# --- memlock -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, status, message",
    [
        ("unlimited", "pass", "max locked memory unlimited (ulimit -l in nodecheck's session on the node)"),
        (
            "65536",
            "warn",
            "max locked memory 65536 KiB (ulimit -l in nodecheck's session on the node), expected unlimited: "
            "RDMA registers host memory and NVIDIA recommends unlimited",
        ),
        (
            "64",
            "fail",
            "max locked memory 64 KiB (ulimit -l in nodecheck's session on the node), expected >= 65536 KiB "
            "(unlimited recommended): RDMA memory registration fails",
        ),
        ("²", "error", "cannot read the max locked memory (ulimit -l in nodecheck's session on the node): '²'"),
        (
            "sh: ulimit: bad option",
            "error",
            "cannot read the max locked memory (ulimit -l in nodecheck's session on the "
            "node): 'sh: ulimit: bad option'",
        ),
    ],
)
def test_memlock_unlimited_passes_a_limit_warns_and_a_small_one_fails(value, status, message):
    assert judged(output(memlock=value), "memlock") == [(status, message)]


def test_the_memlock_threshold_comes_from_the_playbook():
    assert judged(output(memlock="8192"), "memlock", memlock_kib={"fail_below": 4096})[0][0] == "warn"


# --- parameters ----------------------------------------------------------------------------------------


def test_numbers_in_the_playbook_env_are_read_as_the_shell_would_see_them():
    assert NcclEnv(env={"TORCH_NCCL_TRACE_BUFFER_SIZE": 2000}).env == {"TORCH_NCCL_TRACE_BUFFER_SIZE": "2000"}


@pytest.mark.parametrize(
    "params, words",
    [
        ({"env": {"NCCL-IB": "x"}}, "'NCCL-IB' is not an environment variable name"),
        ({"env": {"TORCH_NCCL_DUMP_ON_TIMEOUT": True}}, "a YAML boolean is not an environment value: quote it"),
        ({"env": {"A": "x\0y"}}, "an environment value cannot hold a NUL byte"),
        ({"reachability": {"ports": [0]}}, "greater than or equal to 1"),
        ({"reachability": {"ports": ["29500"]}}, "Input should be a valid integer"),
        ({"reachability": {"port": [29500]}}, "Extra inputs are not permitted"),
        ({"memlock_kib": 65536}, "valid dictionary or instance of MemlockFloor"),
        ({"timeouts": "error"}, "Input should be 'warn', 'fail' or 'off'"),
    ],
)
def test_bad_parameters_are_refused(params, words):
    with pytest.raises(ValidationError) as info:
        NcclEnv(**params)
    assert words in str(info.value)


# --- reachability (active) -----------------------------------------------------------------------------


class ScriptedNode:
    """Answers the three reachability steps as the real scripts print them."""

    def __init__(self, node: str, cluster: ScriptedCluster) -> None:
        self.node, self.cluster = node, cluster

    def run(self, probe, timeout_s):
        argv, text, code = probe.argv, "", 0
        self.cluster.log.append((self.node, probe.name))
        if probe.name == "nccl_env.listen":  # sh -c SCRIPT sh LIMIT WAIT DIR SRC TAG ADDRESS PORT...
            self.cluster.tag = argv[8]
            text = self.cluster.listen(self.node, [int(p) for p in argv[10:]])
        elif probe.name == "nccl_env.connect":  # python3 -c SRC TAG TIMEOUT (HOST PORT)...
            if self.cluster.connect_raises:
                raise RuntimeError("transport bug")
            pairs = list(zip(argv[5::2], argv[6::2]))
            text = "".join(
                f"@@nodecheck conn {i} {self.cluster.result(self.node, self.cluster.by_address[h], int(p))}\n"
                for i, (h, p) in enumerate(pairs)
            )
            code = self.cluster.connect_exit.get(self.node, 0)
        elif probe.name == "nccl_env.listen-stop":
            text = (
                "@@nodecheck alive\n"
                if self.node not in self.cluster.died
                else "@@nodecheck exited 137\n@@nodecheck begin stderr\n@@nodecheck end stderr rc=0\n"
            )
        return Capture(self.node, probe.name, argv, Outcome.EXITED, code, text, "", 0.01)

    def close(self):
        pass


class ScriptedCluster:
    def __init__(self, busy=(), refused=(), timeouts=(), died=(), start_exit=(), answer_other=()):
        self.busy, self.refused, self.timeouts = set(busy), set(refused), set(timeouts)
        self.died, self.start_exit, self.answer_other = set(died), dict(start_exit), set(answer_other)
        self.log: list[tuple[str, str]] = []
        self.by_address: dict[str, str] = {}
        self.connect_exit: dict[str, int] = {}
        self.connect_raises = False
        self.tag = ""

    def listen(self, node, ports):
        if node in self.start_exit:
            return (
                f"@@nodecheck exited {self.start_exit[node]}\n@@nodecheck begin stderr\n"
                "timeout: failed to run command 'python3': No such file or directory\n@@nodecheck end stderr rc=0\n"
            )
        lines = [
            f"@@nodecheck port {p} busy Address already in use"
            if (node, p) in self.busy
            else f"@@nodecheck port {p} listening"
            for p in ports
        ]
        return (
            "\n".join(lines) + "\n@@nodecheck bound\n@@nodecheck ready\n@@nodecheck begin stderr\n"
            "@@nodecheck end stderr rc=0\n"
        )

    def result(self, source, target, port):
        if (source, target, port) in self.refused:
            return "refused Connection refused"
        if (source, target, port) in self.timeouts:
            return "timeout"
        if (source, target, port) in self.answer_other:
            return "other b'SSH-2.0-OpenSSH_9.2\\r\\n'"
        return "ok"

    def connect(self, node, timeout_s):
        return ScriptedNode(node.name, self)


def run_check(
    cluster: ScriptedCluster, n: int = 4, env=None, python3=(), node_env=None, deadline_s=600, order=None, **reach
):
    nodes = {f"node{i}": Node(f"node{i}", f"10.0.0.{i}") for i in range(1, n + 1)}
    cluster.by_address = {node.address: name for name, node in nodes.items()}
    want = NcclEnv(
        env=env if env is not None else {"MASTER_ADDR": "node1", "MASTER_PORT": "29500"},
        reachability={"ports": [29600], **reach},
    )
    caps = {
        name: {
            "nccl_env": Capture(
                name,
                "nccl_env",
                (),
                Outcome.EXITED,
                0,
                output(python3="" if name in python3 else "/usr/bin/python3", node_env=(node_env or {}).get(name, "")),
                "",
                0,
            )
        }
        for name in nodes
    }
    commands = CommandRunner(cluster, time.monotonic() + deadline_s, threading.Event())
    ctx = CheckContext("nccl.env", nodes, caps, commands, order=order or list(nodes))
    found = [
        (nodes_, v)
        for nodes_, v in ne.env(ctx, want)
        if v.subject == "reachability" or ":" in v.subject or v.subject.startswith("MASTER")
    ]
    return [(group, v.status.value, v.message) for group, v in found if not v.subject.startswith("NCCL_")]


MASTER = "master: MASTER_ADDR=node1 (job environment); MASTER_PORT=29500 (job environment)"


def test_every_node_reaches_the_master_and_its_ring_successor():
    cluster = ScriptedCluster()
    assert run_check(cluster) == [
        (("node1",), "pass", f"reaches node1:29500 ({MASTER}); node2:29600 (ring successor)"),
        (("node2",), "pass", f"reaches node1:29500 ({MASTER}); node3:29600 (ring successor)"),
        (("node3",), "pass", f"reaches node1:29500 ({MASTER}); node4:29600 (ring successor)"),
        (("node4",), "pass", f"reaches node1:29500 ({MASTER}); node1:29600 (ring successor)"),
    ]
    steps = sorted(cluster.log)
    assert steps == sorted(
        (f"node{i}", step)
        for i in range(1, 5)
        for step in ("nccl_env.listen", "nccl_env.connect", "nccl_env.listen-stop")
    )
    assert len(cluster.tag) == 8


def test_a_refused_or_silent_connection_fails_naming_both_nodes_and_the_port():
    cluster = ScriptedCluster(refused={("node3", "node1", 29500)}, timeouts={("node2", "node3", 29600)})
    found = run_check(cluster)
    assert (
        ("node3", "node1"),
        "fail",
        f"node3 cannot reach node1:29500 ({MASTER}): connection refused — a firewall "
        "or nothing listening (nodecheck's listener was up there)",
    ) in found
    assert (
        ("node2", "node3"),
        "fail",
        "node2 cannot reach node3:29600 (ring successor): no answer within 3 s — a "
        "firewall dropping packets or no route",
    ) in found
    assert (("node3",), "pass", "reaches node4:29600 (ring successor)") in found


def test_a_busy_port_is_an_error_on_its_node_and_its_connections_are_not_tested():
    found = run_check(ScriptedCluster(busy={("node3", 29600)}))
    assert (
        ("node3", "node2"),
        "error",
        "port busy: 10.0.0.3:29600 is already in use on node3 (Address already in "
        "use): another job or service holds it, and a job that needs it there cannot bind it; connections to it "
        "from node2 were not tested",
    ) in found
    assert (("node2",), "pass", f"reaches node1:29500 ({MASTER})") in found
    assert not any(status == "fail" for _, status, _ in found)


def test_a_node_without_python3_cannot_be_tested_and_the_ring_goes_around_it():
    cluster = ScriptedCluster()
    found = run_check(cluster, python3={"node3"})
    assert (("node3",), "error", "cannot test reachability: no python3 on node3") in found
    assert (("node2",), "pass", f"reaches node1:29500 ({MASTER}); node4:29600 (ring successor)") in found
    assert ("node3", "nccl_env.listen") not in cluster.log


def test_a_listener_that_exits_127_says_python3_is_missing_not_fail_or_pass():
    found = run_check(ScriptedCluster(start_exit={"node4": 127}))
    assert (
        ("node4",),
        "error",
        "cannot test reachability: no python3 on node4 (python3 exited 127 before "
        "listening): timeout: failed to run command 'python3': No such file or directory",
    ) in found
    assert [g for g, _, _ in found if "node4" in g] == [("node4",)]
    assert (("node3",), "pass", f"reaches node1:29500 ({MASTER}); node1:29600 (ring successor)") in found


def test_a_master_that_cannot_listen_leaves_its_connections_untested():
    found = run_check(ScriptedCluster(start_exit={"node1": 127}))
    assert (
        ("node2", "node3", "node4"),
        "error",
        f"cannot test reachability of node1:29500 ({MASTER}: no listener on node1)",
    ) in found
    assert (("node2",), "pass", "reaches node3:29600 (ring successor)") in found


def test_a_master_addr_that_names_no_node_is_tested_against_the_first_node():
    found = run_check(ScriptedCluster(), n=2, env={"MASTER_ADDR": "10.9.9.9"})
    assert found[0] == (
        ("node1",),
        "pass",
        "reaches node1:29500 (master: MASTER_ADDR=10.9.9.9 (job environment) is "
        "no node of this run, tested against the first node; MASTER_PORT=29500 (default)); "
        "node2:29600 (ring successor)",
    )


def test_master_addr_by_address_from_the_node_environment():
    found = run_check(
        ScriptedCluster(), n=2, env={}, node_env={"node1": "MASTER_ADDR=10.0.0.2\n", "node2": "MASTER_ADDR=10.0.0.2\n"}
    )
    assert found[1] == (
        ("node2",),
        "pass",
        "reaches node2:29500 (master: MASTER_ADDR=10.0.0.2 (node environment); "
        "MASTER_PORT=29500 (default)); node1:29600 (ring successor)",
    )


def test_a_bad_master_port_fails_the_node():
    found = run_check(ScriptedCluster(), n=2, env={"MASTER_ADDR": "node1", "MASTER_PORT": "29500x"})
    assert found[0] == (
        ("node1",),
        "fail",
        "MASTER_PORT=29500x (job environment) is not a port number (1-65535): the job cannot rendezvous",
    )


def test_a_master_port_in_other_digits_fails_instead_of_crashing():
    found = run_check(ScriptedCluster(), n=2, env={"MASTER_ADDR": "node1", "MASTER_PORT": "²"})
    assert found[0] == (
        ("node1",),
        "fail",
        "MASTER_PORT=² (job environment) is not a port number (1-65535): the job cannot rendezvous",
    )


def test_nothing_to_test_is_skipped_not_passed():
    assert run_check(ScriptedCluster(), n=2, env={}, ports=[]) == [
        (
            ("node1",),
            "skipped",
            "reachability not tested: no port to test (MASTER_ADDR and MASTER_PORT unset, reachability.ports empty)",
        ),
        (
            ("node2",),
            "skipped",
            "reachability not tested: no port to test (MASTER_ADDR and MASTER_PORT unset, reachability.ports empty)",
        ),
    ]


def test_a_listener_that_died_makes_a_refusal_unjudged():
    found = run_check(ScriptedCluster(refused={("node1", "node2", 29600)}, died={"node2"}))
    assert (
        ("node1", "node2"),
        "error",
        "node1 -> node2:29600 (ring successor): not judged: nodecheck's listener on "
        "node2 did not last the test (exited 137)",
    ) in found


def test_something_else_answering_is_an_error():
    found = run_check(ScriptedCluster(answer_other={("node2", "node3", 29600)}))
    assert (
        ("node2", "node3"),
        "error",
        "node2 -> node3:29600 (ring successor): connected, but not to nodecheck's "
        "listener (it answered b'SSH-2.0-OpenSSH_9.2\\r\\n'): something else takes connections there",
    ) in found


def test_no_time_left_skips_the_test():
    cluster = ScriptedCluster()
    found = run_check(cluster, n=2, deadline_s=20)
    assert [(g, s) for g, s, _ in found] == [(("node1",), "skipped"), (("node2",), "skipped")]
    assert found[0][2].startswith("reachability not tested: ") and "it needs 46 s" in found[0][2]
    assert cluster.log == []


def test_the_listeners_are_stopped_even_when_the_connection_step_breaks():
    cluster = ScriptedCluster()
    cluster.connect_raises = True
    with pytest.raises(RuntimeError, match="transport bug"):
        run_check(cluster, n=3)
    assert sorted(n for n, step in cluster.log if step == "nccl_env.listen-stop") == ["node1", "node2", "node3"]


def test_disabled_reachability_runs_nothing():
    cluster = ScriptedCluster()
    assert run_check(cluster, n=2, enabled=False) == []
    assert cluster.log == []


def test_a_port_the_listener_does_not_speak_of_is_an_error_not_silently_untested():
    cluster = ScriptedCluster()
    listen = cluster.listen
    cluster.listen = lambda node, ports: (
        listen(node, ports).replace("@@nodecheck port 29600 listening\n", "")
        if node == "node2"
        else listen(node, ports)
    )
    found = run_check(cluster, n=2, env={})
    assert found == [
        (
            ("node2", "node1"),
            "error",
            "cannot test reachability: node2 cannot listen on 10.0.0.2:29600 (the listener "
            "did not say whether it holds it); connections to it from node1 were not tested",
        ),
        (("node2",), "pass", "reaches node1:29600 (ring successor)"),
    ]


def test_a_node_with_nobody_to_connect_to_is_skipped_not_left_without_a_verdict():
    found = run_check(ScriptedCluster(start_exit={"node2": 127}), n=2, env={})
    assert found == [
        (
            ("node2",),
            "error",
            "cannot test reachability: no python3 on node2 (python3 exited 127 before listening): "
            "timeout: failed to run command 'python3': No such file or directory",
        ),
        (("node1",), "skipped", "reachability not tested from node1: no other node's listener to connect to"),
    ]


def test_a_listener_never_stopped_ends_at_its_own_timeout_and_removes_its_directory(tmp_path):
    """The real start script, and no stop step (nodecheck lost): nothing is left on the node."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = (
        "sh",
        "-c",
        reachability._START,
        "sh",
        "1",
        "5",
        "t1.node1",
        reachability._LISTENER,
        "t1",
        "127.0.0.1",
        str(port),
    )
    run = subprocess.run(
        argv, capture_output=True, text=True, timeout=20, env={"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path)}
    )
    assert f"@@nodecheck port {port} listening" in run.stdout and "@@nodecheck ready" in run.stdout
    directory = Path(listener_made(run.stdout))
    assert directory.parent == tmp_path and directory.name.startswith("nodecheck-reach.t1.node1.")
    pid = int((directory / "pid").read_text())
    deadline = time.monotonic() + 10
    while directory.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not directory.exists()
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.1)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    """A process of the group still running (a zombie nobody reaped yet does not count)."""
    out = subprocess.run(["ps", "-o", "stat=", "-s", str(pid)], capture_output=True, text=True).stdout
    return any(not state.startswith("Z") for state in out.split())


# --- a local user who gets to /tmp first (issue 17, finding 2) -----------------------------------------


def _plant(directory: Path, pid: int, secret: Path) -> None:
    """A listener directory as a stranger would leave it: a pid naming someone else's process group,
    an stderr that is a symlink to a file only root may read."""
    directory.mkdir()
    directory.chmod(0o700)
    (directory / "pid").write_text(f"{pid}\n")
    (directory / "err").symlink_to(secret)


def test_the_stop_step_signals_and_shows_nothing_a_local_user_planted(tmp_path):
    secret = tmp_path / "shadow"
    secret.write_text("root:$6$s3cr3t-hash:19000::::::\n")
    secret.chmod(0o600)
    victim = subprocess.Popen(["sleep", "600"], start_new_session=True)
    env = {"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path)}
    try:
        # the old, predictable name, made before the start step: start makes its own private one
        _plant(tmp_path / "nodecheck-reach.t2.node1", victim.pid, secret)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        start = subprocess.run(
            reachability.start_listener("l", "t2.node1", 5, "t2", "127.0.0.1", [port]).argv,
            capture_output=True,
            text=True,
            timeout=20,
            env=env,
        )
        made = listener_made(start.stdout)
        assert "@@nodecheck ready" in start.stdout and made.startswith(f"{tmp_path}/nodecheck-reach.t2.node1.")
        assert os.stat(made).st_mode & 0o777 == 0o700
        listener = int(Path(made, "pid").read_text())
        stop = subprocess.run(
            reachability.stop_listener("x", "t2.node1", made).argv, capture_output=True, text=True, timeout=20, env=env
        )
        assert "@@nodecheck alive" in stop.stdout and not Path(made).exists()
        deadline = time.monotonic() + 5
        while _alive(listener) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(listener)
        # the new form of name, planted (as root a stranger cannot, a process of nodecheck's user could),
        # then named by a start's output, or found by its prefix: no signal, no secret
        for pid in (str(victim.pid), "1", "-1"):
            for given in (f"{tmp_path}/nodecheck-reach.t2.node1.AbC123", ""):
                _plant(tmp_path / "nodecheck-reach.t2.node1.AbC123", victim.pid, secret)
                (tmp_path / "nodecheck-reach.t2.node1.AbC123" / "pid").write_text(pid)
                stop = subprocess.run(
                    reachability.stop_listener("x", "t2.node1", given).argv,
                    capture_output=True,
                    text=True,
                    timeout=20,
                    env=env,
                )
                assert "@@nodecheck alive" not in stop.stdout and "s3cr3t" not in stop.stdout
                assert victim.poll() is None, "the stop step signalled a process group it did not start"
        # a symlink where the start's directory should be is refused, not followed
        target = tmp_path / "elsewhere"
        _plant(target, victim.pid, secret)
        (tmp_path / "nodecheck-reach.t2.node1.XyZ789").symlink_to(target)
        stop = subprocess.run(
            reachability.stop_listener("x", "t2.node1", f"{tmp_path}/nodecheck-reach.t2.node1.XyZ789").argv,
            capture_output=True,
            text=True,
            timeout=20,
            env=env,
        )
        assert stop.stdout.startswith("@@nodecheck refused") and "s3cr3t" not in stop.stdout
        assert (target / "pid").exists() and victim.poll() is None
        assert (tmp_path / "nodecheck-reach.t2.node1" / "err").is_symlink()  # the planted one: left alone
    finally:
        victim.kill()
        victim.wait()


# --- files a job names (issue 17, finding 3: NCCL_CONF_FILE=/etc/shadow was captured) ------------------

SHADOW = "root:$6$s3cr3t-hash:19000:0:99999:7:::\n"


def _conf_read(tmp_path, path: str, via: str = "job") -> tuple[str, NcclEnv]:
    """The probe's stdout with NCCL_CONF_FILE=path from the job's environment or the node's session."""
    want = NcclEnv(env={"NCCL_CONF_FILE": path} if via == "job" else {})
    node = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **({"NCCL_CONF_FILE": path} if via == "node" else {})}
    run = subprocess.run(ne.probes(want)[0].argv, capture_output=True, text=True, timeout=20, env=node)
    assert run.returncode == 0, run.stderr
    return run.stdout, want


@pytest.mark.parametrize("via", ["job", "node"])
def test_a_root_only_file_named_as_nccl_conf_file_is_not_captured(tmp_path, via):
    shadow = tmp_path / "shadow"
    shadow.write_text(SHADOW)
    shadow.chmod(0o600)
    os.chown(shadow, 0, 0)
    text, want = _conf_read(tmp_path, str(shadow), via)
    assert "s3cr3t" not in text
    verdicts = [(v.status, v.message) for v in judge_node(text, want) if v.subject == "nccl.conf"]
    assert verdicts == [
        (
            Status.ERROR,
            f"cannot read {shadow}, which NCCL reads: not read: nobody cannot open it: Permission denied; "
            "the NCCL_* values it sets are not known, so the NCCL verdicts may not be what the job gets",
        )
    ]


@pytest.mark.parametrize(
    "kind, why",
    [
        ("symlink", "not read: it is a symbolic link"),
        ("fifo", "not read: not a regular file"),
        ("large", "not read: 65537 bytes, more than 65536"),
        ("stranger", "not read: owned by uid 4242, not by root"),
    ],
)
def test_a_job_named_file_that_is_not_a_plain_small_file_of_root_or_the_job_is_refused(tmp_path, kind, why):
    shadow = tmp_path / "shadow"
    shadow.write_text(SHADOW)
    shadow.chmod(0o600)
    path = tmp_path / "nccl.conf"
    if kind == "symlink":
        path.symlink_to(shadow)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "large":
        path.write_text("NCCL_DEBUG=INFO\n" + "#" * (65537 - 16))
        assert path.stat().st_size == 65537
    else:
        path.write_text("NCCL_DEBUG=INFO\n")  # world-readable, but another user's: not the job's
        os.chown(path, 4242, 4242)
    text, want = _conf_read(tmp_path, str(path))
    assert "s3cr3t" not in text and "NCCL_DEBUG=INFO" not in text
    [conf] = [c for c in parse_probe(text).conf if c.path == str(path)]
    assert (conf.settings, conf.error) == ({}, why)


def test_a_plain_world_readable_conf_file_is_still_read_and_a_missing_one_is_no_error(tmp_path):
    path = tmp_path / "nccl.conf"
    path.write_text("NCCL_SOCKET_IFNAME=eth9\n")
    path.chmod(0o644)
    conf = parse_probe(_conf_read(tmp_path, str(path))[0]).conf[0]
    assert (conf.path, dict(conf.settings), conf.error) == (str(path), {"NCCL_SOCKET_IFNAME": "eth9"}, "")
    conf = parse_probe(_conf_read(tmp_path, str(tmp_path / "missing.conf"))[0]).conf[0]
    assert (dict(conf.settings), conf.error) == ({}, "")


# --- ... as the job's user would see them (issue 17): its own 0600 file is read, nobody else's ------------


def _job_conf(tmp_path, owner: int, mode: int = 0o600, text: str = "NCCL_SOCKET_IFNAME=eth9\n"):
    path = tmp_path / "job.conf"
    path.write_text(text)
    path.chmod(mode)
    os.chown(path, owner, owner)
    return path


def _conf_as(tmp_path, path, job_user: str, via: str = "job"):
    want = NcclEnv(env={"NCCL_CONF_FILE": str(path)} if via == "job" else {}, job_user=job_user)
    node = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **({"NCCL_CONF_FILE": str(path)} if via == "node" else {})}
    run = subprocess.run(ne.probes(want)[0].argv, capture_output=True, text=True, timeout=20, env=node)
    assert run.returncode == 0, run.stderr
    [conf] = [c for c in parse_probe(run.stdout).conf if c.path == str(path)]
    return run.stdout, (dict(conf.settings), conf.error)


@pytest.mark.parametrize("via", ["job", "node"])
@pytest.mark.parametrize("job_user", ["65534", "nobody"])  # a uid, or a name the node resolves
def test_the_jobs_own_private_conf_file_is_read_when_the_jobs_user_is_known(tmp_path, via, job_user):
    path = _job_conf(tmp_path, owner=65534)
    assert _conf_as(tmp_path, path, job_user, via)[1] == ({"NCCL_SOCKET_IFNAME": "eth9"}, "")
    # without the job's user, the same file is refused, as before
    assert _conf_as(tmp_path, path, "", via)[1] == ({}, "not read: owned by uid 65534, not by root")


@pytest.mark.parametrize(
    "owner, mode, why",
    [
        # another user's file, private or not: the job's user could not read the first (it is opened as
        # them: their own words), and the second is not the job's to name
        (4243, 0o600, "not read: nobody cannot open it: Permission denied"),
        (4243, 0o644, "not read: owned by uid 4243, not by root or the job's user (uid 65534)"),
        # root's private file (/etc/shadow): the job's user could not read it
        (0, 0o600, "not read: nobody cannot open it: Permission denied"),
        (0, 0o640, "not read: nobody cannot open it: Permission denied"),
    ],
)
def test_with_the_jobs_user_known_other_users_and_roots_private_files_are_still_refused(tmp_path, owner, mode, why):
    path = _job_conf(tmp_path, owner=owner, mode=mode, text=SHADOW)
    text, conf = _conf_as(tmp_path, path, "65534")
    assert "s3cr3t" not in text and conf == ({}, why)


@pytest.mark.parametrize(
    "kind, why",
    [
        ("symlink", "not read: it is a symbolic link"),
        ("fifo", "not read: not a regular file"),
        ("large", "not read: 65537 bytes, more than 65536"),
    ],
)
def test_the_jobs_own_symlink_fifo_or_big_file_is_still_refused(tmp_path, kind, why):
    target = _job_conf(tmp_path, owner=0, text=SHADOW)  # root's 0600 file
    path = tmp_path / "mine.conf"
    if kind == "symlink":
        path.symlink_to(target)
        os.lchown(path, 65534, 65534)  # the job's own link to root's file
    elif kind == "fifo":
        os.mkfifo(path)
        os.chown(path, 65534, 65534)
    else:
        path.write_text("NCCL_DEBUG=INFO\n" + "#" * (65537 - 16))
        os.chown(path, 65534, 65534)
    text, conf = _conf_as(tmp_path, path, "65534")
    assert "s3cr3t" not in text and "NCCL_DEBUG" not in text and conf == ({}, why)


@pytest.mark.parametrize("job_user", ["0", "root"])
def test_root_as_the_jobs_user_reads_no_private_file_of_roots(tmp_path, job_user):
    path = _job_conf(tmp_path, owner=0, text=SHADOW)
    text, conf = _conf_as(tmp_path, path, job_user)
    assert "s3cr3t" not in text and conf == ({}, "not read: nobody cannot open it: Permission denied")


def test_a_job_user_the_node_does_not_know_is_no_user(tmp_path):
    path = _job_conf(tmp_path, owner=65534)
    assert _conf_as(tmp_path, path, "no-such-user-nodecheck")[1] == (
        {},
        "not read: owned by uid 65534, not by root (the job's user no-such-user-nodecheck is not known on this node)",
    )


@pytest.mark.parametrize("bad", ["-1", "alice bob", "a\nb", "$(id)", "x" * 300])
def test_the_job_user_is_a_uid_or_a_user_name(bad):
    with pytest.raises(ValidationError):
        NcclEnv(job_user=bad)
    assert NcclEnv(job_user="alice@example.org").job_user == "alice@example.org"
