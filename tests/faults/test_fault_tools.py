"""Faults in what a tool prints or how it ends, on one node (node2) beside a healthy one (node1):
each has its exact status, the report is complete, and nothing is left on the node."""

from __future__ import annotations

import resource
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from faults.support import HEALTHY, REMOTE_BACKSTOP_S, assert_nothing_left, assert_report, book, run, temp_entries

NODES = ["node1", "node2"]
MAX_RSS_KB = 300 * 1024
HEALTHY_BYTES = HEALTHY.read_bytes()
# a line boundary inside mlx5_4's block: the output stops in the middle of "\t\tState: Act"
_CUT = HEALTHY_BYTES.index(b"State: Active", HEALTHY_BYTES.index(b"CA 'mlx5_4'")) + len(b"State: Act")


@dataclass(frozen=True)
class ToolFault:
    id: str
    inject: Callable  # (cluster, node) -> None
    status: str  # node2's exact status
    message: str  # in node2's first result's message
    timeout_s: float = 2
    within: float = 3.0  # how long the node may take to be clean again
    code: int = 3


FAULTS = [
    ToolFault(
        "tool-hung",
        lambda c, n: c.fake_hang(n, "ibstat"),
        "timeout",
        "ibstat timed out: no answer within 1 s",
        timeout_s=1,
        within=1 + REMOTE_BACKSTOP_S + 2,
    ),
    ToolFault(
        "answers-after-its-timeout",
        lambda c, n: c.fake_script(n, "ibstat", f"sleep 2.5; cat {HEALTHY}"),
        "timeout",
        "ibstat timed out: no answer within 1 s",
        timeout_s=1,
        within=5,
    ),
    ToolFault(
        "killed-by-SIGKILL", lambda c, n: c.fake_killed(n, "ibstat", "KILL", "CA 'mlx5_0'\n"), "error", "SIGKILL"
    ),
    ToolFault("killed-by-SIGSEGV", lambda c, n: c.fake_killed(n, "ibstat", "SEGV"), "error", "SIGSEGV"),
    ToolFault(
        "garbage-output",
        lambda c, n: c.fake_output(n, "ibstat", "".join(f"{i:04x} ~~ %$#@! ]]{{ \t\x07\n" for i in range(500))),
        "error",
        "cannot read ibstat output: ",
    ),
    # an output that stops mid-block is unjudgeable (ERROR), never a PASS on the ports it did list
    ToolFault(
        "output-cut-mid-line",
        lambda c, n: c.fake_output(n, "ibstat", HEALTHY_BYTES[:_CUT]),
        "error",
        "mlx5_4/1: port block has no Physical state, Rate, Link layer line (ibstat output incomplete)",
    ),
    # the client keeps 16 MiB per stream (MAX_CAPTURE_BYTES) and says so; its memory stays bounded
    ToolFault(
        "100-MB-of-output",
        lambda c, n: c.fake_flood(n, "ibstat", 100_000_000),
        "error",
        "cannot read ibstat output: ",
        timeout_s=20,
    ),
    ToolFault(
        "non-UTF-8-bytes-in-a-healthy-output",
        lambda c, n: c.fake_output(n, "ibstat", HEALTHY_BYTES.replace(b"28.39.1002", b"28.39\xff\xfe\x80.1002")),
        "pass",
        "mlx5_0/1: Active/LinkUp, 400 Gb/s",
        code=0,
    ),
    ToolFault(
        "non-UTF-8-bytes-only",
        lambda c, n: c.fake_output(n, "ibstat", bytes(range(128, 256)) * 40),
        "error",
        "cannot read ibstat output: ",
    ),
    # Debian's ibstat with no RDMA device (driver not loaded): nothing, exit 0. The playbook expects
    # 8 ports: that is a judged FAIL naming what is missing, not an unreadable output (issue 17)
    ToolFault(
        "empty-output-where-devices-are-expected",
        lambda c, n: c.fake_output(n, "ibstat", b""),
        "fail",
        "no InfiniBand device found (ibstat printed nothing, exit 0); expected 8 InfiniBand ports",
        code=2,
    ),
]


@pytest.mark.parametrize("fault", FAULTS, ids=[f.id for f in FAULTS])
def test_a_tool_fault_has_its_exact_status_and_leaves_nothing(cluster, tmp_path, fault):
    cluster.fake_replay("node1", "ibstat", HEALTHY)
    fault.inject(cluster, "node2")
    before = temp_entries()
    o = run(cluster, tmp_path, "node[1-2]", playbook=book(timeout_s=fault.timeout_s))
    assert_report(o, NODES, complete=True)
    assert o.status("node1") == "pass"
    assert o.status("node2") == fault.status, o.messages("node2")
    first = o.messages("node2")[0]
    assert fault.message in first[1], first
    assert o.code == (fault.code if fault.status != "fail" else 2), o.err
    assert o.wall < fault.timeout_s + 15
    # the children's peak RSS so far (earlier runs included): 100 MB of output must not be held whole
    assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss < MAX_RSS_KB
    assert_nothing_left(cluster, NODES, before, within=fault.within)
