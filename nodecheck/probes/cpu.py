"""The cpu probe: `lscpu` (through PATH, in the C locale), /proc/uptime and the CPU sysfs files
(online/offline lists, SMT state, each CPU's cpufreq governor and thermal-throttle counters), each
in its own section, in one round trip. No value from the playbook reaches the script.

Bounds: at most MAX_CPUS cpuN directories are read (the kernel's NR_CPUS maximum is 8192), one
short file per `read` (a shell builtin: no fork per file), with a `cpu-sysfs-truncated` fact when
the walk stopped early; lscpu's output is cut at LSCPU_MAX_BYTES, and its section's exit status is
lscpu's own (a crash after a few lines is not a success). A node without lscpu prints the fact
`lscpu missing` instead of its section.
"""

from __future__ import annotations

from nodecheck.core.model import Probe
from nodecheck.core.registry import Captures
from nodecheck.parsers.sections import Sections, split_sections
from nodecheck.parsers.sysfs import SHELL_FUNCTION

MAX_CPUS = 8192
LSCPU_MAX_BYTES = 262144  # lscpu of a 2-socket server is ~4 KB

CPU_SCRIPT = (
    r"""
export LC_ALL=C
section() { n=$1; shift; echo "@@nodecheck begin $n"; "$@" 2>&1; echo "@@nodecheck end $n rc=$?"; }
"""
    + SHELL_FUNCTION
    + r"""
# lscpu's own exit status, not head's: `lscpu | head -c` exits 0 after lscpu crashed mid-output.
# fd 3 carries lscpu's status out of the pipeline; fd 4 is the section's output, where head writes.
lscpu_bounded() {
  { rc=$( { { lscpu 2>&1; echo "$?" >&3; } | head -c LSCPU_MAX_BYTES >&4; } 3>&1 ); } 4>&1
  return "${rc:-1}"
}
cpu_sysfs() {
  c=/sys/devices/system/cpu cpus=0 cut=
  sysfs_dump "$c"/online "$c"/offline "$c"/smt/active "$c"/smt/control
  for d in "$c"/cpu[0-9]*; do
    [ -d "$d" ] || continue
    cpus=$((cpus + 1))
    if [ "$cpus" -gt MAX_CPUS ]; then cut="more than MAX_CPUS CPUs"; break; fi
    sysfs_dump "$d"/cpufreq/scaling_governor "$d"/thermal_throttle/core_throttle_count \
      "$d"/thermal_throttle/package_throttle_count
  done
  return 0
}
section uptime head -c 256 /proc/uptime
if command -v lscpu >/dev/null 2>&1; then section lscpu lscpu_bounded; else echo "@@nodecheck lscpu missing"; fi
section cpu-sysfs cpu_sysfs
[ -z "$cut" ] || echo "@@nodecheck cpu-sysfs-truncated $cut"
exit 0
""".replace("MAX_CPUS", str(MAX_CPUS)).replace("LSCPU_MAX_BYTES", str(LSCPU_MAX_BYTES))
)
CPU = Probe("cpu", ("sh", "-c", CPU_SCRIPT, "nodecheck-cpu"), timeout_s=15)


def cpu_sections(out: Captures) -> Sections:
    """The cpu probe's output of one node, split into its sections."""
    return split_sections(out[CPU.name].stdout, "cpu probe")
