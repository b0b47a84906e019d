"""lspci -vvv: device headers (with and without -nn / -D), bridge bus ranges, ACS bits, and the
non-root '<access denied>' capability list, on every recording under tests/data/lspci."""

from __future__ import annotations

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.lspci import PciTree, parse_lspci
from tests.growth import assert_linear
from tests.helpers import data, data_files

OFF = (
    ("SrcValid", False),
    ("TransBlk", False),
    ("ReqRedir", False),
    ("CmpltRedir", False),
    ("UpstreamFwd", False),
    ("EgressCtrl", False),
    ("DirectTrans", False),
)
CAPABLE = tuple((flag, flag not in ("EgressCtrl", "DirectTrans")) for flag, _ in OFF)

# per file: (devices, the GPU's address, its class code and vendor, the bridges above it with their ACSCtl)
EXPECTED = {
    "lspci/cmlgpu-xeon-e5v4-tesla-p100-root-port-acs-disabled.txt": (
        201,
        "0000:04:00.0",
        ("0302", "10de"),
        [("0000:00:02.0", OFF)],
    ),
    "lspci/derived-cmlgpu-tesla-p100-acs-enabled-on-root-port-00-02-0.txt": (
        201,
        "0000:04:00.0",
        ("0302", "10de"),
        [
            (
                "0000:00:02.0",
                (
                    ("SrcValid", True),
                    ("TransBlk", False),
                    ("ReqRedir", True),
                    ("CmpltRedir", True),
                    ("UpstreamFwd", True),
                    ("EgressCtrl", False),
                    ("DirectTrans", False),
                ),
            )
        ],
    ),
    "lspci/derived-cmlgpu-tesla-p100-not-root-capabilities-access-denied.txt": (
        201,
        "0000:04:00.0",
        ("0302", "10de"),
        [("0000:00:02.0", None)],
    ),
    "lspci/m11x-alienware-gt335m-peg-port-no-acs-vvvnnxxx.txt": (
        23,
        "0000:01:00.0",
        ("0300", "10de"),
        [("0000:00:01.0", None)],
    ),
}


@pytest.mark.parametrize("path", data_files("lspci"))
def test_every_recording_parses_to_its_gpu_and_the_bridges_above_it(path):
    count, gpu_address, (code, vendor), path_above = EXPECTED[path]
    devices = parse_lspci(data(path))
    assert len(devices) == count
    [gpu] = [d for d in devices if d.address == gpu_address]
    assert (gpu.class_code, gpu.vendor) == (code, vendor)
    assert [(b.address, b.acs_ctl) for b in PciTree(devices).above(gpu)] == path_above


def test_the_root_port_above_the_first_p100_reads_its_bus_range_capabilities_and_name():
    devices = parse_lspci(data("lspci/cmlgpu-xeon-e5v4-tesla-p100-root-port-acs-disabled.txt"))
    port = next(d for d in devices if d.address == "0000:00:02.0")
    assert (port.secondary, port.subordinate, port.class_code, port.vendor) == (4, 4, "0604", None)
    assert port.acs_cap == CAPABLE and not port.capabilities_denied
    assert port.name.startswith("Intel Corporation Xeon E7 v4/Xeon E5 v4/Xeon E3 v4/Xeon D PCI Express Root Port 2")
    second = next(d for d in devices if d.address == "0000:82:00.0")
    assert second.name == "NVIDIA Corporation GP100GL [Tesla P100 PCIe 12GB] (rev a1)"
    tree = PciTree(devices)
    assert [b.address for b in tree.above(second)] == ["0000:80:02.0"]
    # the Renesas switch behind the PCH port: root port first, then the switch ports
    matrox = next(d for d in devices if d.address == "0000:0a:00.0")
    assert [b.address for b in tree.above(matrox)] == [
        "0000:00:1c.7",
        "0000:07:00.0",
        "0000:08:00.0",
        "0000:09:00.0",
    ]


def test_without_root_the_capability_list_is_denied_but_the_bus_range_is_there():
    devices = parse_lspci(data("lspci/derived-cmlgpu-tesla-p100-not-root-capabilities-access-denied.txt"))
    port = next(d for d in devices if d.address == "0000:00:02.0")
    assert port.capabilities_denied and (port.secondary, port.subordinate) == (4, 4) and port.acs_cap is None


def test_with_nn_the_codes_come_from_the_brackets_and_hex_dump_lines_are_skipped():
    devices = parse_lspci(data("lspci/m11x-alienware-gt335m-peg-port-no-acs-vvvnnxxx.txt"))
    gpu = next(d for d in devices if d.address == "0000:01:00.0")
    assert gpu.class_name == "VGA compatible controller" and gpu.name.startswith("NVIDIA Corporation GT215M")
    audio = next(d for d in devices if d.address == "0000:01:00.1")
    assert (audio.class_code, audio.vendor) == ("0403", "10de")


def test_a_domain_and_libpci_notices_are_read():
    text = (
        "lspci: Unable to load libkmod resources: error -2\n"
        "0001:c0:01.0 PCI bridge [0604]: Broadcom / LSI PEX890xx PCIe Gen 5 Switch [1000:c030] (rev b0)\n"
        "\tBus: primary=c0, secondary=c1, subordinate=c1, sec-latency=0\n"
        "\tCapabilities: [140 v1] Access Control Services\n"
        "\t\tACSCap:\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans+\n"
        "\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-\n"
        "\n"
        "0001:c1:00.0 Infiniband controller [0207]: Mellanox Technologies MT2910 Family [ConnectX-7] [15b3:1021]\n"
    )
    bridge, hca = parse_lspci(text)
    assert hca.address == "0001:c1:00.0" and (hca.class_code, hca.vendor) == ("0207", "15b3")
    assert PciTree((bridge, hca)).above(hca) == [bridge] and dict(bridge.acs_ctl)["ReqRedir"] is True


