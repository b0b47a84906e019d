"""parse_perfquery / counters_from_sysfs on every copied corpus file they read, with exact counter values
and widths. (The ibqueryerrors/ files, gpud's `=== ./name ===` counters loop and its sysfs rate file are
recordings kept for a future reader: their parsers, which no check called, were removed in issue 32.)"""

from __future__ import annotations

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.perfquery import (
    BASIC_WIDTHS,
    PortCounters,
    counters_from_sysfs,
    parse_perfquery,
)
from nodecheck.parsers.sysfs import Unreadable, parse_sysfs_dump
from tests.helpers import data, data_files

TOOLS = ("perfquery", "ibqueryerrors", "sysfs_ib_counters", "sysfs_ib")
CX4 = "perfquery/cx4-lab-blog-perfquery-C-basic-capmask-0x1600-qp1dropped.txt"
WATCH = "perfquery/ml2014-perfquery-under-watch-capmask-0x1400.txt"
TWO_PORTS = "perfquery/infiniband_exporter-extended-2ports-capmask2.txt"
NONZERO = "perfquery/infiniband_exporter-extended-nonzero-linkdowned-relay-xmitdiscards.txt"
NO_UMAD = "perfquery/debian-infiniband-diags-44-no-umad-module-exit255.txt"
ROCE_ONLY = "perfquery/infiniband_exporter-issue26-mad_rpc_open_port-failure.txt"
IBQE_SWITCH = "ibqueryerrors/guilbaults-issue12-smp-timeout-and-errors-truncated.txt"
IBQE_LINE = "ibqueryerrors/ucx-9590-ibqueryerrors-one-line.txt"
GPUD_LOOP = "sysfs_ib_counters/gpud-pr943-saturated-counters-linkdowned255-xmitdiscards65535.txt"
GPUD_DUMP = "sysfs_ib_counters/derived-gpud-pr943-mlx5_1-port1-as-nodecheck-sysfs-dump.txt"
RATE = "sysfs_ib/gpud-h100-mlx5_bond_0-ports-1-rate-2X-NDR.txt"
# mirrored recordings no parser reads (their parsers were removed in issue 32): ibqueryerrors will
# need one again for switch-side counters (issue 36), the removed one is in git at 35aa48cb
UNREAD = {IBQE_SWITCH, IBQE_LINE, GPUD_LOOP, RATE}

ZERO_ERRORS = dict.fromkeys(
    (
        "SymbolErrorCounter",
        "LinkErrorRecoveryCounter",
        "LinkDownedCounter",
        "PortRcvErrors",
        "PortRcvRemotePhysicalErrors",
        "PortRcvSwitchRelayErrors",
        "PortXmitDiscards",
        "PortXmitConstraintErrors",
        "PortRcvConstraintErrors",
        "LocalLinkIntegrityErrors",
        "ExcessiveBufferOverrunErrors",
    ),
    0,
)
# the printed order of a basic block is kept: QP1Dropped (newer builds) sits before VL15Dropped
CX4_COUNTERS = {
    **ZERO_ERRORS,
    "QP1Dropped": 0,
    "VL15Dropped": 0,
    "PortXmitData": 16576648,
    "PortRcvData": 7669,
    "PortXmitPkts": 32009,
    "PortRcvPkts": 1012,
    "PortXmitWait": 441,
}
WATCH_COUNTERS = {
    **ZERO_ERRORS,
    "VL15Dropped": 0,
    "PortXmitData": 6465317,
    "PortRcvData": 427938,
    "PortXmitPkts": 41531,
    "PortRcvPkts": 130792613,
    "PortXmitWait": 2,
}


def _extended(data4, cast4, errors, xmit_wait):
    names = (
        "PortXmitData",
        "PortRcvData",
        "PortXmitPkts",
        "PortRcvPkts",
        "PortUnicastXmitPkts",
        "PortUnicastRcvPkts",
        "PortMulticastXmitPkts",
        "PortMulticastRcvPkts",
    )
    counters = dict(zip(names, data4 + cast4))
    return {**counters, **ZERO_ERRORS, **errors, "VL15Dropped": 0, "PortXmitWait": xmit_wait, "QP1Dropped": 0}


PORT1 = _extended(
    (36298026860928, 12279028775751, 101733204203, 32262508468),
    (101708165289, 26677661727, 25038914, 5584846741),
    {},
    22730501,
)
PORT2 = _extended(
    (26006570014026, 39078804993378, 122978948297, 93660802641), (122978948297, 93660802641, 0, 0), {}, 36510964
)
NONZERO_COUNTERS = _extended(
    (178791657177235, 178762341961629, 393094651266, 387654829341),
    (387471005571, 387648134400, 5623645694, 6694940),
    {"LinkDownedCounter": 1, "PortRcvSwitchRelayErrors": 7, "PortXmitDiscards": 20046},
    41864608,
)

