"""The human report: identical outcomes grouped under folded node lists, worst first, then the gate."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence

from tabulate import tabulate

from nodecheck.core.hostlist import fold
from nodecheck.core.model import CheckResult, Status, worst
from nodecheck.report import Report, exit_code_with, most_severe_first

REASON_MAX_CHARS = 300  # one readable line per unhealthy node
DETAIL_WIDTH = 100  # wrap long messages so the table fits a terminal
# What would drive the terminal instead of being read: C0 and C1 controls (ESC starts a CSI or OSC
# sequence, 0x9b is a one-byte CSI) and the bidirectional overrides that reorder what is shown. A live
# run's messages never hold them (tool output is escaped as it is read); a stored report.json given to
# `report show` may, so every table is printed with them escaped (the line breaks are the table's).
_TERMINAL_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def render(report: Report, problems: Sequence[str] = ()) -> str:
    """The table. `problems`: what went wrong around the run (its report not written, ...), each in
    words; the status line then gives the exit the command gives for them (exit_code_with)."""
    parts = [_header(report), _outcomes(report)]
    unhealthy = _unhealthy(report)
    if unhealthy:
        parts.append(unhealthy)
    parts.append(_footer(report, problems))
    return terminal_safe("\n\n".join(parts) + "\n")


def terminal_safe(text: str) -> str:
    """`text` with every character that would drive a terminal written as \\xHH or \\uHHHH."""
    return _TERMINAL_CONTROL.sub(
        lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}", text
    )


def _header(r: Report) -> str:
    return (
        f"nodecheck {r.nodecheck_version}  playbook {r.playbook}  {_nodes(len(r.nodes))}  "
        f"started {r.started:%Y-%m-%d %H:%M:%S}Z  took {(r.finished - r.started).total_seconds():.1f} s"
    )


def _outcomes(r: Report) -> str:
    """Rows of (nodes, status, check, message): a check that passed on a node is one row per node
    (its verdicts summarised); every non-passing verdict is its own row. Identical rows fold."""
    addresses = dict(r.nodes)
    groups: dict[tuple, list[str]] = defaultdict(list)
    for node in r.node_names:
        results = r.results_for(node)
        blocked = _one_reason(results)
        if blocked is not None:  # unreachable: one row, not one per check
            status, message = blocked
            groups[(status, f"all {len(_checks(results))} checks", template(message, node, addresses[node]))].append(
                node
            )
            continue
        by_check: dict[str, list[CheckResult]] = defaultdict(list)
        for res in results:
            by_check[res.check].append(res)
        for check, results in by_check.items():
            for key in _rows(node, addresses[node], check, results):
                groups[key].append(node)
    rows = sorted(groups.items(), key=lambda kv: (-kv[0][0].rank, kv[0][1], fold(kv[1])))
    table = [[fold(nodes), status.value, check, fill(msg, nodes, addresses)] for (status, check, msg), nodes in rows]
    return tabulate(
        table,
        headers=["nodes", "status", "check", "detail"],
        tablefmt="simple",
        maxcolwidths=[None, None, None, DETAIL_WIDTH],
    )


def _rows(node: str, address: str, check: str, results: list[CheckResult]) -> list[tuple]:
    statuses = [res.verdict.status for res in results]
    if worst(statuses) is Status.PASS:
        return [(Status.PASS, check, f"{len(results)} of {len(results)} pass")]
    # the node's own name and address are templated so that the same failure on many nodes folds
    return [
        (res.verdict.status, check, template(res.verdict.message, node, address))
        for res in results
        if res.verdict.status is not Status.PASS
    ]


def template(message: str, node: str, address: str) -> str:
    """Whole-word replacement only: node "n1" must not turn "n10" or "mlx5_n1" into a template."""
    for value, slot in ((address, "{address}"), (node, "{node}")):
        if value:
            message = re.sub(rf"(?<![\w.-]){re.escape(value)}(?![\w-]|\.\w)", slot, message)
    return message


def fill(text: str, nodes: list[str], addresses: dict) -> str:
    """A template's slots filled: with the node's own name and address for one node, else <node>."""
    if len(nodes) == 1:
        return text.replace("{address}", addresses[nodes[0]]).replace("{node}", nodes[0])
    return text.replace("{address}", "<address>").replace("{node}", "<node>")


def _checks(results: list[CheckResult]) -> list[str]:
    return list(dict.fromkeys(res.check for res in results))


def _one_reason(results: list[CheckResult]) -> tuple[Status, str] | None:
    """(status, message) when every result of a node is the same UNREACHABLE/SKIPPED verdict."""
    if len(results) < 2:
        return None
    first = results[0].verdict
    if first.status not in (Status.UNREACHABLE, Status.SKIPPED):
        return None
    if all(res.verdict.status is first.status and res.verdict.message == first.message for res in results):
        return first.status, first.message
    return None


def _unhealthy(r: Report) -> str:
    lines = [
        [node, r.node_status(node).value, node_reason(r.results_for(node))]
        for node in r.node_names
        if not r.node_status(node).healthy
    ]
    return "unhealthy nodes:\n" + tabulate(lines, tablefmt="plain") if lines else ""


def node_reason(results: list[CheckResult]) -> str:
    """An unhealthy node's one line (the table's "unhealthy nodes", report.html's top): every
    unhealthy verdict, most severe first (a FAIL is never cut for an ERROR before it), or the one
    verdict all its checks share (unreachable: one reason, not one per check); at most
    REASON_MAX_CHARS."""
    blocked = _one_reason(results)
    if blocked is not None:
        reasons = [f"all {len(_checks(results))} checks: {blocked[1]}"]
    else:
        unhealthy = most_severe_first(res for res in results if not res.verdict.status.healthy)
        reasons = [f"{res.check}: {res.verdict.message}" for res in unhealthy] or ["no check ran"]
    text = "; ".join(reasons)
    return text if len(text) <= REASON_MAX_CHARS else text[: REASON_MAX_CHARS - 1] + "…"


def _footer(r: Report, problems: Sequence[str] = ()) -> str:
    counts = ", ".join(f"{n} {s}" for s, n in r.summary().items())
    lines = [f"{_nodes(len(r.nodes))}: {counts}. {_status_line(r, problems)}"]
    if r.excluded:
        lines.append(f"Not checked: {fold(r.excluded)} (not selected by playbook {r.playbook}).")
    if not r.complete:
        why = r.incomplete_reason or "the run deadline was reached"
        lines.append(
            f"INCOMPLETE: {why} (deadline {r.deadline_s:g} s); probes were cut or skipped, results shown are partial."
        )
    return "\n".join(lines)


def _status_line(r: Report, problems: Sequence[str]) -> str:
    """The status: "Status PASS (exit 0).", or with problems the exit the command gives and why (the
    line a person reads last must never say exit 0 before the command exits 3)."""
    status, code, why = r.status.value.upper(), exit_code_with(r, problems), "; ".join(problems)
    if not problems:
        return f"Status {status} (exit {code})."
    if code != r.exit_code:
        return f"Status {status}, but exit {code}: {why}."
    return f"Status {status} (exit {code}); also: {why}."


def _nodes(n: int) -> str:
    return f"{n} node" if n == 1 else f"{n} nodes"
