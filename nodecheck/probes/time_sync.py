"""The clock probes: which time daemon runs and what it says (time.sync), and the node's wall clock
read from the operator host (time.skew). Every tool is called through PATH."""

from __future__ import annotations

from nodecheck.core.model import Probe
from nodecheck.probes.services import PROCS_FUNCTION

# comm names of the time daemons (cut to 15 characters by the kernel: systemd-timesyncd)
TIME_DAEMONS = ("chronyd", "ntpd", "systemd-timesyn")

# Each client asks its own daemon, bounded: `chronyc -n` (no DNS lookup of the reference: a dead DNS
# server must not stall the probe), `ntpq -pn` (the same), `timedatectl status` only where systemd is
# the init system (elsewhere it waits on a bus that is not there). The daemons running in this node's
# mount namespace are listed too, so "none found" can say so.
TIME_SYNC_SCRIPT = (
    PROCS_FUNCTION
    + r"""
section() { n=$1; shift; echo "@@nodecheck begin $n"; "$@" 2>&1; echo "@@nodecheck end $n rc=$?"; }
bounded() { if command -v timeout >/dev/null 2>&1; then timeout 5 "$@"; else "$@"; fi; }
if command -v chronyc >/dev/null 2>&1; then section chronyc bounded chronyc -n tracking; fi
if command -v ntpq >/dev/null 2>&1; then section ntpq bounded ntpq -pn; fi
if [ -d /run/systemd/system ] && command -v timedatectl >/dev/null 2>&1; then
  section timedatectl bounded timedatectl status
fi
section daemons own_procs DAEMONS
exit 0
""".replace("DAEMONS", " ".join(TIME_DAEMONS))
)
TIME_SYNC = Probe("time_sync", ("sh", "-c", TIME_SYNC_SCRIPT, "nodecheck-time-sync"), timeout_s=20)

# The node's wall clock, seconds since the epoch with nanoseconds, through PATH (`date` of GNU
# coreutils; busybox's prints no %N)
DATE = Probe("date", ("sh", "-c", "date +%s.%N", "nodecheck-date"), timeout_s=10)
