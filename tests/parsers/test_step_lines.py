"""What the active checks' steps print about themselves: the pair test's server start
(parsers/pairtest.py) and nccl.env's reachability listener and connect steps (parsers/reachability.py)."""

from __future__ import annotations

import pytest

from nodecheck.parsers.pairtest import made_directory, ready_servers, start_state
from nodecheck.parsers.reachability import (
    connection_results,
    listened_ports,
    listener_made,
    listener_ready,
    listener_start_state,
    listener_stop_state,
)

# what the steps print (nodecheck/probes/pairtest.py, reachability.py); the fuzz seeds of these readers
REACH_START = (
    "@@nodecheck dir /tmp/nodecheck-reach.Xc81\n"
    "@@nodecheck port 29500 listening\n"
    "@@nodecheck port 29501 busy Address already in use\n"
    "@@nodecheck port 29502 error Permission denied\n"
    "@@nodecheck ready\n"
    "@@nodecheck begin stderr\n@@nodecheck end stderr rc=0\n"
)
REACH_FAILED_START = (
    "@@nodecheck dir /tmp/nodecheck-reach.Xc81\n@@nodecheck exited 1\nTraceback (most recent call last):\n",
    "@@nodecheck nopython\n",
    "@@nodecheck dir /tmp/nodecheck-reach.Xc81\n@@nodecheck notready\n",
)
REACH_STOP = (
    "@@nodecheck alive\n",
    "@@nodecheck exited 0\n@@nodecheck begin stderr\n@@nodecheck end stderr rc=0\n",
    "@@nodecheck nodir\n",
    "@@nodecheck refused /tmp/nodecheck-reach.Xc81 (not the private directory the start step made)\n",
)
REACH_CONNECT = (
    "@@nodecheck conn 0 ok\n@@nodecheck conn 1 refused Connection refused\n"
    "@@nodecheck conn 2 timeout after 3.0 s\n@@nodecheck conn 3 unreachable No route to host\n",
)
PAIR_START = (
    "@@nodecheck dir /tmp/nodecheck-pair.a1B2\n"
    "@@nodecheck ready mlx5_0 18515 4242\n"
    "@@nodecheck exited mlx5_1 18516 rc=1\n"
    " Couldn't listen to port 18516\n"
    "@@nodecheck notready mlx5_2 18517\n",
)


def test_pair_server_start():
    (start,) = PAIR_START
    assert made_directory(start) == "/tmp/nodecheck-pair.a1B2"
    assert ready_servers(start) == {"mlx5_0": 18515}
    assert start_state(start, "mlx5_1") == ("exited", " Couldn't listen to port 18516")
    assert start_state(start, "mlx5_2") == ("notready", "")
    assert start_state(start, "mlx5_9") == ("missing", "")


def test_reachability_steps():
    assert listener_made(REACH_START) == "/tmp/nodecheck-reach.Xc81"
    assert listener_ready(REACH_START)
    assert listened_ports(REACH_START) == {
        29500: "listening",
        29501: "busy: Address already in use",
        29502: "error: Permission denied",
    }
    assert [listener_start_state(t) for t in REACH_FAILED_START] == ["exited 1", "gave no state", "notready"]
    assert [listener_stop_state(t) for t in REACH_STOP[1:]] == [
        "exited 0",
        "nodir",
        "refused /tmp/nodecheck-reach.Xc81 (not the private directory the start step made)",
    ]
    assert connection_results(REACH_CONNECT[0])[1] == ("refused", "Connection refused")


@pytest.mark.parametrize("number", ["9" * 5000, "9" * 6, "\u0661\u0662"], ids=["5000 digits", "6 digits", "١٢"])
def test_a_port_or_index_no_step_prints_is_not_read(number):
    # issue 32: int() of 5000 digits raised ValueError ("internal error" for the whole check); a port
    # has 5 digits at most; Arabic-Indic digits were read as port 12
    assert ready_servers(f"@@nodecheck ready mlx5_0 {number} 4242\n") == {}
    assert listened_ports(f"@@nodecheck port {number} listening\n") == {}
    assert connection_results(f"@@nodecheck conn {number}{number[:1]} ok\n") == {}
