"""Gather and read every node's facts (GPU, versions, HCAs, image digest) without judging them:
what `nodecheck facts` prints and what `nodecheck baseline` turns into pins."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from nodecheck.checks.container import ContainerDigest
from nodecheck.checks.gpu import GPU, parse_gpu_probe
from nodecheck.checks.ib import IBSTAT
from nodecheck.checks.values import value_checks
from nodecheck.core.errors import ParseError
from nodecheck.core.hostlist import fold
from nodecheck.core.model import Capture, Node, Outcome, Probe
from nodecheck.core.progress import NULL_PROGRESS, Progress
from nodecheck.judging.drift import Absent, PinOrDrift, group_by_value
from nodecheck.parsers.ibstat import parse_ibstat
from nodecheck.parsers.sections import split_sections
from nodecheck.parsers.versions import parse_ldconfig_nccl, parse_nccl_conf, parse_nccl_env, parse_nccl_header
from nodecheck.probes.kernel_log import KERNEL_LOG, read_kernel_log
from nodecheck.probes.versions import VERSIONS
from nodecheck.transport import Transport
from nodecheck.transport.fanout import run_probes

ANY = PinOrDrift(drift="fail")  # readers ignore their params except container.digest


@dataclasses.dataclass(frozen=True)
class Gathered:
    nodes: tuple[str, ...]
    captures: Mapping[tuple[str, str], Capture]
    value_checks: tuple[str, ...]
    image: ContainerDigest | None
    incomplete: str


def value_params(name: str, image: ContainerDigest | None) -> PinOrDrift:
    if name != "container.digest":
        # the check's own defaults where it has more than PinOrDrift (kernel.cmdline's `ignore`)
        own = value_checks()[name].params
        return ANY if own is PinOrDrift else own()
    assert image is not None, "container.digest is gathered only with an image (gather)"
    return image


def gather(
    nodes: Sequence[Node],
    transport: Transport,
    *,
    fanout: int,
    deadline_s: float,
    image: ContainerDigest | None = None,
    stop=None,
    progress: Progress = NULL_PROGRESS,
) -> Gathered:
    """Run every fact probe once per node (the container probe only when an image is given);
    `progress` hears the phase "facts", a node at a time."""
    checks = value_checks()
    names = tuple(n for n in checks if n != "container.digest" or image is not None)
    probes: dict[str, Probe] = {p.name: p for p in (GPU, IBSTAT, KERNEL_LOG, VERSIONS)}
    for name in names:
        for p in checks[name].probes(value_params(name, image)):
            probes[p.name] = p
    progress.phase("facts", len(nodes))
    out = run_probes(
        transport,
        {n: tuple(probes.values()) for n in nodes},
        fanout=fanout,
        deadline=time.monotonic() + deadline_s,
        stop=stop,
        progress=progress,
    )
    return Gathered(tuple(n.name for n in nodes), out.captures, names, image, out.incomplete)


def _blocked(c: Capture) -> str | None:
    if c.outcome is not Outcome.EXITED:
        return f"{c.outcome.value}: {c.detail}" if c.detail else c.outcome.value
    if c.exit_code != 0:
        first = next((ln for ln in (c.stderr + c.stdout).splitlines() if ln.strip()), "")
        return f"{c.argv[0]} exited {c.exit_code}: {first.strip()}"
    return None


def read_value(g: Gathered, node: str, name: str) -> tuple[str | None, str | None]:
    """(value, None) or (None, why not)."""
    check = value_checks()[name]
    params = value_params(name, g.image)
    mine = {p.name: g.captures[(node, p.name)] for p in check.probes(params)}
    for c in mine.values():
        if why := _blocked(c):
            return None, why
    try:
        return check.read(mine, params), None
    except Absent as e:
        return None, f"absent: {e}"
    except ParseError as e:
        return None, f"cannot read {e.tool} output: {e.reason}"


def _read(g: Gathered, node: str, probe: Probe, parse: Callable[[str], Any]) -> Any:
    c = g.captures[(node, probe.name)]
    if why := _blocked(c):
        return {"error": why}
    try:
        return _plain(parse(c.stdout))
    except ParseError as e:
        return {"error": f"cannot read {e.tool} output: {e.reason}"}


def node_facts(g: Gathered, node: str) -> dict[str, Any]:
    values = {}
    for name in g.value_checks:
        value, why = read_value(g, node, name)
        values[name] = value if why is None else {"error": why}
    return {
        "values": values,
        "gpu": _read(g, node, GPU, parse_gpu_probe),
        "hca": _read(g, node, IBSTAT, lambda text: parse_ibstat(text).cas),
        "kernel_log": _read(g, node, KERNEL_LOG, _kernel_log),
        "nccl": _read(g, node, VERSIONS, _nccl),
    }


def _nccl(text: str) -> dict[str, Any]:
    """What the node has of NCCL: the libraries the loader cache resolves, the header's version
    (NCCL_VERSION_CODE) where one is installed, net plugins, nccl.conf and NCCL_* settings."""
    sections = split_sections(text, "versions probe")

    def ok(name: str) -> str | None:
        section = sections.get(name)
        return section.text if section is not None and section.ok else None

    libs = parse_ldconfig_nccl(ok("nccl-libs") or "")
    header = ok("nccl-header")
    return {
        "libraries": libs.libs,
        "version": libs.version,
        "conflicting": libs.conflicting,
        "net_plugins": libs.net_plugins,
        "header_version": parse_nccl_header(header) if header else None,
        "header_path": sections.facts.get("nccl-header-path"),
        "nccl_conf": parse_nccl_conf(ok("nccl-conf") or ""),
        "env": parse_nccl_env(ok("nccl-env") or ""),
    }


def _kernel_log(text: str) -> dict[str, Any]:
    """Every Xid and OOM kill the node's kernel log holds, unjudged (no window applied)."""
    log, now, source, uptime = read_kernel_log(
        {KERNEL_LOG.name: Capture("", KERNEL_LOG.name, KERNEL_LOG.argv, Outcome.EXITED, 0, text, "", 0.0)}
    )
    return {
        "source": source,
        "lines": log.lines,
        "node_clock": now,
        "uptime_s": uptime,
        "first_time": log.first_time,
        "xids": log.xids,
        "ooms": log.ooms,
        "unreadable": log.unreadable,
    }


