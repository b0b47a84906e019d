"""RoCE: the GID table a job will use (roce.gids), NetworkManager on RDMA netdevs
(roce.networkmanager), and whether the table survives a port flap (roce.gid_stability, disruptive).

A RoCE job addresses its peers by GID index (NCCL_IB_GID_INDEX=3). The kernel hands indices out
first-free, so when NetworkManager drops and re-adds an address on a link flap while a QP still
holds the old entry, the IPv4 GID comes back at another index and running jobs lose their peers
(NVIDIA/nccl#1333; /work/shared/context/formats.md §1).
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from nodecheck.checks.context import ActiveContext
from nodecheck.checks.disruptive import without_consent
from nodecheck.checks.params import DeviceName, is_device_name
from nodecheck.core.errors import ParseError
from nodecheck.core.hostlist import fold
from nodecheck.core.model import Capture, Outcome, Probe, Status, Verdict, excerpt
from nodecheck.core.registry import Captures, check
from nodecheck.core.thresholds import fmt
from nodecheck.parsers.gids import Gid, RdmaPort, ports_from_sysfs
from nodecheck.parsers.lines import split_lines
from nodecheck.parsers.networkmanager import is_unmanaged, parse_nmcli_devices, unmanaged_devices
from nodecheck.parsers.sections import split_sections
from nodecheck.parsers.sysfs import SHELL_FUNCTION, parse_sysfs_dump
from nodecheck.probes.idle import IDLE_GUARD
from nodecheck.probes.shell import ESCAPE_FUNCTIONS, NCCL_CONF_FUNCTION

Grouped = tuple[tuple[str, ...], Verdict]

# Every RDMA port's state, and for Ethernet (RoCE) ports the GID table; then where the job's GID
# index may be set outside the playbook: the environment and /etc/nccl.conf.
_TABLE = (
    SHELL_FUNCTION
    + r"""
# its own variable names: the flap script's $p (the flapped port) must survive a call
roce_table() {
  for rt_p in /sys/class/infiniband/*/ports/*; do
    [ -d "$rt_p" ] || continue
    sysfs_dump "$rt_p/link_layer" "$rt_p/state" "$rt_p/phys_state" "$rt_p/rate"
    IFS= read -r rt_layer < "$rt_p/link_layer" 2>/dev/null || rt_layer=
    [ "$rt_layer" = Ethernet ] || continue
    for rt_g in "$rt_p"/gids/*; do
      [ -f "$rt_g" ] || continue
      rt_v=
      if { IFS= read -r rt_v < "$rt_g"; } 2>/dev/null || [ -n "$rt_v" ]; then
        [ "$rt_v" = 0000:0000:0000:0000:0000:0000:0000:0000 ] && continue   # an empty slot
        rt_i=${rt_g##*/}
        sysfs_dump "$rt_g" "$rt_p/gid_attrs/types/$rt_i" "$rt_p/gid_attrs/ndevs/$rt_i"
      else
        printf '%s\t!unreadable\n' "$rt_g"             # a table with a hole cannot be trusted
      fi
    done
  done
}
"""
)
_GIDS_SCRIPT = (
    _TABLE
    + ESCAPE_FUNCTIONS
    + NCCL_CONF_FUNCTION
    + r"""
echo "@@nodecheck begin table"
roce_table
echo "@@nodecheck end table rc=0"
echo "@@nodecheck env_gid_index ${NCCL_IB_GID_INDEX:-}"
# NCCL reads NCCL_CONF_FILE (else ~/.nccl.conf), then /etc/nccl.conf; neither overrides the environment.
# The session's NCCL_CONF_FILE is the job's in the prolog: read only as shell.job_file allows (never
# /etc/shadow), as nccl.env reads it
if [ -n "${NCCL_CONF_FILE:-}" ]; then nccl_confs "$NCCL_CONF_FILE" 1; else nccl_confs "$HOME/.nccl.conf" 0; fi
"""
)
ROCE_GIDS = Probe("roce_gids", ("sh", "-c", _GIDS_SCRIPT), timeout_s=20)


class RoceGids(BaseModel):
    """Which RoCE ports are judged and which GID index the job will use."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    devices: list[DeviceName] | None = Field(
        None, min_length=1, description="RDMA devices to judge (mlx5_0, ...); unset: every RoCE port"
    )
    gid_index: int | None = Field(
        None,
        ge=0,
        le=255,
        strict=True,
        description="the GID index the job uses; unset: NCCL_IB_GID_INDEX from the node's environment "
        "or /etc/nccl.conf, else NCCL picks one (only a RoCE v2 IPv4 GID is required)",
    )
    drift: Literal["warn", "fail", "off"] = Field(
        "warn", description="nodes whose RoCE v2 IPv4 GID is at a different index than most"
    )


