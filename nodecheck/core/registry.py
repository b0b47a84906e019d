"""The table of checks: a check is a probe list plus a pure judge, registered under its dotted name."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from nodecheck.core.model import Capture, Probe, Verdict

Captures = Mapping[str, Capture]  # a node's captures, keyed by probe name
# scope "node": judge(captures, params) -> Verdicts about that node.
# scope "fleet": judge({node: captures}, params) -> (nodes, Verdict) pairs; it sees every node whose
# probes ran to completion at once, so it can compare them (drift).
# scope "active": run(ctx, params) -> (nodes, Verdict) pairs; it runs after every node's probes came
# back and may run more commands on the nodes through ctx (active.ActiveContext): pairwise bandwidth,
# a port flap. Its `probes` are the passive facts it needs first (ibstat for the HCAs).
SCOPES = ("node", "fleet", "active")
# A check's params: a registered check's pydantic model (its playbook block is validated by it), or
# for the checks that job.invariants builds in code, the JobContext dataclass that job-check fills in.
ParamsT = TypeVar("ParamsT")
ModelT = TypeVar("ModelT", bound=BaseModel)
# judge(first, params): what `first` is and what the judge yields (Verdicts, or (nodes, Verdict) pairs)
# depend on the scope (above), on which only the callers (run.runner, run.active) dispatch
Judge = Callable[[Any, ParamsT], Iterable[Any]]
ProbeList = Sequence[Probe] | Callable[[ParamsT], Sequence[Probe]]
JudgeT = TypeVar("JudgeT", bound=Callable[..., Any])
Relate = Callable[[Mapping[str, Sequence[Verdict]], ParamsT], Mapping[str, Sequence[Verdict]]]


@dataclass(frozen=True)
class CheckSpec(Generic[ParamsT]):
    name: str  # "ib.ports"
    judge: Judge[ParamsT]
    probes: ProbeList[ParamsT]  # static, or a function of the validated params
    params: type[ParamsT]  # a registered check's playbook block is validated by it
    scope: str = "node"  # "node", "fleet" or "active"
    # probes run again after the active checks, on nodes whose first probes ran: a before/after
    # pair (IB error counters over the window in which the pair tests loaded the links)
    after: ProbeList[ParamsT] = ()
    # a template is planned once per label: the playbook key `command.<label>` runs the check
    # registered as `command` under that name, so results, drain reasons and history carry it
    template: bool = False
    # a node-scope check whose verdicts are also judged against each other once every node is judged
    # (fleet-relative bands): relate({node: its verdicts}, params) -> {node: verdicts, same count
    # and order}. The gate then retries every node, not only the suspects (a suspect alone has no peers)
    relate: Relate[ParamsT] | None = None

    @property
    def description(self) -> str:
        """The first paragraph of the judge's docstring, on one line: what `nodecheck checks` prints."""
        doc = (self.judge.__doc__ or "").strip()
        return " ".join(doc.split("\n\n")[0].split())

    def probes_for(self, params: ParamsT) -> tuple[Probe, ...]:
        return tuple(self.probes(params) if callable(self.probes) else self.probes)

    def after_probes_for(self, params: ParamsT) -> tuple[Probe, ...]:
        return tuple(self.after(params) if callable(self.after) else self.after)


# every registered check, whatever its own params model
CHECKS: dict[str, CheckSpec[Any]] = {}


def check(
    name: str,
    *,
    probes: ProbeList[ModelT],
    params: type[ModelT],
    scope: str = "node",
    after: ProbeList[ModelT] = (),
    template: bool = False,
    relate: Relate[ModelT] | None = None,
) -> Callable[[JudgeT], JudgeT]:
    """Register a judge: `@check("ib.ports", probes=[IBSTAT], params=IbPorts)`."""
    if scope not in SCOPES:
        raise ValueError(f"check {name}: scope must be one of {SCOPES}, got {scope!r}")

    def register(judge: JudgeT) -> JudgeT:
        if name in CHECKS:
            raise ValueError(f"check {name} registered twice")
        CHECKS[name] = CheckSpec(name, judge, probes, params, scope, after, template, relate)
        return judge

    return register
