"""pcie.acs: the bridges above the GPUs and HCAs judged against the platform's ACS expectation."""

from __future__ import annotations

import pytest

from nodecheck.checks.pcie import PcieAcs, acs
from nodecheck.core.errors import ParseError
from nodecheck.core.model import Status
from nodecheck.probes.pcie import LSPCI
from tests.helpers import captures, data

HEALTHY = "lspci/cmlgpu-xeon-e5v4-tesla-p100-root-port-acs-disabled.txt"
FAULT = "lspci/derived-cmlgpu-tesla-p100-acs-enabled-on-root-port-00-02-0.txt"
NOT_ROOT = "lspci/derived-cmlgpu-tesla-p100-not-root-capabilities-access-denied.txt"
NO_ACS_CAP = "lspci/m11x-alienware-gt335m-peg-port-no-acs-vvvnnxxx.txt"


def probe_output(text: str, rc: int | None = 0) -> str:
    end = "" if rc is None else f"@@nodecheck end lspci rc={rc}\n"
    return f"@@nodecheck begin lspci\n{text}{'' if text.endswith(chr(10)) else chr(10)}{end}"


def judge(path_or_text: str, rc: int | None = 0, **params) -> list:
    text = data(path_or_text) if path_or_text.startswith("lspci/") else path_or_text
    return list(acs(captures(LSPCI, probe_output(text, rc)), PcieAcs(**params)))


def test_acs_off_above_both_p100s_passes():
    [v] = judge(HEALTHY)
    assert v.status is Status.PASS
    assert v.message == "ACS disabled on the 2 bridge(s) above 2 GPU(s)"
    assert v.observed["bridges"] == ["0000:00:02.0", "0000:80:02.0"]


def test_acs_on_the_root_port_above_one_gpu_fails_naming_bridge_gpu_and_flags():
    [v] = judge(FAULT)
    assert v.status is Status.FAIL and v.subject == "0000:00:02.0"
    assert v.message.startswith("0000:00:02.0 (Intel Corporation Xeon E7 v4/Xeon E5 v4/Xeon E3 v4/Xeon D PCI Express")
    assert "above GPU 0000:04:00.0: ACSCtl SrcValid+ ReqRedir+ CmpltRedir+, expected ACS disabled" in v.message
    assert v.observed["acsctl"] == "SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"
    assert "ACSCtl:\tSrcValid+" in v.excerpt


def test_a_vm_host_expects_acs_on_and_fails_where_it_is_off():
    verdicts = judge(HEALTHY, expect="enabled")
    assert {v.subject for v in verdicts} == {"0000:00:02.0", "0000:80:02.0"}
    assert all(v.status is Status.FAIL for v in verdicts)
    assert "ACSCtl SrcValid- ReqRedir- CmpltRedir-, expected ACS enabled" in verdicts[0].message
    [only_one] = judge(FAULT, expect="enabled")
    assert only_one.subject == "0000:80:02.0"


def test_without_root_it_is_an_error_never_a_pass():
    [v] = judge(NOT_ROOT)
    assert v.status is Status.ERROR and v.message.endswith("('Capabilities: <access denied>'): run nodecheck as root")
    assert v.observed["access_denied"] == ["0000:00:02.0", "0000:80:02.0"]


def test_a_bridge_without_an_acs_capability_passes_disabled_and_warns_enabled():
    [v] = judge(NO_ACS_CAP)
    assert v.status is Status.PASS and v.message.endswith("above 1 GPU(s) (1 without an ACS capability)")
    [w] = judge(NO_ACS_CAP, expect="enabled")
    assert w.status is Status.WARN and "no ACS capability, expected ACS enabled" in w.message


def test_no_gpu_or_hca_is_an_error():
    [v] = judge(HEALTHY, devices="hca")
    assert v.status is Status.ERROR and v.message.startswith("no HCA (15b3, class 0207/0200) in lspci")


def test_an_hca_below_a_switch_with_acs_on_fails_at_each_port():
    text = (
        "0000:00:01.1 PCI bridge [0604]: Advanced Micro Devices, Inc. [AMD] Starship/Matisse GPP Bridge [1022:1483]\n"
        "\tBus: primary=00, secondary=43, subordinate=45, sec-latency=0\n"
        "\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-\n"
        "0000:43:00.0 PCI bridge [0604]: PMC-Sierra Inc. Device [11f8:4128]\n"
        "\tBus: primary=43, secondary=44, subordinate=45, sec-latency=0\n"
        "0000:44:00.0 PCI bridge [0604]: PMC-Sierra Inc. Device [11f8:4128]\n"
        "\tBus: primary=44, secondary=45, subordinate=45, sec-latency=0\n"
        "\t\tACSCtl:\tSrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-\n"
        "0000:45:00.0 Infiniband controller [0207]: Mellanox Technologies MT28908 Family [ConnectX-6] [15b3:101b]\n"
    )
    [v] = judge(text)
    assert v.status is Status.FAIL and v.subject == "0000:00:01.1" and "above HCA 0000:45:00.0" in v.message


