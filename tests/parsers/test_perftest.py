"""parse_perftest on every copied perftest corpus file, with exact facts per file; ParseError for output
that is not perftest's. (The --out_json parser, which ib.pairs never called, was removed in issue 32.)"""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv6Address

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.perftest import (
    ERROR_KINDS,
    MIB_PER_S_IN_GBPS,
    BwRow,
    LatRow,
    PerftestError,
    parse_perftest,
)
from tests.growth import assert_linear
from tests.helpers import data, data_files

IONIC = "perftest/amd-ionic-ib_write_bw-bidir-server-4qp-allsizes-connected-completed.txt"
EFA = "perftest/aws-efa-ib_send_bw-srd-transport-unknown-mib-units-truncated.txt"
MLX4_UD = "perftest/cn-notes-ib_send_bw-ud-mlx4-ib-lid-mbsec-sweep-truncated.txt"
NO_DEVICE = "perftest/debian-perftest-4.5-no-rdma-device-exit1.txt"
DGX = "perftest/dgx-spark-ib_write_bw-rdma-cm-force-link-ib-4qp-report-gbits.txt"
K8S_READ = "perftest/ib_read_bw-rdma_cm-roce-k8s-mbsec-cpu-freq-warning.txt"
SOFTROCE = "perftest/ib_write_bw-softroce-rxe0-mbsec-partial.txt"
ZERO_GID = "perftest/k8s-rdma-shared-dev-plugin-72-roce-zero-gid-modify-qp-rtr-fail.txt"
READ_LAT = "perftest/ml2014-ib_read_lat-client-completion-error-syndrom.txt"
NO_SERVER = "perftest/perftest-pr228-couldnt-connect-socket-error-old-format.txt"
BIDIR_IB = "perftest/rdma-bw-c-comment-ib_send_bw-bidir-server-ib-lid-tab-title.txt"


@dataclass(frozen=True)
class Expect:
    test: str | None
    role: str | None
    # device, link type, transport, connection type, gid index, qps, mtu, rdma_cm
    setup: tuple
    unit: str | None
    rows: tuple[tuple, ...] = ()  # (bytes, iterations, peak, average, msg rate, avg Gb/s 2 dp)
    error: tuple[str, str] | None = None  # (kind, message)
    truncated: bool = False
    best_gbps: float | None = None  # best_average_gbps rounded to 2 dp
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    cut_line: str | None = None
    exit_code: int | None = None


IONIC_ROWS = tuple(
    (size, 20000, peak, avg, rate, round(avg, 2))
    for size, peak, avg, rate in (
        (2, 0.158676, 0.156611, 9.788187),
        (4, 0.32, 0.32, 9.876338),
        (8, 0.64, 0.63, 9.878891),
        (16, 1.29, 1.26, 9.871497),
        (32, 2.59, 2.54, 9.905190),
        (64, 5.16, 5.07, 9.903763),
        (128, 10.29, 10.09, 9.858341),
        (256, 20.56, 20.22, 9.874291),
        (512, 41.22, 40.44, 9.873131),
        (1024, 82.40, 81.14, 9.904961),
        (2048, 162.51, 160.47, 9.794029),
        (4096, 324.29, 318.79, 9.728583),
        (8192, 637.53, 633.80, 9.671073),
        (16384, 753.98, 736.52, 5.619239),
        (32768, 774.86, 774.66, 2.955077),
        (65536, 775.39, 775.25, 1.478663),
        (131072, 777.00, 776.96, 0.740969),
        (262144, 777.70, 777.42, 0.370702),
        (524288, 777.78, 774.66, 0.184694),
        (1048576, 778.17, 778.02, 0.092747),
        (2097152, 778.16, 777.88, 0.046365),
        (4194304, 778.85, 778.31, 0.023195),
        (8388608, 778.53, 777.79, 0.011590),
    )
)

