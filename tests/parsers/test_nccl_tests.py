"""parse_nccl_tests on every copied nccl-tests and nccl-debug-info corpus file, with exact facts per
file; parse_nccl_tests_json on the constructed -J reports; ParseError for output that is not
nccl-tests'; arbitrary text and every truncation of a full run never crash."""

from __future__ import annotations

import json
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodecheck.core.errors import ParseError
from nodecheck.parsers.nccl_tests import INFO_MAX, UNKNOWN_MAX, parse_nccl_tests
from nodecheck.parsers.nccl_tests_facts import Measurement, NcclTestRun, RankDevice, SizeRow, Stage, human_bytes
from nodecheck.parsers.nccl_tests_json import parse_nccl_tests_json
from tests.growth import assert_linear
from tests.helpers import data, data_files

A3MEGA = "nccl-tests/a3mega-h100-2node-16rank-all_reduce_perf-8G-wrong-col.txt"
AUTODL = "nccl-tests/autodl-2x2080ti-pcie-all_reduce_perf-single-node.txt"
K80 = "nccl-tests/azureml-k80-old-error-col-2e-07-launch-mode-interleaved.txt"
TAIL_1706 = "nccl-tests/nccl-1706-tail-destroy-complete-interleaved.txt"
INIT_1812 = "nccl-tests/nccl-1812-2.19.3-collective-test-starting-debug-info-truncated.txt"
FAIL_219 = "nccl-tests/nccl-tests-219-test-nccl-failure-internal-error-mpirun-truncated.txt"
HANG_244 = "nccl-tests/nccl-tests-244-a100-2node-debug-info-net-ib-plugin-truncated.txt"
RTX5090 = "nccl-tests/nccl-tests-287-rtx5090-alltoall-bogus-algbw-avg-busbw-0.txt"
STACK_36 = "nccl-tests/nccl-tests-36-azure-test-failure-stack-mpirun-exit.txt"
NCCL1 = "nccl-tests/nccl-tests-5-nccl1-era-header-NCCL-failure-unhandled-cuda-error.txt"
BROADCAST_82 = "nccl-tests/nccl-tests-82-2021-broadcast_perf-old-rank-format-error-col-NA.txt"
OLIVIA = "nccl-tests/olivia-gh200-slingshot-2.17.9-all_reduce-int8-wrong-nonzero-corruption.txt"
RTX6000D = "nccl-tests/rtx6000d-2node-2.18.2-all_reduce-nccl-version-line-unalign-concluded.txt"
V100 = "nccl-tests/v100-sxm3-12gpu-oldest-format-no-redop-0e+00-partial.txt"
DEBUG_INIT = "nccl-debug-info/sglang-roce-nccl-2.27.5-init-version-bootstrap-plugin-excerpt.txt"
DEBUG_CHANNELS = "nccl-debug-info/sglang-roce-nccl-2.27.5-channels-p2p-ipc-net-ib-gdrdma-excerpt.txt"
JSON_COMPLETE = "nccl-tests/constructed-all_reduce_perf-2node-json-v2-complete.json"
JSON_WRONG = "nccl-tests/constructed-all_reduce_perf-2node-json-v2-nwrong.json"
JSON_CUT = "nccl-tests/constructed-all_reduce_perf-2node-json-v2-cut-mid-results.json"

TEXT_FILES = [p for p in data_files("nccl-tests") + data_files("nccl-debug-info") if p.endswith(".txt")]
JSON_FILES = [p for p in data_files("nccl-tests") if p.endswith(".json")]

H100 = "NVIDIA H100 80GB HBM3"


def m(time_us, algbw, busbw, wrong=None, error=None) -> Measurement:
    return Measurement(time_us, algbw, busbw, wrong=wrong, error=error)


def params_tuple(run: NcclTestRun) -> tuple:
    p = run.params
    return (
        p.n_threads,
        p.n_gpus,
        p.min_bytes,
        p.max_bytes,
        p.step,
        p.warmup_iters,
        p.iters,
        p.agg_iters,
        p.validation,
        p.graph,
        p.extra,
    )


# (stage, device count, rows, nccl_version, avg busbw, out of bounds, (failure kind, location)...)
SUMMARY = {
    A3MEGA: (Stage.DONE, 16, 31, None, 70.742, 0, ()),
    AUTODL: (Stage.DONE, 2, 28, None, 2.05774, 0, ()),
    K80: (Stage.DONE, 4, 7, None, 2.54225, 0, ()),
    TAIL_1706: (Stage.DONE, 0, 1, None, 8.62002, 0, ()),
    INIT_1812: (Stage.INIT, 4, 0, "2.19.3+cuda12.2", None, None, ()),
    FAIL_219: (
        Stage.DEVICES,
        4,
        0,
        None,
        None,
        None,
        (("nccl", "common.cu:959"), ("test", "common.cu:844"), ("launcher", None)),
    ),
    HANG_244: (Stage.DEVICES, 2, 0, None, None, None, ()),
    RTX5090: (Stage.DONE, 1, 1, None, 0.0, 0, ()),
    STACK_36: (
        Stage.NOTHING,
        0,
        0,
        None,
        None,
        None,
        (
            ("nccl", "common.cu:345"),
            ("test", "common.cu:393"),
            ("test", "common.cu:492"),
            ("test", "all_reduce.cu:103"),
            ("test", "common.cu:518"),
            ("test", "common.cu:839"),
        )
        * 2
        + (("launcher", None), ("launcher", None)),
    ),
    NCCL1: (Stage.INIT, 8, 0, None, None, None, (("nccl", "all_reduce.cu:95"),)),
    BROADCAST_82: (Stage.SWEEP, 2, 1, "2.9.6+cuda11.2", None, None, ()),
    OLIVIA: (Stage.SWEEP, 16, 28, None, None, None, ()),
    RTX6000D: (Stage.DONE, 16, 24, "2.30.1+cuda13.0", 21.8363, 0, ()),
    V100: (Stage.SWEEP, 11, 9, None, None, None, ()),
    DEBUG_INIT: (Stage.INIT, 0, 0, "2.27.5+cuda12.9", None, None, ()),
}


