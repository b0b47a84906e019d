"""A multi-node nccl-tests PASS must show every node's ranks (issue 32, 1.11): a launcher that put
all the ranks on one host (a hostfile it ignored, a crafted output) measured no fabric at all, so a
run whose rank list does not spread over the nodes it was given is not judged healthy."""

from __future__ import annotations

import re

from nodecheck.checks.nccl_allreduce import NcclMulti
from nodecheck.core.model import Status
from nodecheck.judging.nccl_runs import judge_output
from tests.helpers import data

# 16 ranks: 8 on R6KD-CX8aaS-GPU-11, 8 on R6KD-CX8aaS-GPU-12
RTX6000D = "nccl-tests/rtx6000d-2node-2.18.2-all_reduce-nccl-version-line-unalign-concluded.txt"
FOUR = "nccl-tests/nccl-tests-244-a100-2node-debug-info-net-ib-plugin-truncated.txt"


def wrapped(text: str, rc: int = 0) -> str:
    return f"@@nodecheck begin test\n{text.rstrip()}\n@@nodecheck end test rc={rc}\n"


def judge(text: str, hosts: int | None, ranks: int = 16):
    want = NcclMulti(plateau_min_bytes="64M")
    return judge_output(wrapped(text), want, "all_reduce", ranks, expected_hosts=hosts)


def test_the_real_two_node_run_passes_with_its_ranks_on_both_nodes():
    v = judge(data(RTX6000D), hosts=2)
    assert v.status is Status.PASS, v.message
    assert "16 ranks on 2 hosts" in v.message


def test_all_ranks_on_one_host_is_not_a_multi_node_pass():
    one_host = data(RTX6000D).replace("R6KD-CX8aaS-GPU-12", "R6KD-CX8aaS-GPU-11")
    v = judge(one_host, hosts=2)
    assert v.status is Status.ERROR
    assert v.message.startswith(
        "all_reduce: the ranks ran on 1 host (R6KD-CX8aaS-GPU-11), not on the 2 nodes of the test: "
        "the fabric between them was not tested"
    ), v.message


def test_an_uneven_spread_is_not_the_layout_the_test_asked_for():
    # rank 8 moved to the first host: 9 + 7
    uneven = re.sub(r"(Rank  8 .* on )R6KD-CX8aaS-GPU-12", r"\1R6KD-CX8aaS-GPU-11", data(RTX6000D))
    v = judge(uneven, hosts=2)
    assert v.status is Status.ERROR
    assert "9 ranks on R6KD-CX8aaS-GPU-11, 7 on R6KD-CX8aaS-GPU-12, expected 8 on each" in v.message


def test_a_multi_node_run_that_lists_no_ranks_cannot_show_where_it_ran():
    no_ranks = "\n".join(ln for ln in data(RTX6000D).splitlines() if not ln.startswith("#  Rank"))
    v = judge(no_ranks, hosts=2)
    assert v.status is Status.ERROR
    assert "lists no ranks" in v.message


def test_a_single_node_run_is_judged_as_before():
    one_host = data(RTX6000D).replace("R6KD-CX8aaS-GPU-12", "R6KD-CX8aaS-GPU-11")
    v = judge(one_host, hosts=None)
    assert v.status is Status.PASS
