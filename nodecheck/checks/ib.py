"""InfiniBand port health: state, physical state, rate and count of the HCA ports ibstat shows."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from pydantic_core import PydanticCustomError

from nodecheck.core.model import Probe, Status, Verdict
from nodecheck.core.model import excerpt as bounded
from nodecheck.core.registry import Captures, check
from nodecheck.core.thresholds import Floor, fmt
from nodecheck.judging.drift import describe, group_by_value, strict_majority
from nodecheck.parsers.ibstat import Gap, IbPort, IbstatFacts, parse_ibstat

IBSTAT = Probe("ibstat", ("ibstat",), timeout_s=10)
HEALTHY = {"state": "Active", "physical_state": "LinkUp"}
FLEET = "fleet"  # expected_ports: the count a strict majority of the run's nodes show
# the count verdict a node gets under expected_ports: fleet, until the relate step judges it
_FLEET_MARK = "expected_from"
SET_IT = "set expected_ports: N in the playbook"


def _count_or_fleet(value: object) -> object:
    """expected_ports: a count (an int, not true/false or 8.0) or the word fleet; one plain message
    instead of one error per member of the union."""
    if value is None or value == FLEET or (type(value) is int and value >= 0):
        return value
    raise PydanticCustomError("count_or_fleet", "Input should be a valid integer >= 0 (a count of ports) or fleet")


class IbPorts(BaseModel):
    """Which ports ib.ports judges, and what it expects of them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    link_layer: Literal["InfiniBand", "Ethernet", "any"] = Field(
        "InfiniBand", description="which ports are judged: InfiniBand, Ethernet (RoCE) or any"
    )
    min_rate_gbps: float | None = Field(
        None,
        gt=0,
        strict=True,
        allow_inf_nan=False,
        description="fail a judged port whose rate is below this, in Gb/s (400 = NDR 4x, 200 = HDR 4x); "
        "unset: the rate is reported, not judged",
    )
    expected_ports: Annotated[
        Annotated[int, Field(ge=0, strict=True)] | Literal["fleet"] | None, BeforeValidator(_count_or_fleet)
    ] = Field(
        None,
        description="a count (0 or more): fail unless exactly this many ports are judged; fleet: the count a "
        "strict majority of the run's nodes show (a node below it fails, above it warns; one node alone, or "
        "no majority, is not judged: a warning, or an error where the nodes disagree); unset: no count, but "
        "zero is an error",
    )
    devices: list[str] | None = Field(
        None,
        min_length=1,
        description="CA names to judge (mlx5_0, ...); each must be present with a port of link_layer; unset: every CA",
    )

    @property
    def related(self) -> bool:
        """The count is judged against the run's other nodes: the gate retries them all, not the
        suspects alone (a node retried alone has no fleet)."""
        return self.expected_ports == FLEET

    @property
    def kind(self) -> str:
        """How a message names the judged ports: "InfiniBand ", "Ethernet ", or "" for any."""
        return "" if self.link_layer == "any" else f"{self.link_layer} "


def fleet_port_count(by_node: Mapping[str, Sequence[Verdict]], want: IbPorts) -> dict[str, list[Verdict]]:
    """Under expected_ports: fleet, each node's port count against the count a strict majority of
    the run's nodes show (the runner's relate step: every node's verdicts at once, same count and
    order back). A node below it FAILs, above it WARNs. Nodes that could not be counted (unreachable,
    output cut off) take no part in the vote but count in the run: a majority of the readable few
    is not a majority of the run. Without one the count is not judged, never passed: WARN when too
    few nodes could say, ERROR when the nodes disagree (drift's rule for a tie)."""
    out = {node: list(verdicts) for node, verdicts in by_node.items()}
    if want.expected_ports != FLEET:
        return out
    where: dict[str, int] = {}  # node -> the index of its count verdict
    counts: dict[str, int] = {}
    for node, verdicts in out.items():
        for i, v in enumerate(verdicts):
            if v.observed.get(_FLEET_MARK) == FLEET and isinstance(n := v.observed.get("ports"), int):
                where[node], counts[node] = i, n
    total = len(out)
    if total < 2:
        return out  # the node's own "not judged" stands
    groups = group_by_value({node: str(n) for node, n in counts.items()})
    majority = strict_majority(groups, total)
    for node, i in where.items():
        out[node][i] = _fleet_count_verdict(out[node][i], counts[node], majority, groups, total, want)
    return out