# path → [(port, lid, extended, cap_mask, cap_mask2, counters)]
PERFQUERY = {
    CX4: [(1, "1", False, "0x1600", None, CX4_COUNTERS)],
    WATCH: [(1, "7", False, "0x1400", None, WATCH_COUNTERS)],
    TWO_PORTS: [(1, "1719", True, "0x5300", "0x0000002", PORT1), (2, "1719", True, "0x5300", "0x0000002", PORT2)],
    NONZERO: [(1, "2052", True, "0x5300", "0x0000002", NONZERO_COUNTERS)],
}
PERFQUERY_FAILS = {
    NO_UMAD: "perfquery could not open the port (no ib_umad? load the ib_umad kernel module)",
    ROCE_ONLY: "perfquery could not open the port: MAD client registration failed (no InfiniBand "
    "port on this CA, e.g. RoCE/Ethernet only, or no ib_umad?)",
}
GPUD_COUNTERS = {
    "PortUnicastRcvPkts": 240037171331,
    "PortXmitData": 205143497464492,
    "PortXmitConstraintErrors": 0,
    "VL15Dropped": 0,
    "PortRcvErrors": 0,
    "PortXmitWait": 4294967295,
    "LinkErrorRecoveryCounter": 0,
    "PortMulticastRcvPkts": 0,
    "PortMulticastXmitPkts": 0,
    "PortRcvRemotePhysicalErrors": 0,
    "PortRcvPkts": 240037171331,
    "PortUnicastXmitPkts": 242071897216,
    "ExcessiveBufferOverrunErrors": 15,
    "PortRcvData": 205128687774249,
    "PortRcvConstraintErrors": 0,
    "LinkDownedCounter": 255,
    "LocalLinkIntegrityErrors": 0,
    "PortXmitDiscards": 65535,
    "PortRcvSwitchRelayErrors": 2,
    "PortXmitPkts": 242071897216,
    "SymbolErrorCounter": 0,
}
GPUD_64 = {
    "PortUnicastRcvPkts",
    "PortUnicastXmitPkts",
    "PortMulticastRcvPkts",
    "PortMulticastXmitPkts",
    "PortXmitData",
    "PortRcvData",
    "PortXmitPkts",
    "PortRcvPkts",
}
GPUD_WIDTHS = {n: 64 if n in GPUD_64 else BASIC_WIDTHS[n] for n in GPUD_COUNTERS}


# -- every file has an exact expectation, and every corpus file has a copy here ------------------


def test_every_data_file_has_an_expectation():
    on_disk = {path for tool in TOOLS for path in data_files(tool)}
    expected = set(PERFQUERY) | set(PERFQUERY_FAILS) | {GPUD_DUMP} | UNREAD
    assert on_disk == expected
    assert len(on_disk) == 11


def test_every_data_file_has_a_source_line():
    sources = data("SOURCES.md")
    files = [path for tool in TOOLS for path in data_files(tool)]
    assert len(files) == 11
    assert all(f"- `{path}` - " in sources for path in files)


# -- perfquery ------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(PERFQUERY))
def test_perfquery_file_gives_exact_counters(path):
    blocks = parse_perfquery(data(path), ca="mlx5_0")
    want = PERFQUERY[path]
    assert len(blocks) == len(want) > 0
    for block, (port, lid, extended, cap_mask, cap_mask2, counters) in zip(blocks, want):
        assert (block.ca, block.port, block.lid, block.extended) == ("mlx5_0", port, lid, extended)
        assert (block.cap_mask, block.cap_mask2, block.missing) == (cap_mask, cap_mask2, ())
        assert list(block.counters.items()) == list(counters.items())  # printed order kept
        assert block.source == "perfquery"


def test_basic_blocks_have_iba_widths_and_no_selector_fields():
    (block,) = parse_perfquery(data(CX4))
    assert block.widths == {name: BASIC_WIDTHS[name] for name in CX4_COUNTERS}
    assert (block.widths["LinkDownedCounter"], block.widths["LocalLinkIntegrityErrors"]) == (8, 4)
    assert (block.widths["PortXmitData"], block.widths["QP1Dropped"]) == (32, 16)
    assert not {"PortSelect", "CounterSelect", "CounterSelect2"} & set(block.counters)
    assert block.raw.splitlines()[0] == "# Port counters: Lid 1 port 1 (CapMask: 0x1600)"
    assert len(block.raw.splitlines()) == 22
    assert (block.ca, block.where) == (None, "Lid 1 port 1")


