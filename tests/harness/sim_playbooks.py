"""The shipped playbooks (playbooks/*.yml) as the simulated nodes can meet them, for the tests and
benchmarks that run a shipped playbook end to end (the Slurm gate, the sweep, the Prolog benchmark).

Every check stays, with the shipped values, but for these, which the simulation cannot satisfy as a real GPU
node would:
* `limits`: slurmd's hard limits are the harness's own, and a container without CAP_SYS_RESOURCE
  cannot raise them (memlock 8 MiB, nofile 20000 here), so the floors are ones such a host meets;
  tests/integration/test_node_checks.py still proves the 64 KiB fault fails them;
* `pcie.aer`: the nodes' /sys/bus/pci is the host's, with no GPU or HCA on it: nothing to judge;
* `fs.mounts`: the host's /etc/fstab mounts nothing, so the mount every node has, /mnt/shared, is
  listed (the check warns when it has nothing to judge);
* `proc.health`'s load: the nodes share the host's load average, which the tests themselves drive
  (every node's fake tools and sshd on 2 cores), so it is not judged; D state, zombies and leftover
  processes still are.
* `ib.ports`' count: the generic playbooks count ports against the fleet (`expected_ports: fleet`),
  which on the node itself (the Prolog, the local health check) has no other node and only warns
  until a site sets its count, as their comments ask: the simulated nodes' is 8 (8x H100, NDR);
* `gpu.perf`, `gpu.sdc`: the nodes' GPU library is the fake CuPy (GpuLibrary), whose math is NumPy's on
  the host's 2 cores and which, like CuPy, has no bf16: fp16 at small sizes; the judging is the same.
"""

from __future__ import annotations

from pathlib import Path

import yaml

PLAYBOOKS = Path(__file__).resolve().parents[2] / "playbooks"

SIM_OVERRIDES: dict[str, dict] = {
    "limits": {"memlock": 1048576, "nofile": 16384},
    "pcie.aer": {"enabled": False},
    "proc.health": {"load_warn_per_cpu": None, "load_fail_per_cpu": None},
    "fs.mounts": {"mounts": [{"path": "/mnt/shared", "fstype": "fuse.hangfs"}]},
    "ib.ports": {"expected_ports": 8},
    "gpu.perf": {"dtypes": ["fp16"], "duration_s": 0.2, "gemm_size": 128, "copy_mib": 4, "pcie_mib": 4, "p2p_mib": 2},
    "gpu.sdc": {"size": 96, "steps": 4},
}


def shipped_for_sim(name: str, folder: Path) -> Path:
    """playbooks/<name>.yml with SIM_OVERRIDES, written to folder/<name>.yml (same name: the reports
    and drain reasons read as the shipped playbook's); its path."""
    doc = yaml.safe_load((PLAYBOOKS / f"{name}.yml").read_text())
    for check, change in SIM_OVERRIDES.items():
        if check in doc["checks"]:
            doc["checks"][check] = {**(doc["checks"][check] or {}), **change}
    path = folder / f"{name}.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    path.chmod(0o644)  # read by the nodes' Prologs
    return path