@check("roce.gids", probes=[ROCE_GIDS], params=RoceGids, scope="fleet")
def gids(by_node: Mapping[str, Captures], want: RoceGids) -> Iterator[Grouped]:
    """Each RoCE port has a RoCE v2 IPv4 GID, at the index the job will use; nodes agree on it."""
    indices: dict[tuple[str, int], dict[str, int]] = {}
    for node, out in by_node.items():
        text = out[ROCE_GIDS.name].stdout
        try:
            ports = _roce_ports(text, want.devices)
        except ParseError as e:
            yield (node,), Verdict(Status.ERROR, f"cannot read the GID table: {e.reason}", excerpt=e.excerpt)
            continue
        if not ports and _no_rdma_device(text):
            yield (node,), _no_rdma_verdict(want.devices)
            continue
        if not ports:
            yield (
                (node,),
                Verdict(
                    Status.ERROR,
                    "no RoCE (Ethernet) RDMA port" + (f" among {', '.join(want.devices)}" if want.devices else ""),
                    excerpt=excerpt(text),
                ),
            )
            continue
        index, source = _job_gid_index(text, want)
        for port in ports:
            verdict, v2 = _judge_port(port, index, source)
            yield (node,), verdict
            if len(v2) == 1:
                indices.setdefault((port.ca, port.port), {})[node] = v2[0].index
    if want.drift == "off":
        return
    for (ca, port_number), by_index in indices.items():
        yield from _index_drift(f"{ca}/{port_number}", by_index, Status(want.drift))


def _roce_ports(text: str, devices: list[str] | None) -> list[RdmaPort]:
    table = split_sections(text, "roce_gids").require("table", "roce_gids")
    values = parse_sysfs_dump(table.text, "sysfs")
    if not values:
        return []
    return [p for p in ports_from_sysfs(values) if p.link_layer == "Ethernet" and (devices is None or p.ca in devices)]


def _no_rdma_device(text: str) -> bool:
    """The table walk ran to its end and found no port under /sys/class/infiniband: the node has
    no RDMA device (driver not loaded, adapters gone). A walk cut off before its end says nothing."""
    table = split_sections(text, "roce_gids").get("table")
    return table is not None and table.rc == 0 and not table.text.strip()


def _no_rdma_verdict(devices: list[str] | None) -> Verdict:
    # FAIL, not ERROR: roce.gids runs here because the node is meant to have RoCE ports, and an
    # ERROR never drains a node that lost every adapter
    said = "no RDMA device under /sys/class/infiniband (driver not loaded or adapters gone)"
    if devices:
        return Verdict(
            Status.FAIL,
            f"{said}; expected {', '.join(devices)}",
            observed={"devices": []},
            expected={"devices": list(devices)},
        )
    return Verdict(
        Status.FAIL, f"{said}; expected a RoCE (Ethernet) port", observed={"ports": 0}, expected={"ports": ">= 1"}
    )


# NCCL's setEnvFile takes NAME=VALUE as written (no spaces trimmed around "="): so do we
_NCCL_CONF = re.compile(r"^NCCL_IB_GID_INDEX=(\S+)$", re.M)


