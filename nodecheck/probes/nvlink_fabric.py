"""The NVLink fabric probe: what the GPU probe (NVML / nvidia-smi) cannot see. The Fabric Manager and
IMEX services (systemd units, or where systemd is not the init system the processes of this node's
mount namespace), the NVSwitches the host sees (PCI bus, the nvidia-nvswitch driver's device nodes
and /proc entries) and the IMEX channel device nodes a multi-node NVLink job opens."""

from __future__ import annotations

from nodecheck.core.model import Probe
from nodecheck.probes.services import SERVICE_STATE_FUNCTION

FABRIC_MANAGER_UNIT = "nvidia-fabricmanager.service"
IMEX_UNIT = "nvidia-imex.service"
# /proc/PID/comm, cut by the kernel to 15 characters: nv-fabricmanager reads "nv-fabricmanage"
FABRIC_MANAGER_COMM = "nv-fabricmanage"
IMEX_COMM = "nvidia-imex"
IMEX_CHANNEL_DIR = "/dev/nvidia-caps-imex-channels"

# A fixed text: no playbook value reaches it. Every command that may hang (systemctl waiting on a
# stuck systemd, lspci on a wedged PCI config space) runs under timeout(1) where the node has it.
# lspci -D -nn -d 10de: lists NVIDIA's devices only, with the domain and class/vendor codes: an
# NVSwitch is an NVIDIA "Bridge [0680]" (NVIDIA Fabric Manager User Guide, "GPU Baseboard
# Topologies"); a Grace CPU's root ports are "PCI bridge [0604]", not switches.
SCRIPT = (
    SERVICE_STATE_FUNCTION
    + r"""
service_state "FM_UNIT IMEX_UNIT" "FM_COMM IMEX_COMM"
if command -v lspci >/dev/null 2>&1; then
  out=$(bounded lspci -D -nn -d 10de: 2>&1); rc=$?
  echo "@@nodecheck begin lspci"
  printf '%s\n' "$out" | head -c 65536
  echo "@@nodecheck end lspci rc=$rc"
else
  echo "@@nodecheck no_lspci lspci not found (pciutils)"
fi
echo "@@nodecheck begin imex"
for f in IMEX_DIR/channel*; do [ -e "$f" ] && echo "$f"; done
echo "@@nodecheck end imex rc=0"
exit 0
""".replace("FM_UNIT", FABRIC_MANAGER_UNIT)
    .replace("IMEX_UNIT", IMEX_UNIT)
    .replace("FM_COMM", FABRIC_MANAGER_COMM)
    .replace("IMEX_COMM", IMEX_COMM)
    .replace("IMEX_DIR", IMEX_CHANNEL_DIR)
)
NVLINK_FABRIC = Probe("nvlink_fabric", ("sh", "-c", SCRIPT, "nodecheck-nvlink-fabric"), timeout_s=30)