@pytest.mark.parametrize(
    "rc, said", [(None, "output cut off"), (1, "lspci exited 1: pcilib: Cannot open /proc/bus/pci")]
)
def test_a_cut_or_failed_lspci_is_an_error_by_parse_error(rc, said):
    with pytest.raises(ParseError, match=said):
        judge("pcilib: Cannot open /proc/bus/pci\n", rc)


# --- lost evidence is never a pass (issue 32, 3.1) --------------------------------------------------


def healthy_without(line: str, count: int = 1) -> str:
    """The healthy recording with `line` (a whole line, tab included) removed `count` times."""
    text = data(HEALTHY)
    assert text.count(line + "\n") >= count, line
    return text.replace(line + "\n", "", count)


def test_a_root_port_that_lost_its_bus_line_is_an_error_not_a_gpu_on_a_root_bus():
    # without it, GPU 04:00.0 looked as if it sat on a root bus: "1 with no bridge above" -> PASS
    text = healthy_without("\tBus: primary=00, secondary=04, subordinate=04, sec-latency=0")
    with pytest.raises(ParseError, match=r"PCI bridge 0000:00:02\.0 has no 'Bus:' line"):
        judge(text)


def test_an_acscap_without_its_acsctl_is_an_error_not_no_acs_capability():
    acsctl = "\t\tACSCtl:\tSrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-\n"
    text = data(HEALTHY)
    at = text.index(acsctl, text.index("\n00:02.0 PCI bridge"))  # the root port above GPU 04:00.0
    [v] = judge(text[:at] + text[at + len(acsctl) :])
    assert v.status is Status.ERROR and v.subject == "0000:00:02.0"
    assert "lists Access Control Services but no ACSCtl line" in v.message


def test_an_acs_capability_header_without_its_bits_is_an_error():
    # `lspci -v` (one v) prints the capability's name only; the probe asks for -vvv
    text = data(HEALTHY)
    start = text.index("\n00:02.0 PCI bridge")
    for bits in ("\t\tACSCap:", "\t\tACSCtl:"):
        at = text.index(bits, start)
        text = text[:at] + text[text.index("\n", at) + 1 :]
    [v] = judge(text)
    assert v.status is Status.ERROR and "0000:00:02.0" in v.message


def test_a_device_listed_twice_is_refused():
    gpu = "04:00.0 3D controller: NVIDIA Corporation GP100GL [Tesla P100 PCIe 12GB] (rev a1)\n"
    with pytest.raises(ParseError, match=r"0000:04:00\.0 is listed twice"):
        judge(data(HEALTHY) + gpu)


def test_a_listing_cut_to_one_gpu_line_is_an_error_not_a_vacuous_pass():
    # was PASS "ACS disabled on the 0 bridge(s) above 1 GPU(s); 1 with no bridge above"
    with pytest.raises(ParseError, match=r"GPU 0000:04:00.0 .*no bridge above it and bus 04 holds no host bridge"):
        judge("04:00.0 3D controller: NVIDIA Corporation GP100GL [Tesla P100 PCIe 12GB] (rev a1)\n")


def test_a_gpu_on_a_root_bus_next_to_its_host_bridge_is_not_judged_never_passed():
    # a VM guest's GPU on bus 00 (i440fx/q35): no bridge, so no ACS to judge: SKIPPED, not "ACS disabled on 0"
    text = (
        "00:00.0 Host bridge [0600]: Intel Corporation 440FX - 82441FX PMC [Natoma] [8086:1237] (rev 02)\n"
        "\tSubsystem: Red Hat, Inc. Qemu virtual machine [1af4:1100]\n"
        "00:05.0 3D controller [0302]: NVIDIA Corporation GA100 [A100 PCIe 40GB] [10de:20f1] (rev a1)\n"
        "\tSubsystem: NVIDIA Corporation Device [10de:145f]\n"
    )
    [v] = judge(text)
    assert v.status is Status.SKIPPED
    assert v.message == "no PCIe bridge above GPU 0000:00:05.0 (on a root bus): ACS not judged"
    # a VM host wants ACS on: nothing isolates the GPU, a WARN, without a vacuous "ACS enabled on 0 bridges"
    [w] = judge(text, expect="enabled")
    assert (w.status, w.message) == (
        Status.WARN,
        "GPU 0000:00:05.0: no PCIe bridge above (on a root bus): no ACS isolates them",
    )
