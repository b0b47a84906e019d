"""The runner's relate step: a node-scope check whose verdicts are judged against each other once every
node is judged (nccl.allreduce_single's relative band) gets each node's verdicts back in place."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

from nodecheck.core.model import CheckResult, Status, Verdict
from nodecheck.core.registry import CHECKS
from nodecheck.run.runner import _related


def test_related_verdicts_replace_each_nodes_own_in_order_and_leave_the_rest():
    seen = {}

    def relate(by_node, params):
        seen.update(by_node)
        return {n: [dataclasses.replace(v, message=f"{v.message}+{params}") for v in vs] for n, vs in by_node.items()}

    check = SimpleNamespace(spec=SimpleNamespace(relate=relate), params="peers")
    results = [
        CheckResult("x", ("a",), Verdict(Status.PASS, "a1")),
        CheckResult("x", ("a", "b"), Verdict(Status.FAIL, "pair")),  # not one node's: left as it is
        CheckResult("x", ("b",), Verdict(Status.PASS, "b1")),
        CheckResult("x", ("a",), Verdict(Status.WARN, "a2")),
    ]
    out = _related(check, results)
    assert [r.verdict.message for r in out] == ["a1+peers", "pair", "b1+peers", "a2+peers"]
    assert {n: [v.message for v in vs] for n, vs in seen.items()} == {"a": ["a1", "a2"], "b": ["b1"]}


def test_a_check_without_relate_is_untouched_and_the_single_node_nccl_test_relates():
    results = [CheckResult("x", ("a",), Verdict(Status.PASS, "a1"))]
    assert _related(SimpleNamespace(spec=SimpleNamespace(relate=None), params=None), results) is results
    assert CHECKS["nccl.allreduce_single"].relate is not None