def _job_gid_index(text: str, want: RoceGids) -> tuple[int | None, str]:
    """(the index the job will use, where that comes from); None: NCCL picks (2.21 and later)."""
    if want.gid_index is not None:
        return want.gid_index, "the playbook"
    sections = split_sections(text, "roce_gids")
    env = sections.facts.get("env_gid_index", "").strip()

    def in_file(name: str) -> str:
        section = sections.get(name)
        found = _NCCL_CONF.findall(section.text) if section else []
        return found[0] if found else ""  # the first line wins: setenv does not overwrite

    for value, source in (
        (env, "NCCL_IB_GID_INDEX in nodecheck's SSH environment"),
        (in_file("user.conf"), "NCCL_IB_GID_INDEX in NCCL_CONF_FILE or ~/.nccl.conf"),
        (in_file("nccl.conf"), "NCCL_IB_GID_INDEX in /etc/nccl.conf"),
    ):
        if value.lstrip("-").isdigit() and int(value) >= 0:
            return int(value), source  # -1 means "auto", as unset
    return None, "NCCL's own choice"


def _judge_port(port: RdmaPort, index: int | None, source: str) -> tuple[Verdict, list[Gid]]:
    where = f"{port.ca}/{port.port}" + (f" ({', '.join(port.netdevs)})" if port.netdevs else "")
    v2 = [g for g in port.gids if g.is_roce_v2_ipv4]
    table = {g.index: f"{g.ipv4 or g.gid} {g.type or '?'}" for g in port.gids}
    observed = {"roce_v2_ipv4": {str(g.index): g.ipv4 for g in v2}, "table": table, "state": port.state}
    if not v2:
        return Verdict(
            Status.FAIL,
            f"{where}: no RoCE v2 IPv4 GID (entries: {_entries(port)}); the port has no IPv4 address or it was dropped",
            port.where,
            observed,
            {"roce_v2_ipv4": "present"},
        ), v2
    if index is not None:
        at = next((g for g in port.gids if g.index == index), None)
        if at is None or not at.is_roce_v2_ipv4:
            what = "empty" if at is None else f"{at.ipv4 or at.gid} {at.type or 'type unknown'}"
            return Verdict(
                Status.FAIL,
                f"{where}: GID index {index} ({source}) is {what}, not RoCE v2 "
                f"IPv4; the RoCE v2 IPv4 GID is at {', '.join(str(g.index) for g in v2)}",
                port.where,
                observed,
                {"gid_index": index, "type": "RoCE v2 IPv4"},
            ), v2
        return Verdict(
            Status.PASS,
            f"{where}: RoCE v2 IPv4 GID {at.ipv4} at index {index} ({source})",
            port.where,
            observed,
            {"gid_index": index},
        ), v2
    gids_text = ", ".join(f"{g.ipv4} at {g.index}" for g in v2)
    return Verdict(
        Status.PASS, f"{where}: RoCE v2 IPv4 GID {gids_text} (no index pinned: {source})", port.where, observed, {}
    ), v2


def _entries(port: RdmaPort) -> str:
    return ", ".join(f"{g.index}: {g.ipv4 or g.gid} {g.type or '?'}" for g in port.gids) or "none"


def _index_drift(where: str, by_index: Mapping[str, int], status: Status) -> Iterator[Grouped]:
    counts = Counter(by_index.values())
    if len(counts) < 2:
        return
    (common, n), *rest = counts.most_common()
    if rest and rest[0][1] == n:  # no majority: say so on every node
        yield (
            tuple(by_index),
            Verdict(
                status,
                f"{where}: nodes disagree on the RoCE v2 IPv4 GID index "
                f"with no majority ({_groups(by_index)}); pin gid_index",
                where,
                {"indices": dict(by_index)},
            ),
        )
        return
    for index in [i for i, _ in rest]:
        nodes = tuple(n for n, i in by_index.items() if i == index)
        yield (
            nodes,
            Verdict(
                status,
                f"{where}: RoCE v2 IPv4 GID at index {index} on {fold(nodes)}, "
                f"at {common} on {n} nodes: a job pinned to one index breaks on the others",
                where,
                {"gid_index": index},
                {"gid_index": common},
            ),
        )


