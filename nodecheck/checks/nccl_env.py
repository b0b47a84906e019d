"""nccl.env: the job's NCCL and PyTorch environment against each node, then TCP reachability between
the nodes on the rendezvous ports.

A job's environment decides whether NCCL finds a usable socket interface (NCCL_SOCKET_IFNAME) and the
HCAs it is told to use (NCCL_IB_HCA), whether a hung collective ever ends (PyTorch's watchdog) and
leaves a trace (the flight recorder), and whether RDMA may pin host memory (ulimit -l). The values
come from the playbook's `env`, overridden by `--job-env FILE`, over what nodecheck's own session
sees on the node (the Slurm prolog's environment when nodecheck runs as the prolog). Every verdict
names where its value came from.

Here: the parameters, the probe script, the judges and the reachability test's orchestration. How
NCCL and PyTorch read the variables is in nodecheck/judging/nccl_settings.py, the probe's output is read by
nodecheck/parsers/nccl_config.py, and the reachability test's scripts are in nodecheck/probes/reachability.py.

References (cited where used):
- NCCL: docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html (NCCL_SOCKET_IFNAME,
  NCCL_SOCKET_FAMILY, NCCL_IB_HCA), and its src/misc/socket.cc (ncclFindInterfaces),
  src/os/linux.cc (ncclOsFindInterfaces) and src/misc/utils.cc (parseStringList, matchIfList).
- PyTorch: docs.pytorch.org/docs/stable/torch_nccl_environment_variables.html
  (TORCH_NCCL_ASYNC_ERROR_HANDLING, TORCH_NCCL_BLOCKING_WAIT, TORCH_NCCL_ENABLE_MONITORING,
  TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC, TORCH_NCCL_TRACE_BUFFER_SIZE, TORCH_NCCL_DUMP_ON_TIMEOUT) and
  c10d's DebugInfoWriter (TORCH_NCCL_DEBUG_INFO_TEMP_FILE, default /tmp/nccl_trace_rank_).
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from nodecheck.checks.context import ActiveContext
from nodecheck.core.errors import ParseError
from nodecheck.core.model import Capture, Outcome, Probe, Status, Verdict, excerpt
from nodecheck.core.registry import check
from nodecheck.core.thresholds import fmt
from nodecheck.judging.nccl_settings import (
    ASYNC_MODES,
    ASYNC_VARS,
    BLOCKING_VARS,
    DEFAULT_MASTER_PORT,
    DEFAULT_TRACE_FILE,
    JOB,
    TORCH_BOOLS,
    TORCH_INTS,
    TRACE_BUFFER_VARS,
    TRACE_FILE_VARS,
    Env,
    NcclList,
    effective_env,
    first_set,
    parse_nccl_list,
    said,
    socket_family,
    strtoll,
    torch_bool,
    torch_int,
)
from nodecheck.parsers.nccl_config import PROBE_NAME, Address, NodeFacts, RdmaPortState, first_line, parse_probe
from nodecheck.parsers.reachability import (
    connection_results,
    listened_ports,
    listener_alive,
    listener_made,
    listener_ready,
    listener_said_nopython,
    listener_start_state,
    listener_stop_state,
)
from nodecheck.parsers.sections import split_sections
from nodecheck.parsers.sysfs import SHELL_FUNCTION
from nodecheck.probes.env_policy import EnvName, EnvValue
from nodecheck.probes.pairtest import ARGUMENT
from nodecheck.probes.reachability import (
    READY_WAIT_S,
    connect_to_listeners,
    listener_directory,
    start_listener,
    stop_listener,
)
from nodecheck.probes.shell import (
    ESCAPE_FUNCTIONS,
    JOB_USER_MAX,
    JOB_USER_PATTERN,
    NCCL_CONF_FUNCTION,
    WRITABLE_FUNCTION,
)

Grouped = tuple[tuple[str, ...], Verdict]
JobUser = Annotated[str, Field(pattern=JOB_USER_PATTERN, max_length=JOB_USER_MAX)]  # (see shell.JOB_USER)
DEFAULT_MEMLOCK_FAIL_BELOW_KIB = 65536  # 64 MiB: below it even small RDMA registrations fail


# --- parameters -------------------------------------------------------------------------------------

Port = Annotated[int, Field(ge=1, le=65535, strict=True)]


class Reachability(BaseModel):
    """The TCP test between the nodes: listeners on every node, connections to the master and around a ring."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    ports: list[Port] = Field(
        [],
        description="ports each node connects to on its ring successor (the "
        "job's other fixed ports); MASTER_PORT is tested against the master as well "
        f"(default {DEFAULT_MASTER_PORT} when MASTER_ADDR is set)",
    )
    connect_timeout_s: float = Field(
        3, gt=0, le=60, allow_inf_nan=False, description="a connection that gets no answer in this time failed"
    )
    enabled: bool = Field(True, description="false: only the per-node environment is judged")


