"""Judging rules of nccl.env, one facet each, pure (the job's effective environment and one node's
facts in, verdicts out): NCCL_SOCKET_IFNAME, NCCL_IB_HCA, PyTorch's variables, its collective timeouts
and flight recorder, and ulimit -l. nodecheck/checks/nccl_env.py applies them to each node, and
nodecheck/job/invariants.py applies the PyTorch ones to a job's environment.

How NCCL and PyTorch read the variables is in nodecheck/judging/nccl_settings.py; the facts come from
nodecheck/parsers/nccl_config.py.

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

from collections.abc import Mapping

from nodecheck.core.errors import ParseError
from nodecheck.core.model import Status, Verdict, excerpt
from nodecheck.judging.nccl_settings import (
    ASYNC_MODES,
    ASYNC_VARS,
    BLOCKING_VARS,
    DEFAULT_TRACE_FILE,
    JOB,
    TORCH_BOOLS,
    TORCH_INTS,
    TRACE_BUFFER_VARS,
    TRACE_FILE_VARS,
    Env,
    NcclList,
    first_set,
    parse_nccl_list,
    said,
    socket_family,
    strtoll,
    torch_bool,
    torch_int,
)
from nodecheck.parsers.nccl_config import Address, NodeFacts, RdmaPortState


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
