"""kernel.version, os.release, ofed.version, nccl.version, nccl.settings and hca.firmware: each value
reader through its fleet judge (spec.judge({node: captures}, params)), on the versions probe's
sections (VERSIONS_SCRIPT) and on ibstat corpus output. Exact groups, statuses and messages."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from nodecheck.checks import all_checks
from nodecheck.checks.ib import IBSTAT
from nodecheck.core.model import Probe, Status
from nodecheck.judging.drift import PinOrDrift
from nodecheck.probes.versions import VERSIONS, VERSIONS_SCRIPT
from tests.helpers import captures, data

# NVIDIA/nccl#1991's ldconfig line and the probe's readlink target for it
from tests.parsers.test_versions import DEB, DEB_TARGET

PASS, WARN, FAIL, ERROR = Status.PASS, Status.WARN, Status.FAIL, Status.ERROR
OFED = data("scenarios/ofed_info-s-mlnx-23.07.txt")  # "MLNX_OFED_LINUX-23.07-0.5.1.2:"
# constructed: /etc/os-release of Ubuntu 22.04.4 (shape as the distribution ships it)
OS_RELEASE = (
    'PRETTY_NAME="Ubuntu 22.04.4 LTS"\nNAME="Ubuntu"\nVERSION_ID="22.04"\n'
    'VERSION="22.04.4 LTS (Jammy Jellyfish)"\nID=ubuntu\nID_LIKE=debian\n'
)
LIBS = f"{DEB} -> {DEB_TARGET}\n"  # NCCL 2.29.2
# vllm-project/vllm#4312: a second NCCL in the cache ahead of the system one
VLLM = (
    "\tlibnccl.so.2 (libc6,x86-64) => /root/.config/vllm/nccl/cu12/libnccl.so.2 -> "
    "/root/.config/vllm/nccl/cu12/libnccl.so.2.18.1\n"
)
# vllm-project/vllm#3661: the pip wheel's single, unversioned file
PIP = "/usr/local/lib/python3.10/dist-packages/nvidia/nccl/lib/libnccl.so.2"
HCA = "ibstat/gpud-h100-ndr-ib-mixed-cx6dx-ethernet-down-disabled.txt"
NODES = ("node1", "node2", "node3")


def section(name: str, body: str, rc: int = 0) -> str:
    return f"@@nodecheck begin {name}\n{body}@@nodecheck end {name} rc={rc}\n"


def versions_out(
    kernel: str = "5.15.0-112-generic\n",
    os_release: str = OS_RELEASE,
    ofed: str | None = OFED,
    rdma: tuple[str, int] = ("", 1),
    libs: str = LIBS,
    header: tuple[str, int] = ("", 1),
    conf: str | None = None,
    env: str = "",
) -> str:
    """The versions probe's stdout, section by section as VERSIONS_SCRIPT prints them (ofed and
    nccl-conf only where ofed_info / a readable /etc/nccl.conf exist)."""
    text = section("kernel", kernel) + section("os-release", os_release)
    if ofed is not None:
        text += section("ofed", ofed)
    text += section("rdma-core", *rdma) + section("nccl-libs", libs) + section("nccl-header", *header)
    if conf is not None:
        text += section("nccl-conf", conf)
    return text + section("nccl-env", env)


def fleet(name: str, outputs, probe: Probe = VERSIONS, **params):
    """(nodes, status, message) per group from the check's fleet judge."""
    spec = all_checks()[name]
    by_node = {node: captures(probe, text, node=node) for node, text in zip(NODES, outputs)}
    return [(nodes, v.status, v.message) for nodes, v in spec.judge(by_node, spec.params.model_validate(params))]


# -- every reader: all agree, one differs -------------------------------------------------------------

AGREE = {
    "kernel.version": (versions_out(), "kernel 5.15.0-112-generic"),
    "os.release": (versions_out(), "OS Ubuntu 22.04.4 LTS"),
    "ofed.version": (versions_out(), "OFED MLNX_OFED_LINUX-23.07-0.5.1.2"),
    "nccl.version": (versions_out(), "NCCL 2.29.2"),
    "nccl.settings": (
        versions_out(conf="NCCL_IB_HCA=mlx5\nNCCL_SOCKET_IFNAME=eth0\n"),
        "NCCL settings NCCL_IB_HCA=mlx5; NCCL_SOCKET_IFNAME=eth0; net plugin none",
    ),
}


@pytest.mark.parametrize("name", AGREE)
def test_three_nodes_agree_pass_as_one_group(name):
    text, value = AGREE[name]
    assert fleet(name, [text] * 3) == [(NODES, PASS, f"{value} (all 3 nodes agree)")]


