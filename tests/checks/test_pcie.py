"""pcie.acs: the bridges above the GPUs and HCAs judged against the platform's ACS expectation."""

from __future__ import annotations

import pytest

from nodecheck.checks.pcie import PcieAcs, acs
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
    from nodecheck.core.errors import ParseError

    with pytest.raises(ParseError, match=said):
        judge("pcilib: Cannot open /proc/bus/pci\n", rc)
