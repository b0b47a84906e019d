"""A check's name gives its place: check `a.b` is the function `b` in nodecheck.checks.a, or in
nodecheck.checks.a_x where `b` starts with `x` (gpu.xid: checks/gpu_xid.py:xid;
nccl.allreduce_single: checks/nccl_allreduce.py:allreduce_single); a one-word check `a` (mem, cpu)
is the function `a` in nodecheck.checks.a."""

from __future__ import annotations

import importlib

import pytest

from nodecheck.checks import all_checks
from nodecheck.checks.values import value_checks

PACKAGE = "nodecheck.checks"


def place_problem(name: str, module: str, function: str) -> str | None:
    """Why a check registered as `name` from `module`.`function` is not where its name says, or None."""
    family, _, leaf = name.partition(".")
    if not leaf and family and "." not in name:  # a one-word check: mem is checks/mem.py:mem
        leaf = family
    if not leaf or "." in leaf:
        return f"{name}: a check name is family.check or one word"
    if function != leaf:
        return f"{name}: the function is named {function!r}, expected {leaf!r}"
    if module == f"{PACKAGE}.{family}":
        return None
    prefix = f"{PACKAGE}.{family}_"
    if module.startswith(prefix) and "." not in module[len(prefix) :] and leaf.startswith(module[len(prefix) :]):
        return None
    return (
        f"{name}: registered in {module}, expected {PACKAGE}.{family} "
        f"(or {PACKAGE}.{family}_X where {leaf!r} starts with X)"
    )


@pytest.mark.parametrize(
    "name, module, function, problem",
    [
        ("ib.ports", "nodecheck.checks.ib", "ports", None),
        ("gpu.xid", "nodecheck.checks.gpu_xid", "xid", None),
        ("nccl.allreduce_single", "nodecheck.checks.nccl_allreduce", "allreduce_single", None),
        ("nccl.env", "nodecheck.checks.nccl_env", "env", None),
        ("ib.pairs", "nodecheck.checks.ib_pairs", "pair_bandwidth", "the function is named 'pair_bandwidth'"),
        ("ib.counters", "nodecheck.checks.ib_errors", "counters", "registered in nodecheck.checks.ib_errors"),
        ("kernel.version", "nodecheck.checks.versions", "version", "registered in nodecheck.checks.versions"),
        ("gpu.xid", "nodecheck.checks.kernel", "xid", "registered in nodecheck.checks.kernel"),
        ("mem", "nodecheck.checks.mem", "mem", None),
        ("mem", "nodecheck.checks.node", "mem", "registered in nodecheck.checks.node"),
        ("a.b.c", "nodecheck.checks.a", "c", "family.check or one word"),
    ],
)
def test_the_rule_itself(name, module, function, problem):
    said = place_problem(name, module, function)
    assert said is None if problem is None else problem in said


def test_every_check_is_the_function_its_name_gives():
    problems = [
        place_problem(name, spec.judge.__module__, spec.judge.__name__) for name, spec in sorted(all_checks().items())
    ]
    assert [p for p in problems if p] == []


def test_the_named_function_is_the_check_itself():
    """Not only the judge's own idea of its name: the module really holds it under that name (for a
    value check, the reader its generated judge applies)."""
    wrong = []
    for name, spec in sorted(all_checks().items()):
        module = importlib.import_module(spec.judge.__module__)
        found = getattr(module, spec.judge.__name__, None)
        meant = value_checks()[name].read if name in value_checks() else spec.judge
        if found is not meant:
            wrong.append(f"{name}: {spec.judge.__module__}.{spec.judge.__name__} is {found!r}")
    assert wrong == []


def test_a_value_checks_judge_is_named_after_its_check_and_reader():
    for name in value_checks():
        judge = all_checks()[name].judge
        assert (judge.__module__, judge.__qualname__) == (value_checks()[name].read.__module__, name.split(".")[1])
