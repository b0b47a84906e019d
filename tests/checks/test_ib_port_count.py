"""ib.ports' port count (issue 32, section 3): an ibstat cut at a CA boundary, or a node that lost an
HCA, must not pass on what is left. `expected_ports: N` fixes the count; `expected_ports: fleet`
takes the count a strict majority of the run's nodes show, judged through runner.run as a real run
judges it (the relate step, after every node was judged alone)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from nodecheck.checks.ib import IBSTAT, IbPorts, fleet_port_count, ports
from nodecheck.core.model import Node, Status, Verdict
from nodecheck.run.runner import run
from tests.helpers import captures, data
from tests.replay import ReplayTransport, exited
from tests.run.test_runner_fleet import planned, playbook

HEALTHY = data("ibstat/gpud-h100-ndr-ib-mixed-cx6dx-ethernet-down-disabled.txt")  # 8 IB ports of 12 CAs
# the same output cut where a CA begins: mlx5_9 (IB) and its port are gone, nothing half-printed
CUT_AT_CA = HEALTHY[: HEALTHY.index("CA 'mlx5_9'")]
# a node that lost two HCAs: mlx5_5 and mlx5_6 (both IB) are not there at all
LOST_TWO = HEALTHY[: HEALTHY.index("CA 'mlx5_5'")] + HEALTHY[HEALTHY.index("CA 'mlx5_7'") :]
NDR: dict = {"link_layer": "InfiniBand", "min_rate_gbps": 400}


def count_rows(outputs: dict[str, str], unreachable: tuple[str, ...] = (), **params) -> dict[str, tuple]:
    """{node: (status, message)} of each node's port-count result after a run over `outputs`."""
    nodes = [Node(n, f"127.0.1.{i}") for i, n in enumerate([*outputs, *unreachable], 1)]
    transport = ReplayTransport(
        {(n, IBSTAT.name): exited(n, IBSTAT, text) for n, text in outputs.items()},
        unreachable=dict.fromkeys(unreachable, "connection refused"),
    )
    report = run(playbook(planned("ib.ports", **{**NDR, **params})), nodes, transport, fanout=4)
    out: dict[str, tuple] = {}
    for r in report.results:
        if r.verdict.subject == "" and "ports" in r.verdict.observed:
            assert r.nodes[0] not in out, f"two count results for {r.nodes[0]}"
            out[r.nodes[0]] = (r.verdict.status, r.verdict.message)
    return out


def test_a_cut_at_a_ca_boundary_passed_on_what_was_left():
    # what the shipped default/fabric/acceptance playbooks judged: 7 good ports, all PASS
    verdicts = list(ports(captures(IBSTAT, CUT_AT_CA), IbPorts(**NDR)))
    assert len(verdicts) == 7
    verdicts = list(ports(captures(IBSTAT, CUT_AT_CA), IbPorts(**NDR, expected_ports=8)))
    assert next(v for v in verdicts if v.status is Status.FAIL).message == "7 InfiniBand ports, expected 8"


def test_the_fleet_count_fails_the_nodes_below_it_naming_both_counts():
    rows = count_rows(
        {"node1": HEALTHY, "node2": HEALTHY, "node3": HEALTHY, "node4": CUT_AT_CA, "node5": LOST_TWO},
        expected_ports="fleet",
    )
    assert rows["node1"] == (Status.PASS, "8 InfiniBand ports, as on 3 of 5 nodes (expected_ports: fleet)")
    assert rows["node4"] == (
        Status.FAIL,
        "7 InfiniBand ports, expected 8 (the count on 3 of 5 nodes; expected_ports: fleet)",
    )
    assert rows["node5"][0] is Status.FAIL and rows["node5"][1].startswith("6 InfiniBand ports, expected 8 ")


def test_no_majority_among_disagreeing_nodes_is_not_judged_healthy():
    outputs = {"node1": HEALTHY, "node2": HEALTHY, "node3": CUT_AT_CA, "node4": LOST_TWO}
    rows = count_rows(outputs, expected_ports="fleet")
    assert {s for s, _ in rows.values()} == {Status.ERROR}
    assert rows["node3"][1] == (
        "7 InfiniBand ports; the nodes disagree and no count is on more than half of the run's 4 nodes "
        "(8 on node[1-2], 7 on node3, 6 on node4): set expected_ports: N in the playbook"
    )


def test_one_node_alone_cannot_say_its_count_and_says_so():
    rows = count_rows({"node1": HEALTHY}, expected_ports="fleet")
    assert rows == {
        "node1": (
            Status.WARN,
            "8 InfiniBand ports, count not judged: expected_ports: fleet needs other nodes in the run to "
            "compare with (this run has 1); set expected_ports: N in the playbook",
        )
    }


def test_too_few_nodes_counted_is_not_judged_either():
    rows = count_rows({"node1": HEALTHY}, unreachable=("node2", "node3"), expected_ports="fleet")
    assert rows["node1"] == (
        Status.WARN,
        "8 InfiniBand ports, count not judged: expected_ports: fleet needs a count on more than half of the "
        "run's 3 nodes, and 1 could be counted; set expected_ports: N in the playbook",
    )


def test_a_node_with_more_ports_than_the_fleet_warns():
    rows = count_rows({"node1": CUT_AT_CA, "node2": CUT_AT_CA, "node3": HEALTHY}, expected_ports="fleet")
    assert rows["node3"] == (
        Status.WARN,
        "8 InfiniBand ports, more than the 7 on 2 of 3 nodes (expected_ports: fleet): "
        "another kind of node? set expected_ports: N for it",
    )
    assert rows["node1"][0] is Status.PASS


def test_a_node_whose_output_is_cut_mid_port_keeps_its_error_and_does_not_vote():
    cut = HEALTHY[: HEALTHY.index("Link layer: InfiniBand", HEALTHY.index("CA 'mlx5_9'"))]
    rows = count_rows({"node1": HEALTHY, "node2": HEALTHY, "node3": cut}, expected_ports="fleet")
    assert rows["node1"] == (Status.PASS, "8 InfiniBand ports, as on 2 of 3 nodes (expected_ports: fleet)")
    assert "node3" not in rows  # its ERROR (ibstat output incomplete) stands for the count


def test_a_fixed_count_is_judged_on_each_node_alone():
    rows = count_rows({"node1": HEALTHY, "node2": CUT_AT_CA}, expected_ports=8)
    assert rows == {"node2": (Status.FAIL, "7 InfiniBand ports, expected 8")}


def test_the_relate_step_leaves_other_verdicts_and_other_params_alone():
    verdicts = {"node1": [Verdict(Status.PASS, "mlx5_0/1: Active/LinkUp, 400 Gb/s", "mlx5_0/1")]}
    assert fleet_port_count(verdicts, IbPorts(**NDR, expected_ports=8)) == verdicts
    assert fleet_port_count(verdicts, IbPorts(**NDR, expected_ports="fleet")) == verdicts


@pytest.mark.parametrize("value", ["flet", "Fleet", -1, True, 8.0, "8"])
def test_expected_ports_is_a_count_or_fleet(value):
    with pytest.raises(ValidationError):
        IbPorts(expected_ports=value)


def test_a_fleet_count_makes_the_gate_retry_every_node():
    # a suspect retried alone has no fleet to be counted against (gate/command.py reads `related`)
    assert IbPorts(expected_ports="fleet").related is True
    assert IbPorts(expected_ports=8).related is False