def test_hca_firmware_per_adapter_type_from_ibstat():
    text = data(HCA)
    assert fleet("hca.firmware", [text] * 3, probe=IBSTAT) == [
        (NODES, PASS, "HCA firmware MT4125 22.38.1002, MT4129 28.39.1002 (all 3 nodes agree)")
    ]
    older = text.replace("28.39.1002", "28.37.1014")
    assert fleet("hca.firmware", [text, older, text], probe=IBSTAT) == [
        (("node1", "node3"), PASS, "HCA firmware MT4125 22.38.1002, MT4129 28.39.1002 (majority: 2 of 3 nodes)"),
        (
            ("node2",),
            FAIL,
            "HCA firmware MT4125 22.38.1002, MT4129 28.37.1014 on node2, expected "
            "MT4125 22.38.1002, MT4129 28.39.1002 (2 nodes)",
        ),
    ]


DIFFERS = {
    "kernel.version": (
        versions_out(kernel="5.15.0-113-generic\n"),
        "kernel 5.15.0-113-generic on node2, expected 5.15.0-112-generic (2 nodes)",
    ),
    "os.release": (
        versions_out(os_release=OS_RELEASE.replace("22.04.4", "22.04.5")),
        "OS Ubuntu 22.04.5 LTS on node2, expected Ubuntu 22.04.4 LTS (2 nodes)",
    ),
    "ofed.version": (
        versions_out(ofed="MLNX_OFED_LINUX-23.10-1.1.9.0:\n"),
        "OFED MLNX_OFED_LINUX-23.10-1.1.9.0 on node2, expected MLNX_OFED_LINUX-23.07-0.5.1.2 (2 nodes)",
    ),
    "nccl.version": (
        versions_out(libs=LIBS.replace("2.29.2", "2.21.5")),
        "NCCL 2.21.5 on node2, expected 2.29.2 (2 nodes)",
    ),
}


@pytest.mark.parametrize("name", DIFFERS)
def test_one_node_differs_fails_alone(name):
    odd, message = DIFFERS[name]
    reference = AGREE[name][1]
    assert fleet(name, [versions_out(), odd, versions_out()]) == [
        (("node1", "node3"), PASS, f"{reference} (majority: 2 of 3 nodes)"),
        (("node2",), FAIL, message),
    ]


def test_drift_warn_and_pins():
    outputs = [versions_out(), versions_out(kernel="5.15.0-113-generic\n"), versions_out()]
    assert fleet("kernel.version", outputs, drift="warn")[1] == (
        ("node2",),
        WARN,
        "kernel 5.15.0-113-generic on node2, expected 5.15.0-112-generic (2 nodes)",
    )
    assert fleet("kernel.version", outputs, expect="5.15.0-113-generic") == [
        (
            ("node1", "node3"),
            FAIL,
            "kernel 5.15.0-112-generic on node[1,3], expected 5.15.0-113-generic (pinned; 1 node)",
        ),
        (("node2",), PASS, "kernel 5.15.0-113-generic (pinned; 1 node)"),
    ]
    assert fleet("kernel.version", outputs[:2]) == [
        (
            ("node1", "node2"),
            ERROR,
            "kernel: no majority among 5.15.0-112-generic on node1, 5.15.0-113-generic "
            "on node2; pin the right one with expect: in the playbook",
        )
    ]


@pytest.mark.parametrize(
    "params",
    [{"expect": 2.23}, {"expect": True}, {"expect": []}, {"drift": "off"}, {"drift": "maybe"}, {"pin": "2.23.4"}],
)
def test_pin_params_are_validated(params):
    with pytest.raises(ValidationError):
        all_checks()["nccl.version"].params.model_validate(params)


# -- nccl.version: what the loader cache says ----------------------------------------------------------


def test_nccl_absent_from_the_loader_cache_fails_that_node():
    assert fleet("nccl.version", [versions_out(), versions_out(libs=""), versions_out()]) == [
        (
            ("node2",),
            FAIL,
            "no libnccl.so.2 in the loader cache (ldconfig -p): a job using the host's NCCL would fail to load it",
        ),
        (("node1", "node3"), PASS, "NCCL 2.29.2 (all 2 nodes agree)"),
    ]


def test_nccl_absent_names_the_header_version_when_there_is_one():
    header = (
        "@@nodecheck nccl-header-path /usr/include/nccl.h\n#define NCCL_MAJOR 2\n#define NCCL_MINOR 23\n"
        '#define NCCL_PATCH 4\n#define NCCL_SUFFIX ""\n#define NCCL_VERSION_CODE 22304\n'
    )
    assert fleet("nccl.version", [versions_out(libs="", header=(header, 0))]) == [
        (
            ("node1",),
            FAIL,
            "no libnccl.so.2 in the loader cache (ldconfig -p) (nccl.h says 2.23.4): a job using "
            "the host's NCCL would fail to load it",
        )
    ]


