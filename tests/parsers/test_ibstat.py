"""parse_ibstat on every copied corpus file, with exact facts per file."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.ibstat import IbstatFacts, parse_ibstat
from tests.helpers import data, data_files

# ibstatus/ and ibstat-p/ hold recordings too, but nodecheck reads ibstat only (issue 32: their parsers,
# which nothing called, were removed); FATAL (ibstatus's "Fatal error:  No devices", exit 255) stays a
# line ibstat's parser must refuse
TOOLS = ("ibstat",)
FATAL = "ibstatus/debian-infiniband-diags-44-no-devices-fatal-exit255.txt"
H100_NDR = "ibstat/gpud-h100-ndr-ib-mixed-cx6dx-ethernet-down-disabled.txt"


@dataclass(frozen=True)
class Expect:
    ports: tuple[tuple, ...]  # (where, state, physical state, rate, link layer, base lid)
    cas: dict[str, tuple]  # name → (ca_type, firmware)
    incomplete: tuple[str, ...] = ()


CX7, CX6DX_38, CX6DX_39 = ("MT4129", "28.39.1002"), ("MT4125", "22.38.1002"), ("MT4125", "22.39.1002")

IBSTAT = {
    "ibstat/cn-notes-cx6-mt4123-ethernet-down-disabled-partial.txt": Expect(
        ports=(("mlx5_1/1", "Down", "Disabled", 200, "Ethernet", 0),), cas={"mlx5_1": ("MT4123", "20.35.2000")}
    ),
    "ibstat/gpud-h100-cx7-roce-12ca-down-polling-disabled.txt": Expect(
        ports=(
            ("mlx5_0/1", "Active", "LinkUp", 400, "Ethernet", 0),
            ("mlx5_1/1", "Active", "LinkUp", 100, "Ethernet", 0),
            ("mlx5_10/1", "Active", "LinkUp", 400, "Ethernet", 0),
            ("mlx5_11/1", "Down", "Polling", 40, "Ethernet", 0),
            ("mlx5_2/1", "Active", "LinkUp", 100, "Ethernet", 0),
            ("mlx5_3/1", "Active", "LinkUp", 400, "Ethernet", 0),
            ("mlx5_4/1", "Active", "LinkUp", 400, "Ethernet", 0),
            ("mlx5_5/1", "Down", "Disabled", 40, "Ethernet", 0),
            ("mlx5_6/1", "Active", "LinkUp", 400, "Ethernet", 0),
            ("mlx5_7/1", "Active", "LinkUp", 100, "Ethernet", 0),
            ("mlx5_8/1", "Active", "LinkUp", 100, "Ethernet", 0),
            ("mlx5_9/1", "Active", "LinkUp", 400, "Ethernet", 0),
        ),
        cas={
            "mlx5_0": CX7,
            "mlx5_1": CX6DX_39,
            "mlx5_10": CX7,
            "mlx5_11": CX7,
            "mlx5_2": CX6DX_39,
            "mlx5_3": CX7,
            "mlx5_4": CX7,
            "mlx5_5": CX7,
            "mlx5_6": CX7,
            "mlx5_7": CX6DX_39,
            "mlx5_8": CX6DX_39,
            "mlx5_9": CX7,
        },
    ),
    H100_NDR: Expect(
        ports=(
            ("mlx5_0/1", "Active", "LinkUp", 400, "InfiniBand", 75),
            ("mlx5_1/1", "Active", "LinkUp", 100, "Ethernet", 0),
            ("mlx5_10/1", "Active", "LinkUp", 400, "InfiniBand", 828),
            ("mlx5_11/1", "Active", "LinkUp", 400, "InfiniBand", 944),
            ("mlx5_2/1", "Down", "Disabled", 40, "Ethernet", 0),
            ("mlx5_3/1", "Active", "LinkUp", 400, "InfiniBand", 143),
            ("mlx5_4/1", "Active", "LinkUp", 400, "InfiniBand", 343),
            ("mlx5_5/1", "Active", "LinkUp", 400, "InfiniBand", 454),
            ("mlx5_6/1", "Active", "LinkUp", 400, "InfiniBand", 597),
            ("mlx5_7/1", "Down", "Disabled", 40, "Ethernet", 0),
            ("mlx5_8/1", "Down", "Disabled", 40, "Ethernet", 0),
            ("mlx5_9/1", "Active", "LinkUp", 400, "InfiniBand", 771),
        ),
        cas={
            "mlx5_0": CX7,
            "mlx5_1": CX6DX_38,
            "mlx5_10": CX7,
            "mlx5_11": CX7,
            "mlx5_2": CX6DX_38,
            "mlx5_3": CX7,
            "mlx5_4": CX7,
            "mlx5_5": CX7,
            "mlx5_6": CX7,
            "mlx5_7": CX6DX_38,
            "mlx5_8": CX6DX_38,
            "mlx5_9": CX7,
        },
    ),
    "ibstat/linux-rdma-ml-mlx4-connectx3-ib-down-polling-eth-disabled.txt": Expect(
        ports=(
            ("mlx4_0/1", "Down", "Polling", 10, "InfiniBand", 0),
            ("mlx4_0/2", "Down", "Disabled", 40, "Ethernet", 0),
        ),
        cas={"mlx4_0": ("MT4099", "2.42.5000")},
    ),
    "ibstat/lustreperfmon-27-cx6-hdr-ib-active-and-disabled-truncated.txt": Expect(
        ports=(
            ("mlx5_4/1", "Active", "LinkUp", 200, "InfiniBand", 90),
            ("mlx5_2/1", "Down", "Disabled", 10, "InfiniBand", 65535),
        ),
        cas={
            "mlx5_4": ("MT4123", "20.26.4012"),
            "mlx5_2": ("MT4123", "20.26.4012"),
            "mlx5_0": ("MT4123", "20.26.4012"),
        },
        incomplete=("mlx5_0: output ends before any port",),
    ),
    "ibstat/network-operator-249-cx6-vf-down-linkup-lid65535.txt": Expect(
        ports=(("mlx5_7/1", "Down", "LinkUp", 200, "InfiniBand", 65535),), cas={"mlx5_7": ("MT4124", "20.28.4000")}
    ),
}
# the derived files are the H100 NDR recording with one edit each (tests/data/SOURCES.md)
IBSTAT["ibstat/derived-h100-ndr-mlx5_3-down-polling.txt"] = Expect(
    ports=tuple(
        ("mlx5_3/1", "Down", "Polling", 400, "InfiniBand", 143) if row[0] == "mlx5_3/1" else row
        for row in IBSTAT[H100_NDR].ports
    ),
    cas=IBSTAT[H100_NDR].cas,
)
IBSTAT["ibstat/derived-h100-ndr-mlx5_5-rate-200.txt"] = Expect(
    ports=tuple(
        ("mlx5_5/1", "Active", "LinkUp", 200, "InfiniBand", 454) if row[0] == "mlx5_5/1" else row
        for row in IBSTAT[H100_NDR].ports
    ),
    cas=IBSTAT[H100_NDR].cas,
)


def _rows(facts: IbstatFacts) -> tuple[tuple, ...]:
    return tuple((p.where, p.state, p.physical_state, p.rate_gbps, p.link_layer, p.base_lid) for p in facts.ports)


def _assert_facts(facts: IbstatFacts, want: Expect) -> None:
    assert len(facts.ports) == len(want.ports) > 0
    assert _rows(facts) == want.ports
    assert facts.ca_names == tuple(want.cas)
    assert {ca.name: (ca.ca_type, ca.firmware) for ca in facts.cas} == want.cas
    for port in facts.ports:  # each port carries its CA's facts and its own lines
        assert (port.ca_type, port.firmware) == want.cas[port.ca]
        assert f"'{port.ca}'" in port.raw.splitlines()[0]
    assert [str(gap) for gap in facts.incomplete] == list(want.incomplete)


# -- every file has an exact expectation, and every corpus file has a copy here ------------------


def test_every_data_file_has_an_expectation():
    on_disk = {path for tool in TOOLS for path in data_files(tool)}
    assert on_disk == set(IBSTAT)
    assert len(on_disk) == 8


def test_every_data_file_has_a_source_line():
    sources = data("SOURCES.md")
    files = [path for tool in TOOLS for path in data_files(tool)] + [FATAL]
    assert all(f"- `{path}` - " in sources for path in files)


# -- exact facts per file -------------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(IBSTAT))
def test_ibstat_file_gives_exact_facts(path):
    _assert_facts(parse_ibstat(data(path)), IBSTAT[path])


def test_h100_ndr_port_and_ca_details():
    facts = parse_ibstat(data(H100_NDR))
    ca, port = facts.cas[0], facts.ports[0]
    assert (ca.node_type, ca.declared_ports, ca.hardware_version) == ("CA", 1, "0")
    assert (ca.node_guid, ca.system_guid) == ("0x946dae0300cde72c", "0x946dae0300cde72c")
    assert (port.sm_lid, port.lmc, port.capability_mask) == (334, 0, "0xa751e848")
    assert port.port_guid == "0x946dae0300cde72c"
    assert port.raw.splitlines() == [
        "CA 'mlx5_0'",
        "\tPort 1:",
        "\t\tState: Active",
        "\t\tPhysical state: LinkUp",
        "\t\tRate: 400",
        "\t\tBase lid: 75",
        "\t\tLMC: 0",
        "\t\tSM lid: 334",
        "\t\tCapability mask: 0xa751e848",
        "\t\tPort GUID: 0x946dae0300cde72c",
        "\t\tLink layer: InfiniBand",
    ]


def test_truncated_lustreperfmon_gap_carries_the_cut_lines():
    facts = parse_ibstat(data("ibstat/lustreperfmon-27-cx6-hdr-ib-active-and-disabled-truncated.txt"))
    (gap,) = facts.incomplete
    assert (gap.subject, gap.reason) == ("mlx5_0", "output ends before any port")
    assert gap.raw.splitlines()[0] == "CA 'mlx5_0'"
    assert gap.raw.splitlines()[-1] == "\tNode GUID: 0x0c42a1030017c090"
    assert facts.cas[2].declared_ports == 1


# -- output that is not ibstat's: ParseError with an excerpt ---------------------------------------

NOT_OUTPUT = {
    "blank lines": "\n \n\t\n",
    "prose": "the quick brown fox\njumps over\n",
    "binary junk": "\x00\x01\xff\ufffd\n\x7f",
    "a lone colon line": "key: value\n",
    "half a header": "CA 'mlx5_",
}


@pytest.mark.parametrize("name", sorted(NOT_OUTPUT))
def test_non_output_raises_parse_error(name):
    with pytest.raises(ParseError) as caught:
        parse_ibstat(NOT_OUTPUT[name])
    assert caught.value.excerpt == NOT_OUTPUT[name]


def test_no_devices_fatal_error_raises_parse_error():
    with pytest.raises(ParseError) as caught:
        parse_ibstat(data(FATAL))
    assert "'Fatal error:  No devices'" in caught.value.reason
    assert caught.value.excerpt == "Fatal error:  No devices\n"


def test_ibstatus_output_is_refused():
    with pytest.raises(ParseError, match="CA 'name'"):
        parse_ibstat(data("ibstatus/ml2014-mlx4-fdr-dualport-ib.txt"))


def test_garbage_line_inside_a_port_raises_parse_error():
    text = data(H100_NDR).replace("\t\tLMC: 0\n", "\t\t#### ???\n", 1)
    with pytest.raises(ParseError, match="unexpected line '#### \\?\\?\\?'"):
        parse_ibstat(text)


def test_two_outputs_run_together_raise_parse_error():
    with pytest.raises(ParseError, match="CA 'mlx5_0' appears twice"):
        parse_ibstat(data(H100_NDR) + "\n" + data(H100_NDR))


def test_huge_garbage_gives_a_bounded_reason_and_excerpt():
    with pytest.raises(ParseError) as caught:
        parse_ibstat("x" * 100_000)
    assert caught.value.reason.endswith("… (100000 characters)")
    assert len(caught.value.reason) < 150
    assert len(caught.value.excerpt) < 2100


# -- cut-off output: the complete ports plus what is missing, never a default -----------------------


def _cut_after(text: str, line: str) -> str:
    """The text up to and including the first line that ends with `line`."""
    end = text.index(line) + len(line)
    return text[:end]


def test_port_cut_before_its_state_lines_is_incomplete():
    facts = parse_ibstat(
        _cut_after(
            data(H100_NDR),
            "CA 'mlx5_10'\n\tCA type: MT4129\n\tNumber of ports: 1\n"
            "\tFirmware version: 28.39.1002\n\tHardware version: 0\n"
            "\tNode GUID: 0x946dae0300cde884\n"
            "\tSystem image GUID: 0x946dae0300cde884\n\tPort 1:\n",
        )
    )
    assert [p.where for p in facts.ports] == ["mlx5_0/1", "mlx5_1/1"]
    assert [str(g) for g in facts.incomplete] == [
        "mlx5_10/1: port block has no State, Physical state, Rate, Link layer line"
    ]


def test_port_cut_inside_its_link_layer_value_is_incomplete():
    text = data(H100_NDR)
    facts = parse_ibstat(text[: text.index("InfiniBand", text.index("CA 'mlx5_10'")) + len("Infini")])
    assert len(facts.ports) == 2
    assert [str(g) for g in facts.incomplete] == ["mlx5_10/1: Link layer 'Infini' is not InfiniBand or Ethernet"]


def test_two_port_ca_cut_after_one_port_is_incomplete():
    text = data("ibstat/linux-rdma-ml-mlx4-connectx3-ib-down-polling-eth-disabled.txt")
    facts = parse_ibstat(text[: text.index("        Port 2:")])  # space-indented as stored
    assert [p.where for p in facts.ports] == ["mlx4_0/1"]
    assert [str(g) for g in facts.incomplete] == ["mlx4_0: output ends after 1 of 2 ports"]


def test_cut_inside_a_header_line_is_recorded():
    text = data(H100_NDR)
    facts = parse_ibstat(text[: text.index("CA 'mlx5_10'") + len("CA 'mlx")])
    assert len(facts.ports) == 2
    assert [str(g) for g in facts.incomplete] == ['output ends mid-line: "CA \'mlx"']


@pytest.mark.parametrize("path", sorted(IBSTAT))
def test_every_prefix_gives_true_ports_or_parse_error(path):
    """Cut a recording at every character: what is reported is exactly what the whole output says."""
    text = data(path)
    whole = {port.where: port for port in parse_ibstat(text).ports}
    judged = 0
    # from 1: nothing at all is "no device" (issue 17), which only an exit 0 makes true; a cut
    # capture ends by a timeout or a signal, which the runner reports before any judge reads it
    for end in range(1, len(text)):
        try:
            facts = parse_ibstat(text[:end])
        except ParseError:
            continue
        assert all(whole[port.where] == port for port in facts.ports), end
        lost = set(whole) - {port.where for port in facts.ports}
        cut_at_line_end = text[:end].endswith(("\n", "InfiniBand", "Ethernet"))
        assert facts.incomplete or not lost or cut_at_line_end, end  # a lost port is never silent mid-line
        judged += 1
    assert judged > len(text) * 0.9


# -- values ibstat prints that the corpus does not show (edits of a recording) ----------------------


def test_rate_spellings_and_old_link_layer_word():
    """ibstat.c prints "2.5" for 1x SDR and "<n> (FDR10)" for FDR10; libibumad prints "IB" when sysfs
    has no link_layer file."""
    text = data("ibstat/network-operator-249-cx6-vf-down-linkup-lid65535.txt")
    for printed, rate in (("2.5", 2.5), ("40 (FDR10)", 40.0)):
        (port,) = parse_ibstat(text.replace("Rate: 200", f"Rate: {printed}")).ports
        assert port.rate_gbps == rate
    (port,) = parse_ibstat(text.replace("Link layer: InfiniBand", "Link layer: IB")).ports
    assert port.link_layer == "InfiniBand"


def test_unreadable_rate_makes_the_port_incomplete():
    text = data("ibstat/network-operator-249-cx6-vf-down-linkup-lid65535.txt")
    facts = parse_ibstat(text.replace("Rate: 200", "Rate: fast"))
    assert facts.ca_names == ("mlx5_7",)
    assert facts.ports == ()
    assert [str(g) for g in facts.incomplete] == ["mlx5_7/1: Rate 'fast' is not a rate"]


def test_switch_header_is_read_as_a_node():
    text = data("ibstat/network-operator-249-cx6-vf-down-linkup-lid65535.txt")
    text = text.replace("CA 'mlx5_7'", "Switch 'sw1'").replace("CA type:", "Switch type:")
    facts = parse_ibstat(text)
    assert [(ca.name, ca.node_type, ca.ca_type) for ca in facts.cas] == [("sw1", "Switch", "MT4124")]
    assert [p.where for p in facts.ports] == ["sw1/1"]


# -- issue 17: no RDMA device at all ------------------------------------------------------------------


def test_nothing_printed_is_no_device_not_a_parse_error():
    # Debian 12's ibstat with the driver unloaded (no /sys/class/infiniband/*) prints nothing and
    # exits 0. Whether exit 0 came with it is the judge's to check.
    facts = parse_ibstat("")
    assert facts == IbstatFacts((), (), ())
    assert facts.no_devices


def test_a_device_list_is_not_no_devices():
    assert not parse_ibstat(data(H100_NDR)).no_devices


@pytest.mark.parametrize("breaker", ["\x0c", "\x1c", "\x85", "\u2028"], ids=ascii)
def test_a_splitlines_break_inside_a_field_line_stays_in_that_line(breaker):
    # str.splitlines would cut "Firmware version: 28.39\x1c1002" in two: a line without a key
    text = data(H100_NDR).replace("Firmware version: ", f"Firmware version: x{breaker}", 1)
    facts = parse_ibstat(text)
    assert facts.cas[0].firmware == f"x{breaker}28.39.1002"
