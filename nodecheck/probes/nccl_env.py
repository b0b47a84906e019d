"""The nccl.env check's passive probe: one shell script that prints what NCCL and PyTorch would find on
the node (its NCCL_*/TORCH_*/MASTER_* variables, nccl.conf files, interfaces and addresses, HCAs and
their ports, ulimit -l, python3, and whether the flight recorder's dump directories are writable).

Its output is read by nodecheck/parsers/nccl_config.py; nodecheck/checks/nccl_env.py judges it.
"""

from __future__ import annotations

from collections.abc import Sequence

from nodecheck.core.model import Probe
from nodecheck.parsers.nccl_config import PROBE_NAME
from nodecheck.parsers.sysfs import SHELL_FUNCTION
from nodecheck.probes.shell import ESCAPE_FUNCTIONS, NCCL_CONF_FUNCTION, WRITABLE_FUNCTION

# $1: 1 to print the node's NCCL_*/TORCH_*/MASTER_* variables; $2: the job's NCCL_CONF_FILE ("" when
# the job does not set it); $3: the job's user, who opens that file (shell.job_file; "" when not known:
# nobody, never root); then LABEL PATH pairs: the job's dump file prefixes, whose directories are tested
# for writing next to the default's and the node's own.
# The node's variables are filtered on the node: its other variables (secrets) never leave it.
# NCCL also reads NCCL_CONF_FILE (else ~/.nccl.conf), then /etc/nccl.conf (src/misc/param.cc
# initEnvFunc): a variable the environment leaves unset may be set there.
_SCRIPT = (
    SHELL_FUNCTION
    + WRITABLE_FUNCTION
    + ESCAPE_FUNCTIONS
    + NCCL_CONF_FUNCTION
    + r"""
node_env=$1; conf=$2; job_user=$3; shift 3; named=1
[ -n "$conf" ] || { [ "$node_env" = 1 ] && conf=${NCCL_CONF_FILE:-}; }
[ -n "$conf" ] || { conf=$HOME/.nccl.conf; named=0; }
nccl_confs "$conf" "$named" "$job_user"
echo "@@nodecheck begin node_env"
rc=0; [ "$node_env" = 1 ] && { env_matching '^(NCCL|TORCH|MASTER)_[A-Za-z0-9_]*$' 2>&1; rc=$?; }
echo "@@nodecheck end node_env rc=$rc"
echo "@@nodecheck begin links"
for d in /sys/class/net/*; do
  [ -e "$d" ] || continue
  s=; IFS= read -r s < "$d/operstate" 2>/dev/null
  printf '%s %s\n' "${d##*/}" "${s:-?}"
done
echo "@@nodecheck end links rc=0"
echo "@@nodecheck begin addrs"
ip -o addr show 2>&1; echo "@@nodecheck end addrs rc=$?"
echo "@@nodecheck begin hcas"
for c in /sys/class/infiniband/*; do [ -e "$c" ] && echo "${c##*/}"; done
echo "@@nodecheck end hcas rc=0"
echo "@@nodecheck begin ib"
for p in /sys/class/infiniband/*/ports/*; do
  [ -d "$p" ] && sysfs_dump "$p/state" "$p/link_layer"
done
echo "@@nodecheck end ib rc=0"
echo "@@nodecheck memlock $(ulimit -l 2>&1)"
echo "@@nodecheck python3 $(command -v python3 2>/dev/null)"
echo "@@nodecheck begin writable"
writable default /tmp/nccl_trace_rank_
while [ $# -ge 2 ]; do writable "$1" "$2"; shift 2; done
if [ "$node_env" = 1 ]; then
  [ -n "${TORCH_FR_DUMP_TEMP_FILE+x}" ] && writable node:TORCH_FR_DUMP_TEMP_FILE "$TORCH_FR_DUMP_TEMP_FILE"
  [ -n "${TORCH_NCCL_DEBUG_INFO_TEMP_FILE+x}" ] && writable node:TORCH_NCCL_DEBUG_INFO_TEMP_FILE "$TORCH_NCCL_DEBUG_INFO_TEMP_FILE"
fi
echo "@@nodecheck end writable rc=0"
"""
)


def env_probe(node_env: bool, conf_file: str, job_user: str, dump_prefixes: Sequence[tuple[str, str]]) -> Probe:
    """The probe; the job's values reach it as positional arguments, never inside the script.
    dump_prefixes: (label, path) of the job's flight-recorder dump prefixes ("job:NAME", the path)."""
    args = ["1" if node_env else "0", conf_file, job_user]
    for label, path in dump_prefixes:
        args += [label, path]
    return Probe(PROBE_NAME, ("sh", "-c", _SCRIPT, "sh", *args), timeout_s=20)