def test_two_nccl_versions_in_the_cache_is_an_error():
    assert fleet("nccl.version", [versions_out(libs=VLLM + LIBS)]) == [
        (("node1",), ERROR, "cannot read ldconfig -p output: several NCCL versions in the loader cache: 2.18.1, 2.29.2")
    ]


def test_an_unversioned_nccl_in_the_cache_is_unknown_not_absent():
    assert fleet(
        "nccl.version",
        [versions_out(libs=f"\tlibnccl.so.2 (libc6,x86-64) => {PIP} -> {PIP}\n"), versions_out(libs=DEB + "\n")],
    ) == [
        (
            ("node1",),
            ERROR,
            f"cannot read ldconfig -p output: libnccl.so.2 is in the loader cache ({PIP}) but its "
            "file name carries no version",
        ),
        (
            ("node2",),
            ERROR,
            "cannot read ldconfig -p output: libnccl.so.2 is in the loader cache "
            "(/lib/x86_64-linux-gnu/libnccl.so.2) but its file name carries no version",
        ),
    ]


def test_a_32bit_nccl_only_is_absent_for_a_64bit_job():
    libs = (
        "\tlibnccl.so.2 (libc6) => /usr/lib/i386-linux-gnu/libnccl.so.2 -> /usr/lib/i386-linux-gnu/libnccl.so.2.23.4\n"
    )
    assert [status for _, status, _ in fleet("nccl.version", [versions_out(libs=libs)])] == [FAIL]


# -- ofed.version: ofed_info, else rdma-core, else absent -----------------------------------------------


def test_ofed_info_then_rdma_core_then_absent():
    outputs = [versions_out(), versions_out(ofed=None, rdma=("50.0-2ubuntu0.2\n", 0)), versions_out(ofed=None)]
    assert fleet(
        "ofed.version", outputs, expect=["MLNX_OFED_LINUX-23.07-0.5.1.2", "rdma-core 50.0-2ubuntu0.2"], drift="off"
    ) == [
        (("node3",), FAIL, "neither ofed_info nor an rdma-core package found (no RDMA userspace stack)"),
        (("node1",), PASS, "OFED MLNX_OFED_LINUX-23.07-0.5.1.2 (allowed; 1 node)"),
        (("node2",), PASS, "OFED rdma-core 50.0-2ubuntu0.2 (allowed; 1 node)"),
    ]


def test_ofed_info_that_fails_or_says_nothing_falls_back_to_rdma_core():
    rdma = ("50.0-2ubuntu0.2\n", 0)
    outputs = [
        versions_out(ofed="", rdma=rdma),
        versions_out(ofed="sh: 1: ofed_info: not found\n", rdma=rdma),
        versions_out(ofed=None, rdma=("\n", 0)),
    ]  # dpkg knows the name, nothing installed
    assert fleet("ofed.version", outputs) == [
        (("node3",), FAIL, "neither ofed_info nor an rdma-core package found (no RDMA userspace stack)"),
        (("node1", "node2"), PASS, "OFED rdma-core 50.0-2ubuntu0.2 (all 2 nodes agree)"),
    ]


# -- nccl.settings: nccl.conf, overridden by the environment, plus the net plugin ------------------------


def test_nccl_settings_compare_conf_env_and_plugin():
    conf = "NCCL_IB_HCA=mlx5\nNCCL_IB_GID_INDEX=3\n"
    plugin = LIBS + (
        "\tlibnccl-net.so (libc6,x86-64) => /opt/amazon/ofi-nccl/lib/libnccl-net.so"
        " -> /opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so\n"
    )
    outputs = [
        versions_out(conf=conf),
        versions_out(conf=conf, env="NCCL_IB_GID_INDEX=0\n"),
        versions_out(conf=conf, libs=plugin),
    ]
    # three different settings: no majority to call the odd one out
    assert fleet("nccl.settings", outputs, drift="warn") == [  # drift: warn, so the tie only warns
        (
            NODES,
            WARN,
            "NCCL settings: no majority among "
            "NCCL_IB_GID_INDEX=3; NCCL_IB_HCA=mlx5; net plugin none on node1, "
            "NCCL_IB_GID_INDEX=0; NCCL_IB_HCA=mlx5; net plugin none on node2, "
            "NCCL_IB_GID_INDEX=3; NCCL_IB_HCA=mlx5; net plugin libnccl-net.so on node3; "
            "pin the right one with expect: in the playbook",
        )
    ]
    outputs = [versions_out(conf=conf), versions_out(conf=conf, env="NCCL_IB_GID_INDEX=0\n"), versions_out(conf=conf)]
    assert fleet("nccl.settings", outputs) == [
        (
            ("node1", "node3"),
            PASS,
            "NCCL settings NCCL_IB_GID_INDEX=3; NCCL_IB_HCA=mlx5; net plugin none (majority: 2 of 3 nodes)",
        ),
        (
            ("node2",),
            FAIL,
            "NCCL settings NCCL_IB_GID_INDEX=0; NCCL_IB_HCA=mlx5; net plugin none on node2, "
            "expected NCCL_IB_GID_INDEX=3; NCCL_IB_HCA=mlx5; net plugin none (2 nodes)",
        ),
    ]
    # no nccl.conf, no NCCL_ variables: settings are nothing but the plugin
    assert fleet("nccl.settings", [versions_out(), versions_out(libs=plugin)], expect="net plugin none") == [
        (
            ("node2",),
            FAIL,
            "NCCL settings net plugin libnccl-net.so on node2, expected net plugin none (pinned; 1 node)",
        ),
        (("node1",), PASS, "NCCL settings net plugin none (pinned; 1 node)"),
    ]