def test_every_corpus_file_has_an_expectation():
    assert len(TEXT_FILES) == 16
    assert set(TEXT_FILES) == set(SUMMARY) | {DEBUG_CHANNELS}
    assert len(JSON_FILES) == 3


@pytest.mark.parametrize("path", sorted(SUMMARY))
def test_summary_of_every_file(path):
    stage, devices, rows, version, avg, oob, failures = SUMMARY[path]
    run = parse_nccl_tests(data(path))
    assert run.stage is stage
    assert run.complete is (stage is Stage.DONE)
    assert len(run.devices) == devices
    assert len(run.rows) == rows
    assert run.nccl_version == version
    assert run.avg_busbw_gbs == avg
    assert run.out_of_bounds == oob
    assert tuple((f.kind, f.location) for f in run.failures) == failures
    assert run.unknown == () and run.unknown_count == 0
    assert run.from_json is False


# -- the newer layouts -----------------------------------------------------------------------


def test_a3mega_two_node_sweep_to_8g():
    run = parse_nccl_tests(data(A3MEGA))
    assert params_tuple(run) == (1, 1, 8, 8589934592, "2(factor)", 5, 20, 1, True, 0, {})
    assert run.devices[3] == RankDevice(3, "ztan-mig-235z", 3, "0000:0c:00", H100, pid=6902, group=0)
    assert run.devices[8] == RankDevice(8, "ztan-mig-gq73", 0, "0000:04:00", H100, pid=6733, group=0)
    assert {d.host for d in run.devices} == {"ztan-mig-235z", "ztan-mig-gq73"}
    assert run.columns == ("size", "count", "type", "redop", "root")
    assert run.rows[0] == SizeRow(8, 2, "float", "sum", -1, m(135.8, 0.0, 0.0, 0), m(123.5, 0.0, 0.0, 0), line=24)
    # the time column turns integer from 10000 us on
    assert run.rows[28] == SizeRow(
        2147483648, 536870912, "float", "sum", -1, m(12646, 169.81, 318.4, 0), m(12641, 169.88, 318.52, 0), line=52
    )
    assert run.rows[-1].size == 8589934592 and run.rows[-1].out_of_place.busbw_gbs == 338.82
    assert [r.size for r in run.rows] == [8 * 2**i for i in range(31)]
    assert run.out_of_bounds_ok is True and run.avg_busbw_ok is None
    assert run.wrong_rows == () and run.concluded is False
    assert run.stopped_at() == "did not stop: the run finished (summary printed)"


def test_autodl_single_process_two_gpus():
    run = parse_nccl_tests(data(AUTODL))
    assert params_tuple(run)[:3] == (1, 2, 8)
    assert [d.pid for d in run.devices] == [31706, 31706]
    assert run.devices[1] == RankDevice(
        1, "autodl-container-xxxxx", 1, "0000:b5:00", "NVIDIA GeForce RTX 2080 Ti", pid=31706, group=0
    )
    assert run.rows[-1] == SizeRow(
        1073741824, 268435456, "float", "sum", -1, m(268588, 4.0, 4.0, 0), m(268461, 4.0, 4.0, 0), line=37
    )


def test_olivia_data_corruption_rows_are_found():
    run = parse_nccl_tests(data(OLIVIA))
    assert (run.tests_version, run.nccl_headers, run.nccl_library) == ("2.17.9", 22902, 22902)
    assert run.collective == "all_reduce_perf"
    assert params_tuple(run) == (1, 1, 1, 134217728, "2(factor)", 1, 20, 1, True, 0, {})
    assert run.devices[13] == RankDevice(13, "gpu-1-51", 1, "0019:01:00", "NVIDIA GH200 120GB", pid=93771, group=0)
    assert [r.size for r in run.wrong_rows] == [2097152, 4194304, 8388608, 16777216, 33554432, 67108864]
    assert [(r.out_of_place.wrong, r.in_place.wrong) for r in run.wrong_rows] == [
        (18134, 9609),
        (96817, 124342),
        (763876, 530181),
        (404221, 103664),
        (951005, 820604),
        (113492, 0),
    ]
    assert run.rows[21] == SizeRow(
        2097152, 2097152, "int8", "sum", -1, m(6249.2, 0.34, 0.63, 18134), m(6142.32, 0.34, 0.64, 9609), line=47
    )
    assert run.rows[22].in_place.time_us == 10542.7
    # the document stops after the last row: no summary, so a stopped sweep at its largest size
    assert run.out_of_bounds is None and run.failures == ()
    assert run.stopped_at() == (
        "mid-sweep after 134217728 B (128 MiB), the last of 28 rows "
        "(the sweep's largest size); the summary lines never came"
    )