def all_facts(g: Gathered) -> dict[str, Any]:
    return {"nodes": {n: node_facts(g, n) for n in g.nodes}, "incomplete": g.incomplete or None}


def _plain(value: Any) -> Any:
    """Dataclasses, tuples, sets and datetimes as JSON-ready values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(_plain(v) for v in value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, datetime):
        return value.isoformat()
    return value


@dataclasses.dataclass(frozen=True)
class Baseline:
    pins: dict[str, str]  # check → the value every node agrees on
    disagreements: dict[str, str]  # check → "2.23.4 on node[1-3], 2.21.5 on node4"
    unreadable: dict[str, str]  # check → "node4: cannot read ..."

    @property
    def clean(self) -> bool:
        return not self.disagreements and not self.unreadable


def baseline(g: Gathered) -> Baseline:
    """The pins a known-good set of nodes agrees on; anything they disagree on is not pinned."""
    pins, disagree, unreadable = {}, {}, {}
    for name in g.value_checks:
        values, problems = {}, []
        for node in g.nodes:
            value, why = read_value(g, node, name)
            if why is None:
                assert value is not None  # read_value: (value, None) or (None, why)
                values[node] = value
            else:
                problems.append((node, why))
        if problems:
            unreadable[name] = "; ".join(f"{n}: {why}" for n, why in problems[:5]) + (
                f"; and {len(problems) - 5} more nodes" if len(problems) > 5 else ""
            )
        groups = group_by_value(values)
        if len(groups) == 1 and not problems:
            pins[name] = next(iter(groups))
        elif len(groups) > 1:
            disagree[name] = ", ".join(f"{v} on {fold(n)}" for v, n in groups.items())
    return Baseline(pins, disagree, unreadable)