class MemlockFloor(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    fail_below: int = Field(
        DEFAULT_MEMLOCK_FAIL_BELOW_KIB,
        ge=0,
        strict=True,
        description="ulimit -l below this (KiB) fails; anything but unlimited warns",
    )


class NcclEnv(BaseModel):
    """The job's environment and how strictly its parts are judged."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    env: dict[EnvName, EnvValue] = Field(
        {}, description="the job's environment (NCCL_*, TORCH_*, MASTER_*); --job-env FILE overrides these values"
    )
    node_env: bool = Field(
        True,
        description="also read the NCCL_*/TORCH_*/MASTER_* variables nodecheck's "
        "session sees on the node (the prolog's environment); `env` wins over them",
    )
    memlock_kib: MemlockFloor = Field(MemlockFloor(), description="{fail_below} for ulimit -l in KiB")
    timeouts: Literal["warn", "fail", "off"] = Field(
        "warn", description="when neither TORCH_NCCL_ASYNC_ERROR_HANDLING (1-3) nor TORCH_NCCL_BLOCKING_WAIT=1 is set"
    )
    flight_recorder: Literal["warn", "fail", "off"] = Field(
        "warn", description="when TORCH_NCCL_TRACE_BUFFER_SIZE > 0 and TORCH_NCCL_DUMP_ON_TIMEOUT=1 are not both set"
    )
    reachability: Reachability = Field(Reachability(), description="{ports, connect_timeout_s, enabled}")
    job_user: JobUser = Field(
        "",
        description="the job's user (a uid or a name): a NCCL_CONF_FILE of theirs is "
        "read even when private; set by nodecheck from --job-env's owner or the prolog's "
        'SLURM_JOB_UID; "": only root\'s files readable by everyone',
    )


# --- the passive probe ------------------------------------------------------------------------------

# $1: 1 to print the node's NCCL_*/TORCH_*/MASTER_* variables; $2: the job's NCCL_CONF_FILE ("" when
# the job does not set it); $3: the job's user ("" when not known: shell.job_file reads the file as
# theirs); then LABEL PATH pairs: the job's dump file prefixes, whose directories are tested for
# writing next to the default's and the node's own.
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
"""  # noqa: E501 - shell script text: wrapping its long lines would change the script
)


def probes(want: NcclEnv) -> list[Probe]:
    """One probe; the job's dump prefixes reach it as positional arguments, never inside the script."""
    args = ["1" if want.node_env else "0", want.env.get("NCCL_CONF_FILE", ""), want.job_user]
    for name in TRACE_FILE_VARS:
        if name in want.env:
            args += [f"job:{name}", want.env[name]]
    return [Probe(PROBE_NAME, ("sh", "-c", _SCRIPT, "sh", *args), timeout_s=20)]


# --- judges (pure: facts and the environment in, verdicts out) --------------------------------------


def judge_node(text: str, want: NcclEnv) -> list[Verdict]:
    """Every per-node verdict from one probe output."""
    try:
        facts = parse_probe(text)
    except ParseError as e:
        return [unreadable(e)]
    return judge_facts(facts, want)


def judge_facts(facts: NodeFacts, want: NcclEnv) -> list[Verdict]:
    env = effective_env(want.env, facts.node_env, want.node_env, facts.conf)
    unread = [
        Verdict(
            Status.ERROR,
            f"cannot read {f.path}, which NCCL reads: {f.error}; the NCCL_* values it "
            "sets are not known, so the NCCL verdicts may not be what the job gets",
            "nccl.conf",
        )
        for f in facts.conf
        if f.error
    ]
    return [
        *unread,
        *socket_ifname(env, facts),
        *ib_hca(env, facts),
        *torch_values(env),
        *timeouts(env, want.timeouts),
        *flight_recorder(env, facts.writable, want.flight_recorder),
        memlock(facts, want.memlock_kib.fail_below),
    ]


def unreadable(e: ParseError) -> Verdict:
    return Verdict(Status.ERROR, f"cannot read the {e.tool} output: {e.reason}", excerpt=e.excerpt)


_AUTO = "it takes ib* first, and docker*, lo and virbr* only when nothing else is up with an address"


def socket_ifname(env: Env, facts: NodeFacts) -> list[Verdict]:
    """NCCL_SOCKET_IFNAME against the node's interfaces (ncclFindInterfaces)."""
    s = env.get("NCCL_SOCKET_IFNAME")
    family = socket_family(env)
    raw = excerpt(facts.raw_links)
    if s is None or len(s.value) <= 1:  # NCCL: `if (env && strlen(env) > 1)`, else it picks
        return [_auto_interface(env, facts, family)]
    spec = parse_nccl_list(s.value)
    what = said(env, "NCCL_SOCKET_IFNAME")
    names = facts.interfaces
    verdicts = []
    for prefix, _ in spec.entries:
        if not any(spec.matches(n, prefix) for n in names):
            role = "excluded entry" if spec.exclude else "entry"
            verdicts.append(
                Verdict(
                    Status.WARN,
                    f"{what}: {role} {prefix!r} matches no interface on this node (interfaces: {_listing(facts)})",
                    "NCCL_SOCKET_IFNAME",
                    {"unmatched": prefix},
                    {"interfaces": names},
                    raw,
                )
            )
    selected = [n for n in names if spec.selects(n)]
    if not spec.exclude:  # named interfaces: each must be usable
        verdicts += [v for n in selected for v in _named_interface(n, what, facts, family)]
    running = [n for n in selected if _running(facts.links.get(n, "?"))]
    if not running:
        return verdicts + [
            Verdict(
                Status.FAIL,
                f"{what}: no interface it selects is up on this node "
                f"(interfaces: {_listing(facts)}): NCCL finds no socket interface and "
                "init fails",
                "NCCL_SOCKET_IFNAME",
                {"selected": selected},
                {"selected_up": ">= 1"},
                raw,
            )
        ]
    if facts.addresses is None:
        return verdicts + [
            Verdict(
                Status.ERROR,
                f"{what}: cannot check the addresses of {', '.join(running)}: {facts.addresses_error}",
                "NCCL_SOCKET_IFNAME",
                {"selected_up": running},
            )
        ]
    usable = {n: _usable_addresses(facts, n, family) for n in running}
    usable = {n: a for n, a in usable.items() if a}
    if not usable:
        return verdicts + [
            Verdict(
                Status.FAIL,
                f"{what}: no interface it selects is up with an "
                f"{_family_words(family)} address (up: {', '.join(running)}): NCCL finds no "
                "socket interface and init fails",
                "NCCL_SOCKET_IFNAME",
                {"selected_up": running},
                {"with_address": ">= 1"},
                raw,
            )
        ]
    if "lo" in usable and (spec.exclude or not spec.entries):
        verdicts.append(
            Verdict(
                Status.WARN,
                f"{what} leaves lo selected: NCCL takes the interfaces it selects in "
                "the kernel's order, lo usually first, and may bootstrap over loopback, which other "
                "nodes cannot reach; exclude lo too (e.g. ^docker,lo)",
                "NCCL_SOCKET_IFNAME:lo",
                {"selected": list(usable)},
                {"selected": "not lo"},
            )
        )
    used = ", ".join(f"{n} ({', '.join(a.cidr for a in addrs)})" for n, addrs in usable.items())
    return verdicts + [
        Verdict(
            Status.PASS,
            f"{what}: NCCL uses {used}",
            "NCCL_SOCKET_IFNAME",
            {"interfaces": {n: [a.cidr for a in addrs] for n, addrs in usable.items()}},
        )
    ]


