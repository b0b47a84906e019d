"""InfiniBand port health: state, physical state, rate and count of the HCA ports ibstat shows."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from nodecheck.core.model import Probe, Status, Verdict
from nodecheck.core.model import excerpt as bounded
from nodecheck.core.registry import Captures, check
from nodecheck.core.thresholds import Floor, fmt
from nodecheck.parsers.ibstat import Gap, IbPort, IbstatFacts, parse_ibstat

IBSTAT = Probe("ibstat", ("ibstat",), timeout_s=10)
HEALTHY = {"state": "Active", "physical_state": "LinkUp"}


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
    expected_ports: int | None = Field(
        None,
        ge=0,
        strict=True,
        description="fail unless exactly this many ports are judged; unset: no count, but zero is an error",
    )
    devices: list[str] | None = Field(
        None,
        min_length=1,
        description="CA names to judge (mlx5_0, ...); each must be present with a port of link_layer; unset: every CA",
    )


@check("ib.ports", probes=[IBSTAT], params=IbPorts)
def ports(out: Captures, want: IbPorts) -> Iterator[Verdict]:
    """Every judged HCA port is Active/LinkUp at or above the minimum rate, in the expected number."""
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
    if want.expected_ports is not None:
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
    kind = "" if want.link_layer == "any" else f"{want.link_layer} "
    count, expected = len(judged), want.expected_ports
    if expected is None:
        if not judged:  # nothing judged is not a pass
            on = f" on {', '.join(want.devices)}" if want.devices else ""
            yield Verdict(
                Status.ERROR, f"no {kind}ports{on} in ibstat output (found {_layers(listed)})", observed={"ports": 0}
            )
        return
    observed = {"ports": count, "subjects": [p.where for p in judged]}
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