def _fleet_count_verdict(
    own: Verdict, count: int, majority: str | None, groups: Mapping[str, Sequence[str]], total: int, want: IbPorts
) -> Verdict:
    seen = _ports(count, want.kind)
    if majority is None:
        if len(groups) > 1:
            return replace(
                own,
                status=Status.ERROR,
                message=f"{seen}; the nodes disagree and no count is on more than half of the run's {total} "
                f"nodes ({describe(groups)}): {SET_IT}",
            )
        counted = sum(len(nodes) for nodes in groups.values())
        return replace(
            own,
            message=f"{seen}, count not judged: expected_ports: fleet needs a count on more than half of the "
            f"run's {total} nodes, and {counted} could be counted; {SET_IT}",
        )
    agree = f"{len(groups[majority])} of {total} nodes"
    expected = {"ports": int(majority), "from": f"{FLEET}: {agree}"}
    if count == int(majority):
        return Verdict(Status.PASS, f"{seen}, as on {agree} (expected_ports: {FLEET})", "", own.observed, expected)
    if count < int(majority):
        return Verdict(
            Status.FAIL,
            f"{seen}, expected {majority} (the count on {agree}; expected_ports: {FLEET})",
            "",
            own.observed,
            expected,
        )
    return Verdict(
        Status.WARN,
        f"{seen}, more than the {majority} on {agree} (expected_ports: {FLEET}): another kind of node? "
        "set expected_ports: N for it",
        "",
        own.observed,
        expected,
    )


@check("ib.ports", probes=[IBSTAT], params=IbPorts, relate=fleet_port_count)
def ports(out: Captures, want: IbPorts) -> Iterator[Verdict]:
    """Every judged HCA port is Active/LinkUp at or above the minimum rate, in the expected number.

    expected_ports is a count, or `fleet`: the count a strict majority of the run's nodes show."""
    capture = out[IBSTAT.name]
    facts = parse_ibstat(capture.stdout)
    if facts.no_devices:
        yield _no_device_verdict(capture.exit_code, want)
        return
    listed = [p for p in facts.ports if want.devices is None or p.ca in want.devices]
    judged = [p for p in listed if want.link_layer in ("any", p.link_layer)]
    gaps = [g for g in facts.incomplete if _listed_gap(g, want)]
    yield from _device_verdicts(facts, listed, want)
    yield from (_gap_verdict(gap) for gap in gaps)
    if not gaps:  # cut-off output cannot be counted; its ERROR stands instead
        yield from _count_verdicts(judged, listed, want)
    yield from (_port_verdict(port, want) for port in judged)


def _no_device_verdict(exit_code: int | None, want: IbPorts) -> Verdict:
    """ibstat printed nothing. With exit 0 that is its way of saying the node has no RDMA device
    (Debian 12, driver unloaded or HCAs gone): a judged FAIL wherever the playbook expects a port.
    With no expectation it fails too: ib.ports runs on this node because it is meant to have ports,
    and an ERROR never drains, so a node that lost every HCA would keep taking jobs that die in
    NCCL init. A node without IB by design says so with expected_ports: 0."""
    if exit_code != 0:  # nothing, and not a clean exit: no fact either way
        return Verdict(
            Status.ERROR,
            f"ibstat printed nothing and exited {exit_code}: cannot tell whether there is a device",
            observed={"exit_code": exit_code},
        )
    said = "no InfiniBand device found (ibstat printed nothing, exit 0)"
    kind = "" if want.link_layer == "any" else f"{want.link_layer} "
    observed = {"cas": [], "ports": 0}
    if want.devices:
        return Verdict(
            Status.FAIL, f"{said}; expected {', '.join(want.devices)}", "", observed, {"devices": list(want.devices)}
        )
    if want.expected_ports == 0:
        return Verdict(Status.PASS, f"{said}; expected 0 ports", "", observed, {"ports": 0})
    if isinstance(want.expected_ports, int):
        return Verdict(
            Status.FAIL,
            f"{said}; expected {_ports(want.expected_ports, kind)}",
            "",
            observed,
            {"ports": want.expected_ports},
        )
    return Verdict(
        Status.FAIL,
        f"{said}; expected at least one {kind}port (set expected_ports: 0 for a node without any)",
        "",
        observed,
        {"ports": ">= 1"},
    )