def test_rtx6000d_version_line_unalign_and_concluded():
    run = parse_nccl_tests(data(RTX6000D))
    assert (run.tests_version, run.nccl_headers, run.nccl_library) == ("2.18.2", 23001, 23001)
    assert params_tuple(run) == (1, 1, 1024, 8589934592, "2(factor)", 1, 20, 1, True, 0, {"unalign": "0"})
    assert run.nccl_versions == ("2.30.1+cuda13.0",)
    assert run.concluded is True and run.collective == "all_reduce_perf"
    assert run.devices[15] == RankDevice(
        15, "R6KD-CX8aaS-GPU-12", 7, "0000:f9:00", "NVIDIA RTX 6000D", pid=1205368, group=0
    )
    assert run.rows[15] == SizeRow(
        33554432, 8388608, "float", "sum", -1, m(1717.46, 19.54, 36.63, 0), m(1700.38, 19.73, 37.0, 0), line=42
    )
    assert run.rows[-1].in_place == m(335323, 25.62, 48.03, 0)


def test_rtx5090_alltoall_na_in_place_check_and_zero_average():
    run = parse_nccl_tests(data(RTX5090))
    assert run.params.step == "1048576(bytes)" and run.params.step_bytes == 1048576
    assert run.params.step_factor is None
    assert run.devices == (RankDevice(0, "GENOA-01", 0, "0x01", "NVIDIA GeForce RTX 5090", pid=2181762, group=0),)
    assert run.rows == (
        SizeRow(
            33554432, 8388608, "float", "none", -1, m(19.56, 1715.44, 0.0, 0), m(0.78, 43046.10, 0.0, None), line=9
        ),
    )
    assert run.avg_busbw_gbs == 0.0 and run.out_of_bounds_ok is True


def test_nccl_1706_tail_starts_mid_table_with_destroy_lines_interleaved():
    run = parse_nccl_tests(data(TAIL_1706))
    assert run.params is None and run.devices == ()
    assert run.columns == ("size", "count", "type", "redop", "root")  # guessed from the row
    assert run.rows == (
        SizeRow(
            134217728, 33554432, "float", "sum", -1, m(5190.8, 25.86, 25.86, 0), m(5186.6, 25.88, 25.88, 0), line=1
        ),
    )
    assert [(line.host, line.pid, line.device, line.level) for line in run.log] == [
        ("deepseek", 2081594, 0, "INFO"),
        ("deepseek", 2081594, 1, "INFO"),
    ]
    assert run.log[1].text.endswith("busId 34000 - Destroy COMPLETE")


# -- the older layouts -----------------------------------------------------------------------


def test_k80_error_column_and_launch_mode_line_between_header_and_rows():
    run = parse_nccl_tests(data(K80))
    assert params_tuple(run) == (1, 1, 33554432, 8589934592, "2(factor)", 5, 20, None, True, None, {})
    assert run.devices[2] == RankDevice(
        2, "2e3f9af7241040529530e810ce60fe5d000002", 2, "0x00", "Tesla K80", pid=198, group=None
    )
    assert run.columns == ("size", "count", "type", "redop")
    assert [(line.host, line.pid, line.device, line.level, line.text) for line in run.log] == [
        ("2e3f9af7241040529530e810ce60fe5d000002", 195, 0, "INFO", "Launch mode Parallel")
    ]
    assert run.rows[0] == SizeRow(
        33554432,
        8388608,
        "float",
        "sum",
        None,
        m(19902, 1.69, 2.53, error=2e-07),
        m(19898, 1.69, 2.53, error=2e-07),
        line=13,
    )
    assert run.rows[-1].out_of_place.time_us == 1258554
    assert all(r.out_of_place.wrong is None and r.in_place.error == 2e-07 for r in run.rows)


def test_v100_oldest_layout_partial_device_list():
    run = parse_nccl_tests(data(V100))
    assert run.params is None
    assert [d.rank for d in run.devices] == list(range(1, 12))  # the Rank 0 line was cut off
    assert run.devices[0] == RankDevice(1, "seville", 1, "0x39", "Tesla V100-SXM3-32GB", pid=87569, group=None)
    assert run.columns == ("size", "count", "type")
    assert run.rows[0] == SizeRow(
        0, 0, "float", None, None, m(57.30, 0.0, 0.0, error=0.0), m(57.09, 0.0, 0.0, error=0.0), line=16
    )
    assert run.rows[-1] == SizeRow(
        2016, 42, "float", None, None, m(57.70, 0.03, 0.03, error=0.0), m(57.06, 0.03, 0.03, error=0.0), line=24
    )
    assert run.stopped_at() == "mid-sweep after 2016 B (1.97 KiB), the last of 9 rows"


def test_broadcast_root_column_na_error_and_warn_with_source_location():
    run = parse_nccl_tests(data(BROADCAST_82))
    assert params_tuple(run) == (1, 1, 8, 2147483648, "2(factor)", 10, 100, None, False, None, {})
    assert run.devices[1] == RankDevice(1, "v100-gpu-5", 0, "0x00", "Tesla V100-PCIE-16GB", pid=9210, group=None)
    assert run.columns == ("size", "count", "type", "root")
    assert run.rows == (SizeRow(8, 2, "float", None, 0, m(45.82, 0.0, 0.0), m(38.17, 0.0, 0.0), line=15),)
    assert [(line.host, line.level, line.location, line.text) for line in run.log] == [
        ("v100-gpu-1", "WARN", "misc/ibvwrap.cc:63", "Failed to open libibverbs.so[.1]"),
        ("v100-gpu-5", "WARN", "misc/ibvwrap.cc:63", "Failed to open libibverbs.so[.1]"),
    ]
    assert run.next_size() == 16
    assert run.stopped_at() == "mid-sweep after 8 B, the last of 1 rows; the next size 16 B never came"