def test_nccl_conf_that_nccl_would_misread_is_an_error():
    assert fleet("nccl.settings", [versions_out(conf="NCCL_DEBUG = INFO\n")]) == [
        (("node1",), ERROR, "cannot read nccl.conf output: not a NAME=value line: 'NCCL_DEBUG = INFO'")
    ]


# -- a section that cannot be read is that node's ERROR, never a vote --------------------------------------


def test_unreadable_sections_are_errors_of_their_node():
    assert fleet(
        "kernel.version",
        [
            versions_out(kernel="uname: cannot get system name: Operation not permitted\n"),
            versions_out(),
            versions_out(),
        ],
    ) == [
        (
            ("node1",),
            ERROR,
            "cannot read uname -r output: not a kernel release: "
            "'uname: cannot get system name: Operation not permitted'",
        ),
        (("node2", "node3"), PASS, "kernel 5.15.0-112-generic (all 2 nodes agree)"),
    ]
    cut = versions_out().split("@@nodecheck end os-release")[0]
    assert fleet("os.release", [cut]) == [(("node1",), ERROR, "cannot read /etc/os-release output: output cut off")]
    failed = versions_out(os_release="cat: /etc/os-release: No such file or directory\n").replace(
        "@@nodecheck end os-release rc=0", "@@nodecheck end os-release rc=1"
    )
    assert fleet("os.release", [failed]) == [
        (
            ("node1",),
            ERROR,
            "cannot read /etc/os-release output: exited 1: cat: /etc/os-release: No such file or directory",
        )
    ]
    assert fleet("kernel.version", ["bash: line 1: sh: command not found\n"]) == [
        (("node1",), ERROR, "cannot read uname -r output: probe output has no 'kernel' section")
    ]


def test_hca_firmware_without_a_firmware_line_or_without_any_hca_fails():
    # constructed: a CA block cut before its "Firmware version:" line; and ibstat on a node with no
    # RDMA device (Debian 12: prints nothing, exits 0), which is no HCA, not unreadable (issue 17)
    assert fleet("hca.firmware", ["CA 'mlx5_0'\n\tCA type: MT4129\n\tNumber of ports: 1\n", ""], probe=IBSTAT) == [
        (("node1",), FAIL, "no HCA with a firmware version in ibstat output"),
        (("node2",), FAIL, "no HCA with a firmware version in ibstat output"),
    ]


# -- the probe ----------------------------------------------------------------------------------------------


def test_versions_probe_is_one_fixed_script_shared_by_its_checks():
    assert VERSIONS.argv == ("sh", "-c", VERSIONS_SCRIPT, "nodecheck-versions")
    for name in ("kernel.version", "os.release", "ofed.version", "nccl.version", "nccl.settings"):
        spec = all_checks()[name]
        assert (spec.scope, spec.probes_for(PinOrDrift())) == ("fleet", (VERSIONS,))
    assert all_checks()["hca.firmware"].probes_for(PinOrDrift()) == (IBSTAT,)
    for name in ("kernel", "os-release", "ofed", "rdma-core", "nccl-libs", "nccl-header", "nccl-conf", "nccl-env"):
        assert f"section {name} " in VERSIONS_SCRIPT


def test_nccl_settings_that_could_not_be_read_are_an_error_not_an_agreement():
    failed = versions_out().replace("@@nodecheck end nccl-env rc=0", "@@nodecheck end nccl-env rc=1")
    assert "rc=1" in failed
    [(nodes, status, message)] = fleet("nccl.settings", [failed])
    assert (status, message) == (ERROR, "cannot read env output: exited 1: no output")
