"""lspci -vvv: device headers (with and without -nn / -D), bridge bus ranges, ACS bits, and the
non-root '<access denied>' capability list, on every recording under tests/data/lspci."""

from __future__ import annotations

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.lspci import ancestors, parse_lspci
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
    assert [(b.address, b.acs_ctl) for b in ancestors(gpu, devices)] == path_above


def test_the_root_port_above_the_first_p100_reads_its_bus_range_capabilities_and_name():
    devices = parse_lspci(data("lspci/cmlgpu-xeon-e5v4-tesla-p100-root-port-acs-disabled.txt"))
    port = next(d for d in devices if d.address == "0000:00:02.0")
    assert (port.secondary, port.subordinate, port.class_code, port.vendor) == (4, 4, "0604", None)
    assert port.acs_cap == CAPABLE and not port.capabilities_denied
    assert port.name.startswith("Intel Corporation Xeon E7 v4/Xeon E5 v4/Xeon E3 v4/Xeon D PCI Express Root Port 2")
    second = next(d for d in devices if d.address == "0000:82:00.0")
    assert second.name == "NVIDIA Corporation GP100GL [Tesla P100 PCIe 12GB] (rev a1)"
    assert [b.address for b in ancestors(second, devices)] == ["0000:80:02.0"]
    # the Renesas switch behind the PCH port: root port first, then the switch ports
    matrox = next(d for d in devices if d.address == "0000:0a:00.0")
    assert [b.address for b in ancestors(matrox, devices)] == [
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
    assert ancestors(hca, (bridge, hca)) == [bridge] and dict(bridge.acs_ctl)["ReqRedir"] is True


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