def test_nccl1_era_header_and_nccl_failure():
    run = parse_nccl_tests(data(NCCL1))
    assert run.compiled_with_nccl == "1.0" and run.nccl_version is None
    assert params_tuple(run) == (1, 8, 8, 134217728, "2(factor)", 5, 20, None, True, None, {})
    assert run.devices[7] == RankDevice(7, "node03", 7, "0x00", "Tesla P100-PCIE-16GB", pid=None, group=None)
    assert run.columns == ("bytes", "N", "type", "op")
    [failure] = run.failures
    assert (failure.kind, failure.message, failure.host, failure.location) == (
        "nccl",
        "unhandled cuda error",
        None,
        "all_reduce.cu:95",
    )
    assert failure.line == "NCCL failure all_reduce.cu:95 'unhandled cuda error'"
    assert run.stopped_at() == (
        "after the table header, before the first data row (the first collective never "
        "finished); first failure: nccl failure at all_reduce.cu:95: unhandled cuda error"
    )


# -- runs that stopped ------------------------------------------------------------------------


def test_219_internal_error_trace_and_mpirun_banner():
    run = parse_nccl_tests(data(FAIL_219))
    assert run.params.validation is False
    assert run.devices[2] == RankDevice(2, "fengyun", 0, "0x01", "NVIDIA RTX A6000", pid=3164639, group=0)
    assert run.devices[1].bus_id == "0x07"
    assert [(f.kind, f.host, f.message) for f in run.failures] == [
        ("nccl", "fengyun", "internal error - please report this issue to the NCCL developers"),
        ("test", "fengyun", "Test failure"),
        ("launcher", None, "mpirun: 1 process returned a non-zero exit code; the job was aborted"),
    ]
    assert run.stopped_at() == (
        "after the rank list (4 ranks), before NCCL init completed (no NCCL version line, no table header); "
        "first failure: nccl failure at common.cu:959 on fengyun: internal error - please report this issue "
        "to the NCCL developers"
    )


def test_36_failure_stacks_of_two_ranks_and_mpirun_exit_code():
    run = parse_nccl_tests(data(STACK_36))
    assert [f.host for f in run.failures[:12]] == ["pkb-aa8dbd1b-1"] * 6 + ["pkb-aa8dbd1b-0"] * 6
    assert run.failures[0].message == "unhandled system error"
    assert (
        run.failures[-1].message == "mpirun: a process exited with non-zero status (process [[6918,1],1], exit code 3)"
    )
    assert run.stopped_at().startswith("before any nccl-tests output (no parameter line); first failure: nccl")


def test_1812_stopped_during_init_with_bare_version_line():
    run = parse_nccl_tests(data(INIT_1812))
    assert run.collective == "all_reduce_perf" and run.tests_version is None
    assert run.devices[2] == RankDevice(
        2, "paraai-n32-h-01-agent-18", 2, "0000:81:00", "NVIDIA A100-PCIE-40GB", pid=749452, group=0
    )
    assert [line.text for line in run.log][2:4] == ["cudaDriverVersion 12020", "Failed to open libibverbs.so[.1]"]
    assert run.log[3].device == 3
    assert run.stopped_at() == (
        "during NCCL init: 'NCCL version 2.19.3+cuda12.2' printed, no table header and no data row"
    )


def test_244_hang_after_rank_list_with_debug_lines():
    run = parse_nccl_tests(data(HANG_244))
    assert [(d.host, d.pid) for d in run.devices] == [("ranokau", 398189), ("lascar", 73214)]
    assert len(run.log) == 10 and {line.host for line in run.log} == {"ranokau", "lascar"}
    assert run.log[-1].text.startswith("NET/IB : Using [0]mlx5_0:1/IB")
    assert run.stopped_at() == (
        "after the rank list (2 ranks), before NCCL init completed (no NCCL version line, no table header)"
    )


def test_debug_info_init_excerpt_versions_and_log():
    run = parse_nccl_tests(data(DEBUG_INIT))
    assert run.nccl_versions == ("2.27.5+cuda12.9",)
    assert len(run.log) == 45 and {line.device for line in run.log} == set(range(8))
    assert run.log[3] == run.log[3].__class__("tpgds-aihub0008", 207008, 1, "INFO", "NCCL version 2.27.5+cuda12.9")
    assert run.log[-1].text == "NET/OFI Using aws-ofi-nccl 1.6.0"


def test_debug_info_channel_lines_alone_are_not_nccl_tests_output():
    # NCCL INFO lines without a parameter, rank, row, failure or version line: nothing to judge
    with pytest.raises(ParseError) as raised:
        parse_nccl_tests(data(DEBUG_CHANNELS))
    assert raised.value.reason.startswith("no nccl-tests line")
    assert "207012:208295 [5] NCCL INFO" in raised.value.excerpt


