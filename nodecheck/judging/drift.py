"""Pure cross-node judging: group nodes by a fact's value and say which groups drift, and why.

A fleet check reads one value per node (a version, a digest) with the same pure parser a node
check uses, then judges the values together. The reference is the pinned value when the playbook
gives one, else a strict majority; a tie is an ERROR asking for a pin, never a guess.
"""

from __future__ import annotations

import traceback
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from nodecheck.core.errors import ParseError
from nodecheck.core.hostlist import fold
from nodecheck.core.model import Status, Verdict, excerpt
from nodecheck.core.thresholds import Action

Grouped = tuple[tuple[str, ...], Verdict]  # (the nodes a verdict is about, the verdict)


class Absent(Exception):
    """The thing a fleet check reads is not on the node at all (no NCCL library, image not
    pulled): that node fails on its own and takes no part in the vote."""


class PinOrDrift(BaseModel):
    """Parameters every version/digest check accepts."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    expect: str | list[str] | None = Field(
        None, description="the pinned value, or a list of allowed values (nodecheck baseline writes these)"
    )
    drift: Action = Field(
        "fail",
        description="all nodes of the run must agree: fail, warn, or off (default: fail; off "
        "when expect: is given, so a list of allowed values allows each of them)",
    )
    absent: Literal["fail", "warn"] = Field(
        "fail", description="a node without the thing at all (no host NCCL, image not pulled): fail or warn"
    )

    @model_validator(mode="before")
    @classmethod
    def _drift_default(cls, data):
        # a pin already says what is right; comparing nodes on top of it is opt-in
        if isinstance(data, dict) and "drift" not in data:
            data = {**data, "drift": "off" if data.get("expect") is not None else "fail"}
        return data

    @field_validator("expect", mode="before")
    @classmethod
    def _text(cls, value):
        # a YAML pin like 2.23 or 550 arrives as a number; versions are compared as text
        if isinstance(value, bool):
            raise ValueError("expected a version string, got true/false")
        if isinstance(value, (int, float)):
            raise ValueError(f'quote the version: {value!r} is read as a number by YAML (write expect: "{value}")')
        if isinstance(value, list):
            if not value:
                raise ValueError("an empty list allows nothing; give at least one value or drop expect")
            for v in value:
                if not isinstance(v, str):
                    raise ValueError(f"quote every value: {v!r} is not a string")
        return value

    @property
    def allowed(self) -> tuple[str, ...]:
        if self.expect is None:
            return ()
        return (self.expect,) if isinstance(self.expect, str) else tuple(self.expect)

    @model_validator(mode="after")
    def _judges_something(self) -> PinOrDrift:
        if self.expect is None and self.drift == "off":
            raise ValueError("nothing to judge: give expect: (a pinned value) or drift: fail|warn")
        return self


def group_by_value(values: Mapping[str, str]) -> dict[str, tuple[str, ...]]:
    """{value: nodes having it}, largest group first (ties in first-seen order)."""
    groups: dict[str, list[str]] = defaultdict(list)
    for node, value in values.items():
        groups[value].append(node)
    return {v: tuple(n) for v, n in sorted(groups.items(), key=lambda kv: -len(kv[1]))}


def strict_majority(groups: Mapping[str, Sequence[str]], total: int | None = None) -> str | None:
    """The value more than half the nodes share, else None. `total` counts nodes that did not
    vote too (unreadable ones): a majority of the readable few is not a majority of the run."""
    total = max(total or 0, sum(len(n) for n in groups.values()))
    for value, nodes in groups.items():
        if 2 * len(nodes) > total:
            return value
    return None


DESCRIBE_MAX_GROUPS = 5  # a message names the largest groups, then counts the rest


def describe(groups: Mapping[str, Sequence[str]]) -> str:
    items = list(groups.items())
    text = ", ".join(f"{value} on {fold(nodes)}" for value, nodes in items[:DESCRIBE_MAX_GROUPS])
    if len(items) > DESCRIBE_MAX_GROUPS:
        rest = items[DESCRIBE_MAX_GROUPS:]
        text += f" and {len(rest)} more values on {sum(len(n) for _, n in rest)} nodes"
    return text


def gather(
    by_node: Mapping[str, object], read: Callable[[object], str], *, what: str, absent: str = "fail"
) -> tuple[dict[str, str], list[Grouped]]:
    """Each node's value via `read`; a node whose output cannot be read gets its own ERROR, a node
    without the thing gets its own FAIL, and neither takes part in the vote."""
    values: dict[str, str] = {}
    problems: list[Grouped] = []
    for node, out in by_node.items():
        try:
            values[node] = read(out)
        except Absent as e:
            status = Status.FAIL if absent == "fail" else Status.WARN
            problems.append(((node,), Verdict(status, str(e), observed={what: None})))
        except ParseError as e:
            problems.append(
                ((node,), Verdict(Status.ERROR, f"cannot read {e.tool} output: {e.reason}", excerpt=e.excerpt))
            )
        except Exception as e:  # a reader bug is this node's ERROR, not the run's crash
            problems.append(
                (
                    (node,),
                    Verdict(
                        Status.ERROR,
                        f"internal error reading {what}: {type(e).__name__}: {e}",
                        excerpt=excerpt(traceback.format_exc()),
                    ),
                )
            )
    return values, problems


def judge_values(
    values: Mapping[str, str], want: PinOrDrift, *, what: str, total: int | None = None
) -> Iterator[Grouped]:
    """Pinned values first (each node outside the allowed set fails), then drift among the rest.
    `total`: the nodes the judge saw, readable or not (the majority is of those)."""
    allowed = want.allowed
    groups = group_by_value(values)
    voting = dict(values)
    if allowed:
        for value, nodes in groups.items():
            if value not in allowed:
                for node in nodes:
                    voting.pop(node)
                yield nodes, _off_pin(what, value, nodes, allowed, groups)
    if not voting:
        return
    voters = group_by_value(voting)
    if len(allowed) == 1 or want.drift == "off":
        # a single pin is the reference, and with drift off any allowed value passes
        for value, nodes in voters.items():
            note = "pinned" if len(allowed) == 1 else "allowed"
            yield (
                nodes,
                Verdict(
                    Status.PASS,
                    f"{what} {value} ({note}; {_count(nodes)})",
                    observed={what: value},
                    expected={what: list(allowed)},
                ),
            )
        return
    reference = strict_majority(voters, total if not allowed else None)
    if reference is None:  # a tie is not something to guess about
        nodes = tuple(voting)
        unread = (total or 0) - len(values)
        note = f" ({_count_n(unread)} could not be read)" if unread > 0 else ""
        # with drift: warn the operator said disagreement only warns; a tie is disagreement too
        status = Status.ERROR if want.drift == "fail" else Status.WARN
        yield (
            nodes,
            Verdict(
                status,
                f"{what}: no majority among {describe(voters)}{note}; pin the right one with expect: in the playbook",
                observed={what: {v: fold(n) for v, n in voters.items()}},
            ),
        )
        return
    agree = voters[reference]
    status = Status.FAIL if want.drift == "fail" else Status.WARN
    for value, nodes in voters.items():
        if value == reference:
            yield (
                nodes,
                Verdict(
                    Status.PASS,
                    f"{what} {value} ({_agree(len(nodes), len(voting))})",
                    observed={what: value},
                    expected={what: reference},
                ),
            )
        else:
            yield (
                nodes,
                Verdict(
                    status,
                    f"{what} {value} on {fold(nodes)}, expected {reference} ({_count(agree)})",
                    observed={what: value},
                    expected={what: reference, "majority": len(agree)},
                ),
            )


def _off_pin(
    what: str, value: str, nodes: Sequence[str], allowed: Sequence[str], groups: Mapping[str, Sequence[str]]
) -> Verdict:
    if len(allowed) == 1:
        have = len(groups.get(allowed[0], ()))
        expected = (
            f"{allowed[0]} (pinned; {_count(groups.get(allowed[0], ()))})"
            if have
            else f"{allowed[0]} (pinned; no node has it)"
        )
    else:
        expected = "one of " + ", ".join(allowed) + " (allowed)"
    return Verdict(
        Status.FAIL,
        f"{what} {value} on {fold(nodes)}, expected {expected}",
        observed={what: value},
        expected={what: list(allowed)},
    )


def _count_n(n: int) -> str:
    return f"{n} node" if n == 1 else f"{n} nodes"


def _count(nodes: Sequence[str]) -> str:
    return f"{len(nodes)} node" if len(nodes) == 1 else f"{len(nodes)} nodes"


def _agree(n: int, total: int) -> str:
    if total == 1:
        return "the only node judged; nothing to compare with"
    return f"all {total} nodes agree" if n == total else f"majority: {n} of {total} nodes"