def _named_interface(name: str, what: str, facts: NodeFacts, family: str | None) -> list[Verdict]:
    state = facts.links.get(name, "?")
    subject = f"NCCL_SOCKET_IFNAME:{name}"
    head = f"{name} (selected by {what})"
    out = []
    if state == "unknown" and name != "lo":
        out.append(
            Verdict(
                Status.WARN,
                f"{head} has operstate unknown, expected up: its driver does not report the link state",
                subject,
                {"operstate": state},
                {"operstate": "up"},
            )
        )
    elif not _running(state):
        out.append(
            Verdict(
                Status.FAIL,
                f"{head} is {state}, expected up: NCCL skips an interface that is not running",
                subject,
                {"operstate": state},
                {"operstate": "up"},
            )
        )
    if facts.addresses is not None and not _usable_addresses(facts, name, family):
        out.append(
            Verdict(
                Status.FAIL,
                f"{head} has no {_family_words(family)} address: NCCL skips it",
                subject,
                {"addresses": []},
                {"addresses": ">= 1"},
            )
        )
    return out


def _auto_interface(env: Env, facts: NodeFacts, family: str | None) -> Verdict:
    """NCCL's own pick with NCCL_SOCKET_IFNAME unset: ib*, then anything but docker*/lo/virbr*, then
    docker*, lo, virbr* (NCCL_COMM_ID's subnet hint is not followed)."""
    s = env.get("NCCL_SOCKET_IFNAME")
    status = Status.PASS
    if s is None:
        what = "NCCL_SOCKET_IFNAME unset"
    elif not s.value:
        what = f"NCCL_SOCKET_IFNAME empty ({s.source})"
    else:  # one character: a typo NCCL does not say it skips
        what = f"{said(env, 'NCCL_SOCKET_IFNAME')} is ignored by NCCL (it reads 2 characters or more)"
        status = Status.WARN
    if facts.addresses is None:
        return Verdict(
            status,
            f"{what}: NCCL picks an interface ({_AUTO}); which one is not known: {facts.addresses_error}",
            "NCCL_SOCKET_IFNAME",
        )
    for spec in ("ib", "^docker,lo,virbr", "docker", "lo", "virbr"):
        chosen = [
            n
            for n in facts.interfaces
            if parse_nccl_list(spec).selects(n)
            and _running(facts.links.get(n, "?"))
            and _usable_addresses(facts, n, family)
        ]
        if chosen and spec in ("docker", "lo", "virbr"):
            return Verdict(
                Status.WARN,
                f"{what}: no other interface is up with an address, so NCCL would "
                f"use {', '.join(chosen)}: other nodes cannot reach this one over it; set "
                "NCCL_SOCKET_IFNAME to the cluster network's interface",
                "NCCL_SOCKET_IFNAME",
                {"auto": chosen},
                excerpt=excerpt(facts.raw_links),
            )
        if chosen:
            return Verdict(
                status,
                f"{what}: NCCL picks an interface: {', '.join(chosen)} ({_AUTO})",
                "NCCL_SOCKET_IFNAME",
                {"auto": chosen},
            )
    return Verdict(
        Status.FAIL,
        f"{what}: no interface is up with an {_family_words(family)} address "
        f"(interfaces: {_listing(facts)}): NCCL finds no socket interface and init fails",
        "NCCL_SOCKET_IFNAME",
        {"auto": []},
        excerpt=excerpt(facts.raw_links),
    )


def _family_words(family: str | None) -> str:
    return {"inet": "IPv4 (NCCL_SOCKET_FAMILY=AF_INET)", "inet6": "IPv6 (NCCL_SOCKET_FAMILY=AF_INET6)"}.get(
        family or "", "IPv4 or IPv6"
    )


def _running(state: str) -> bool:
    # lo and some virtual interfaces report "unknown" while running (IFF_RUNNING, which NCCL checks)
    return state in ("up", "unknown")


def _usable_addresses(facts: NodeFacts, name: str, family: str | None) -> tuple[Address, ...]:
    return tuple(a for a in (facts.addresses or {}).get(name, ()) if family is None or a.family == family)


def _listing(facts: NodeFacts) -> str:
    return ", ".join(f"{n} {facts.links.get(n, '?')}" for n in facts.interfaces) or "none"