# -- edge cases written inline ------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, reason",
    [
        ("", "empty output"),
        ("\n  \n", "empty output"),
        ("bash: all_reduce_perf: command not found\n", "no nccl-tests line"),
        ("host:1:2 [0] NCCL INFO Bootstrap : Using eth0\n", "no nccl-tests line"),
    ],
)
def test_not_nccl_tests_output(text, reason):
    with pytest.raises(ParseError) as raised:
        parse_nccl_tests(text)
    assert raised.value.tool == "nccl-tests" and raised.value.reason.startswith(reason)


def test_a_row_cut_at_the_end_is_not_a_row():
    text = data(A3MEGA).split("     2097152")[0] + "     2097152        524288     float     sum      -1    254.0"
    run = parse_nccl_tests(text)
    assert run.rows[-1].size == 1048576 and len(run.rows) == 18
    assert run.cut_row == "     2097152        524288     float     sum      -1    254.0"
    assert run.unknown == (run.cut_row,)
    assert run.stopped_at() == (
        "mid-sweep after 1048576 B (1 MiB), the last of 18 rows; the next size "
        "2097152 B (2 MiB) never came; the text ends inside a row: "
        "'2097152        524288     float     sum      -1    254.0'"
    )


def test_newest_rows_with_timestamp_and_per_iteration_columns():
    # src/util.cu writeResultHeader with -S 1 (timestamp) and the per-iteration columns
    header = (
        "#       size         count      type   redop    root     time   algbw   busbw  #wrong    i_min    i_max"
        "    i_p99    i_cv%     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv% timestamp"
    )
    row = (
        "     1048576        262144     float     sum      -1   203.21    5.16    9.68       0   199.10   210.40"
        "   210.40     1.52   207.20    5.06    9.49       0   201.30   215.00   215.00     1.80  2025-11-03 14:02:11"
    )
    run = parse_nccl_tests(f"# nThread 1 nGpus 8\n{header}\n{row}\n")
    assert run.rows == (
        SizeRow(1048576, 262144, "float", "sum", -1, m(203.21, 5.16, 9.68, 0), m(207.2, 5.06, 9.49, 0), line=3),
    )
    stamped = parse_nccl_tests(
        "   8   2   float   sum   -1   12.25   0.00   0.00   0   12.00   0.00   0.00   0  2025-11-03 14:02:11\n"
    )
    assert stamped.rows[0].in_place == m(12.0, 0.0, 0.0, 0)


def test_wrong_counts_printed_with_percent_g_and_a_bitdiff_column():
    header = (
        "#       size         count      type   redop    root     time   algbw   busbw  #wrong #bitdiff"
        "     time   algbw   busbw  #wrong #bitdiff"
    )
    row = (
        "    67108864      16777216     float     sum      -1  1261.60   53.20   99.74  1.23457e+06  0  1270.20 "
        "  52.83   99.06       0  0"
    )
    run = parse_nccl_tests(f"{header}\n{row}\n")
    assert run.rows[0].out_of_place.wrong == 1234570 and run.rows[0].in_place.wrong == 0


def test_summary_failed_lines_and_other_failure_forms():
    text = "\n".join(
        [
            "# nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 "
            "validation: 1 graph: 0",
            "# Writing JSON output to /tmp/out.json",
            "# Reducing maxBytes to 4096 due to memory limitation",
            "node1: Test CUDA failure common.cu:733 'out of memory'",
            "Cuda failure common.cu:120 'invalid device ordinal'",
            "node2: Test timeout (60s) common.cu:420",
            "node1: Test NCCL failure common.cu:1128 'remote process exited or there was a network error / NET/IB : "
            "Got completion from peer",
            " .. node1: Test failure common.cu:393",
            "  Test FAILURE",
            "# Out of bounds values : 3 FAILED",
            "# Avg bus bandwidth    : 12.5 FAILED",
            "# error: NET/IB : Got completion from peer 10.0.0.2 with status=12",
            "mpirun noticed that process rank 3 with PID 4242 on node gpu07 exited on signal 9 (Killed).",
            "srun: error: node3: task 2: Exited with exit code 1",
            "srun: error: node4: tasks 0-3: Killed",
            "slurmstepd: error: *** STEP 123.0 ON node3 CANCELLED AT 2025-11-03T14:02:11 DUE TO TIME LIMIT ***",
        ]
    )
    run = parse_nccl_tests(text)
    assert run.json_output == "/tmp/out.json" and run.max_bytes_reduced_to == 4096 and run.max_bytes == 4096
    assert (run.out_of_bounds, run.out_of_bounds_ok, run.avg_busbw_gbs, run.avg_busbw_ok) == (3, False, 12.5, False)
    assert run.nccl_last_error == "NET/IB : Got completion from peer 10.0.0.2 with status=12"
    assert [(f.kind, f.host, f.location, f.message) for f in run.failures] == [
        ("cuda", "node1", "common.cu:733", "out of memory"),
        ("cuda", None, "common.cu:120", "invalid device ordinal"),
        ("timeout", "node2", "common.cu:420", "Test timeout (60s)"),
        (
            "nccl",
            "node1",
            "common.cu:1128",
            "remote process exited or there was a network error / NET/IB : Got completion from peer",
        ),
        ("test", "node1", "common.cu:393", "Test failure"),
        ("test", None, None, "Test FAILURE"),
        ("test", None, None, "Out of bounds values: 3 FAILED (the data check found wrong elements)"),
        ("test", None, None, "Avg bus bandwidth 12.5 GB/s FAILED (below 0.9 x NCCL_TESTS_MIN_BW)"),
        ("launcher", "gpu07", None, "mpirun: rank 3 (pid 4242) exited on signal 9 (Killed)"),
        ("launcher", "node3", None, "srun: task 2: Exited with exit code 1"),
        ("launcher", "node4", None, "srun: task 0-3: Killed"),
        ("launcher", "node3", None, "slurm cancelled 123.0 at 2025-11-03T14:02:11 due to time limit"),
    ]
    assert run.stage is Stage.DONE