EXPECT = {
    IONIC: Expect(
        "RDMA_Write Bidirectional BW Test",
        "server",
        ("ionic_1", "Ethernet", "IB", "RC", 1, 4, 4096, False),
        "Gb/sec",
        IONIC_ROWS,
        best_gbps=778.31,  # the 4 MiB row: the 8 MiB row (777.79) dips
        warnings=("Using sampled CPU speed 3295 MHz over reported speed 5008 MHz",),
        notes=("Connected: Wed Apr 15 04:36:50 2026", "Completed: Wed Apr 15 04:36:58 2026", "Total run time: 10.951s"),
    ),
    EFA: Expect(
        "Send BW Test",
        None,
        ("rdmap47s0", "IB", "Unknown", "SRD", 0, 1, 4096, False),
        "MiB/sec",
        (
            (2, 1000, 4.42, 1.09, 0.570447, 0.01),
            (4, 1000, 8.73, 8.18, 2.144697, 0.07),
            (8, 1000, 17.70, 17.49, 2.292482, 0.15),
            (16, 1000, 35.49, 34.79, 2.279728, 0.29),
            (32, 1000, 68.87, 68.82, 2.255256, 0.58),
        ),
        truncated=True,
        cut_line=" 64         1000             140.70             132.17 \t\t     2.16551",
    ),
    MLX4_UD: Expect(
        "Send BW Test",
        None,
        ("mlx4_0", "IB", "IB", "UD", None, 1, 4096, False),
        "MB/sec",
        (
            (2, 1000, 7.29, 6.79, 3.560575, 0.06),
            (4, 1000, 14.65, 14.43, 3.782530, 0.12),
            (8, 1000, 29.30, 28.88, 3.785967, 0.24),
            (16, 1000, 58.59, 57.79, 3.787509, 0.48),
            (32, 1000, 117.19, 115.49, 3.784499, 0.97),
            (64, 1000, 285.54, 254.16, 4.164099, 2.13),
            (128, 1000, 571.08, 567.22, 4.646647, 4.76),
        ),
        truncated=True,
        notes=("Max msg size in UD is MTU 4096", "Changing to this MTU"),
        cut_line=" 256        1000             1139.94            1022.73        4.",
    ),
    NO_DEVICE: Expect(
        None,
        None,
        (None,) * 8,
        None,
        error=(
            "no_device",
            (
                "Did not detect devices\nIf device exists, check if driver is up\n"
                "Unable to find the Infiniband/RoCE device"
            ),
        ),
        exit_code=1,
    ),
    DGX: Expect(
        "RDMA_Write BW Test",
        None,
        ("rocep1s0f1", "IB", "IB", "RC", None, 4, 1024, True),
        "Gb/sec",
        ((65536, 20000, 111.72, 111.71, 0.213070, 111.71),),
        best_gbps=111.71,
    ),
    K8S_READ: Expect(
        "RDMA_Read BW Test",
        None,
        ("mlx5_0", "Ethernet", "IB", "RC", 3, 1, 1024, True),
        "MB/sec",
        ((65536, 1000, 10402.09, 10401.68, 0.166427, 87.26),),
        best_gbps=87.26,
        warnings=(
            ("Conflicting CPU frequency values detected: 1000.005000 != 1304.752000. CPU Frequency is not max."),
        ),
    ),
    SOFTROCE: Expect(
        "RDMA_Write BW Test",
        None,
        ("rxe0", "Ethernet", "IB", "RC", 1, 1, 1024, False),
        "MB/sec",
        ((65536, 5000, 110.31, 110.28, 0.001764, 0.93),),
        best_gbps=0.93,
        warnings=(
            ("Conflicting CPU frequency values detected: 1200.000000 != 3591.635000. CPU Frequency is not max."),
        ),
    ),
    ZERO_GID: Expect(
        "RDMA_Write BW Test",
        None,
        ("mlx5_2", "Ethernet", "IB", "RC", 0, 1, 1024, False),
        None,
        error=("qp_rtr_failed", "Failed to modify QP 59 to RTR\nUnable to Connect the HCA's through the link"),
    ),
    READ_LAT: Expect(
        "RDMA_Read Latency Test",
        "client",
        ("mlx4_0", "IB", "IB", "RC", None, 1, 2048, False),
        "usec",
        error=(
            "completion_error",
            "Completion with error at client\nFailed status 10: wr_id 0 syndrom 0x88\nscnt=1, ccnt=1",
        ),
    ),
    NO_SERVER: Expect(
        None,
        "client",
        (None,) * 8,
        None,
        error=(
            "connect_failed",
            (
                "Couldn't connect to 192.168.125.211:18515\n"
                "Unable to open file descriptor for socket connection "
                "Unable to init the socket connection"
            ),
        ),
        exit_code=1,
    ),
    BIDIR_IB: Expect(
        # the SERVER side per SOURCES.md, but nothing in the excerpt says so: no waiting banner
        "Send Bidirectional BW Test",
        None,
        ("mlx5_0", "IB", "IB", "RC", None, 1, 4096, False),
        "MB/sec",
        ((4096, 8758300, 0.00, 11403.46, 2.919285, 95.66),),
        best_gbps=95.66,
    ),
}


