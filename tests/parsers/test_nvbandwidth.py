"""parse_nvbandwidth: real recorded nvbandwidth outputs (tests/data/nvbandwidth/, sources in SOURCES.md) -> exact
matrices; a cut or garbled matrix -> ParseError."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.nvbandwidth import (
    NvbandwidthRun,
    NvbDevice,
    NvbTest,
    device_to_device,
    device_to_host,
    host_to_device,
    parse_nvbandwidth,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "nvbandwidth"
CRASHED = "a100-sxm4-80gb-x8-v0.7-d2d-read-assert-crash.txt"
EDITED = "gh200-v0.6-waived-superbench-fixture.txt"  # superbenchmark edited its first matrix to 2 CPU rows
FILES = sorted(p.name for p in DATA.iterdir() if p.name not in (CRASHED, EDITED))


def run_of(name: str) -> NvbandwidthRun:
    return parse_nvbandwidth((DATA / name).read_text())


@pytest.mark.parametrize("name", FILES)
def test_every_sum_line_matches_its_cells(name: str) -> None:
    """nvbandwidth adds the unrounded values and prints each to 2 decimals: the printed cells sum to the
    SUM line within 0.005 per cell. A cell read wrong (or typed wrong into the data file) breaks this."""
    matrices = [t for t in run_of(name).tests if not t.waived and not t.error]
    assert matrices
    for test in matrices:
        assert test.sum is not None
        assert abs(sum(test.cells.values()) - test.sum) <= 0.005 * len(test.cells) + 1e-9, test.key


def test_h100_d2d_read_v0_10() -> None:
    run = run_of("h100-80gb-hbm3-x8-v0.10.0-d2d-read-ce.txt")
    assert (run.version, run.git_version) == ("v0.10.0", "v0.10.0")
    assert (run.cuda_runtime, run.cuda_driver, run.driver) == (13020, 13020, "595.71.05")
    assert run.devices == () and run.errors == ()
    (test,) = run.tests
    assert test.name == test.key == "device_to_device_memcpy_read_ce"
    assert (test.title, test.unit) == ("memcpy CE GPU(row) -> GPU(column) bandwidth", "GB/s")
    assert test.rows == test.columns == tuple(range(8))
    assert len(test.cells) == 56 and all((i, i) not in test.cells for i in range(8))
    assert test.cells[(0, 1)] == 395.08 and test.cells[(3, 2)] == 395.23 and test.cells[(7, 0)] == 395.05
    assert test.sum == 22126.64 and not test.waived and test.error == ""
    d2d = device_to_device(run)
    # read: row 7 read column 0's memory, so the data went GPU0 -> GPU7
    assert d2d[(0, 7)] == 395.05 and d2d[(7, 0)] == 395.12
    assert d2d[(2, 3)] == 395.23
    assert len(d2d) == 56
    assert host_to_device(run) == {} and device_to_host(run) == {}


def test_b300_full_run_v0_10() -> None:
    run = run_of("b300-sxm6-x7-v0.10.0-full.txt")
    assert (run.version, run.git_version, run.cuda_runtime, run.driver) == ("v0.10.0", "v0.10", 13030, "610.57.04")
    assert [t.key for t in run.tests] == [
        "host_to_device_memcpy_ce",
        "device_to_host_memcpy_ce",
        "host_to_device_bidirectional_memcpy_ce",
        "device_to_host_bidirectional_memcpy_ce",
        "device_to_device_memcpy_read_ce",
        "device_to_device_memcpy_write_ce",
        "device_to_device_bidirectional_memcpy_read_ce_read1",
        "device_to_device_bidirectional_memcpy_read_ce_read2",
        "device_to_device_bidirectional_memcpy_read_ce_total",
        "device_to_device_bidirectional_memcpy_write_ce_write1",
        "device_to_device_bidirectional_memcpy_write_ce_write2",
        "device_to_device_bidirectional_memcpy_write_ce_total",
    ]
    assert [t.name for t in run.tests[6:9]] == ["device_to_device_bidirectional_memcpy_read_ce"] * 3
    assert run.tests[8].title == "memcpy CE GPU(row) <-> GPU(column) Total bandwidth"
    assert run.tests[8].cells[(6, 1)] == 1517.86 and run.tests[8].sum == 63869.90
    assert host_to_device(run) == {0: 55.59, 1: 55.60, 2: 55.60, 3: 55.59, 4: 55.58, 5: 55.60, 6: 55.58}
    assert device_to_host(run) == {0: 57.29, 1: 57.30, 2: 57.29, 3: 57.05, 4: 57.00, 5: 56.99, 6: 56.92}
    write = device_to_device(run)  # write_ce is preferred: row wrote into column
    assert write[(0, 1)] == 774.50 and write[(1, 0)] == 774.57 and write[(5, 6)] == 774.29 and len(write) == 42
    read = device_to_device(run, "device_to_device_memcpy_read_ce")
    assert read[(1, 0)] == 764.71 and read[(0, 1)] == 765.86 and read[(0, 2)] == 766.14
    with pytest.raises(ValueError, match="is not one of"):
        device_to_device(run, "device_to_device_memcpy_read_sm")


def test_a100_single_gpu_v0_8() -> None:
    run = run_of("a100-sxm4-40gb-v0.8-h2d-sm.txt")
    assert (run.version, run.cuda_runtime, run.cuda_driver, run.driver) == ("v0.8", 12060, 12060, "560.35.05")
    assert run.devices == (NvbDevice(0, "NVIDIA A100-SXM4-40GB", "00000000:99:00"),)
    (test,) = run.tests
    assert test == NvbTest(
        name="host_to_device_memcpy_sm",
        title="memcpy SM CPU(row) -> GPU(column) bandwidth",
        unit="GB/s",
        cells={(0, 0): 25.13},
        sum=25.13,
        key="host_to_device_memcpy_sm",
        rows=(0,),
        columns=(0,),
    )
    assert host_to_device(run) == {}  # only the copy-engine test feeds the helper


def test_a6000_na_cells_and_no_running_line() -> None:
    """The reporter elided the lines between the header and the matrix ("..."): the name then comes from the
    SUM line, and N/A cells (the diagonal) are absent."""
    run = run_of("rtx-a6000-x6-v0.8-d2d-read-na-elided.txt")
    assert (run.version, run.cuda_runtime, run.driver) == ("v0.8", 13000, "580.95.05")
    (test,) = run.tests
    assert test.name == "device_to_device_memcpy_read_ce" and test.sum == 715.53
    assert len(test.cells) == 30 and (0, 0) not in test.cells and (5, 5) not in test.cells
    assert test.cells[(0, 3)] == 21.95 and test.cells[(5, 1)] == 22.67
    assert device_to_device(run)[(3, 0)] == 21.95


def test_gh200_fixture_edited_to_two_cpu_rows_is_refused() -> None:
    with pytest.raises(ParseError) as info:
        run_of(EDITED)
    assert info.value.reason == (
        "line 11: matrix 'memcpy CE CPU(row) -> GPU(column) bandwidth' has CPU rows [0, 1];"
        " nvbandwidth prints one, row 0"
    )


def test_gh200_waived_lines_and_latency_unit() -> None:
    """The same real output from its second test on (as a run of a subset of the tests would print it)."""
    text = (DATA / EDITED).read_text()
    head, rest = text.split("Running host_to_device_memcpy_ce.", 1)
    run = parse_nvbandwidth(head + rest[rest.index("Running device_to_host_memcpy_ce.") :])
    assert (run.version, run.cuda_runtime, run.driver) == ("v0.6", 12040, "550.54.15")
    assert run.devices == (NvbDevice(0, "NVIDIA GH200 480GB", "00000009:01:00"),)
    waived = [t for t in run.tests if t.waived]
    assert len(waived) == 17 and all(t.name is None and t.cells == {} and t.error == "" for t in waived)
    measured = [t for t in run.tests if not t.waived]
    assert len(measured) == 14
    for test in measured:
        assert test.sum is not None and abs(sum(test.cells.values()) - test.sum) <= 0.005 * len(test.cells)
    latency = run.test("host_device_latency_sm")
    assert latency is not None
    assert (latency.title, latency.unit, dict(latency.cells)) == (
        "memory latency SM CPU(row) <-> GPU(column)",
        "ns",
        {(0, 0): 772.58},
    )
    assert device_to_host(run) == {0: 295.15, 1: 312.11}
    assert host_to_device(run) == {}
    assert run.test("host_to_all_memcpy_sm") is not None


def test_a100_assert_crash_is_a_failed_test_not_a_result() -> None:
    run = run_of(CRASHED)
    assert (run.version, run.cuda_runtime, run.driver) == ("v0.7", 12040, "550.127.08")
    assert [d.pci_bus_id for d in run.devices] == [
        "00000000:34:00",
        "00000000:35:00",
        "00000000:36:00",
        "00000000:37:00",
        "00000000:9b:00",
        "00000000:9c:00",
        "00000000:9d:00",
        "00000000:9e:00",
    ]
    assert {d.name for d in run.devices} == {"NVIDIA A100-SXM4-80GB"}
    (test,) = run.tests
    assert (test.name, test.cells, test.sum, test.waived) == ("device_to_device_memcpy_read_ce", {}, None, False)
    assert test.error == (
        "ASSERT in expression h_errorFlag == 0 in void memcmpPatternHelper(CUstream, CUdeviceptr, long long unsigned"
        " int, unsigned int, CompareKernelFunc, std::shared_ptr<NodeHelper>)() :"
        " /mnt/project/cuda_related/nvbandwidth/memcpy.cpp:165"
    )
    assert device_to_device(run) == {}


HEADER = "nvbandwidth Version: v0.8\nBuilt from Git version: v0.8\n\n"
H2D = "Running host_to_device_memcpy_ce.\nmemcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)\n"


def reason(text: str) -> str:
    with pytest.raises(ParseError) as info:
        parse_nvbandwidth(text)
    assert info.value.tool == "nvbandwidth"
    return info.value.reason


def test_errors_waiving_and_perf_formatter() -> None:
    run = parse_nvbandwidth(
        "nvbandwidth Version: v0.4\nBuilt from Git version: 67daa2d\n\n"
        "CUDA Runtime Version: 12020\nCUDA Driver Version: 12020\nDriver Version: 535.104.05\n\n"
        "Device 0: NVIDIA H100 80GB HBM3\nDevice 1: NVIDIA H100 80GB HBM3\n\n"
        "Waiving host_to_all_memcpy_ce.\n\n"
        "ERROR: Testcase nosuch not found!\n"
        "Running device_to_device_memcpy_read_ce.\nError: cuMemcpyAsync failed\n"
        "Running device_to_host_memcpy_ce.\n"
        + "memcpy CE CPU(row) <- GPU(column) bandwidth (GB/s)\n          0         1\n0     55.10     N/A\n\n"
        "&&&& PERF device_to_host_memcpy_ce 55.10GB/s\n"
        "Running host_to_device_memcpy_ce.\n"
    )
    assert run.devices == (NvbDevice(0, "NVIDIA H100 80GB HBM3", None), NvbDevice(1, "NVIDIA H100 80GB HBM3", None))
    assert run.errors == ("Testcase nosuch not found!",)
    waived, failed, d2h, silent = run.tests
    assert (waived.name, waived.waived) == ("host_to_all_memcpy_ce", True)
    assert (failed.name, failed.error, failed.cells) == ("device_to_device_memcpy_read_ce", "cuMemcpyAsync failed", {})
    assert (d2h.sum, dict(d2h.cells)) == (55.10, {(0, 0): 55.10})
    assert (silent.name, silent.error) == ("host_to_device_memcpy_ce", "printed no result")
    assert device_to_host(run) == {0: 55.10}
    assert device_to_device(run) == {}  # the read test failed: no matrix, no pairs


TITLE = "'memcpy CE CPU(row) -> GPU(column) bandwidth'"
ONE = HEADER + H2D + "           0\n"
SUM = "\n\nSUM host_to_device_memcpy_ce 0\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "empty output"),
        ("hello\nworld\n", "no 'nvbandwidth Version' line and no test: not nvbandwidth output"),
        (HEADER + H2D + "           0         1\n 0     55.10\n", "line 7: row of 1 value(s) under 2 column(s)"),
        (ONE + " 0     55.10\n", f"at the end: matrix {TITLE} ends without its SUM line (output cut)"),
        (HEADER + H2D, f"at the end: matrix {TITLE} has no column labels (output cut)"),
        (ONE + "\nSUM host_to_device_memcpy_ce 1\n", f"line 7: matrix {TITLE} has no rows"),
        (ONE + " 0       nan" + SUM, "line 7: not a non-negative number: 'nan'"),
        (ONE + " 0     -5.00" + SUM, "line 7: not a non-negative number: '-5.00'"),
        (ONE + " 0       inf" + SUM, "line 7: not a non-negative number: 'inf'"),
        (ONE + " 0      1e99" + SUM, "line 7: not a non-negative number: '1e99'"),
        (
            ONE + " 0      5.00\n\nSUM other_test 5.00\n",
            "line 9: SUM key 'other_test' does not belong to the running test 'host_to_device_memcpy_ce'",
        ),
        (ONE + " 0      5.00\n\nNOTE: cut\n", f"line 9: expected the SUM line of {TITLE}, got 'NOTE: cut'"),
        (ONE + " 0      5.00\n\nSUM host_to_device_memcpy_ce NaN\n", "line 9: not a non-negative number: 'NaN'"),
        (HEADER + H2D + "     a     b\n", "line 6: column labels are not device numbers: 'a b'"),
        (HEADER + H2D + "     0     0\n", "line 6: repeated column label in '0 0'"),
        (HEADER + H2D + "     0\n 0  1.00\n 0  2.00\n", "line 8: row 0 printed twice"),
        (HEADER + "Device 1: NVIDIA H100\n", "line 4: device 1 listed after 0 device(s)"),
    ],
)
def test_garbage_and_cut_matrices_are_parse_errors(text: str, expected: str) -> None:
    assert reason(text) == expected


def test_bounds() -> None:
    wide = HEADER + H2D + " ".join(str(i) for i in range(513)) + "\n"
    assert reason(wide) == "line 6: 513 column label(s) (1 to 512 expected)"
    tall = HEADER + H2D + "  0\n" + "".join(f"{i}  1.00\n" for i in range(513)) + "\nSUM host_to_device_memcpy_ce 513\n"
    assert reason(tall) == "line 519: more than 512 rows"
    big = HEADER + "x" * (4 * 1024 * 1024)
    assert reason(big) == f"output of {len(big)} characters (at most 4194304 read)"
    hostile = "(row)" * 200_000 + " (column) (GB/s)\n"  # would backtrack for minutes in the title regex
    assert reason(hostile) == "no 'nvbandwidth Version' line and no test: not nvbandwidth output"
    long_name = parse_nvbandwidth(HEADER + "Device 0: " + "G" * 1000 + "\n")
    assert long_name.devices[0].name == "G" * 300 + "…"