def _groups(by_index: Mapping[str, int]) -> str:
    groups: dict[int, list[str]] = {}
    for node, index in by_index.items():
        groups.setdefault(index, []).append(node)
    return "; ".join(f"{i} on {fold(nodes)}" for i, nodes in groups.items())


# --- roce.networkmanager --------------------------------------------------------------------------

_NM_SCRIPT = r"""
echo "@@nodecheck begin running"
nmcli -t -f RUNNING general 2>&1; echo "@@nodecheck end running rc=$?"
echo "@@nodecheck begin devices"
nmcli -t -f DEVICE,TYPE,STATE device 2>&1; echo "@@nodecheck end devices rc=$?"
for f in /etc/NetworkManager/NetworkManager.conf /etc/NetworkManager/conf.d/*.conf \
         /run/NetworkManager/conf.d/*.conf /usr/lib/NetworkManager/conf.d/*.conf; do
  [ -f "$f" ] || continue
  echo "@@nodecheck begin conf:$f"; cat "$f" 2>&1; echo "@@nodecheck end conf:$f rc=$?"
done
echo "@@nodecheck begin rdma_netdevs"
for p in /sys/class/infiniband/*/ports/*; do
  [ -d "$p" ] || continue
  IFS= read -r layer < "$p/link_layer" 2>/dev/null || layer=
  [ "$layer" = Ethernet ] || continue
  dev=
  for n in "$p"/gid_attrs/ndevs/*; do IFS= read -r dev < "$n" 2>/dev/null && [ -n "$dev" ] && break; done
  if [ -z "$dev" ]; then ca=${p%/ports/*}; for n in "$ca"/device/net/*; do [ -e "$n" ] && dev=${n##*/} && break; done; fi
  ca=${p%/ports/*}; echo "${ca##*/}/${p##*/} $dev"
done
echo "@@nodecheck end rdma_netdevs rc=0"
"""  # noqa: E501 - shell script text: wrapping its long lines would change the script
NM_PROBE = Probe("networkmanager", ("sh", "-c", _NM_SCRIPT), timeout_s=15)
FIX = (
    "add to /etc/NetworkManager/conf.d/99-rdma-unmanaged.conf: [keyfile] unmanaged-devices={}; "
    "then `nmcli general reload` (or restart NetworkManager)"
)