def test_unknown_lines_are_kept_bounded_and_counted():
    text = data(A3MEGA) + "".join(f"garbage line {i}\n" for i in range(120))
    run = parse_nccl_tests(text)
    assert len(run.unknown) == UNKNOWN_MAX and run.unknown_count == 120
    assert run.unknown[0] == "garbage line 0" and run.rows[-1].size == 8589934592


def test_two_log_lines_run_together_do_not_crash():
    text = (
        data(INIT_1812) + "\nhost:1:2 [0] NCCL INFO NET/Plhost:1:3 [1] NCCL INFO Channel 00/0 : 0[0] -> 1[1]\n"
        "tpgds-aihub0008:207008:207008 [1] NCCL IN\n"
    )
    run = parse_nccl_tests(text)
    assert run.log[-1].text == "NET/Plhost:1:3 [1] NCCL INFO Channel 00/0 : 0[0] -> 1[1]"
    assert run.unknown == ("tpgds-aihub0008:207008:207008 [1] NCCL IN",)


def test_human_bytes():
    assert [human_bytes(n) for n in (0, 1023, 1024, 2097152, 3000, 8589934592)] == [
        "0 B",
        "1023 B",
        "1024 B (1 KiB)",
        "2097152 B (2 MiB)",
        "3000 B (2.93 KiB)",
        "8589934592 B (8 GiB)",
    ]


def test_every_truncation_of_a_full_run_moves_forward_and_is_done_only_at_the_average():
    lines = data(A3MEGA).splitlines(keepends=True)
    average = next(i for i, line in enumerate(lines) if line.startswith("# Avg bus bandwidth"))
    order = list(Stage)
    seen = []
    for end in range(1, len(lines) + 1):
        run = parse_nccl_tests("".join(lines[:end]))
        seen.append(run.stage)
        assert (run.stage is Stage.DONE) == (end > average)
        assert run.stopped_at()
    assert all(order.index(a) <= order.index(b) for a, b in pairwise(seen))
    assert [s for i, s in enumerate(seen) if i == 0 or seen[i - 1] is not s] == [
        Stage.HEADER,
        Stage.DEVICES,
        Stage.INIT,
        Stage.SWEEP,
        Stage.DONE,
    ]


def test_every_cut_inside_a_row_is_not_a_row():
    text = data(AUTODL)
    start = text.index("     2097152")
    for cut in range(start + 6, text.index("\n", start)):  # from the first digit on
        run = parse_nccl_tests(text[:cut])
        assert [r.size for r in run.rows][-1] in (1048576, 2097152)
        if run.rows[-1].size == 1048576:
            assert run.cut_row is not None


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_arbitrary_text_parses_or_raises_parse_error(text):
    try:
        run = parse_nccl_tests(text)
    except ParseError:
        return
    assert run.stage in Stage and isinstance(run.stopped_at(), str)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            data(OLIVIA).splitlines() + data(STACK_36).splitlines() + data(DEBUG_INIT).splitlines() + ["", "#", "x"]
        ),
        max_size=40,
    ),
    st.text(max_size=20),
)
def test_shuffled_real_lines_with_noise_never_crash(lines, noise):
    try:
        parse_nccl_tests("\n".join(lines) + noise)
    except ParseError:
        pass


def test_a_512_rank_debug_log_keeps_the_first_info_lines_and_counts_the_rest():
    """Speed is measured by benchmarks/bench_nccl_parse.py; here: memory stays bounded."""
    ranks = "".join(
        f"#  Rank {16 + r:3d} Group  0 Pid {1000 + r:6d} on node{r // 8:03d} device {r % 8:2d} "
        f"[0000:{r % 8:02x}:00] {H100}\n"
        for r in range(512)
    )
    info = "".join(
        f"node{i % 64:03d}:{1000 + i % 512}:{2000 + i} [{i % 8}] NCCL INFO Channel {i % 32:02d}/0 : "
        f"{i % 512}[{i % 8}] -> {(i + 1) % 512}[{(i + 1) % 8}] via P2P/IPC\n"
        for i in range(100_000)
    )
    text = data(A3MEGA).replace("# Using devices\n", "# Using devices\n" + ranks + info)
    run = parse_nccl_tests(
        text + "node001:1000:1000 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]\n"
    )
    assert run.log_count == 100_001 and len(run.log) == INFO_MAX + 1 and run.log[-1].level == "WARN"
    assert len(run.devices) == 528 and run.stage is Stage.DONE


# -- JSON ----------------------------------------------------------------------------------------