def test_every_perftest_corpus_file_has_expectations():
    assert sorted(EXPECT) == data_files("perftest")
    assert len(EXPECT) == 11


@pytest.mark.parametrize("path", sorted(EXPECT))
def test_corpus_file_facts(path):
    want = EXPECT[path]
    text = data(path)
    run = parse_perftest(text, want.exit_code)
    assert run.test == want.test
    assert (
        run.device,
        run.link_type,
        run.transport,
        run.connection_type,
        run.gid_index,
        run.qps,
        run.mtu,
        run.rdma_cm,
    ) == want.setup
    assert run.role == want.role
    assert run.unit == want.unit
    assert [
        (r.bytes, r.iterations, r.peak, r.average, r.msg_rate_mpps, round(r.average_gbps, 2)) for r in run.rows
    ] == list(want.rows)
    assert all(r.cpu_util is None for r in run.rows)
    assert (run.error.kind, run.error.message) == want.error if want.error else run.error is None
    assert run.truncated is want.truncated
    assert run.cut_line == want.cut_line
    assert run.warnings == want.warnings
    assert run.notes == want.notes
    best = run.best_average_gbps
    assert (round(best, 2) if best is not None else None) == want.best_gbps
    assert run.exit_code == want.exit_code
    assert run.raw == text


def test_kind_and_bidirectional_come_from_the_title():
    kinds = {
        path: (parse_perftest(data(path)).kind, parse_perftest(data(path)).bidirectional)
        for path in (IONIC, EFA, READ_LAT, BIDIR_IB, DGX, NO_SERVER)
    }
    assert kinds == {
        IONIC: ("bw", True),
        EFA: ("bw", False),
        READ_LAT: ("lat", False),
        BIDIR_IB: ("bw", True),
        DGX: ("bw", False),
        NO_SERVER: (None, False),
    }


def test_mib_and_mb_labels_normalize_with_the_same_factor():
    # formats.md: perftest's "MB/sec" was always 2^20 bytes; 24.07 only relabelled it "MiB/sec"
    assert MIB_PER_S_IN_GBPS == 1048576 * 8 / 1e9
    [read] = parse_perftest(data(K8S_READ)).rows
    assert read.peak_gbps == pytest.approx(10402.09 * 0.008388608)
    assert read.average_gbps == pytest.approx(87.2556, abs=1e-4)
    efa_first = parse_perftest(data(EFA)).rows[0]
    assert efa_first.peak_gbps == pytest.approx(4.42 * 0.008388608)


def test_gbits_rows_are_not_rescaled_and_inc_accuracy_keeps_six_decimals():
    first = parse_perftest(data(IONIC)).rows[0]
    assert (first.peak, first.average, first.peak_gbps, first.average_gbps) == (0.158676, 0.156611, 0.158676, 0.156611)


def test_duration_mode_row_with_irregular_spacing_keeps_peak_zero():
    [row] = parse_perftest(data(BIDIR_IB)).rows
    assert row == BwRow(4096, 8758300, 0.0, 11403.46, 2.919285, None, 0.0, 11403.46 * MIB_PER_S_IN_GBPS)


def test_latency_rows_of_the_old_three_column_format():
    run = parse_perftest(data(READ_LAT))
    assert run.rows == ()
    assert len(run.lat_rows) == 12
    assert run.lat_rows[0] == LatRow(2, 1000, t_min=2.29, t_max=15.78, t_typical=2.34)
    assert run.lat_rows[-1] == LatRow(4096, 1000, t_min=4.07, t_max=8.42, t_typical=4.13)
    assert [r.bytes for r in run.lat_rows] == [2**n for n in range(1, 13)]
    assert run.best_average_gbps is None


