"""The scenario listing (tests/harness/scenarios.py) that demo.sh prints before the run: a newcomer
reads it to learn what each simulated node was given, so it must say exactly that. No cluster is
needed: describe() reads the layout only."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from harness import scenarios
from harness.scenarios import SCENARIOS, Action, RekeyHost, Replay, Unreachable, describe, layout_for

NODES = [f"node{i}" for i in range(1, 11)]  # demo.sh's cluster

# what every GPU node of the demo gets (gpu_node() + ib_counters()), in order
HEALTHY = [
    "pynvml: h100x8-healthy.json",
    "dmesg: replay derived-dmesg-T-nvrm-gpu-at-no-xid.txt",
    "ldconfig: replay constructed-ldconfig-p-nccl-and-driver-sim.txt",
    "NVIDIA driver 550.90.07",
    "readlink: libnccl.so.2 -> 2.29.2",
    "ofed_info: replay ofed_info-s-mlnx-23.07.txt",
    "ibstat: replay gpud-h100-ndr-ib-mixed-cx6dx-ethernet-down-disabled.txt",
    "docker: replay docker-image-inspect-b10s-test-app4.txt",
    "/sys/class/infiniband: 8 RDMA ports, 32 files",
    "perfquery: replay by arguments (1 case)",
]
# what node_os() gives every node of the demo and of the node-check layout, in order
NODE_OS = [
    "lscpu: replay hf-blog-sapphire-rapids-8480plus-2s-56c-smt-224cpu.txt",
    "lsmod: replay gpud-pr39-h100-fm535-lsmod-grep-peermem.txt",
    "lspci: replay cmlgpu-xeon-e5v4-tesla-p100-root-port-acs-disabled.txt, no NVSwitch",
    "chronyc: replay pingcap-docs-normal-22us-slow.txt",
    "ps: replay devbox-procps-4.0.2-probe-columns-pid-namespace.txt",
    "services: nvidia-persistenced, munged, chronyd, slurmd",
    "directory /root/.site-ready",
]


def _swap(actions: list[str], old: str, new: str, last: bool = False) -> list[str]:
    """HEALTHY with one entry replaced (moved to the end where _with() appends the new action)."""
    i = actions.index(old)
    rest = actions[:i] + actions[i + 1 :]
    return rest[:-2] + [new] + rest[-2:] if last else actions[:i] + [new] + actions[i + 1 :]


def _listing(layout) -> dict[str, str]:
    lines = describe(layout).splitlines()
    got = {line.split()[0]: line.split(None, 1)[1] for line in lines}
    assert len(got) == len(lines), lines  # one line per node
    return got


def test_the_demo_listing_says_for_every_node_what_it_was_given():
    got = _listing(layout_for("demo", NODES))
    want = {
        "*": "fake ib_write_bw on every node, 392 Gb/s (node9: gbps=150.0), fake nccl-tests, mpirun and srun "
        "on every node, busbw 370 GB/s across nodes (node9: net_busbw_gbs=140.0)",
        "node1": HEALTHY,
        "node2": _swap(HEALTHY, "readlink: libnccl.so.2 -> 2.29.2", "readlink: libnccl.so.2 -> 2.21.5"),
        "node3": _swap(
            HEALTHY,
            "ibstat: replay gpud-h100-ndr-ib-mixed-cx6dx-ethernet-down-disabled.txt",
            "ibstat: replay derived-h100-ndr-mlx5_3-down-polling.txt",
            last=True,
        ),
        "node4": _swap(HEALTHY, "pynvml: h100x8-healthy.json", "pynvml: h100x8-row-remap-pending.json"),
        "node5": _swap(
            HEALTHY,
            "docker: replay docker-image-inspect-b10s-test-app4.txt",
            "docker: replay derived-docker-image-inspect-b10s-test-app4-stale.txt",
        ),
        "node6": _swap(
            HEALTHY,
            "ibstat: replay gpud-h100-ndr-ib-mixed-cx6dx-ethernet-down-disabled.txt",
            "ibstat: hangs",
            last=True,
        ),
        "node7": _swap(
            HEALTHY,
            "dmesg: replay derived-dmesg-T-nvrm-gpu-at-no-xid.txt",
            "dmesg: replay nvsentinel-155-fallen-off-bus-multiline-no-xid-570.txt",
        ),
        "node8": "sshd stopped (unreachable)",
        "node9": HEALTHY,  # slow: the "*" line says so
        "node10": _swap(
            HEALTHY,
            "perfquery: replay by arguments (1 case)",
            "perfquery: replay by arguments (2 cases); -C mlx5_3: output changes between calls",
        ),
    }
    want = {n: w if isinstance(w, str) or n == "*" else w + NODE_OS for n, w in want.items()}
    assert got == {node: w if isinstance(w, str) else ", ".join(w) for node, w in want.items()}


def test_the_node_check_listing_names_one_fault_per_node():
    got = _listing(layout_for("node-checks", NODES))

    def swap(old: str, new: str) -> str:
        return ", ".join(new if a == old else a for a in NODE_OS)

    assert got == {
        "node1": ", ".join(NODE_OS),
        "node2": swap(NODE_OS[4], "ps: replay derived-azure-local-csi-153-h100-lvm-D-probe-columns.txt")
        + ", /mnt/shared hangs (pending)",
        "node3": ", ".join(NODE_OS) + ", /dev/shm full",
        "node4": swap(NODE_OS[5], "services: munged, chronyd, slurmd; nvidia-persistenced stopped"),
        "node5": swap(NODE_OS[1], "lsmod: replay derived-gpud-pr39-h100-no-nvidia-peermem.txt"),
        "node6": ", ".join(NODE_OS) + ", date: clock +3 s",
        "node7": ", ".join(NODE_OS) + ", slurmd memlock 64 KiB",
        "node8": swap(
            NODE_OS[2], "lspci: replay derived-cmlgpu-tesla-p100-acs-enabled-on-root-port-00-02-0.txt, no NVSwitch"
        ),
        "node9": ", ".join(NODE_OS[:-1]),
        "node10": ", ".join(NODE_OS)
        + ", /proc/meminfo: derived-sichek-2tib-gpu-node-one-dimm-missing.txt, EDAC: mc/mc3/dimm3 removed",
    }


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_no_listing_tells_of_a_new_host_key_where_no_key_changes(name):
    layout = layout_for(name, NODES)
    rekeyed = {
        n
        for n, acts in layout.items()
        for a in (acts if isinstance(acts, list) else [acts])
        if isinstance(a, RekeyHost)
    }
    assert not rekeyed  # no named scenario changes a key today
    assert "host key" not in describe(layout)


def test_only_a_node_whose_key_changes_is_listed_with_a_new_host_key():
    got = _listing({"node1": [RekeyHost()], "node2": [Unreachable()], "node3": Replay("ibstat", "x.txt"), "node4": []})
    assert got == {
        "node1": "new host key (known_hosts mismatch)",
        "node2": "sshd stopped (unreachable)",
        "node3": "ibstat: replay x.txt",
        "node4": "no fakes",
    }


def _kinds(cls: type) -> list[type]:
    return [k for sub in cls.__subclasses__() for k in (sub, *_kinds(sub))]


def test_every_kind_of_action_describes_and_installs_itself():
    kinds = [k for k in _kinds(Action) if k.__module__ == scenarios.__name__]
    assert len(kinds) == 27  # GpuReset (issue 33)
    for kind in kinds:
        assert "describe" in vars(kind) and "install" in vars(kind), kind.__name__


def test_a_new_kind_that_does_not_say_what_it_does_cannot_be_used():
    @dataclass(frozen=True)
    class Silent(Action):
        def install(self, cluster, node) -> None:
            pass

    with pytest.raises(TypeError, match="abstract"):
        Silent()
