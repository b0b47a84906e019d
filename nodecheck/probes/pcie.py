"""The PCIe probe: `lspci -vvv` of the node (every device, with its class and vendor codes and the PCI
domain), bounded; pcie.acs reads the bridges above the GPUs and HCAs from it."""

from __future__ import annotations

from nodecheck.core.errors import ParseError
from nodecheck.core.model import Probe
from nodecheck.core.registry import Captures
from nodecheck.parsers.lspci import TOOL
from nodecheck.parsers.sections import split_sections

LSPCI_MAX = 8 * 1024 * 1024  # an 8-GPU server with PCIe switches prints about 1 MB; a runaway is cut

# lspci through PATH (a site's own, or the simulated node's replay), in a section whose end line
# carries its exit code; head bounds it, and a cut output has no end line, which the check reads as
# "cut off", not as the devices seen so far. No value of the playbook reaches this script.
LSPCI_SCRIPT = f"""
if ! command -v lspci >/dev/null 2>&1; then
  echo "lspci not found in PATH (install pciutils)" >&2; exit 127
fi
{{ echo "@@nodecheck begin lspci"; lspci -vvv -nn -D 2>&1; echo "@@nodecheck end lspci rc=$?"; }} | head -c {LSPCI_MAX}
"""
LSPCI = Probe("lspci", ("sh", "-c", LSPCI_SCRIPT, "nodecheck-lspci"), timeout_s=30)


def lspci_text(out: Captures) -> str:
    """What lspci printed, when it ran to its end and exited 0; else the ParseError that says why not."""
    section = split_sections(out[LSPCI.name].stdout, TOOL).require("lspci", TOOL)
    if section.rc is None:
        raise ParseError(TOOL, f"output cut off (more than {LSPCI_MAX} bytes, or lspci was killed)", section.text)
    if section.rc != 0:
        first = next((ln.strip() for ln in section.text.splitlines() if ln.strip()), "no output")
        raise ParseError(TOOL, f"lspci exited {section.rc}: {first}", section.text)
    return section.text


# AER counters of every NVIDIA GPU (class 0x0300/0x0302) and Mellanox HCA (0x0207/0x0200) and of each
# bridge above it, walked up the device's sysfs path (/sys/devices/pci0000:00/0000:00:02.0/0000:04:00.0).
# Per target: `@@nodecheck path KIND TARGET BDF...` (the target first, then the bridges up to the root);
# per device once, its three aer_dev_* files as sections `aer:BDF:KIND` (a device without them has none).
# The uptime dates the counts (a rate since boot) and the boot id tells a reboot between two reads.
AER_SCRIPT = r"""
IFS=' ' read -r up _ < /proc/uptime 2>/dev/null && echo "@@nodecheck uptime $up"
IFS= read -r boot < /proc/sys/kernel/random/boot_id 2>/dev/null && echo "@@nodecheck boot_id $boot"
seen=" "
for d in /sys/bus/pci/devices/*; do
  [ -e "$d/vendor" ] || continue
  IFS= read -r v < "$d/vendor"; IFS= read -r c < "$d/class"
  case "$v:$c" in
    0x10de:0x0300*|0x10de:0x0302*) kind=GPU ;;
    0x15b3:0x0207*|0x15b3:0x0200*) kind=HCA ;;
    *) continue ;;
  esac
  p=$(readlink -f "$d") || continue
  path=
  while :; do
    b=${p##*/}
    case $b in [0-9a-f][0-9a-f][0-9a-f][0-9a-f]:[0-9a-f][0-9a-f]:[0-9a-f][0-9a-f].[0-7]) ;; *) break ;; esac
    path="$path $b"
    case $seen in *" $b "*) ;; *)
      seen="$seen$b "
      for k in correctable nonfatal fatal; do
        [ -r "$p/aer_dev_$k" ] || continue
        echo "@@nodecheck begin aer:$b:$k"; head -c 4096 "$p/aer_dev_$k"; echo "@@nodecheck end aer:$b:$k rc=$?"
      done ;;
    esac
    p=${p%/*}
  done
  echo "@@nodecheck path $kind${path}"
done
exit 0
"""
AER_BEFORE = Probe("pcie_aer", ("sh", "-c", AER_SCRIPT, "nodecheck-pcie-aer"), timeout_s=20)
AER_AFTER = Probe("pcie_aer.after", ("sh", "-c", AER_SCRIPT, "nodecheck-pcie-aer"), timeout_s=20)