def ib_hca(env: Env, facts: NodeFacts) -> list[Verdict]:
    """NCCL_IB_HCA against /sys/class/infiniband: named HCAs exist, named ports exist and are ACTIVE."""
    ports = facts.rdma_ports
    active = [p.where for p in ports.values() if p.active]
    disabled = env.get("NCCL_IB_DISABLE")
    if disabled is not None and strtoll(disabled.value) != 0:  # NCCL: any non-zero disables
        return [
            Verdict(
                Status.PASS,
                f"{said(env, 'NCCL_IB_DISABLE')}: NCCL does not use InfiniBand or RoCE; NCCL_IB_HCA not judged",
                "NCCL_IB_HCA",
            )
        ]
    s = env.get("NCCL_IB_HCA")
    if s is None or not s.value:
        uses = ", ".join(active) if active else ("none is ACTIVE" if ports else "this node has no RDMA device")
        what = "NCCL_IB_HCA unset" if s is None else f"NCCL_IB_HCA empty ({s.source})"
        return [
            Verdict(Status.PASS, f"{what}: NCCL uses every ACTIVE HCA port ({uses})", "NCCL_IB_HCA", {"active": active})
        ]
    spec = parse_nccl_list(s.value)
    what = said(env, "NCCL_IB_HCA")
    hcas = sorted(set(facts.hcas) | {ca for ca, _ in ports})
    verdicts = []
    for prefix, port in spec.entries:
        named = [ca for ca in hcas if spec.matches(ca, prefix)]
        if not named:
            status = Status.WARN if spec.exclude else Status.FAIL
            role = "excludes" if spec.exclude else "names"
            verdicts.append(
                Verdict(
                    status,
                    f"{what}: {prefix!r} {role} no HCA on this node (HCAs: {', '.join(hcas) or 'none'})",
                    "NCCL_IB_HCA",
                    {"unmatched": prefix},
                    {"hcas": hcas},
                )
            )
        elif not spec.exclude:
            verdicts += [v for ca in named for v in _named_hca(ca, port, prefix, spec, what, ports)]
    used = [p.where for p in ports.values() if p.active and spec.selects(p.ca, p.port)]
    if not used:
        return verdicts + [
            Verdict(
                Status.FAIL,
                f"{what}: no ACTIVE port among the HCAs it selects (ACTIVE "
                f"here: {', '.join(active) or 'none'}): NCCL falls back to TCP sockets, far "
                "slower",
                "NCCL_IB_HCA",
                {"used": []},
                {"used": ">= 1 ACTIVE port"},
            )
        ]
    return verdicts + [Verdict(Status.PASS, f"{what}: NCCL uses {', '.join(used)}", "NCCL_IB_HCA", {"used": used})]


def _named_hca(
    ca: str, port: int | None, prefix: str, spec: NcclList, what: str, ports: Mapping[tuple[str, int], RdmaPortState]
) -> list[Verdict]:
    mine = [p for (c, _), p in ports.items() if c == ca]
    if port is not None:
        p = ports.get((ca, port))
        if p is None:
            return [
                Verdict(
                    Status.FAIL,
                    f"{ca} port {port} (named by {what}) does not exist (ports: "
                    f"{', '.join(str(q.port) for q in mine) or 'none'})",
                    f"NCCL_IB_HCA:{ca}/{port}",
                    {"ports": [q.port for q in mine]},
                    {"port": port},
                )
            ]
        if not p.active:
            return [
                Verdict(
                    Status.FAIL,
                    f"{p.where} (named by {what}) is {p.state_name}, expected ACTIVE: NCCL skips "
                    "a port that is not ACTIVE",
                    f"NCCL_IB_HCA:{p.where}",
                    {"state": p.state},
                    {"state": "ACTIVE"},
                )
            ]
        return []
    if any(p.active for p in mine):
        return []
    states = ", ".join(f"port {p.port} {p.state_name}" for p in mine) or "no ports"
    # a prefix that happens to match a spare HCA is a softer miss than an HCA named outright
    status = Status.FAIL if spec.exact or prefix == ca else Status.WARN
    how = "named by" if status is Status.FAIL else f"matched by prefix {prefix!r} of"
    return [
        Verdict(
            status,
            f"{ca} ({how} {what}) has no ACTIVE port ({states}): NCCL skips it",
            f"NCCL_IB_HCA:{ca}",
            {"ports": states},
            {"state": "ACTIVE"},
        )
    ]


def torch_values(env: Env) -> list[Verdict]:
    """A PyTorch variable PyTorch cannot read fails the job when it creates the process group."""
    out = []
    for names, read, expected in (
        (TORCH_INTS, torch_int, "an integer"),
        (TORCH_BOOLS, torch_bool, "1/0, true/false, yes/no, y/n or t/f"),
    ):
        for name in names:
            s = env.get(name)
            if s is not None and read(s.value) is None:
                out.append(
                    Verdict(
                        Status.FAIL,
                        f"{said(env, name)} is not {expected}: PyTorch refuses it when it "
                        f'creates the NCCL process group ("Invalid value for environment variable: '
                        f'{name}"), so the job fails at start; set {expected} or unset it',
                        name,
                        {name: s.value},
                        {name: expected},
                    )
                )
    return out