@pytest.mark.parametrize(
    "text, said",
    [
        ("", "no PCI device"),
        ("\tBus: primary=00, secondary=01, subordinate=01\n", "details before any device header"),
        ("<html>502 Bad Gateway</html>\n", "not an lspci device line"),
        ("00:01.0 PCI bridge: X\n\t\tACSCtl:\tgarbage\n", "unreadable ACSCtl line"),
    ],
)
def test_garbage_is_a_parse_error(text, said):
    with pytest.raises(ParseError, match=said):
        parse_lspci(text)


# --- lost or contradictory evidence is refused (issue 32, 3.1) ---------------------------------------

ROOT_PORT = (
    "0000:00:02.0 PCI bridge [0604]: Intel Corporation Xeon E7 v4/Xeon E5 v4/Xeon E3 v4/Xeon D PCI Express "
    "Root Port 2 [8086:6f06] (rev 01)\n"
    "\tBus: primary=00, secondary=04, subordinate=04, sec-latency=0\n"
    "\tCapabilities: [110 v1] Access Control Services\n"
    "\t\tACSCap:\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-\n"
    "\t\tACSCtl:\tSrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-\n"
)
HOST = "0000:00:00.0 Host bridge [0600]: Intel Corporation Xeon E7 v4/Xeon E5 v4/Xeon E3 v4/Xeon D DMI2 [8086:6f00]\n"
GPU = "0000:04:00.0 3D controller [0302]: NVIDIA Corporation GP100GL [Tesla P100 PCIe 12GB] [10de:15f8] (rev a1)\n"


def gpu_path(text: str) -> list[str]:
    devices = parse_lspci(text)
    [gpu] = [d for d in devices if d.vendor == "10de"]
    return [b.address for b in PciTree(devices).above(gpu)]


def test_the_acs_capability_is_recorded_even_when_its_bits_are_missing():
    [port] = parse_lspci(ROOT_PORT.replace(ROOT_PORT.splitlines(keepends=True)[-1], ""))
    assert port.acs_listed and port.acs_cap is not None and port.acs_ctl is None
    [plain] = parse_lspci(GPU)
    assert not plain.acs_listed


def test_a_device_listed_twice_is_a_parse_error():
    with pytest.raises(ParseError, match=r"0000:04:00\.0 is listed twice"):
        parse_lspci(HOST + ROOT_PORT + GPU + GPU.replace("3D controller", "VGA compatible controller"))


def test_the_path_above_a_gpu_is_read_through_the_bus_numbers():
    assert gpu_path(HOST + ROOT_PORT + GPU) == ["0000:00:02.0"]
    assert gpu_path(HOST + GPU.replace("0000:04:00.0", "0000:00:05.0")) == []  # on the root bus, beside its host bridge


@pytest.mark.parametrize(
    "text, said",
    [
        (
            HOST + ROOT_PORT.replace("\tBus: primary=00, secondary=04, subordinate=04, sec-latency=0\n", "") + GPU,
            "PCI bridge 0000:00:02.0 has no 'Bus:' line",
        ),
        (GPU, "0000:04:00.0 has no bridge above it and bus 04 holds no host bridge or PCI bridge"),
        (
            HOST + ROOT_PORT + ROOT_PORT.replace("00:02.0", "00:03.0") + GPU,
            "0000:00:02.0 and 0000:00:03.0 both forward to bus 04",
        ),
        # the switch below the root port lost: bus 05 is in the root port's range, but no bridge forwards to it
        (
            HOST + ROOT_PORT.replace("subordinate=04", "subordinate=05") + GPU.replace(":04:", ":05:"),
            "bus 05 is behind 0000:00:02.0 .*but no bridge in the listing forwards to it",
        ),
        # a bridge whose range does not hold the bus of the one below it
        (
            HOST + ROOT_PORT + "0000:04:00.0 PCI bridge [0604]: PLX Technology, Inc. PEX 8747 [10b5:8747]\n"
            "\tBus: primary=04, secondary=06, subordinate=06, sec-latency=0\n" + GPU.replace(":04:", ":06:"),
            "bus 06 is outside the range 04-04 of 0000:00:02.0",
        ),
    ],
)
def test_a_topology_that_lost_or_contradicts_a_bridge_is_a_parse_error(text, said):
    with pytest.raises(ParseError, match=said):
        gpu_path(text)


@pytest.mark.growth
def test_the_paths_of_thousands_of_gpus_take_linear_time_at_1_mb():
    # one root port and one GPU per PCI domain: the ancestry scan looked at every device for every GPU
    # (1 MB: 19 s); 4n is 1 MB
    pair = ROOT_PORT.splitlines(keepends=True)[:2] + [GPU]
    listing = lambda n: "".join(line.replace("0000:", f"{i:08x}:", 1) for i in range(n) for line in pair)  # noqa: E731
    n = 1_000_000 // len(listing(1)) // 4
    assert len(listing(4 * n)) > 950_000

    def every_path(text: str) -> int:
        devices = parse_lspci(text)
        tree = PciTree(devices)
        return sum(len(tree.above(d)) for d in devices if d.vendor == "10de")

    assert every_path(listing(4 * n)) == 4 * n
    assert_linear(every_path, listing, n)


@pytest.mark.growth
def test_a_long_acs_line_is_read_in_linear_time():
    line = lambda n: "00:01.0 PCI bridge: X\n\t\tACSCtl:\t" + "SrcValid" * n + "\n"  # noqa: E731
    assert_linear(parse_lspci, line, 1_000, ignore=ParseError)  # findall: 0.4 s at 8 KB, 6.4 s at 32 KB