class RoceNetworkManager(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


@check("roce.networkmanager", probes=[NM_PROBE], params=RoceNetworkManager)
def networkmanager(out: Captures, want: RoceNetworkManager) -> Iterator[Verdict]:
    """NetworkManager does not manage a netdev that backs a RoCE port (it drops addresses on a flap).

    Warns naming the interfaces and the unmanaged-devices line that fixes it."""
    sections = split_sections(out[NM_PROBE.name].stdout, "networkmanager")
    rdma = sections.require("rdma_netdevs", "networkmanager").text.split("\n")
    netdevs = {}
    for line in rdma:
        where, _, dev = line.strip().partition(" ")
        if where:
            netdevs[where] = dev.strip()
    if not netdevs:
        yield Verdict(Status.ERROR, "no RoCE (Ethernet) RDMA port on this node: nothing to judge")
        return
    running = sections.require("running", "networkmanager")
    if running.rc == 127 or "not found" in running.text:
        yield Verdict(Status.PASS, "NetworkManager is not installed (nmcli not found)")
        return
    answer = running.text.strip()
    if running.rc == 8 or "not running" in answer.lower():  # nmcli's exit 8: NM is not running
        yield Verdict(Status.PASS, f"NetworkManager is not running ({answer or 'exit 8'})")
        return
    if running.rc != 0 or answer not in ("running", "starting"):
        yield Verdict(
            Status.ERROR,
            f"nmcli failed (exit {running.rc}): {answer[:100] or 'no output'}",
            excerpt=excerpt(running.text),
        )
        return
    devices_section = sections.require("devices", "networkmanager")
    states = parse_nmcli_devices(devices_section.text)
    specs = unmanaged_devices(*(s.text for name, s in sections.sections.items() if name.startswith("conf:")))
    managed = []
    for where, dev in sorted(netdevs.items()):
        if not dev:
            yield Verdict(Status.ERROR, f"{where}: cannot tell which netdev backs it", where)
            continue
        state = states.get(dev)
        if state == "unmanaged" or (state is None and is_unmanaged(dev, specs)):
            yield Verdict(
                Status.PASS,
                f"{where} ({dev}): unmanaged by NetworkManager",
                where,
                {"netdev": dev, "nm_state": state or "unmanaged (config)"},
            )
        else:
            managed.append((where, dev, state))
    if managed:
        names = ";".join(f"interface-name:{dev}" for _, dev, _ in managed)
        listed = ", ".join(f"{dev} ({where}, {state or 'not listed by nmcli'})" for where, dev, state in managed)
        yield Verdict(
            Status.WARN,
            f"NetworkManager manages RDMA netdevs {listed}: a link flap can drop "
            f"their address and renumber the RoCE GID table; fix: {FIX.format(names)}",
            "",
            {"managed": [dev for _, dev, _ in managed]},
            {"nm_state": "unmanaged"},
        )


# --- roce.gid_stability (disruptive) --------------------------------------------------------------

_FLAP_SCRIPT = (
    _TABLE
    + r"""
ca=$1 port=$2 dev=$3 down_s=$4 wait_s=$5 settle_s=$6 guard_s=$7
p=/sys/class/infiniband/$ca/ports/$port
"""
    + IDLE_GUARD
    + r"""[ -d "$p" ] || { echo "no RDMA port $ca/$port" >&2; exit 66; }
[ -e "/sys/class/net/$dev" ] || { echo "no netdev $dev" >&2; exit 66; }
command -v setsid >/dev/null 2>&1 || { echo "setsid not found (util-linux): cannot schedule the restore, not flapping" >&2; exit 69; }
if [ -n "${SSH_CONNECTION:-}" ]; then
  set -- $SSH_CONNECTION
  if [ -n "${3:-}" ] && ip -o addr show dev "$dev" 2>/dev/null | grep -qF " $3/"; then
    echo "@@nodecheck refuse $dev carries this SSH session's address $3: flapping it would cut nodecheck off"; exit 0
  fi
fi
addr_before=$(ip -o -4 addr show dev "$dev" 2>/dev/null | sed -n 's/.* inet \([^ ]*\).*/\1/p' | head -1)
echo "@@nodecheck address_before $addr_before"
echo "@@nodecheck begin before"; roce_table; echo "@@nodecheck end before rc=0"
# the restore is scheduled before the port goes down, in its own session: a dropped SSH connection
# (this script killed with it) cannot leave the port down
setsid sh -c 'sleep "$1"; ip link set dev "$2" up' sh "$guard_s" "$dev" </dev/null >/dev/null 2>&1 &
guard=$!
sleep 0.1
kill -s 0 "$guard" 2>/dev/null || { echo "the restore could not be scheduled (setsid failed): not flapping" >&2; exit 69; }
echo "@@nodecheck guard $guard"
ip link set dev "$dev" down || { echo "ip link set dev $dev down failed" >&2; kill -s TERM -- "-$guard" 2>/dev/null; exit 1; }
echo "@@nodecheck down_at $(date +%s.%N)"
sleep "$down_s"
ip link set dev "$dev" up || echo "ip link set dev $dev up failed; the guard retries in ${guard_s} s" >&2
echo "@@nodecheck up_at $(date +%s.%N)"
up_at=$(date +%s); state=; addr=; recovered=
while [ "$(date +%s)" -lt $((up_at + wait_s)) ]; do
  IFS= read -r state < "$p/state" 2>/dev/null || state=
  addr=$(ip -o -4 addr show dev "$dev" 2>/dev/null | sed -n 's/.* inet \([^ ]*\).*/\1/p' | head -1)
  case "$state" in *ACTIVE*) if [ -z "$addr_before" ] || [ -n "$addr" ]; then recovered=1; break; fi;; esac
  sleep 0.1
done
[ -n "$recovered" ] || echo "@@nodecheck not_recovered within ${wait_s} s"
echo "@@nodecheck recovered_after_s $(( $(date +%s) - up_at ))"
echo "@@nodecheck state_after_wait $state"
echo "@@nodecheck address_after $addr"
sleep "$settle_s"
echo "@@nodecheck begin after"; roce_table; echo "@@nodecheck end after rc=0"
IFS= read -r state < "$p/state" 2>/dev/null || state=
echo "@@nodecheck final_state $state"
echo "@@nodecheck final_operstate $(cat "/sys/class/net/$dev/operstate" 2>/dev/null)"
kill -s TERM -- "-$guard" 2>/dev/null                  # the guard and its sleep: the port is up
exit 0
"""  # noqa: E501 - shell script text: wrapping its long lines would change the script
)

_VERIFY_SCRIPT = r"""
ca=$1 port=$2 dev=$3 wait_s=$4
p=/sys/class/infiniband/$ca/ports/$port
end=$(( $(date +%s) + wait_s ))
while [ "$(date +%s)" -lt "$end" ]; do
  IFS= read -r state < "$p/state" 2>/dev/null || state=
  case "$state" in *ACTIVE*) break;; esac
  sleep 0.1
done
case "$state" in *ACTIVE*) ;; *) ip link set dev "$dev" up 2>&1 && echo "@@nodecheck restored_by nodecheck";
  sleep 2; IFS= read -r state < "$p/state" 2>/dev/null || state=;; esac
echo "@@nodecheck final_state $state"
echo "@@nodecheck final_operstate $(cat "/sys/class/net/$dev/operstate" 2>/dev/null)"
echo "@@nodecheck address $(ip -o -4 addr show dev "$dev" 2>/dev/null | sed -n 's/.* inet \([^ ]*\).*/\1/p' | head -1)"
"""


class GidStability(BaseModel):
    """How the flap is done; the check runs only with `--allow-disruptive` as well."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    devices: list[DeviceName] | None = Field(
        None, min_length=1, description="RDMA devices to flap; unset: every RoCE port with a RoCE v2 IPv4 GID"
    )
    down_s: float = Field(2, gt=0, le=60, allow_inf_nan=False, description="how long the netdev stays down")
    wait_s: int = Field(
        60, ge=1, le=600, strict=True, description="how long to wait for the port Active and its address back"
    )
    settle_s: float = Field(
        5,
        ge=0,
        le=300,
        allow_inf_nan=False,
        description="then wait this long for late GID changes (NetworkManager, DHCP)",
    )
    guard_s: int = Field(
        30,
        ge=5,
        le=900,
        strict=True,
        description="the restore scheduled on the node brings the port up after this "
        "many seconds if nodecheck's session is lost",
    )

    @model_validator(mode="after")
    def _valid(self) -> GidStability:
        if self.guard_s <= self.down_s:
            raise ValueError("guard_s must be longer than down_s")
        return self


@check("roce.gid_stability", probes=[ROCE_GIDS], params=GidStability, scope="active")
def gid_stability(ctx: ActiveContext, want: GidStability) -> Iterator[Grouped]:
    """DISRUPTIVE: flaps each RoCE netdev; fails if its RoCE v2 IPv4 GID moves, vanishes or doubles.

    Runs only when the playbook lists it and `--allow-disruptive` is given; refuses a node with a
    Slurm job step or GPU processes; schedules the port's restore on the node before taking it down."""
    if not ctx.allow_disruptive:
        yield from without_consent(ctx, "takes RoCE ports down")
        return
    plans: dict[str, list[RdmaPort]] = {}
    for node in ctx.nodes:
        try:
            ports = [
                p
                for p in _roce_ports(ctx.captures[node][ROCE_GIDS.name].stdout, want.devices)
                if any(g.is_roce_v2_ipv4 for g in p.gids)
            ]
        except ParseError as e:
            yield (node,), Verdict(Status.ERROR, f"cannot read the GID table: {e.reason}", excerpt=e.excerpt)
            continue
        if not ports:
            yield (node,), Verdict(Status.ERROR, "no RoCE port with a RoCE v2 IPv4 GID to flap")
            continue
        bad = [p for p in ports if len(p.netdevs) != 1 or not is_device_name(p.netdevs[0])]
        for p in bad:
            yield (
                (node,),
                Verdict(
                    Status.ERROR,
                    f"{p.where}: cannot tell which netdev to flap ({', '.join(p.netdevs) or 'none'})",
                    p.where,
                ),
            )
        if ports := [p for p in ports if p not in bad]:
            plans[node] = ports
    # every node at once, its ports one after the other
    done = ctx.each(list(plans.items()), lambda item: [_flap(ctx, want, item[0], p) for p in item[1]])
    for node, verdicts in zip(plans, done):
        for v in verdicts:
            yield (node,), v


def _flap(ctx: ActiveContext, want: GidStability, node: str, port: RdmaPort) -> Verdict:
    dev = port.netdevs[0]
    where = f"{port.where} ({dev})"
    flap = Probe(
        f"roce_flap.{port.ca}.{port.port}",
        (
            "sh",
            "-c",
            _FLAP_SCRIPT,
            "sh",
            port.ca,
            str(port.port),
            dev,
            fmt(want.down_s),
            str(want.wait_s),
            fmt(want.settle_s),
            str(want.guard_s),
        ),
        timeout_s=want.down_s + want.wait_s + want.settle_s + 30,
    )
    if ctx.left() < flap.timeout_s:  # never start a flap the deadline would cut
        return Verdict(
            Status.SKIPPED,
            f"{where}: not flapped: {ctx.left():.0f} s left before the run's "
            f"deadline, the flap may take {flap.timeout_s:.0f} s",
            port.where,
        )
    started = time.monotonic()
    out = ctx.run(node, flap)
    facts = split_sections(out.stdout, "roce_flap").facts if out.stdout else {}
    if "refuse" in facts:
        return Verdict(Status.SKIPPED, f"{where}: not flapped: {facts['refuse']}", port.where)
    if out.outcome is Outcome.EXITED and out.exit_code == 0 and "final_state" in facts:
        try:
            return _judge_flap(where, port, out, facts)
        except ParseError as e:
            return Verdict(
                Status.ERROR,
                f"{where}: cannot read the GID table around the flap: {e.reason}; port {facts['final_state']} after it",
                port.where,
                {"final_state": facts["final_state"]},
                excerpt=e.excerpt,
            )
    if out.outcome is Outcome.EXITED and "guard" not in facts:  # refused before touching the port
        first = next((ln.strip() for ln in split_lines(out.stderr) if ln.strip()), "no message")
        return Verdict(
            Status.ERROR,
            f"{where}: not flapped: the flap script exited {out.exit_code}: {first}",
            port.where,
            excerpt=excerpt(out.stderr + out.stdout),
        )
    # cut short (connection lost, timeout): the guard brings the port back; make sure, and say so
    left = max(1, int(want.guard_s - (time.monotonic() - started)) + 10)
    verify = ctx.run(
        node,
        Probe(
            f"roce_flap_verify.{port.ca}.{port.port}",
            ("sh", "-c", _VERIFY_SCRIPT, "sh", port.ca, str(port.port), dev, str(left)),
            timeout_s=left + 20,
        ),
        fresh=True,
        cleanup=True,
    )
    vf = split_sections(verify.stdout, "roce_flap_verify").facts if verify.outcome is Outcome.EXITED else {}
    how = (
        f"{out.outcome.value}"
        + (f" (exit {out.exit_code})" if out.exit_code is not None else "")
        + (f": {out.detail}" if out.detail else "")
    )
    if "ACTIVE" not in vf.get("final_state", ""):
        return Verdict(
            Status.FAIL,
            f"{where}: the flap was cut short ({how}) and the port is still "
            f"{vf.get('final_state') or 'in an unknown state'} after the guard; bring it up: "
            f"ip link set dev {dev} up",
            port.where,
            {"final_state": vf.get("final_state")},
            {"final_state": "ACTIVE"},
            excerpt(out.stdout + out.stderr + verify.stdout),
        )
    restored = "nodecheck" if "restored_by" in vf else "the guard or the flap"
    return Verdict(
        Status.ERROR,
        f"{where}: the flap was cut short ({how}); the port is back "
        f"({vf['final_state']}, address {vf.get('address') or 'none'}, restored by {restored}); "
        "GID stability not judged",
        port.where,
        {"final_state": vf["final_state"]},
        excerpt=excerpt(out.stdout + out.stderr),
    )


def _judge_flap(where: str, port: RdmaPort, out: Capture, facts: Mapping[str, str]) -> Verdict:
    sections = split_sections(out.stdout, "roce_flap")
    before = _v2_of(sections.require("before", "roce_flap").text, port)
    after = _v2_of(sections.require("after", "roce_flap").text, port)
    final = facts.get("final_state", "")
    table_state = _state_of(sections.require("after", "roce_flap").text, port)
    if table_state and "ACTIVE" not in table_state:
        final = table_state  # the table read after the flap has the last word
    observed = {
        "before": {str(g.index): g.ipv4 for g in before},
        "after": {str(g.index): g.ipv4 for g in after},
        "final_state": final,
        "recovered_after_s": facts.get("recovered_after_s"),
        "address_before": facts.get("address_before"),
        "address_after": facts.get("address_after"),
    }
    if "ACTIVE" not in final:
        return Verdict(
            Status.FAIL,
            f"{where}: port {final or 'state unknown'} after the flap, not ACTIVE "
            f"(the guard brings it up; check `ip link show {port.netdevs[0]}`)",
            port.where,
            observed,
            {"final_state": "ACTIVE"},
            excerpt(out.stdout),
        )
    problems = []
    for ip in sorted(_ipv4s(before)):
        old = sorted(g.index for g in before if g.ipv4 == ip)
        new = sorted(g.index for g in after if g.ipv4 == ip)
        if not new:
            problems.append(f"{ip} vanished (was at index {_list(old)})")
        elif len(new) > 1:
            problems.append(f"{ip} duplicated at indices {_list(new)} (was {_list(old)})")
        elif new != old:
            problems.append(f"{ip} moved from index {_list(old)} to {_list(new)}")
    for ip in sorted(_ipv4s(after) - _ipv4s(before)):
        problems.append(f"{ip} appeared at index {_list(sorted(g.index for g in after if g.ipv4 == ip))}")
    if problems:
        return Verdict(
            Status.FAIL,
            f"{where}: RoCE v2 IPv4 GID changed across a port flap: "
            f"{'; '.join(problems)}; running jobs pinned to the old index lose their peers "
            "(is NetworkManager managing it? see roce.networkmanager)",
            port.where,
            observed,
            {"after": observed["before"]},
            excerpt(out.stdout),
        )
    return Verdict(
        Status.PASS,
        f"{where}: RoCE v2 IPv4 GID stable across the flap "
        f"({', '.join(f'{g.ipv4} at {g.index}' for g in after)}); port ACTIVE, address back "
        f"after {facts.get('recovered_after_s', '?')} s",
        port.where,
        observed,
    )


def _own(text: str, port: RdmaPort) -> dict:
    """The flapped port's files only: another port's unreadable entry is not this port's problem."""
    prefix = f"/sys/class/infiniband/{port.ca}/ports/{port.port}/"
    return {path: v for path, v in parse_sysfs_dump(text, "sysfs").items() if path.startswith(prefix)}


def _v2_of(text: str, port: RdmaPort) -> list[Gid]:
    values = _own(text, port)
    if not values:
        return []
    return [g for p in ports_from_sysfs(values) for g in p.gids if g.is_roce_v2_ipv4]


def _ipv4s(gids: list[Gid]) -> set[str]:
    """The GIDs' IPv4 addresses (_v2_of keeps only IPv4-mapped GIDs: each has one)."""
    return {g.ipv4 for g in gids if g.ipv4 is not None}


def _state_of(text: str, port: RdmaPort) -> str:
    value = _own(text, port).get(f"/sys/class/infiniband/{port.ca}/ports/{port.port}/state")
    return value if isinstance(value, str) else ""


def _list(indices: list[int]) -> str:
    return ", ".join(str(i) for i in indices)