def timeouts(env: Env, level: str) -> list[Verdict]:
    """A collective that never finishes must end the job: PyTorch's watchdog acts on the process group's
    timeout only with TORCH_NCCL_ASYNC_ERROR_HANDLING 1-3 or TORCH_NCCL_BLOCKING_WAIT=1 (PyTorch's
    ProcessGroupNCCL environment variables); NCCL itself has no timeout."""
    if level == "off":
        return []
    name, handling = first_set(env, ASYNC_VARS)
    blocking_name, blocking = first_set(env, BLOCKING_VARS)
    mode = str(torch_int(handling.value)) if handling is not None else None
    out = []
    if handling is not None and mode in ASYNC_MODES:  # (mode is None when handling is)
        out.append(
            Verdict(
                Status.PASS,
                f"{said(env, name)}: the watchdog ends a collective that outlives the "
                f"process group's timeout ({ASYNC_MODES[mode]})",
                "timeouts",
                {name: handling.value},
            )
        )
    elif blocking is not None and torch_bool(blocking.value):
        out.append(
            Verdict(
                Status.PASS,
                f"{said(env, blocking_name)}: wait() raises when a collective outlives the process group's timeout",
                "timeouts",
                {blocking_name: blocking.value},
            )
        )
    else:
        bad = "" if handling is None or mode == "0" else " (not 0, 1, 2 or 3)"
        out.append(
            Verdict(
                Status(level),
                f"{said(env, name)}{bad} and {said(env, blocking_name)}: NCCL has no "
                "timeout by default, so a hung collective hangs the job forever unless PyTorch's "
                "watchdog acts (recent PyTorch releases default to 3, older ones to 0); set "
                "TORCH_NCCL_ASYNC_ERROR_HANDLING=3",
                "timeouts",
                {name: handling.value if handling else None, blocking_name: blocking.value if blocking else None},
                {name: "1, 2 or 3", blocking_name: "or 1"},
            )
        )
    monitoring = env.get("TORCH_NCCL_ENABLE_MONITORING")
    if monitoring is not None and torch_bool(monitoring.value) is False:
        out.append(
            Verdict(
                Status(level),
                f"{said(env, 'TORCH_NCCL_ENABLE_MONITORING')}: the watchdog's "
                "heartbeat monitor is off, so a watchdog stuck in a CUDA or NCCL call is never "
                "detected (TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC does not apply); unset it or set 1",
                "TORCH_NCCL_ENABLE_MONITORING",
                {"TORCH_NCCL_ENABLE_MONITORING": monitoring.value},
                {"TORCH_NCCL_ENABLE_MONITORING": "1"},
            )
        )
    return out


def flight_recorder(env: Env, writable: Mapping[str, str], level: str) -> list[Verdict]:
    """The flight recorder keeps the last collectives and dumps them on a watchdog timeout: it needs
    TORCH_NCCL_TRACE_BUFFER_SIZE > 0 and TORCH_NCCL_DUMP_ON_TIMEOUT=1, and a writable dump directory."""
    size_name, size = first_set(env, TRACE_BUFFER_VARS)
    dump = env.get("TORCH_NCCL_DUMP_ON_TIMEOUT")
    settings = f"{said(env, size_name)}, {said(env, 'TORCH_NCCL_DUMP_ON_TIMEOUT')}"
    entries = torch_int(size.value) if size is not None else None
    on = entries is not None and entries > 0 and dump is not None and torch_bool(dump.value) is True
    if not on:
        if level == "off":
            return []
        return [
            Verdict(
                Status(level),
                f"flight recorder off ({settings}): a timed-out collective leaves no "
                "record of which rank stopped where; set TORCH_NCCL_TRACE_BUFFER_SIZE=2000 and "
                "TORCH_NCCL_DUMP_ON_TIMEOUT=1",
                "flight_recorder",
                {size_name: size.value if size else None, "TORCH_NCCL_DUMP_ON_TIMEOUT": dump.value if dump else None},
                {size_name: "> 0", "TORCH_NCCL_DUMP_ON_TIMEOUT": "1"},
            )
        ]
    file_name, file = first_set(env, TRACE_FILE_VARS)
    if file is None or not file.value:
        prefix, label, where = DEFAULT_TRACE_FILE, "default", f"{DEFAULT_TRACE_FILE} (PyTorch's default)"
    else:
        prefix, where = file.value, said(env, file_name)
        label = f"{'job' if file.source == JOB else 'node'}:{file_name}"
    head = f"flight recorder on ({settings}): dumps to {where}"
    result = writable.get(label)
    observed = {"dump_prefix": prefix, "writable": result}
    if result == "ok":
        return [Verdict(Status.PASS, f"{head}; its directory is writable on this node", "flight_recorder", observed)]
    if result == "!relative":
        return [
            Verdict(
                Status.WARN,
                f"{head}, a relative path: the dump lands in the job's working directory, "
                "which nodecheck cannot check; give an absolute path",
                "flight_recorder",
                observed,
            )
        ]
    if result is None:
        return [Verdict(Status.ERROR, f"{head}; the probe did not test that directory", "flight_recorder", observed)]
    if result.startswith("?"):  # shell.writable: it could not test as the job's user
        return [Verdict(Status.ERROR, f"{head}; its directory was {result[1:]}", "flight_recorder", observed)]
    directory = prefix.rsplit("/", 1)[0] or "/"
    return [
        Verdict(
            Status.FAIL,
            f"{head}, but {directory} is not writable on this node ({result[1:]}): the dump "
            "of a timed-out collective would be lost",
            "flight_recorder",
            observed,
            {"writable": "ok"},
        )
    ]


