"""nccl.env: the job's NCCL and PyTorch environment against each node, then TCP reachability between
the nodes on the rendezvous ports.

A job's environment decides whether NCCL finds a usable socket interface (NCCL_SOCKET_IFNAME) and the
HCAs it is told to use (NCCL_IB_HCA), whether a hung collective ever ends (PyTorch's watchdog) and
leaves a trace (the flight recorder), and whether RDMA may pin host memory (ulimit -l). The values
come from the playbook's `env`, overridden by `--job-env FILE`, over what nodecheck's own session
sees on the node (the Slurm prolog's environment when nodecheck runs as the prolog). Every verdict
names where its value came from.

Here: the parameters, the check and the reachability test's orchestration. The probe script is
nodecheck/probes/nccl_env.py, its output is read by nodecheck/parsers/nccl_config.py, and the per-facet
judging rules (with their NCCL and PyTorch references) are nodecheck/judging/nccl_env_rules.py; how NCCL
and PyTorch read the variables is in nodecheck/judging/nccl_settings.py, and the reachability test's
scripts are in nodecheck/probes/reachability.py.
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
from nodecheck.judging.nccl_env_rules import (
    flight_recorder,
    ib_hca,
    memlock,
    socket_ifname,
    timeouts,
    torch_values,
    unreadable,
)
from nodecheck.judging.nccl_settings import (
    DEFAULT_MASTER_PORT,
    TRACE_FILE_VARS,
    Env,
    effective_env,
    said,
)
from nodecheck.parsers.nccl_config import PROBE_NAME, NodeFacts, first_line, parse_probe
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
from nodecheck.probes.env_policy import EnvName, EnvValue
from nodecheck.probes.nccl_env import env_probe
from nodecheck.probes.pairtest import ARGUMENT
from nodecheck.probes.reachability import (
    READY_WAIT_S,
    connect_to_listeners,
    listener_directory,
    start_listener,
    stop_listener,
)
from nodecheck.probes.shell import JOB_USER_MAX, JOB_USER_PATTERN

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
        description="the job's user (a uid or a name), who opens the NCCL_CONF_FILE the job names (never "
        "root): a file of theirs is read even when private; set by nodecheck from --job-env's owner or the "
        "prolog's SLURM_JOB_UID; \"\": opened as nobody, so only root's files everyone may reach and read",
    )


# --- the passive probe (its script: nodecheck/probes/nccl_env.py) --------------------------------------


def probes(want: NcclEnv) -> list[Probe]:
    """One probe; the job's dump prefixes reach it as positional arguments, never inside the script."""
    prefixes = [(f"job:{name}", want.env[name]) for name in TRACE_FILE_VARS if name in want.env]
    return [env_probe(want.node_env, want.env.get("NCCL_CONF_FILE", ""), want.job_user, prefixes)]


# --- judges (pure: facts and the environment in, verdicts out; the rules: judging/nccl_env_rules.py) ---


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
