"""Register "one value per node, all nodes agree or match a pin" checks from a per-node reader."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import cast

from nodecheck.core.model import Probe, Status
from nodecheck.core.registry import Captures, check
from nodecheck.judging.drift import PinOrDrift, gather, judge_values

Reader = Callable[[Captures, PinOrDrift], str]


@dataclass(frozen=True)
class ValueCheck:
    """What `nodecheck baseline` and `nodecheck facts` need to read the same value a check judges."""

    name: str  # "nccl.version"
    probes: Callable[[PinOrDrift], Sequence[Probe]]
    read: Reader
    params: type[PinOrDrift] = PinOrDrift  # the check's own params (kernel.cmdline's adds `ignore`)


VALUE_CHECKS: dict[str, ValueCheck] = {}  # filled as each check module is imported: read value_checks()


@functools.cache  # all loaded once: `facts` reads a value per node and check
def value_checks() -> dict[str, ValueCheck]:
    """Every value check, in the checks' table order: each registers when its module is imported,
    and a command loads only the modules its playbook names (nodecheck.checks.checks_named), so
    `facts` and `baseline` load them all first."""
    from nodecheck.checks import CONTENTS, all_checks

    all_checks()
    ordered = {name: VALUE_CHECKS[name] for name in CONTENTS if name in VALUE_CHECKS}
    return {**ordered, **VALUE_CHECKS}


def value_check(name: str, *, what: str, probes, params: type = PinOrDrift, doc: str) -> Callable:
    """Decorate a reader `(captures, params) -> value` (raising Absent or ParseError) to register
    a fleet check that pins and/or compares that value across the run's nodes."""

    def register(read: Reader) -> Reader:
        def judge(by_node: Mapping[str, Captures], want: PinOrDrift) -> Iterator:
            values, problems = gather(
                by_node, lambda out: read(cast(Captures, out), want), what=what, absent=want.absent
            )
            yield from problems
            # unreadable nodes may hold any value: the reference must be a majority with them counted
            unread = sum(1 for _, v in problems if v.status is Status.ERROR)
            yield from judge_values(values, want, what=what, total=len(values) + unread)

        judge.__doc__ = doc
        # the judge stands for the reader's check: `a.b` is function `b` of the reader's module
        # (tests/checks/test_registry_layout.py), which tracebacks and the checks reference name
        judge.__name__ = judge.__qualname__ = name.split(".", 1)[1]
        judge.__module__ = read.__module__
        check(name, probes=probes, params=params, scope="fleet")(judge)
        probe_list = probes if callable(probes) else (lambda _params, _p=tuple(probes): _p)
        VALUE_CHECKS[name] = ValueCheck(name, probe_list, read, params)
        return read

    return register
