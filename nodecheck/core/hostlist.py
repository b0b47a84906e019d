"""Host lists, the one place: "gpu[001-004,007]" <-> names, with ClusterShell, in Slurm syntax only.

fold() is how every report, message and log line writes a set of nodes; expand() is how text from
Slurm (scontrol, SLURM_JOB_NODELIST) becomes names; size_bound() refuses a typo before ClusterShell
materialises a billion names."""

from __future__ import annotations

import re
from collections.abc import Iterable

from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet, NodeSetException

from nodecheck.core.errors import ConfigError

# ClusterShell materialises every name of a hostlist, so a typo like gpu[1-100000000] costs
# gigabytes and minutes before anything runs. The largest GPU clusters are tens of thousands of
# nodes; a bigger hostlist (one entry, the whole inventory, or --nodes) is a mistake.
MAX_NODES = 100_000


def fold(nodes: Iterable[str]) -> str:
    """Node names as one folded hostlist: ["gpu1", "gpu2", "gpu4"] -> "gpu[1-2,4]"."""
    return str(NodeSet.fromlist(list(nodes)))


def nodeset(text: str) -> NodeSet:
    """Slurm hostlist syntax only: without RESOLVER_NOGROUP, ClusterShell reads `@name` as a group
    and resolves it by running the shell commands of the local groups.conf."""
    return NodeSet(text, resolver=RESOLVER_NOGROUP)


def expand(text: str) -> list[str]:
    """Slurm hostlist "node[1-4,7]" -> ["node1", ..., "node7"], sorted as ClusterShell sorts;
    ConfigError on text that is not a hostlist."""
    size = size_bound(text)
    if size > MAX_NODES:  # ClusterShell would materialise every name first
        raise ConfigError(
            f"hostlist {text!r} names {size:,} nodes, more than {MAX_NODES:,}", hint="check the ranges for a typo"
        )
    try:
        names = list(nodeset(text))
    except (NodeSetException, ValueError) as e:
        raise ConfigError(f"bad hostlist {text!r}: {e}", hint="Slurm hostlist syntax, e.g. gpu[001-008,010]") from None
    if not names:
        raise ConfigError(f"empty hostlist {text!r}", hint="name at least one node")
    bad = [n for n in names if n.startswith("@") or any(c.isspace() for c in n)]
    if bad:
        raise ConfigError(
            f"bad hostlist {text!r}: {bad[0]!r} is not a node name",
            hint="separate names with ',' ; node groups (@name) are not expanded",
        )
    return names


# a bracket group of a hostlist, and one of its ranges: "7", "001-128", "1-99/2"
_BRACKETS = re.compile(r"\[([^\[\]]*)\]")
_RANGE = re.compile(r"\s*(\d+)\s*(?:-\s*(\d+)\s*(?:/\s*(\d+)\s*)?)?")
_TERM_SEPARATORS = frozenset(",!&^")  # outside brackets: union and set operators
_HUGE = 10**15  # a bound for numbers too long to be a real range


def size_bound(text: str) -> int:
    """At most how many names a hostlist expands to, from its text, without expanding it.

    A guard, not a parser: in each term the sizes of its bracket groups multiply, the terms add
    up (an upper bound also for the ! & ^ operators), and anything else counts as one name,
    left for ClusterShell to accept or reject."""
    total = 0
    for term in _terms(text):
        size = 1
        for group in _BRACKETS.findall(term):
            size *= sum(_range_size(item) for item in group.split(","))
        total += size
    return total


def _terms(text: str) -> list[str]:
    """The text split at separators outside brackets, in one pass: a lookahead regex for "not inside
    brackets" rescans the rest of the text at every comma, quadratic in a long hostlist."""
    terms, start, inside = [], 0, False
    for i, c in enumerate(text):
        if c in "[]":
            inside = c == "["
        elif c in _TERM_SEPARATORS and not inside:
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def _range_size(item: str) -> int:
    match = _RANGE.fullmatch(item)
    if not match:
        return 1
    low, high, step = match.group(1), match.group(2) or match.group(1), match.group(3) or "1"
    if max(len(low), len(high), len(step)) > 15:  # int() of thousands of digits is refused
        return _HUGE
    return abs(int(high) - int(low)) // max(int(step), 1) + 1