def memlock(facts: NodeFacts, fail_below_kib: int) -> Verdict:
    """RDMA registers (pins) host memory, limited by RLIMIT_MEMLOCK; NVIDIA recommends unlimited."""
    value = facts.memlock
    where = "ulimit -l in nodecheck's session on the node"
    if value == "unlimited":
        return Verdict(Status.PASS, f"max locked memory unlimited ({where})", "memlock", {"memlock_kib": value})
    if not (value.isascii() and value.isdigit()):
        return Verdict(Status.ERROR, f"cannot read the max locked memory ({where}): {value!r}", "memlock")
    kib = int(value)
    observed = {"memlock_kib": kib}
    if kib < fail_below_kib:
        return Verdict(
            Status.FAIL,
            f"max locked memory {kib} KiB ({where}), expected >= {fail_below_kib} KiB "
            "(unlimited recommended): RDMA memory registration fails",
            "memlock",
            observed,
            {"min_kib": fail_below_kib},
        )
    return Verdict(
        Status.WARN,
        f"max locked memory {kib} KiB ({where}), expected unlimited: RDMA registers "
        "host memory and NVIDIA recommends unlimited",
        "memlock",
        observed,
        {"memlock_kib": "unlimited"},
    )


# --- the check --------------------------------------------------------------------------------------


@check("nccl.env", probes=probes, params=NcclEnv, scope="active")
def env(ctx: ActiveContext, want: NcclEnv) -> Iterator[Grouped]:
    """The job's NCCL/PyTorch environment fits each node; the nodes reach each other on its ports.

    NCCL_SOCKET_IFNAME and NCCL_IB_HCA against the node's interfaces and HCAs, PyTorch's collective
    timeouts and flight recorder, ulimit -l; then a TCP listener on every node and connections to
    MASTER_ADDR's node on MASTER_PORT and around a ring on reachability.ports."""
    facts: dict[str, NodeFacts] = {}
    for node in ctx.order:
        if node not in ctx.nodes:
            continue
        try:
            facts[node] = parse_probe(ctx.captures[node][PROBE_NAME].stdout)
        except ParseError as e:  # this node is not tested further
            yield (node,), unreadable(e)
            continue
        for verdict in judge_facts(facts[node], want):
            yield (node,), verdict
    if want.reachability.enabled:
        yield from reachability(ctx, want, facts)


# --- reachability (active) --------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    node: str  # the node that listens
    port: int
    role: str  # "master: MASTER_ADDR=node1 (job environment); ..." / "ring successor"


@dataclass(frozen=True)
class Master:
    node: str  # the node MASTER_ADDR names (or the first node)
    port: int
    role: str  # how it was chosen, with the values' sources
    problem: str = ""  # why it cannot be tested ("" = it can)


@dataclass
class Listener:
    """One node's listener: which ports it holds, or why it could not be started."""

    node: str
    ports: dict[int, str] = field(default_factory=dict)  # port -> "listening" / "busy: why" / "error: why"
    problem: Verdict | None = None
    ended: str = ""  # from the stop step: "" = still listening, else how it ended
    made: str = ""  # the private directory the start step made ("" = none said)


@dataclass
class Plan:
    """Who connects to what, and what cannot be tested."""

    runs: dict[str, list[Target]] = field(default_factory=dict)  # connector -> targets
    not_tested: dict[tuple[str, int], list[str]] = field(default_factory=dict)  # port not held -> connectors
    verdicts: list[Grouped] = field(default_factory=list)


def reachability(ctx: ActiveContext, want: NcclEnv, facts: Mapping[str, NodeFacts]) -> Iterator[Grouped]:
    """Listeners on every node, then each node connects to the master and to its ring successor; the
    listeners are stopped (a cleanup step) before any connection is judged."""
    order = [n for n in ctx.order if n in facts]
    masters: dict[str, Master] = {}
    for node in order:
        master, problem = _master(ctx, order, effective_env(want.env, facts[node].node_env, want.node_env))
        if problem is not None:
            yield (node,), problem
        elif master is not None:
            masters[node] = master
    ports = sorted(set(want.reachability.ports) | {m.port for m in masters.values()})
    if not ports:
        for node in order:
            yield (
                (node,),
                Verdict(
                    Status.SKIPPED,
                    "reachability not tested: no port to test (MASTER_ADDR and "
                    "MASTER_PORT unset, reachability.ports empty)",
                    "reachability",
                ),
            )
        return
    runnable = []
    for node in order:
        address = ctx.nodes[node].address
        if not facts[node].python3:
            yield (node,), Verdict(Status.ERROR, f"cannot test reachability: no python3 on {node}", "reachability")
        elif not ARGUMENT.match(address):
            yield (
                (node,),
                Verdict(
                    Status.ERROR,
                    f"cannot test reachability: {address!r} (the address of {node}) cannot be passed to a command",
                    "reachability",
                ),
            )
        else:
            runnable.append(node)
    if not runnable:
        return
    ct = want.reachability.connect_timeout_s
    waves = math.ceil(len(runnable) / max(1, ctx.parallel))
    needs = waves * (READY_WAIT_S + 10 + 2 * ct + 10) + 10
    if ctx.left() < needs:  # a test cut by the deadline would blame healthy nodes
        for node in runnable:
            yield (
                (node,),
                Verdict(
                    Status.SKIPPED,
                    f"reachability not tested: {ctx.left():.0f} s left before the "
                    f"run's deadline, it needs {needs:.0f} s",
                    "reachability",
                ),
            )
        return
    tag = secrets.token_hex(4)
    listeners: dict[str, Listener] = {}
    outputs: dict[str, Capture] = {}
    plan = Plan()
    try:
        listeners = dict(zip(runnable, ctx.each(runnable, lambda n: _start(ctx, n, tag, ports, needs))))
        plan = _plan(want, order, masters, listeners)
        connectors = [n for n, targets in plan.runs.items() if targets]
        outputs = dict(zip(connectors, ctx.each(connectors, lambda n: _connect(ctx, n, tag, plan.runs[n], want))))
    finally:
        # every node where a start ran, whatever became of it: a start cut short may have left a listener
        for node, ended in zip(
            runnable, ctx.each(runnable, lambda n: _stop(ctx, n, tag, listeners[n].made if n in listeners else ""))
        ):
            if node in listeners:
                listeners[node].ended = ended
    for node, listener in listeners.items():
        if listener.problem is not None:
            yield (node,), listener.problem
    yield from plan.verdicts
    for node, listener in listeners.items():
        for port, state in listener.ports.items():
            if state != "listening":
                yield _port_problem(ctx, node, port, state, plan.not_tested.get((node, port), []))
    for node, out in outputs.items():
        yield from _judge_connections(node, plan.runs[node], out, listeners, want)


