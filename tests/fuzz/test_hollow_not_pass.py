"""Property 3: an output with its substance removed is never judged PASS (or WARN). Each check is
judged on a real output that PASSes (asserted first), then on that output hollowed: empty, only
whitespace, only garbage, only its lines without a number (headers, labels), or with every line
that holds a number dropped. The judge is called as the runner calls it (runner._judge): a
ParseError is an ERROR, no verdict at all is an ERROR."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodecheck.checks.ib import IBSTAT, IbPorts, ports
from nodecheck.checks.ib_counters import COUNTERS_AFTER, COUNTERS_BEFORE, IbCounters
from nodecheck.checks.ib_counters import counters as error_counters
from nodecheck.core.errors import ParseError
from nodecheck.core.model import Status, worst
from tests.checks import kernel_log_output as test_kernel
from tests.checks import test_gpu, test_nccl_allreduce, test_roce
from tests.checks.test_ib_counters import read
from tests.fuzz.mutations import FUZZ, decoded
from tests.fuzz.targets import node_hollow_checks
from tests.helpers import captures, data

HEALTHY = (Status.PASS, Status.WARN)


def routed(judge: Callable[[], object]) -> Status:
    """The status the runner stores: the worst verdict; ERROR for a ParseError or no verdict."""
    try:
        result = judge()
    except ParseError:
        return Status.ERROR
    verdicts = result if isinstance(result, list) else [result]  # nccl-tests: one RunVerdict
    return worst(v.status for v in verdicts) if verdicts else Status.ERROR


def _ibstat(text: str):
    return list(ports(captures(IBSTAT, text), IbPorts(expected_ports=8, min_rate_gbps=400)))


def _xid(text: str):
    return test_kernel.xid(test_kernel.probe_out(text))


def _oom(text: str):
    return test_kernel.oom(test_kernel.probe_out(text, now=test_kernel.AFTER_OOM))


def _counters(text: str):
    out = {**captures(COUNTERS_BEFORE, read(100.0, text)), **captures(COUNTERS_AFTER, read(130.0, text))}
    return list(error_counters(out, IbCounters()))


def _nccl_single(text: str):
    return test_nccl_allreduce.judge(text, gpus=2)


def _nm(text: str):
    return test_roce.judge_nm(test_roce.nm_output(devices=text))


def _gpu_count(text: str):
    from nodecheck.checks.gpu import GPU, GpuCount
    from nodecheck.checks.gpu import count as gpu_count

    return list(gpu_count(captures(GPU, test_gpu.fallback_stdout(query_gpu=text)), GpuCount(expect=2)))


# check -> (judge of one output, a real output it passes)
CHECKS = {
    "ib.ports": (_ibstat, data("ibstat/gpud-h100-ndr-ib-mixed-cx6dx-ethernet-down-disabled.txt")),
    "gpu.xid": (_xid, data("scenarios/derived-dmesg-T-nvrm-gpu-at-no-xid.txt")),
    "node.oom": (_oom, data("dmesg-xid/gpud-xid119-gsp-rpc-timeout-dmesg-T-xe9680.txt")),
    "ib.counters": (_counters, data("perfquery/infiniband_exporter-extended-2ports-capmask2.txt")),
    "nccl.allreduce_single": (_nccl_single, data("nccl-tests/autodl-2x2080ti-pcie-all_reduce_perf-single-node.txt")),
    "roce.networkmanager": (_nm, "rnic3:ethernet:unmanaged\n"),
    "gpu.count": (_gpu_count, data("scenarios/constructed-nvidia-smi-query-gpu-h100pcie-2gpu.csv")),
    **node_hollow_checks(),
}


def without_numbers(text: str) -> str:
    return "".join(line for line in text.splitlines(keepends=True) if not re.search(r"\d", line))


def numbers_blanked(text: str) -> str:
    return "".join(line if not re.search(r"\d", line) else "\n" for line in text.splitlines(keepends=True))


def hollowed(seed: str):
    return st.one_of(
        st.just(""),
        st.text(alphabet=" \t\r\n\v\f", min_size=1, max_size=40),
        st.binary(min_size=1, max_size=400).map(decoded),
        st.just(without_numbers(seed)),
        st.just(numbers_blanked(seed)),
    )


@pytest.mark.parametrize("check", CHECKS)
def test_the_real_output_passes(check: str):
    judge, seed = CHECKS[check]
    assert routed(lambda: judge(seed)) in HEALTHY


@pytest.mark.parametrize("check", CHECKS)
@FUZZ
@given(data=st.data())
def test_a_hollowed_output_is_not_judged_healthy(check: str, data: st.DataObject):
    judge, seed = CHECKS[check]
    text = data.draw(hollowed(seed), label="output")
    status = routed(lambda: judge(text))
    assert status not in HEALTHY, f"{check} judged {status.name} on {text[:500]!r}"