def _listed_gap(gap: Gap, want: IbPorts) -> bool:
    ca = gap.subject.split("/")[0]
    return want.devices is None or not ca or ca in want.devices


def _gap_verdict(gap: Gap) -> Verdict:
    return Verdict(Status.ERROR, f"{gap} (ibstat output incomplete)", gap.subject, excerpt=bounded(gap.raw))


def _device_verdicts(facts: IbstatFacts, listed: list[IbPort], want: IbPorts) -> Iterator[Verdict]:
    """A listed device must be there and carry a port of the judged link layer."""
    for name in want.devices or ():
        if name not in facts.ca_names:
            # a truncated output may have cut the device off: that is not proof it is missing
            status = Status.ERROR if facts.incomplete else Status.FAIL
            yield Verdict(
                status,
                f"{name}: not present, expected in devices list",
                name,
                {"cas": list(facts.ca_names)},
                {"device": name},
            )
            continue
        own = [p for p in listed if p.ca == name]
        if own and want.link_layer != "any" and all(p.link_layer != want.link_layer for p in own):
            yield Verdict(
                Status.FAIL,
                f"{name}: no {want.link_layer} port, found {_layers(own)}",
                name,
                {"link_layers": [p.link_layer for p in own]},
                {"link_layer": want.link_layer},
                bounded("\n".join(p.raw for p in own)),
            )


def _count_verdicts(judged: list[IbPort], listed: list[IbPort], want: IbPorts) -> Iterator[Verdict]:
    kind = want.kind
    count, expected = len(judged), want.expected_ports
    observed: dict[str, object] = {"ports": count, "subjects": [p.where for p in judged]}
    if not isinstance(expected, int):
        if not judged:  # nothing judged is not a pass
            on = f" on {', '.join(want.devices)}" if want.devices else ""
            yield Verdict(
                Status.ERROR, f"no {kind}ports{on} in ibstat output (found {_layers(listed)})", observed={"ports": 0}
            )
        elif expected == FLEET:  # judged once every node is (fleet_port_count); alone, it cannot say
            yield Verdict(
                Status.WARN,
                f"{_ports(count, kind)}, count not judged: expected_ports: fleet needs other nodes in the run to "
                f"compare with (this run has 1); {SET_IT}",
                "",
                {**observed, _FLEET_MARK: FLEET},
                {"ports": FLEET},
            )
        return
    if count != expected:
        yield Verdict(Status.FAIL, f"{_ports(count, kind)}, expected {expected}", "", observed, {"ports": expected})
    elif count == 0:  # no port verdict follows, so the count speaks for itself
        yield Verdict(Status.PASS, f"{_ports(0, kind)}, expected 0", "", observed, {"ports": 0})


def _port_verdict(port: IbPort, want: IbPorts) -> Verdict:
    where = port.where
    seen = {"state": port.state, "physical_state": port.physical_state, "rate_gbps": port.rate_gbps}
    if (port.state, port.physical_state) != (HEALTHY["state"], HEALTHY["physical_state"]):
        return Verdict(
            Status.FAIL,
            f"{where}: {port.state}/{port.physical_state}, expected Active/LinkUp",
            where,
            seen,
            dict(HEALTHY),
            bounded(port.raw),
        )
    if want.min_rate_gbps is None:
        return Verdict(Status.PASS, f"{where}: Active/LinkUp, {fmt(port.rate_gbps)} Gb/s", where, seen, dict(HEALTHY))
    expected = {**HEALTHY, "min_rate_gbps": want.min_rate_gbps}
    rate = Floor(fail_below=want.min_rate_gbps).judge(port.rate_gbps, what=f"{where} rate", unit="Gb/s", subject=where)
    if rate.status is not Status.PASS:  # keep Floor's message; observed keys match the other verdicts
        return replace(rate, observed=seen, expected=expected, excerpt=bounded(port.raw))
    return Verdict(Status.PASS, f"{where}: Active/LinkUp, {fmt(port.rate_gbps)} Gb/s", where, seen, expected)


def _layers(ports: Iterable[IbPort]) -> str:
    """ "4 Ethernet", "1 InfiniBand, 2 Ethernet", "none"."""
    counts = Counter(p.link_layer for p in ports)
    return ", ".join(f"{n} {layer}" for layer, n in counts.items()) or "none"


def _ports(count: int, kind: str) -> str:
    return f"{count} {kind}port" + ("" if count == 1 else "s")