def _master(ctx: ActiveContext, order: Sequence[str], env: Env) -> tuple[Master | None, Verdict | None]:
    """The node this node's job would rendezvous with, from MASTER_ADDR and MASTER_PORT: the node of
    the run MASTER_ADDR names (by name or address), else the first node."""
    addr, port = env.get("MASTER_ADDR"), env.get("MASTER_PORT")
    if addr is None and port is None:
        return None, None
    number, port_words = DEFAULT_MASTER_PORT, f"MASTER_PORT={DEFAULT_MASTER_PORT} (default)"
    if port is not None:
        digits = port.value.strip()
        if not (digits.isascii() and digits.isdigit()) or not 1 <= int(digits) <= 65535:
            return None, Verdict(
                Status.FAIL,
                f"{said(env, 'MASTER_PORT')} is not a port number (1-65535): the job cannot rendezvous",
                "MASTER_PORT",
                {"MASTER_PORT": port.value},
                {"MASTER_PORT": "1-65535"},
            )
        number, port_words = int(digits), said(env, "MASTER_PORT")
    if addr is None:
        return Master(order[0], number, f"master: MASTER_ADDR unset, the first node; {port_words}"), None
    by_address = {ctx.nodes[n].address: n for n in order}
    named = addr.value if addr.value in ctx.order else by_address.get(addr.value)
    if named is None:
        return Master(
            order[0],
            number,
            f"master: {said(env, 'MASTER_ADDR')} is no node of this run, tested against the first node; {port_words}",
        ), None
    role = f"master: {said(env, 'MASTER_ADDR')}; {port_words}"
    if named not in order:
        return Master(
            named, number, role, f"the nccl_env probe on {named} did not come back or could not be read"
        ), None
    return Master(named, number, role), None


def _start(ctx: ActiveContext, node: str, tag: str, ports: Sequence[int], limit_s: float) -> Listener:
    probe = start_listener(
        f"{PROBE_NAME}.listen", listener_directory(tag, node), limit_s, tag, ctx.nodes[node].address, ports
    )
    out = ctx.run(node, probe)
    listener = Listener(node, made=listener_made(out.stdout))
    text = out.stdout
    if out.outcome is not Outcome.EXITED or out.exit_code != 0:
        listener.problem = _step_failed(out, f"cannot test reachability: the listener start on {node}")
    elif listener_said_nopython(text):
        listener.problem = Verdict(Status.ERROR, f"cannot test reachability: no python3 on {node}", "reachability")
    elif not listener_ready(text):
        stderr = split_sections(text, PROBE_NAME).get("stderr")
        why = first_line(stderr.text) if stderr else ""
        state = listener_start_state(text)
        if state == "exited 127":
            message = f"cannot test reachability: no python3 on {node} (python3 exited 127 before listening)"
        elif state == "notready":
            message = f"cannot test reachability: nodecheck's listener on {node} did not bind within {READY_WAIT_S} s"
        else:
            message = f"cannot test reachability: nodecheck's listener on {node} {state} before listening"
        listener.problem = Verdict(
            Status.ERROR, message + (f": {why}" if why else ""), "reachability", excerpt=excerpt(text)
        )
    else:
        listener.ports.update(listened_ports(text))
        for port in ports:  # a port it did not speak of is not taken as tested
            listener.ports.setdefault(port, "error: the listener did not say whether it holds it")
    return listener


def _stop(ctx: ActiveContext, node: str, tag: str, made: str) -> str:
    """Kills the listener; "" when it was still listening, else how it had ended. `made`: the
    directory its start step made ("" when unknown: the stop step looks for it by its prefix)."""
    out = ctx.run(node, stop_listener(f"{PROBE_NAME}.listen-stop", listener_directory(tag, node), made), cleanup=True)
    if out.outcome is not Outcome.EXITED:
        return f"its state is unknown: the stop step {out.outcome.value}"
    if listener_alive(out.stdout):
        return ""
    state = listener_stop_state(out.stdout)
    if state.startswith("refused"):
        return "its directory was not the private one the start step made (left alone)"
    return "its directory was gone" if state == "nodir" else state


def _step_failed(out: Capture, what: str) -> Verdict:
    if out.outcome is Outcome.SKIPPED:
        return Verdict(Status.SKIPPED, f"{what} was not run: {out.detail}", "reachability", cut=out.cut)
    if out.outcome is Outcome.TIMEOUT:
        return Verdict(
            Status.TIMEOUT,
            f"{what} timed out: {out.detail}",
            "reachability",
            excerpt=excerpt(out.stdout + out.stderr),
            cut=out.cut,
        )
    if out.outcome is Outcome.UNREACHABLE:
        return Verdict(Status.UNREACHABLE, f"{what}: unreachable: {out.detail}", "reachability")
    first = first_line(out.stderr) or first_line(out.stdout) or out.detail or "no output"
    how = f"exited {out.exit_code}" if out.exit_code is not None else out.outcome.value
    return Verdict(Status.ERROR, f"{what} {how}: {first}", "reachability", excerpt=excerpt(out.stderr + out.stdout))


