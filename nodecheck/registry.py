"""The table of checks: a check is a probe list plus a pure judge, registered under its dotted name."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Mapping, Sequence, Union

from nodecheck.model import Capture, Probe, Verdict

Captures = Mapping[str, Capture]               # a node's captures, keyed by probe name
Judge = Callable[[Captures, object], Iterator[Verdict]]
ProbeList = Union[Sequence[Probe], Callable[[object], Sequence[Probe]]]


@dataclass(frozen=True)
class CheckSpec:
    name: str                                  # "ib.ports"
    judge: Judge
    probes: ProbeList                          # static, or a function of the validated params
    params: type                               # a pydantic model: the playbook block is validated by it
    scope: str = "node"                        # "node" now; "fleet" and "pair" arrive with drift/fabric

    @property
    def description(self) -> str:
        """The first line of the judge's docstring: what `nodecheck checks` prints."""
        return (self.judge.__doc__ or "").strip().splitlines()[0] if self.judge.__doc__ else ""

    def probes_for(self, params: object) -> tuple[Probe, ...]:
        return tuple(self.probes(params) if callable(self.probes) else self.probes)


CHECKS: dict[str, CheckSpec] = {}


def check(name: str, *, probes: ProbeList, params: type, scope: str = "node"):
    """Register a judge: `@check("ib.ports", probes=[IBSTAT], params=IbPorts)`."""
    def register(judge: Judge) -> Judge:
        if name in CHECKS:
            raise ValueError(f"check {name} registered twice")
        CHECKS[name] = CheckSpec(name, judge, probes, params, scope)
        return judge
    return register


def all_checks() -> Mapping[str, CheckSpec]:
    """Every registered check; importing nodecheck.checks fills the table."""
    import nodecheck.checks  # noqa: F401  (the import registers the checks)
    return CHECKS