def test_json_complete_report():
    run = parse_nccl_tests_json(data(JSON_COMPLETE))
    assert run.from_json is True and run.stage is Stage.DONE and run.concluded is True
    assert (run.collective, run.nccl_library, run.nccl_version) == ("all_reduce_perf", 22902, "2.29.2")
    assert params_tuple(run) == (
        1,
        1,
        8,
        134217728,
        "2(factor)",
        5,
        20,
        1,
        True,
        0,
        {"blocking_collectives": "false", "per_iter_timing": "false", "parallel_init": "false"},
    )
    assert run.devices == (
        RankDevice(0, "node001", 0, "0000:18:00", H100, pid=41213, group=0),
        RankDevice(1, "node002", 0, "0000:18:00", H100, pid=38877, group=0),
    )
    assert len(run.rows) == 25 and [r.size for r in run.rows] == [8 * 2**i for i in range(25)]
    assert run.rows[0] == SizeRow(
        8, 2, "float", "sum", -1, m(20.0004, 0.0004, 0.0004, 0), m(19.500398, 0.00041, 0.00041, 0), line=0
    )
    assert run.rows[-1].out_of_place == m(6730.8864, 19.940572, 19.940572, 0)
    assert (run.out_of_bounds, run.out_of_bounds_ok, run.avg_busbw_gbs, run.avg_busbw_ok) == (0, True, 7.144207, None)
    assert run.failures == () and run.nccl_last_error is None  # "errors": [""]


def test_json_report_with_wrong_elements():
    run = parse_nccl_tests_json(data(JSON_WRONG))
    assert [(r.size, r.out_of_place.wrong, r.in_place.wrong) for r in run.wrong_rows] == [
        (2097152, 18134, 9609),
        (4194304, 96817, 124342),
    ]
    assert (run.out_of_bounds, run.out_of_bounds_ok) == (4, False)
    assert [(f.kind, f.message) for f in run.failures] == [
        ("test", "Out of bounds values: 4 FAILED (the data check found wrong elements)")
    ]


def test_json_report_cut_mid_results_names_where():
    with pytest.raises(ParseError) as raised:
        parse_nccl_tests_json(data(JSON_CUT))
    assert raised.value.reason == (
        "JSON report cut off or malformed at line 1 column 2395 (character 2394 of "
        "2395), inside 'results' after 5 complete rows: Expecting ',' delimiter"
    )
    assert raised.value.excerpt.endswith('"in_place":{"time":19.')


def test_json_finalized_after_a_failure_nan_null_and_missing_keys():
    # a run that failed mid-sweep still closes its JSON (jsonOutputFinalize): no summary, the last
    # row without its in-place half; nwrong null with -c 0 ("nan" for a NaN double: not judged, below)
    document = json.loads(data(JSON_COMPLETE))
    document["results"] = document["results"][:3]
    del document["results"][-1]["in_place"], document["out_of_bounds"], document["average_bus_bandwidth"]
    del document["end_time"], document["config"]["devices"]
    document["results"][1]["in_place"]["nwrong"] = None
    document["errors"] = ["NCCL WARN NET/IB : Got completion from peer with error 12"]
    run = parse_nccl_tests_json(json.dumps(document))
    assert run.stage is Stage.SWEEP and run.devices == ()
    assert run.rows[1].in_place.wrong is None
    assert run.rows[2].in_place is None and run.rows[2].out_of_place.time_us == 20.0016
    assert run.nccl_last_error == "NCCL WARN NET/IB : Got completion from peer with error 12"
    assert run.stopped_at() == "mid-sweep after 32 B, the last of 3 rows; the next size 64 B never came"


@pytest.mark.parametrize(
    "text, reason",
    [
        ("", "empty JSON report"),
        ("[1, 2]", "not an nccl-tests JSON report"),
        ('{"name": "x"}', "not an nccl-tests JSON report"),
        ('{"version": 2, "results": "none"}', "JSON report: results is not a list"),
        ('{"version": 2, "results": [{"size": "8"}]}', "JSON report: size is not an integer"),
    ],
)
def test_json_that_is_not_a_report(text, reason):
    with pytest.raises(ParseError) as raised:
        parse_nccl_tests_json(text)
    assert raised.value.reason.startswith(reason)


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=8283))
def test_json_cut_anywhere_raises_parse_error(cut):
    text = data(JSON_COMPLETE)[:cut]
    with pytest.raises(ParseError):
        parse_nccl_tests_json(text)


# --- issue 17: two runs in one output, non-finite numbers, linear time -----------------------------


def test_two_single_node_runs_in_one_output_are_not_one_multi_node_run():
    # a launcher that started two independent 2-rank jobs instead of one 4-rank job: each prints a
    # whole single-node run with its own `Rank 0`; counted together they looked like the expected
    # 4 ranks, and the multi-node check passed on single-node numbers
    one = data(AUTODL)
    two = one.replace("autodl-container-xxxxx", "autodl-container-yyyyy").replace("Pid  31706", "Pid  4242")
    with pytest.raises(ParseError) as raised:
        parse_nccl_tests(one + two)
    assert raised.value.reason == (
        "rank 0 is listed twice (on autodl-container-xxxxx and autodl-container-yyyyy): "
        "two runs in one output, not one run of their ranks together"
    )
    assert "autodl-container-yyyyy" in raised.value.excerpt
    interleaved = "".join(a + b for a, b in zip(one.splitlines(True), two.splitlines(True)))
    with pytest.raises(ParseError, match="rank 0 is listed twice"):
        parse_nccl_tests(interleaved)


def test_the_same_rank_line_twice_is_not_judged_either():
    lines = data(AUTODL).splitlines(True)
    with pytest.raises(
        ParseError,
        match=r"rank 1 is listed twice \(on autodl-container-xxxxx and "
        r"autodl-container-xxxxx\)",
    ):
        parse_nccl_tests("".join(lines[:5] + lines[4:]))