def test_address_lines_with_gids_lids_and_qpns():
    ionic = parse_perftest(data(IONIC)).addresses
    assert [(a.side, a.qpn) for a in ionic] == [
        ("local", 0x2),
        ("local", 0x800),
        ("local", 0x3),
        ("local", 0x801),
        ("remote", 0x2),
        ("remote", 0x800),
        ("remote", 0x3),
        ("remote", 0x801),
    ]
    assert ionic[0].gid == "253:147:22:211:89:182:01:80:223:237:130:41:237:150:197:196"
    assert ionic[0].gid_ip == IPv6Address("fd93:16d3:59b6:150:dfed:8229:ed96:c5c4")
    assert ionic[4].gid_ip == IPv6Address("fd93:16d3:59b6:149:3959:c9df:beb0:8544")
    assert ionic[0].psn == 0x60DDB0 and ionic[0].lid == 0

    read = parse_perftest(data(K8S_READ)).addresses
    assert [str(a.gid_ip.ipv4_mapped) for a in read] == ["10.0.32.4", "10.0.33.3"]
    # the failing RoCE pair: GID index 0 held no GID, both sides all zeros
    assert [a.gid_ip for a in parse_perftest(data(ZERO_GID)).addresses] == [IPv6Address("::")] * 2

    ib = parse_perftest(data(MLX4_UD)).addresses
    assert [(a.side, a.lid, a.qpn, a.psn, a.gid) for a in ib] == [
        ("local", 0x04, 0x021C, 0x3C8F30, None),
        ("remote", 0x05, 0x021A, 0x45D83, None),
    ]
    efa = parse_perftest(data(EFA)).addresses
    assert [(a.qpn, a.psn) for a in efa] == [(0, 0xCD1E3C), (0, 0xEC3763)]
    assert len(parse_perftest(data(DGX)).addresses) == 8
    assert [a.lid for a in parse_perftest(data(BIDIR_IB)).addresses] == [0x18, 0x13]


def test_the_whole_info_block_is_kept_as_printed():
    info = parse_perftest(data(IONIC)).info
    assert info["CPU freq"] == "3295[MHz]"
    assert info["Using DDP"] == "OFF"
    assert info["Data ex. method"] == "Ethernet"
    assert parse_perftest(data(EFA)).info["rdma_cm QPs"] == "OFF"  # tab before the colon
    assert parse_perftest(data(K8S_READ)).info["Outstand reads"] == "16"
    assert parse_perftest(data(BIDIR_IB)).info["RX depth"] == "512"
    assert len(info) == 20


def test_error_kinds_are_the_documented_set():
    assert {
        "connect_failed",
        "listen_failed",
        "no_device",
        "qp_rtr_failed",
        "link_unreachable",
        "completion_error",
        "gid_type_mismatch",
        "exchange_failed",
        "other",
    } == ERROR_KINDS


def test_an_error_line_makes_an_error_whatever_the_exit_code():
    run = parse_perftest(data(NO_SERVER), exit_code=0)
    assert run.error.kind == "connect_failed"
    assert run.truncated is False


def test_a_nonzero_exit_without_error_line_is_an_error_of_kind_other():
    run = parse_perftest(data(DGX), exit_code=1)
    assert run.error == PerftestError("other", "exit code 1 and no error line")
    assert run.best_average_gbps is None
    assert len(run.rows) == 1


def test_lines_perftest_prints_in_other_failures():
    # perftest's own strings (formats.md §3), each alone on stderr after a test-info block
    head = data(DGX).split(" local address:")[0]
    cases = {
        "Couldn't listen to port 18515\n": ("listen_failed", "server"),
        "\n Found Incompatibility issue with GID types.\n Please Try to use a different IP version.\n": (
            "gid_type_mismatch",
            None,
        ),
        " Failed to exchange data between server and clients\n": ("exchange_failed", None),
        " Unable to Connect the HCA's through the link\n": ("link_unreachable", None),
        "Error: BW result is below bw limit\n": ("other", None),
    }
    for tail, (kind, role) in cases.items():
        run = parse_perftest(head + tail, exit_code=1)
        assert (run.error.kind, run.role) == (kind, role), tail
        assert run.error.message == "\n".join(line.strip() for line in tail.splitlines() if line.strip())


def test_a_waiting_server_that_never_got_a_client_is_truncated():
    run = parse_perftest(data(IONIC).split("Connected:")[0])
    assert (run.role, run.test, run.truncated, run.error) == ("server", None, True, None)


def test_a_table_header_without_rows_is_truncated():
    run = parse_perftest(data(DGX).split(" 65536")[0])
    assert (run.unit, run.rows, run.truncated, run.best_average_gbps) == ("Gb/sec", (), True, None)