def test_extended_blocks_read_every_counter_at_64_bits():
    blocks = parse_perfquery(data(TWO_PORTS), ca="mlx5_2")
    assert [b.where for b in blocks] == ["mlx5_2/1", "mlx5_2/2"]
    for block in blocks:
        assert len(block.widths) == 22
        assert set(block.widths.values()) == {64}
        assert block.raw.splitlines()[-1] == "QP1Dropped:......................0"
    assert (
        blocks[1].raw.splitlines()[0]
        == "# Port extended counters: Lid 1719 port 2 (CapMask: 0x5300 CapMask2: 0x0000002)"
    )


def test_watch_header_is_skipped():
    (block,) = parse_perfquery(data(WATCH))
    assert block.raw.splitlines()[0] == "# Port counters: Lid 7 port 1 (CapMask: 0x1400)"
    assert "Every" not in block.raw
    assert block.counters["PortRcvPkts"] == 130792613


@pytest.mark.parametrize("path", sorted(PERFQUERY_FAILS))
def test_perfquery_failures_raise_with_the_reason(path):
    with pytest.raises(ParseError) as caught:
        parse_perfquery(data(path))
    assert caught.value.reason == PERFQUERY_FAILS[path]
    assert "iberror: failed: Failed to open '(null)' port '0'" in caught.value.excerpt


def test_older_header_without_capmask_and_extended_detected_by_field_order():
    # older perfquery printed "# Port counters: <portid> port <n>" for -x too (formats.md section 2)
    text = data(TWO_PORTS).splitlines(keepends=True)
    older = "# Port counters: Lid 1719 port 1\n" + "".join(text[1:11])
    (block,) = parse_perfquery(older)
    assert (block.extended, block.cap_mask, block.cap_mask2, block.lid) == (True, None, None, "1719")
    assert block.counters == {k: PORT1[k] for k in list(PORT1)[:8]}
    assert set(block.widths.values()) == {64}
    assert block.missing == ()  # without CapMask only the 4 data counters are promised
    basic = "# Port counters: Lid 1 port 1\n" + "".join(data(CX4).splitlines(keepends=True)[1:])
    (basic_block,) = parse_perfquery(basic)
    assert (basic_block.extended, basic_block.cap_mask) == (False, None)
    assert basic_block.counters == CX4_COUNTERS


def test_output_cut_mid_value_drops_the_last_line_and_names_what_is_missing():
    cut = data(CX4)[:-3]  # "...PortXmitWait:....4" of 441, no final newline
    (block,) = parse_perfquery(cut)
    assert "PortXmitWait" not in block.counters
    assert block.missing == ("PortXmitWait",)
    assert block.counters["PortRcvPkts"] == 1012
    text = data(TWO_PORTS)
    cut_block = text[: text.index("PortRcvData:", text.index("port 2")) + 8]  # "...\nPortRcvD"
    first, second = parse_perfquery(cut_block)
    assert (first.missing, len(first.counters)) == ((), 22)
    assert second.counters == {"PortXmitData": 26006570014026}
    assert len(second.missing) == 21 and second.missing[:2] == ("PortRcvData", "PortXmitPkts")


def test_a_complete_block_lacking_a_promised_counter_lists_it_missing():
    text = data(NONZERO).replace("PortUnicastRcvPkts:..............387648134400\n", "")
    (block,) = parse_perfquery(text)
    assert block.missing == ("PortUnicastRcvPkts",)
    assert len(block.counters) == 21


@pytest.mark.parametrize(
    "text, reason",
    [
        ("", "empty output"),
        ("Segmentation fault\n", "expected '# Port counters: ...', got 'Segmentation fault'"),
        (
            "PortXmitData:....................1\n",
            "expected '# Port counters: ...', got 'PortXmitData:....................1'",
        ),
        (
            "# PortRcvErrorDetails counters: Lid 1 port 1\nPortLocalPhysicalErrors:.........0\n",
            "'PortRcvErrorDetails counters' block is not PortCounters; run perfquery with or without -x only",
        ),
        (
            "# Port counters: Lid 1 port 1\nSymbolErrorCounter:..............x\n",
            "SymbolErrorCounter value 'x' is not a number",
        ),
        (
            "# Port counters: Lid 1 port 1\nFancyNewCounter:.................3\n",
            "unknown PortCounters field FancyNewCounter",
        ),
        (
            "# Port counters: Lid 1 port 1\nSymbolErrorCounter:..............1\nSymbolErrorCounter:..............2\n",
            "SymbolErrorCounter appears twice in one block",
        ),
        ("# Port counters: Lid 1 port 1\n# Port counters: Lid 1 port 1\n", "counters for Lid 1 port 1 appear twice"),
        (
            "ibwarn: [1] mad_rpc_open_port: something new\n",
            "perfquery failed: ibwarn: [1] mad_rpc_open_port: something new",
        ),
        (
            "# Port counters: Lid 1 port 1\nperfquery: iberror: [pid 7] failed: perfquery\n",
            "perfquery failed: [pid 7] failed: perfquery",
        ),
    ],
)
def test_output_that_is_not_perfquery_counters_raises(text, reason):
    with pytest.raises(ParseError) as caught:
        parse_perfquery(text)
    assert (caught.value.tool, caught.value.reason) == ("perfquery", reason)
    assert caught.value.excerpt.rstrip("\n") in text