def test_two_json_devices_with_one_rank_are_not_judged():
    document = json.loads(data(JSON_COMPLETE))
    devices = document["config"]["devices"]
    devices[1] = dict(devices[1], rank=devices[0]["rank"])
    with pytest.raises(ParseError, match="JSON report: rank 0 is listed twice"):
        parse_nccl_tests_json(json.dumps(document))


@pytest.mark.parametrize(
    "old, new, reason",
    [
        ("13.07    0.63    0.63", "13.07    0.63     nan", "line 20: busbw nan"),
        ("13.07    0.63    0.63", "13.07    inf    0.63", "line 20: algbw inf"),
        ("13.07    0.63    0.63", "-nan    0.63    0.63", "line 20: time -nan"),
        ("12.96    0.63    0.63", "12.96    0.63    -inf", "line 20: busbw -inf"),
        ("# Avg bus bandwidth    : 2.05774", "# Avg bus bandwidth    : -nan", "Avg bus bandwidth -nan"),
    ],
)
def test_a_non_finite_number_in_a_row_or_the_average_is_unjudgeable(old, new, reason):
    # NaN passes every floor (nothing is < nan): a row that printed one must not be judged at all
    text = data(AUTODL)
    assert text.count(old) == 1
    with pytest.raises(ParseError) as raised:
        parse_nccl_tests(text.replace(old, new))
    assert raised.value.reason == f"{reason}: nccl-tests printed a number that is not finite; the run cannot be judged"
    assert new.split()[-1] in raised.value.excerpt


@pytest.mark.parametrize(
    "key, value", [("bus_bw", "nan"), ("alg_bw", float("nan")), ("time", float("inf")), ("bus_bw", float("-inf"))]
)
def test_a_non_finite_number_in_the_json_report_is_unjudgeable(key, value):
    document = json.loads(data(JSON_COMPLETE))
    document["results"][2]["in_place"][key] = value
    with pytest.raises(ParseError, match=f"JSON report: results.2. in_place {key} is not a finite number"):
        parse_nccl_tests_json(json.dumps(document))


@pytest.mark.growth
@pytest.mark.parametrize(
    "text",
    [  # each a function of n: at 4n = 1,000,000 the input that took seconds (growth: tests/growth.py)
        lambda n: "NCCL failure common.cu:959 '" + " " * n + "x",  # the 2.9 s at 20k
        lambda n: "node1: Test NCCL failure common.cu:1 'internal error" + " ''" * (3 * n // 10) + "x",
        lambda n: "slurmstepd: error: *** JOB 1 ON node1 CANCELLED AT 2024-01-01T00:00:00 DUE TO" + " " * n + "x",
        lambda n: "slurmstepd: error: *** STEP 1.0 ON node1 CANCELLED AT now" + " " * n + "x",
        lambda n: "# nThread 1\n# Out of bounds values : 0" + " " * n + "x",
        lambda n: "# nThread 1\n# Avg bus bandwidth : 1" + " " * n + "x",
        lambda n: "# nThread 1\n# Bitwise mismatches : 0" + " " * n + "x",
        lambda n: "# nThread 1\n#  Rank 0 Group 0 Pid 1 on h device 0 [0]" + " " * n + "x",
        lambda n: "mpirun has exited due to process rank 1 with PID 2 on" + " " * n + "x",
        lambda n: "".join(f"NCCL version 2.{i}.1\n" for i in range(n // 10)),
        lambda n: "".join(f"h{i}:1:1 [0] NCCL INFO NCCL version 2.1.1\n" for i in range(n // 10)),
        lambda n: (
            "mpirun detected that one or more processes exited with non-zero status\n" + "Exit code: 1\n" * (n // 10)
        ),
    ],
    ids=[
        *("nccl-failure", "internal-error-quotes", "job-cancelled", "step-cancelled", "out-of-bounds"),
        *("avg-bus-bandwidth", "bitwise-mismatches", "rank-line", "mpirun-exited", "versions", "info-versions"),
        "mpirun-exit-codes",
    ],
)
def test_one_long_line_or_many_lines_parse_in_linear_time(text):
    assert_linear(parse_nccl_tests, text, 250_000, ignore=ParseError)


def test_a_run_killed_after_its_table_header_stopped_in_the_first_collective():
    # the check's hang label must follow this (issue 17: it said "hung in NCCL init")
    lines = data(AUTODL).splitlines(True)
    run = parse_nccl_tests("".join(lines[:9]))
    assert (run.stage, run.nccl_version, run.columns[:3]) == (Stage.INIT, None, ("size", "count", "type"))
    assert run.stopped_at() == (
        "after the table header, before the first data row (the first collective never finished)"
    )


def test_json_nested_too_deeply_is_a_parse_error():
    with pytest.raises(ParseError, match="nested too deeply"):
        parse_nccl_tests_json("[" * 100_000)


def test_no_nccl_tests_line_at_all_is_its_own_kind_of_error_unlike_lines_that_cannot_be_judged():
    from nodecheck.parsers.nccl_tests import NoNcclTestsOutput

    for text in ("", "mpirun was unable to launch the specified application\n"):
        with pytest.raises(NoNcclTestsOutput):
            parse_nccl_tests(text)
    one = data(next(f for f in data_files("nccl-tests") if "all_reduce" in f))
    with pytest.raises(ParseError) as e:
        parse_nccl_tests(one + one)  # two runs in one output: lines, but not one judgeable run
    assert not isinstance(e.value, NoNcclTestsOutput)
