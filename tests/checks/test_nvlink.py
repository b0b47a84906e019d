"""nvlink.fabric and nvlink.domain on constructed GPU facts (the GPU probe's parsers are tested with
their own recordings) and the NVLink fabric probe's output."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import pytest
from pydantic import ValidationError

from nodecheck.checks import nvlink as N
from nodecheck.checks import nvlink_errors as E
from nodecheck.checks.gpu import GPU
from nodecheck.core.model import Node, Status
from nodecheck.parsers.gpu import Gpu, GpuFabric, GpuFacts, NvLink
from nodecheck.parsers.nvidia_smi_q import parse_q
from nodecheck.probes.nvlink_fabric import NVLINK_FABRIC
from tests.helpers import captures, data
from tests.parsers.test_nvlink_fabric import probe_output
from tests.probes.test_nvml_probe import STATES, SYSTEM_PYTHON, run_probe

H100_LSPCI = data("lspci-nvswitch/nvidia-fm-guide-hgx-h100-4-nvswitches.txt")
FM_ACTIVE = (
    "Id=nvidia-fabricmanager.service\nLoadState=loaded\nActiveState=active\nSubState=running\nResult=success\n"
    "NRestarts=0\nActiveEnterTimestamp=Mon 2026-11-30 08:00:00 UTC\n\n"
    "Id=nvidia-imex.service\nLoadState=loaded\nActiveState=active\nSubState=running\nResult=success\n"
    "NRestarts=0\nActiveEnterTimestamp=Mon 2026-11-30 08:00:01 UTC\n"
)
FM_FAILED = FM_ACTIVE.replace(
    "ActiveState=active\nSubState=running\nResult=success\nNRestarts=0\n"
    "ActiveEnterTimestamp=Mon 2026-11-30 08:00:00 UTC",
    "ActiveState=failed\nSubState=failed\nResult=exit-code\nNRestarts=0\nActiveEnterTimestamp=",
    1,
)
UUID_A = "a1b2c3d4-0000-4000-8000-000000000001"
UUID_B = "a1b2c3d4-0000-4000-8000-000000000002"


def fab(state="completed", status="success", uuid=UUID_A, clique=1, health=()):
    return GpuFabric(state, status, uuid, clique, health)


def links(n=18, down=()):
    return tuple(NvLink(i, i not in down, 25.0) for i in range(n))


def facts(n=8, fabric=None, nvlinks=None, **per_gpu) -> GpuFacts:
    gpus = []
    for i in range(n):
        f = per_gpu.get(f"fabric{i}", fabric if fabric is not None else fab())
        gpus.append(
            Gpu(
                i,
                name="NVIDIA H100 80GB HBM3",
                uuid=f"GPU-{i}",
                fabric=f,
                nvlinks=per_gpu.get(f"links{i}", nvlinks or links()),
            )
        )
    return GpuFacts("nvml", "550.90.07", "12.4", tuple(gpus))


@pytest.fixture
def gpu_facts(monkeypatch):
    """Replace the GPU probe's parser: a capture's text names the constructed facts it stands for."""
    table: dict[str, GpuFacts] = {}
    monkeypatch.setattr(N, "gpu_facts", lambda out: table[out[GPU.name].stdout])
    return table


def cap(probe, stdout, node="node001"):
    return captures(probe, stdout, node=node)[probe.name]


def run_fabric(table, gpu: GpuFacts, fabric_out: str, **params):
    table["facts"] = gpu
    out = {GPU.name: cap(GPU, "facts"), NVLINK_FABRIC.name: cap(NVLINK_FABRIC, fabric_out)}
    return list(N.fabric(out, N.NvlinkFabric(**params)))


def bad(verdicts):
    return [(v.status, v.message) for v in verdicts if v.status is not Status.PASS]


# ---- nvlink.fabric ----------------------------------------------------------------------------


def test_a_healthy_hgx_h100_passes(gpu_facts):
    got = run_fabric(
        gpu_facts, facts(), probe_output(show=FM_ACTIVE, lspci=H100_LSPCI), nvswitches=4, active_links_per_gpu=18
    )
    assert bad(got) == []
    assert any(v.message == "4 NVSwitches visible" for v in got)
    assert any(v.message.startswith("nvidia-fabricmanager.service active (running) since Mon") for v in got)


def test_fabric_manager_failed_on_nvswitches_fails_naming_the_gpu_state(gpu_facts):
    got = run_fabric(
        gpu_facts, facts(fabric=fab("not_started", None, None, None)), probe_output(show=FM_FAILED, lspci=H100_LSPCI)
    )
    fm = [v for v in got if v.subject == "nvidia-fabricmanager.service"]
    assert [v.status for v in fm] == [Status.FAIL]
    assert fm[0].message == (
        "nvidia-fabricmanager.service is failed (failed, Result=exit-code); NVSwitch GPUs need it (4 NVSwitches): "
        "GPU fabric state not_started on all 8 GPUs"
    )
    # the one reason: no GPU verdict repeats the unfinished registration its message already names
    assert not [v for v in got if v.subject == "GPU3" and "fabric state" in v.message]


def test_an_unfinished_registration_with_fabric_manager_running_is_named_per_gpu(gpu_facts):
    got = run_fabric(
        gpu_facts, facts(fabric=fab("not_started", None, None, None)), probe_output(show=FM_ACTIVE, lspci=H100_LSPCI)
    )
    gpu3 = [v for v in got if v.subject == "GPU3"]
    assert gpu3[0].status is Status.FAIL and "not_started (Fabric Manager has not registered it)" in gpu3[0].message


def test_without_systemd_a_users_process_does_not_stand_in_for_fabric_manager(gpu_facts):
    out = probe_output(
        systemd=False, lspci=H100_LSPCI, procs="77\tsame\t1001\tnv-fabricmanage\n78\tother\t0\tnv-fabricmanage"
    )
    fm = [v for v in run_fabric(gpu_facts, facts(), out) if v.subject == "nvidia-fabricmanager.service"]
    assert fm[0].status is Status.FAIL and "only as a user account" in fm[0].message
    ok = probe_output(systemd=False, lspci=H100_LSPCI, procs="79\tsame\t0\tnv-fabricmanage")
    fm = [v for v in run_fabric(gpu_facts, facts(), ok) if v.subject == "nvidia-fabricmanager.service"]
    assert fm[0].status is Status.PASS and "pid 79" in fm[0].message


def test_a_pcie_node_needs_no_fabric_manager_under_auto(gpu_facts):
    pcie = facts(n=2, fabric=fab("not_supported", None, None, None), nvlinks=())
    out = probe_output(show=FM_FAILED).replace("/dev/nvidia-nvswitch0\n", "")
    got = run_fabric(gpu_facts, pcie, out)
    assert bad(got) == []
    assert any("not required, no NVSwitch visible" in v.message for v in got)
    # the playbook saying required (HGX B200: switches behind the CX7 bridge) judges it anyway
    got = run_fabric(gpu_facts, pcie, out, fabric_manager="required")
    assert [s for s, _ in bad(got)].count(Status.FAIL) == 3  # FM, GPU0 and GPU1 fabric not_supported


def test_links_down_and_missing_switches_are_named(gpu_facts):
    gpu = facts(links5=links(down=(3, 11)))
    lspci = "\n".join(H100_LSPCI.splitlines()[1:])  # one switch gone from the bus
    got = run_fabric(gpu_facts, gpu, probe_output(show=FM_ACTIVE, lspci=lspci), nvswitches=4, active_links_per_gpu=18)
    assert bad(got) == [
        (Status.FAIL, "3 NVSwitches visible (0000:08:00.0, 0000:09:00.0, 0000:0a:00.0), expected 4"),
        (Status.FAIL, "GPU5: 16 NVLinks active, expected 18 (down: 3, 11)"),
    ]


def test_fabric_not_reported_where_required_is_an_error_naming_the_source(gpu_facts):
    got = run_fabric(
        gpu_facts, facts(n=1, fabric=GpuFabric(None, None, None, None)), probe_output(show=FM_ACTIVE, lspci=H100_LSPCI)
    )
    assert bad(got) == [
        (
            Status.ERROR,
            "GPU0: fabric state not reported by NVML (NVML GpuFabricInfo / nvidia-smi -q Fabric; driver 550+ on "
            "Hopper and later); the playbook requires it",
        )
    ]


def test_degraded_bandwidth_and_a_failed_status_fail(gpu_facts):
    gpu = facts(n=2, fabric0=fab(health=(("bandwidth", "degraded"),)), fabric1=fab(status="NVML_ERROR_UNKNOWN"))
    got = run_fabric(gpu_facts, gpu, probe_output(show=FM_ACTIVE, lspci=H100_LSPCI))
    assert bad(got) == [
        (Status.FAIL, "GPU0: fabric health bandwidth degraded (expected bandwidth full)"),
        (Status.FAIL, "GPU1: fabric registration completed with status NVML_ERROR_UNKNOWN, expected success"),
    ]


def test_an_unreadable_probe_is_an_error():
    with pytest.raises(ValidationError):
        N.NvlinkFabric(fabric_manager="maybe")


# ---- nvlink.domain ----------------------------------------------------------------------------


@dataclass
class FakeContext:
    """What nvlink.domain reads of an ActiveContext: the nodes and their passive captures."""

    nodes: dict
    captures: dict
    check: str = "nvlink.domain"
    order: list = field(default_factory=list)


def run_domain(table, per_node: dict[str, GpuFacts], labels=None, fabric_out=None, **params):
    nodes, caps = {}, {}
    for name, f in per_node.items():
        table[name] = f
        nodes[name] = Node(name, name, labels=frozenset(labels.get(name, ())) if labels else frozenset())
        caps[name] = {
            GPU.name: cap(GPU, name, name),
            NVLINK_FABRIC.name: cap(
                NVLINK_FABRIC,
                (fabric_out or {}).get(
                    name, probe_output(show=FM_ACTIVE, imex="/dev/nvidia-caps-imex-channels/channel0")
                ),
                name,
            ),
        }
    ctx = FakeContext(nodes, caps, order=list(nodes))
    return [(nodes_, v.status, v.message) for nodes_, v in N.domain(ctx, N.NvlinkDomain(**params))]


def test_one_domain_passes(gpu_facts):
    got = run_domain(gpu_facts, {f"gb{i}": facts(4) for i in range(3)})
    assert got == [
        (
            ("gb0", "gb1", "gb2"),
            Status.PASS,
            f"one NVLink domain in the nodes given: ClusterUUID {UUID_A} CliqueId 1 (3 nodes)",
        )
    ]


def test_the_node_outside_its_racks_domain_is_named(gpu_facts):
    per = {
        "gb0": facts(4),
        "gb1": facts(4),
        "gb2": facts(4, fabric=fab(clique=2)),
        "gb3": facts(4, fabric=fab(uuid=UUID_B)),
    }
    labels = {"gb0": ["nvl_domain=r7"], "gb1": ["nvl_domain=r7"], "gb2": ["nvl_domain=r7"], "gb3": ["nvl_domain=r8"]}
    got = run_domain(gpu_facts, per, labels, group_label="nvl_domain")
    assert (
        ("gb2",),
        Status.FAIL,
        f"outside nvl_domain=r7's NVLink domain: ClusterUUID {UUID_A} CliqueId 2, expected ClusterUUID {UUID_A} "
        "CliqueId 1 (2 of 3 nodes; differs in CliqueId)",
    ) in got
    assert (
        ("gb0", "gb1"),
        Status.PASS,
        f"in the majority NVLink domain of nvl_domain=r7: ClusterUUID {UUID_A} CliqueId 1 (2 of 3 nodes)",
    ) in got
    assert (
        ("gb3",),
        Status.PASS,
        f"one NVLink domain in nvl_domain=r8: ClusterUUID {UUID_B} CliqueId 1 (1 nodes)",
    ) in got


def test_a_tie_fails_every_node_naming_both_sides(gpu_facts):
    per = {"a": facts(2), "b": facts(2), "c": facts(2, fabric=fab(uuid=UUID_B)), "d": facts(2, fabric=fab(uuid=UUID_B))}
    got = run_domain(gpu_facts, per)
    assert len(got) == 1
    nodes, status, message = got[0]
    assert nodes == ("a", "b", "c", "d") and status is Status.FAIL
    assert message.startswith("the nodes given splits into 2 NVLink domains with no majority (a, b: ClusterUUID")
    assert f"c, d: ClusterUUID {UUID_B} CliqueId 1" in message


def test_clique_zero_fabric_not_completed_and_a_missing_label_are_named(gpu_facts):
    per = {
        "a": facts(2),
        "b": facts(2, fabric1=fab(clique=0)),
        "c": facts(2, fabric=fab("in_progress", None, None, None)),
        "d": facts(2),
    }
    labels = {"a": ["nvl_domain=r1"], "b": ["nvl_domain=r1"], "c": ["nvl_domain=r1"]}
    got = run_domain(gpu_facts, per, labels, group_label="nvl_domain")
    assert (("b",), Status.FAIL, "CliqueId 0 on GPU1: not in an NVLink partition, expected a non-zero CliqueId") in got
    assert (
        ("c",),
        Status.FAIL,
        "NVLink fabric not completed (GPU0 in_progress; GPU1 in_progress, by NVML): the node is in no NVLink domain",
    ) in got
    assert (
        ("d",),
        Status.ERROR,
        "no inventory label nvl_domain=<domain> on this node: its NVLink domain is unknown",
    ) in got


def test_imex_is_judged_only_where_required(gpu_facts):
    no_imex = probe_output(
        show=FM_ACTIVE.replace(
            "Id=nvidia-imex.service\nLoadState=loaded\nActiveState=active\nSubState=running",
            "Id=nvidia-imex.service\nLoadState=loaded\nActiveState=inactive\nSubState=dead",
        )
    )
    per = {"a": facts(2), "b": facts(2)}
    ignored = run_domain(gpu_facts, per, fabric_out={"b": no_imex})
    assert [s for _, s, _ in ignored] == [Status.PASS]
    required = run_domain(gpu_facts, per, fabric_out={"b": no_imex}, imex="required")
    assert (
        ("b",),
        Status.FAIL,
        "nvidia-imex.service is inactive (dead); multi-node NVLink jobs need IMEX (playbook: imex required)",
    ) in required
    assert (
        ("b",),
        Status.FAIL,
        "no IMEX channel device in /dev/nvidia-caps-imex-channels/ (expected channel0 or more: a multi-node NVLink "
        "job cannot import memory without one)",
    ) in required
    assert (
        ("a",),
        Status.PASS,
        "nvidia-imex.service active (running) since Mon 2026-11-30 08:00:01 UTC; IMEX channels: channel0",
    ) in required


def test_the_gpu_operators_containerised_fabric_manager_counts_where_the_host_has_no_unit(gpu_facts):
    no_unit = FM_ACTIVE.replace(
        "Id=nvidia-fabricmanager.service\nLoadState=loaded\nActiveState=active\nSubState=running",
        "Id=nvidia-fabricmanager.service\nLoadState=not-found\nActiveState=inactive\nSubState=dead",
    )
    out = probe_output(show=no_unit, lspci=H100_LSPCI, procs="4242\tother\t0\tnv-fabricmanage")
    fm = [v for v in run_fabric(gpu_facts, facts(), out) if v.subject == "nvidia-fabricmanager.service"]
    assert [(v.status, v.message) for v in fm] == [
        (
            Status.PASS,
            "nv-fabricmanager running in a container (pid 4242; nvidia-fabricmanager.service not installed on the "
            "host) (4 NVSwitches)",
        )
    ]
    alone = probe_output(show=no_unit, lspci=H100_LSPCI)
    fm = [v for v in run_fabric(gpu_facts, facts(), alone) if v.subject == "nvidia-fabricmanager.service"]
    assert fm[0].status is Status.FAIL and fm[0].message.startswith(
        "nvidia-fabricmanager.service not installed (LoadState=not-found); NVSwitch GPUs need it (4 NVSwitches)"
    )


def recorded_fabric(path: str) -> GpuFabric:
    """The Fabric section of a real nvidia-smi -q excerpt as the GPU parser reads it (closed by the
    section that follows it in nvidia-smi -q, as tests/parsers/test_nvidia_smi.py does)."""
    text = data(path).replace("--\n", "")
    indent = text[: len(text) - len(text.lstrip())]
    (gpu,) = parse_q(text + f"{indent}Processes                             : None\n").gpus
    assert gpu.fabric is not None
    return gpu.fabric


@pytest.mark.parametrize(
    ("path", "words"),
    [
        # GB200 rack (kubernetes-sigs/dra-driver-nvidia-gpu#626): registered, but the fabric says unhealthy
        (
            "dra-driver-nvidia-gpu-issue626-gb200-fabric-health-unhealthy-grep-excerpt.txt",
            "GPU0: fabric health summary unhealthy (expected summary healthy)",
        ),
        # azhpc-images#506: completed with Insufficient Resources, clique 0
        (
            "azhpc-images-pr506-fabric-completed-insufficient-resources-clique-0-excerpt.txt",
            "GPU0: fabric registration completed with status Insufficient Resources, expected success",
        ),
        # gpu-operator#2511: Fabric Manager down, registration stuck (NVSentinel #883's symptom)
        (
            "gpu-operator-issue2511-driver580-fabric-in-progress-excerpt.txt",
            "GPU0: fabric state in_progress (registration still running), expected completed with status success",
        ),
    ],
)
def test_recorded_fabric_faults_fail(gpu_facts, path, words):
    gpu = GpuFacts("nvidia-smi", None, None, (Gpu(0, fabric=recorded_fabric(f"nvidia-smi-q/{path}")),))
    got = run_fabric(gpu_facts, gpu, probe_output(show=FM_ACTIVE, lspci=H100_LSPCI))
    assert bad(got) == [(Status.FAIL, words)]


def test_a_recorded_clique_0_node_is_in_no_domain(gpu_facts):
    fabric = recorded_fabric(
        "nvidia-smi-q/azhpc-images-pr506-fabric-completed-insufficient-resources-clique-0-excerpt.txt"
    )
    per = {"a": facts(2), "b": GpuFacts("nvidia-smi", None, None, (Gpu(0, fabric=fabric),))}
    got = run_domain(gpu_facts, per)
    assert (("b",), Status.FAIL, "CliqueId 0 on GPU0: not in an NVLink partition, expected a non-zero CliqueId") in got


@pytest.mark.skipif(not os.access(SYSTEM_PYTHON, os.X_OK), reason=f"no {SYSTEM_PYTHON}")
def test_the_nvml_probe_on_the_fake_healthy_hgx_h100_passes_fabric_and_errors():
    """The whole path: the NVML probe (nvidia-ml-py faked at the library boundary), its parser, the judges."""
    state = STATES / "h100x8-healthy.json"
    first, second = run_probe(state), run_probe(state)
    assert first.returncode == 0 and second.returncode == 0, first.stderr
    out = {**captures(GPU, first.stdout), **captures(NVLINK_FABRIC, probe_output(show=FM_ACTIVE, lspci=H100_LSPCI))}
    got = list(N.fabric(out, N.NvlinkFabric(nvswitches=4, active_links_per_gpu=18, gpu_fabric="required")))
    assert bad(got) == [] and len(got) == 1 + 1 + 8 + 8  # switches, fabric manager, 8 GPUs' fabric and links
    out = {**captures(GPU, first.stdout), **captures(E.GPU_AFTER, second.stdout)}
    got = list(E.errors(out, E.NvlinkErrors()))
    assert [v.status for v in got] == [Status.PASS] * 8
    assert all("on 18 links (NVML)" in v.message for v in got)


def test_no_switch_seen_without_lspci_is_no_proof_that_none_exists(gpu_facts):
    out = probe_output(show=FM_FAILED).replace("/dev/nvidia-nvswitch0\n", "")
    out = out.replace(
        "@@nodecheck begin lspci\n\n@@nodecheck end lspci rc=0\n", "@@nodecheck no_lspci lspci not found (pciutils)\n"
    )
    fm = [v for v in run_fabric(gpu_facts, facts(), out) if v.subject == "nvidia-fabricmanager.service"]
    assert [(v.status, v.message) for v in fm] == [
        (
            Status.ERROR,
            "cannot tell whether this node has NVSwitches: lspci not found (pciutils), and the nvidia-nvswitch driver "
            "lists none; nvidia-fabricmanager.service not judged (set fabric_manager: required or ignore)",
        )
    ]