def _plan(
    want: NcclEnv, order: Sequence[str], masters: Mapping[str, Master], listeners: Mapping[str, Listener]
) -> Plan:
    """Each listening node connects to its master on MASTER_PORT and to the next listening node
    (inventory order, around a ring) on every reachability port."""
    plan = Plan()
    up = [n for n in order if n in listeners and listeners[n].problem is None]
    untestable: dict[tuple[str, int, str], list[str]] = {}
    for i, node in enumerate(up):
        targets = []
        master = masters.get(node)
        if master is not None:
            why = master.problem or ("" if master.node in up else f"no listener on {master.node}")
            if why:
                untestable.setdefault((master.node, master.port, f"{master.role}: {why}"), []).append(node)
            else:
                targets.append(Target(master.node, master.port, master.role))
        successor = up[(i + 1) % len(up)]
        if successor != node:
            targets += [Target(successor, p, "ring successor") for p in want.reachability.ports]
        if not targets and master is None:  # (an untestable master has a verdict of its own below)
            plan.verdicts.append(
                (
                    (node,),
                    Verdict(
                        Status.SKIPPED,
                        f"reachability not tested from {node}: no other node's listener to connect to",
                        "reachability",
                    ),
                )
            )
        # a port the target's listener could not hold is not tested: that node's verdict says why
        plan.runs[node] = [t for t in targets if listeners[t.node].ports.get(t.port) == "listening"]
        for t in targets:
            if t not in plan.runs[node]:
                plan.not_tested.setdefault((t.node, t.port), []).append(node)
    for (target, port, why), nodes in untestable.items():  # the target's own verdict says why, once
        plan.verdicts.append(
            (
                tuple(nodes),
                Verdict(Status.ERROR, f"cannot test reachability of {target}:{port} ({why})", f"{target}:{port}"),
            )
        )
    return plan


def _port_problem(ctx: ActiveContext, node: str, port: int, state: str, connectors: list[str]) -> Grouped:
    address = ctx.nodes[node].address
    kind, _, why = state.partition(": ")
    others = [n for n in connectors if n != node]
    untested = f"; connections to it from {', '.join(connectors)} were not tested" if connectors else ""
    if kind == "busy":
        message = (
            f"port busy: {address}:{port} is already in use on {node} ({why}): another job or service "
            f"holds it, and a job that needs it there cannot bind it{untested}"
        )
    else:
        message = f"cannot test reachability: {node} cannot listen on {address}:{port} ({why}){untested}"
    return (node, *others), Verdict(Status.ERROR, message, f"{node}:{port}", {"port": port, "state": state})


def _connect(ctx: ActiveContext, node: str, tag: str, targets: Sequence[Target], want: NcclEnv) -> Capture:
    probe = connect_to_listeners(
        f"{PROBE_NAME}.connect",
        tag,
        want.reachability.connect_timeout_s,
        [(ctx.nodes[t.node].address, t.port) for t in targets],
    )
    return ctx.run(node, probe)


def _judge_connections(
    node: str, targets: Sequence[Target], out: Capture, listeners: Mapping[str, Listener], want: NcclEnv
) -> Iterator[Grouped]:
    if out.outcome is Outcome.EXITED and out.exit_code == 127:
        yield (node,), Verdict(Status.ERROR, f"cannot test reachability: no python3 on {node}", "reachability")
        return
    if out.outcome is not Outcome.EXITED or out.exit_code != 0:
        yield (node,), _step_failed(out, f"cannot test reachability from {node}: the connection test")
        return
    results = connection_results(out.stdout)
    ct = fmt(want.reachability.connect_timeout_s)
    reached = []
    for i, t in enumerate(targets):
        kind, detail = results.get(i, ("error", "no result line"))
        where = f"{t.node}:{t.port}"
        pair = (node,) if t.node == node else (node, t.node)
        ended = listeners[t.node].ended
        if kind == "ok":
            reached.append(f"{where} ({t.role})")
        elif ended and kind in ("refused", "timeout", "unreachable", "silent"):
            yield (
                pair,
                Verdict(
                    Status.ERROR,
                    f"{node} -> {where} ({t.role}): not judged: nodecheck's listener on "
                    f"{t.node} did not last the test ({ended})",
                    where,
                    {"result": kind},
                ),
            )
        elif kind in ("refused", "timeout", "unreachable"):
            why = {
                "refused": "connection refused — a firewall or nothing listening (nodecheck's listener was up there)",
                "timeout": f"no answer within {ct} s — a firewall dropping packets or no route",
                "unreachable": f"{detail} — a firewall rejecting it or no route",
            }[kind]
            yield (
                pair,
                Verdict(
                    Status.FAIL,
                    f"{node} cannot reach {where} ({t.role}): {why}",
                    where,
                    {"result": kind},
                    {"result": "connected"},
                ),
            )
        elif kind in ("other", "silent"):
            got = f"it answered {detail}" if kind == "other" else f"nothing answered within {ct} s"
            yield (
                pair,
                Verdict(
                    Status.ERROR,
                    f"{node} -> {where} ({t.role}): connected, but not to nodecheck's "
                    f"listener ({got}): something else takes connections there",
                    where,
                    {"result": kind},
                ),
            )
        else:
            yield (
                pair,
                Verdict(
                    Status.ERROR,
                    f"{node} -> {where} ({t.role}): cannot test: {kind} {detail}".rstrip(),
                    where,
                    {"result": kind},
                ),
            )
    if reached:
        yield (
            (node,),
            Verdict(
                Status.PASS,
                f"reaches {'; '.join(reached)}",
                "reachability",
                {"reached": len(reached)},
                {"targets": len(targets)},
            ),
        )