def test_basic_and_extended_blocks_of_one_port_may_come_together():
    both = data(CX4) + data(TWO_PORTS).split("# Port extended counters: Lid 1719 port 2")[0].replace(
        "Lid 1719", "Lid 1"
    )
    basic, extended = parse_perfquery(both, ca="mlx5_0")
    assert (basic.extended, extended.extended, basic.port, extended.port) == (False, True, 1, 1)
    assert basic.saturated("SymbolErrorCounter") is False


# -- sysfs ----------------------------------------------------------------------------------------


def _assert_gpud(port: PortCounters) -> None:
    assert (port.ca, port.port, port.lid, port.source) == ("mlx5_1", 1, None, "sysfs")
    assert (port.extended, port.cap_mask, port.missing) == (True, None, ())
    assert list(port.counters.items()) == list(GPUD_COUNTERS.items())
    assert port.widths == GPUD_WIDTHS
    saturated = [name for name in port.counters if port.saturated(name)]
    assert saturated == [
        "PortXmitWait",
        "ExcessiveBufferOverrunErrors",
        "LinkDownedCounter",
        "PortXmitDiscards",
    ]  # 2^32-1, 2^4-1, 2^8-1, 2^16-1


def test_sysfs_dump_gives_the_saturated_gpud_port():
    (port,) = counters_from_sysfs(parse_sysfs_dump(data(GPUD_DUMP)))
    _assert_gpud(port)
    assert port.raw.splitlines()[0] == "/sys/class/infiniband/mlx5_1/ports/1/counters/unicast_rcv_packets\t240037171331"
    assert len(port.raw.splitlines()) == 21


def test_sysfs_unreadable_and_no_pma_values_are_missing_not_zero():
    base = "/sys/class/infiniband/mlx5_0/ports/1/counters/"
    values = {
        base + "symbol_error": "12",
        base + "link_downed": Unreadable("Invalid argument"),
        base + "port_rcv_errors": "N/A (no PMA)",
        base + "port_xmit_data": "4294967295",
        base + "port_xmit_wait": "9",
        base + "some_future_counter": "3",
        "/sys/class/infiniband/mlx5_0/ports/1/hw_counters/out_of_buffer": "5",
        "/sys/class/infiniband/mlx5_0/ports/1/rate": "400 Gb/sec (4X NDR)",
        "/sys/class/infiniband/mlx5_3/ports/1/counters/link_downed": "0",
    }
    first, second = counters_from_sysfs(values)
    assert first.counters == {"SymbolErrorCounter": 12, "PortXmitData": 4294967295, "PortXmitWait": 9}
    assert first.widths == {"SymbolErrorCounter": 16, "PortXmitData": 32, "PortXmitWait": 32}
    assert (first.missing, first.extended) == (("LinkDownedCounter", "PortRcvErrors"), False)
    assert first.saturated("PortXmitData")  # 32-bit group: a data counter stuck at 2^32-1
    assert "link_downed\t!Invalid argument" in first.raw
    assert (second.where, second.counters, second.widths) == (
        "mlx5_3/1",
        {"LinkDownedCounter": 0},
        {"LinkDownedCounter": 8},
    )


def test_sysfs_noietf_group_is_64_bit_once_a_data_value_passes_32_bits():
    base = "/sys/class/infiniband/mlx5_0/ports/1/counters/"
    (port,) = counters_from_sysfs(
        {base + "port_xmit_data": "4294967296", base + "port_rcv_data": "5", base + "port_xmit_wait": "4294967295"}
    )
    assert port.widths == {"PortXmitData": 64, "PortRcvData": 64, "PortXmitWait": 32}
    assert port.extended and port.saturated("PortXmitWait") and not port.saturated("PortRcvData")


def test_sysfs_dump_without_counters_gives_no_ports_and_garbage_raises():
    assert counters_from_sysfs({"/sys/class/infiniband/mlx5_0/ports/1/rate": "400 Gb/sec (4X NDR)"}) == []
    with pytest.raises(ParseError) as caught:
        counters_from_sysfs({"/sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error": "-1"})
    assert caught.value.reason == "symbol_error: '-1' is not a counter value"