@pytest.mark.parametrize(
    "text, reason",
    [
        ("", "empty output"),
        ("  \n\n", "empty output"),
        ("bash: ib_write_bw: command not found\n", "no perftest test title"),
        ("Error: something else failed\n", "no perftest test title"),
        ("PING 10.0.0.1 (10.0.0.1) 56(84) bytes of data.\n", "no perftest test title"),
    ],
)
def test_output_that_is_not_perftest_raises(text, reason):
    with pytest.raises(ParseError) as caught:
        parse_perftest(text, exit_code=127)
    assert caught.value.tool == "ib_write_bw"
    assert reason in caught.value.reason
    assert caught.value.excerpt == text


def test_the_tool_name_in_parse_errors_can_be_set():
    with pytest.raises(ParseError) as caught:
        parse_perftest("sh: 1: ib_send_bw: not found\n", tool="ib_send_bw")
    assert caught.value.tool == "ib_send_bw"


def test_an_unreadable_row_inside_the_table_raises_rather_than_vanishing():
    text = data(DGX).replace("111.71             0.213070", "-nan               0.213070")
    with pytest.raises(ParseError, match="unreadable result row"):
        parse_perftest(text)


def test_a_result_table_of_unknown_shape_raises():
    text = data(DGX).replace("MsgRate[Mpps]", "MsgRate[Mpps]   BW Port1[Gb/sec]")
    with pytest.raises(ParseError, match="unknown shape"):
        parse_perftest(text)


def test_two_runs_in_one_output_raise():
    with pytest.raises(ParseError, match="second test title"):
        parse_perftest(data(DGX) + data(SOFTROCE))


def test_the_current_latency_header_with_average_stdev_and_percentiles():
    # DERIVED inline from READ_LAT: its header swapped for RESULT_FMT_LAT of current perftest
    # (perftest_parameters.h) and its last row extended with four made-up values
    old_header = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]"
    new_header = old_header + ("    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ")
    text = data(READ_LAT).replace(old_header, new_header)
    text = (
        text.split(" 2       1000")[0] + " 4096    1000          4.07           8.42         4.13"
        "  \t       4.21     \t0.25\t\t5.02 \t\t8.42\n" + "-" * 87 + "\n"
    )
    run = parse_perftest(text, exit_code=0)
    assert run.lat_rows == (LatRow(4096, 1000, 4.07, 8.42, 4.13, 4.21, 0.25, 5.02, 8.42),)
    assert (run.error, run.truncated, run.unit, run.kind) == (None, False, "usec", "lat")


def test_the_cpu_util_column_is_read_only_when_the_header_has_it():
    # DERIVED inline from DGX: RESULT_EXT_CPU_UTIL appended to the header, a made-up value to the row
    with_cpu = (
        data(DGX)
        .replace("MsgRate[Mpps]\n", "MsgRate[Mpps]    CPU_Util[%]\n")
        .replace("0.213070\n", "0.213070\t    3.52\n")
    )
    [row] = parse_perftest(with_cpu).rows
    assert (row.average, row.cpu_util) == (111.71, 3.52)
    without_header = data(DGX).replace("0.213070\n", "0.213070\t    3.52\n")
    with pytest.raises(ParseError, match="unreadable result row"):
        parse_perftest(without_header)


# --- issue 17: crashes, non-finite numbers and linear time on hostile output -------------------------


def test_a_gid_byte_above_255_is_a_parse_error_not_a_crash():
    text = data(IONIC).replace("GID: 253:147:22:211", "GID: 953:147:22:211", 1)
    with pytest.raises(ParseError) as caught:
        parse_perftest(text)
    assert caught.value.reason.startswith("GID byte 953 is not a byte (0-255): 'GID: 953:147:22:211")


@pytest.mark.growth
@pytest.mark.parametrize(
    "line",
    [  # each a function of n: at 4n = 1,000,000 the line that took seconds (growth: tests/growth.py)
        lambda n: " A" + " " * n + "x",  # the info line, 1-4.7 s at 20k
        lambda n: " Mtu : 4096[B]" + " " * n + "x",
        lambda n: " A:" + "b" * n + " !",
        lambda n: " " + "a " * (n // 2) + "x",
        lambda n: " " + "a : b " * (3 * n // 20) + "!",
    ],
    ids=["spaces", "mtu-spaces", "colon-word", "words", "colons"],
)
def test_one_long_info_line_parses_in_linear_time(line):
    recorded = data(DGX)
    text = lambda n: recorded.replace(" Number of qps   : 4", line(n), 1)  # noqa: E731
    assert text(1) != recorded
    assert_linear(parse_perftest, text, 250_000, ignore=ParseError)
