"""The one node index -> address mapping of the simulated cluster (issue 22: past one /24): the Python
function (harness.sim.base.node_address) and its shell twin (tests/harness/lib.sh nc_node_addr) give the
same address for every node of a 2,048-node cluster, and a cluster of <= 254 nodes keeps NET.1..NET.N.
No cluster is started."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from harness.sim.base import MAX_NODES, node_address

LIB = Path(__file__).resolve().parents[1] / "harness" / "lib.sh"


@pytest.mark.parametrize(
    ("index", "address"),
    [
        (1, "127.0.1.1"),
        (254, "127.0.1.254"),
        (255, "127.0.2.1"),
        (508, "127.0.2.254"),
        (509, "127.0.3.1"),
        (1024, "127.0.5.8"),
        (2048, "127.0.9.16"),
    ],
)
def test_node_address_fills_a_24_then_goes_on_in_the_next(index, address):
    assert node_address("127.0.1", index) == address


def test_a_cluster_of_up_to_254_nodes_keeps_its_addresses():
    assert [node_address("10.9.8", i) for i in (1, 2, 100, 254)] == ["10.9.8.1", "10.9.8.2", "10.9.8.100", "10.9.8.254"]


@pytest.mark.parametrize(
    ("net", "index"), [("127.0.1", 0), ("127.0.1", MAX_NODES + 1), ("127.0.255", 255), ("127.0", 1)]
)
def test_no_address_outside_the_range(net, index):
    with pytest.raises(ValueError):
        node_address(net, index)


def test_shell_and_python_agree_on_every_node_of_2048():
    script = f'. {LIB}; for ((i = 1; i <= 2048; i++)); do nc_node_addr a 127.0.1 "$i"; echo "$a"; done'
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout.split()
    assert out == [node_address("127.0.1", i) for i in range(1, 2049)]
